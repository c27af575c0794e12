"""The arithmetic floor of a method's forward pass: the multiply-adds per instance (by dtype) and the bytes of
constants one call must read, derived from the shapes of the set-up method.

Why: a time alone does not say whether a method is slow because it has much to compute or because it computes
badly. Beside each measured time the benchmark puts what the method cannot avoid: each constant matrix read once
per call and multiplied once per instance (per iteration, for a method that iterates). Elementwise passes
(clamps, maxima, the blend's ``lerp``) are not counted: they are memory traffic on the batch, not constants.

One small function per method class (:data:`DERIVATIONS`, keyed by the class name, so that a new method is picked
up without an if/elif elsewhere); a class without one gets :func:`generic`: the task network plus every
floating matrix buffer of the method read once per instance (per iteration), marked ``generic``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class Floor:
    """Per instance: multiply-adds by dtype; per call: bytes of constants; how it was derived."""

    macs: dict[str, float] = field(default_factory=dict)  # dtype name -> multiply-adds per instance
    const_bytes: float = 0.0
    terms: list[str] = field(default_factory=list)
    exact: bool = True  # False: a generic lower bound (constants read once), not the method's own derivation

    def add(self, what: str, macs: float, dtype: torch.dtype | str, const_numel: float = 0, itemsize: int | None = None):
        name = str(dtype).removeprefix("torch.")
        self.macs[name] = self.macs.get(name, 0.0) + float(macs)
        size = itemsize if itemsize is not None else torch.empty(0, dtype=_dtype(name)).element_size()
        self.const_bytes += float(const_numel) * size
        self.terms.append(f"{what}: {macs:,.0f} {name}")
        return self

    def merge(self, other: Floor) -> Floor:
        for k, v in other.macs.items():
            self.macs[k] = self.macs.get(k, 0.0) + v
        self.const_bytes += other.const_bytes
        self.terms += other.terms
        self.exact = self.exact and other.exact
        return self

    def describe(self) -> str:
        return "; ".join(self.terms)


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


# --- pieces -------------------------------------------------------------------------------------------------
def network(net: nn.Module, label: str = "network") -> Floor:
    """Every ``nn.Linear`` of the network: ``in x out`` multiply-adds in its dtype (batch norm and ``Standardize``
    are affine and fold into them: not counted)."""
    f = Floor()
    for i, mod in enumerate(m for m in net.modules() if isinstance(m, nn.Linear)):
        W = mod.weight
        numel = W.numel() + (mod.bias.numel() if mod.bias is not None else 0)
        f.add(f"{label} layer {i} {W.shape[1]}x{W.shape[0]}", W.numel(), W.dtype, numel, W.element_size())
    return f


def matrix(f: Floor, what: str, t: torch.Tensor | None, times: float = 1.0, dtype: torch.dtype | None = None) -> Floor:
    """One product of the constant ``t`` with a vector per instance, ``times`` times (its bytes read once), in
    ``dtype`` (default: ``t``'s own; a layer that casts its float64 constants to its input's dtype passes that)."""
    if t is None:
        return f
    numel = t._nnz() if t.layout != torch.strided else t.numel()
    dtype = dtype or t.dtype
    size = torch.empty(0, dtype=dtype).element_size()
    return f.add(f"{what} {tuple(t.shape)} x{times:g}", numel * times, dtype, numel, size)


def right_hand_sides(f: Floor, family, dtype: torch.dtype) -> Floor:
    """``g(x) = B_eq (1, xi)`` and ``h(x) = B_ineq (1, xi)``: once per instance (dense, as the family stores them)."""
    for name in ("B_eq", "B_ineq"):
        B = torch.as_tensor(getattr(family, name))
        if B.numel():
            matrix(f, f"right-hand side {name}", B, dtype=dtype)
    return f


def constraint_rows(family) -> tuple[float, float, float]:
    """``(per product, constants, per instance)``: the multiply-adds of one product ``y -> [G; H] y`` as the
    family computes it (dense below ``constraints.DENSE_LIMIT`` entries per matrix, its nonzeros above), the
    entries it reads, and, where ``G(x), H(x)`` depend on the input, the multiply-adds that form them once."""
    from hardlinear.constraints.family import DENSE_LIMIT, InputDependentFamily

    if isinstance(family, InputDependentFamily):
        rows = (family.m_eq + family.m_ineq) * family.n
        stacks = family.G_stack.size + family.H_stack.size
        return float(rows), float(stacks), float(stacks)
    used = 0
    for M in (family.G, family.H):
        used += M.shape[0] * M.shape[1] if M.shape[0] * M.shape[1] <= DENSE_LIMIT else M.nnz
    return float(used), float(used), 0.0


def _buffers(module: nn.Module, skip: tuple[nn.Module, ...] = ()) -> list[tuple[str, torch.Tensor]]:
    skipped = {id(b) for m in skip for b in [*m.buffers(), *m.parameters()]}
    out = []
    for name, b in [*module.named_buffers(), *module.named_parameters()]:
        if id(b) in skipped or not b.is_floating_point() or b.dim() < 2:
            continue
        out.append((name, b))
    return out


# --- per method class -----------------------------------------------------------------------------------------
def generic(method, iterations: float) -> Floor:
    """The task network, then every floating matrix buffer outside it read once per instance (per iteration)."""
    net = getattr(method, "net", None)
    f = network(net) if isinstance(net, nn.Module) else Floor()
    times = iterations if getattr(method, "iterative", False) else 1.0
    for name, b in _buffers(method, skip=(net,) if isinstance(net, nn.Module) else ()):
        matrix(f, name, b, times)
    f.exact = False
    return f


def mlp(method, iterations: float) -> Floor:
    return network(method.net)


def network_only(method, iterations: float) -> Floor:
    """Penalty, ALM: the network's output is the prediction (in ``layer_dtype``: a cast, no product)."""
    return network(method.net)


