"""EAPM: APM with the extrapolated step of Bauschke, Combettes & Kruk (2006).

Same network and training as :class:`~hardlinear.methods.apm.APM`; each iteration moves from ``x`` (in the
equality set ``V``) to ``x + relaxation * L * (P_V P_C x - x)`` with ``L = ||P_C x - x||^2 /
||P_V P_C x - x||^2`` clipped to ``[1, max_extrapolation]`` (the exact step and why it is safe are in
:mod:`hardlinear.layers.peers.apm`). Stops at the same tolerance and iteration limit as APM.
"""

from __future__ import annotations

from hardlinear.methods.apm import APM


class EAPM(APM):
    name = "eapm"
    extrapolate = True

    def __init__(
        self,
        name: str = "eapm",
        penalty: float = 0.0,
        norm: str = "l2",
        eq_fraction: float = 0.5,
        tol: float = 1e-4,
        max_iter: int = 300,
        train_iter: int = 300,
        train_dtype: str = "float32",
        relaxation: float = 1.0,
        max_extrapolation: float = 1e4,
        layer_dtype: str = "float64",
        fit: str = "objective",
    ) -> None:
        super().__init__(
            name=name,
            penalty=penalty,
            norm=norm,
            eq_fraction=eq_fraction,
            tol=tol,
            max_iter=max_iter,
            train_iter=train_iter,
            train_dtype=train_dtype,
            layer_dtype=layer_dtype,
            fit=fit,
        )
        if not 0.0 < relaxation < 2.0:
            raise ValueError(f"relaxation must be in (0, 2); got {relaxation}")
        if max_extrapolation < 1.0:
            raise ValueError(f"max_extrapolation must be >= 1; got {max_extrapolation}")
        self.relaxation, self.max_extrapolation = float(relaxation), float(max_extrapolation)

    def _layer_options(self) -> dict:
        return {"relaxation": self.relaxation, "max_extrapolation": self.max_extrapolation}
