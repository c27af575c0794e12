"""The harness: run.py's side. Config schemas and validation, one run, sweeps, loggers, the results store,
checkpoints and re-evaluation. The only wing (with :mod:`hardlinear.reporting`) that imports Hydra, OmegaConf
or pandas; the library below it takes typed arguments."""
