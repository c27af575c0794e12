"""LDF, the Lagrangian duality framework (Fioretto, Van Hentenryck, Mak, Tran, Baldo, Lombardi, ECML PKDD 2020;
``AI4OPT/ML4OPF`` ``ml4opf/loss_functions/ldf.py``, ``ml4opf/models/ldf_nn``): a plain network whose loss carries
one multiplier per constraint row, raised by a subgradient step on the rows' mean violation every few epochs.

Loss of a batch, with the form's residuals ``e = G y - g`` and ``v = max(H y - h, 0)``::

    L = 1/B sum_b [ f(x_b, y_b) + lambda' |e_b| + mu' v_b ]

After every ``update_every``-th epoch from epoch ``kickin`` on (``after_epoch``), with ``ebar``, ``vbar`` the mean
of ``|e|`` and ``v`` over that epoch's training batches::

    lambda <- lambda + step_size * ebar,        mu <- mu + step_size * vbar

Both stay >= 0 (the violations are). The base loss ``f`` is set by ``fit``:

- ``"objective"`` (the default of ``conf/method/ldf.yaml``): the problem's objective, self-supervised (ML4OPF's
  ``loss="obj"``);
- ``"supervised"``: the MSE of the network's output to reference solutions, ML4OPF's default (``loss="mse"``,
  ``ml4opf/models/ldf_nn/ldf_nn.py``) and the LDF paper's setting; the trainer then fits on
  ``trainer.supervised_size`` solved instances. ``conf/problem_method/ed_ldf.yaml`` takes it.

``thermal_slack`` says where the thermal slack of an economic dispatch (``problem=ed``) comes from:

- ``"predicted"`` (the default): the network predicts every variable of the form, the slack with the rest;
- ``"derived"``: the network predicts the dispatch ``pg`` and the slack is the smallest that holds the line rows
  (``EconomicDispatch.with_thermal_slack``), as E2ELR's and PGLearn's formulation has it: the thermal limits are soft,
  paid in the objective at 150,000 $/p.u., not constraints a proxy must learn. The supervised MSE is then taken on
  ``pg``. Why it matters: a predicted slack a hundredth of a p.u. off its optimum of 0 costs 1,500 $ a line, and
  negative it earns as much: the objective of such an output says nothing about the dispatch (case118, 100 epochs:
  validation gap between -432 % and +257 %). ``conf/problem_method/ed_ldf.yaml`` takes it.

No correction at inference: the violations of the rows the network is left with (balance and generator limits
with a derived slack) are what the harness measures, recorded as they are.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, NotApplicable
from hardlinear.methods.penalty import DualPenalty

FITS = ("objective", "supervised")  # the base loss (module docstring)
THERMAL_SLACKS = ("predicted", "derived")  # where an economic dispatch's thermal slack comes from (module docstring)


class LDF(DualPenalty):
    name = "ldf"

    def __init__(
        self,
        name: str = "ldf",
        step_size: float = 1.0e4,
        update_every: int = 5,
        kickin: int = 0,
        init_multiplier: float = 0.0,
        layer_dtype: str = "float64",
        fit: str = "objective",
        thermal_slack: str = "predicted",
    ) -> None:
        super().__init__(name=name, penalty=0.0, layer_dtype=layer_dtype)
        if fit not in FITS:
            raise ValueError(f"fit must be one of {FITS} (the base loss: the objective, or the MSE to solved instances); got {fit!r}")
        self.fit, self.supervised = fit, fit == "supervised"
        if thermal_slack not in THERMAL_SLACKS:
            raise ValueError(f"thermal_slack must be one of {THERMAL_SLACKS}; got {thermal_slack!r}")
        self.thermal_slack = thermal_slack
        if not step_size > 0:
            raise ValueError(f"step_size must be > 0 (the subgradient step of the multipliers); got {step_size}")
        if update_every < 1 or kickin < 0:
            raise ValueError(f"need update_every >= 1 and kickin >= 0; got {update_every}, {kickin}")
        if not init_multiplier >= 0:
            raise ValueError(f"init_multiplier must be >= 0; got {init_multiplier}")
        self.step_size, self.update_every, self.kickin = float(step_size), int(update_every), int(kickin)
        self.init_multiplier = self.initial_multiplier = float(init_multiplier)

    def setup(self, problem, ctx: Context) -> float:
        offline = super().setup(problem, ctx)
        if self.thermal_slack == "derived":
            if not hasattr(problem, "with_thermal_slack"):
                raise NotApplicable(
                    f"method.thermal_slack=derived needs an economic dispatch (problem=ed) whose thermal slack follows "
                    f"from the dispatch; {problem.name} has none: set method.thermal_slack=predicted"
                )
            self.pg = problem.variable_slices()["pg"]
            self.net = ctx.make_mlp(problem.box, self.pg.stop - self.pg.start).to(ctx.device, ctx.dtype)
        return offline

    def complete(self, xi: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The network's output ``(B, .)`` as the form's ``y: (B, n)`` in ``layer_dtype``: itself, or with a derived
        thermal slack the dispatch with the smallest slack that holds its line rows."""
        out = out.to(self.layer_dtype)
        if self.thermal_slack == "predicted":
            return out
        return self.problem.with_thermal_slack(xi.to(self.layer_dtype), out)

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.complete(xi, run_net(self.net, xi))

    def solution_target(self, y_ref: torch.Tensor) -> torch.Tensor:
        return y_ref if self.thermal_slack == "predicted" else y_ref[:, self.pg]

    def dual_terms(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(B,)``: ``lambda' |e| + mu' v`` of each instance; the batch's violations go to the epoch's sums."""
        eq = self.problem.eq_resid(xi, y).abs()
        ineq = self.problem.ineq_resid(xi, y).clamp(min=0.0)
        self.observe(eq, ineq)
        return eq @ self.lam.to(eq.dtype) + ineq @ self.mu.to(ineq.dtype)

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (self.problem.objective(xi, y) + self.dual_terms(xi, y)).mean()

    def supervised_loss(self, xi: torch.Tensor, y_ref: torch.Tensor) -> torch.Tensor:
        """``fit="supervised"``: the MSE to the solutions, plus the same multiplier terms on the same output."""
        pred = self.regress(xi)
        mse = F.mse_loss(pred, self.solution_target(y_ref).to(pred.dtype))
        return mse + self.dual_terms(xi, self.complete(xi, pred)).mean()

    @torch.no_grad()
    def after_epoch(self, epoch: int) -> dict[str, float]:
        update = epoch >= self.kickin and (epoch + 1 - self.kickin) % self.update_every == 0
        means = self.mean_violations()  # each update sees the mean violation of its own epoch (ML4OPF's LDFLoss)
        if update and means is not None:
            self.lam += self.step_size * means[0]
            self.mu += self.step_size * means[1]
        return {"ldf/lambda_norm": float(self.lam.norm()), "ldf/mu_norm": float(self.mu.norm())}

    def describe(self) -> dict[str, str]:
        words = [*(["supervised"] if self.supervised else []), *(["derived slack"] if self.thermal_slack == "derived" else [])]
        return {**super().describe(), "variant": " ".join(words)} if words else super().describe()
