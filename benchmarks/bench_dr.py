"""Our Douglas-Rachford projection against Pinet's own jitted layer (``pinet-hcnn``, JAX), same inputs, one process
(issue 40, item 2).

DC3's convex QP (50 equalities, 50 inequalities, 100 variables), its test inputs, the settings of issue 40's
measurement: sigma 0.068, omega 1.7, no equilibration, float64, a projection from ``y_raw ~ N(0, 1)``. Three
implementations: ``ours`` (``DouglasRachfordProjection``: the fused loop of ``layers/dr_loop.py``; on CUDA its graph
replay), ``ours_reference`` (the same module's reference step looped in Python: the code before the fused loop)
and ``pinet-hcnn`` (``pinet.Project(...).call``, jitted by the package; skipped with a note where the ``peers``
extra is absent). Rounds are interleaved (each round times every implementation in turn), so a load change hits
all alike; per cell the median over rounds of the mean call time, with the rounds' min and max, and the ratio of
medians. Outputs are compared (largest absolute difference to pinet-hcnn's).

CPU: one torch thread and one XLA thread (``--threads``). Run:
``python benchmarks/bench_dr.py --out results/bench/dr_vs_pinet`` (``--device cuda`` on a GPU; ``--quick``).
Writes ``dr.json`` and ``dr.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 1024])
    p.add_argument("--iters", type=int, nargs="+", default=[50, 100])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--budget", type=float, default=0.5, help="seconds of calls per implementation per round")
    p.add_argument("--no-reference", action="store_true", help="skip the Python-loop reference (slow)")
    p.add_argument("--refine", action="store_true", help="also time refine=dr's module on dc3_qp (K steps at inference)")
    p.add_argument("--quick", action="store_true", help="3 rounds, 0.1 s each: a smoke run")
    p.add_argument("--out", default="results/bench/dr_vs_pinet")
    return p


def set_threads(threads: int) -> None:
    """Before JAX and torch start their pools."""
    flags = os.environ.get("XLA_FLAGS", "")
    if threads == 1 and "multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1".strip()


def pinet_call(G, H, h, sigma: float, omega: float):
    """A function ``(y_raw, g, K) -> y`` running pinet-hcnn's jitted projection, or None without the package."""
    try:
        import jax
        import jax.numpy as jnp
        import pinet
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    eq_b = jnp.zeros((1, G.shape[0], 1))
    eq = pinet.EqualityConstraint(a_mat=jnp.asarray(G)[None], b=eq_b, method=None, var_b=True)
    ineq = pinet.AffineInequalityConstraint(
        c_mat=jnp.asarray(H)[None], lb=jnp.full((1, H.shape[0], 1), -jnp.inf), ub=jnp.asarray(h)[None, :, None]
    )
    params = pinet.EquilibrationParams(max_iter=0, tol=1e-3, ord=2.0, col_scaling=False, update_mode="Gauss", safeguard=False)
    proj = pinet.Project(eq_constraint=eq, ineq_constraint=ineq, unroll=False, equilibration_params=params)

    def call(y_raw, g, K: int):
        inp = pinet.ProjectionInstance(x=y_raw[..., None], eq=pinet.EqualityConstraintsSpecification(b=g[..., None]))
        out, _ = proj.call(y_raw=inp, sigma=sigma, omega=omega, n_iter=K, n_iter_bwd=25, fpi=False)
        return out.x[..., 0].block_until_ready()

    return call, jnp, jax


def without_fast_paths(module):
    """A context in which ``module``'s loop runs in Python (no TorchScript, no CUDA graph): the fused passes alone."""
    from contextlib import contextmanager

    from hardlinear.layers import dr_loop

    @contextmanager
    def ctx():
        graphs, loops = module._graphs, dict(dr_loop._LOOPS)
        module._graphs = None
        dr_loop._LOOPS.update({k: (v[0], v[0]) for k, v in loops.items()})
        try:
            yield
        finally:
            module._graphs = graphs
            dr_loop._LOOPS.update(loops)

    return ctx()


