"""Economic dispatch (ED) as PGLearn poses it, on any PGLib-OPF case, in this project's constraint family.

Source: PGLearn (Klamkin, Tanneau, Van Hentenryck 2025), ``AI4OPT/PGLearn.jl``: the model
``src/opf/ed.jl`` (``EconomicDispatch`` with ``soft_thermal_limit = true``, as its ``exp/config.toml`` runs it),
the load sampler ``src/sampler/load.jl`` / ``glocal.jl`` and its settings in ``exp/config.toml``; the proxies'
side in ``AI4OPT/ML4OPF`` ``ml4opf/formulations/ed``. Written here from the math, per unit on ``baseMVA``.

Variables (compact form): ``[pg (in-service generators) | df (thermal slack, one per limited branch)]``.

Equalities: one global power balance ``sum pg = sum pd(x)``; generators with ``pmin = pmax`` fixed at that value
(two inequalities would force the decision rule's margin to zero, DESIGN.md section 7).
Inequalities: ``pmin <= pg <= pmax`` for the other generators; the PTDF flows
``pf = PTDF (Ag pg - pd(x))`` within their thermal limits up to the slack, ``-smax - df <= pf <= smax + df``, and
``df >= 0``. The flows are not variables: each line row is ``+-PTDF_e Ag pg - df_e <= smax_e +- PTDF_e pd(x)``,
affine in the input, and always satisfiable through ``df``.
Objective (PGLearn's): ``sum c1 pg + thermal_penalty * sum df`` with ``c1`` in $/p.u. (the MATPOWER $/MWh times
baseMVA) and PGLearn's ``THERMAL_PENALTY = 150000`` $/p.u.; constant terms dropped, quadratic terms ignored (as
PGLearn does, with a warning there).

What PGLearn's ED has that this one does not, said plainly: the reserve variables and the global reserve
requirement (``pg + r <= pmax``, ``sum r >= MRR``). Its sampler (``src/sampler/reserve.jl``, ``E2ELR`` type,
``l = 1, u = 2, factor = 5`` in ``exp/config.toml``) draws ``MRR`` between one and two times the largest
generator's ``pmax``, which no small IEEE case can carry (case14: ``MRR >= 3.4`` p.u. beside 1.3-3.0 p.u. of
demand against 3.99 p.u. of capacity), and ML4OPF's ED proxies evaluate without reserves (its ``EDViolation``:
reserve cost zero, "no reserves"). Phase shifts and bus shunts are left out, as PGLearn's PTDF flows leave them.

Inputs: one per bus with nonzero nominal load. PGLearn's ``ScaledUniform`` recipe draws a global factor
``a ~ U[load_low, load_high]`` and per-load noise ``e_i ~ U[1 - load_noise, 1 + load_noise]`` and sets
``pd_i = a e_i pd0_i`` (settings 0.6, 1.0, 0.15 in ``exp/config.toml``). That set is not a box, so the problem's
box is the smallest one that holds it, ``pd_i = pd0_i (m + r xi_i)``, ``xi in [-1, 1]^k`` with
``[m - r, m + r] = [load_low (1 - load_noise), load_high (1 + load_noise)]``; ``sample`` draws by the recipe (not
uniformly in the box), and the decision rule covers the whole box. ``uncertainty`` is the fraction of that range
kept about its centre: None or 1 is PGLearn's whole range; below 1 the box and the draws shrink about the centre,
for a case whose rule does not exist over the full range (the rule's error names the largest level that has one).

``input_set="recipe"`` declares the recipe's own set instead of its bounding box: the loads a draw can give,
``{rho : exists a in [load_low, load_high], a (1 - load_noise) <= rho_i <= a (1 + load_noise)}`` with
``rho_i = pd_i / pd0_i``, is the polytope ``(1 - load_noise) rho_i <= (1 + load_noise) rho_j`` for every ordered pair
(``a`` eliminated), cut by the box: ``k (k - 1)`` rows, so it is offered up to ``RECIPE_MAX_INPUTS`` loads. Every
draw of ``sample`` lies in it, and the decision rule only has to cover it: at case89_pegase no rule exists over the
box (``t* = -0.199``) and one does over the recipe's set (``t* = 0.071``).

``input_set="recipe_total"`` declares the box cut to the recipe's range of total load,
``S_lo <= sum_i pd_i <= S_hi``: two rows at any size. ``S_hi = max_a a sum_i pd0_i e_i`` with every positive load's
noise at ``1 + load_noise`` and every negative one's at ``1 - load_noise`` (``S_lo`` the other way round): a
negative load (248 of case6470's 3,601) can sit at the box's low end while the positive ones sit at its high end,
which no draw does, so the box's total-load range is wider than the recipe's. Every draw lies inside (its total is
between the two), and each input reaches both ends of its range in some draw, so the box stays the set's bounding box.
Once the thermal slacks are out of the rule's LP the loads enter it through the total load alone, so over this set
the rule has the margin it would have over the recipe's own polytope (:mod:`hardlinear.rules.rank_one`; equal
at case89, tested): case6470_rte, whose generators cannot carry the box's largest total (1,187.5 p.u. against
1,178.8 p.u. of capacity: ``t* < 0``), carries the recipe's (1,146.8 p.u.).

``sampler="e2elr"`` draws by the E2ELR paper's recipe instead (Chen, Tanneau, Van Hentenryck, "End-to-End Feasible
Optimization Proxies for Large-Scale Economic Dispatch", IEEE TPWRS 2024, arXiv 2304.11726v2, its experiments'
data section): ``pd_i = gamma eta_i pd0_i`` with ``gamma ~ U[load_low, load_high]`` (the paper: 0.8, 1.2) and
``eta_i`` log-normal with mean 1 and standard deviation ``load_noise`` (the paper: 0.05), i.e. ``log eta_i ~
N(mu, s^2)``, ``s^2 = log(1 + load_noise^2)``, ``mu = -s^2 / 2``. A log-normal is unbounded and the box (hence the
decision rule) needs bounds, so ``log eta_i`` is truncated at ``E2ELR_TRUNCATION`` = 4 standard deviations about
``mu`` (drawn by the inverse CDF of the truncated normal: the draws keep the shape, none is clipped): 6.3e-5 of the
paper's mass is left out, moving ``eta``'s mean and standard deviation by less than 1e-6 and 1e-4 relative. The box
and the recipe's sets above use the factor's range ``[exp(mu - 4 s), exp(mu + 4 s)]`` (0.818-1.219 at 5 %) in place
of ``[1 - load_noise, 1 + load_noise]``.

``zero_pmin=True`` sets every generator's lower limit to 0, as the E2ELR paper's model assumes (its ED formulation
has ``0 <= pg <= pmax``); PGLearn, and the default, keep the case's ``pmin``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import torch

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.problems.base import Form, Objective, Problem
from hardlinear.problems.dcopf import Network, branch_susceptance, load_network
from hardlinear.problems.dispatch_projection import (
    REFINE_GEOMETRIES,
    entropic_box_sum,
    project_box_sum,
    proportional_box_sum,
)
from hardlinear.problems.flows import FLOW_MODES, SparseFlows, SusceptanceFactor, pick_flows
from hardlinear.problems.ptdf_cache import cached_ptdf, ptdf_key
from hardlinear.problems.sparse_ptdf import susceptance_matrices

THERMAL_PENALTY = 150_000.0  # $/p.u., PGLearn.jl src/opf/ed.jl
LOAD_LOW, LOAD_HIGH, LOAD_NOISE = 0.6, 1.0, 0.15  # PGLearn.jl exp/config.toml, [sampler.load]
INPUT_SETS = ("box", "recipe", "recipe_total")
SAMPLERS = ("pglearn", "e2elr")
"""``pglearn``: PGLearn's ScaledUniform recipe (uniform global factor and per-load noise); ``e2elr``: the E2ELR paper's
(uniform global factor, log-normal per-load noise truncated at ``E2ELR_TRUNCATION`` standard deviations)."""
E2ELR_TRUNCATION = 4.0
RECIPE_MAX_INPUTS = 200  # k (k - 1) polytope rows: 39,800 at 200 loads; the robust LP carries them per rule row


BALANCE_ULPS = 16.0  # a kept row's balance residual, in units of eps of |demand| + P + R (rows_hold): rounding
ROW_TEST_BLOCK = 1 << 16  # (rows x lines) entries a block of rows_hold's line rows: 512 KB of float64 a buffer
LOADS_MEMO_MAX = 65_536  # inputs (rows x loads) up to which loads() keeps its last result: small batches only
PTDF_CHUNK = 2048  # lines solved per block when building the dense PTDF: its right-hand sides hold nb x 2048 floats


def ptdf_matrix(net: Network, cache_dir: str | None = None) -> np.ndarray:
    """``(branches, buses)`` power transfer distribution factors with the reference bus as the slack: flows
    ``pf = PTDF p`` for nodal injections ``p`` (its column is zero); series susceptance ``x / (r^2 + x^2)``, taps
    ignored: the magnitude of PowerModels' ``calc_branch_y`` that PGLearn's ``LazyPTDF`` uses. With ``cache_dir``,
    stored there and read back bit for bit (:mod:`hardlinear.problems.ptdf_cache`).

    Built by the sparse factor of ``Bbus`` (:class:`~hardlinear.problems.flows.SusceptanceFactor`),
    ``PTDF' = Bbus^-1 Bf'`` a block of lines at a time: a dense solve took 14 minutes at case9241 on one thread, the
    factor takes seconds (the same matrix to rounding: tests)."""
    nb, nl = len(net.bus_ids), len(net.f_bus)
    b = branch_susceptance(net, "paper")

    def compute() -> np.ndarray:
        Bf, Bbus, keep = susceptance_matrices(np.asarray(net.f_bus), np.asarray(net.t_bus), b, nb, net.ref)
        factor, BfT = SusceptanceFactor(Bbus), Bf.T.tocsc()
        ptdf = np.zeros((nl, nb))
        for start in range(0, nl, PTDF_CHUNK):
            stop = min(start + PTDF_CHUNK, nl)
            ptdf[start:stop, keep] = factor.solve_columns(BfT[:, start:stop].toarray()).T
        return ptdf

    key = ptdf_key(np.asarray(net.f_bus), np.asarray(net.t_bus), b, np.asarray([nb, net.ref]))
    return cached_ptdf(cache_dir, key, compute)


def dense_ptdf_reference(net: Network) -> np.ndarray:
    """The PTDF by a dense solve of ``Bbus`` (what :func:`ptdf_matrix` did before the factor): for tests and small
    cases only."""
    nb, nl = len(net.bus_ids), len(net.f_bus)
    Bf, Bbus, keep = susceptance_matrices(np.asarray(net.f_bus), np.asarray(net.t_bus), branch_susceptance(net, "paper"), nb, net.ref)
    ptdf = np.zeros((nl, nb))
    ptdf[:, keep] = sla.solve(Bbus.toarray(), Bf.toarray().T, assume_a="sym").T
    return ptdf


def default_name(case: str) -> str:
    """The dispatch's problem name for a PGLib case: ``ed_case14_ieee``."""
    return f"ed_{case.replace('pglib_opf_', '')}"


