"""DC3 (Donti, Rolnick, Kolter 2021): predict the partial variables, complete the equalities, correct the
inequalities by unrolled gradient steps; see :mod:`hardlinear.layers.peers.dc3` for the two layers.

Training: ``y = correct(complete(net(x)))`` with ``train_steps`` correction steps unrolled (DC3 used 10), loss::

    L = 1/B sum_b [ f(x_b, y_b) + penalty (1 - w) ||max(H y_b - h, 0)|| + penalty w ||G y_b - g|| ]

the soft loss of :mod:`hardlinear.methods.penalty` (unsquared norms and ``w = eq_fraction = 0.5`` as DC3's
code; ``norm="squared"`` as its paper's text); the equality term is ~0 by construction. Inference: up to ``max_iter`` steps (the paper: 300), stopping per
instance once its largest inequality violation is ``<= tol`` (1e-4); ``Prediction.iterations`` is the number of
correction steps each instance took. Paper defaults: correction lr 1e-4, momentum 0.5, penalty 5000 (DC-OPF)
or 0.5 (portfolio, ``conf/problem_method/portfolio_dc3.yaml``).

``completion``: which variables the network predicts. ``pivoted`` (default) picks them by column-pivoted QR,
the best-conditioned completion; ``problem`` takes the problem's own choice (``completion_partial_vars()``: on
DC3's benchmark, the variables DC3's code drew). The correction's effective step depends on this choice (see
:mod:`hardlinear.layers.peers.dc3`), so DC3's ``lr`` reproduces DC3 only with DC3's variables.

``thermal``: on the economic dispatch (``problem=ed``, inequality form) ``soft`` poses DC3 on the dispatch alone, as
the E2ELR paper ran it (its model has no thermal slack variables; line overloads are paid in the objective): the
network predicts the partial generator outputs, the completion meets the balance, the correction acts on the
generator limits only, and the thermal slacks follow from the dispatch (``EconomicDispatch.with_thermal_slack``: the
smallest that holds the line rows, so the loss is cost plus thermal penalty plus DC3's penalty on the limits).
``hard`` (the default) corrects every row of the problem's form, the slacks among the variables: on the dispatch its
loss has no lower bound at DC3's DC-OPF penalty (a slack below zero earns 150,000 $/p.u. against a penalty of 5,000
times the violations' norm: a case14 run diverged) and each correction step multiplies by the line rows.
"""

from __future__ import annotations

import time

import torch

from hardlinear.layers.network import run_net
from hardlinear.methods.base import Context, Method, Prediction, check_dtype
from hardlinear.methods.penalty import check_penalty_options, soft_loss

COMPLETIONS = ("pivoted", "problem")
THERMAL = ("hard", "soft")


class DC3(Method):
    name = "dc3"
    iterative = True
    pretrain = False

    def __init__(
        self,
        name: str = "dc3",
        penalty: float = 5000.0,
        lr: float = 1e-4,
        momentum: float = 0.5,
        tol: float = 1e-4,
        max_iter: int = 300,
        train_steps: int = 10,
        norm: str = "l2",
        eq_fraction: float = 0.5,
        layer_dtype: str = "float64",
        completion: str = "pivoted",
        thermal: str = "hard",
    ) -> None:
        super().__init__()
        if thermal not in THERMAL:
            raise ValueError(f"method.thermal must be one of {THERMAL}; got {thermal!r}")
        self.thermal = thermal
        if completion not in COMPLETIONS:
            raise ValueError(f"completion must be one of {COMPLETIONS}; got {completion!r}")
        self.completion = completion
        check_penalty_options(penalty, norm, eq_fraction)
        self.norm, self.eq_fraction = norm, float(eq_fraction)
        if train_steps < 0 or max_iter < 0:
            raise ValueError(f"train_steps and max_iter must be >= 0; got {train_steps}, {max_iter}")
        if lr <= 0 or not 0.0 <= momentum < 1.0 or tol < 0:
            raise ValueError(f"need lr > 0, momentum in [0, 1), tol >= 0; got {lr}, {momentum}, {tol}")
        self.name, self.penalty = name, float(penalty)
        self.lr, self.momentum, self.tol = float(lr), float(momentum), float(tol)
        self.max_iter, self.train_steps = int(max_iter), int(train_steps)
        self.layer_dtype = check_dtype(layer_dtype)

    def setup(self, problem, ctx: Context) -> float:
        from hardlinear.layers.peers.dc3 import EqualityCompletion, GradientCorrection

        self.problem = problem
        t0 = time.perf_counter()
        partial = None
        if self.completion == "problem":
            choose = getattr(problem, "completion_partial_vars", None)
            if choose is None:
                raise ValueError(f"{self.name}: completion=problem, but {problem.name} suggests no partial variables; use completion=pivoted")
            partial = choose()
        family = problem.family if self.thermal == "hard" else _generator_family(problem)
        completion = EqualityCompletion(family, generator=ctx.generator(offset=41), partial_idx=partial)
        self.correction = GradientCorrection(
            completion, lr=self.lr, momentum=self.momentum, tol=self.tol, max_iter=self.max_iter
        ).to(ctx.device)
        offline = time.perf_counter() - t0
        self.net = ctx.make_mlp(problem.box, completion.n_partial).to(ctx.device, ctx.dtype)
        return offline

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> y: (B, n)`` after ``train_steps`` unrolled correction steps (no early stop)."""
        z = run_net(self.net, xi).to(self.layer_dtype)
        y, _ = self.correction(xi.to(self.layer_dtype), z, steps=self.train_steps, early_stop=False)
        return self._with_slack(xi, y)

    def _with_slack(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``thermal=soft``: the corrected dispatch with its smallest thermal slack (module docstring)."""
        return y if self.thermal == "hard" else self.problem.with_thermal_slack(xi.to(y.dtype), y)

    def loss(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return soft_loss(self, xi, y)

    @torch.no_grad()
    def predict(self, xi: torch.Tensor) -> Prediction:
        z = run_net(self.net, xi).to(self.layer_dtype)
        y, steps = self.correction(xi.to(self.layer_dtype), z, steps=self.max_iter, early_stop=True)
        return Prediction(y=self._with_slack(xi, y), iterations=steps)

    def describe(self) -> dict[str, str]:
        return {"variant": "thermal=soft" if self.thermal == "soft" else ""}


def _generator_family(problem):  # noqa: ANN001, ANN202 - an EconomicDispatch; its JointlyLinearFamily
    """``thermal=soft``'s rows: the problem's own (``EconomicDispatch.generator_family``), or a ValueError naming the
    fix where the problem is not a dispatch."""
    build = getattr(problem, "generator_family", None)
    if build is None:
        raise ValueError(f"method.thermal=soft poses DC3 on an economic dispatch's generator outputs; {problem.name} is "
                         "not one: use problem=ed (or ed_tpwrs2024), or method.thermal=hard")
    return build()