def run_ours(layer, y_raw, g, u, K: int, sync, fast: bool = True):
    import torch

    with torch.no_grad():
        if fast:
            out = layer(y_raw, g, u, n_iter=K)[0]
        else:
            with without_fast_paths(layer):
                out = layer(y_raw, g, u, n_iter=K)[0]
    sync()
    return out


def run_reference(layer, y_raw, g, u, K: int, sync):
    """The module's reference step looped in Python: the code before the fused loop."""
    import torch

    with torch.no_grad():
        q, s_lo, s_hi = layer._data(y_raw, g, u, None)
        s = y_raw.new_zeros(y_raw.shape[0], layer.n + layer.m)
        for _ in range(K):
            s = layer._step(s, y_raw, q, s_lo, s_hi)
        (d,) = layer.consts.get(("d",), y_raw)
        out = d * layer._project_eq(s, q)[:, : layer.n]
    sync()
    return out


def refine_module(device):
    """``refine=dr`` on DC3's QP (its problem, a module on ``device`` and one on the CPU)."""
    from hardlinear.layers.refine import DouglasRachford
    from hardlinear.problems import build_problem

    problem = build_problem("dc3_qp")
    module = DouglasRachford(problem.family, steps=20, sigma=0.3).eval()
    return problem, module.to(device), DouglasRachford(problem.family, steps=20, sigma=0.3).eval()


def run_refine(module, xi, y, K: int, sync, fast: bool = True):
    import torch

    module.eval_steps = K
    with torch.no_grad():
        if fast:
            out = module(xi, y[:, : module.reduced.n])
        else:
            with without_fast_paths(module):
                out = module(xi, y[:, : module.reduced.n])
    sync()
    return out


