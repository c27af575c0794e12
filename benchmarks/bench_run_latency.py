"""Inference time of finished proposed runs, reloaded from their checkpoints: the fused path against the unfused layer.

Why: ``bench_methods.py`` times fresh networks on the paper's cases; on a large grid a user wants to know what
*their* trained model costs, and whether the fused path (:mod:`hardlinear.layers.fused`) pays there. Each run is
reloaded by :func:`hardlinear.load_run` (its stored probe outputs checked), then timed on inputs drawn from its
problem's box: batch 1 (median over ``--instances`` single calls) and each ``--batch-sizes`` (median of
``--repeats`` calls), fused and unfused in the same process. The two paths' outputs are compared on every timed
batch (max relative difference, and alpha) and the float64 inequality and equality residuals of the fused ones
are reported, so a speed-up never hides a wrong answer.

Run: ``python benchmarks/bench_run_latency.py --runs results/paper/runs/table_large-case6470-proposed-seed0/0-dcopf-proposed-seed0``
(writes ``run_latency.csv`` / ``.json`` under ``--out-dir``, default ``results/bench``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

NAME = "run_latency"
COLUMNS = [
    "run", "problem", "n", "k", "d", "path", "batch_size", "calls", "median_ms", "ms_per_instance", "throughput",
    "max_rel_diff", "max_alpha_diff", "max_ineq_viol", "max_eq_resid", "threads", "device", "git_sha",
]  # fmt: skip


def parser():
    p = common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", required=True, help="finished run directories (with a checkpoint)")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 256, 4096])
    p.add_argument("--instances", type=int, default=100, help="single-instance calls timed at batch 1")
    return p


def residuals(problem, xi: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Largest inequality violation and equality residual (absolute, float64) of ``y`` at ``xi``, as the harness
    reports them (:func:`hardlinear.evaluation.metrics.instance_metrics`)."""
    from hardlinear.evaluation.metrics import instance_metrics

    xi64, y64 = xi.detach().cpu().double(), y.detach().cpu().double()
    m = instance_metrics(problem, xi64, y64, torch.ones(len(xi64), dtype=torch.float64))
    return float(m["ineq_max"].max()), float(m["eq_max"].max())


def bench_run(run_dir: str, args, env: dict) -> list[dict]:
    from hardlinear import load_run

    method = load_run(run_dir, device=args.device)
    problem = method.problem
    gen = torch.Generator().manual_seed(args.seed)
    base = {"run": run_dir, "problem": getattr(problem, "name", "?"), "n": problem.family.n, "k": problem.family.k,
            "threads": args.threads, "device": env["device"], "git_sha": env.get("git_sha", "")}
    rows = []
    for batch in args.batch_sizes:
        xi = problem.sample(args.instances if batch == 1 else batch, generator=gen).to(args.device)
        outputs = {}
        for path, fused in (("fused", True), ("unfused", False)):
            method.fused_inference = fused
            if batch == 1:
                singles = [xi[i : i + 1] for i in range(len(xi))]
                for one in singles[: args.warmup]:
                    method.predict(one)
                times = [common.time_call(lambda one=one: method.predict(one), args.device)[0] for one in singles]
                times.sort()
                seconds, calls = times[len(times) // 2], len(times)
                preds = [method.predict(one) for one in singles]
                y = torch.cat([p.y for p in preds])
                alpha = torch.cat([p.extras["alpha"] for p in preds])
            else:
                seconds, calls = common.median_time(lambda xi=xi: method.predict(xi), args.device, args.repeats, args.warmup)
                pred = method.predict(xi)
                y, alpha = pred.y, pred.extras["alpha"]
            outputs[path] = (y, alpha)
            row = {**base, "path": path, "batch_size": batch, "calls": calls, "median_ms": 1e3 * seconds,
                   "ms_per_instance": 1e3 * seconds / batch, "throughput": batch / seconds}
            if path == "fused":
                fused_module = method.fused_module()
                row["d"] = getattr(fused_module, "d", "")
                if not getattr(fused_module, "fused", True):
                    row["path"] = f"fused unavailable ({fused_module.reason})"
            row["max_ineq_viol"], row["max_eq_resid"] = residuals(problem, xi, y)
            rows.append(row)
            common.log(f"{base['problem']} {row['path']} batch {batch}: {row['ms_per_instance']:.3f} ms/instance")
        (yf, af), (yu, au) = outputs["fused"], outputs["unfused"]
        diff = ((yf - yu).abs().amax(dim=1) / (1 + yu.abs().amax(dim=1))).max().item()
        for row in rows[-2:]:
            row["max_rel_diff"], row["max_alpha_diff"] = diff, (af - au).abs().max().item()
    method.fused_inference = True
    return rows


def main(argv: list[str] | None = None) -> dict:
    """Runs the benchmark; returns ``{"rows": [...], "paths": {"csv": ..., "json": ...}}``."""
    args = common.resolve(parser().parse_args(argv), {"repeats": 5}, {"repeats": 10})
    torch.set_num_threads(args.threads)
    env = common.environment(args.device, args.threads)
    from hardlinear.harness.checkpoint import checkpoint_path

    missing = [r for r in args.runs if not checkpoint_path(r).is_file()]
    if missing:  # before any loading: name every run that cannot be timed
        raise SystemExit(f"no checkpoint.pt in: {', '.join(missing)} (a finished run directory holds one)")
    rows = []
    for run_dir in args.runs:
        rows += bench_run(run_dir, args, env)
    paths = common.write_results(args.out_dir, NAME, rows, {**env, "settings": vars(args)}, COLUMNS)
    print(f"wrote {paths['csv']}")
    return {"rows": rows, "paths": paths}


if __name__ == "__main__":
    main()
