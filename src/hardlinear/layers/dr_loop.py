"""The relaxed Douglas-Rachford loop shared by Pinet's projection and ``refine=dr``, as few kernels as the algebra
allows, with no Python work per iteration beyond issuing them.

Both splittings iterate, on a lifted state ``s: (B, L)`` with an affine subspace ``E`` and a separable prox,

    z = Pi_E(s);   t = clamp(C * (2 z - s) + e, lo, hi);   s <- s + omega (t - z)

(``C: (L,)`` and ``e: (B, L)`` the prox's affine part, ``lo, hi`` its box; :mod:`hardlinear.layers.douglas_rachford`
and :mod:`hardlinear.layers.refine` derive theirs). Written out naively that is a dozen small operations an
iteration (slices, a concatenation, two clamps, three blends), each a dispatch on the CPU and a kernel launch on
a GPU: at batch 1 the dispatches, not the arithmetic, were the cost (issue 40: 0.1 ms an iteration). Here one
iteration is the projection (one ``addmm`` with the dense projector; two thin ones through its factor
``P = V V'`` where that saves multiply-adds; or, where ``E`` is a graph ``t = M u`` whose dense projector would be
far larger, the graph's two thin products) and five elementwise passes over one buffer (:func:`_relax`):

    a = e + 2C * z;   a -= C * s;   clamp(a, lo, hi);   a -= z;   s += omega a

Without a gradient every pass writes into buffers allocated once per call, and on the CPU the loop itself is a
TorchScript function, so that the interpreter, not Python, issues the kernels (0.72 against 1.14 ms for 100
iterations at batch 1). On a CUDA device a dense projection runs as :func:`_wide_loop` (three kernels an
iteration: launches cost there, flops do not), and the whole loop is captured once per (batch, iterations, dtype)
into a CUDA graph and replayed. With a gradient the same passes run out of place, so autograd unrolls them.
``torch.compile`` fuses the elementwise passes further (0.55 ms) but takes about 50 s to compile each shape and
count on this machine: not a default for a layer called with many batch sizes.

Numerics: the same iteration as the modules' reference step (``_step``), in another order of rounding: outputs
agree to ~1e-15 relative per iteration, and Douglas-Rachford is non-expansive, so they stay within ~1e-13 after
hundreds of iterations (tests/test_dr_loop.py checks 1e-12).
"""

from __future__ import annotations

import torch

from hardlinear.runtime.torchscript import script


class AffineProjection:
    """``Pi_E(s) = s P + q``: the dense symmetric projector ``P: (L, L)`` with an optional per-call offset
    ``q: (B, L)``, and optionally its factor ``P = V V'`` (``V: (L, r)``, ``V_T`` its transpose, contiguous): two
    ``L x r`` products instead of one ``L x L`` where ``2 r < L`` (Pinet's lifted space on DC3: ``r = 50``, ``L = 150``,
    a third fewer multiply-adds); or, where ``E = {(u, t) : t = u M'}`` is a graph, ``u = s K`` (``K: (L, d)``, the
    first ``d`` columns of its projector) and ``t = u M'`` (``M_T: (d, m)``): two thin products.
    """

    __slots__ = ("P", "q", "V", "V_T", "K", "M_T")

    def __init__(self, P: torch.Tensor | None = None, q: torch.Tensor | None = None, K: torch.Tensor | None = None,
                 M_T: torch.Tensor | None = None, V: torch.Tensor | None = None, V_T: torch.Tensor | None = None) -> None:
        if (P is None) == (K is None) or (K is None) != (M_T is None) or (q is not None and P is None):
            raise ValueError("an AffineProjection is either dense (P, optional q) or a graph's (K, M_T)")
        if (V is None) != (V_T is None) or (V is not None and P is None):
            raise ValueError("a factor P = V V' needs P, V and V_T")
        self.P, self.q, self.V, self.V_T, self.K, self.M_T = P, q, V, V_T, K, M_T

    def __call__(self, s: torch.Tensor) -> torch.Tensor:
        if self.V is not None:
            w = s @ self.V
            return w @ self.V_T if self.q is None else torch.addmm(self.q, w, self.V_T)
        if self.P is not None:
            return s @ self.P if self.q is None else torch.addmm(self.q, s, self.P)
        u = s @ self.K
        return torch.cat([u, u @ self.M_T], dim=1)

    def first(self, s: torch.Tensor, cols: int) -> torch.Tensor:
        """``Pi_E(s)[:, :cols]`` without the rest (the output's coordinates)."""
        if self.V is not None:
            z = (s @ self.V) @ self.V_T[:, :cols]
            return z if self.q is None else z + self.q[:, :cols]
        if self.P is not None:
            z = s @ self.P[:, :cols]
            return z if self.q is None else z + self.q[:, :cols]
        u = s @ self.K
        return u[:, :cols] if cols <= u.shape[1] else self(s)[:, :cols]

    def requires_grad(self) -> bool:
        return any(t is not None and t.requires_grad for t in (self.P, self.q, self.V, self.K, self.M_T))


