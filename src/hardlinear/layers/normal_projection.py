"""The projection onto ``null(G)`` for training at large ``n``: ``y - G' (G G')^{-1} G y`` by a sparse Cholesky.

Why: the null form ``(y N) N'`` of :class:`~hardlinear.layers.equality.EqualityProjector` costs ``4 B n d`` flops a
training step (two products forward, two backward). At case6470_rte (``n`` = 51,900, ``d`` = 760, batch 64) that is
~0.5 s of a 0.78 s step, one thread. ``G G'`` (51,140 rows, 0.75 M nonzeros there) has a supernodal Cholesky factor
(CHOLMOD, through ``cholespy``) whose 64-column solve takes ~0.07 s, so the projection and its gradient take
~0.1 s each. The projector is symmetric, so the backward pass is the same map applied to the incoming gradient.

It is the same matrix as ``N N'`` (the orthogonal projector onto ``null(G)`` is unique); the two differ by
rounding: 2.6e-9 relative at case6470_rte. The normal equations square ``G``'s condition number, so its equality
residual is ~100x the basis's. Hence it is used where a gradient is needed only; outputs that are reported
(evaluation and fused inference run without gradients) keep the orthonormal basis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch


def cholesky_available() -> bool:
    """Whether ``cholespy`` (CHOLMOD) imports here."""
    try:
        import cholespy  # noqa: F401
    except ImportError:
        return False
    return True


class NormalProjection:
    """``y -> y - G' (G G')^{-1} G y`` on CPU float64 tensors ``(B, n)``, differentiable.

    The factor is built on first use and not pickled or copied (a copy rebuilds it): ``deepcopy`` of a method holding
    it must not fail, and the factor is cheap to rebuild (0.25 s at case6470_rte).
    """

    def __init__(self, G: sp.csr_matrix) -> None:
        self.G = sp.csr_matrix(G, dtype=np.float64)
        self.GT = self.G.T.tocsr()
        self._solver: Any = None

    def __getstate__(self) -> dict:
        return {"G": self.G, "GT": self.GT, "_solver": None}

    def _factor(self) -> Any:
        if self._solver is None:
            from cholespy import CholeskySolverD, MatrixType

            M = (self.G @ self.GT).tocoo()
            self._solver = CholeskySolverD(
                M.shape[0],
                torch.as_tensor(M.row, dtype=torch.int32),
                torch.as_tensor(M.col, dtype=torch.int32),
                torch.as_tensor(M.data, dtype=torch.float64),
                MatrixType.COO,
            )
        return self._solver

    def apply(self, y: torch.Tensor) -> torch.Tensor:
        """The projection of the rows of ``y``, without autograd."""
        rhs = torch.from_numpy(np.ascontiguousarray(self.G @ y.detach().numpy().T))
        lam = torch.zeros_like(rhs)
        self._factor().solve(rhs, lam)
        return y - torch.from_numpy(np.asarray(self.GT @ lam.numpy())).T

    def __call__(self, y: torch.Tensor) -> torch.Tensor:
        return _Project.apply(y, self)


class _Project(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, op: NormalProjection) -> torch.Tensor:
        ctx.op = op
        return op.apply(y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return ctx.op.apply(grad.contiguous()), None
