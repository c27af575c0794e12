"""Where the proposed layer's time goes: each stage timed alone, dense against sparse constraint matrices.

The stages of the paper's section 3.5 (its complexity table), each timed separately on the same inputs as
the method's own forward pass (float32 network, float64 layer):

    task_network          the MLP                               O(C_TN)
    equality_projection   y - Gbar (G y - g)                    O(n m_eq) for constant G
    safe_network          the decision rule F x                 O(n k)
    slacks                h - H y for the task and safe outputs O(m_ineq n) dense, O(nnz(H)) sparse
    alpha                 the rounding guard and the max ratio  O(m_ineq)
    blend                 (1 - alpha) y_TN + alpha y_SN         O(n)

and, for reference, ``layer_total`` (one ``FeasibilityLayer.forward``, bookkeeping included),
``predict_total`` (``Proposed.predict``: network, casts, layer and its statistics) and ``fused_predict_total``
(the same with ``fused_inference=True``: :mod:`hardlinear.layers.fused`, or the layer where it falls back).

Variants of the two stages whose cost depends on the matrices' structure (the layer has no switch for them,
so the alternatives are written here with torch ops on the same matrices):

* ``layer``: what the layer does (projection: the thinner of the null-space and row-space bases of one SVD;
  slacks: a slice, a gather of the few nonzeros per row, or a batched product when ``H`` depends on x);
* ``dense``: the dense projector ``I - Gbar G`` (n x n) and a dense ``H`` (m_ineq x n);
* ``sparse``: the paper's ``y - Gbar (G y) + Gbar g`` with a sparse CSR ``G`` and dense ``Gbar``, and a sparse
  CSR ``H``.

Only constant matrices have alternatives (input-dependent ``G(x)``/``H(x)``, the portfolio, run the layer's
batched path only). Forms: ``standard`` (the paper's: slacks are variables, ``H = [0, -I]``, the original
inequalities join ``G``) and ``inequality`` (``H`` is the original rows). Plot: stacked bars per problem.

Run: ``python benchmarks/bench_breakdown.py --quick`` (``--full``, ``--device cuda``; ``--help``).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

NAME = "breakdown"
QUICK = {
    "problems": ["dcopf_14", "portfolio"],
    "batch_sizes": [1, 4096],
    "repeats": 20,
    "forms": ["standard", "inequality"],
}
FULL = {
    "problems": ["dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200", "portfolio"],
    "batch_sizes": [1, 4096],
    "repeats": 50,
    "forms": ["standard", "inequality"],
}
STAGES = ("task_network", "equality_projection", "safe_network", "slacks", "alpha", "blend")
TOTALS = ("layer_total", "predict_total", "fused_predict_total")
VARIANTS = ("layer", "dense", "sparse")
COLUMNS = [
    "problem", "case", "objective", "form", "n", "m_eq", "m_ineq", "k", "batch_size", "stage", "variant",
    "median_ms", "calls", "nnz", "note", "rule_source", "device", "threads", "git_sha",
]  # fmt: skip


def parser():
    p = common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    p.add_argument("--forms", nargs="+", default=None, choices=["standard", "inequality"])
    return p


# --- the alternatives, on the same matrices --------------------------------------------------------------
def _csr(M: sp.spmatrix, device: str) -> torch.Tensor:
    M = sp.csr_matrix(M, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        return torch.sparse_csr_tensor(
            torch.as_tensor(M.indptr, dtype=torch.int64),
            torch.as_tensor(M.indices, dtype=torch.int64),
            torch.as_tensor(M.data),
            size=M.shape,
            check_invariants=True,
        ).to(device)


def _spmm(A: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``A: (m, n)`` sparse CSR, ``y: (B, n) -> (B, m)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return (A @ y.T).T


def projection_variants(family, device: str) -> dict:
    """``{variant: fn(xi64, y) -> y_TN}`` for a constant ``G`` (empty when ``G`` depends on x)."""
    from hardlinear.constraints.family import lift
    from hardlinear.layers.equality import constant_lhs

    G = constant_lhs(family, "G")
    if G is None or not family.m_eq:
        return {}
    B_eq = np.asarray(family.B_eq, dtype=np.float64)
    Gbar = np.linalg.pinv(G)  # (n, m_eq): G' (G G')^-1, dependent rows handled
    P = np.eye(G.shape[1]) - Gbar @ G
    t = {
        k: torch.as_tensor(v, device=device)
        for k, v in {"PT": P.T, "pT": (Gbar @ B_eq).T, "GbarT": Gbar.T, "BT": B_eq.T}.items()
    }
    G_sp = _csr(G, device)

    def dense(xi, y):
        return y @ t["PT"] + lift(xi) @ t["pT"]

    def sparse(xi, y):
        return y - (_spmm(G_sp, y) - lift(xi) @ t["BT"]) @ t["GbarT"]

    return {"dense": (dense, int(G.size)), "sparse": (sparse, int(np.count_nonzero(G)))}


def slack_variants(family, device: str) -> dict:
    """``{variant: fn(xi64, y_tn, y_sn) -> (s_TN, s_SN)}`` for a constant ``H``."""
    from hardlinear.constraints.family import lift
    from hardlinear.layers.equality import constant_lhs

    H = constant_lhs(family, "H")
    if H is None or not family.m_ineq:
        return {}
    HT = torch.as_tensor(H.T.copy(), device=device)
    BT = torch.as_tensor(np.asarray(family.B_ineq, dtype=np.float64).T.copy(), device=device)
    H_sp = _csr(H, device)

    def dense(xi, a, b):
        h = lift(xi) @ BT
        return h - a @ HT, h - b @ HT

    def sparse(xi, a, b):
        h = lift(xi) @ BT
        return h - _spmm(H_sp, a), h - _spmm(H_sp, b)

    return {"dense": (dense, int(H.size)), "sparse": (sparse, int(np.count_nonzero(H)))}


# --- one problem, one form, one batch --------------------------------------------------------------------
def stage_times(method, problem, B: int, args, base: dict) -> list[dict]:
    layer, net = method.layer, method.net
    xi = common.sample(problem, B, args.seed + B, args)
    work = method.layer_dtype
    with torch.no_grad():
        xw = xi.to(work)
        y_task = net(xi).to(work)
        y_tn = layer.project(xw, y_task)
        y_sn = layer.safe_output(xw)
        h = layer.slacks.rhs(xw, y_tn)
        s_tn, s_sn = layer.slacks.slack(xw, y_tn, h), layer.slacks.slack(xw, y_sn, h)
        alpha = _alpha(layer, xw, y_tn, y_sn, h, s_tn, s_sn, y_task.dtype)

    def slacks_layer():
        hh = layer.slacks.rhs(xw, y_tn)
        return layer.slacks.slack(xw, y_tn, hh), layer.slacks.slack(xw, y_sn, hh)

    fns = {
        ("task_network", "layer"): (lambda: net(xi), ""),
        ("equality_projection", "layer"): (lambda: layer.project(xw, y_task), _projector_note(layer)),
        ("safe_network", "layer"): (lambda: layer.safe_output(xw), ""),
        ("slacks", "layer"): (slacks_layer, f"mode={layer.slacks.mode}"),
        ("alpha", "layer"): (lambda: _alpha(layer, xw, y_tn, y_sn, h, s_tn, s_sn, y_task.dtype), "guard + max ratio"),
        ("blend", "layer"): (lambda: torch.lerp(y_tn, y_sn, alpha.unsqueeze(1)).to(y_task.dtype), ""),
        ("layer_total", "layer"): (lambda: layer(xw, y_task), "FeasibilityLayer.forward"),
        ("predict_total", "layer"): (lambda: method.predict(xi), "Proposed.predict (network, casts, layer, stats)"),
        ("fused_predict_total", "layer"): (lambda: _fused_predict(method, xi), _fused_note(method)),
    }
    for variant, (fn, nnz) in projection_variants(problem.family, args.device).items():
        fns[("equality_projection", variant)] = (lambda fn=fn: fn(xw, y_task), f"nnz={nnz}")
    for variant, (fn, nnz) in slack_variants(problem.family, args.device).items():
        fns[("slacks", variant)] = (lambda fn=fn: fn(xw, y_tn, y_sn), f"nnz={nnz}")
    rows = []
    with torch.no_grad():
        for (stage, variant), (fn, note) in fns.items():
            sec, calls = common.median_time(fn, args.device, args.repeats, args.warmup, budget_s=10.0)
            nnz = note.split("=", 1)[1] if note.startswith("nnz=") else ""
            rows.append({**base, "batch_size": B, "stage": stage, "variant": variant, "median_ms": 1000 * sec,
                         "calls": calls, "nnz": nnz, "note": "" if nnz else note})  # fmt: skip
    return rows


def _alpha(layer, xw, y_tn, y_sn, h, s_tn, s_sn, out_dtype):
    """The layer's alpha stage: rounding guard, the max ratio, and the rows that need no move set to 0."""
    need = -s_tn
    if layer.rounding_guard > 0:
        need = layer._guard(xw, y_tn, y_sn, h, out_dtype) - s_tn
    alpha = layer._alpha(need, s_tn, s_sn)
    return torch.where(s_tn.amin(dim=1) < 0, alpha, 0.0) if s_tn.shape[1] else alpha


