"""DC3's two layers (Donti, Rolnick, Kolter 2021): equality completion and gradient correction.

**Completion.** The network predicts the *partial* variables ``z = y_Z`` (``p = n - rank(G)`` of them); the
*dependent* ones follow from the equalities: ``y_D = G_RD^-1 (g_R - G_RZ z)``, where ``D`` are ``rank(G)``
columns and ``R`` as many rows of ``G`` chosen once, by column-pivoted QR (of ``G``, then of ``G_:,D'``), so
``G_RD`` is square and as well conditioned as a column subset can be. Rows outside ``R`` are linear
combinations of rows in ``R``; they hold whenever the instance is feasible (``g`` consistent).
For an input-dependent ``G(x)`` the same ``R, D`` (chosen at the box's midpoint) serve every input, with one
batched solve per call; set-up checks ``G_RD(x)`` stays nonsingular on sampled inputs and box vertices.
``partial_idx`` imposes the partial variables instead (DC3's own code draws them at random, redrawn until
``|det G_RD| >= 1e-4``); ``R`` is then chosen by pivoted QR as above.

**Why the choice matters.** The correction's step in ``z`` is ``lr * 2 (H P)' v`` with ``P = dy/dz``, which
contains ``-G_RD^-1 G_RZ``: the size of ``H P``, hence the step a given ``lr`` makes, depends on the partial
variables. On DC3's 50/50 QP, ``||H P||_2`` is 1905 with DC3's random columns and 58 with the pivoted ones, so
DC3's ``lr = 1e-7`` gives a step ~1000x smaller with the pivoted basis and corrects next to nothing.

**Correction.** Gradient steps with momentum on ``z`` of ``phi(z) = ||max(H y(z) - h, 0)||^2``; since the
completion is affine in ``z`` (``y = y_0(x) + P(x) z``), the gradient is ``2 (H P)' max(H y - h, 0)`` in
closed form, which autograd differentiates through when the steps are unrolled in training. Update (DC3's)::

    step_t = lr * grad phi(z_t) + momentum * step_{t-1};   z_{t+1} = z_t - step_t

The inequality residual is affine in ``z`` too, so a step updates it by ``H P dz`` rather than re-completing
``y``; the completion is applied once, to the final ``z``, so the equalities hold exactly whatever the steps.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import torch
from torch import nn

from hardlinear.constraints.family import ConstraintFamily, InputDependentFamily, lift
from hardlinear.runtime.torchscript import script

# A column (row) counts towards the rank when its pivot exceeds this fraction of the largest pivot.
RANK_TOL = 1e-10
# G_RD(x) is rejected when its condition number exceeds this on a checked input.
MAX_CONDITION = 1e10


def pivoted_basis(G: np.ndarray, rank_tol: float = RANK_TOL) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``R`` and columns ``D`` (each ``rank(G)`` long) with ``G[R][:, D]`` square and well conditioned.

    ``G: (m, n)`` dense float64. Column-pivoted QR orders the columns by how much each adds to the span of
    the ones before it; the first ``rank`` are ``D``. The same on ``G[:, D]'`` picks the rows.
    """
    if G.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, R_cols, perm_cols = sla.qr(G, pivoting=True, mode="economic")
    diag = np.abs(np.diag(R_cols))
    rank = int((diag > rank_tol * diag[0]).sum()) if diag[0] > 0 else 0
    D = np.sort(perm_cols[:rank])
    _, _, perm_rows = sla.qr(G[:, D].T, pivoting=True, mode="economic")
    R = np.sort(perm_rows[:rank])
    return R, D


def _dependent_from_partial(G: np.ndarray, partial: np.ndarray, rank: int, n: int) -> np.ndarray:
    """The dependent columns left by imposed partial ones; a ValueError unless they make ``G_RD`` square and
    nonsingular."""
    if len(np.unique(partial)) != len(partial) or (len(partial) and (partial.min() < 0 or partial.max() >= n)):
        raise ValueError(f"partial_idx must be distinct variable indices in [0, {n})")
    D = np.setdiff1d(np.arange(n), partial)
    if len(D) != rank:
        raise ValueError(f"partial_idx leaves {len(D)} dependent variables; rank(G) = {rank} are needed (n - rank = {n - rank} partial)")
    if rank and np.linalg.matrix_rank(G[:, D]) < rank:
        raise ValueError("partial_idx leaves dependent columns of G that are linearly dependent; choose other partial variables")
    return D


def row_max(t: torch.Tensor) -> torch.Tensor:
    """``(B, m) -> (B,)`` largest entry per row; 0 when ``m = 0``."""
    return t.amax(dim=1) if t.shape[1] else t.new_zeros(t.shape[0])


