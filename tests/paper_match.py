"""Test utilities: find the orderings under which the paper's published problem data equals ours.

The paper's files order buses, generators, branches, constraint rows and inputs in their own way (a
permutation of MATPOWER's), and may write a row with the opposite sign. Instead of hand-typed permutation
lists, the correspondence is recovered from structure alone by colour refinement (1-dimensional
Weisfeiler-Lehman) on labelled graphs built the same way from their data and from ours, individualising one
node of a tied class at a time when refinement stalls. A recovered correspondence proves nothing by itself:
the tests then check the data entry by entry under it.

Numbers become labels through :func:`quantize`, which clusters nearly equal values (single linkage within a
relative tolerance), so that float noise cannot split values that are equal.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp


class NotIsomorphic(AssertionError):
    """Colour refinement found the two graphs to differ (different colour-class sizes)."""


def load_paper(paper_data_dir: Path, name: str) -> dict[str, np.ndarray]:
    """The paper's ``{name}.npz`` as a dict of float64 arrays."""
    with np.load(paper_data_dir / f"{name}.npz") as data:
        return {key: np.asarray(data[key], dtype=np.float64) for key in data.files}


# --- numbers to labels ------------------------------------------------------------------------------
def quantize(values: np.ndarray, rtol: float = 1e-9, atol: float = 1e-12) -> np.ndarray:
    """Integer labels for ``values`` such that values within ``atol + rtol |v|`` of a neighbour share one.

    Single linkage over the sorted values: equal-up-to-noise values never get different labels (a chain of
    close values may merge into one label, which only costs discrimination, never soundness).
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(v, kind="stable")
    s = v[order]
    new_cluster = np.diff(s) > atol + rtol * np.maximum(np.abs(s[1:]), np.abs(s[:-1]))
    ids = np.concatenate([[0], np.cumsum(new_cluster)])
    out = np.empty_like(ids)
    out[order] = ids
    return out


# --- colour refinement ------------------------------------------------------------------------------
@dataclass
class Graph:
    """A node-labelled graph whose adjacency entries are ``(neighbour, sign, label)``.

    ``sign`` is +1/-1 for a signed entry and 0 for an unsigned one. A node with ``sign_free`` set may be
    negated as a whole (a constraint row): its signature is the smaller of its signatures with all its
    entries' signs kept and with all of them flipped, so only relative signs within the node count.
    """

    labels: list[Hashable]
    adj: list[list[tuple[int, int, Hashable]]] = field(default_factory=list)
    sign_free: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.labels)
        if not self.adj:
            self.adj = [[] for _ in range(n)]
        if not self.sign_free:
            self.sign_free = [False] * n
        if len(self.adj) != n or len(self.sign_free) != n:
            raise ValueError("labels, adj and sign_free need one entry per node")

    @property
    def size(self) -> int:
        return len(self.labels)

    def add_edge(self, u: int, v: int, label: Hashable, sign_uv: int = 0, sign_vu: int = 0) -> None:
        """An edge seen from ``u`` with sign ``sign_uv`` and from ``v`` with ``sign_vu``."""
        self.adj[u].append((v, sign_uv, label))
        self.adj[v].append((u, sign_vu, label))


def _signatures(g: Graph, colour: np.ndarray) -> list[tuple]:
    sigs = []
    for v in range(g.size):
        items = sorted((s, repr(lab), int(colour[u])) for u, s, lab in g.adj[v])
        sig = tuple(items)
        if g.sign_free[v]:
            flipped = tuple(sorted((-s, repr(lab), int(colour[u])) for u, s, lab in g.adj[v]))
            sig = min(sig, flipped)
        sigs.append((int(colour[v]), sig))
    return sigs


def _refine(a: Graph, b: Graph, ca: np.ndarray, cb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Refine the joint colouring of ``a`` and ``b`` to its fixed point; raise if class sizes differ."""
    n_colours = len(set(ca.tolist()) | set(cb.tolist()))
    while True:
        sa, sb = _signatures(a, ca), _signatures(b, cb)
        ids: dict[tuple, int] = {}
        for sig in sorted(set(sa) | set(sb)):
            ids[sig] = len(ids)
        ca = np.array([ids[s] for s in sa], dtype=np.int64)
        cb = np.array([ids[s] for s in sb], dtype=np.int64)
        _check_class_sizes(ca, cb)
        if len(ids) == n_colours:
            return ca, cb
        n_colours = len(ids)


