"""Training: the task network, the trainer loop, losses."""
