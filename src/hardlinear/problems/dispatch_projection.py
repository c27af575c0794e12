"""Maps onto a box cut by one sum, ``{p : sum p = total, lo <= p <= hi}``, batched and differentiable: the
generator limits and the power balance of an economic dispatch. The Euclidean projection (:func:`project_box_sum`,
below) and the entropic one (:func:`entropic_box_sum`, its own docstring).

Why: at a dispatch's optimum most generators sit at a limit (a vertex). A map that sends the task network's
output onto that set exactly keeps each generator at its own limit, where the blend's single ``alpha`` would pull
all of them towards the rule's interior point together (docs/peer_methods.md, "Economic dispatch").

The projection is ``p_i = clip(q_i - lam, lo_i, hi_i)`` with the scalar ``lam`` at which the sum meets ``total``
(the KKT conditions of ``min ||p - q||^2``; ``sum clip(q - lam)`` falls monotonically in ``lam``). ``lam`` is
found from the sorted breakpoints of that piecewise-linear sum (no gradient, :func:`_multiplier`; by bisection
in large batches, where a row-wise sort costs more, ``SORT_MAX_ENTRIES``), which fixes
which coordinates sit at a limit; then, with that set held,
``lam = (sum_free q + sum_limits - total) / |free|`` is computed again *with* the gradient. At the solution
both give the same value, and the second's derivative is the projection's own Jacobian where the set is
locally constant (almost everywhere): ``dp/dq = D - D 1 1' D / |free|``, ``D`` the indicator of the free
coordinates. Rounding leaves the sum within a few ulps of ``total`` and a free coordinate within ulps of its
limit; whatever a caller needs exactly is the job of what comes after (the proposed method's blend).

``gradient="inward"`` (the default) changes only the backward pass. The exact Jacobian is zero on a coordinate at
its limit, so a generator that lands at a limit early in training (all of them start near the middle of the
box, the balance's shift sends the small ones to a limit) never leaves it: driving the projection's input
straight to the LP optimum of ``pglib_opf_case118_ieee`` with Adam stalls at a 17.6 % gap with expensive units
held at their maximum. ``inward`` also passes the gradient of a coordinate at its limit when a descent step would
move it back inside (at ``hi`` a positive, at ``lo`` a negative component, measured after the balance's mean is
removed), the way E2ELR's sigmoid never stops the gradient; it never passes the one pushing it further out, so
an output at its limit does not drift. The same Adam run reaches 0.18 % (2,000 steps, 64 inputs).
"""

from __future__ import annotations

import math

import torch

GRADIENTS = ("inward", "exact")
REFINE_GEOMETRIES = ("euclidean", "entropic", "proportional")
"""The maps onto ``{sum p = total, lo <= p <= hi}``: :func:`project_box_sum`, :func:`entropic_box_sum` and
:func:`proportional_box_sum` (E2ELR's repair, after a sigmoid into the box)."""

SORT_MAX_ENTRIES = 16_384
"""Batches of at most this many entries (rows x generators) find ``lam`` from the sorted breakpoints; larger ones
by bisection. Measured (one thread, load ~3.6 on the 2-core machine): 54 generators, batch 1: 0.16 ms
against 2.0 ms; batch 32: 0.29 against 2.6 ms; batch 1024: 16 against 9 ms (a row-wise sort of 108 keys costs
~70 ns a key on this CPU, one bisection pass ~2 ns an entry)."""

BISECTION_STEPS = 80
"""Halvings of the bracket on ``lam``: 2^-80 of its width, below float64's resolution of ``q``."""

SATURATED_LOGIT = 40.0
""":func:`entropic_box_sum` brackets ``lam`` within this of the logits' range: ``sigmoid(40)`` is 1 to within
4.3e-18, below float64's resolution of a sum of widths."""