def _check_class_sizes(ca: np.ndarray, cb: np.ndarray) -> None:
    m = int(max(ca.max(initial=-1), cb.max(initial=-1))) + 1
    na, nb = np.bincount(ca, minlength=m), np.bincount(cb, minlength=m)
    if not np.array_equal(na, nb):
        bad = np.flatnonzero(na != nb)[:5]
        raise NotIsomorphic(f"colour classes differ in size: colour {bad.tolist()} has {na[bad]} vs {nb[bad]} nodes")


def colour_match(a: Graph, b: Graph, max_individualisations: int = 10_000) -> np.ndarray:
    """A bijection ``perm`` (node ``i`` of ``a`` <-> node ``perm[i]`` of ``b``) that colour refinement with
    individualisation finds. No backtracking: a tie that is not an automorphism can give a wrong bijection,
    which the caller's entry-by-entry check then reports."""
    if a.size != b.size:
        raise NotIsomorphic(f"graphs have {a.size} and {b.size} nodes")
    keys = sorted({repr(lab) for lab in a.labels} | {repr(lab) for lab in b.labels})
    index = {k: i for i, k in enumerate(keys)}
    ca = np.array([index[repr(lab)] for lab in a.labels], dtype=np.int64)
    cb = np.array([index[repr(lab)] for lab in b.labels], dtype=np.int64)
    _check_class_sizes(ca, cb)
    for _ in range(max_individualisations):
        ca, cb = _refine(a, b, ca, cb)
        counts = np.bincount(ca)
        tied = np.flatnonzero(counts > 1)
        if tied.size == 0:
            perm = np.empty(a.size, dtype=np.int64)
            where_b = np.empty(len(counts), dtype=np.int64)
            where_b[cb] = np.arange(b.size)
            perm[:] = where_b[ca]
            return perm
        c = tied[np.argmin(counts[tied])]
        fresh = len(counts)
        ca[np.flatnonzero(ca == c)[0]] = fresh
        cb[np.flatnonzero(cb == c)[0]] = fresh
    raise RuntimeError(f"no discrete colouring after {max_individualisations} individualisations")


# --- standard-form data [A | b_scale] -----------------------------------------------------------------
@dataclass(frozen=True)
class StandardData:
    """A standard-form problem ``A(x) y = b_scale x``: ``A`` as ``(k+1, m, n)`` slices (one slice when the
    left-hand side is constant), ``b_scale (m, k+1)``, per-column labels (e.g. cost and sign constraint)."""

    A: np.ndarray  # (s, m, n), s = 1 or k + 1
    b_scale: np.ndarray  # (m, k + 1)
    col_labels: Sequence[Hashable]

    @property
    def shape(self) -> tuple[int, int]:
        return self.A.shape[1], self.A.shape[2]


@dataclass(frozen=True)
class RowColMatch:
    """Their row ``r`` is ``row_sign[r]`` times our row ``row[r]``; their variable ``j`` is our ``col[j]``;
    their input column ``j`` of ``x = (1, xi)`` is our ``inp[j]`` (``inp[0] = 0``)."""

    row: np.ndarray
    row_sign: np.ndarray
    col: np.ndarray
    inp: np.ndarray

    def xi_to_ours(self, xi_theirs: np.ndarray) -> np.ndarray:
        """``(B, k)`` inputs in their order -> ``(B, k)`` in ours."""
        xi_theirs = np.atleast_2d(xi_theirs)
        out = np.empty_like(xi_theirs)
        out[:, self.inp[1:] - 1] = xi_theirs
        return out


