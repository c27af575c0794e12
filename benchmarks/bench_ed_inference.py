"""Batch-1 and batch-1024 inference of E2ELR and the proposed method on the economic dispatch (issue 42, item 4).

Why a benchmark of its own: the runs' own ``test/time_ms`` was taken while other jobs shared the 2 cores, at
different loads for different runs, and their throughput at batch 4096; the issue asks for batch 1 and 1024 on
one footing. Here every (case, method) is timed in one process, one after another, one thread, from the
configuration the runs used (``conf/problem_method/ed_<method>.yaml``: network, dtype, method options), with the
decision rule from the cache the runs filled. The weights are freshly initialised: neither method's inference
does work that depends on the weights' values (E2ELR's repairs and the proposed layer run the same operations
whatever ``alpha`` comes out), so a trained network costs the same.

    python benchmarks/bench_ed_inference.py --cases pglib_opf_case14_ieee pglib_opf_case118_ieee \\
        --proposed-variants '' 'method.refine=problem' --out results/ed/inference.json

Batch 1: ``--instances`` inputs one at a time, each timed; median and interquartile range. Batch 1024:
``--repeats`` calls on one batch; median. A method that cannot be set up on a case (no rule) is a row saying why.
"""

from __future__ import annotations

from hardlinear.runtime.threads import size_native_pools

# one thread in numpy's pools too, before numpy loads: the problem is then built to the same bits as the runs built
# it (threads=1), so their decision rules load from the cache instead of being solved again (case1888: 9 min)
size_native_pools(1)

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

METHODS = ("e2elr", "proposed")


def time_case(case: str, method: str, args: argparse.Namespace, overrides: tuple[str, ...] = ()) -> dict:
    cfg, problem, dtype, m, failure = common.setup_ed_method(case, method, overrides, args.cache_dir)
    row = {"case": case.replace("pglib_opf_", ""), "method": method, "k": problem.k, "n": problem.n}
    if m is None:
        return {**row, "status": "failed", "note": failure}
    m.eval()
    # the problem options scripts/maintainers/ed_table.py shows beside the variant (the form, the rule's input set)
    extra = ([] if problem.form == "standard" else [f"form={problem.form}"]) + (
        [f"input_set={problem.input_set}"] if getattr(problem, "input_set", "box") != "box" else [])
    row["variant"] = " ".join(v for v in (m.describe().get("variant", ""), *extra) if v)
    xi = problem.sample(max(args.instances, args.batch), generator=torch.Generator().manual_seed(1)).to(dtype)
    with torch.no_grad():
        for i in range(args.warmup):
            m.predict(xi[i : i + 1])
        times = []
        for i in range(args.instances):
            t0 = time.perf_counter()
            m.predict(xi[i : i + 1])
            times.append(1e3 * (time.perf_counter() - t0))
        q = statistics.quantiles(times, n=4)
        batch = xi[: args.batch]
        median_s, calls = common.median_time(lambda: m.predict(batch), "cpu", args.repeats, 1)
    return {**row, "status": "ok", "batch1_ms": statistics.median(times), "batch1_iqr_ms": q[2] - q[0],
            f"batch{args.batch}_ms": 1e3 * median_s, f"batch{args.batch}_us_per_instance": 1e6 * median_s / args.batch,
            "calls": calls}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", required=True)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--instances", type=int, default=200)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--cache-dir", default=str(common.DEFAULT_CACHE))
    p.add_argument("--proposed-variants", nargs="+", default=[""], metavar="OVERRIDES",
                   help="the proposed method's variants to time, each a space-separated list of Hydra overrides "
                        "('' is conf/problem_method/ed_proposed.yaml as it is), e.g. '' 'method.refine=problem'")
    p.add_argument("--out", default="results/ed/inference.json")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    env = common.environment("cpu", 1)
    rows = common.ed_rows(args, time_case, lambda r: f"batch 1 {r['batch1_ms']:.3f} ms, batch {args.batch} {r[f'batch{args.batch}_ms']:.2f} ms",
                          "ed inference")
    common.write_rows(args.out, env, vars(args), rows, "ed inference")


if __name__ == "__main__":
    main()