def proposed(method, iterations: float, moved: float = 1.0) -> Floor:
    """The fused path (:mod:`hardlinear.layers.fused`): hidden layers, the last layer onto the null space
    ``(h x d)``, one ``k_active x (d + n_K + 1)`` float64 product for ``[w | P x]``, the slack completion's
    sparse product, the rank-``d`` update of ``y_TN`` and, for the rows the blend moves (``moved``, a fraction),
    that of the safe output. The unfused layer falls back to :func:`generic`."""
    from hardlinear.layers.fused import FusedProposed

    if getattr(method, "refiner", None) is not None:
        return refined_proposed(method)
    fused = method.fused_module() if getattr(method, "fused_inference", False) else None
    if not isinstance(fused, FusedProposed):
        return generic(method, iterations)
    f = Floor()
    for i, (W, b) in enumerate(fused.hidden):
        f.add(f"hidden {i} {W.shape[1]}x{W.shape[0]} (folded)", W.numel(), W.dtype, W.numel() + b.numel(), W.element_size())
    matrix(f, "last layer onto N (A_T)", fused.A_T)
    matrix(f, "[w | P x] (M_T: k_active x (d + n_K + 1))", fused.M_T)
    matrix(f, "slack completion (sparse)", fused.completion)
    matrix(f, "y_TN = P x + N u (rank d)", fused.N_T)
    f.add(f"safe output P x + N w (rank d) on {moved:.0%} of rows", moved * fused.N_T.numel(), fused.N_T.dtype)
    return f