def _matrix_graph(d: StandardData, mag_labels: Sequence[tuple], rhs_labels: np.ndarray) -> Graph:
    """Rows, variable columns and input columns; an edge per nonzero, row-side signed (rows may flip)."""
    _, m, n = d.A.shape
    k1 = d.b_scale.shape[1]
    labels: list[Hashable] = [("row",)] * m + [("var", lab) for lab in d.col_labels]
    labels += [("input", j == 0) for j in range(k1)]
    g = Graph(labels=labels, sign_free=[True] * m + [False] * (n + k1))
    rr, cc = np.nonzero(np.any(d.A != 0, axis=0))
    for (r, c), lab in zip(zip(rr, cc), mag_labels):
        vec = d.A[:, r, c]
        lead = vec[np.flatnonzero(vec)[0]]
        g.add_edge(int(r), m + int(c), lab, int(np.sign(lead)), 0)
    rr, jj = np.nonzero(d.b_scale)
    for (r, j), lab in zip(zip(rr, jj), rhs_labels):
        g.add_edge(int(r), m + n + int(j), ("rhs", lab), int(np.sign(d.b_scale[r, j])), 0)
    return g


def _entry_labels(datas: Sequence[StandardData], rtol: float) -> tuple[list[list[tuple]], list[np.ndarray]]:
    """Shared labels of the matrix entries (vectors over slices, leading sign made positive) and of the
    right-hand-side magnitudes, one list per problem."""
    vecs, rhs = [], []
    for d in datas:
        rr, cc = np.nonzero(np.any(d.A != 0, axis=0))
        v = d.A[:, rr, cc].T  # (nnz, slices)
        lead = v[np.arange(len(v)), np.argmax(v != 0, axis=1)]
        vecs.append(v * np.sign(lead)[:, None])
        rhs.append(np.abs(d.b_scale[np.nonzero(d.b_scale)]))
    ids = quantize(np.concatenate([v.ravel() for v in vecs]), rtol=rtol)
    rids = quantize(np.concatenate(rhs), rtol=rtol)
    mags, rhs_labels, start, rstart = [], [], 0, 0
    for v, r in zip(vecs, rhs):
        mags.append([tuple(row) for row in ids[start : start + v.size].reshape(v.shape).tolist()])
        rhs_labels.append(rids[rstart : rstart + r.size])
        start, rstart = start + v.size, rstart + r.size
    return mags, rhs_labels


def match_standard_form(theirs: StandardData, ours: StandardData, rtol: float = 1e-9) -> RowColMatch:
    """Recover row order, row signs, variable order and input order between two standard-form problems."""
    if theirs.A.shape != ours.A.shape or theirs.b_scale.shape != ours.b_scale.shape:
        raise NotIsomorphic(f"shapes differ: A {theirs.A.shape} vs {ours.A.shape}, b {theirs.b_scale.shape} vs {ours.b_scale.shape}")
    mags, rhs = _entry_labels([theirs, ours], rtol)
    ga = _matrix_graph(theirs, mags[0], rhs[0])
    gb = _matrix_graph(ours, mags[1], rhs[1])
    perm = colour_match(ga, gb)
    m, n = theirs.shape
    row, col, inp = perm[:m], perm[m : m + n] - m, perm[m + n :] - m - n
    if np.any(row >= m) or np.any(col < 0) or np.any(col >= n) or np.any(inp < 0):
        raise NotIsomorphic("the matching mixes rows, variables and inputs")
    # Row signs from each row's largest entry.
    sign = np.ones(m)
    for r in range(m):
        a_row = np.concatenate([theirs.A[:, r, :].ravel(), theirs.b_scale[r]])
        b_row = np.concatenate([ours.A[:, row[r], col].ravel(), ours.b_scale[row[r], inp]])
        j = int(np.argmax(np.abs(a_row)))
        sign[r] = 1.0 if a_row[j] * b_row[j] >= 0 else -1.0
    return RowColMatch(row=row, row_sign=sign, col=col, inp=inp)