def project_box_sum(
    q: torch.Tensor, total: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, gradient: str = "inward"
) -> torch.Tensor:
    """``q: (B, G), total: (B,), lo, hi: (G,) -> (B, G)``: the nearest point of ``{sum p = total, lo <= p <= hi}``.

    Where ``total`` lies outside ``[sum lo, sum hi]`` the set is empty and the result is ``lo`` (``hi``) for every
    coordinate: the nearest point of the box to the hyperplane. ``gradient``: ``"inward"`` or ``"exact"`` (module
    docstring); no gradient reaches ``total``, ``lo`` or ``hi``.
    """
    if gradient not in GRADIENTS:
        raise ValueError(f"gradient must be one of {GRADIENTS}; got {gradient!r}")
    if gradient == "inward":
        return _InwardProjection.apply(q, total.detach(), lo, hi)
    return _project(q, total.detach(), lo, hi)


class _InwardProjection(torch.autograd.Function):
    """The projection's value; in the backward pass, the balance's Jacobian on the free coordinates and on those at
    a limit whose gradient would move them back inside (module docstring)."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, total: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        with torch.no_grad():
            p = _project(q, total, lo, hi)
        ctx.save_for_backward(p, lo, hi)
        return p

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: ANN001, ANN205 - torch's signature
        p, lo, hi = ctx.saved_tensors
        at_lo, at_hi = p <= lo, p >= hi
        free = ~(at_lo | at_hi)
        centred = grad - _mean_over(grad, free)
        active = free | (at_hi & (centred > 0)) | (at_lo & (centred < 0))
        return torch.where(active, grad - _mean_over(grad, active), torch.zeros_like(grad)), None, None, None


def _mean_over(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B, G), (B, G) bool -> (B, 1)``: each row's mean of ``values`` where ``mask`` (0 where none)."""
    return (values * mask).sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1)


