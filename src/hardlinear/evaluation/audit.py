"""Audit of the feasibility layer's guarantee on one problem: worst violations over hostile inputs and outputs.

Why: the guarantee (:mod:`hardlinear.layers.feasibility`) is "feasible for every input in the box and every
task output", so random test sets say little about it. The audit looks where it would break:

* input sets: ``uniform`` draws from the box; ``vertices`` of the box (all ``2^k`` of them when
  ``k <= all_vertices_k``, else a random sample), where an affine rule's slack is smallest; ``attack``
  inputs, one per inequality row, that maximise that row's violation by the projected task output
  (the box vertex picked by the sign of the row's gradient w.r.t. ``xi``, then a few projected
  gradient-ascent steps inside the box);
* task outputs: ``random`` (the safe output plus noise of scales 1e-3 .. 1e3), an untrained ``mlp``,
  ``zeros``, ``huge`` (+-1e30), ``nan`` and ``inf`` entries, ``ascent`` (gradient ascent on the projected
  task output's violation, from mild to 1e4 times the output's size: ``alpha`` from near 0 to 1) and
  ``ascent_layer`` (gradient ascent on the layer *output's* violation, which pushes several rows onto their
  bounds at once);
* dtypes: the layer in float64, and in float32 with the safe network cast to float32 (a
  :class:`~hardlinear.rules.decision_rule.DecisionRule` keeps its float64 coefficients under that cast, as in
  ``Proposed(layer_dtype="float32")``; another safe network is cast).

Every output is evaluated in float64 (at the input the layer saw, i.e. after rounding ``xi`` to its dtype),
with the relative residuals of :mod:`hardlinear.evaluation.metrics` (``||r||_2 / (1 + ||rhs||_2)``) and the per-row
ratios of the layer's docstring (``|G_i y - g_i| / (eps (||G_i||_1 ||y||_inf + |g_i|))``, documented <= 16).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from hardlinear.constraints.family import JointlyLinearFamily, lift
from hardlinear.layers.feasibility import FeasibilityLayer

INPUT_SETS = ("uniform", "vertices", "attack")
TASK_KINDS = ("random", "mlp", "zeros", "huge", "nan", "inf", "ascent", "ascent_layer")
DTYPES = (torch.float64, torch.float32)
HUGE = 1e30  # finite in float32 (max 3.4e38), far beyond any output scale
# Task kinds that are smooth functions of xi: the attack inputs are computed against each of them. The others
# (non-finite outputs, ascent outputs built on top of inputs) use the attack inputs of the untrained network.
ATTACKABLE = ("random", "mlp", "zeros", "huge")


@dataclass
class AuditConfig:
    """How many inputs and steps; the defaults are the test suite's (seconds), the script uses more."""

    uniform: int = 256
    """Uniform draws from the box."""
    vertex_limit: int = 256
    """Random vertices when ``k > all_vertices_k``."""
    all_vertices_k: int = 12
    """Every vertex (``2^k``) up to this ``k``."""
    attack_rows: int | None = None
    """Attack at most this many inequality rows (a random subset); None: every row."""
    attack_steps: int = 5
    """Projected gradient-ascent steps after the sign-of-gradient vertex."""
    ascent_steps: int = 8
    """Steps of the two output ascents (each step's iterate is audited)."""
    seed: int = 0
    network: dict = field(default_factory=lambda: {"hidden": 64, "layers": 2, "batch_norm": True})
    """The untrained task network (the paper's is 2 x 256; its size does not matter untrained)."""


@dataclass
class AuditRow:
    """Worst case over one (input set, task kind, dtype) group; all residuals evaluated in float64."""

    problem: str
    input_set: str
    task: str
    dtype: str
    inputs: int
    """Rows (input, task output) tried."""
    eq_rel_worst: float
    """metrics.py's ``||G y - g||_2 / (1 + ||g||_2)``."""
    eq_bound_ratio: float
    """``max_i |G_i y - g_i| / (eps_dtype (||G_i||_1 ||y||_inf + |g_i|))``: the docstring's ``c'`` (<= 16)."""
    ineq_abs_worst: float
    """``max_i (H_i y - h_i)^+``."""
    ineq_rel_worst: float
    """metrics.py's ``||(H y - h)^+||_2 / (1 + ||h||_2)``."""
    task_viol_worst: float
    """Worst violation of the projected task output itself (finite rows): how hard the layer had to work."""
    alpha_moved_frac: float
    """Fraction with ``alpha > 0``."""
    alpha_one_frac: float
    """Fraction with ``alpha == 1`` (the output is the safe output)."""
    nonfinite_outputs: int
    """Output rows with a NaN or infinite entry (must be 0)."""
    out_of_domain: int
    """Inputs the layer flagged outside the box (must be 0: every set lies in the box)."""