def refined_proposed(method) -> Floor:
    """``refine=dr`` (:class:`~hardlinear.layers.refine.DouglasRachford`), in float64, ``K`` = ``refine_eval_steps``
    (and the training count's snapshot when ``refine_pick=objective``), ``d`` the null space, ``m`` the rows::

        network + n (k + 1)               c(x) = G^+ g(x), the base point
                + 2 n d                   u_raw = (y - c) N, and the output c + N u
                + m d                     the start t = Ms u_raw
                + K c_it                  an iteration: (d + m)^2 with the dense projector, d^2 + 2 d m with the
                                          graph's two products (the module's choice)
                + layer                   the unfused layer's constants once per instance (generic), per blend

    The elementwise passes of the loop and the blend are not counted. Other refinements: :func:`generic`."""
    from hardlinear.layers.refine import DouglasRachford

    refiner = method.refiner
    if not isinstance(refiner, DouglasRachford):
        return generic(method, 1.0)
    f = network(method.net)
    red = refiner.reduced
    n, d, m, k = red.n, red.d, red.m, red.k
    K = float(refiner.eval_steps)
    f.add(f"c(x) = G^+ g(x) ({n}x{k + 1})", n * (k + 1), torch.float64, n * (k + 1))
    f.add(f"u_raw = (y - c) N and c + N u ({n}x{d}, x2)", 2.0 * n * d, torch.float64, n * d)
    f.add(f"t = Ms u_raw ({m}x{d})", m * d, torch.float64, m * d)
    per = (d + m) ** 2 if refiner.dense else d * d + 2 * d * m
    form = "dense (d + m)^2" if refiner.dense else "d^2 + 2 d m"
    f.add(f"DR iterations: {form} = {per:,} x {K:g}", per * K, torch.float64, per)
    blends = 1.0 + (2.0 if getattr(method, "refine_pick", "refined") == "objective" else 0.0)
    for name, b in _buffers(method.layer, skip=(method.layer.safe,)):
        matrix(f, f"layer {name}", b, blends)
    for name, b in _buffers(method.layer.safe):
        matrix(f, f"rule {name}", b, blends)
    return f


def ldr(method, iterations: float) -> Floor:
    f = Floor()
    matrix(f, "rule F", method.rule.linear)
    quad = getattr(method.rule, "quadratic", None)
    return matrix(f, "rule quadratic part", quad if torch.is_tensor(quad) else None)


def dc3(method, iterations: float) -> Floor:
    """Network on the partial variables, the completion (once), two ``m_ineq x n_partial`` products per correction
    step (the gradient and the residual's update), ``iterations`` steps per instance (measured)."""
    f = network(method.net)
    comp = method.correction.completion
    for name in ("K", "KG", "B_eq_R"):
        matrix(f, f"completion {name}", getattr(comp, name, None))
    HP = next(iter(method.correction._HP.values()), None)
    if HP is None or HP.dim() != 2:
        f.exact = False
        return f
    return matrix(f, "correction H P (gradient and residual update)", HP, 2.0 * iterations)


def apm(method, iterations: float) -> Floor:
    """Network, the projection onto the equalities (generic: its constants once), then per iteration two products
    with the null-space basis rows of the slack block (the deficit and the step)."""
    f = network(method.net)
    corr = method.correction
    for name, b in _buffers(corr):
        matrix(f, f"projection {name}", b)
    basis = next((b for name, b in _buffers(corr) if name.endswith("basis")), None)
    if basis is not None:
        s0 = int(getattr(corr, "slack_start", 0))
        rows = basis.shape[0] - s0
        f.add(f"per iteration: deficit and step on N_S ({rows}x{basis.shape[1]}) x2 x{iterations:.1f}",
              2.0 * rows * basis.shape[1] * iterations, basis.dtype)  # fmt: skip
    else:
        f.exact = False
    return f


def reduced_layer(method, iterations: float) -> Floor:
    """HardNet-Aff and the gauge map: network on the free coordinates, then every matrix of the layer (the rule,
    the null-space basis ``N``, ``M = H N``, HardNet's pseudo-inverse) once per instance."""
    f = network(method.net)
    for name, b in _buffers(method.layer):
        matrix(f, f"layer {name}", b)
    return f


