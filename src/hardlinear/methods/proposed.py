"""The paper's method: task network, equality projection, blend with the decision rule by the smallest alpha.

The task network runs in the trainer's dtype (float32 by default); the feasibility layer and its output run in
``layer_dtype`` (float64 by default), so the reported feasibility is that of float64 arithmetic: the blend
leaves the most violated row exactly at its bound, and in float32 rounding alone crosses it.

Inputs outside the box (where the rule, hence the output, is not guaranteed feasible) follow
``out_of_domain``: ``count`` (only the metrics count them), ``warn`` (the default), ``error``, or ``project``:
at inference each such row's output is replaced by its exact projection onto ``C(x)``, a QP solved by Clarabel
(no gradient; an empty ``C(x)`` raises, naming the instance).

``fused_inference=True`` (the default): ``predict`` in eval mode without gradients runs :mod:`hardlinear.layers.fused` instead of the network
and the layer (batch norm folded, the projection folded into the last layer, the rule through its null-space
coordinates): the same guarantees at a fraction of the cost. It is built from the current weights on first
use and rebuilt whenever a weight or buffer changes (in place, by assignment or by a move) or the method
returns to training mode; ``forward`` (training, gradients) never uses it. Where the structure does not admit
it (the portfolio's standard form) ``predict`` runs the layer, with a warning naming the reason. Outputs agree
with the unfused layer's to ~1e-13 relative in float64 (tests/test_fused.py).

``refine`` (issue 28): a differentiable refinement of the task output *before* the equality projection and the
blend (:mod:`hardlinear.layers.refine`): ``none`` (the paper), ``dr`` (``refine_steps`` Douglas-Rachford steps
towards the projection onto ``C(x)``, ``refine_eval_steps`` at inference; step ``refine_sigma``, relaxation
``refine_omega``), ``pinet`` (the same with Pinet's module: full space, Ruiz, implicit backward),
``hardnet`` (HardNet-Aff's closed-form correction) or ``problem`` (the problem's own exact map,
``Problem.exact_refinement``: on ``problem=ed`` the dispatch's projection onto the generator limits and the
balance, with the smallest thermal slack; issue 42). The blend still makes every output
exactly feasible, so the guarantee is the layer's whatever the refinement does (NaN, overflow, too few steps);
``alpha`` is left only the refinement's residual. Where a refinement does not apply (an input-dependent ``G`` or
``H``; HardNet's rank condition) ``setup`` raises NotApplicable. The fused path does not include a refinement:
``fuse`` refuses it, naming the reason, and ``predict`` runs the network, the refinement and the layer.

``refine_pick`` (with a refinement): ``refined`` (the output is the blend of the refined task output) or
``objective`` (the blend of the raw task output and those of the refined ones are computed, each exactly
feasible, and each row keeps the one with the lower objective; in training too, so the loss is the smallest).
The refined candidates are the DR iterate after ``refine_steps`` and, at inference with more
``refine_eval_steps``, after those too (the first is what the network was trained on). Why: a refinement that has not converged can land anywhere on its way to the projection (on DC-OPF
10 Douglas-Rachford steps gave a 0.62 % gap, 20 gave 1.76 %, the raw blend 0.17 %, same weights), and the
objective is exactly what decides which of two feasible points is better. Per row the picked output is never
worse than the paper's blend of the same network output; ``extras["refined"]`` says which rows took a
refined one. It costs the blend two or three times.

``slack_repair`` (issue 42; problems with penalised slack variables, the economic dispatch): after the blend, each
slack is lowered to the smallest value its rows allow given the other variables (``problem.repair_slack``): the
rule's margin holds on the slack rows ``df >= 0`` too, so its safe point carries ``df >= t*`` on every line, paid at
the thermal penalty, and any ``alpha > 0`` brings it in. No equality row involves the slack and every line row
keeps holding, so the output stays exactly feasible and its objective only drops. NotApplicable elsewhere. Given as
``+method.slack_repair=true``: kept out of ``conf/method/proposed.yaml`` so that no recorded run's identity changes;
on ``problem=ed`` ``conf/problem_method/ed_proposed.yaml`` sets ``both``, so there it is changed with ``++``.
``slack_repair=both`` also repairs the task output *before* the blend: after the equality projection
(which moves only ``pg``: no equality row holds a slack) each slack is set to the smallest its line rows allow for
the projected ``pg``, so the line rows cannot bind and only the generator bounds decide ``alpha``; the layer then
blends as ever (a non-finite or overflowing task output still gets the rule's output), and the slack is repaired
again after the blend. ``slack_repair=zero`` sets the task output's slack to zero instead: the line rows
then bind in the blend like hard limits (the output lands on a line's limit, up to ``alpha`` times the rule's
slack), and the slack is repaired after the blend. The fused path has neither step, so ``predict`` runs the network,
the repair and the layer.

``output_scale`` (issue 42): the task network's outputs in units of each variable's range: an
:class:`~hardlinear.layers.network.OutputAffine` after the last layer maps ``z`` to ``mid + half_range * z`` on the
variables the compact constraints bound outright (generator limits), the others unscaled; folded into the last
linear layer by the fused path.

``refine_geometry`` (issue 42; with ``refine=problem``): ``euclidean`` (the default: the nearest point of the
problem's set) or ``entropic`` (on ``problem=ed``, the Bregman projection under each generator's Fermi-Dirac
entropy, :func:`~hardlinear.problems.dispatch_projection.entropic_box_sum`: smooth, every generator strictly inside
its limits) or ``proportional`` (on ``problem=ed``, the same logits through a sigmoid into the limits, then E2ELR's
proportional response, :func:`~hardlinear.problems.dispatch_projection.proportional_box_sum`: the repair of the peer
that wins on E2ELR's protocol, inside the proposed architecture). Kept out of ``conf/method/proposed.yaml`` so that no recorded run's identity changes;
``conf/problem_method/ed_proposed.yaml`` sets ``entropic`` on ``problem=ed``.

``guard_gradient`` (issue 42): ``false`` gives ``alpha`` no gradient where only the layer's rounding guard makes it
positive (:class:`~hardlinear.layers.feasibility.FeasibilityLayer`, ``guard_gradient``): a refinement that puts
outputs exactly on a face (``refine=problem``: generators at their limits) otherwise gets a gradient that pushes
them off it. Given as ``++method.guard_gradient=false``; the default, ``true``, is the layer every recorded run
trained.
"""