# --- inputs --------------------------------------------------------------------------------------------------
def _violation(layer: FeasibilityLayer, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``H(x) y - h(x): (B, m)``, differentiable, by the layer's slack operator (cheaper than the family's
    dense product: the standard form's ``H = [0, -I]`` is a slice)."""
    return -layer.slacks.slack(xi, y, layer.slacks.rhs(xi, y))


def _rhs_scale(layer: FeasibilityLayer, xi: torch.Tensor) -> torch.Tensor:
    """``1 + ||h(x)||_inf: (B, 1)``, the unit of the ascents' relative violations."""
    h = layer.slacks.rhs(xi, xi)
    if h is None or h.shape[1] == 0:
        return xi.new_ones(xi.shape[0], 1)
    return 1.0 + h.abs().amax(dim=1, keepdim=True)


def vertex_inputs(problem, cfg: AuditConfig, gen: torch.Generator) -> torch.Tensor:
    """All vertices for ``k <= cfg.all_vertices_k``, else ``cfg.vertex_limit`` random ones (float64)."""
    limit = None if problem.k <= cfg.all_vertices_k else cfg.vertex_limit
    return problem.box.vertices(limit=limit, generator=gen)


def attack_inputs(
    problem,
    layer: FeasibilityLayer,
    task: Callable[[torch.Tensor], torch.Tensor],
    cfg: AuditConfig,
    gen: torch.Generator,
) -> torch.Tensor:
    """One input per inequality row ``i`` maximising ``(H y_TN - h)_i`` over the box, ``y_TN = P(task(xi))``.

    Why: the layer must rescue exactly those rows; an input where the task output violates a row most is
    where ``alpha`` is largest and the blend's rounding matters most. Start: the vertex given by the sign of
    the row's gradient at the box centre (exact for an affine violation); then ``cfg.attack_steps`` steps of
    sign-gradient ascent with halving steps, clipped to the box; the best iterate per row is kept.
    """
    m = problem.family.m_ineq
    rows = torch.arange(m)
    if cfg.attack_rows is not None and cfg.attack_rows < m:
        rows = torch.randperm(m, generator=gen)[: cfg.attack_rows].sort().values
    if rows.numel() == 0:
        return torch.zeros(0, problem.k, dtype=torch.float64)
    lo = torch.as_tensor(problem.box.lo).expand(rows.numel(), -1)
    hi = torch.as_tensor(problem.box.hi).expand(rows.numel(), -1)
    radius = 0.5 * (hi - lo)

    def value_and_grad(xi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        xi = xi.detach().requires_grad_(True)
        viol = _violation(layer, xi, layer.project(xi, task(xi)))
        value = viol.gather(1, rows.unsqueeze(1)).squeeze(1)
        (grad,) = torch.autograd.grad(value.sum(), xi)
        return value.detach(), grad

    xi = 0.5 * (lo + hi)
    _, grad = value_and_grad(xi)
    xi = torch.where(grad > 0, hi, torch.where(grad < 0, lo, xi))
    best, best_value = xi, value_and_grad(xi)[0]
    step = 0.5
    for _ in range(cfg.attack_steps):
        value, grad = value_and_grad(xi)
        better = value > best_value
        best = torch.where(better.unsqueeze(1), xi, best)
        best_value = torch.maximum(value, best_value)
        xi = torch.minimum(torch.maximum(xi + step * radius * torch.sign(grad), lo), hi)
        step *= 0.5
    value, _ = value_and_grad(xi)
    return torch.where((value > best_value).unsqueeze(1), xi, best).detach()


# --- task outputs --------------------------------------------------------------------------------------------
def _noise(shape: tuple[int, int], seed: int) -> torch.Tensor:
    """Noise of scales 1e-3 .. 1e3 per row, the same for the same shape and seed."""
    gen = torch.Generator().manual_seed(seed)
    scale = 10.0 ** torch.randint(-3, 4, (shape[0], 1), generator=gen).double()
    return scale * torch.randn(shape, generator=gen, dtype=torch.float64)


def task_function(
    kind: str, layer: FeasibilityLayer, net: nn.Module, n: int, seed: int
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``xi: (B, k) float64 -> y_task: (B, n) float64`` for the smooth task kinds (differentiable in ``xi``)."""
    if kind == "random":
        return lambda xi: layer.safe_output(xi).double() + _noise((xi.shape[0], n), seed)
    if kind == "mlp":
        return lambda xi: net(xi.to(torch.float32)).double()
    if kind == "zeros":
        return lambda xi: xi.new_zeros(xi.shape[0], n) + 0.0 * xi.sum()
    if kind == "huge":

        def huge(xi: torch.Tensor) -> torch.Tensor:
            gen = torch.Generator().manual_seed(seed)
            sign = torch.randint(0, 2, (xi.shape[0], n), generator=gen).double() * 2.0 - 1.0
            return HUGE * sign + 0.0 * xi.sum()

        return huge
    raise ValueError(f"no task function for kind {kind!r}; smooth kinds are {ATTACKABLE}")


def nonfinite_outputs(kind: str, base: torch.Tensor, seed: int) -> torch.Tensor:
    """``base`` with non-finite entries: one entry in every row, and every entry in every fourth row."""
    gen = torch.Generator().manual_seed(seed)
    y = base.clone()
    B, n = y.shape
    if kind == "nan":
        special = torch.tensor([float("nan")], dtype=torch.float64)
    else:
        special = torch.tensor([float("inf"), float("-inf")], dtype=torch.float64)
    pick = special[torch.randint(0, special.numel(), (B,), generator=gen)]
    y[torch.arange(B), torch.randint(0, n, (B,), generator=gen)] = pick
    y[::4] = special[0]
    return y


def ascent_outputs(problem, layer: FeasibilityLayer, xi: torch.Tensor, y0: torch.Tensor, steps: int) -> torch.Tensor:
    """Iterates of gradient ascent on the projected task output's violation, ``(steps * B, n)``.

    The direction is the (normalised) gradient of ``logsumexp_i((H y_TN - h)_i / (1 + ||h||_inf))`` w.r.t. the
    task output (a soft max of the rows' violations, whose gradient never vanishes); step ``t`` moves by
    ``10^(t - 3) (1 + ||y||_inf)``, so the iterates range from barely violating to violating by 1e4 times the
    output's size, where ``alpha`` rounds to 1 and ``y_TN`` dwarfs the safe output.
    """
    scale = _rhs_scale(layer, xi)
    y = y0.detach().clone()
    out = []
    for t in range(steps):
        y.requires_grad_(True)
        objective = torch.logsumexp(_violation(layer, xi, layer.project(xi, y)) / scale, dim=1).sum()
        (grad,) = torch.autograd.grad(objective, y)
        norm = grad.abs().amax(dim=1, keepdim=True).clamp_min(1e-300)
        with torch.no_grad():
            y = y + (10.0 ** (t - 3)) * (1.0 + y.abs().amax(dim=1, keepdim=True)) * grad / norm
        out.append(y.detach().clone())
    return torch.cat(out)


def layer_ascent_outputs(
    problem, layer: FeasibilityLayer, xi: torch.Tensor, y0: torch.Tensor, steps: int
) -> torch.Tensor:
    """Iterates of gradient ascent on the layer output's worst relative violation w.r.t. the task output.

    The objective is ``T logsumexp_i((H y - h)_i / (1 + ||h||_inf) / T)`` with ``y = layer(xi, y_task)`` in float64
    (the paper's arg-max gradient); the binding row's own gradient is zero (``alpha`` keeps it on its bound), so
    the ascent drives the other rows onto their bounds: ties, where the arg max and rounding are most fragile.
    Sign-gradient steps of ``0.3 / (t + 1) (1 + ||y_task||_inf)``; every iterate is returned, ``(steps * B, n)``.
    """
    scale = _rhs_scale(layer, xi)
    y = y0.detach().clone()
    out = []
    for t in range(steps):
        y.requires_grad_(True)
        resid = _violation(layer, xi, layer(xi, y)) / scale
        objective = 1e-3 * torch.logsumexp(resid / 1e-3, dim=1).sum()
        (grad,) = torch.autograd.grad(objective, y)
        with torch.no_grad():
            y = y + (0.3 / (t + 1)) * (1.0 + y.abs().amax(dim=1, keepdim=True)) * torch.sign(grad)
        out.append(y.detach().clone())
    return torch.cat(out)


# --- measuring -----------------------------------------------------------------------------------------------
def residuals(family, xi: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(G y - g, g, H y - h, h)`` in float64 for ``xi: (B, k), y: (B, n)`` (any dtype, cast first).

    Why not ``family.eq_resid``: that multiplies by a dense copy of ``G`` (1496 x 1527 at 200 buses), which
    costs seconds over an audit; the sparse product sums the same nonzeros and is as exact.
    """
    xi, y = xi.detach().double(), y.detach().double()
    if not isinstance(family, JointlyLinearFamily):
        return family.eq_resid(xi, y), family.eq_rhs(xi), family.ineq_resid(xi, y), family.ineq_rhs(xi)
    x, y_np = lift(xi).numpy(), y.numpy()
    g, h = x @ family.B_eq.T, x @ family.B_ineq.T
    eq, ineq = (family.G @ y_np.T).T - g, (family.H @ y_np.T).T - h
    return tuple(torch.as_tensor(np.ascontiguousarray(a)) for a in (eq, g, ineq, h))


def _row_norms(family, xi: torch.Tensor) -> torch.Tensor:
    """``||G_i(x)||_1``: ``(1 or B, m_eq)``."""
    if isinstance(family, JointlyLinearFamily):
        return torch.as_tensor(np.asarray(abs(family.G).sum(axis=1)).reshape(1, -1))
    return family.eq_lhs(xi).abs().sum(dim=2)


def violation_figures(family, xi: torch.Tensor, y: torch.Tensor, eps: float) -> dict[str, torch.Tensor]:
    """Per instance, in float64: metrics.py's relative residuals (``||r||_2 / (1 + ||rhs||_2)``), the largest
    inequality violation, and the docstring's equality ratio ``max_i |r_i| / (eps (||G_i||_1 ||y||_inf + |g_i|))``."""
    eq, g, ineq, h = residuals(family, xi, y)
    y64 = y.detach().double()
    pos = ineq.clamp(min=0.0)
    den = eps * (_row_norms(family, xi.detach().double()) * y64.abs().amax(dim=1, keepdim=True) + g.abs())
    ratio = torch.where(eq == 0, 0.0, eq.abs() / den)
    zeros = torch.zeros(y64.shape[0], dtype=torch.float64)
    return {
        "eq_rel": eq.norm(dim=1) / (1.0 + g.norm(dim=1)),
        "eq_ratio": ratio.amax(dim=1) if eq.shape[1] else zeros,
        "ineq_abs": pos.amax(dim=1) if ineq.shape[1] else zeros,
        "ineq_rel": pos.norm(dim=1) / (1.0 + h.norm(dim=1)),
    }


@torch.no_grad()
def measure(problem, layer: FeasibilityLayer, xi: torch.Tensor, y_task: torch.Tensor, dtype: torch.dtype) -> dict:
    """Run ``layer`` on ``(xi, y_task)`` cast to ``dtype``; the group's worst figures, evaluated in float64 at
    the input the layer saw (``xi`` rounded to ``dtype``)."""
    xi_d, y_task_d = xi.to(dtype), y_task.to(dtype)
    y = layer(xi_d, y_task_d)
    stats = layer.last_stats
    B = xi.shape[0]
    fig = violation_figures(problem.family, xi_d, y, torch.finfo(dtype).eps)
    # the projected task output (in the layer's dtype), evaluated in float64, finite rows only
    y_tn = layer.project(xi_d, y_task_d)
    ok = torch.isfinite(y_tn).all(dim=1)
    task_viol = residuals(problem.family, xi_d[ok], y_tn[ok])[2].clamp(min=0.0)
    alpha = stats["alpha"]

    def worst(t: torch.Tensor) -> float:
        return float(t.max()) if t.numel() else 0.0  # NaN propagates: a NaN output can never pass a check

    return {
        "inputs": B,
        "eq_rel_worst": worst(fig["eq_rel"]),
        "eq_bound_ratio": worst(fig["eq_ratio"]),
        "ineq_abs_worst": worst(fig["ineq_abs"]),
        "ineq_rel_worst": worst(fig["ineq_rel"]),
        "task_viol_worst": worst(task_viol),
        "alpha_moved_frac": float((alpha > 0).double().mean()) if B else 0.0,
        "alpha_one_frac": float((alpha >= 1).double().mean()) if B else 0.0,
        "nonfinite_outputs": int((~torch.isfinite(y).all(dim=1)).sum()),
        "out_of_domain": int(stats["out_of_domain"].sum()),
    }


# --- the audit -----------------------------------------------------------------------------------------------
def float32_layer(layer: FeasibilityLayer) -> FeasibilityLayer:
    """A copy of ``layer`` whose safe network runs in float32 (the layer's own constants stay float64)."""
    out = copy.deepcopy(layer)
    out.safe = out.safe.to(torch.float32)
    return out


def audit(
    problem, layer: FeasibilityLayer, cfg: AuditConfig | None = None, progress: Callable[[str], None] | None = None
) -> list[AuditRow]:
    """Audit ``layer`` (a :class:`~hardlinear.layers.feasibility.FeasibilityLayer` on ``problem.family`` with a
    float64 safe network) over every (input set, task kind, dtype); one :class:`AuditRow` per group."""
    from hardlinear.layers.network import MLP

    if getattr(problem.compact, "polytope", None) is not None:
        raise ValueError(
            f"the audit draws box vertices and box-clamped attacks; {problem.name}'s input set is a polytope, where "
            "those inputs lie outside the guarantee. Audit it over its box-shaped relaxation, or not at all"
        )
    cfg = cfg or AuditConfig()
    gen = torch.Generator().manual_seed(cfg.seed)
    with torch.random.fork_rng(devices=[]):  # a reproducible network, without touching the caller's RNG
        torch.manual_seed(cfg.seed)
        net = MLP(problem.box, problem.n, **cfg.network).eval()
    layers = {torch.float64: layer, torch.float32: float32_layer(layer)}
    base_sets = {"uniform": problem.sample(cfg.uniform, generator=gen), "vertices": vertex_inputs(problem, cfg, gen)}
    rows: list[AuditRow] = []
    for set_name in INPUT_SETS:
        attacks: dict[str, torch.Tensor] = {}
        if set_name == "attack":
            for kind in ATTACKABLE:
                task = task_function(kind, layer, net, problem.n, cfg.seed + 1)
                attacks[kind] = attack_inputs(problem, layer, task, cfg, gen)
        for kind in TASK_KINDS:
            xi = base_sets[set_name] if set_name != "attack" else attacks.get(kind, attacks.get("mlp"))
            seed = cfg.seed + 1
            if kind in ATTACKABLE:
                with torch.no_grad():
                    y_task = task_function(kind, layer, net, problem.n, seed)(xi)
            else:
                with torch.no_grad():
                    y_base = task_function("random", layer, net, problem.n, seed)(xi)
                if kind in ("nan", "inf"):
                    y_task = nonfinite_outputs(kind, y_base, seed)
                elif kind == "ascent":
                    y_task = ascent_outputs(problem, layer, xi, y_base, cfg.ascent_steps)
                    xi = xi.repeat(cfg.ascent_steps, 1)
                else:
                    y_task = layer_ascent_outputs(problem, layer, xi, y_base, cfg.ascent_steps)
                    xi = xi.repeat(cfg.ascent_steps, 1)
            for dtype in DTYPES:
                figures = measure(problem, layers[dtype], xi, y_task, dtype)
                rows.append(AuditRow(problem.name, set_name, kind, str(dtype).removeprefix("torch."), **figures))
                if progress is not None:
                    progress(f"{problem.name} {set_name:8s} {kind:12s} {rows[-1].dtype}: {figures}")
    return rows


def as_records(rows: list[AuditRow]) -> list[dict]:
    """Plain dicts (for ``pandas.DataFrame`` or ``csv.DictWriter``)."""
    return [asdict(r) for r in rows]
