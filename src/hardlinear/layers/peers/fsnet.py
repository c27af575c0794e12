"""FSNet's feasibility-seeking step (Nguyen and Donti, "FSNet: feasibility-seeking neural network for constrained
optimization with guarantees", NeurIPS 2025), written from its paper and the math of its code: batched L-BFGS on
the squared constraint violation, started at the network's output.

The function minimised is one scalar for the whole batch,

    phi(Y) = scale * mean_b ( ||G y_b - g_b||^2 + ||(H y_b - h_b)^+||^2 [+ ||(lo - y_b)^+||^2 + ||(y_b - hi)^+||^2] ),

(the bracket where the network's output has a box). L-BFGS keeps ``memory`` pairs ``(s, y)`` per instance and forms
its direction by the two-loop recursion with the initial scaling ``gamma = s'y / y'y`` of the newest pair
(``rho = 1 / (s'y + 1e-10)``); the first direction is ``-0.1 grad``. One Armijo backtracking line search serves the
whole batch: from step 1, halve up to ``max_ls`` times until ``phi(Y + t D) <= phi(Y) + c t <grad, D>`` (the last
halved step is taken if none passes). It stops once ``phi / scale < val_tol`` or every instance's gradient norm is
below ``grad_tol``, or after ``max_iter`` iterations.

Consequences worth knowing: the step size and the stopping test are shared, so an instance's output depends on the
other instances of its batch; feasibility is reached only to ``val_tol`` (a mean squared violation), never exactly.

Training (``unrolled`` iterations of ``max_iter``): the first ``unrolled`` iterations are differentiated through
(gradients of ``phi`` with ``create_graph``, the history included); the rest run without a graph and are joined
by a straight-through term, ``y_diff + (y_final - y_diff).detach()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from hardlinear.runtime.torchscript import script

RHO_EPS = 1e-10


@dataclass(frozen=True)
class LBFGSSettings:
    """FSNet's L-BFGS constants (its ``LBFGSConfig`` defaults: c 1e-4, shrink 0.5, 10 line-search halvings,
    gradient tolerance 1e-6; its config: memory 30, 50 iterations, scale 1000)."""

    memory: int = 30
    max_iter: int = 50
    scale: float = 1000.0
    grad_tol: float = 1e-6
    c: float = 1e-4
    shrink: float = 0.5
    max_ls: int = 10

    def __post_init__(self) -> None:
        if self.memory < 1 or self.max_iter < 0 or self.max_ls < 0:
            raise ValueError(f"L-BFGS needs memory >= 1, max_iter >= 0, max_ls >= 0; got {self.memory}, {self.max_iter}, {self.max_ls}")
        if not self.scale > 0 or not 0 < self.shrink < 1 or not 0 < self.c < 1:
            raise ValueError(f"L-BFGS needs scale > 0, shrink and c in (0, 1); got {self.scale}, {self.shrink}, {self.c}")


def _direction(g: torch.Tensor, S: list[torch.Tensor], Y: list[torch.Tensor]) -> torch.Tensor:
    """``-H g`` by the two-loop recursion over the pairs (oldest first), per instance."""
    if not S:
        return -0.1 * g
    rho = [1.0 / ((s * y).sum(dim=1, keepdim=True) + RHO_EPS) for s, y in zip(S, Y)]
    q = g
    alphas = []
    for s, y, r in zip(reversed(S), reversed(Y), reversed(rho)):
        a = r * (s * q).sum(dim=1, keepdim=True)
        alphas.append(a)
        q = q - a * y
    gamma = (S[-1] * Y[-1]).sum(dim=1, keepdim=True) / ((Y[-1] * Y[-1]).sum(dim=1, keepdim=True) + RHO_EPS)
    r_vec = gamma * q
    for s, y, r, a in zip(S, Y, rho, reversed(alphas)):
        b = r * (y * r_vec).sum(dim=1, keepdim=True)
        r_vec = r_vec + s * (a - b)
    return -r_vec


class LBFGSState:
    """The iterate, its value and gradient, and the history: what the untaped tail continues from."""

    def __init__(self, y: torch.Tensor, f: torch.Tensor, g: torch.Tensor) -> None:
        self.y, self.f, self.g = y, f, g
        self.S: list[torch.Tensor] = []
        self.Y: list[torch.Tensor] = []
        self.iterations = 0
        self.line_search_evaluations = 0  # of phi, by the Armijo searches (the floor of benchmarks/floors.py reads it)

    def detach(self) -> LBFGSState:
        out = LBFGSState(self.y.detach(), self.f.detach(), self.g.detach())
        out.S, out.Y = [s.detach() for s in self.S], [y.detach() for y in self.Y]
        out.iterations, out.line_search_evaluations = self.iterations, self.line_search_evaluations
        return out


def lbfgs_feasibility(
    rows: Callable[[torch.Tensor], torch.Tensor],
    y0: torch.Tensor,
    settings: LBFGSSettings,
    val_tol: float,
    iterations: int,
    differentiable: bool = False,
    state: LBFGSState | None = None,
) -> LBFGSState:
    """Run up to ``iterations`` L-BFGS iterations on ``phi = scale * mean(rows(y))`` from ``y0`` (or ``state``).

    ``rows: (B, n) -> (B,)`` the squared violation of each instance. ``differentiable``: gradients of ``phi`` are
    taken with ``create_graph`` so that the result is differentiable with respect to ``y0``.
    """
    with torch.enable_grad():
        if state is None:
            y = y0 if differentiable else y0.detach()
            if not y.requires_grad:
                y = y.requires_grad_(True) if not differentiable else y.clone().requires_grad_(True)
            f = settings.scale * rows(y).mean()
            (g,) = torch.autograd.grad(f, y, create_graph=differentiable)
            state = LBFGSState(y, f, g)
        elif not differentiable:
            state = state.detach()
        for _ in range(iterations):
            y, f, g = state.y, state.f, state.g
            if f.item() / settings.scale < val_tol or bool((g.detach().norm(dim=1) < settings.grad_tol).all()):
                break
            d = _direction(g if differentiable else g.detach(), state.S, state.Y)
            step, evaluations = _line_search(rows, y.detach(), d.detach(), g.detach(), f.detach(), settings)
            state.line_search_evaluations += evaluations
            y_next = y + step * d if differentiable else (y.detach() + step * d.detach()).requires_grad_(True)
            f_next = settings.scale * rows(y_next).mean()
            (g_next,) = torch.autograd.grad(f_next, y_next, create_graph=differentiable)
            pair_s, pair_y = y_next - y, g_next - g
            if not differentiable:
                pair_s, pair_y, f_next, g_next = pair_s.detach(), pair_y.detach(), f_next.detach(), g_next.detach()
            state.S.append(pair_s)
            state.Y.append(pair_y)
            if len(state.S) > settings.memory:
                state.S.pop(0)
                state.Y.pop(0)
            state.y, state.f, state.g = y_next, f_next, g_next
            state.iterations += 1
    if not differentiable:
        state.y = state.y.detach()
    return state


def _line_search(rows, y, d, g, f, settings: LBFGSSettings) -> tuple[float, int]:
    """One Armijo backtracking step size for the whole batch (the last halved step if none passes), and how
    many times it evaluated ``phi``."""
    step, evaluations = 1.0, 0
    slope = float((g * d).sum())
    with torch.no_grad():
        for _ in range(settings.max_ls):
            evaluations += 1
            if float(settings.scale * rows(y + step * d).mean()) <= float(f) + settings.c * step * slope:
                break
            step *= settings.shrink
    return step, evaluations


def squared_violation(eq_resid: torch.Tensor, ineq_resid: torch.Tensor) -> torch.Tensor:
    """``(B, m_eq), (B, m) -> (B,)``: ``||eq||^2 + ||ineq^+||^2`` (FSNet's squared residual norms)."""
    return eq_resid.square().sum(dim=1) + torch.relu(ineq_resid).square().sum(dim=1)


# --- inference for constant rows: the same iteration with the gradient in closed form, under TorchScript --------
def _phi(y: torch.Tensor, G_T: torch.Tensor, g: torch.Tensor, H_T: torch.Tensor, h: torch.Tensor, box: float,
         scale: float) -> torch.Tensor:
    """``phi = scale mean_b rows(y)`` alone (the line search's evaluations need no gradient)."""
    rows = (y @ G_T - g).square().sum(dim=1) + torch.relu(y @ H_T - h).square().sum(dim=1)
    if box > 0:
        rows = rows + torch.relu(y.abs() - box).square().sum(dim=1)
    return scale * rows.mean()


def _phi_and_grad(y: torch.Tensor, G_T: torch.Tensor, g: torch.Tensor, H_T: torch.Tensor, h: torch.Tensor,
                  box: float, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``phi = scale mean_b rows(y)`` and its gradient, ``(2 scale / B) (G' r_eq + H' r_ineq^+ + sign(y) (|y| - b)^+)``
    (``box <= 0``: no box term): what autograd gives, written out."""
    r_eq = y @ G_T - g
    r_in = torch.relu(y @ H_T - h)
    rows = r_eq.square().sum(dim=1) + r_in.square().sum(dim=1)
    grad = r_eq @ G_T.T + r_in @ H_T.T
    if box > 0:
        out = torch.relu(y.abs() - box)
        rows = rows + out.square().sum(dim=1)
        grad = grad + torch.sign(y) * out
    B = float(y.shape[0])
    return scale * rows.mean(), (2.0 * scale / B) * grad


def _rowdot(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``(B, n), (B, n) -> (B, 1)``: the row-wise dot product as one batched product."""
    return torch.bmm(u.unsqueeze(1), v.unsqueeze(2)).squeeze(2)


def _lbfgs_linear_loop(y: torch.Tensor, G_T: torch.Tensor, g: torch.Tensor, H_T: torch.Tensor, h: torch.Tensor,
                       box: float, memory: int, max_iter: int, scale: float, grad_tol: float, c: float, shrink: float,
                       max_ls: int, val_tol: float, rho_eps: float) -> tuple[torch.Tensor, int, int]:
    """:func:`lbfgs_feasibility` without a graph, for ``rows(y) = ||G y - g||^2 + ||(H y - h)^+||^2 [+ box]``: the
    same iteration, stopping tests, two-loop recursion and Armijo search, step for step. Returns ``(y, iterations,
    line-search evaluations)``."""
    f, grad = _phi_and_grad(y, G_T, g, H_T, h, box, scale)
    S: list[torch.Tensor] = []
    Y: list[torch.Tensor] = []
    rho: list[torch.Tensor] = []  # 1 / (s'y + eps) of each pair, computed once when the pair is stored
    iterations, evaluations = 0, 0
    for _ in range(max_iter):
        if f.item() / scale < val_tol or bool((torch.linalg.vector_norm(grad, dim=1) < grad_tol).all()):
            break
        if len(S) == 0:
            d = -0.1 * grad
        else:
            # The two-loop recursion, each step one batched dot and one fused multiply-add (no (B, n) temporaries)
            q = grad
            alphas: list[torch.Tensor] = []
            for i in range(len(S) - 1, -1, -1):
                a = rho[i] * _rowdot(S[i], q)
                alphas.append(a)
                q = torch.addcmul(q, a, Y[i], value=-1.0)
            gamma = _rowdot(S[-1], Y[-1]) / (_rowdot(Y[-1], Y[-1]) + rho_eps)
            r_vec = gamma * q
            for i in range(len(S)):
                b = rho[i] * _rowdot(Y[i], r_vec)
                r_vec = torch.addcmul(r_vec, S[i], alphas[len(S) - 1 - i] - b)
            d = -r_vec
        step = 1.0
        slope = float((grad * d).sum())
        f0 = float(f)
        for _ in range(max_ls):
            evaluations += 1
            f_try = _phi(y + step * d, G_T, g, H_T, h, box, scale)
            if float(f_try) <= f0 + c * step * slope:
                break
            step *= shrink
        y_next = y + step * d
        f_next, g_next = _phi_and_grad(y_next, G_T, g, H_T, h, box, scale)
        s_new, y_new = y_next - y, g_next - grad
        S.append(s_new)
        Y.append(y_new)
        rho.append(1.0 / (_rowdot(s_new, y_new) + rho_eps))
        if len(S) > memory:
            S.pop(0)
            Y.pop(0)
            rho.pop(0)
        y, f, grad = y_next, f_next, g_next
        iterations += 1
    return y, iterations, evaluations


_LBFGS_LINEAR = script(_lbfgs_linear_loop, "FSNet's L-BFGS")


def lbfgs_linear(y0: torch.Tensor, G_T: torch.Tensor, g: torch.Tensor, H_T: torch.Tensor, h: torch.Tensor,
                 box: float | None, settings: LBFGSSettings, val_tol: float, iterations: int) -> LBFGSState:
    """Inference (no graph) for constant rows ``G, H`` (passed transposed): :func:`lbfgs_feasibility`'s result from
    the closed-form gradient under TorchScript (issue 40: one scripted loop instead of autograd and a Python
    recursion per iteration). The history is not returned (nothing continues from it at inference)."""
    s = settings
    y, its, evals = _LBFGS_LINEAR(y0.detach(), G_T, g, H_T, h, -1.0 if box is None else float(box), s.memory,
                                  iterations, s.scale, s.grad_tol, s.c, s.shrink, s.max_ls, float(val_tol), RHO_EPS)
    state = LBFGSState(y, torch.zeros((), dtype=y.dtype), torch.zeros_like(y))
    state.iterations, state.line_search_evaluations = int(its), int(evals)
    return state
