"""Inference of the proposed method on the economic dispatch with ``refine=problem``, its line rows through the
factor of ``Bbus`` (:mod:`hardlinear.problems.flows`) instead of the layer's dense products.

Why: with ``refine=problem`` the task output is mapped onto the generator limits and the balance with the smallest
thermal slack (``EconomicDispatch.exact_refinement``), so it is already a point of ``C(x)`` up to rounding, and in
the standard form its slacks ``s = h - H y0`` are computed with it. The unfused layer still projects it onto the
equalities (in the standard form with an ``n x d`` basis whose rows hold the PTDF), evaluates the rule's
``n x (k + 1)`` map and the line rows ``H y`` (PTDF rows) of both outputs for every row: tens to hundreds of MB a
call from case1354 up, against a sparse solve of ~0.1 ms.

What this module computes, in the layer's working dtype (float64), per row:

* ``y_TN`` = the refinement of the network's output and its slacks ``s_TN = h - H y_TN`` (through the factor);
* rows whose ``y_TN`` is finite, meets the balance to rounding and has every slack ``s_TN >= 0``
  (``EconomicDispatch.rows_hold``; the usual case: the refinement is exact up to rounding) keep ``y_TN``: the layer's ``alpha`` is 0
  there, and the slack is already the smallest for its ``pg`` (the after-blend repair would return the same bits);
* the other rows (a non-finite network output; a huge one, whose balance the map meets only to its own size's
  rounding; a slack below zero from rounding) take the unfused path: the layer (projection, rule, blend) and the
  repair, for those rows only.

For a kept row the equality projection is skipped: the refinement meets the balance and the fixed generators up to
that rounding, and its slacks ``s = h - H y0`` define the standard form's other equalities. The network's last
layer is evaluated on the generator columns alone (:func:`~hardlinear.layers.network.run_net_columns`). Equal to the
unfused path up to the projection's rounding (tests/test_flows.py), and with a float32 network up to its last layer's
rounding (a product of another shape). Inference (``Proposed.predict``) and training
(``Proposed.forward``, :func:`dispatch_forward`) both take it.
"""

from __future__ import annotations

import torch
from torch import nn

from hardlinear.layers.network import run_net_columns

STATS = ("alpha", "out_of_domain")


def dispatch_forward(method, xi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(y, alpha, kept)``: ``method``'s output as its ``forward`` computes it (network, refinement, blend, after-blend
    slack repair), the kept rows' ``alpha = 0`` without the layer (module docstring). Differentiable: the proposed
    method trains through it too (``Proposed.forward``), the network run once per batch (batch norm and dropout see
    the whole batch once); the rows that need the layer take it on their refined output, as ``Proposed.blend``."""
    m = method
    problem, layer, dtype = m.problem, m.layer, m.layer_dtype
    work = torch.promote_types(layer.alpha_dtype, dtype)
    xw = xi.to(work)
    # exact_refinement's arithmetic, keeping the slacks of both forms (with_thermal_slack: the flows once)
    # the network's generator outputs alone: the map reads no other (run_net_columns)
    pg_columns = problem.variable_slices()["pg"]
    pg = problem.refined_dispatch(xw, run_net_columns(m.net, xi, pg_columns).to(work), m.refine_geometry)
    pf = problem.line_flows(xw, pg)
    df = problem.thermal_slack(xw, pg, pf)
    y = torch.cat([pg, df], dim=1)
    if problem.form == "standard":
        slack = problem.compact_slack(xw, y, pf)
        y = torch.cat([y, slack], dim=1)
    with torch.no_grad():
        keep = problem.rows_hold(xw, pg, df, pf)
        if problem.form == "standard":
            keep &= slack.amin(dim=1) >= 0
    alpha = y.new_zeros(y.shape[0]).detach()
    if not bool(keep.all()):  # the layer's own path (projection, blend, repair) for the rows that need it
        rows = torch.nonzero(~keep).squeeze(1)
        x_rows = xw.index_select(0, rows)
        blended = layer(x_rows.to(dtype), y.index_select(0, rows).to(dtype))
        blended = problem.repair_slack(x_rows.to(blended.dtype), blended)
        y = y.to(blended.dtype).index_copy(0, rows, blended)
        alpha = alpha.index_copy(0, rows, layer.last_stats["alpha"].detach().to(alpha.dtype))
    return y.to(dtype), alpha, keep


def dispatch_blend_reason(method) -> str | None:
    """Why :class:`DispatchBlend` does not apply to ``method`` (None: it does)."""
    problem = method.problem
    if not hasattr(problem, "compact_slack"):
        return "not an economic dispatch"
    if method.refine != "problem" or getattr(method, "refine_pick", "refined") != "refined":
        return "needs refine=problem (refine_pick=refined)"
    if method.slack_mode not in ("both", "after"):
        return "needs the after-blend slack repair (slack_repair=both or true)"
    return None


class DispatchBlend(nn.Module):
    """``xi -> y`` as ``Proposed.predict`` computes it (network, refinement, blend, after-blend slack repair) for a
    dispatch with ``refine=problem`` (module docstring). ``repairs_slack``: the output is already repaired."""

    fused = True
    repairs_slack = True

    def __init__(self, method) -> None:
        super().__init__()
        self._method = (method,)  # not a submodule: the method owns this object
        self.n_orig = method.problem.n_orig
        self._last: tuple | None = None

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        y, alpha, keep = dispatch_forward(self._method[0], xi)
        self._last = (xi.detach(), alpha, keep)
        return y

    def stats(self, keys: tuple[str, ...] = STATS) -> dict[str, torch.Tensor]:
        """``alpha`` and ``out_of_domain`` of the last call (the layer's own box check)."""
        if self._last is None:
            return {}
        xi, alpha, kept = self._last
        out = {"alpha": alpha, "layer_rows": ~kept}
        if "out_of_domain" in keys:
            out["out_of_domain"] = self._method[0].layer.domain_flags(xi)
        return {k: out[k] for k in keys if k in out}

    @property
    def last_stats(self) -> dict[str, torch.Tensor]:
        return self.stats(("alpha", "layer_rows", "out_of_domain"))
