"""Run every benchmark, one progress line each, writing under ``results/bench/`` (``--quick``: ``results/bench/quick/``).

    python benchmarks/run_all.py --quick              # CI-sized: a few minutes on 2 cores
    python benchmarks/run_all.py --full               # the paper's problems (long)
    python benchmarks/run_all.py --quick --device cuda

Benchmarks: every method's latency and throughput beside its floor, the reference optimizers cold and warm,
and the ratios against the speed targets (``bench_methods``), the layer's stage breakdown (``bench_breakdown``),
training time per epoch (``bench_training``) and, when present, the decision rules' offline solve time
(``bench_decision_rules``, its own CLI: a CSV of cold solves, one process per case). A benchmark that fails
is reported and the others still run; the exit status is 1 if any failed. ``run_all.json`` records the
machine, the settings, each benchmark's status, wall time and outputs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

BENCHMARKS = ("bench_methods", "bench_breakdown", "bench_training", "bench_decision_rules")
# bench_decision_rules has its own CLI (no --quick/--full): the cases it solves at each size.
RULE_CASES = {"quick": ["dcopf_14", "dcopf_30", "portfolio"], "full": None}
RULE_FORMS = {"quick": ["standard"], "full": ["standard", "inequality"]}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="CI-sized (the default)")
    size.add_argument("--full", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out-dir", default=None, help="default: results/bench (full) or results/bench/quick")
    p.add_argument("--cache-dir", default=str(common.DEFAULT_CACHE))
    p.add_argument("--only", nargs="+", choices=BENCHMARKS, default=None, help="run only these")
    return p


def load_benchmark(name: str):
    """The benchmark module ``benchmarks/<name>.py`` (each has ``main(argv) -> dict | None``)."""
    return importlib.import_module(name)


def _argv(name: str, size: str, args: argparse.Namespace, out_dir: Path) -> list[str]:
    if name == "bench_decision_rules":
        csv_path = out_dir / "decision_rules.csv"
        csv_path.unlink(missing_ok=True)  # it appends; one run's rows per file here
        argv = ["--csv", str(csv_path), "--forms", *RULE_FORMS[size]]
        return argv + (["--cases", *RULE_CASES[size]] if RULE_CASES[size] else [])
    return [f"--{size}", "--device", args.device, "--threads", str(args.threads), "--out-dir", str(out_dir),
            "--cache-dir", str(args.cache_dir)]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    size = "full" if args.full else "quick"
    out_dir = Path(args.out_dir or (common.RESULTS if size == "full" else common.RESULTS / "quick"))
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [n for n in BENCHMARKS if args.only is None or n in args.only]
    record = {**common.environment(args.device, args.threads), "size": size, "benchmarks": {}}
    failed = 0
    t_all = time.perf_counter()
    for i, name in enumerate(names, 1):
        prefix = f"[{i}/{len(names)}] {name}"
        if not (HERE / f"{name}.py").exists():
            common.log(f"{prefix}: skipped (benchmarks/{name}.py is not present)")
            record["benchmarks"][name] = {"status": "absent"}
            continue
        bench_argv = _argv(name, size, args, out_dir)
        common.log(f"{prefix}: running ({' '.join(bench_argv)})")
        t0 = time.perf_counter()
        try:
            result = load_benchmark(name).main(bench_argv)
            status, error = "ok", ""
        except Exception as err:  # one broken benchmark must not hide the others' results
            traceback.print_exc()
            result, status, error = None, "failed", f"{type(err).__name__}: {err}"
            failed += 1
        elapsed = time.perf_counter() - t0
        outputs = {k: str(v) for k, v in (result or {}).get("paths", {}).items()} if isinstance(result, dict) else {}
        if name == "bench_decision_rules" and status == "ok":
            outputs = {"csv": str(out_dir / "decision_rules.csv")}
        record["benchmarks"][name] = {"status": status, "wall_s": round(elapsed, 1), "outputs": outputs, "error": error}
        common.log(
            f"{prefix}: {status} in {elapsed:.1f} s"
            + (f" -> {', '.join(outputs.values())}" if outputs else f" ({error})" if error else "")
        )
    record["wall_s"] = round(time.perf_counter() - t_all, 1)
    (out_dir / "run_all.json").write_text(json.dumps(record, indent=2) + "\n")
    common.log(f"all benchmarks: {record['wall_s']:.0f} s, {failed} failed; summary in {out_dir / 'run_all.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