from __future__ import annotations

import numpy as np
import torch

from hardlinear.layers.network import run_net, scale_outputs
from hardlinear.layers.refine import REFINEMENTS, pick_lowest_objective
from hardlinear.methods.base import Context, Method, NotApplicable, Prediction, check_dtype
from hardlinear.methods.ldr import check_device_option, check_rule_options, load_rule, rule_variant
from hardlinear.problems.dispatch_projection import REFINE_GEOMETRIES
from hardlinear.rules.checks import output_dtype_for

OUT_OF_DOMAIN = ("count", "warn", "error", "project")
REFINE_PICKS = ("refined", "objective")
SLACK_REPAIRS = {False: "none", True: "after", "none": "none", "after": "after", "both": "both", "zero": "zero"}


class Proposed(Method):
    name = "proposed"

    def __init__(
        self,
        name: str = "proposed",
        gradient: str = "argmax",
        rule_solver: str = "auto",
        layer_dtype: str = "float64",
        pretrain: bool = True,
        out_of_domain: str = "warn",
        require_positive_margin: bool = True,
        fused_inference: bool = True,
        rule_objective: str = "margin",
        rule_margin_fraction: float = 0.5,
        rule_device: str = "cpu",
        refine: str = "none",
        refine_steps: int = 20,
        refine_eval_steps: int | None = None,
        refine_sigma: float = 0.3,
        refine_omega: float = 1.7,
        refine_pick: str = "refined",
        slack_repair: bool | str = False,
        refine_distance: float = 0.0,
        output_scale: bool = False,
        guard_gradient: bool = True,
        refine_geometry: str = "euclidean",
        fused_training: bool = True,
    ) -> None:
        super().__init__()
        if out_of_domain not in OUT_OF_DOMAIN:
            raise ValueError(f"out_of_domain must be one of {OUT_OF_DOMAIN}; got {out_of_domain!r}")
        if refine not in REFINEMENTS:
            raise ValueError(f"method.refine must be one of {REFINEMENTS}; got {refine!r}")
        if refine_steps < 1 or (refine_eval_steps is not None and refine_eval_steps < 1):
            raise ValueError(f"method.refine_steps and refine_eval_steps must be >= 1; got {refine_steps}, {refine_eval_steps}")
        if not refine_sigma > 0 or not 0 < refine_omega < 2:
            raise ValueError(
                f"method.refine_sigma must be > 0 and refine_omega in (0, 2) (Douglas-Rachford); got {refine_sigma}, "
                f"{refine_omega}"
            )
        if refine_pick not in REFINE_PICKS:
            raise ValueError(f"method.refine_pick must be one of {REFINE_PICKS}; got {refine_pick!r}")
        if refine_pick != "refined" and refine == "none":
            raise ValueError(
                f"method.refine_pick={refine_pick} chooses between the raw and the refined output; set method.refine "
                f"(e.g. method.refine=dr) or leave refine_pick at 'refined'"
            )
        if not refine_distance >= 0:
            raise ValueError(f"method.refine_distance must be >= 0 (a loss weight); got {refine_distance}")
        if refine_distance > 0 and (refine == "none" or refine_pick != "refined"):
            raise ValueError(
                f"method.refine_distance={refine_distance:g} weighs the distance from the task output to its refinement; "
                f"it needs method.refine set and refine_pick=refined (got refine={refine}, refine_pick={refine_pick})"
            )
        if refine_geometry not in REFINE_GEOMETRIES:
            raise ValueError(f"method.refine_geometry must be one of {REFINE_GEOMETRIES}; got {refine_geometry!r}")
        if refine_geometry != "euclidean" and refine != "problem":
            raise ValueError(
                f"method.refine_geometry={refine_geometry} chooses the map of refine=problem (the problem's own map onto "
                f"C(x)); got refine={refine}: set method.refine=problem, or drop the geometry ('~method.refine_geometry' "
                f"on the command line; conf/problem_method/ed_proposed.yaml sets it on problem=ed)"
            )
        self.refine_geometry = refine_geometry
        self.refine_pick = refine_pick
        self.output_scale = bool(output_scale)
        if not isinstance(guard_gradient, bool):
            raise ValueError(f"method.guard_gradient must be true or false; got {guard_gradient!r}")
        self.guard_gradient = guard_gradient
        self.refine_distance = float(refine_distance)
        self._distance: torch.Tensor | None = None  # refine_distance > 0, training: the last batch's ||y_task - refined||^2
        if isinstance(slack_repair, str):
            slack_repair = {"true": True, "false": False}.get(slack_repair.lower(), slack_repair)
        if slack_repair not in SLACK_REPAIRS:
            raise ValueError(
                f"method.slack_repair must be true (after the blend), false, 'both' (before and after) or 'zero' (no slack "
                f"before the blend, repaired after); got {slack_repair!r}"
            )
        self.slack_mode = SLACK_REPAIRS[slack_repair]
        self.refine, self.refine_steps, self.refine_eval_steps = refine, int(refine_steps), refine_eval_steps
        self.refine_sigma, self.refine_omega = float(refine_sigma), float(refine_omega)
        self.refiner = None
        self.name, self.gradient, self.rule_solver = name, gradient, rule_solver
        self.layer_dtype = check_dtype(layer_dtype)
        self.pretrain, self.out_of_domain = pretrain, out_of_domain
        self.require_positive_margin = bool(require_positive_margin)
        self.fused_inference = bool(fused_inference)
        self.fused_training = bool(fused_training)
        self.rule_objective, self.rule_margin_fraction = check_rule_options(rule_objective, rule_margin_fraction)
        self.rule_device = check_device_option(rule_device, rule_solver)
        self.t_star = float("nan")
        self._projection = None
        self._fused: tuple | None = None  # (weights key, tensors, module): a cache, not a submodule
        self._picked: dict[str, torch.Tensor] | None = None  # refine_pick=objective: the last call's choice

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.layers.feasibility import FeasibilityLayer
        from hardlinear.layers.refine import build_refinement

        self.problem = problem
        if self.slack_repair and not hasattr(problem, "repair_slack"):
            raise NotApplicable(
                f"slack_repair=true lowers a problem's penalised slack variables to their smallest feasible value; "
                f"{problem.name} has none (problem=ed has them); leave out +method.slack_repair=true"
            )
        # Before the rule: a refinement that does not apply (NotApplicable) should cost nothing.
        self.refiner = build_refinement(
            self.refine, problem.family, self.refine_steps, self.refine_eval_steps, self.refine_sigma, self.refine_omega,
            problem=problem, geometry=self.refine_geometry,
        )
        self.rule, offline = load_rule(
            problem, ctx, self.rule_solver, self.require_positive_margin, self.layer_dtype,
            self.rule_objective, self.rule_margin_fraction, self.rule_device,
        )
        self.t_star = float(self.rule.t_star)
        self.layer_dtype = output_dtype_for(problem, self.rule, self.layer_dtype, self.name)
        self.net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, ctx.dtype)
        if self.output_scale:
            self.net = scale_outputs(self.net, *self._output_bounds(problem))
        # "project" is handled here (it needs a solver); the layer itself only counts those inputs then.
        policy = "count" if self.out_of_domain == "project" else self.out_of_domain
        self.layer = FeasibilityLayer(
            problem.family, self.rule, gradient=self.gradient, out_of_domain=policy, guard_gradient=self.guard_gradient
        )
        self.layer.to(ctx.device)
        if self.refiner is not None:
            self.refiner.to(ctx.device)
        return offline

    @staticmethod
    def _output_bounds(problem) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
        """The box the compact constraints state on each original variable (``output_scale``); the form's appended
        slacks are left unscaled."""
        from hardlinear.constraints.family import constant_variable_bounds

        lo, hi = constant_variable_bounds(problem.compact)
        pad = np.full(problem.n - len(lo), np.inf)
        return np.r_[lo, -pad], np.r_[hi, pad]

    @property
    def slack_repair(self) -> bool:
        """Whether the slacks are repaired after the blend (every ``slack_repair`` mode but ``none``)."""
        return self.slack_mode != "none"

    def unfusable_reason(self) -> str | None:
        """Why the fused path (:func:`hardlinear.layers.fused.fuse`) cannot compute :meth:`blend` (None: it can)."""
        if self.refiner is not None:
            return f"method.refine={self.refine}: the fused path has no refinement step"
        if self.slack_mode in ("both", "zero"):
            return f"method.slack_repair={self.slack_mode}: the fused path has no slack step before the blend"
        return None

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        if self._trains_by_dispatch_path():
            from hardlinear.layers.dispatch_blend import dispatch_forward

            return dispatch_forward(self, xi)[0]
        y = self.blend(xi)
        return self.problem.repair_slack(xi.to(y.dtype), y) if self.slack_repair else y

    def _trains_by_dispatch_path(self) -> bool:
        """Whether a training step takes the dispatch's path through the factor (:func:`~hardlinear.layers.
        dispatch_blend.dispatch_forward`: the rows whose refinement is feasible skip the layer, whose rule map and
        dense line rows cost 2.5 s a step at case9241) rather than :meth:`blend`: the same outputs and gradients to
        rounding (tests/test_flows.py). Only with the entropic or proportional map and ``guard_gradient=false``
        (conf/problem_method/ed_proposed.yaml), which keep every generator strictly inside its limits and give ``alpha``
        no gradient from the layer's rounding guard: the Euclidean map puts generators on their limits, where the
        layer reads a ``1e-13`` violation of its own rounding and ``alpha``'s gradient (not small) follows it, so the
        two paths' gradients differ there. ``method.fused_training=false`` keeps the layer's path."""
        usable = self.gradient == "argmax" and self.refine_distance == 0 and not self.guard_gradient
        usable = usable and self.refine_geometry in ("entropic", "proportional")
        if not (self.fused_training and self.training and usable):
            return False
        from hardlinear.layers.dispatch_blend import dispatch_blend_reason

        return dispatch_blend_reason(self) is None

    def blend(self, xi: torch.Tensor) -> torch.Tensor:
        """The output before the after-blend slack repair: the network, the optional slack step and refinement, and
        the layer. What the fused path computes, and what it runs unfused when it cannot (``unfusable_reason``)."""
        xw = xi.to(self.layer_dtype)
        y_task = run_net(self.net, xi).to(self.layer_dtype)
        # refine=problem maps pg alone: the Euclidean map's result does not move with the balance's shift (clip(q -
        # lam) is invariant to a uniform shift of q), so the step would be thrown away; the entropic map reads the
        # network's own output as logits (what it was measured with), which the step would shift unevenly
        if self.slack_mode == "both" and self.refine != "problem":  # projected pg meets the balance; slacks follow
            y_task = self.problem.repair_slack(xw, self.layer.project(xw, y_task))
        elif self.slack_mode == "zero":  # no thermal slack: the blend holds the line rows as hard limits
            y_task = self.problem.zero_slack(xw, self.layer.project(xw, y_task))
        self._picked = None
        if self.refiner is None:
            return self.layer(xw, y_task)
        if self.refine_pick == "refined":
            refined = self.refiner(xw, y_task)
            if self.refine_distance > 0 and torch.is_grad_enabled():
                self._distance = (y_task - refined.detach()).square().sum(dim=1)
            return self.layer(xw, refined)
        y, refined, alpha = pick_lowest_objective(self.layer, self.problem.objective, xw, y_task, self.refiner)
        self._picked = {"refined": refined, "alpha": alpha}
        return y

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The mean objective, plus with ``refine_distance`` that weight times the mean squared distance from the task
        output to its refinement: zero for a task output already in C(x), so the objective's minimiser is unchanged,
        but it pulls outputs that sit beyond a face back across it, where the projection's Jacobian gives the
        objective no gradient along the face's normal (the plateaus of docs/peer_methods.md)."""
        loss = super().loss(xi, y)
        distance, self._distance = self._distance, None
        if distance is not None and distance.shape[0] == y.shape[0]:
            loss = loss + self.refine_distance * distance.mean()
        return loss

    def regress(self, xi: torch.Tensor) -> torch.Tensor:
        return run_net(self.net, xi)

    def pretrain_target(self, xi: torch.Tensor) -> torch.Tensor | None:
        return self.rule(xi.to(self.layer_dtype)) if self.pretrain else None

    # --- fused inference (hardlinear.layers.fused) -----------------------------------------------------------
    def train(self, mode: bool = True) -> Proposed:
        if mode:
            self._fused = None  # weights are about to change
        return super().train(mode)

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001 - torch's own signature
        self._fused = None  # .to(), .double(), .cuda(): the snapshot holds the old tensors
        return super()._apply(fn, recurse)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):  # noqa: ANN001
        self._fused = None
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _fused_key(self, tensors: list[torch.Tensor]) -> list:
        layer = self.layer
        key = [(t.data_ptr(), t._version) for t in tensors]
        key += (layer.rounding_guard, layer.alpha_margin, layer.alpha_dtype, layer.out_of_domain, self.layer_dtype)
        return key

    def fused_module(self) -> torch.nn.Module:
        """The inference module of :mod:`hardlinear.layers.fused` for the current weights, built on first use.

        Rebuilt when a weight or buffer of the network or the rule was changed in place (its version counter,
        e.g. an optimizer step or ``load_state_dict``) or replaced (``p.data = ...``, a move), or a layer setting
        changed; dropped by ``train()``, ``.to()`` and ``load_state_dict``. Unseen: in-place changes through
        ``p.data`` (``p.data.mul_(2)``: no version bump) and parameters replaced by a new object in eval mode;
        call ``train()`` (or ``eval()``) after such edits.
        """
        from hardlinear.layers.fused import fuse

        if self._fused is not None:
            key, tensors, module = self._fused
            if self._fused_key(tensors) == key:
                return module
        tensors = [*self.net.parameters(), *self.net.buffers(), *self.rule.parameters(), *self.rule.buffers()]
        module = fuse(self)
        self._fused = (self._fused_key(tensors), tensors, module)
        return module

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        keys = ("alpha", "out_of_domain")
        if self.fused_inference and not self.training and not torch.is_grad_enabled():
            fused = self.fused_module()
            y = fused(xi)
            stats = fused.stats(keys)
            if self.slack_repair and not getattr(fused, "repairs_slack", False):
                y = self.problem.repair_slack(xi.to(y.dtype), y)
        else:
            y = self(xi)
            stats = self.layer.last_stats
        if self._picked is not None:  # refine_pick=objective (run by forward, also behind the fused path's refusal)
            stats, keys = {**stats, **self._picked}, (*keys, "refined")
        extras = {k: stats[k] for k in keys if k in stats}
        if self.out_of_domain == "project" and bool(stats["out_of_domain"].any()):
            y = self._project_rows(xi, y, stats["out_of_domain"])
        return Prediction(y=y, iterations=torch.ones(xi.shape[0], dtype=torch.long, device=y.device), extras=extras)

    def _project_rows(self, xi: torch.Tensor, y: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Replace ``y[rows]`` by the nearest point of ``C(xi)`` (an exact QP per row)."""
        from hardlinear.methods.post_projection import NearestPoint
        from hardlinear.solvers import SolverError

        if self._projection is None:
            self._projection = NearestPoint(self.problem.family, "clarabel")
        xi_np = xi.detach().to("cpu", torch.float64).numpy()
        y_np = y.detach().to("cpu", torch.float64).numpy().copy()
        for i in np.flatnonzero(rows.cpu().numpy()):
            res = self._projection(xi_np[i], y_np[i])
            if not res.optimal:
                raise SolverError(
                    f"out_of_domain=project: input {i} lies outside the box and C(x) has no nearest point "
                    f"(Clarabel status {res.status!r}; the constraints may be infeasible there)"
                )
            y_np[i] = res.y
        return torch.as_tensor(y_np, dtype=y.dtype, device=y.device)

    def describe(self) -> dict[str, str]:
        parts = [] if self.gradient == "argmax" else [f"gradient={self.gradient}"]
        if self.refine in ("dr", "pinet"):
            steps = self.refine_steps if self.refine_eval_steps is None else f"{self.refine_steps}/{self.refine_eval_steps}"
            parts.append(f"refine={self.refine}({steps} steps, sigma={self.refine_sigma:g})")
        elif self.refine == "problem" and self.refine_geometry != "euclidean":
            parts.append(f"refine=problem({self.refine_geometry})")
        elif self.refine != "none":
            parts.append(f"refine={self.refine}")
        if self.refine_pick != "refined":
            parts.append(f"pick={self.refine_pick}")
        if self.refine_distance > 0:
            parts.append(f"distance={self.refine_distance:g}")
        if self.output_scale:
            parts.append("output_scale")
        if not self.guard_gradient:
            parts.append("guard_gradient=false")
        if self.slack_repair:
            parts.append("slack_repair" if self.slack_mode == "after" else f"slack_repair={self.slack_mode}")
        parts.append(rule_variant(self.rule_objective, self.rule_margin_fraction))
        return {"variant": " ".join(p for p in parts if p)}