def projector_factor(P, tol: float = 1e-8):
    """``V`` with ``P = V V'`` for an orthogonal projector ``P`` (numpy, symmetric), or None where a factor would
    not save work (``2 r >= L``) or ``P``'s eigenvalues are not 0 and 1 to ``tol`` (not a projector)."""
    import numpy as np

    w, vecs = np.linalg.eigh(P)
    keep = w > 0.5
    if not (np.all(np.abs(w[keep] - 1.0) <= tol) and np.all(np.abs(w[~keep]) <= tol)):
        return None
    return vecs[:, keep] if 2 * int(keep.sum()) < P.shape[0] else None


class ProxData:
    """The prox's affine part and box for one call: ``C: (L,)``, ``e: (B, L)``, ``lo, hi: (L,) or (B, L)``.

    ``2C`` and ``-C`` are kept so that the loop multiplies without forming them each iteration.
    """

    __slots__ = ("C", "C2", "e", "lo", "hi", "bounded")

    def __init__(self, C: torch.Tensor, e: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
                 bounded: bool | None = None, C2: torch.Tensor | None = None) -> None:
        self.C, self.C2, self.e = C, 2.0 * C if C2 is None else C2, e
        self.lo, self.hi = lo, hi
        # The caller usually knows (a sync and three passes otherwise); an infinite bound clamps nothing anyway.
        self.bounded = bool(torch.isfinite(lo).any() or torch.isfinite(hi).any()) if bounded is None else bounded


def _step(s: torch.Tensor, z: torch.Tensor, prox: ProxData, omega: float) -> torch.Tensor:
    """The same iteration out of place (autograd records it)."""
    a = torch.addcmul(prox.e, prox.C2, z).addcmul(prox.C, s, value=-1.0)
    if prox.bounded:
        a = torch.clamp(a, prox.lo, prox.hi)
    return s + omega * (a - z)


def iterate(
    s: torch.Tensor, project: AffineProjection, prox: ProxData, omega: float, marks: list[int], graphs: dict | None = None
) -> list[torch.Tensor]:
    """Run ``max(marks)`` iterations from ``s``; return the state after each count in ``marks`` (ascending).

    ``s`` is not modified. Without a gradient the iterations run in place in a copy; with one (``s``, ``e`` or the
    projection's constants requiring grad) out of place. ``graphs``: a dict the caller owns, where CUDA graphs of
    the no-gradient loop are kept (None: never capture).
    """
    if not marks:
        return []
    # torch.export and TorchScript's tracer record operations, not in-place writes into scripted loops: out of place,
    # the fixed count unrolled (the program holds max(marks) iterations)
    recording = torch.compiler.is_exporting() or torch.jit.is_tracing()
    if recording or (torch.is_grad_enabled() and (s.requires_grad or prox.e.requires_grad or project.requires_grad())):
        out = []
        for k in range(1, marks[-1] + 1):
            s = _step(s, project(s), prox, omega)
            if k in marks:
                out.append(s)
        return out
    if graphs is not None and s.is_cuda:
        return _graph_replay(s, project, prox, omega, marks, graphs)
    return _eager_inplace(s, project, prox, omega, marks)


