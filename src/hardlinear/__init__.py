"""HardLinear: neural networks whose outputs satisfy hard linear constraints, and a harness to compare them."""

__version__ = "0.1.0"