def pinet(method, iterations: float) -> Floor:
    """Pinet (:mod:`hardlinear.layers.douglas_rachford`), in ``layer_dtype``, with ``N = n + m_ineq`` (the lifted
    space) and ``K`` the Douglas-Rachford iterations (``n_iter_test``, as reported)::

        network + (m_eq + m_ineq)(k + 1)     right-hand sides g(x), h(x), once
                + N m_eq                     q = K_eq g(x): the equality data in the lifted space, once
                + (K + 1) N^2                P_eq(s) = s P + q: the dense projector P = I - A~^+ A~, once per
                                             iteration and once for the output; where the layer keeps its factor
                                             P = V V' (rank r, 2 r < N): 2 N r per iteration, N r + r n for the output

    The prox of the objective, the clamps onto the box and the relaxation are elementwise (not counted); the
    pseudo-inverse and the Ruiz equilibration are offline."""
    f = network(method.net)
    layer, dtype = method.layer, method.layer_dtype
    right_hand_sides(f, method.problem.family, dtype)
    matrix(f, "q = K_eq g (lifted equality data)", layer.consts.K, dtype=dtype)
    if getattr(layer, "factored", False):  # P = V V' (rank r): (s V) V' per iteration, (s V) V'[:, :n] for the output
        V = layer.consts.V
        N, r = V.shape
        size = torch.empty(0, dtype=dtype).element_size()
        f.add(f"P_eq: (s V) V' (factor {N}x{r}), x{iterations:g} iterations", 2.0 * N * r * iterations, dtype, 2 * N * r, size)
        return f.add(f"output: (s V) V'[:, :n] ({N}x{r}, {r}x{layer.n})", N * r + r * layer.n, dtype)
    return matrix(f, "P_eq: s P (dense projector), per iteration + output", layer.consts.P, iterations + 1.0, dtype)


def history_visits(iterations: float, memory: int) -> float:
    """``sum_{i < K} min(i, memory)``: the L-BFGS pairs the two-loop recursions of ``K`` iterations visit (the
    ``i``-th direction has ``min(i, memory)`` pairs), linear between whole ``K``. Convex in ``K``, so at the mean
    iterations it is at most the mean over instances: still a floor."""
    whole = int(math.floor(iterations))
    return float(sum(min(i, memory) for i in range(whole)) + (iterations - whole) * min(whole, memory))


def fsnet(method, iterations: float, line_search: float | None = None) -> Floor:
    """FSNet (:mod:`hardlinear.layers.peers.fsnet`), in ``layer_dtype``, with ``R`` the multiply-adds of one
    product ``y -> [G; H] y`` (:func:`constraint_rows`), ``K`` the L-BFGS iterations and ``E`` the evaluations
    of the line searches (both as reported: ``Prediction.iterations``, ``extras["line_search_evaluations"]``),
    ``M`` the memory::

        network + (m_eq + m_ineq)(k + 1)                 right-hand sides, once
                + (2 + 2 K + E) R                        value and gradient at the start (2 R: [G; H] y and
                                                         its transpose on the residual), per iteration the
                                                         value and gradient at the new point (2 R), and the
                                                         line searches' values (R each)
                + 4 n sum_{i<K} min(i, M) + 2 n (K - 1)  two-loop recursion: two dot products and two updates
                                                         per pair, gamma's two dot products
                + 2 n K                                  the slope <g, d> and the new pair's rho

    ``line_search`` None (not reported): ``E = K``, a lower bound (the Armijo search evaluates at least once
    per iteration, up to ``max_ls`` times). Not counted: the elementwise passes (the candidate ``y + t d``, the
    squared violation), the right-hand sides and the ``rho`` of every pair, which ours recomputes at every
    evaluation and iteration, and, for an input-dependent family, the re-formation of ``G(x), H(x)`` at every
    evaluation (counted once: ``(k + 1)(m_eq + m_ineq) n``)."""
    f = network(method.net)
    family, dtype, n = method.problem.family, method.layer_dtype, method.problem.family.n
    right_hand_sides(f, family, dtype)
    per_product, const_numel, forming = constraint_rows(family)
    size = torch.empty(0, dtype=dtype).element_size()
    if forming:
        f.add("forming G(x), H(x) from their slices, once", forming, dtype)
    reported = line_search is not None
    E = float(line_search) if reported else iterations * min(1.0, float(method.settings.max_ls))
    products = 2.0 + 2.0 * iterations + E
    searched = f"{E:g} line-search evaluations" + ("" if reported else " (not reported: one per iteration, a lower bound)")
    f.add(f"[G; H] y and its transpose ({per_product:,.0f} per product) x{products:g}, {searched}",
          per_product * products, dtype, const_numel, size)  # fmt: skip
    visits = history_visits(iterations, method.settings.memory)
    f.add(f"two-loop recursion (memory {method.settings.memory}, {visits:g} pair visits)",
          4.0 * n * visits + 2.0 * n * max(iterations - 1.0, 0.0), dtype)  # fmt: skip
    return f.add("slope and the new pair's rho", 2.0 * n * iterations, dtype)


