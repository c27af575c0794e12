"""Evaluate a saved run again, on new test data: ``hardlinear evaluate RUN_DIR [--test-seed S] [--inputs FILE]``
(``python evaluate.py ...`` in a checkout).

Writes a record (``record.json``: study ``<the run's study>-eval`` or ``--study``, so ``hardlinear tables`` and the
loader see it), ``metrics.json`` and ``predictions.npz`` into ``RUN_DIR/eval/<time>-<data>/`` (or ``--out``);
prints the headline figures. Runs on the core install (``pip install hardlinear``): no extra is needed to reload
and evaluate a model, a DC-OPF run's included (its checkpoint carries the grid; one saved before that rebuilds it from
PGLib: ``pip install 'hardlinear[harness]'``). See README "Saved models".
"""

import argparse
import sys
from collections.abc import Sequence

MAX_THREADS = 1024  # hardlinear.harness.schemas.tables.MAX_THREADS (read before numpy loads: not imported)


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run directory holding checkpoint.pt")
    parser.add_argument("--test-seed", type=int, default=None, help="seed of a new test set (default: the run's)")
    parser.add_argument("--test-size", type=int, default=None, help="instances in it (default: the run's)")
    parser.add_argument("--inputs", default=None, help="your own inputs instead: .npy, .npz (array xi) or .csv, shape (N, k)")
    parser.add_argument("--out", default=None, help="output folder (default: RUN_DIR/eval/<time>-<data>)")
    parser.add_argument("--study", default=None, help="study of the new record (default: <the run's study>-eval)")
    parser.add_argument("--cache-dir", default=None, help="dataset and rule cache, e.g. data/cache (default: none, nothing cached; never a folder the checkpoint names)")
    parser.add_argument(
        "--file", action="append", default=[], metavar="KEY=PATH",
        help="a problem file the run read, e.g. --file problem.path=my_problem.npz (a checkpoint never names the files read)",
    )
    parser.add_argument(
        "--allow-missing-probe", action="store_true",
        help="load a checkpoint whose probe (saved outputs that prove the reload) is missing, UNCHECKED, with a warning",
    )
    args = parser.parse_args(argv)
    if args.test_seed is not None and not 0 <= args.test_seed < 2**63:
        parser.error(f"--test-seed must be in [0, 2**63); got {args.test_seed}")
    if args.test_size is not None and not 1 <= args.test_size <= 10_000_000:
        parser.error(f"--test-size must be in [1, 10,000,000] (each instance is solved by the reference solver); got {args.test_size:,}")
    if args.inputs is not None and (args.test_seed is not None or args.test_size is not None):
        parser.error("--inputs replaces the sampled test set: drop --test-seed and --test-size")
    files = dict(item.split("=", 1) for item in args.file if "=" in item)
    if len(files) != len(args.file):
        parser.error(f"--file takes KEY=PATH, e.g. --file problem.path=my_problem.npz; got {args.file}")

    from hardlinear.runtime.threads import size_native_pools

    size_native_pools(_run_threads(args.run_dir))  # before numpy and torch load, as run.py does
    from hardlinear.harness.checkpoint import CheckpointError
    from hardlinear.harness.reevaluate import evaluate_run
    from hardlinear.harness.results import BadRecord
    from hardlinear.runtime.extras import MissingExtra

    try:
        record = evaluate_run(
            args.run_dir, test_seed=args.test_seed, test_size=args.test_size, inputs=args.inputs,
            out_dir=args.out, cache_dir=args.cache_dir, files=files, study=args.study,
            allow_missing_probe=args.allow_missing_probe,
        )
    except (CheckpointError, BadRecord, FileExistsError, FileNotFoundError, ValueError, MissingExtra) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(
        f"[hardlinear] evaluated {record.get('problem', '?')}/{record.get('method', '?')} on {record['data.test_size']} "
        f"instances: gap {record['test/gap_mean']:.3f}% (worst {record['test/gap_worst']:.3f}), "
        f"eq {record['test/eq_viol_worst']:.1e}, ineq {record['test/ineq_viol_worst']:.1e} (study {record['study']}) -> {record['out_dir']}"
    )
    return 0


def _run_threads(run_dir: str) -> int:
    """The run's ``threads`` from its record (plain JSON: read before numpy and torch are imported); 1 if unknown."""
    import json
    from pathlib import Path

    for name in ("record.json", "config.json"):
        try:
            body = json.loads((Path(run_dir) / name).read_text())
        except (OSError, ValueError):
            continue
        config = body.get("config", body) if isinstance(body, dict) else {}
        threads = config.get("threads") if isinstance(config, dict) else None
        if isinstance(threads, int) and not isinstance(threads, bool) and 1 <= threads <= MAX_THREADS:
            return threads  # more is refused by the loader; the pools must not be sized from it before that
    return 1