def rel_diff(a, b) -> float:
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def timed(fn, budget: float) -> float:
    """Mean seconds per call over about ``budget`` seconds (at least 3 calls)."""
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    calls = max(3, int(budget / one))
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.quick:
        args.rounds, args.budget = 3, 0.1
    set_threads(args.threads)
    import numpy as np
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from hardlinear.layers.douglas_rachford import DouglasRachfordProjection
    from hardlinear.problems.dc3 import dc3_simple_data

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    data = dc3_simple_data()
    G, H, h = data.A, data.G, data.h
    sigma, omega = 0.068, 1.7
    layer = DouglasRachfordProjection(G, H, sigma=sigma, omega=omega).to(device)
    layer_cpu = DouglasRachfordProjection(G, H, sigma=sigma, omega=omega)
    X = torch.tensor(data.X[-833:], dtype=torch.float64)
    peer = pinet_call(G, H, h, sigma, omega)
    if peer is not None and args.device.startswith("cuda"):
        import jax

        if not any(d.platform == "gpu" for d in jax.devices()):
            peer = None  # a CPU-only JAX beside a CUDA torch: no like-for-like row
    rng = np.random.default_rng(0)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    refine = refine_module(device) if args.refine else None
    rows = []
    for B in args.batches:
        idx = rng.integers(0, X.shape[0], size=B)
        g = X[idx].to(device)
        y_raw = torch.tensor(rng.normal(size=(B, G.shape[1])), dtype=torch.float64, device=device)
        u = torch.tensor(h, dtype=torch.float64, device=device)[None]
        for K in args.iters:
            impls = {
                "ours": partial(run_ours, layer, y_raw, g, u, K, sync, fast=True),
                "ours_python": partial(run_ours, layer, y_raw, g, u, K, sync, fast=False),
            }
            if not args.no_reference:
                impls["ours_reference"] = partial(run_reference, layer, y_raw, g, u, K, sync)
            agree = None
            if peer is not None:
                call, jnp, _ = peer
                y_j, g_j = jnp.asarray(y_raw.cpu().numpy()), jnp.asarray(g.cpu().numpy())
                impls["pinet-hcnn"] = partial(call, y_j, g_j, K)
                agree = float(np.abs(impls["ours"]().cpu().numpy() - np.asarray(impls["pinet-hcnn"]())).max())
            cpu_ref = run_ours(layer_cpu, y_raw.cpu(), g.cpu(), u.cpu(), K, lambda: None, fast=False)
            if refine is not None:
                problem, module, module_cpu = refine
                xi = problem.sample(B, generator=torch.Generator().manual_seed(B)).to(device)
                impls["refine_dr"] = partial(run_refine, module, xi, y_raw, K, sync, fast=True)
                impls["refine_dr_python"] = partial(run_refine, module, xi, y_raw, K, sync, fast=False)
            cell = {"batch": B, "iters": K, "max_abs_diff_vs_pinet": agree,
                    "max_rel_diff_vs_cpu_python": rel_diff(impls["ours"](), cpu_ref)}
            if refine is not None:
                cell["refine_max_rel_diff_vs_cpu_python"] = rel_diff(
                    impls["refine_dr"](), run_refine(module_cpu, xi.cpu(), y_raw.cpu(), K, lambda: None, fast=False))
            times: dict[str, list[float]] = {k: [] for k in impls}
            for _ in range(args.rounds):
                for name, fn in impls.items():
                    times[name].append(timed(fn, args.budget))
            for name, ts in times.items():
                cell[name] = {"median_ms": 1e3 * statistics.median(ts), "min_ms": 1e3 * min(ts), "max_ms": 1e3 * max(ts)}
            if "pinet-hcnn" in times:
                cell["ratio_ours_to_pinet"] = cell["ours"]["median_ms"] / cell["pinet-hcnn"]["median_ms"]
            rows.append(cell)
            print(json.dumps(cell), flush=True)
    meta = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "cpu": platform.processor() or platform.machine(), "threads": args.threads, "torch": torch.__version__,
        "load_average": os.getloadavg(), "rounds": args.rounds, "budget_s": args.budget,
        "pinet": "pinet-hcnn" if peer is not None else "not installed (pip install --no-deps pinet-hcnn==0.2.0; docs/pinet.md)",
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dr.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (out / "dr.md").write_text(render(meta, rows))
    print(render(meta, rows))
    return 0


def render(meta: dict, rows: list[dict]) -> str:
    def cell(c: dict | None) -> str:
        return "-" if c is None else f"{c['median_ms']:.3f} ({c['min_ms']:.3f}-{c['max_ms']:.3f})"

    lines = [
        f"Douglas-Rachford on DC3's convex QP, {meta['device']} ({meta['gpu'] or meta['cpu']}), {meta['threads']} thread(s), "
        f"float64, {meta['rounds']} interleaved rounds, load {tuple(round(x, 2) for x in meta['load_average'])}, {meta['date']}",
        "",
        "Times: median ms per call over the rounds (min-max). `ours`: the default path (TorchScript loop on the CPU, "
        "CUDA graph on a GPU); `fused, Python`: the same passes issued from Python; `before`: the reference step "
        "looped in Python (the code before issue 40). `refine=dr`: the refinement module on dc3_qp, same batch, "
        "K steps.",
        "",
        "| batch | K | ours | fused, Python | before | pinet-hcnn | ours / pinet-hcnn | diff vs pinet | "
        "refine=dr | refine=dr, Python |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r['ratio_ours_to_pinet']:.2f}x" if "ratio_ours_to_pinet" in r else "-"
        diff = f"{r['max_abs_diff_vs_pinet']:.1e}" if r["max_abs_diff_vs_pinet"] is not None else "-"
        lines.append(f"| {r['batch']} | {r['iters']} | {cell(r['ours'])} | {cell(r.get('ours_python'))} | "
                     f"{cell(r.get('ours_reference'))} | {cell(r.get('pinet-hcnn'))} | {ratio} | {diff} | "
                     f"{cell(r.get('refine_dr'))} | {cell(r.get('refine_dr_python'))} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