def _fused_predict(method, xi):
    """``Proposed.predict`` with ``fused_inference`` on (hardlinear.layers.fused), the method left as it was."""
    method.fused_inference = True
    try:
        return method.predict(xi)
    finally:
        method.fused_inference = False


def _fused_note(method) -> str:
    fused = method.fused_module()
    return "fused: " + (fused.extra_repr() if fused.fused else f"falls back to the layer ({fused.reason})")


def _projector_note(layer) -> str:
    p = layer.projector
    return "no equalities" if p is None else f"form={p.form}, rank={p.rank}"


def run_problem(problem_cfg: str, form: str, args, env: dict) -> list[dict]:
    problem = common.load_problem(problem_cfg, [f"problem.form={form}"])
    ctx = common.make_context(args)
    overrides = [f"problem.form={form}", "method.fused_inference=false"]  # predict_total: the unfused layer
    method, _, source = common.make_method(problem_cfg, "proposed", problem, ctx, overrides)
    base = {**common.problem_identity(problem_cfg, problem), "rule_source": source,
            "device": env["device_name"], "threads": args.threads, "git_sha": env["git_sha"]}  # fmt: skip
    rows = []
    for B in args.batch_sizes:
        rows += stage_times(method, problem, B, args, base)
        layer = next(r for r in rows if r["batch_size"] == B and r["stage"] == "layer_total")
        common.log(f"  {problem_cfg:>10} {form:<10} batch {B:>6}: layer {layer['median_ms']:.3f} ms")
    return rows