def permuted_ours(ours: StandardData, match: RowColMatch) -> tuple[np.ndarray, np.ndarray]:
    """Our ``A`` slices and ``b_scale`` in their row, column and input order, with their row signs."""
    A = ours.A[:, match.row][:, :, match.col] * match.row_sign[None, :, None]
    b = ours.b_scale[match.row][:, match.inp] * match.row_sign[:, None]
    return A, b


def standard_data_of(problem) -> StandardData:
    """Our standard-form family as :class:`StandardData`; columns labelled by (cost, sign constraint)."""
    fam = problem.family
    n = fam.n
    if hasattr(fam, "G_stack"):
        A = np.asarray(fam.G_stack)
    else:
        A = sp.csr_matrix(fam.G).toarray()[None]
    c = np.zeros(n)
    c[: problem.n_orig] = problem.objective_data.c
    nonneg = np.zeros(n)
    nonneg[problem.n_orig :] = 1.0
    return StandardData(A=A, b_scale=np.asarray(fam.B_eq), col_labels=column_labels(c, nonneg))


def column_labels(c: np.ndarray, nonneg: np.ndarray) -> list[tuple]:
    """``(cost, nonnegative)`` labels; costs are rounded to 10 significant digits so both sides agree."""
    return [(float(f"{ci:.10g}") + 0.0, bool(s)) for ci, s in zip(c, nonneg)]  # + 0.0: no -0.0


# --- DC-OPF 118/200: the bus graph seen through a decision rule ---------------------------------------
@dataclass(frozen=True)
class RuleGraph:
    """Edges ``(i, j, b)``: bus pairs whose angle-difference rule is parallel to some branch-flow rule, with
    the ratio ``b`` (the susceptance for a true branch), and pairs with identical angle rules."""

    flow_pairs: list[tuple[int, int, float, int]]  # (i, j, ratio, flow column)
    same_pairs: list[tuple[int, int]]


