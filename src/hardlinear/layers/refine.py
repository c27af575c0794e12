"""Refinements of a task output before the feasibility layer: differentiable maps that bring it near ``C(x)``.

Why: the blend (:mod:`hardlinear.layers.feasibility`) makes *any* task output exactly feasible, so whatever runs
before it cannot break the guarantee; it can only leave ``alpha`` less to correct. A refinement that lands close
to the feasible set's boundary where the optimum sits (a projection) lets the network aim past the boundary
and still have its output put on it, the way projection layers (Pinet, HardNet) train; the blend then corrects
only the refinement's residual, exactly.

* ``none``: the identity.
* ``dr``: ``steps`` Douglas-Rachford iterations of the Euclidean projection onto ``C(x)`` (Pinet's splitting:
  a slack ``t = M u`` lifts the inequalities to a box, DR alternates the projection onto the lifted equalities
  with the prox of the distance and the box), unrolled for the gradient. Written in the null-space coordinates
  of the equalities (``y = c(x) + N u``, :mod:`hardlinear.layers.peers.reduced`): the equalities hold by
  construction, the lifted subspace ``{t = M u}`` is constant, its projector one ``d x d`` matrix, and the rows
  of ``M`` are scaled to unit norm (the same polytope; DR's speed depends on that scaling, which Pinet gets from
  Ruiz equilibration). Iteration (``z = (u, t)``, governing sequence ``w``, step ``sigma``, relaxation ``omega``):

      z_k = Pi_E(w_k);   r = 2 z_k - w_k;   p_u = (2 sigma u_raw + r_u) / (1 + 2 sigma),  p_t = min(r_t, s(x));
      w_{k+1} = w_k + omega (p - z_k);      output u = Pi_E(w_K)_u

  started at ``w_0 = (u_raw, M u_raw)``, run as :mod:`hardlinear.layers.dr_loop`'s fused loop (``Pi_E`` one dense
  ``(d + m)^2`` product where that is cheap, else the graph's two thin products). After ``K`` steps the inequalities hold only approximately; that
  residual is what the blend then removes. The box is shrunk by ``margin (1 + |s_i|)`` (in the unit-row
  scaling; default 1e-9): a converged point on a face would otherwise sit on the bound to rounding, the blend
  (which moves only rows its own evaluation sees violated) would leave it, and another evaluation order of
  ``H y - h`` could read +1e-16 there. The layer projects and blends the refined output in float64 whatever its dtype (a refined output can stay large
  where ``C(x)`` is unbounded: projected in float32, its rounding reached the equalities; issue 40).
* ``pinet``: the same splitting as Pinet runs it, by :class:`~hardlinear.layers.douglas_rachford.DouglasRachfordProjection`
  (issue 28's Pinet module): in the full space ``z = (y, H y)``, Ruiz-equilibrated (Pinet's DC3 settings: 25
  iterations, tol 1e-3), started at ``0``, with Pinet's implicit backward pass (BiCGSTAB, 25 iterations) instead
  of unrolling. The same ``margin`` on the inequality bounds.
* ``hardnet``: HardNet-Aff's closed-form correction (:mod:`hardlinear.layers.peers.hardnet`): one step, only
  where the inequality rows on the free variables have full row rank. Its corrected rows sit on their bounds
  (no margin), so a float64 evaluation may read them ~1e-16 over (the rounding of the evaluation itself).

* ``problem``: the problem's own exact map onto (a part of) ``C(x)``, where it has one in closed form
  (``Problem.exact_refinement``; :class:`ProblemRefinement`). ``problem=ed``: the dispatch's Euclidean projection
  onto the generator limits and the power balance, with the smallest thermal slack, so each generator keeps its
  own limit where one ``alpha`` would pull them all inwards; with ``geometry="entropic"`` (``method.refine_geometry``)
  the Bregman projection under the generators' Fermi-Dirac entropy instead, smooth and strictly inside the limits.

Applicability: ``dr`` on any family: with a constant ``G`` and ``H`` in the null-space coordinates above; with
an input-dependent ``G(x)`` or ``H(x)`` (the portfolio) in the full space with a projector formed per input
(:class:`InputDependentDouglasRachford`, ``n <= 512``). ``pinet`` and ``hardnet`` need constant rows (else
:class:`NotApplicable` naming the reason).
"""

