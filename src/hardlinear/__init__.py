"""HardLinear: neural networks whose outputs satisfy hard linear constraints, and a harness to compare them."""

__version__ = "0.1.0"

__all__ = ["export", "load_run"]


def __getattr__(name: str):
    """``hardlinear.load_run`` and ``hardlinear.export`` (imported on first use: ``import hardlinear`` stays light)."""
    if name in __all__:
        from hardlinear import checkpoint

        return getattr(checkpoint, name)
    raise AttributeError(f"module 'hardlinear' has no attribute {name!r}")