def dispatch_floor(method, xi: torch.Tensor, seconds: Callable[[Callable[[], object]], float]) -> dict[str, float]:
    """The economic dispatch's floor for the batch ``xi``, measured: what a dispatch proxy cannot avoid, each piece
    timed alone by ``seconds(fn)`` (the caller's median): its network's forward, one solve of the line flows through
    the factor of ``Bbus`` (:mod:`hardlinear.problems.flows`: the line rows need at least one), and its own passes
    (E2ELR: the bound and balance repairs; the proposed method with ``refine=problem``: the map onto the limits and
    the balance, ``EconomicDispatch.refined_dispatch``, and the test of its output's rows, ``EconomicDispatch.rows_hold``, ``row_test_s``:
    ``alpha = 0`` is the blend's answer only for an output that meets every row, so the method cannot skip it, and
    E2ELR makes no such test). Keys: the pieces' seconds and ``floor_s``, their sum.

    Why measured, not counted (:class:`Floor`): the sparse solve's cost is its factor's fill and memory traffic, and
    the proposed map iterates a data-dependent number of steps; a count of multiply-adds would hide both."""
    from hardlinear.layers.network import run_net_columns
    from hardlinear.layers.peers.e2elr import bound_repair, proportional_response

    problem = method.problem
    dtype = getattr(method, "layer_dtype", torch.float64)
    xw = xi.to(dtype)

    def network() -> torch.Tensor:  # the generator outputs, all E2ELR's network has; a column slice of the proposed's
        return run_net_columns(method.net, xi, problem.variable_slices()["pg"])

    with torch.no_grad():
        out = network().to(dtype)
        pieces = {"network_s": seconds(network)}
        if type(method).__name__ == "E2ELR":
            def own() -> object:
                pg = bound_repair(out, method.pmin, method.pmax, method.bound_repair)
                return proportional_response(pg, problem.loads(xw).sum(dim=1), method.pmin, method.pmax)
            pg = own()[0]
        else:
            geometry = getattr(method, "refine_geometry", "euclidean")
            def own() -> object:
                return problem.refined_dispatch(xw, out, geometry)
            pg = own()
            pf = problem.line_flows(xw, pg)
            df = problem.thermal_slack(xw, pg, pf)
            pieces["row_test_s"] = seconds(lambda: problem.rows_hold(xw, pg, df, pf))
        pieces["own_passes_s"] = seconds(own)
        pieces["flows_s"] = seconds(lambda: problem._sparse_line_flows(xw, pg))
    pieces["floor_s"] = sum(pieces.values())
    return pieces


DERIVATIONS: dict[str, Callable[..., Floor]] = {
    "BareMLP": mlp,
    "Proposed": proposed,
    "LDR": ldr,
    "DC3": dc3,
    "APM": apm,
    "EAPM": apm,
    "HardNetAff": reduced_layer,
    "Gauge": reduced_layer,
    "Penalty": network_only,
    "ALM": network_only,
    "Pinet": pinet,
    "PinetHcnnReference": pinet,  # the package's layer on the same settings (bench_methods' reference row)
    "FSNet": fsnet,
}


def floor(method, iterations: float = 1.0, moved: float = 1.0, line_search: float | None = None) -> Floor:
    """The floor of ``method`` (set up, eval mode) by its class's derivation, else :func:`generic`; ``moved``
    (the blend's moved rows) and ``line_search`` (FSNet's evaluations) as the method reported them."""
    derive = DERIVATIONS.get(type(method).__name__, generic)
    if derive is proposed:
        return proposed(method, iterations, moved)
    if derive is fsnet:
        return fsnet(method, iterations, line_search)
    return derive(method, iterations)