class EqualityCompletion(nn.Module):
    """``xi: (B, k), z: (B, p) -> y: (B, n)`` with ``G(x) y = g(x)``; ``z`` fills the partial columns.

    ``partial_idx`` (``Z``) and ``dependent_idx`` (``D``) index the family's variables; ``eq_rows`` (``R``) the
    equality rows that are solved. Everything is computed in the dtype of ``z`` (use float64 for exactness).
    """

    def __init__(
        self,
        family: ConstraintFamily,
        check_inputs: int = 256,
        generator: torch.Generator | None = None,
        rank_tol: float = RANK_TOL,
        partial_idx: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        if check_inputs < 0:
            raise ValueError(f"check_inputs must be >= 0; got {check_inputs}")
        self.family = family
        self.input_dependent = isinstance(family, InputDependentFamily)
        G_mid, _, _, _ = family.instance(family.box.mid)
        G_dense = np.asarray(G_mid.toarray(), dtype=np.float64)
        R, D = pivoted_basis(G_dense, rank_tol)
        if partial_idx is not None:
            D = _dependent_from_partial(G_dense, np.asarray(partial_idx), len(D), family.n)
        Z = np.setdiff1d(np.arange(family.n), D)
        if len(Z) == 0:
            raise ValueError(
                f"G has full column rank ({family.n}): the equalities fix y and there is nothing to predict; "
                "DC3 needs n > rank(G)"
            )
        self.n, self.n_partial = family.n, len(Z)
        self.register_buffer("eq_rows", torch.as_tensor(R))
        self.register_buffer("dependent_idx", torch.as_tensor(D))
        self.register_buffer("partial_idx", torch.as_tensor(Z))
        # y = cat([z, y_D])[:, inverse] puts every variable back at its own column.
        self.register_buffer("inverse", torch.as_tensor(np.argsort(np.concatenate([Z, D]))))
        if self.input_dependent:
            self._check_conditioning(check_inputs, generator)
        else:
            G = G_mid.toarray()
            # K = G_RD^-1 (r, r); KG = G_RD^-1 G_RZ (r, p); float64 buffers, cast on use.
            K, KG = np.zeros((0, 0)), np.zeros((0, len(Z)))
            if len(R):
                lu = sla.lu_factor(G[np.ix_(R, D)])
                K, KG = sla.lu_solve(lu, np.eye(len(R))), sla.lu_solve(lu, G[np.ix_(R, Z)])
            self.register_buffer("K", torch.as_tensor(K))
            self.register_buffer("KG", torch.as_tensor(KG))
            self.register_buffer("B_eq_R", torch.as_tensor(family.B_eq[R]))

    def _check_conditioning(self, count: int, generator: torch.Generator | None) -> None:
        box = self.family.box
        xi = torch.cat([box.vertices(limit=count, generator=generator), box.sample(count, generator=generator)])
        G_RD = self._split(xi.double())[0]
        cond = torch.linalg.cond(G_RD)
        worst = float(cond.max()) if len(cond) else 0.0
        if not np.isfinite(worst) or worst > MAX_CONDITION:
            raise ValueError(
                f"DC3 completion: G_RD(x) is (nearly) singular on the input box (condition {worst:.3g} > "
                f"{MAX_CONDITION:g}) with the columns chosen at the box's midpoint; a per-input basis is needed"
            )

    def _split(self, xi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Input-dependent case: ``G_RD(x): (B, r, r)`` and ``G_RZ(x): (B, r, p)``."""
        G = self.family.eq_lhs(xi)[:, self.eq_rows]
        return G[:, :, self.dependent_idx], G[:, :, self.partial_idx]

    def _assemble(self, z: torch.Tensor, y_dep: torch.Tensor) -> torch.Tensor:
        return torch.cat([z, y_dep], dim=1)[:, self.inverse]

    def forward(self, xi: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), z: (B, p) -> y: (B, n)``."""
        xi = xi.to(z.dtype)
        if self.input_dependent:
            G_RD, G_RZ = self._split(xi)
            g_R = self.family.eq_rhs(xi)[:, self.eq_rows]
            rhs = g_R - torch.einsum("brp,bp->br", G_RZ, z)
            y_dep = torch.linalg.solve(G_RD, rhs)
        else:
            g_R = lift(xi) @ self.B_eq_R.to(z.dtype).T
            y_dep = g_R @ self.K.to(z.dtype).T - z @ self.KG.to(z.dtype).T
        return self._assemble(z, y_dep)

    def jacobian(self, xi: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """``dy/dz``: ``(n, p)`` for a constant ``G``, ``(B, n, p)`` for ``G(x)``."""
        if self.input_dependent:
            G_RD, G_RZ = self._split(xi.to(dtype))
            dep = -torch.linalg.solve(G_RD, G_RZ)  # (B, r, p)
            eye = torch.eye(self.n_partial, dtype=dtype, device=xi.device).expand(dep.shape[0], -1, -1)
            return torch.cat([eye, dep], dim=1)[:, self.inverse]
        eye = torch.eye(self.n_partial, dtype=dtype, device=self.KG.device)
        return torch.cat([eye, -self.KG.to(dtype)], dim=0)[self.inverse]


class GradientCorrection(nn.Module):
    """DC3's correction: ``xi: (B, k), z: (B, p) -> (y: (B, n), steps: (B,))``.

    ``steps`` counts the gradient steps taken per instance (0 when the completed prediction was already
    within ``tol``). With ``early_stop`` an instance stops once its largest inequality violation
    ``max_i (H y - h)_i`` is ``<= tol``; without it every instance takes ``steps`` steps (training, unrolled).
    """

    def __init__(
        self,
        completion: EqualityCompletion,
        lr: float = 1e-4,
        momentum: float = 0.5,
        tol: float = 1e-4,
        max_iter: int = 300,
    ) -> None:
        super().__init__()
        if lr <= 0 or not 0.0 <= momentum < 1.0:
            raise ValueError(f"need lr > 0 and momentum in [0, 1); got lr={lr}, momentum={momentum}")
        if tol < 0 or max_iter < 0:
            raise ValueError(f"need tol >= 0 and max_iter >= 0; got tol={tol}, max_iter={max_iter}")
        self.completion = completion
        self.family = completion.family
        self.lr, self.momentum, self.tol, self.max_iter = lr, momentum, tol, max_iter
        self._HP: dict = {}

    def ineq_jacobian(self, xi: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """``d(H y(z) - h)/dz``: ``(m_ineq, p)`` for constant ``G, H``, else ``(B, m_ineq, p)``."""
        P = self.completion.jacobian(xi, dtype)
        if self.completion.input_dependent:
            return torch.einsum("bmn,bnp->bmp", self.family.ineq_lhs(xi.to(dtype)), P)
        key = (P.device, dtype)
        if key not in self._HP:
            self._HP[key] = self.family._t("H", P) @ P  # dense or sparse CSR times dense
        return self._HP[key]

    def forward(
        self, xi: torch.Tensor, z: torch.Tensor, steps: int | None = None, early_stop: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        steps = self.max_iter if steps is None else steps
        count = torch.zeros(z.shape[0], dtype=torch.long, device=z.device)
        if steps == 0:
            return self.completion(xi, z), count
        HP = self.ineq_jacobian(xi, z.dtype)
        batched = HP.dim() == 3
        # The residual is affine in z, so it is updated by HP @ dz per step instead of re-completing y.
        resid = self.family.ineq_resid(xi, self.completion(xi, z))
        exporting = torch.compiler.is_exporting()  # a torch.export program: every step (inactive rows do not move)
        if not batched and not torch.is_grad_enabled() and not exporting:  # inference: the loop, issued by TorchScript
            z, count = _CORRECT(z, resid, HP, self.lr, self.momentum, self.tol, steps, early_stop)
            return self.completion(xi, z), count
        velocity = torch.zeros_like(z)
        active = torch.ones(z.shape[0], dtype=torch.bool, device=z.device)
        for _ in range(steps):
            pos = resid.clamp(min=0.0)
            if early_stop:
                active = active & (row_max(pos) > self.tol)
                if not exporting and not bool(active.any()):
                    break
            grad = 2.0 * (torch.einsum("bm,bmp->bp", pos, HP) if batched else pos @ HP)
            velocity = self.lr * grad + self.momentum * velocity
            if early_stop:
                velocity = velocity * active.unsqueeze(1).to(z.dtype)
            z = z - velocity
            resid = resid - (torch.einsum("bmp,bp->bm", HP, velocity) if batched else velocity @ HP.T)
            count = count + active.long()
        return self.completion(xi, z), count


def _correct_loop(z: torch.Tensor, resid: torch.Tensor, HP: torch.Tensor, lr: float, momentum: float, tol: float,
                  steps: int, early_stop: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """:meth:`GradientCorrection.forward`'s loop for a constant ``H P``, op for op (the same floats), written so
    that TorchScript runs it: at batch 1 the ~13 small operations of a step cost their dispatch, not their
    arithmetic, and the interpreter issues them at about half Python's cost (issue 40, item 4)."""
    count = torch.zeros(z.shape[0], dtype=torch.long, device=z.device)
    velocity = torch.zeros_like(z)
    active = torch.ones(z.shape[0], dtype=torch.bool, device=z.device)
    for _ in range(steps):
        pos = resid.clamp(min=0.0)
        if early_stop:
            worst = pos.amax(dim=1) if pos.shape[1] > 0 else torch.zeros_like(active, dtype=pos.dtype)
            active = active & (worst > tol)
            if not bool(active.any()):
                break
        grad = 2.0 * (pos @ HP)
        velocity = lr * grad + momentum * velocity
        if early_stop:
            velocity = velocity * active.unsqueeze(1).to(z.dtype)
        z = z - velocity
        resid = resid - velocity @ HP.T
        count = count + active.long()
    return z, count


_CORRECT = script(_correct_loop, "DC3's correction")