def _relax(s: torch.Tensor, z: torch.Tensor, a: torch.Tensor, C: torch.Tensor, C2: torch.Tensor, e: torch.Tensor,
           lo: torch.Tensor, hi: torch.Tensor, bounded: bool, omega: float) -> None:
    """Given ``z = Pi_E(s)``, ``s += omega (clamp(e + C (2z - s), lo, hi) - z)`` in place (``a`` scratch): the five
    elementwise passes every loop below shares (TorchScript inlines it)."""
    torch.addcmul(e, C2, z, out=a)
    a.addcmul_(C, s, value=-1.0)
    if bounded:
        torch.clamp(a, lo, hi, out=a)
    a.sub_(z)
    s.add_(a, alpha=omega)


def _dense_loop(s: torch.Tensor, P: torch.Tensor, q: torch.Tensor | None, C: torch.Tensor, C2: torch.Tensor,
                e: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, bounded: bool, n_iter: int, omega: float) -> None:
    """``n_iter`` iterations in place on ``s`` with ``Pi_E(s) = s P (+ q)``."""
    a, z = torch.empty_like(s), torch.empty_like(s)
    for _ in range(n_iter):
        if q is None:
            torch.mm(s, P, out=z)
        else:
            torch.addmm(q, s, P, out=z)
        _relax(s, z, a, C, C2, e, lo, hi, bounded, omega)


def _factor_loop(s: torch.Tensor, V: torch.Tensor, V_T: torch.Tensor, q: torch.Tensor | None, C: torch.Tensor,
                 C2: torch.Tensor, e: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, bounded: bool, n_iter: int,
                 omega: float) -> None:
    """:func:`_dense_loop` with ``Pi_E(s) = (s V) V' + q``."""
    a, z = torch.empty_like(s), torch.empty_like(s)
    w = torch.empty(s.shape[0], V.shape[1], dtype=s.dtype, device=s.device)
    for _ in range(n_iter):
        torch.mm(s, V, out=w)
        if q is None:
            torch.mm(w, V_T, out=z)
        else:
            torch.addmm(q, w, V_T, out=z)
        _relax(s, z, a, C, C2, e, lo, hi, bounded, omega)


def _wide_loop(s: torch.Tensor, P: torch.Tensor, q: torch.Tensor | None, C: torch.Tensor, C2: torch.Tensor,
               e: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, bounded: bool, n_iter: int, omega: float) -> None:
    """:func:`_dense_loop` in three kernels an iteration, for a GPU, where launches cost and flops do not:
    ``[a | b] = s [(2P - I) diag(C) | I - omega P] + [e + 2C q | -omega q]``, then ``s = b + omega clamp(a)``
    (``a`` is the prox's argument ``e + C (2z - s)``, ``b = s - omega z``). Twice the multiply-adds of one
    iteration: never on the CPU."""
    L = s.shape[1]
    eye = torch.eye(L, dtype=s.dtype, device=s.device)
    W = torch.cat([(2.0 * P - eye) * C, eye - omega * P], dim=1)
    bias = torch.cat([e, torch.zeros_like(e)], dim=1) if q is None else torch.cat([e + C2 * q, -omega * q], dim=1)
    v = torch.empty(s.shape[0], 2 * L, dtype=s.dtype, device=s.device)
    a, b = v[:, :L], v[:, L:]
    for _ in range(n_iter):
        torch.addmm(bias, s, W, out=v)
        if bounded:
            a.clamp_(lo, hi)
        torch.add(b, a, alpha=omega, out=s)