def noise_range(load_noise: float, sampler: str = "pglearn") -> tuple[float, float]:
    """The smallest and largest per-load noise factor ``e_i`` of ``sampler`` (module docstring): ``1 -+ load_noise``
    for PGLearn's uniform noise, ``exp(mu -+ 4 s)`` for E2ELR's truncated log-normal of standard deviation ``load_noise``."""
    if sampler == "pglearn":
        return 1.0 - load_noise, 1.0 + load_noise
    mu, s = lognormal_parameters(load_noise)
    return float(np.exp(mu - E2ELR_TRUNCATION * s)), float(np.exp(mu + E2ELR_TRUNCATION * s))


def lognormal_parameters(std: float) -> tuple[float, float]:
    """``(mu, s)`` of the log-normal with mean 1 and standard deviation ``std``: ``s^2 = log(1 + std^2)``, ``mu = -s^2 / 2``."""
    var = float(np.log1p(std * std))
    return -0.5 * var, float(np.sqrt(var))


def load_box(load_low: float, load_high: float, load_noise: float, fraction: float, sampler: str = "pglearn") -> tuple[float, float]:
    """Centre ``m`` and half-width ``r`` of the per-load factor ``pd_i / pd0_i`` over the (shrunk) recipe's range."""
    e_lo, e_hi = noise_range(load_noise, sampler)
    lo, hi = load_low * e_lo, load_high * e_hi
    return 0.5 * (lo + hi), 0.5 * (hi - lo) * fraction