# --- plot ------------------------------------------------------------------------------------------------
def plot(rows: list[dict], path: Path) -> Path:
    keys = list(dict.fromkeys((r["problem"], r["form"], r["batch_size"]) for r in rows))
    fig, axes = common.new_figure(len(keys), ncols=min(4, len(keys)), size=(3.6, 3.2))
    colors = dict(zip(STAGES, ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")))
    for ax, (problem, form, B) in zip(axes, keys):
        sub = [r for r in rows if (r["problem"], r["form"], r["batch_size"]) == (problem, form, B)]
        variants = [v for v in VARIANTS if any(r["variant"] == v for r in sub)]
        for x, variant in enumerate(variants):
            bottom = 0.0
            for stage in STAGES:
                r = _pick(sub, stage, variant) or _pick(sub, stage, "layer")
                ax.bar(x, r["median_ms"], bottom=bottom, color=colors[stage], label=stage if x == 0 else None)
                bottom += r["median_ms"]
        total = _pick(sub, "layer_total", "layer")
        ax.plot([0], [total["median_ms"] + _pick(sub, "task_network", "layer")["median_ms"]], "k_", ms=18,
                label="network + layer forward")  # fmt: skip
        ax.set_xticks(range(len(variants)), variants)
        ax.set_title(f"{problem} ({form}), batch {B}", fontsize=9)
        ax.set_ylabel("ms per call")
    axes[0].legend(fontsize=6)
    return common.save_figure(fig, path)


def _pick(rows, stage, variant):
    return next((r for r in rows if r["stage"] == stage and r["variant"] == variant), None)


# --- entry point ------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict:
    args = common.resolve(parser().parse_args(argv), QUICK, FULL)
    torch.set_num_threads(args.threads)
    env = common.environment(args.device, args.threads)
    common.log(f"[breakdown] {args.size}: {', '.join(args.problems)} ({', '.join(args.forms)}) on {env['device_name']}")
    rows: list[dict] = []
    for problem_cfg in args.problems:
        for form in args.forms:
            rows += run_problem(problem_cfg, form, args, env)
    meta = {**env, "benchmark": NAME, "size": args.size, "settings": vars(args), "rule_available": common.rule_available(),
            "notes": {"timing": "median wall time per call after warm-up; stages timed separately on the same inputs",
                      "dtypes": "network float32, layer float64 (the proposed method's defaults)"}}  # fmt: skip
    out = Path(args.out_dir)
    paths = common.write_results(out, NAME, rows, meta, COLUMNS)
    if not args.no_plot:
        paths["png"] = plot(rows, out / f"{NAME}.png")
    return {"paths": paths, "rows": rows}


if __name__ == "__main__":
    main()