def _multiplier(q: torch.Tensor, total: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """``(B,)``: ``lam`` with ``sum clip(q - lam, lo, hi) = total``, exactly by the breakpoints (no iteration).

    With ``a = q - hi`` each coordinate gives ``hi - clamp(lam - a, 0, hi - lo)``, so the sum meets ``total`` where
    ``g(lam) = sum clamp(lam - a, 0, hi - lo)`` reaches ``sum hi - total``. ``g`` is piecewise linear between the
    ``2G`` breakpoints ``a`` (its slope gains one) and ``a + hi - lo`` (loses one): sorted, a cumulative sum gives
    ``g`` at each of them, and ``lam`` is the interpolation on the segment that holds the target (``searchsorted``).
    About fifteen tensor operations whatever ``G``, where bisection to float64's resolution takes ~320 (80 halvings):
    the batch-1 cost of ``method.refine=problem``. An unreachable total returns the end breakpoint on its side."""
    a = q - hi
    width = (hi - lo).expand_as(q)
    points, order = torch.sort(torch.cat([a, a + width], dim=1), dim=1)
    steps = torch.cat([torch.ones_like(q), -torch.ones_like(q)], dim=1).gather(1, order)
    slope = steps.cumsum(dim=1)  # g's slope right of each breakpoint
    rise = slope[:, :-1] * points.diff(dim=1)
    g = torch.cat([torch.zeros_like(points[:, :1]), rise.cumsum(dim=1)], dim=1)  # g at each breakpoint
    need = (hi.sum() - total).unsqueeze(1).to(q.dtype)
    j = (torch.searchsorted(g.contiguous(), need.contiguous(), right=True) - 1).clamp(0, points.shape[1] - 2)
    left, g_left, s_left = points.gather(1, j), g.gather(1, j), slope.gather(1, j)
    step = torch.where(s_left > 0, (need - g_left) / s_left.clamp(min=1), torch.zeros_like(need))
    return (left + step.clamp(min=0)).squeeze(1)


def _bisection(q: torch.Tensor, total: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """``(B,)``: the same ``lam`` as :func:`_multiplier`, by ``BISECTION_STEPS`` halvings of its bracket (cheaper
    per entry than a sort, for large batches)."""
    lam_lo = (q - hi).amin(dim=1)  # sum clip(q - lam_lo) = sum hi >= total
    lam_hi = (q - lo).amax(dim=1)  # sum clip(q - lam_hi) = sum lo <= total
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lam_lo + lam_hi)
        above = torch.clamp(q - mid.unsqueeze(1), lo, hi).sum(dim=1) > total
        lam_lo, lam_hi = torch.where(above, mid, lam_lo), torch.where(above, lam_hi, mid)
    return 0.5 * (lam_lo + lam_hi)


def _project(q: torch.Tensor, total: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """The projection with the exact Jacobian (autograd through the second ``lam``)."""
    if q.dim() != 2 or total.shape != q.shape[:1] or lo.shape != q.shape[1:] or hi.shape != q.shape[1:]:
        raise ValueError(f"need q (B, G), total (B,), lo and hi (G,); got {tuple(q.shape)}, {tuple(total.shape)}, {tuple(lo.shape)}, {tuple(hi.shape)}")
    if bool((lo > hi).any()):
        raise ValueError("every lower limit must be at most its upper limit")
    with torch.no_grad():
        q0 = q.detach()
        target = total
        lam = _multiplier(q0, target, lo, hi) if q0.numel() <= SORT_MAX_ENTRIES else _bisection(q0, target, lo, hi)
        shifted = q0 - lam.unsqueeze(1)
        # an unreachable total: every coordinate at the nearer limits (lam sits on the end breakpoint there)
        below, above = (target <= lo.sum()).unsqueeze(1), (target >= hi.sum()).unsqueeze(1)
        at_lo, at_hi = (shifted <= lo) | below, ((shifted >= hi) | above) & ~below
        free = ~(at_lo | at_hi)
        n_free = free.sum(dim=1)
    limits = torch.where(at_lo, lo, torch.where(at_hi, hi, torch.zeros_like(q)))
    # lam again, with the gradient, for the limits held: the value found above, the Jacobian of the projection
    lam_exact = ((q * free).sum(dim=1) + limits.sum(dim=1) - total) / n_free.clamp(min=1)
    lam_used = torch.where(n_free > 0, lam_exact, lam.to(q.dtype))
    # the clamp only removes rounding (a free coordinate a few ulps past its limit); it passes the gradient inside
    return torch.where(free, torch.clamp(q - lam_used.unsqueeze(1), lo, hi), limits)


def entropic_box_sum(u: torch.Tensor, total: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """``u: (B, G), total: (B,), lo < hi: (G,) -> (B, G)``: ``lo + (hi - lo) * sigmoid(u - lam)``, the scalar ``lam``
    per row at which the sum meets ``total``.

    This is the Bregman projection onto ``{sum p = total, lo <= p <= hi}`` under the Fermi-Dirac entropy of each
    coordinate's position in its box, of the point whose logits are ``u`` (``lo + (hi - lo) * sigmoid(u)``): its
    optimality condition is ``logit(p) = u - lam``, the Euclidean projection's ``p = q - lam`` in the entropy's
    mirror coordinates. Why (``method.refine_geometry=entropic``): the Euclidean projection sends coordinates to
    their limits with a zero Jacobian there and a free set that changes from batch to batch, so the objective's
    gradient on the free coordinates (cost minus the free set's mean cost) jumps as generators cross a limit; here
    every coordinate stays strictly inside its box and the Jacobian, ``S - s s' / sum(s)`` with
    ``s = (hi - lo) sigmoid'(u - lam)``, is smooth, shrinking as a coordinate nears its limit (docs/peer_methods.md,
    "Economic dispatch").

    ``lam`` is found without the gradient by :func:`_entropic_multiplier` (the sum falls monotonically in ``lam``),
    then one Newton step is taken *with* it, whose derivative is the implicit one, ``dlam/du = s / sum(s)``. The balance
    holds to rounding; where ``total`` lies outside ``(sum lo, sum hi)`` every coordinate ends at its nearer limit
    (within ``sigmoid(-40)`` of the box's width). No gradient reaches ``total``, ``lo`` or ``hi``.
    """
    if u.dim() != 2 or total.shape != u.shape[:1] or lo.shape != u.shape[1:] or hi.shape != u.shape[1:]:
        raise ValueError(f"need u (B, G), total (B,), lo and hi (G,); got {tuple(u.shape)}, {tuple(total.shape)}, {tuple(lo.shape)}, {tuple(hi.shape)}")
    if bool((lo >= hi).any()):
        raise ValueError("every lower limit must be below its upper limit (fixed coordinates are the caller's)")
    width, need = hi - lo, (total.detach() - lo.sum()).to(u.dtype)
    with torch.no_grad():
        lam0 = _entropic_multiplier(u.detach(), need, width).unsqueeze(1)
        sig = torch.sigmoid(u.detach() - lam0)
        slope = (width * sig * (1.0 - sig)).sum(dim=1, keepdim=True)
        steep = slope > 1e-12 * width.sum()  # otherwise every coordinate is saturated: no step, no gradient
    resid = (width * torch.sigmoid(u - lam0)).sum(dim=1, keepdim=True) - need.unsqueeze(1)
    lam = lam0 + torch.where(steep, resid / torch.where(steep, slope, 1.0), 0.0 * resid)
    # a saturated sigmoid (1.0) can put lo + width * 1.0 one rounding unit above hi: kept inside the box, so that a
    # saturated generator is at its limit, not over it (which sent the row to the layer: case1354, 220 of 256 rows
    # of a network whose outputs saturate); the clamp moves nothing else and keeps the gradient inside the box
    return torch.clamp(lo + width * torch.sigmoid(u - lam), lo, hi)


ENTROPIC_MAX_STEPS = 200
"""Safeguarded Newton steps on ``lam`` at most (:func:`_entropic_multiplier`); every two at worst halve the
bracket, so 200 reach float64's resolution of any bracket below 2^47 times its ``lam``."""


def _entropic_multiplier(u: torch.Tensor, need: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
    """``(B,)``: ``lam`` with ``sum width * sigmoid(u - lam) = need``, by Newton's method kept inside a bracket.

    The bracket starts ``SATURATED_LOGIT`` beyond the logits' range, where the sum is at its limits; each step takes
    Newton's point where it falls inside the bracket and is at most half the step before the last, the bracket's
    midpoint where not (so the bracket at least halves every two steps), then shrinks the bracket to the side the
    sum says. Started at the shift that would meet ``need`` were every logit the row's median, it
    stops when every row's residual is within rounding of the sum (or its bracket at float64's resolution): ~5-10
    steps where the 80 halvings of a plain bisection would take 80 (the batch-1 cost of the map).

    Up to ``ROW_LOOP_ROWS`` rows go one at a time through :func:`_entropic_multiplier_row` (the same steps, its
    bracket in Python floats): the batched steps' ~15 tensor calls each cost more than their arithmetic there."""
    if u.shape[0] <= ROW_LOOP_ROWS and u.device.type == "cpu":
        wsum = float(width.sum())
        return torch.tensor([_entropic_multiplier_row(u[i], float(need[i]), width, wsum) for i in range(u.shape[0])],
                            dtype=u.dtype, device=u.device)
    lam_lo, lam_hi = u.amin(dim=1) - SATURATED_LOGIT, u.amax(dim=1) + SATURATED_LOGIT
    share = (need / width.sum()).clamp(1e-12, 1 - 1e-12)
    lam = (u.median(dim=1).values - torch.log(share / (1 - share))).clamp(lam_lo, lam_hi)
    tol = 8 * torch.finfo(u.dtype).eps * (width.sum() + need.abs())
    step_before = lam_hi - lam_lo  # the step before the last one (Numerical Recipes' rtsafe test)
    step_last = step_before.clone()
    # two (B, G) buffers for every step, the weighted sums as matrix-vector products: five passes a step, not eight
    sig, curve = torch.empty_like(u), torch.empty_like(u)
    for _ in range(ENTROPIC_MAX_STEPS):
        torch.sub(u, lam.unsqueeze(1), out=sig).sigmoid_()
        resid = torch.mv(sig, width) - need  # falls as lam rises
        slope = torch.mv(torch.addcmul(sig, sig, sig, value=-1.0, out=curve), width)  # sum width sig (1 - sig)
        lam_lo = torch.where(resid > 0, lam, lam_lo)
        lam_hi = torch.where(resid > 0, lam_hi, lam)
        done = (resid.abs() <= tol) | (lam_hi - lam_lo <= 4 * torch.finfo(u.dtype).eps * lam.abs().clamp(min=1.0))
        if bool(done.all()):
            break
        step = resid / slope.clamp(min=torch.finfo(u.dtype).tiny)
        newton = lam + step
        # Newton only inside the bracket and while its steps at least halve (else it can cycle across an inflection
        # between two points: measured on a trained case1888 network's output)
        take = (newton > lam_lo) & (newton < lam_hi) & torch.isfinite(newton) & (step.abs() <= 0.5 * step_before)
        step_before, step_last = step_last, torch.where(take, step.abs(), 0.5 * (lam_hi - lam_lo))
        lam = torch.where(done, lam, torch.where(take, newton, 0.5 * (lam_lo + lam_hi)))
    return lam


ROW_LOOP_ROWS = 4
"""Batches of at most this many rows take :func:`_entropic_multiplier_row` row by row (on the CPU): one row's
multiplier 0.06 ms against the batched loop's 0.43 ms at 260 generators, 0.08 against 0.53 ms at 1,400 (one thread,
2 busy cores); eight rows one at a time cost about what the batched loop does."""


def _entropic_multiplier_row(u: torch.Tensor, need: float, width: torch.Tensor, wsum: float) -> float:
    """:func:`_entropic_multiplier` for one row ``u: (G,)``, its bracket, step and tests in Python floats: four tensor
    calls a step instead of ~15 (same start, steps, safeguard and stopping rule; equal to rounding, tests)."""
    eps, tiny = torch.finfo(u.dtype).eps, torch.finfo(u.dtype).tiny
    lam_lo, lam_hi = float(u.min()) - SATURATED_LOGIT, float(u.max()) + SATURATED_LOGIT
    share = min(max(need / wsum, 1e-12), 1 - 1e-12)
    lam = min(max(float(u.median()) - math.log(share / (1 - share)), lam_lo), lam_hi)
    tol = 8 * eps * (wsum + abs(need))
    step_before = step_last = lam_hi - lam_lo
    sig, weighted = torch.empty_like(u), torch.empty_like(u)
    for _ in range(ENTROPIC_MAX_STEPS):
        torch.sigmoid(torch.sub(u, lam, out=sig), out=sig)
        torch.mul(width, sig, out=weighted)
        resid = float(weighted.sum()) - need  # falls as lam rises
        slope = float(torch.dot(weighted, 1.0 - sig))
        if resid > 0:
            lam_lo = lam
        else:
            lam_hi = lam
        if abs(resid) <= tol or lam_hi - lam_lo <= 4 * eps * max(abs(lam), 1.0):
            break
        step = resid / max(slope, tiny)
        newton = lam + step
        take = lam_lo < newton < lam_hi and math.isfinite(newton) and abs(step) <= 0.5 * step_before
        step_before, step_last = step_last, (abs(step) if take else 0.5 * (lam_hi - lam_lo))
        lam = newton if take else 0.5 * (lam_lo + lam_hi)
    return lam


def proportional_box_sum(p: torch.Tensor, total: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``p: (B, G)`` within ``[lo, hi]``, ``total: (B,)`` -> (``p'`` with ``sum p' = total``, the fraction ``r: (B,)``
    moved): E2ELR's proportional response (Chen, Tanneau, Van Hentenryck, IEEE TPWRS 2024). Every coordinate moves the
    same fraction ``r`` of the way to its upper limit when ``sum p < total`` (``r = (total - sum p) / (sum hi - sum
    p)``), to its lower limit when above; so each stays between its old value and a limit. Rows already at ``total``
    are left as they are; where ``total`` lies outside ``[sum lo, sum hi]``, ``r`` is clipped to 1 and the balance
    left short. Why a map of its own beside the projections: it moves every coordinate by its headroom, so the
    objective's gradient reaches generators near their limits, which the entropic map's ``sigmoid'`` damps."""
    current = p.sum(dim=1)
    short = current < total  # move up towards hi
    room = torch.where(short, hi.sum() - current, current - lo.sum())
    need = (total - current).abs()
    safe_room = torch.where(room > 0, room, torch.ones_like(room))
    ratio = torch.where(room > 0, need / safe_room, torch.where(need > 0, 1.0, 0.0)).clamp(max=1.0)
    target = torch.where(short.unsqueeze(1), hi.expand_as(p), lo.expand_as(p))
    moved = p + ratio.unsqueeze(1) * (target - p)
    return torch.minimum(torch.maximum(moved, lo), hi), ratio