def rule_graph(
    theta: np.ndarray,
    pf: np.ndarray,
    susceptances: np.ndarray | None = None,
    fit_tol: float = 1e-8,
    b_rtol: float = 1e-7,
    same_rtol: float = 1e-9,
) -> RuleGraph:
    """From the coefficient vectors of an affine rule (``theta: (nb, k+1)``, ``pf: (nl, k+1)``), every pair
    ``(i, j)`` with ``pf_l = b (theta_i - theta_j)``, ``b > 0``, up to ``1 - cos^2 < fit_tol``; with
    ``susceptances`` given, only pairs whose ratio ``b`` is one of them (within ``b_rtol``). Buses whose angle
    rules agree within ``same_rtol`` (relative) form "same" pairs and are never a flow pair.

    A true branch is always among them. Structurally forced coincidences add further pairs: a chain through
    a bus without injection makes its flows parallel; a dead end without injection carries no flow and
    repeats its neighbour's angle (a "same" pair). A rule whose generators do not respond to the inputs
    makes every flow of a region without loads constant, hence parallel to each other: the susceptance filter
    removes those spurious pairs (their ratio is arbitrary). Applied alike to their rule and to a synthetic
    rule of ours, the construction gives graphs that correspond bus for bus.
    """
    nb = theta.shape[0]
    norm2 = np.einsum("ij,ij->i", theta, theta)
    d2 = np.stack([np.einsum("ij,ij->i", theta - theta[i], theta - theta[i]) for i in range(nb)])
    scale = max(float(norm2.max()), 1e-300)
    same = d2 <= same_rtol**2 * np.maximum(norm2[:, None], norm2[None, :])
    np.fill_diagonal(same, False)
    iu = np.triu_indices(nb, 1)
    same_pairs = [(int(i), int(j)) for i, j in zip(*iu) if same[i, j]]
    valid = ~same
    np.fill_diagonal(valid, False)
    known = None if susceptances is None else np.sort(np.asarray(susceptances, dtype=np.float64))
    flow_pairs = []
    proj = pf @ theta.T  # (nl, nb)
    pf2 = np.einsum("ij,ij->i", pf, pf)
    for line in range(pf.shape[0]):
        if pf2[line] <= 1e-20 * scale:
            continue  # zero flow in every instance: the rule says nothing about its ends
        num = proj[line][:, None] - proj[line][None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            resid = 1.0 - num**2 / (d2 * pf2[line])
            ratio = num / d2
        ok = valid & (num > 0) & (resid < fit_tol)
        if known is not None:
            pos = np.clip(np.searchsorted(known, ratio), 1, len(known) - 1)
            near = np.minimum(np.abs(ratio - known[pos - 1]), np.abs(ratio - known[pos]))
            ok &= near <= b_rtol * np.abs(ratio)
        for i, j in zip(*np.nonzero(ok)):
            flow_pairs.append((int(i), int(j), float(ratio[i, j]), line))
    return RuleGraph(flow_pairs=flow_pairs, same_pairs=same_pairs)


def bus_graphs(
    rg_a: RuleGraph, labels_a: Sequence[Hashable], rg_b: RuleGraph, labels_b: Sequence[Hashable], rtol: float
) -> tuple[Graph, Graph]:
    """Undirected bus graphs of two rule graphs with shared labels for the ratios ``b``.

    Flow pairs are deduplicated by (unordered pair, ratio label): how many flow columns fit a pair depends on
    the rule (equal constant flows in theirs make several columns fit each of several pairs), the set of
    pairs does not.
    """
    ratios = quantize(np.array([p[2] for p in rg_a.flow_pairs + rg_b.flow_pairs]), rtol=rtol)
    graphs, start = [], 0
    for rg, labels in ((rg_a, labels_a), (rg_b, labels_b)):
        g = Graph(labels=list(labels))
        edges = {
            (min(i, j), max(i, j), int(lab))
            for (i, j, _, _), lab in zip(rg.flow_pairs, ratios[start : start + len(rg.flow_pairs)])
        }
        for i, j, lab in sorted(edges):
            g.add_edge(i, j, ("flow", lab))
        for i, j in rg.same_pairs:
            g.add_edge(i, j, ("same",))
        start += len(rg.flow_pairs)
        graphs.append(g)
    return graphs[0], graphs[1]


def synthetic_rule(
    net, susceptance: np.ndarray, uncertainty: float, generator: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """An affine rule ``(theta (nb, k+1), pf (nl, k+1))`` of our network (``hardlinear.problems.dcopf.Network``
    with branch susceptances ``susceptance``) that satisfies its equalities (not its inequalities).

    Dispatchable generators get random coefficients (rescaled so total generation meets total demand in
    every instance), fixed ones their fixed output, as a rule must; angles follow from the nodal balance with
    the reference angle at zero, flows from the flow definitions. ``k`` = number of buses.
    """
    nb, ng = len(net.bus_ids), len(net.gen_bus)
    load = np.zeros((nb, nb + 1))
    load[:, 0] = net.pd + net.gs
    load[np.arange(nb), 1 + np.arange(nb)] = uncertainty * net.pd
    fixed = net.pmin == net.pmax
    pg = np.zeros((ng, nb + 1))
    pg[fixed, 0] = net.pmin[fixed]
    free = np.flatnonzero(~fixed)
    raw = generator.uniform(0.5, 1.5, size=(len(free), nb + 1))
    need = load.sum(axis=0) - pg.sum(axis=0)
    pg[free] = raw * (need / raw.sum(axis=0))[None, :]
    inj = -load
    np.add.at(inj, net.gen_bus, pg)
    nl = len(net.f_bus)
    incidence = sp.csr_matrix(
        (np.r_[np.ones(nl), -np.ones(nl)], (np.r_[np.arange(nl), np.arange(nl)], np.r_[net.f_bus, net.t_bus])),
        shape=(nl, nb),
    )
    bbus = (incidence.T @ sp.diags(susceptance) @ incidence).toarray()
    keep = np.setdiff1d(np.arange(nb), [net.ref])
    theta = np.zeros((nb, nb + 1))
    theta[keep] = np.linalg.solve(bbus[np.ix_(keep, keep)], inj[keep])
    pf = susceptance[:, None] * (incidence @ theta)
    return theta, pf


@dataclass(frozen=True)
class BusMatch:
    """Their bus ``j`` is our bus ``bus[j]``; ``theirs``/``ours`` are the rule graphs that were matched."""

    bus: np.ndarray
    theirs: RuleGraph
    ours: RuleGraph

    def xi_to_ours(self, xi_theirs: np.ndarray) -> np.ndarray:
        """``(B, k)`` inputs in their bus order -> ``(B, k)`` in ours (input ``j`` is bus ``j`` on both sides)."""
        xi_theirs = np.atleast_2d(xi_theirs)
        out = np.empty_like(xi_theirs)
        out[:, self.bus] = xi_theirs
        return out


def match_buses_by_rule(paper: dict[str, np.ndarray], problem, seed: int = 0, b_rtol: float = 1e-7) -> BusMatch:
    """Bus correspondence of a DC-OPF whose matrix was not published, from the paper's decision rule.

    Their layout is ``[theta (nb) | pg (ng) | pf (nl) | slacks]`` and their balance row of bus ``j`` is row
    ``1 + j`` of ``b_scale`` (``r pd_j`` in input column ``j``, ``pd_j + gs_j`` in the constant column, up to
    sign). Buses are labelled by those two numbers and by being the reference (angle rule identically zero);
    edges come from :func:`rule_graph` on their rule and on a :func:`synthetic_rule` of ours.
    """
    from hardlinear.problems.dcopf import branch_susceptance

    net = problem.network
    nb, ng, nl = len(net.bus_ids), len(net.gen_bus), len(net.f_bus)
    rule = np.column_stack([paper["ldr_bias"], paper["ldr_weight"]])
    theta_a, pf_a = rule[:nb], rule[nb + ng : nb + ng + nl]
    balance = paper["b_scale"][1 : nb + 1]
    rpd_a = np.abs(balance[np.arange(nb), 1 + np.arange(nb)])
    pd_a = np.abs(balance[:, 0])
    ref_a = ~np.any(theta_a != 0, axis=1)
    b = branch_susceptance(net, problem.susceptance)
    theta_b, pf_b = synthetic_rule(net, b, problem.uncertainty, np.random.default_rng(seed))
    ref_b = np.arange(nb) == net.ref
    rpd = quantize(np.r_[rpd_a, problem.uncertainty * net.pd])
    pd = quantize(np.r_[pd_a, np.abs(net.pd + net.gs)])
    labels_a = [(int(rpd[i]), int(pd[i]), bool(ref_a[i])) for i in range(nb)]
    labels_b = [(int(rpd[nb + i]), int(pd[nb + i]), bool(ref_b[i])) for i in range(nb)]
    rg_a = rule_graph(theta_a, pf_a, b, b_rtol=b_rtol)
    rg_b = rule_graph(theta_b, pf_b, b, b_rtol=b_rtol)
    ga, gb = bus_graphs(rg_a, labels_a, rg_b, labels_b, rtol=b_rtol)
    return BusMatch(bus=colour_match(ga, gb), theirs=rg_a, ours=rg_b)
