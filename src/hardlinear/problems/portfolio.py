"""A bank's bond portfolio whose bonds' quality and maturity are uncertain (input-dependent LHS).

The paper's five-bond problem (after the classic textbook bank-portfolio exercise): buy amounts ``b_i >= 0``
(millions) of bonds with after-tax yield ``y_i``, quality rating ``q_i`` (lower is better) and maturity
``m_i`` (years). Variables ``[b_1..b_N | total | yield]``; constraints::

    total = sum_i b_i                          (equality)
    yield = sum_i y_i b_i                      (equality)
    sum_{i in government} b_i >= min_government
    sum_i q_i(x) b_i <= max_quality  * total   (average quality)
    sum_i m_i(x) b_i <= max_maturity * total   (average maturity)
    b_i >= 0,  total <= budget

Uncertainty: ``q_i(x) = q_i (1 + r xi_a)``, ``m_i(x) = m_i (1 + r xi_b)`` with ``xi in [-1, 1]^k``. With
``coupling="shared"`` (the paper's published data) one input scales both the quality and the maturity of
bond i (a = b = i) and ``extra_inputs`` further inputs have no effect, which gives the paper's k = 10 for
five bonds; with ``coupling="independent"`` quality and maturity have an input each (k = 2N).

Objectives: ``lp`` maximises the portfolio yield (``min -yield``, the paper's published data);
``qp`` is the mean-variance version ``min -yield + (risk_aversion / 2) sum_i (volatility_i b_i)^2`` with the
per-bond volatilities of the config (by default proportional to maturity: duration risk). The paper's main
table files the portfolio among its QP rows, while its published data is the LP; both are offered.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import InputBox, InputDependentFamily
from hardlinear.problems.base import Form, Objective, ObjectiveKind, Problem

# The paper's five bonds, in the order of its published data.
PAPER_BONDS = {
    "yields": [0.043, 0.045, 0.027, 0.025, 0.022],
    "quality": [2.0, 5.0, 2.0, 1.0, 1.0],
    "maturity": [9.0, 2.0, 15.0, 4.0, 3.0],
    "government": [False, False, True, True, True],
}
COUPLINGS = ("shared", "independent")


def _check_lengths(**lists: Sequence) -> int:
    lengths = {name: len(v) for name, v in lists.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"bond parameter lists differ in length: {lengths}")
    n = next(iter(lengths.values()))
    if n < 1:
        raise ValueError("a portfolio needs at least one bond")
    return n


def build_portfolio_family(
    yields: Sequence[float],
    quality: Sequence[float],
    maturity: Sequence[float],
    government: Sequence[bool],
    min_government: float,
    max_quality: float,
    max_maturity: float,
    budget: float,
    uncertainty: float,
    coupling: str,
    extra_inputs: int,
) -> InputDependentFamily:
    """The compact family over ``[b_1..b_N | total | yield]``."""
    nb = _check_lengths(yields=yields, quality=quality, maturity=maturity, government=government)
    if coupling not in COUPLINGS:
        raise ValueError(f"coupling must be one of {COUPLINGS}; got {coupling!r}")
    if extra_inputs < 0:
        raise ValueError(f"extra_inputs must be >= 0; got {extra_inputs}")
    k = (nb if coupling == "shared" else 2 * nb) + extra_inputs
    n = nb + 2
    total, yld = nb, nb + 1
    q_input = np.arange(nb)
    m_input = np.arange(nb) if coupling == "shared" else nb + np.arange(nb)

    G = np.zeros((k + 1, 2, n))
    G[0, 0, :nb], G[0, 0, total] = -1.0, 1.0
    G[0, 1, :nb], G[0, 1, yld] = -np.asarray(yields, float), 1.0

    m_ineq = 3 + nb + 1
    H = np.zeros((k + 1, m_ineq, n))
    h = np.zeros(m_ineq)
    gov = np.asarray(government, bool)
    H[0, 0, :nb] = -gov.astype(float)
    h[0] = -min_government
    q, m = np.asarray(quality, float), np.asarray(maturity, float)
    H[0, 1, :nb], H[0, 1, total] = q, -max_quality
    H[0, 2, :nb], H[0, 2, total] = m, -max_maturity
    for i in range(nb):
        H[1 + q_input[i], 1, i] += uncertainty * q[i]
        H[1 + m_input[i], 2, i] += uncertainty * m[i]
        H[0, 3 + i, i] = -1.0
    H[0, 3 + nb, total] = 1.0
    h[3 + nb] = budget

    B_ineq = np.zeros((m_ineq, k + 1))
    B_ineq[:, 0] = h
    return InputDependentFamily(
        box=InputBox.symmetric(k), G_stack=G, B_eq=np.zeros((2, k + 1)), H_stack=H, B_ineq=B_ineq
    )


class Portfolio(Problem):
    """The bond portfolio with uncertain quality and maturity (see the module docstring)."""

    def __init__(
        self,
        objective: ObjectiveKind = "lp",
        form: Form = "standard",
        uncertainty: float = 0.4,
        yields: Sequence[float] = PAPER_BONDS["yields"],
        quality: Sequence[float] = PAPER_BONDS["quality"],
        maturity: Sequence[float] = PAPER_BONDS["maturity"],
        government: Sequence[bool] = PAPER_BONDS["government"],
        min_government: float = 4.0,
        max_quality: float = 1.4,
        max_maturity: float = 5.0,
        budget: float = 10.0,
        coupling: str = "shared",
        extra_inputs: int = 5,
        volatility: Sequence[float] | None = None,
        risk_aversion: float = 1.0,
        name: str = "portfolio",
    ) -> None:
        if not 0.0 < float(uncertainty) < 1.0:
            raise ValueError(f"uncertainty must be in (0, 1); got {uncertainty}")
        if budget <= 0 or min_government < 0 or min_government > budget:
            raise ValueError(f"need 0 <= min_government <= budget and budget > 0; got {min_government}, {budget}")
        family = build_portfolio_family(
            list(yields), list(quality), list(maturity), [bool(g) for g in government], float(min_government),
            float(max_quality), float(max_maturity), float(budget), float(uncertainty), coupling, int(extra_inputs),
        )
        nb = len(yields)
        self.uncertainty = float(uncertainty)
        c = np.zeros(family.n)
        c[nb + 1] = -1.0
        Q = None
        if objective == "qp":
            vol = np.asarray(volatility if volatility is not None else 0.002 * np.asarray(maturity, float), float)
            if vol.shape != (nb,) or np.any(vol < 0):
                raise ValueError(f"volatility needs {nb} non-negative entries; got {vol.tolist()}")
            if risk_aversion <= 0:
                raise ValueError(f"risk_aversion must be > 0 for objective=qp; got {risk_aversion}")
            q = np.zeros(family.n)
            q[:nb] = risk_aversion * vol**2
            Q = sp.diags(q, format="csr")
        super().__init__(family, Objective(c=c, Q=Q), objective, form, name)
