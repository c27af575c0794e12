"""Where the fused layer's time goes (issue 31, item 2): ``torch.profiler`` of ``Proposed.predict`` (fused) and of
the bare MLP on one problem at one batch size, self CPU time per op grouped by input shapes.

Run: ``python benchmarks/investigations/profile_fused.py dcopf_200 4096`` (a freshly initialised network, as bench_methods).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common
import common  # noqa: E402


def main(problem_cfg: str, batch: int, calls: int) -> None:
    from torch.profiler import profile

    torch.set_num_threads(1)
    args = type("Args", (), {"cache_dir": str(common.DEFAULT_CACHE), "device": "cpu", "seed": 0})()
    problem = common.load_problem(problem_cfg)
    ctx = common.make_context(args)
    method, _, _ = common.make_method(problem_cfg, "proposed", problem, ctx)
    torch.manual_seed(0)
    mlp = ctx.make_mlp(problem.box, problem.n).eval()
    xi = common.sample(problem, batch, 1, args)
    print(f"{problem_cfg}, batch {batch}, {calls} calls each; {method.fused_module()}")
    for name, fn in (("mlp", lambda: mlp(xi)), ("proposed (fused)", lambda: method.predict(xi))):
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                fn()
            with profile(record_shapes=True) as prof:
                for _ in range(calls):
                    fn()
        print(f"\n== {name}")
        table = prof.key_averages(group_by_input_shape=True).table(
            sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=22, max_shapes_column_width=60
        )
        print(table)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else (200 if sys.argv[2] == "1" else 5))