from __future__ import annotations

import inspect

import numpy as np
import torch
from torch import nn

from hardlinear.constraints.family import ConstraintFamily, InputDependentFamily
from hardlinear.errors import NotApplicable
from hardlinear.layers.dr_loop import AffineProjection, ProxData, iterate
from hardlinear.layers.equality import Float64Constants, constant_lhs
from hardlinear.layers.peers.reduced import ReducedInequalities

REFINEMENTS = ("none", "dr", "pinet", "hardnet", "problem")
ZERO_ROW_RTOL = 1e-10
"""A row of ``M = H N`` shorter than this times ``|H_i|`` is a zero row (``refine=dr``): rounding, not a direction."""


class _DouglasRachfordSteps(nn.Module):
    """What the two ``refine=dr`` modules share: their options, ``forward`` (the last snapshot) and the iteration
    itself (module docstring), written once over the coordinates each module supplies."""

    def __init__(self, steps: int, eval_steps: int | None, sigma: float, omega: float, margin: float) -> None:
        super().__init__()
        if not margin >= 0:
            raise ValueError(f"margin must be >= 0; got {margin}")
        if steps < 1 or (eval_steps is not None and eval_steps < 1):
            raise ValueError(f"refine_steps must be >= 1; got {steps} (eval {eval_steps})")
        if not sigma > 0 or not 0 < omega < 2:
            raise ValueError(f"Douglas-Rachford needs sigma > 0 and 0 < omega < 2; got sigma={sigma}, omega={omega}")
        self.steps, self.eval_steps = int(steps), int(eval_steps if eval_steps is not None else steps)
        self.sigma, self.omega, self.margin = float(sigma), float(omega), float(margin)

    def extra_repr(self) -> str:
        return f"steps={self.steps}, eval_steps={self.eval_steps}, sigma={self.sigma}, omega={self.omega}"

    def forward(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.snapshots(xi, y)[-1]

    def snapshots(self, xi: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        """The outputs after ``steps`` iterations and, in eval mode when ``eval_steps`` is more, after ``eval_steps``
        too (one run of the iteration; the last is ``forward``'s). ``refine_pick=objective`` chooses among them."""
        raise NotImplementedError

    def _marks(self) -> list[int]:
        """Step counts whose iterate is returned: ``steps`` in training; in eval mode ``eval_steps``, preceded by
        ``steps`` when fewer (the output the network was trained on)."""
        if self.training or self.eval_steps == self.steps:
            return [self.steps if self.training else self.eval_steps]
        return sorted({self.steps, self.eval_steps})

    def _iterate(self, u_raw: torch.Tensor, rows, project, bound: torch.Tensor, finish) -> list[torch.Tensor]:
        """DR from ``w_0 = (u_raw, rows(u_raw))``: ``project(wu, wt)`` is ``Pi_E(w)``'s ``u``-part, ``rows(u)`` the
        lifted ``t = M u``, ``bound`` the box on ``t``; ``finish(u)`` maps ``Pi_E(w_k)_u`` to the output."""
        a, b = 2.0 * self.sigma / (1.0 + 2.0 * self.sigma), 1.0 / (1.0 + 2.0 * self.sigma)
        wu, wt = u_raw, rows(u_raw)
        marks, out = self._marks(), []
        for k in range(1, marks[-1] + 1):
            zu = project(wu, wt)
            zt = rows(zu)
            pu = a * u_raw + b * (2.0 * zu - wu)
            pt = torch.minimum(2.0 * zt - wt, bound)
            wu = wu + self.omega * (pu - zu)
            wt = wt + self.omega * (pt - zt)
            if k in marks:
                out.append(finish(project(wu, wt)))
        return out


class DouglasRachford(_DouglasRachfordSteps):
    """``forward(xi: (B, k), y: (B, n)) -> (B, n)``: ``steps`` DR iterations towards the projection of ``y`` onto
    ``C(x)`` (module docstring), satisfying the equalities up to rounding, the inequalities approximately.

    Args:
        family: a family with constant ``G`` and ``H``.
        steps: iterations in training mode; ``eval_steps`` (default: the same) in eval mode.
        sigma, omega: DR's step (the prox weight of the distance) and relaxation (Pinet's default 1.7).
        margin: the box ``t <= s`` is shrunk by ``margin (1 + |s|)`` (module docstring).
    """

    def __init__(
        self, family: ConstraintFamily, steps: int, eval_steps: int | None = None, sigma: float = 1.0,
        omega: float = 1.7, margin: float = 1e-9,
    ) -> None:
        super().__init__(steps, eval_steps, sigma, omega, margin)
        self.reduced = ReducedInequalities(family, "refine=dr")
        if self.reduced.input_dependent:
            raise NotApplicable(
                "refine=dr needs constant inequality rows: with H(x) the lifted subspace {t = H(x) N u} and its "
                "projector change with every input (InputDependentDouglasRachford forms it per input)"
            )
        M = self.reduced.consts.M.numpy()
        norms = np.linalg.norm(M, axis=1)
        # A row of H orthogonal to null(G) is constant on the affine set: its M = H N is zero up to the SVD's
        # rounding (~1e-16 |H_i|, a different tiny row on another BLAS or thread count). Scaled to unit norm, that
        # rounding became a direction, and the refined outputs depended on the machine (issue 40: dcopf_57 moved
        # by 0.11). Such rows are zero rows.
        H_norms = np.linalg.norm(constant_lhs(family, "H"), axis=1) if family.m_ineq else norms
        live = norms > ZERO_ROW_RTOL * np.maximum(H_norms, np.finfo(float).tiny)
        scale = np.where(live, 1.0 / np.where(live, norms, 1.0), 0.0)
        Ms = M * scale[:, None]  # unit rows: the same polytope, better conditioned lifting
        d, m = Ms.shape[1], Ms.shape[0]
        K = np.linalg.inv(np.eye(d) + Ms.T @ Ms)  # Pi_E(a, b)_u = K (a + Ms' b)
        K = 0.5 * (K + K.T)
        K_stack = np.vstack([K, Ms @ K])  # (d + m, d): u = w K_stack for the state w = (a, b)
        # One dense (d + m)^2 product an iteration, or the graph's two thin ones (d^2 + 2 d m multiply-adds):
        # the dense one where it costs at most half again as much (one dispatch fewer: DC3's 50 + 50), the thin
        # ones where m dominates (dcopf_118: 18 + 768, 35x fewer).
        self.dense = (d + m) ** 2 <= 1.5 * (d * d + 2 * d * m)
        arrays = {"row_scale": scale, "K_stack": K_stack, "Ms_T": Ms.T}
        if self.dense:
            P = K_stack @ np.hstack([np.eye(d), Ms.T])
            arrays["P"] = 0.5 * (P + P.T)
        self.consts = Float64Constants(**arrays)
        self._graphs: dict = {}  # CUDA graphs of the no-gradient loop (hardlinear.layers.dr_loop)

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001 - torch's own signature
        self._graphs.clear()
        return super()._apply(fn, recurse)

    def projection(self, like: torch.Tensor) -> AffineProjection:
        """``Pi_E`` of the lifted subspace ``{t = Ms u}`` in ``like``'s dtype and device."""
        if self.dense:
            return AffineProjection(P=self.consts.get(("P",), like)[0])
        K_stack, Ms_T = self.consts.get(("K_stack", "Ms_T"), like)
        return AffineProjection(K=K_stack, M_T=Ms_T)

    def snapshots(self, xi: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        red = self.reduced
        c = red.particular(xi, y)
        (N,) = red.consts.get(("N",), y)
        row_scale, Ms_T = self.consts.get(("row_scale", "Ms_T"), y)
        bound = red.slack(xi, c) * row_scale  # s(x) in the scaled rows: t <= bound
        bound = bound - self.margin * (1.0 + bound.abs())
        u_raw = (y - c) @ N
        B, d = u_raw.shape
        a, b = 2.0 * self.sigma / (1.0 + 2.0 * self.sigma), 1.0 / (1.0 + 2.0 * self.sigma)
        C = torch.cat([y.new_full((d,), b), y.new_ones(bound.shape[1])])
        prox = ProxData(
            C, torch.cat([a * u_raw, torch.zeros_like(bound)], 1), y.new_full((C.shape[0],), -torch.inf),
            torch.cat([y.new_full((B, d), torch.inf), bound.expand(B, -1)], 1), bounded=bound.shape[1] > 0,
        )
        project = self.projection(y)
        states = iterate(torch.cat([u_raw, u_raw @ Ms_T], 1), project, prox, self.omega, self._marks(), self._graphs)
        return [red.lift_back(c, project.first(w, d)) for w in states]


class InputDependentDouglasRachford(_DouglasRachfordSteps):
    """``refine=dr`` where ``G(x)`` or ``H(x)`` depends on the input (the portfolio): the same iteration as
    :class:`DouglasRachford`, in the full space ``z = (y, t)`` with ``t = H_s(x) y`` (``H(x)``'s rows scaled to
    unit norm), and the projector onto the lifted equalities ``{G(x) y = b(x), t = H_s(x) y}`` formed per input:
    ``Pi_E(a, c)_y = P(x) (a + H_s' c) + q(x)`` with ``Q = I + H_s' H_s``, ``S = G Q^-1 G'``,
    ``P = Q^-1 - Q^-1 G' S^+ G Q^-1``, ``q = Q^-1 G' S^+ b``. ``P`` is an ``(B, n, n)`` tensor built once a call
    (no gradient: it depends on the input only), so this is for small ``n`` (:data:`MAX_N`); the iterations are
    batched products. The output satisfies the equalities up to the rounding of ``P``; the blend after it
    removes what remains.
    """

    MAX_N = 512
    """Largest ``n`` accepted: ``P(x)`` takes ``B n^2`` floats (at batch 4096 and ``n = 512``, 8.6 GB)."""

    def __init__(
        self, family: ConstraintFamily, steps: int, eval_steps: int | None = None, sigma: float = 1.0,
        omega: float = 1.7, margin: float = 1e-9,
    ) -> None:
        super().__init__(steps, eval_steps, sigma, omega, margin)
        if not isinstance(family, InputDependentFamily):
            raise NotApplicable(f"the per-input projector needs G(x), H(x) as an InputDependentFamily; got {type(family).__name__}")
        if family.n > self.MAX_N:
            raise NotApplicable(
                f"refine=dr with an input-dependent G(x) or H(x) forms an n x n projector per input; n = {family.n} "
                f"> {self.MAX_N} would not fit a batch in memory"
            )
        self.family = family

    def extra_repr(self) -> str:
        return super().extra_repr() + ", per-input projector"

    def _projector(self, xi: torch.Tensor, like: torch.Tensor):
        """``P (B, n, n)``, ``q (B, n)``, ``H_s (B, m, n)``, the scaled bound ``(B, m)``; float64, no gradient."""
        family, x = self.family, xi.detach().to(torch.float64)
        with torch.no_grad():
            H = family.ineq_lhs(x)
            norms = H.norm(dim=2)
            scale = torch.where(norms > 0, 1.0 / norms, torch.zeros_like(norms))  # unit rows (zero rows stay zero)
            Hs = H * scale.unsqueeze(2)
            bound = family.ineq_rhs(x) * scale
            bound = bound - self.margin * (1.0 + bound.abs())
            eye = torch.eye(family.n, dtype=torch.float64, device=x.device)
            Q_inv = torch.linalg.inv(eye + Hs.transpose(1, 2) @ Hs)
            if family.m_eq:
                G = family.eq_lhs(x)
                QG = Q_inv @ G.transpose(1, 2)  # (B, n, m_eq)
                S_pinv = torch.linalg.pinv(G @ QG, hermitian=True)
                P = Q_inv - QG @ S_pinv @ QG.transpose(1, 2)
                q = (QG @ (S_pinv @ family.eq_rhs(x).unsqueeze(2))).squeeze(2)
            else:
                P, q = Q_inv, torch.zeros(len(x), family.n, dtype=torch.float64, device=x.device)
            P = 0.5 * (P + P.transpose(1, 2))
        dt = like.dtype
        return P.to(dt), q.to(dt), Hs.to(dt), bound.to(dt)

    def snapshots(self, xi: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        P, q, Hs, bound = self._projector(xi, y)

        def rows(u: torch.Tensor) -> torch.Tensor:
            return torch.einsum("bmn,bn->bm", Hs, u)

        def project(wy: torch.Tensor, wt: torch.Tensor) -> torch.Tensor:  # Pi_E(w)_y
            return torch.einsum("bnj,bj->bn", P, wy + torch.einsum("bmn,bm->bn", Hs, wt)) + q

        return self._iterate(y, rows, project, bound, lambda u: u)


class PinetRefinement(nn.Module):
    """``forward(xi, y) -> (B, n)``: ``steps`` (``eval_steps`` in eval mode) iterations of Pinet's DR projection."""

    def __init__(
        self, family: ConstraintFamily, steps: int, eval_steps: int | None = None, sigma: float = 1.0,
        omega: float = 1.7, margin: float = 1e-9,
    ) -> None:
        super().__init__()
        from hardlinear.layers.douglas_rachford import DouglasRachfordProjection, RuizSettings

        G = constant_lhs(family, "G") if family.m_eq else np.zeros((0, family.n))
        H = constant_lhs(family, "H") if family.m_ineq else np.zeros((0, family.n))
        if G is None or H is None:
            raise NotApplicable("refine=pinet needs constant equality and inequality rows (Pinet's var_A is not offered)")
        self.steps, self.eval_steps = int(steps), int(eval_steps if eval_steps is not None else steps)
        self.margin = float(margin)
        self.projection = DouglasRachfordProjection(
            G, H, ruiz=RuizSettings(max_iter=25, tol=1e-3), sigma=sigma, omega=omega, backward="implicit", n_iter_bwd=25
        )
        self.consts = Float64Constants(B_eq_T=np.asarray(family.B_eq, dtype=np.float64).T,
                                       B_ineq_T=np.asarray(family.B_ineq, dtype=np.float64).T)

    def forward(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        from hardlinear.constraints.family import lift

        B_eq_T, B_ineq_T = self.consts.get(("B_eq_T", "B_ineq_T"), y)
        x = lift(xi.to(y.dtype))
        h = x @ B_ineq_T
        out, _ = self.projection(y, x @ B_eq_T, h - self.margin * (1.0 + h.abs()),
                                 n_iter=self.steps if self.training else self.eval_steps)
        return out


class HardNetRefinement(nn.Module):
    """``forward(xi, y) -> (B, n)``: HardNet-Aff's correction of ``y``'s free coordinates."""

    def __init__(self, family: ConstraintFamily) -> None:
        super().__init__()
        from hardlinear.layers.peers.hardnet import HardNetAffLayer

        self.correction = HardNetAffLayer(family)

    def forward(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        red = self.correction.reduced
        (N,) = red.consts.get(("N",), y)
        return self.correction(xi, (y - red.particular(xi, y)) @ N)


class ProblemRefinement(nn.Module):
    """``forward(xi, y) -> (B, n)``: a problem's ``exact_refinement(xi, y)`` (``refine=problem``), one step, no
    parameters; ``snapshots`` is that one output, so ``refine_pick=objective`` works with it too."""

    def __init__(self, problem, geometry: str = "euclidean") -> None:  # noqa: ANN001 - any Problem with exact_refinement
        super().__init__()
        if not callable(getattr(problem, "exact_refinement", None)):
            raise NotApplicable(
                f"refine=problem uses the problem's own exact map onto C(x) (Problem.exact_refinement); {problem.name} "
                f"has none (problem=ed has one); use refine=dr, which applies to any family"
            )
        if geometry != "euclidean" and "geometry" not in inspect.signature(problem.exact_refinement).parameters:
            raise NotApplicable(
                f"method.refine_geometry={geometry}: {problem.name}'s exact map has one geometry (the Euclidean "
                f"projection); leave method.refine_geometry at 'euclidean'"
            )
        self.problem_name, self.geometry = problem.name, geometry
        self._map = problem.exact_refinement

    def extra_repr(self) -> str:
        return f"{self.problem_name}.exact_refinement, geometry={self.geometry}"

    def forward(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._map(xi, y) if self.geometry == "euclidean" else self._map(xi, y, geometry=self.geometry)

    def snapshots(self, xi: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        return [self(xi, y)]


def build_refinement(
    kind: str, family: ConstraintFamily, steps: int = 10, eval_steps: int | None = None, sigma: float = 1.0,
    omega: float = 1.7, problem=None, geometry: str = "euclidean",  # noqa: ANN001 - the Problem, for kind="problem"
) -> nn.Module | None:
    """The refinement module named ``kind`` (None for ``"none"``); raises NotApplicable where it does not apply.
    ``geometry``: that of ``refine=problem``'s map (``Problem.exact_refinement``)."""
    if kind not in REFINEMENTS:
        raise ValueError(f"refine must be one of {REFINEMENTS}; got {kind!r}")
    if kind == "none":
        return None
    if kind == "problem":
        if problem is None:
            raise ValueError("refine=problem needs the problem (build_refinement(..., problem=problem))")
        return ProblemRefinement(problem, geometry)
    if kind == "dr":
        if family.input_dependent_lhs:
            return InputDependentDouglasRachford(family, steps, eval_steps, sigma, omega)
        return DouglasRachford(family, steps, eval_steps, sigma, omega)
    if kind == "pinet":
        return PinetRefinement(family, steps, eval_steps, sigma, omega)
    return HardNetRefinement(family)


def pick_lowest_objective(
    layer: nn.Module, objective, xw: torch.Tensor, y_task: torch.Tensor, refiner: nn.Module
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``refine_pick=objective``: per row, of the blend of the raw task output and the blends of the refiner's
    snapshots (each exactly feasible), the one with the lowest ``objective(xw, y)``; ties keep the earlier (the
    raw blend first), and so does a NaN objective. Returns ``(y, refined (B,) bool, alpha (B,))``; the gradient
    flows through the kept output of each row."""
    snapshots = refiner.snapshots(xw, y_task) if hasattr(refiner, "snapshots") else [refiner(xw, y_task)]
    y = layer(xw, y_task)
    with torch.no_grad():
        best, alpha = objective(xw, y), layer.last_stats["alpha"]
        refined = torch.zeros_like(best, dtype=torch.bool)
    for y_snap in snapshots:
        y_ref = layer(xw, y_snap)
        with torch.no_grad():
            f = objective(xw, y_ref)
            better = f < best
            best = torch.where(better, f, best)
            alpha = torch.where(better, layer.last_stats["alpha"], alpha)
            refined = refined | better
        y = torch.where(better.unsqueeze(1), y_ref, y)
    return y, refined, alpha
