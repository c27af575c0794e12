"""Methods: one module per method, all behind :class:`hardlinear.methods.base.Method`."""

from hardlinear.methods.base import Context, Method, Prediction

__all__ = ["Context", "Method", "Prediction"]
