"""Time and peak memory of each stage of the proposed method's pipeline on one DC-OPF case (issue 20).

Stages, in the order ``run.py`` runs them: problem build (standard form), decision rule (solved, or loaded from
``--cache-dir``), layer build (``Proposed.setup``: rule load, equality projector, slack operator, network), data
generation (``--data`` reference solves), training steps (``--steps`` optimizer steps at the trainer's batch size,
pretraining and the main loss), fused inference (first call builds the fused module), metrics (float64), a
throughput batch, and a checkpoint save / reload. Peak RSS per stage is sampled by a thread every 10 ms (the
process's RSS, so it includes what earlier stages still hold); ``ru_maxrss`` is the process's peak.

    PYTHONPATH=src python benchmarks/investigations/profile_pipeline.py --case pglib_opf_case2000_goc --uncertainty 0.02

Prints one line per stage and writes ``--out`` (JSON) with the same figures.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch


class RssSampler:
    """The process's largest RSS (MB) since the last :meth:`reset`, sampled every ``period`` seconds."""

    def __init__(self, period: float = 0.01) -> None:
        self.period, self.peak, self._stop = period, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def current() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            time.sleep(self.period)

    def reset(self) -> None:
        self.peak = self.current()

    def stop(self) -> None:
        self._stop.set()


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the stages; returns one dict per stage (also printed, and written to ``--out``)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="pglib_opf_case2000_goc")
    p.add_argument("--uncertainty", type=float, default=None, help="default: the paper's level, else 0.02")
    p.add_argument("--inputs", default="all_buses")
    p.add_argument("--form", default="standard")
    p.add_argument("--cache-dir", default="data/cache")
    p.add_argument("--data", type=int, default=8, help="reference solves timed (data generation)")
    p.add_argument("--steps", type=int, default=5, help="optimizer steps timed per phase")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--throughput-batch", type=int, default=1024)
    p.add_argument("--out", default=None, help="JSON output (default: print only)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    from hardlinear.evaluation.metrics import evaluate
    from hardlinear.harness.checkpoint import load_run, save_checkpoint
    from hardlinear.methods.base import Context
    from hardlinear.methods.proposed import Proposed
    from hardlinear.problems.datasets import build_dataset
    from hardlinear.problems.dcopf import DCOPF
    from hardlinear.rules.decision_rule import solve_decision_rule

    sampler = RssSampler()
    stages: list[dict] = []

    @contextmanager
    def stage(name: str):
        sampler.reset()
        t0 = time.perf_counter()
        extra: dict = {}
        yield extra
        row = {"stage": name, "time_s": time.perf_counter() - t0, "peak_rss_mb": sampler.peak, **extra}
        stages.append(row)
        more = " ".join(f"{k}={v}" for k, v in extra.items())
        print(f"{name:<22} {row['time_s']:9.2f} s  peak RSS {row['peak_rss_mb']:8.0f} MB  {more}", flush=True)

    with stage("problem build") as e:
        problem = DCOPF(args.case, uncertainty=args.uncertainty, inputs=args.inputs, form=args.form)
        e.update(n=problem.n, m_eq=problem.family.m_eq, m_ineq=problem.family.m_ineq, k=problem.k)
    with stage("decision rule") as e:
        rule = solve_decision_rule(problem, cache_dir=args.cache_dir)
        e.update(t_star=rule.t_star, solver=rule.info.get("solver"), cached=rule.info.get("cached"))
    del rule
    ctx = Context(cache_dir=args.cache_dir, progress=False)
    method = Proposed(out_of_domain="count")
    with stage("layer build") as e:
        method.setup(problem, ctx)
        e.update(projector=method.layer.projector.factorisation, slacks=method.layer.slacks.mode)
    gen = torch.Generator().manual_seed(0)
    with stage("data generation") as e:
        data = build_dataset(problem, "test", args.data, 12345, cache_dir=None, progress=False)
        e.update(instances=args.data, solve_ms=round(1000 * float(data.solve_time_s.mean()), 1))
    opt = torch.optim.Adam(method.net.parameters(), lr=1e-4)
    method.train()
    for phase in ("pretrain", "train"):
        xi = problem.sample(args.batch, generator=gen)
        with stage(f"train step ({phase})") as e:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                xb = problem.sample(args.batch, generator=gen)
                if phase == "pretrain":
                    loss = ((method.regress(xb).double() - method.pretrain_target(xb)) ** 2).mean()
                else:
                    loss = problem.objective(xb.double(), method(xb)).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            e.update(step_s=round((time.perf_counter() - t0) / args.steps, 3))
    method.eval()
    with torch.no_grad():
        with stage("fused build+predict") as e:
            pred = method.predict(data.xi.double())
            e.update(fused=type(method.fused_module()).__name__)
        with stage("metrics (float64)") as e:
            m = evaluate(problem, data.xi, pred.y, data.objective)
            e.update(gap_mean=round(m["test/gap_mean"], 3), ineq_viol_worst=m["test/ineq_viol_worst"], eq_viol_worst=m["test/eq_viol_worst"])
        with stage("batch-1 latency") as e:
            t0 = time.perf_counter()
            for i in range(len(xi)):
                method.predict(xi[i : i + 1].double())
            e.update(ms=round(1000 * (time.perf_counter() - t0) / len(xi), 2))
        with stage("throughput batch") as e:
            xt = problem.sample(args.throughput_batch, generator=gen).double()
            t0 = time.perf_counter()
            method.predict(xt)
            e.update(per_s=round(args.throughput_batch / (time.perf_counter() - t0), 1), batch=args.throughput_batch)
    with tempfile.TemporaryDirectory() as tmp, stage("checkpoint save+load") as e:
        config = {"problem": {"name": "dcopf", "case": args.case, "uncertainty": problem.uncertainty, "inputs": args.inputs,
                              "form": args.form}, "method": {"_target_": "hardlinear.methods.proposed.Proposed", "name": "proposed"},
                  "cache_dir": args.cache_dir, "seed": 0, "device": "cpu", "dtype": "float32", "network": ctx.network}
        path = save_checkpoint(Path(tmp), method, config, probe_xi=data.xi)
        e.update(size_mb=round(Path(path).stat().st_size / 2**20, 1))
        try:
            load_run(tmp)
            e.update(reload="ok")
        except Exception as err:  # noqa: BLE001 - a profile reports what failed and goes on
            e.update(reload=f"{type(err).__name__}: {err}")
    sampler.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process peak RSS (ru_maxrss): {peak:.0f} MB", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "stages": stages, "ru_maxrss_mb": peak}, indent=2, default=str))
    return stages


if __name__ == "__main__":
    main()