def _graph_loop(s: torch.Tensor, K: torch.Tensor, M_T: torch.Tensor, C: torch.Tensor, C2: torch.Tensor,
                e: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, bounded: bool, n_iter: int, omega: float) -> None:
    """``n_iter`` iterations in place on ``s`` with ``Pi_E(s) = (u, u M')``, ``u = s K``."""
    a, z = torch.empty_like(s), torch.empty_like(s)
    for _ in range(n_iter):
        u = torch.mm(s, K)
        torch.cat([u, torch.mm(u, M_T)], dim=1, out=z)
        _relax(s, z, a, C, C2, e, lo, hi, bounded, omega)


def _script(fn):
    """TorchScript of a loop (the interpreter issues the kernels without Python's per-call cost: 0.72 against
    1.14 ms for 100 iterations at batch 1, measured); the Python function where TorchScript is unavailable."""
    return script(fn, "the Douglas-Rachford loop")


_LOOPS = {
    "dense": (_dense_loop, _script(_dense_loop)),
    "factor": (_factor_loop, _script(_factor_loop)),
    "graph": (_graph_loop, _script(_graph_loop)),
}


def _eager_inplace(
    s: torch.Tensor, project: AffineProjection, prox: ProxData, omega: float, marks: list[int], scripted: bool = True
) -> list[torch.Tensor]:
    """The loop in place on a copy of ``s``: TorchScript on the CPU, the Python loop where a CUDA graph captures it."""
    s = s.clone()
    kind = "graph" if project.P is None else "dense" if s.is_cuda or project.V is None else "factor"
    loop = _wide_loop if kind == "dense" and s.is_cuda else _LOOPS[kind][1 if scripted and not s.is_cuda else 0]
    data = {"dense": (project.P, project.q), "factor": (project.V, project.V_T, project.q), "graph": (project.K, project.M_T)}[kind]
    args = (prox.C, prox.C2, prox.e, prox.lo, prox.hi, prox.bounded)
    out, done = [], 0
    for mark in marks:
        loop(s, *data, *args, mark - done, float(omega))
        done = mark
        out.append(s.clone() if mark != marks[-1] else s)
    return out


def _graph_replay(
    s: torch.Tensor, project: AffineProjection, prox: ProxData, omega: float, marks: list[int], graphs: dict
) -> list[torch.Tensor]:
    """The no-gradient loop as one CUDA graph per (shape, dtype, marks, bounds), captured on first use."""
    key = (tuple(s.shape), s.dtype, s.device, tuple(marks), tuple(prox.lo.shape), tuple(prox.hi.shape), prox.bounded,
           project.q is None, id(project.P), id(project.K))
    entry = graphs.get(key)
    if entry is None:
        static = {
            "s": s.clone(), "e": prox.e.clone(), "C": prox.C, "lo": prox.lo.clone(), "hi": prox.hi.clone(),
        }
        static_prox = ProxData(static["C"], static["e"], static["lo"], static["hi"], prox.bounded)
        static["q"] = None if project.q is None else project.q.clone()
        project = AffineProjection(project.P, static["q"], project.K, project.M_T, project.V, project.V_T)
        # The graph reads these tensors' memory at every replay: they must live as long as it does.
        static["prox"], static["project"] = static_prox, project
        side = torch.cuda.Stream(device=s.device)
        side.wait_stream(torch.cuda.current_stream(s.device))
        with torch.cuda.stream(side):  # warm-up outside the capture (allocations, library handles)
            _eager_inplace(static["s"], project, static_prox, omega, marks)
        torch.cuda.current_stream(s.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = _eager_inplace(static["s"], project, static_prox, omega, marks)
        entry = graphs[key] = (graph, static, outs)
    graph, static, outs = entry
    static["s"].copy_(s)
    static["e"].copy_(prox.e)
    static["lo"].copy_(prox.lo)
    static["hi"].copy_(prox.hi)
    if static["q"] is not None:
        static["q"].copy_(project.q)
    graph.replay()
    return [o.clone() for o in outs]