class EconomicDispatch(Problem):
    """PGLearn's economic dispatch on a PGLib case with soft thermal limits (module docstring)."""

    def __init__(
        self,
        case: str = "pglib_opf_case14_ieee",
        form: Form = "standard",
        load_low: float = LOAD_LOW,
        load_high: float = LOAD_HIGH,
        load_noise: float = LOAD_NOISE,
        uncertainty: float | None = None,
        thermal_penalty: float = THERMAL_PENALTY,
        name: str | None = None,
        input_set: str = "box",
        cache_dir: str | None = None,
        sampler: str = "pglearn",
        zero_pmin: bool = False,
        network: Network | None = None,
        flows: str = "auto",
    ) -> None:
        """``cache_dir``: where the PTDF is stored after its first build (None: computed each time); not part of the
        problem, whose arrays are the same either way. ``sampler`` and ``zero_pmin``: the module docstring.
        ``network``: the grid as :meth:`rebuild_arrays` stored it, instead of reading the PGLib case (a checkpoint's
        reload on the core install). ``flows``: how the line rows are evaluated at run time (:meth:`line_flows`):
        ``sparse`` (solves with the factor of ``Bbus``), ``dense`` (the PTDF) or ``auto`` (the faster on this case as
        timed at the first call, dense on a GPU); the same numbers to ~1e-12 relative."""
        if network is not None and network.case != case:
            raise ValueError(f"the given network is {network.case}, not {case}")
        net = network if network is not None else load_network(case)  # first: an unknown case is the error to report
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS} (PGLearn's recipe or the E2ELR paper's); got {sampler!r}")
        if flows not in FLOW_MODES:
            raise ValueError(f"flows must be one of {FLOW_MODES} (the line rows through the factor of Bbus, the dense PTDF, or "
                             f"the faster as timed); got {flows!r}")
        if zero_pmin:
            net = replace(net, pmin=np.zeros_like(net.pmin))  # a copy: load_network's cached case stays as parsed
        if input_set not in INPUT_SETS:
            raise ValueError(
                f"input_set must be one of {INPUT_SETS} (the recipe's bounding box, its own polytope, or the box cut to its "
                f"range of total load); got {input_set!r}"
            )
        if not 0.0 < load_low <= load_high:
            raise ValueError(f"need 0 < load_low <= load_high (PGLearn: 0.6, 1.0); got {load_low}, {load_high}")
        if not 0.0 <= load_noise < 1.0:
            raise ValueError(f"load_noise must be in [0, 1) (PGLearn: 0.15); got {load_noise}")
        uncertainty = 1.0 if uncertainty is None else float(uncertainty)
        if not 0.0 < uncertainty <= 1.0:
            raise ValueError(f"uncertainty must be in (0, 1] (the fraction of PGLearn's load range; None or 1: all of it); got {uncertainty}")
        if not thermal_penalty > 0:
            raise ValueError(f"thermal_penalty must be > 0 (PGLearn: {THERMAL_PENALTY:g}); got {thermal_penalty}")
        if not np.any(net.pd != 0):
            raise ValueError(f"{case} has no load: an economic dispatch needs demand to meet")
        self.case, self.network = case, net
        self.load_low, self.load_high, self.load_noise = float(load_low), float(load_high), float(load_noise)
        self.uncertainty, self.thermal_penalty = uncertainty, float(thermal_penalty)
        self.sampler, self.zero_pmin = sampler, bool(zero_pmin)
        self.noise_lo, self.noise_hi = noise_range(self.load_noise, sampler)
        self.centre, self.half_width = load_box(self.load_low, self.load_high, self.load_noise, self.uncertainty, sampler)
        self.load_bus = np.flatnonzero(net.pd != 0)
        if input_set == "recipe" and len(self.load_bus) > RECIPE_MAX_INPUTS:
            raise ValueError(
                f"input_set='recipe' on {case}: its polytope would have {len(self.load_bus) * (len(self.load_bus) - 1):,} rows "
                f"({len(self.load_bus)} loads; at most {RECIPE_MAX_INPUTS} are offered); use input_set=box (the recipe's "
                "bounding box, the default)"
            )
        if input_set != "box" and uncertainty != 1.0:
            raise ValueError(
                f"input_set={input_set!r} declares a set of the recipe's own, and uncertainty={uncertainty:g} shrinks its box: "
                f"use one or the other (uncertainty=null with input_set={input_set})"
            )
        self.input_set = input_set
        self.ptdf = ptdf_matrix(net, cache_dir)
        self.cache_dir = cache_dir
        self.limited = np.flatnonzero(net.rate_a > 0)
        self.flows, self._flow_choice = flows, {}
        self._loads_memo: tuple | None = None
        self.sparse_flows = SparseFlows(net.f_bus, net.t_bus, branch_susceptance(net, "paper"), len(net.bus_ids), net.ref, self.limited)
        self._injection_buses = np.r_[net.gen_bus, self.load_bus]
        self._flow_bound = self._sparse_flow_bound()
        self.generator_range_total = float(np.abs(net.pmax - net.pmin).sum())  # p.u.: the scale of the dispatch map's sums
        self.generator_size_total = float(np.maximum(np.abs(net.pmin), np.abs(net.pmax)).sum())  # p.u.: bounds sum |pg| within the limits
        family = self._family()
        c = np.r_[net.cost_c1 * net.base_mva, np.full(len(self.limited), self.thermal_penalty)]
        super().__init__(family, Objective(c=c), "lp", form, name or default_name(case))

    def rebuild_arrays(self) -> dict[str, object]:
        """What rebuilds this problem without the PGLib case: the grid (``EconomicDispatch(..., network=)``)."""
        from hardlinear.problems.dcopf import network_arrays

        return {"network": network_arrays(self.network)}

    @staticmethod
    def planned_sizes(case: str = "pglib_opf_case14_ieee", form: Form = "standard", name: str | None = None,
                      zero_pmin: bool = False, **_: object) -> dict[str, int | str]:
        """``problem.name`` and ``problem.sizes()`` read from the case file alone, before the PTDF and the family (seconds
        to minutes and gigabytes at case9241): what the harness checks a batch's memory against before that work."""
        net = load_network(case)
        ng, ne = len(net.gen_bus), int((net.rate_a > 0).sum())
        fixed = int(((0.0 if zero_pmin else net.pmin) == net.pmax).sum())
        m_ineq = 2 * (ng - fixed) + 3 * ne  # the free generators' two limits, each line's two rows and its df >= 0
        n = ng + ne + (m_ineq if form == "standard" else 0)  # the standard form appends one slack per inequality
        return {"name": name or default_name(case), "n": n, "m_eq": 1 + fixed, "m_ineq": m_ineq, "k": int((net.pd != 0).sum())}

    # --- the constraint family ---------------------------------------------------------------------------
    def _family(self) -> JointlyLinearFamily:
        net, ng, ne = self.network, len(self.network.gen_bus), len(self.limited)
        k, n = len(self.load_bus), ng + ne
        pd0 = net.pd[self.load_bus]
        pd_of_x = np.c_[self.centre * pd0, np.diag(self.half_width * pd0)]  # (k, k + 1): pd = pd_of_x @ (1, xi)

        fixed = np.flatnonzero(net.pmin == net.pmax)
        G = sp.vstack([sp.csr_matrix(np.r_[np.ones(ng), np.zeros(ne)][None]), sp.csr_matrix((np.ones(len(fixed)), (np.arange(len(fixed)), fixed)), shape=(len(fixed), n))])
        B_eq = np.vstack([pd_of_x.sum(axis=0, keepdims=True), np.c_[net.pmin[fixed], np.zeros((len(fixed), k))]])

        free = np.setdiff1d(np.arange(ng), fixed)
        unit = sp.csr_matrix((np.ones(len(free)), (np.arange(len(free)), free)), shape=(len(free), n))
        gen_rows = sp.vstack([unit, -unit])
        gen_rhs = np.r_[np.c_[net.pmax[free], np.zeros((len(free), k))], np.c_[-net.pmin[free], np.zeros((len(free), k))]]

        flow_pg = self.ptdf[self.limited][:, net.gen_bus]  # (ne, ng): flow per unit of each generator's output
        flow_pd = self.ptdf[self.limited][:, self.load_bus] @ pd_of_x  # (ne, k + 1): PTDF Al pd, affine in x
        smax = np.c_[net.rate_a[self.limited], np.zeros((ne, k))]
        slack = -sp.eye(ne, format="csr")
        line_rows = sp.vstack([sp.hstack([sp.csr_matrix(flow_pg), slack]), sp.hstack([sp.csr_matrix(-flow_pg), slack])])
        line_rhs = np.r_[smax + flow_pd, smax - flow_pd]
        slack_rows = sp.hstack([sp.csr_matrix((ne, ng)), slack])
        H = sp.vstack([gen_rows, line_rows, slack_rows]).tocsr()
        B_ineq = np.r_[gen_rhs, line_rhs, np.zeros((ne, k + 1))]
        box = InputBox.symmetric(k)
        polytope = {"recipe": self._recipe_polytope, "recipe_total": self._recipe_total_slab}.get(self.input_set, lambda: None)()
        return JointlyLinearFamily(box=box, G=G.tocsr(), B_eq=B_eq, H=H, B_ineq=B_ineq, polytope=polytope)

    def _recipe_polytope(self):
        """The recipe's set in ``xi`` (module docstring): ``e_lo rho_i <= e_hi rho_j`` for ``i != j`` (PGLearn's
        ``e_lo, e_hi = 1 -+ e``; the sampler's noise range, :func:`noise_range`), with
        ``rho = centre + R xi`` and ``R`` the unshrunk half-width (``sample``'s map), checked by
        :func:`~hardlinear.constraints.polytope.make_input_set`."""
        from hardlinear.constraints.polytope import make_input_set

        k, R = len(self.load_bus), self.half_width / self.uncertainty
        e_lo, e_hi = self.noise_lo, self.noise_hi  # PGLearn's: 1 - e, 1 + e
        i, j = np.nonzero(~np.eye(k, dtype=bool))
        A = np.zeros((i.size, k))
        A[np.arange(i.size), i] = R * e_lo
        A[np.arange(i.size), j] -= R * e_hi
        b = np.full(i.size, (e_hi - e_lo) * self.centre)
        box = InputBox.symmetric(k)
        polytope, _, _ = make_input_set(A, b, box.lo, box.hi)
        return polytope

    def recipe_total_range(self) -> tuple[float, float]:
        """``(S_lo, S_hi)``, p.u.: the smallest and largest total load a draw of the recipe can give (module
        docstring), at the corners of its global factor and noise."""
        pd0, e_lo, e_hi = self.network.pd[self.load_bus], self.noise_lo, self.noise_hi
        positive, negative = pd0[pd0 > 0].sum(), pd0[pd0 < 0].sum()
        most, least = e_hi * positive + e_lo * negative, e_lo * positive + e_hi * negative
        factors = (self.load_low, self.load_high)
        return min(f * least for f in factors), max(f * most for f in factors)

    def _recipe_total_slab(self):
        """The box cut to the recipe's total-load range: ``S_lo <= sum_i pd0_i (m + r xi_i) <= S_hi``, padded by
        ``1e-12`` relative so that a draw at an end is not put outside by rounding. Built directly, not by
        :func:`~hardlinear.constraints.polytope.make_input_set` (2k LPs at case6470): its bounding box is the box (module
        docstring) and its interior is not empty (``S_lo < S_hi``, checked)."""
        from hardlinear.constraints.polytope import InputPolytope

        pd0 = self.network.pd[self.load_bus]
        low, high = self.recipe_total_range()
        if not low < high:
            raise ValueError(f"{self.case}: the recipe's total load does not vary ({low:g} p.u.): input_set=recipe_total needs a range")
        row = self.half_width * pd0  # the total load is centre * sum(pd0) + row @ xi
        base, pad = self.centre * pd0.sum(), 1e-12 * max(abs(low), abs(high))
        return InputPolytope(np.vstack([row, -row]), np.array([high - base + pad, base - low + pad]))

    # --- inputs --------------------------------------------------------------------------------------
    def sample(self, n: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """``n`` inputs ``(n, k)`` drawn by the sampler's recipe, ``pd_i = a e_i pd0_i`` with ``a ~ U[load_low,
        load_high]`` and, for PGLearn's, ``e_i ~ U[1 - load_noise, 1 + load_noise]``, for E2ELR's the truncated
        log-normal (module docstring), mapped to the box (shrunk about its centre by ``uncertainty``)."""
        u = torch.rand(n, 1 + self.k, generator=generator, dtype=torch.float64)
        scale = self.load_low + (self.load_high - self.load_low) * u[:, :1]
        if self.sampler == "pglearn":
            noise = 1.0 - self.load_noise + 2.0 * self.load_noise * u[:, 1:]
        else:  # the truncated normal's inverse CDF at u, exponentiated: E2ELR's log-normal within 4 s of mu
            mu, s = lognormal_parameters(self.load_noise)
            lo, hi = (torch.special.ndtr(torch.tensor(t, dtype=torch.float64)) for t in (-E2ELR_TRUNCATION, E2ELR_TRUNCATION))
            noise = torch.exp(mu + s * torch.special.ndtri(lo + (hi - lo) * u[:, 1:]))
        full_half = self.half_width / self.uncertainty
        xi = (scale * noise - self.centre) / full_half  # in [-1, 1] up to rounding
        return xi.clamp(-1.0, 1.0).to(dtype)

    def loads(self, xi: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k) -> pd: (B, k)`` per loaded bus, p.u. For a small batch the last result is kept while its
        input is the same object, unchanged since (its version counter), and the result too: one call of a
        dispatch proxy asks three or four times (its balance's total, the flows, the slack's rounding guard, a kept
        row's balance check), each three tensor calls, a tenth of E2ELR's batch-1 time at case1354. Never for an
        input that requires grad, nor while compiling (a traced program keeps no memo)."""
        compiling = torch.compiler.is_compiling()
        memo = None if compiling else self._loads_memo
        if memo is not None and memo[0] is xi and memo[1] == xi._version and memo[3] == memo[2]._version:
            return memo[2]
        pd0 = self._tensor("pd0", lambda: self.network.pd[self.load_bus], xi)
        pd = pd0 * (self.centre + self.half_width * xi)
        small = xi.numel() <= LOADS_MEMO_MAX
        if not compiling:
            self._loads_memo = (xi, xi._version, pd, pd._version) if small and not xi.requires_grad else None
        return pd

    # --- structure, for the methods that use it (E2ELR) -----------------------------------------------
    def variable_slices(self) -> dict[str, slice]:
        ng = len(self.network.gen_bus)
        return {"pg": slice(0, ng), "df": slice(ng, ng + len(self.limited))}

    def generator_family(self) -> JointlyLinearFamily:
        """The dispatch's rows on its generator outputs alone: the equalities (balance, fixed generators) and the
        inequality rows that hold no thermal slack and some generator (the limits), on the ``pg`` columns. What DC3
        corrects when the line overloads are paid in the objective (``method.thermal=soft``: the E2ELR paper's model).
        The inequality form only (the standard form's slacks sit in every row)."""
        if self.form != "inequality":
            raise ValueError(f"{self.name}: the generators' own rows are read from the inequality form; set problem.form=inequality")
        family, sl = self.family, self.variable_slices()
        G, H = family.G.tocsc(), family.H.tocsc()
        if G[:, sl["df"]].nnz:
            raise ValueError(f"{self.name}: an equality row holds a thermal slack; the generators' rows need them on pg alone")
        on_df = np.asarray(abs(H[:, sl["df"]]).sum(axis=1)).ravel() > 0
        on_pg = np.asarray(abs(H[:, sl["pg"]]).sum(axis=1)).ravel() > 0
        keep = np.flatnonzero(on_pg & ~on_df)
        return JointlyLinearFamily(box=family.box, G=G[:, sl["pg"]].tocsr(), B_eq=family.B_eq, H=H[keep][:, sl["pg"]].tocsr(),
                                   B_ineq=np.asarray(family.B_ineq)[keep], polytope=family.polytope)

    def decision_indices(self) -> np.ndarray:
        """The generator outputs ``pg``; the thermal slack follows from them."""
        return np.arange(self.n_orig)[self.variable_slices()["pg"]]

    # --- line flows: through the factor of Bbus or the dense PTDF (``flows``) ------------------------------
    def flow_mode(self, like: torch.Tensor) -> str:
        """``"sparse"`` or ``"dense"`` for tensors on ``like``'s device: the ``flows`` setting, or with ``auto`` the
        faster of the two batch-1 flows as timed on the first call per device type (dense on a GPU:
        :func:`~hardlinear.problems.flows.pick_flows`); ``flow_timings`` keeps what was measured."""
        key = like.device.type
        if key not in self._flow_choice:
            xi = self.sample(1, torch.Generator().manual_seed(0)).to(like.device)
            pg = torch.as_tensor(self.network.pmax, dtype=torch.float64, device=like.device)[None]
            self._flow_choice[key], self.flow_timings = pick_flows(
                self.flows, like.device, lambda: self._sparse_line_flows(xi, pg), lambda: self._dense_line_flows(xi, pg, keep=False))
        return self._flow_choice[key]

    def line_flows(self, xi: torch.Tensor, pg: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), pg: (B, G) -> pf: (B, E_lim)``, ``PTDF (Ag pg - Al pd(x))`` on the limited lines, in
        ``pg``'s dtype, differentiable in ``pg`` (and ``xi``)."""
        if self.flow_mode(pg) == "sparse":
            return self._sparse_line_flows(xi, pg)
        return self._dense_line_flows(xi, pg)

    def _sparse_line_flows(self, xi: torch.Tensor, pg: torch.Tensor) -> torch.Tensor:
        u = torch.cat([pg, -self.loads(xi.to(pg.dtype))], dim=1)
        return self.sparse_flows.flows(u, self._injection_buses)

    def _dense_line_flows(self, xi: torch.Tensor, pg: torch.Tensor, keep: bool = True) -> torch.Tensor:
        flow_pg = self._tensor("flow_pg", lambda: self.ptdf[self.limited][:, self.network.gen_bus], pg)
        if not keep:  # timing: no memo of the loads' part
            flow_pd = self._tensor("flow_pd", lambda: self.ptdf[self.limited][:, self.load_bus], pg)
            return pg @ flow_pg.T - self.loads(xi.to(pg.dtype)) @ flow_pd.T
        return pg @ flow_pg.T - self._load_flows(xi, pg)[0]

    def _sparse_flow_bound(self) -> dict[str, np.ndarray | float]:
        """What bounds the rounding of a line row when the flows come from the factor: per limited line
        ``a_e = max_i |PTDF_e,i|`` over the injecting buses (``|PTDF_e| |u| <= a_e ||u||_1``), and the factor's
        error relative to ``max_e a_e ||u||_1``, measured here on 8 random injections against the dense PTDF (the
        solve's error depends on Bbus's conditioning, which no a-priori constant states; a line with ``a_e = 0``
        still gets the solve's error, of every line's size)."""
        block = self.ptdf[np.ix_(self.limited, self._injection_buses)]
        a = np.abs(block).max(axis=1) if block.size else np.zeros(len(self.limited))
        u = torch.randn(8, len(self._injection_buses), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        sparse = self.sparse_flows.flows(u, self._injection_buses).numpy()
        dense = u.numpy() @ block.T
        scale = max(float(a.max(initial=0.0)), np.finfo(float).tiny) * np.abs(u.numpy()).sum(axis=1, keepdims=True)
        return {"a": a, "solve_error": float((np.abs(sparse - dense) / scale).max()) if block.size else 0.0}

    def _rounding_guard(self, xi: torch.Tensor, pg: torch.Tensor, mode: str) -> torch.Tensor:
        """``(B, E_lim)``: a bound on the rounding of a line row's evaluation (:meth:`thermal_slack`)."""
        smax = self._tensor("smax", self.network.rate_a[self.limited], pg)
        terms = len(self.network.gen_bus) + len(self.load_bus) + 4
        eps = torch.finfo(pg.dtype).eps
        if mode == "dense":
            flow_pg_abs = self._tensor("flow_pg_abs", lambda: np.abs(self.ptdf[self.limited][:, self.network.gen_bus]), pg)
            size = pg.abs() @ flow_pg_abs.T + self._load_flows(xi, pg)[1] + smax
            return terms * eps * size
        a = self._tensor("flow_bound", self._flow_bound["a"], pg)
        total = pg.abs().sum(dim=1, keepdim=True) + self.loads(xi.to(pg.dtype)).abs().sum(dim=1, keepdim=True)
        solve = 4.0 * max(self._flow_bound["solve_error"], float(eps)) * float(self._flow_bound["a"].max(initial=0.0))
        return terms * eps * (a * total + smax) + solve * total

    def thermal_slack(self, xi: torch.Tensor, pg: torch.Tensor, pf: torch.Tensor | None = None) -> torch.Tensor:
        """``xi: (B, k), pg: (B, G) -> df: (B, E_lim)``, the smallest slack that makes every line row hold:
        ``max(|pf| - smax, 0)`` with ``pf = PTDF (Ag pg - pd)`` (:meth:`line_flows`; pass ``pf`` when it is at hand),
        plus a rounding guard on the lines at or near their limit: the line rows may be evaluated by another sum
        (the family's ``H y - h``, or the other ``flows`` mode), whose rounding could leave a row ``1e-16`` above
        its bound. Where ``|pf| - smax > -g`` the slack is ``|pf| - smax + g`` (at least 0) with ``g`` a bound on
        either evaluation's error: ``(terms + 4) eps`` times the row's sum of absolute terms with the dense PTDF;
        through the factor, that sum bounded by ``a_e (||pg||_1 + ||pd||_1) + smax`` and the factor's measured
        error, ``4 err max_e a_e (||pg||_1 + ||pd||_1)``, added (:meth:`_sparse_flow_bound`). So every line row reads ``<= 0``; at 150,000 $/p.u. the guard
        costs ~1e-5 $ per congested line at most. Lines farther than ``g`` inside their limit keep ``df = 0``
        exactly. The guard carries no gradient.

        With the dense PTDF the loads' part of the flows depends on ``xi`` alone; it is kept for the last ``xi``
        seen (:meth:`_load_flows`), since the proposed method asks twice per batch (before and after its blend)."""
        mode = self.flow_mode(pg)
        if pf is None:
            pf = self.line_flows(xi, pg)
        smax = self._tensor("smax", self.network.rate_a[self.limited], pg)
        if mode == "sparse":
            # the same slack in four passes over (B, E): max(|pf| - smax + g, 0) is |pf| - smax + g where
            # |pf| - smax > -g and 0 elsewhere, and g - smax is one rank-one product (_sparse_guard_minus_smax)
            with torch.no_grad():
                shift = self._sparse_guard_minus_smax(xi, pg)
            # in place on the guard's own (B, E) buffer: two passes fewer over it (a tenth of a batch of 1,024's time)
            return shift.add_(pf.abs()).clamp_min_(0.0)
        with torch.no_grad():
            guard = self._rounding_guard(xi, pg, mode)
        over = pf.abs() - smax
        return torch.where(over > -guard, torch.clamp(over + guard, min=0.0), torch.zeros_like(over))

    def _sparse_guard_minus_smax(self, xi: torch.Tensor, pg: torch.Tensor) -> torch.Tensor:
        """``(B, E_lim)``: :meth:`_rounding_guard`'s sparse bound minus ``smax``, as ``addmm(c1 smax - smax, total,
        c1 a + c2)`` (one pass): ``c1 = terms eps``, ``c2`` the solve's error term, ``total = ||pg||_1 + ||pd||_1``."""
        terms = len(self.network.gen_bus) + len(self.load_bus) + 4
        eps = torch.finfo(pg.dtype).eps
        c1 = terms * eps
        c2 = 4.0 * max(self._flow_bound["solve_error"], float(eps)) * float(self._flow_bound["a"].max(initial=0.0))
        smax = self._tensor("smax", self.network.rate_a[self.limited], pg)
        a = self._tensor("flow_bound", self._flow_bound["a"], pg)
        total = pg.abs().sum(dim=1, keepdim=True) + self.loads(xi.to(pg.dtype)).abs().sum(dim=1, keepdim=True)
        return torch.addmm((c1 - 1.0) * smax, total, (c1 * a + c2).unsqueeze(0))

    def _load_flows(self, xi: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(PTDF Al pd, |PTDF Al| |pd|)`` over the limited lines, ``(B, E_lim)`` each, in ``like``'s dtype: the
        loads' part of the dense flows and of their rounding bound. The last result is kept with a copy
        of its inputs and reused when the next inputs are equal to them (a comparison of ``B k`` numbers against a
        product of ``B k E_lim``); inputs that require grad are never kept."""
        xi = xi.to(like.dtype)
        exporting = torch.compiler.is_exporting()  # a recorded program keeps no memo: its inputs are symbols
        memo = None if exporting else getattr(self, "_load_memo", None)
        same = memo is not None and (memo[0].shape, memo[0].dtype, memo[0].device) == (xi.shape, xi.dtype, xi.device)
        if same and not xi.requires_grad and torch.equal(memo[0], xi):
            return memo[1]
        flow_pd = self._tensor("flow_pd", lambda: self.ptdf[self.limited][:, self.load_bus], like)
        flow_pd_abs = self._tensor("flow_pd_abs", lambda: np.abs(self.ptdf[self.limited][:, self.load_bus]), like)
        pd = self.loads(xi)
        out = (pd @ flow_pd.T, pd.abs() @ flow_pd_abs.T)
        if not exporting:
            self._load_memo = None if xi.requires_grad else (xi.detach().clone(), out)
        return out

    def compact_slack(self, xi: torch.Tensor, y_orig: torch.Tensor, pf: torch.Tensor | None = None) -> torch.Tensor:
        """``xi: (B, k), y_orig: (B, n_orig) -> h - H y: (B, m_ineq)`` of the compact family: the family's product
        with the dense PTDF, or with ``flows`` sparse the rows written out (generator limits, the line rows
        ``smax + df -+ pf``, ``df``) with the flows through the factor."""
        if self.flow_mode(y_orig) == "dense":
            return -self.compact.ineq_resid(xi.to(y_orig.dtype), y_orig)
        pg_free, lo, hi, smax, df, pf = self._compact_pieces(xi, y_orig, pf)
        return torch.cat([hi - pg_free, pg_free - lo, smax + df - pf, smax + df + pf, df], dim=1)

    def _compact_pieces(self, xi: torch.Tensor, y_orig: torch.Tensor, pf: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """What the compact rows are written from, flows through the factor: the free generators' outputs and
        bounds, the line limits, the thermal slacks and the flows."""
        net, sl = self.network, self.variable_slices()
        pg, df = y_orig[:, sl["pg"]], y_orig[:, sl["df"]]
        pf = self.line_flows(xi, pg) if pf is None else pf
        lo, hi = self._free_limits(pg)[:2]
        smax = self._tensor("smax", net.rate_a[self.limited], pg)
        return pg.index_select(1, self._free_generators(pg)), lo, hi, smax, df, pf

    def rows_hold(self, xi: torch.Tensor, pg: torch.Tensor, df: torch.Tensor, pf: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the row ``(pg, df)`` with flows ``pf`` meets the inequality form's rows (every generator
        within its limits, a fixed one at its value; each line's two rows; ``df >= 0``) and the balance to
        :data:`BALANCE_ULPS` rounding units of ``|demand| + P + R``: ``P = sum max(|pmin|, |pmax|)``
        (``generator_size_total``) bounds ``sum |pg|`` for a ``pg`` within its limits (a row outside them is refused by
        its limits), and ``R``, the ranges' total, is there because the maps' own sums have the ranges as terms (the
        entropic map meets its sum to ~8 eps of ``R``, more than 16 eps of the dispatch where the capacity is several
        times the load). A non-finite ``pg``, ``pf`` or ``df`` reads NaN or ``-inf`` in a minimum: not kept. The
        proposed method's dispatch path keeps the rows that pass (``alpha = 0``; :mod:`hardlinear.layers.dispatch_blend`).
        Why the limits on the whole ``pg`` (``refined_dispatch`` writes the fixed generators' value) and a constant
        ``P``: at batch 1 every tensor call counts (~2-5 us each)."""
        net = self.network
        pmin, pmax = self._tensor("pmin", net.pmin, pg), self._tensor("pmax", net.pmax, pg)
        limits = torch.minimum(pg - pmin, pmax - pg).amin(dim=1)
        if df.shape[1]:
            limits = torch.minimum(limits, _line_room(df, pf, self._tensor("smax", net.rate_a[self.limited], pg)))
        demand = self.loads(xi).sum(dim=1)
        size = self.generator_size_total + self.generator_range_total
        tolerance = (demand.abs() + size).mul_(BALANCE_ULPS * torch.finfo(pg.dtype).eps)
        return (limits >= 0) & ((pg.sum(dim=1) - demand).abs() <= tolerance)

    def to_form(self, xi: torch.Tensor, y_orig: torch.Tensor) -> torch.Tensor:
        """Original variables to the form's: the standard form appends the slacks of :meth:`compact_slack`."""
        if self.form == "inequality":
            return y_orig
        return torch.cat([y_orig, self.compact_slack(xi, y_orig)], dim=1)

    def eq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``G y - g``; in the standard form with sparse flows, its inequality part ``H y0 + s - h`` is
        ``s - (h - H y0)`` through the factor (the same rows and order as the family's)."""
        if self.form == "inequality" or self.flow_mode(y) == "dense":
            return super().eq_resid(xi, y)
        y0 = y[:, : self.n_orig]
        return torch.cat([self.compact.eq_resid(xi.to(y.dtype), y0), y[:, self.n_orig :] - self.compact_slack(xi, y0)], dim=1)

    def ineq_resid(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``H y - h``; in the inequality form with sparse flows, through the factor (:meth:`compact_slack`)."""
        if self.form == "standard" or self.flow_mode(y) == "dense":
            return super().ineq_resid(xi, y)
        return -self.compact_slack(xi, y)

    def with_thermal_slack(self, xi: torch.Tensor, pg: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), pg: (B, G) -> y: (B, n)``: the dispatch ``pg`` in the problem's form, with the smallest
        thermal slack that holds its line rows (:meth:`thermal_slack`): what E2ELR, LDF's derived slack and the
        repairs below output. The flows are computed once for both the slack and the form's slacks."""
        pf = self.line_flows(xi, pg)
        y0 = torch.cat([pg, self.thermal_slack(xi, pg, pf)], dim=1)
        if self.form == "inequality":
            return y0
        if self.flow_mode(pg) == "dense":
            return self.to_form(xi, y0)
        return torch.cat([y0, self.compact_slack(xi, y0, pf)], dim=1)

    def repair_slack(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> (B, n)``: ``y`` with each thermal slack lowered to the smallest that holds its
        line rows for the same ``pg`` (feasible ``y`` stays feasible, its objective does not rise)."""
        return self.with_thermal_slack(xi, y[:, self.variable_slices()["pg"]])

    def zero_slack(self, xi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> (B, n)``: ``y`` with every thermal slack set to zero (the line rows may then be
        violated: the proposed method's blend holds them, ``slack_repair=zero``)."""
        pg = y[:, self.variable_slices()["pg"]]
        return self.to_form(xi, torch.cat([pg, pg.new_zeros(pg.shape[0], len(self.limited))], dim=1))

    def exact_refinement(self, xi: torch.Tensor, y: torch.Tensor, geometry: str = "euclidean") -> torch.Tensor:
        """``xi: (B, k), y: (B, n) -> (B, n)``: ``y``'s dispatch moved onto the generator limits and the power balance
        (fixed generators at their value), with the smallest thermal slack for it: a point of ``C(x)`` up to
        rounding (the proposed method's ``refine=problem``). Differentiable in ``y``. ``geometry``:

        - ``euclidean``: the nearest point (:func:`~hardlinear.problems.dispatch_projection.project_box_sum`); its
          generators sit at their own limits where the projection puts them;
        - ``entropic``: ``y``'s dispatch read as logits in units of each generator's range (``(pg - mid) /
          half_range``, the raw network output under ``method.output_scale``) and taken to the Bregman projection
          of ``pmin + range * sigmoid(logit)`` (:func:`~hardlinear.problems.dispatch_projection.entropic_box_sum`):
          every generator strictly inside its limits, the map smooth;
        - ``proportional``: the same logits through ``pmin + range * sigmoid(logit)``, then E2ELR's proportional
          response (:func:`~hardlinear.problems.dispatch_projection.proportional_box_sum`): every generator moves the
          same fraction of its headroom, closed form."""
        return self.with_thermal_slack(xi, self.refined_dispatch(xi, y, geometry))

    def refined_dispatch(self, xi: torch.Tensor, y: torch.Tensor, geometry: str = "euclidean") -> torch.Tensor:
        """``(B, k), (B, n) -> pg: (B, G)``: :meth:`exact_refinement`'s dispatch, before its thermal slack."""
        net, sl = self.network, self.variable_slices()
        pg = y[:, sl["pg"]]
        free = self._free_generators(pg)
        lo, hi, mid, half, width = self._free_limits(pg)
        if geometry not in REFINE_GEOMETRIES:
            raise ValueError(f"geometry must be one of {REFINE_GEOMETRIES}; got {geometry!r}")
        every = free.numel() == pg.shape[1]  # no fixed generator (case1354): no selection, nothing to subtract
        total = self.loads(xi.to(pg.dtype)).sum(dim=1)
        if not every:
            total = total - self._tensor("pmin_fixed_total", lambda: np.array(net.pmin[net.pmin == net.pmax].sum()), pg)
        pg_free = pg if every else pg.index_select(1, free)
        if geometry == "euclidean":
            pg_free = project_box_sum(pg_free, total, lo, hi)
        else:  # entropic and proportional read the output as logits in units of each generator's range
            logits = (pg_free - mid) / half
            if geometry == "entropic":
                pg_free = entropic_box_sum(logits, total, lo, hi)
            else:
                pg_free = proportional_box_sum(lo + width * torch.sigmoid(logits), total, lo, hi)[0]
        if every:
            return pg_free
        return self._tensor("pmin", net.pmin, pg).expand_as(pg).index_copy(1, free, pg_free)

    def _free_limits(self, like: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The free generators' (``pmin < pmax``) limits, midpoints, half ranges and ranges, like ``like``, made once
        per device and dtype (each otherwise a tensor call a row)."""
        key = ("free_limits", like.device, like.dtype)
        if key not in self._t_cache:
            free = self.network.pmin != self.network.pmax
            lo, hi = self.network.pmin[free], self.network.pmax[free]
            self._t_cache[key] = tuple(torch.as_tensor(v, dtype=like.dtype, device=like.device)
                                       for v in (lo, hi, 0.5 * (lo + hi), 0.5 * (hi - lo), hi - lo))
        return self._t_cache[key]

    def _free_generators(self, like: torch.Tensor) -> torch.Tensor:
        """The indices of the generators with ``pmin < pmax``, on ``like``'s device (made once: a boolean mask
        built and indexed per call cost the batch-1 map a tenth of its time)."""
        key = ("free_generators", like.device)
        if key not in self._t_cache:
            net = self.network
            self._t_cache[key] = torch.as_tensor(np.flatnonzero(net.pmin != net.pmax), device=like.device)
        return self._t_cache[key]

    # --- reference solves -------------------------------------------------------------------------
    def resolve_lazy_rows(self, lazy_rows: bool | None, solver: str) -> bool:
        """Lazy line rows (:mod:`hardlinear.problems.ed_reference`, PGLearn's way) by default on HiGHS, whose basis
        survives added rows; ``lazy_rows=False`` solves the whole LP (any solver)."""
        if lazy_rows is None:
            return solver == "highs"
        if lazy_rows and solver != "highs":
            raise ValueError(
                f"lazy line rows warm-start HiGHS between rounds; data.solver={solver!r} solves the whole LP: "
                "use data.solver=highs, or data.lazy_rows=false (or null)"
            )
        return bool(lazy_rows)

    def lazy_reference(self, **options):  # noqa: ANN201
        """The lazy line-row solver of this dispatch (HiGHS ``options`` as the ``highs`` backend takes them)."""
        from hardlinear.problems.ed_reference import LazyDispatchSolver

        return LazyDispatchSolver(self, **options)

    def rebuild(self, uncertainty: float) -> EconomicDispatch:
        """The same dispatch at another uncertainty level (what the rule's search for the largest level builds)."""
        return EconomicDispatch(self.case, self.form, self.load_low, self.load_high, self.load_noise, uncertainty,
                                self.thermal_penalty, self.name, self.input_set, self.cache_dir, sampler=self.sampler,
                                zero_pmin=self.zero_pmin, flows=self.flows)

    def fingerprint(self) -> str:
        """The datasets' cache key (:meth:`Problem.fingerprint`), with E2ELR's sampler and its settings mixed in: its
        draws differ from PGLearn's over the same arrays. PGLearn's keeps the arrays' key, so its cached sets stay."""
        base = super().fingerprint()
        if self.sampler == "pglearn":
            return base
        import hashlib

        recipe = f"{base}|sampler={self.sampler}|{self.load_low!r}|{self.load_high!r}|{self.load_noise!r}|{E2ELR_TRUNCATION!r}"
        return hashlib.sha256(recipe.encode()).hexdigest()

    def describe(self) -> str:
        lo, hi = self.centre - self.half_width, self.centre + self.half_width
        where = {"recipe": " (the recipe's polytope)", "recipe_total": " (the box cut to the recipe's total load)"}.get(self.input_set, "")
        drawn = " (E2ELR's sampler)" if self.sampler == "e2elr" else ""
        pmin = ", pmin = 0" if self.zero_pmin else ""
        return f"{super().describe()} loads {lo:.3g}-{hi:.3g} x nominal{drawn}{where}{pmin}"


def _line_room(df: torch.Tensor, pf: torch.Tensor, smax: torch.Tensor) -> torch.Tensor:
    """``(B,)``: the smallest of ``smax + df - |pf|`` (a line's two rows) and ``df`` per row, in blocks of rows of at
    most :data:`ROW_TEST_BLOCK` entries: the buffers then stay in cache and the (B, lines) arrays are read once (at
    case2869, batch 1,024: 53 ms unblocked, 15 ms in blocks; 2^15 to 2^18 entries a block within 10 % of it)."""
    rows = max(1, ROW_TEST_BLOCK // df.shape[1])
    if df.shape[0] > rows:
        return torch.cat([_line_room(df[i : i + rows], pf[i : i + rows], smax) for i in range(0, df.shape[0], rows)])
    return torch.minimum((df + smax).sub_(pf.abs()).amin(dim=1), df.amin(dim=1))
