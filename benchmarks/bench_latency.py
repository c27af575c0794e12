"""Inference latency and throughput of every method, and of the reference solvers, in one process.

Per problem, on one machine and one device:

* **Networks and layers** (bare MLP, proposed, proposed_fused, LDR, APM, EAPM, DC3; ``mlp_folded`` on request):
  latency at batch 1 (median over test
  instances, each passed alone through ``method.predict``) and, for each batch size, the median time of one
  ``predict`` call on a fresh batch; throughput = batch / that time. Networks are untrained unless
  ``--train-epochs N`` (untrained networks make APM, EAPM and DC3 iterate more than trained ones would; the
  bare MLP and the unfused proposed layer cost the same trained or not; the fused path skips the safe output
  for rows the blend leaves alone, so an untrained network, whose every row moves, is its worst case).
* **Post-projection** (a network, then one QP per instance; clarabel, osqp) and **optimizers** (HiGHS,
  Clarabel, OSQP, Gurobi where its licence admits the model): one instance at a time, so throughput is
  1 / latency. The solver's model is built once; per instance only the right-hand sides change.
  ``cold``: no basis or solution carried over (the backends' default without ``warm_start``);
  ``warm_prev``: started from the previous test instance's solution; ``warm_net``: started from the proposed
  method's prediction (its time not included). A backend that takes no start (Clarabel) has no warm rows;
  a licence that refuses the model is a ``skipped`` row with the reason.

Ratios (``latency_summary.csv``) against the targets: proposed / MLP at batch 1 (<= 1.5) and at batch 4096
(<= 2) on dcopf_118 and dcopf_200; fastest cold optimizer / proposed at batch 1 (>= 20) and proposed batched
throughput / that optimizer's rate (>= 1000) on their QPs. Other problems are shown for reference. The same
ratios follow for ``proposed_fused`` (``Proposed(fused_inference=True)``: :mod:`hardlinear.layers.fused`),
suffixed `` (fused)``, and for the ``torch.compile`` variants, suffixed `` (torch.compile)``.
``mlp_folded`` (the bare MLP with batch norm folded into its linear layers, as the fused path does) is a
reference for how much of the fused path's gain is the folding alone.

Run: ``python benchmarks/bench_latency.py --quick`` (or ``--full``; ``--help`` lists the settings).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

NAME = "latency"
QUICK = {
    "problems": ["dcopf_14", "portfolio"],
    "batch_sizes": [1, 16, 256, 4096],
    "repeats": 5,
    "test_instances": 30,
    "solver_instances": 20,
    "call_budget": 20.0,
}
FULL = {
    "problems": [f"dcopf_{c}{q}" for c in (14, 30, 57, 118, 200) for q in ("", "_qp")] + ["portfolio"],
    "batch_sizes": [1, 16, 256, 4096, 65536],
    "repeats": 10,
    "test_instances": 100,
    "solver_instances": 100,
    "call_budget": 20.0,
}
LONG_CALL_S = 1.0  # seconds: a warm-up call this long is warm-up enough
METHODS = ("mlp", "proposed", "proposed_fused", "ldr", "apm", "eapm", "dc3")
EXTRA_METHODS = ("mlp_folded",)  # on request only (--methods)
# Names that are a method config with overrides: name -> (config, overrides).
VARIANTS = {
    "proposed": ("proposed", ["method.fused_inference=false"]),  # the unfused layer (fused is the default)
    "proposed_fused": ("proposed", ["method.fused_inference=true"]),
}
PROJECTIONS = ("post_projection", "post_projection_osqp")
SOLVERS = ("highs", "clarabel", "osqp", "gurobi")
WARM_MODES = ("cold", "warm_prev", "warm_state", "warm_net")
COMPILABLE = ("mlp", "proposed")
COLUMNS = [
    "round", "problem", "case", "objective", "form", "n", "m_eq", "m_ineq", "k",
    "method", "variant", "kind", "trained_epochs", "batch_size", "calls", "median_ms", "ms_per_instance",
    "throughput", "solver_ms", "iterations_mean", "iterations_max", "failures", "status", "note",
    "rule_source", "device", "threads", "git_sha",
]  # fmt: skip
SUMMARY_COLUMNS = ["round", "problem", "ratio", "value", "target", "verdict", "target_applies", "detail"]
ROUNDS_COLUMNS = ["problem", "quantity", "batch_size", "median", "min", "max", "rounds", "unit"]
# Peak float64 (B, n) arrays a call holds, per method, for --max-gb (the unfused layer: y_task, y_TN, y_SN,
# slacks, the blend; the fused path runs in ~2 MB chunks and holds its float64 output).
ARRAYS = {"proposed": 6.0, "ldr": 2.0, "proposed_fused": 1.5, "mlp": 1.0, "mlp_folded": 1.0}
# Targets: (ratio, comparison, threshold, the problems they are stated for).
TARGETS = {
    "proposed_over_mlp_b1": ("<=", 1.5, ("dcopf_118", "dcopf_118_qp", "dcopf_200", "dcopf_200_qp")),
    "proposed_over_mlp_b4096": ("<=", 2.0, ("dcopf_118", "dcopf_118_qp", "dcopf_200", "dcopf_200_qp")),
    "optimizer_over_proposed_b1": (">=", 20.0, ("dcopf_118_qp", "dcopf_200_qp")),
    "throughput_over_optimizer": (">=", 1000.0, ("dcopf_118_qp", "dcopf_200_qp")),
}


def parser():
    p = common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    p.add_argument("--test-instances", type=int, default=None, help="instances timed one at a time (batch 1)")
    p.add_argument("--solver-instances", type=int, default=None, help="instances per solver and mode")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS + EXTRA_METHODS)
    p.add_argument("--projections", nargs="*", default=list(PROJECTIONS), help="post-projection method configs")
    p.add_argument("--solvers", nargs="*", default=list(SOLVERS), choices=SOLVERS)
    p.add_argument("--warm-modes", nargs="+", default=list(WARM_MODES), choices=WARM_MODES)
    p.add_argument("--train-epochs", type=int, default=0, help="train the learned methods this many epochs first")
    p.add_argument(
        "--compile", action="store_true", help="also time the MLP and proposed under torch.compile (slow to compile)"
    )
    p.add_argument(
        "--rounds", type=int, default=1, help="run every measurement this many times in this process "
        "(medians and ranges over the rounds: latency_rounds.csv and the figure)"
    )
    p.add_argument(
        "--max-gb", type=float, default=3.0, help="skip a batch whose (B, n) float64 arrays would exceed this (GB)"
    )
    p.add_argument(
        "--call-budget",
        type=float,
        default=None,
        help="seconds: a batch whose call would take longer than this (extrapolated linearly from the batch "
        "before) is skipped, with its estimate, and so are the larger ones",
    )
    return p


# --- learned methods and layers ---------------------------------------------------------------------------
class BareMLP:
    """The task network alone (the proposed method's network, same size and dtype), as a predictor."""

    name = "mlp"
    iterative = False

    def __init__(self, problem, ctx) -> None:
        self.net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, ctx.dtype).eval()

    @torch.no_grad()
    def predict(self, xi: torch.Tensor):
        return self.net(xi), None


class FoldedMLP:
    """The same network with ``Standardize`` and batch norm folded into its linear layers (what the fused path
    does to the hidden layers), as a predictor: a reference, not a target."""

    name = "mlp_folded"
    iterative = False

    def __init__(self, problem, ctx) -> None:
        from hardlinear.layers.fused import fold_network

        net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, ctx.dtype).eval()
        hidden, last = fold_network(net)
        self.layers = [(W.to(ctx.device, ctx.dtype), b.to(ctx.device, ctx.dtype)) for W, b in [*hidden, last]]

    @torch.no_grad()
    def predict(self, xi: torch.Tensor):
        z = xi
        for W, b in self.layers[:-1]:
            z = torch.nn.functional.linear(z, W, b).relu_()
        return torch.nn.functional.linear(z, *self.layers[-1]), None


def compile_forward(method) -> None:
    """Replace the forward pass by its ``torch.compile`` version (one compilation per batch size, untimed:
    the warm-up calls trigger it). Shows how much of the batch-1 overhead is per-operation dispatch."""
    target = method.net if isinstance(method, BareMLP) else method
    target.forward = torch.compile(target.forward, dynamic=False)


def _predict(method):
    """``xi -> (y, iterations or None)`` for methods and the bare MLP alike."""
    if isinstance(method, (BareMLP, FoldedMLP)):
        return method.predict

    def run(xi):
        pred = method.predict(xi)
        return pred.y, pred.iterations if getattr(method, "iterative", False) else None

    return run


def time_batch1(predict, xi: torch.Tensor, device: str, warmup: int) -> tuple[float, list[float]]:
    """Median ms over the instances of ``xi`` passed one at a time, and the iterations of each."""
    for i in range(min(warmup, len(xi))):
        predict(xi[i : i + 1])
    times, iters = [], []
    for i in range(len(xi)):
        dt, (_, it) = common.time_call(lambda i=i: predict(xi[i : i + 1]), device)
        times.append(dt)
        if it is not None:
            iters.append(float(it.double().mean()))
    return 1000.0 * statistics.median(times), iters


def learned_rows(name: str, method, problem, args, ident: dict, xi_test: torch.Tensor) -> list[dict]:
    predict = _predict(method)
    kind = "iterative" if getattr(method, "iterative", False) else ("network" if name.startswith("mlp") else "layer")
    rows = []
    ms, iters = time_batch1(predict, xi_test, args.device, args.warmup)
    rows.append({**ident, "method": name, "kind": kind, "batch_size": 1, "calls": len(xi_test), "median_ms": ms,
                 "ms_per_instance": ms, "throughput": 1000.0 / ms, "status": "ok", "note": "median over test instances",
                 **_iteration_cols(iters)})  # fmt: skip
    too_slow = None
    batches = [B for B in args.batch_sizes if B != 1]
    for j, B in enumerate(batches):
        base = {**ident, "method": name, "kind": kind, "batch_size": B}
        if too_slow is not None:
            rows.append({**base, "status": "skipped", "note": too_slow})
            continue
        gb = ARRAYS.get(name, 4.0) * B * problem.n * 8 / 1e9
        if gb > args.max_gb:
            rows.append({**base, "status": "skipped", "note": f"~{gb:.1f} GB of (B, n) arrays > --max-gb {args.max_gb}"})
            continue
        xi = common.sample(problem, B, args.seed + 1000 + B, args)
        t0 = time.perf_counter()
        _, it = predict(xi)  # the warm-up call; also gives the iterations at this batch
        # a call of a second or more is its own warm-up: more untimed calls only cost time
        warmup = 0 if time.perf_counter() - t0 > LONG_CALL_S else max(args.warmup - 1, 0)
        budget = args.call_budget
        sec, calls = common.median_time(lambda xi=xi: predict(xi), args.device, args.repeats, warmup, budget)
        rows.append({**base, "calls": calls, "median_ms": 1000 * sec, "ms_per_instance": 1000 * sec / B,
                     "throughput": B / sec, "status": "ok",
                     **_iteration_cols([] if it is None else it.double().tolist())})  # fmt: skip
        following = batches[j + 1] if j + 1 < len(batches) else None
        if following is not None and sec * following / B > budget:  # linear in B at large batch (an overestimate below)
            too_slow = (f"a call at batch {following} would take ~{sec * following / B:.0f} s (batch {B}: "
                        f"{sec:.1f} s) > --call-budget {budget} s")  # fmt: skip
    return rows


def _iteration_cols(iters: list[float]) -> dict:
    if not iters:
        return {}
    return {"iterations_mean": float(np.mean(iters)), "iterations_max": float(np.max(iters))}


# --- per-instance methods: post-projection and the solvers ---------------------------------------------------
def projection_rows(config: str, problem_cfg: str, problem, ctx, args, ident: dict, xi: torch.Tensor) -> list[dict]:
    from hardlinear.solvers import SolverUnavailable

    base = {**ident, "method": "post_projection", "kind": "projection", "batch_size": 1}
    try:
        method, _, _ = common.make_method(problem_cfg, config, problem, ctx, ["method.on_failure='nan'"])
    except SolverUnavailable as err:
        return [{**base, "variant": config, "status": "skipped", "note": str(err)}]
    base["variant"] = method.solver
    failures = 0

    def predict(x):
        nonlocal failures
        pred = method.predict(x)
        failures += int(pred.extras.get("failures", 0))
        return pred.y, pred.iterations

    ms, iters = time_batch1(predict, xi, args.device, min(args.warmup, 1))
    return [{**base, "calls": len(xi), "median_ms": ms, "ms_per_instance": ms, "throughput": 1000.0 / ms,
             "failures": failures, "status": "ok", "note": "one QP per instance: throughput = 1 / latency; untrained network",
             **_iteration_cols(iters)}]  # fmt: skip


def solver_rows(name: str, problem, args, ident: dict, xi: torch.Tensor, starts: np.ndarray | None) -> list[dict]:
    """Cold and warm-started solves of the compact model, one instance at a time."""
    from hardlinear.solvers import SolverUnavailable, make_solver, solver_class

    base = {**ident, "method": "optimizer", "kind": "solver", "batch_size": 1}
    modes = [m for m in args.warm_modes if m != "warm_net" or starts is not None]
    try:
        backend = make_solver(problem, name)
    except SolverUnavailable as err:
        return [{**base, "variant": f"{name}/{m}", "status": "skipped", "note": str(err)} for m in modes]
    lhs_varies = problem.compact.input_dependent_lhs
    xi_np = xi.detach().cpu().double().numpy()
    data = [problem.compact.instance(x) for x in xi_np]  # instance data is prepared, not timed
    warm_ok = solver_class(name).supports_warm_start
    rows = []
    for mode in modes:
        row = {**base, "variant": f"{name}/{mode}"}
        if mode != "cold" and not warm_ok:
            rows.append({**row, "status": "skipped", "note": f"{name} takes no warm start"})
            continue
        if mode == "warm_state" and not solver_class(name).supports_previous_state:
            rows.append({**row, "status": "skipped", "note": f"{name} keeps no state between solves here"})
            continue
        try:
            rows.append({**row, **_solve_all(backend, data, lhs_varies, mode, starts, problem.n_orig)})
        except SolverUnavailable as err:
            rows.append({**row, "status": "skipped", "note": str(err)})
            if mode == "cold":  # the licence refuses this model: every mode would say the same
                rows += [{**base, "variant": f"{name}/{m}", "status": "skipped", "note": str(err)} for m in modes[1:]]
                break
    return rows


def _solve_all(backend, data, lhs_varies: bool, mode: str, starts, n_orig: int) -> dict:
    from hardlinear.solvers import PREVIOUS

    def solve(i: int, warm):
        G, g, H, h = data[i]
        return backend.solve(g, h, G=G if lhs_varies else None, H=H if lhs_varies else None, warm_start=warm)

    prev = solve(len(data) - 1, None)  # warm-up; its solution starts the first warm_prev solve
    walls, own, iters, failures = [], [], [], 0
    for i in range(len(data)):
        if mode == "cold":
            warm = None
        elif mode == "warm_prev":
            warm = prev.y if prev.optimal else None
        elif mode == "warm_state":
            warm = PREVIOUS
        else:
            warm = starts[i, :n_orig]
        t0 = time.perf_counter()
        res = solve(i, warm)
        walls.append(time.perf_counter() - t0)
        own.append(res.time_s)
        iters.append(res.iterations)
        failures += not res.optimal
        prev = res
    ms = 1000.0 * statistics.median(walls)
    note = {"cold": "no basis or solution carried over", "warm_prev": "started from the previous instance's solution",
            "warm_state": "started from the solver's state after the previous instance (simplex basis / iterates)",
            "warm_net": "started from the proposed method's prediction"}[mode]  # fmt: skip
    return {"calls": len(data), "median_ms": ms, "ms_per_instance": ms, "throughput": 1000.0 / ms,
            "solver_ms": 1000.0 * statistics.median(own), "iterations_mean": float(np.mean(iters)),
            "iterations_max": float(np.max(iters)), "failures": failures, "status": "ok",
            "note": note + "; median wall ms of solve() (right-hand side update and solve)"}  # fmt: skip


# --- one problem --------------------------------------------------------------------------------------------
def run_problem(problem_cfg: str, args, env: dict) -> list[dict]:
    problem = common.load_problem(problem_cfg)
    ctx = common.make_context(args)
    ident = {**common.problem_identity(problem_cfg, problem), "trained_epochs": args.train_epochs,
             "device": env["device_name"], "threads": args.threads, "git_sha": env["git_sha"]}  # fmt: skip
    xi_test = common.sample(problem, args.test_instances, args.seed + 12345, args)
    from hardlinear.errors import NotApplicable

    rows: list[dict] = []
    proposed = None
    for name in args.methods:
        t0 = time.perf_counter()
        if name in ("mlp", "mlp_folded"):
            torch.manual_seed(args.seed)
            method, source = (BareMLP if name == "mlp" else FoldedMLP)(problem, ctx), ""
        else:
            config, overrides = VARIANTS.get(name, (name, []))
            try:
                method, _, source = common.make_method(problem_cfg, config, problem, ctx, overrides)
            except NotApplicable as err:  # recorded, never a stop (issue 40: APM on dc3_qp stopped the run)
                rows.append({**ident, "method": name, "kind": "learned", "batch_size": 1, "status": "not_applicable", "note": str(err)})
                common.log(f"  {problem_cfg:>14} {name:<16} not applicable: {err}")
                continue
            common.quick_train(method, problem, ctx, args.train_epochs)
            proposed = method if name == "proposed" else proposed
        out = learned_rows(name, method, problem, args, {**ident, "rule_source": source}, xi_test)
        rows += out
        common.log(
            f"  {problem_cfg:>14} {name:<16} b1 {out[0]['median_ms']:8.3f} ms  ({time.perf_counter() - t0:.1f} s)"
        )
        if args.compile and name in COMPILABLE:
            t0 = time.perf_counter()
            compile_forward(method)
            out = learned_rows(
                name, method, problem, args, {**ident, "rule_source": source, "variant": "torch.compile"}, xi_test
            )
            rows += out
            common.log(
                f"  {problem_cfg:>14} {name + ' (compiled)':<16} b1 {out[0]['median_ms']:8.3f} ms  ({time.perf_counter() - t0:.1f} s)"
            )
    xi_solve = xi_test[: args.solver_instances]
    for config in args.projections:
        t0 = time.perf_counter()
        rows += projection_rows(config, problem_cfg, problem, ctx, args, ident, xi_solve)
        common.log(f"  {problem_cfg:>14} {config:<16} ({time.perf_counter() - t0:.1f} s)")
    starts = None
    if proposed is not None:
        with torch.no_grad():
            y = proposed.predict(xi_solve).y
        starts = problem.from_form(y.double().cpu()).numpy()
    for name in args.solvers:
        t0 = time.perf_counter()
        rows += solver_rows(name, problem, args, ident, xi_solve, starts)
        common.log(f"  {problem_cfg:>14} {name:<16} ({time.perf_counter() - t0:.1f} s)")
    return rows


# --- ratios against the targets -----------------------------------------------------------------------------
def _get(rows, method, batch, variant=""):
    for r in rows:
        if (
            r["method"] == method
            and r["batch_size"] == batch
            and r["status"] == "ok"
            and (r.get("variant") or "") == variant
        ):
            return r
    return None


def summarize(rows: list[dict]) -> list[dict]:
    """Per problem: the four ratios of the module docstring, each with its target and verdict (and again for
    the fused path and for the ``torch.compile`` variants of the MLP and proposed, where measured)."""
    out = []
    for problem in dict.fromkeys(r["problem"] for r in rows):
        pr = [r for r in rows if r["problem"] == problem]
        cold = [
            r
            for r in pr
            if r["kind"] == "solver"
            and r["status"] == "ok"
            and r["variant"].endswith("/cold")
            and not r.get("failures")
        ]
        fastest = min(cold, key=lambda r: r["median_ms"], default=None)
        # (suffix of the ratio's name, the proposed method's rows, variant of both, which must be measured)
        for suffix, name, variant in (("", "proposed", ""), ("fused", "proposed_fused", ""),
                                      ("torch.compile", "proposed", "torch.compile")):  # fmt: skip
            p1, m1 = _get(pr, name, 1, variant), _get(pr, "mlp", 1, variant)
            if suffix and not (p1 and m1):
                continue
            big = max((r["batch_size"] for r in pr if r["method"] == name and r["status"] == "ok"), default=1)
            ref_batch = 4096 if _get(pr, name, 4096, variant) and _get(pr, "mlp", 4096, variant) else big
            pb, mb = _get(pr, name, ref_batch, variant), _get(pr, "mlp", ref_batch, variant)
            opt = fastest["variant"] if fastest else "none solved every instance"
            values = {
                "proposed_over_mlp_b1": (_ratio(p1, m1, "median_ms"), "batch 1"),
                "proposed_over_mlp_b4096": (_ratio(pb, mb, "median_ms"), f"batch {ref_batch}"),
                "optimizer_over_proposed_b1": (_ratio(fastest, p1, "median_ms"), f"fastest cold optimizer: {opt}"),
                "throughput_over_optimizer": (
                    _ratio(pb, fastest, "throughput"),
                    f"{name} at batch {ref_batch} vs {opt}",
                ),
            }
            for ratio, (value, detail) in values.items():
                op, target, where = TARGETS[ratio]
                ok = value <= target if op == "<=" else value >= target
                verdict = "n/a" if math.isnan(value) else ("PASS" if ok else "MISS")
                out.append({"problem": problem, "ratio": ratio + (f" ({suffix})" if suffix else ""), "value": value,
                            "target": f"{op} {target:g}", "verdict": verdict, "target_applies": problem in where,
                            "detail": detail})  # fmt: skip
    return out


def _ratio(a, b, key) -> float:
    return a[key] / b[key] if a and b else math.nan


def print_summary(summary: list[dict]) -> None:
    for s in summary:
        tag = "target" if s["target_applies"] else "reference"
        common.log(
            f"  r{s.get('round', 0)} {s['verdict']:>4}  {s['problem']:>14}  {s['ratio']:<28} {s['value']:10.3g}  (target {s['target']}, {tag}; {s['detail']})"
        )


# --- rounds: medians and ranges -----------------------------------------------------------------------------
def rounds_summary(rows: list[dict]) -> list[dict]:
    """Per problem: every method's ms per call at each batch, and the ratios the issue asks for (fused, unfused
    and LDR over the MLP at each batch; the fastest cold and warm solver over the fused path at batch 1), each
    taken within a round and then summarised over the rounds (median, min, max)."""
    per: dict[tuple, list[float]] = {}

    def add(problem, quantity, batch, value, unit):
        if value is not None and not math.isnan(value):
            per.setdefault((problem, quantity, batch, unit), []).append(value)

    for rnd in sorted({r.get("round", 0) for r in rows}):
        rr = [r for r in rows if r.get("round", 0) == rnd and r["status"] == "ok"]
        for problem in dict.fromkeys(r["problem"] for r in rr):
            pr = [r for r in rr if r["problem"] == problem]
            for r in pr:
                add(problem, _label(r), r["batch_size"], r["median_ms"], "ms per call")
            for B in sorted({r["batch_size"] for r in pr}):
                m = _get(pr, "mlp", B)
                for name in ("proposed_fused", "proposed", "ldr"):
                    add(problem, f"{name} / mlp", B, _ratio(_get(pr, name, B), m, "median_ms"), "ratio")
            f1 = _get(pr, "proposed_fused", 1)
            for mode in ("cold", "warm_state", "warm_prev"):
                solved = [r for r in pr if r["kind"] == "solver" and r["variant"].endswith(f"/{mode}") and not r.get("failures")]
                fastest = min(solved, key=lambda r: r["median_ms"], default=None)
                if fastest is not None:
                    add(problem, f"fastest {mode} solver ({fastest['variant']}) / proposed_fused", 1,
                        _ratio(fastest, f1, "median_ms"), "ratio")  # fmt: skip
    return [{"problem": p, "quantity": q, "batch_size": b, "median": statistics.median(v), "min": min(v),
             "max": max(v), "rounds": len(v), "unit": u} for (p, q, b, u), v in per.items()]  # fmt: skip


# --- plot ------------------------------------------------------------------------------------------------
# What the figure shows, in this order: (row label in the CSV, legend, colour, style).
CURVES = [
    ("mlp", "bare MLP (no guarantee)", "0.35", "o-"),
    ("proposed_fused", "proposed, fused (default)", "tab:red", "o-"),
    ("proposed", "proposed, unfused layer", "tab:orange", "s--"),
    ("ldr", "LDR (the rule alone)", "tab:green", "^-"),
    ("optimizer (highs/cold)", "HiGHS, cold", "tab:blue", ":"),
    ("optimizer (highs/warm_state)", "HiGHS, from previous basis", "tab:blue", "-"),
    ("optimizer (clarabel/cold)", "Clarabel, cold", "tab:purple", ":"),
]


def plot(rows: list[dict], path: Path) -> Path:
    """Time per instance against batch size, one log-log panel per problem: medians over the rounds, bars from
    the fastest to the slowest round. Solvers take one instance at a time: their time per instance is flat."""
    import matplotlib.ticker as mticker

    problems = list(dict.fromkeys(r["problem"] for r in rows))
    fig, axes = common.new_figure(len(problems), ncols=min(2, len(problems)), size=(5.6, 4.2))
    for ax, problem in zip(axes, problems):
        pr = [r for r in rows if r["problem"] == problem and r["status"] == "ok"]
        batches = sorted({r["batch_size"] for r in pr if r["kind"] != "solver"}) or [1]
        for label, legend, colour, style in CURVES:
            pts: dict[int, list[float]] = {}
            for r in pr:
                if _label(r) == label:
                    pts.setdefault(r["batch_size"], []).append(r["ms_per_instance"])
            if not pts:
                continue
            if label.startswith("optimizer"):
                v = pts[1]
                med = statistics.median(v)
                ax.plot([batches[0], batches[-1]], [med, med], style, color=colour, lw=1.6, label=f"{legend} (one at a time)")
                continue
            xs = sorted(pts)
            med = [statistics.median(pts[b]) for b in xs]
            err = [[m - min(pts[b]) for b, m in zip(xs, med)], [max(pts[b]) - m for b, m in zip(xs, med)]]
            ax.errorbar(xs, med, yerr=err, fmt=style, color=colour, ms=4, lw=1.4, capsize=2, label=legend)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(mticker.LogLocator(base=4.0))
        ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{int(v):,}"))
        ax.set_title(problem)
        ax.set_xlabel("batch size (instances per call)")
        ax.set_ylabel("time per instance (ms)")
        ax.grid(True, which="major", alpha=0.3)
    import matplotlib.pyplot as plt

    handles: dict[str, Any] = {}
    for ax in axes:  # one legend for the figure, in CURVES' order: every curve drawn in some panel
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    order = [c[1] for c in CURVES]
    labels = sorted(handles, key=lambda lab: next((i for i, o in enumerate(order) if lab.startswith(o)), 99))
    fig.suptitle("CPU, one thread: medians over the rounds (bars: fastest to slowest round); lines join measured "
                 "batch sizes; solvers take one instance at a time", fontsize=9)  # fmt: skip
    ncols = min(2, len(problems))
    spare = len(problems) % ncols == 1 and len(problems) > 1  # an empty panel slot: the legend goes there
    if spare:
        fig.legend([handles[k] for k in labels], labels, loc="center", bbox_to_anchor=(0.75, 0.5 / ((len(problems) + 1) // 2)),
                   fontsize=9, frameon=False)  # fmt: skip
        fig.tight_layout(rect=(0, 0, 1, 0.96))
    else:
        fig.legend([handles[k] for k in labels], labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8,
                   frameon=False)  # fmt: skip
        fig.tight_layout(rect=(0, 0.03 * ((len(labels) + 3) // 4) + 0.01, 1, 0.96))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _label(r: dict) -> str:
    return r["method"] if not r.get("variant") else f"{r['method']} ({r['variant']})"


# --- entry point ------------------------------------------------------------------------------------------
def replot(csv_paths: list[str], path: Path) -> Path:
    """The figure again from written ``latency.csv`` files (several runs' problems in one figure)."""
    import csv

    rows = []
    for name in csv_paths:
        with open(name, newline="") as f:
            for r in csv.DictReader(f):
                if r["status"] == "ok":
                    rows.append({**r, "batch_size": int(r["batch_size"]), "round": int(r["round"] or 0),
                                 "median_ms": float(r["median_ms"]), "ms_per_instance": float(r["ms_per_instance"])})  # fmt: skip
    return plot(rows, path)


def main(argv: list[str] | None = None) -> dict:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--replot":  # --replot OUT.png A.csv [B.csv ...]
        return {"paths": {"png": replot(argv[2:], Path(argv[1]))}}
    args = common.resolve(parser().parse_args(argv), QUICK, FULL)
    torch.set_num_threads(args.threads)
    env = common.environment(args.device, args.threads)
    common.log(f"[latency] {args.size}: {', '.join(args.problems)} on {env['device_name']}, {args.threads} thread(s)")
    rows: list[dict] = []
    summary: list[dict] = []
    for rnd in range(args.rounds):
        this: list[dict] = []
        for problem_cfg in args.problems:
            this += [{**r, "round": rnd} for r in run_problem(problem_cfg, args, env)]
        rows += this
        summary += [{**s, "round": rnd} for s in summarize(this)]
        common.log(f"[latency] round {rnd + 1} of {args.rounds} done")
    print_summary(summary)
    rounds = rounds_summary(rows)
    meta = {**env, "benchmark": NAME, "size": args.size, "settings": vars(args), "rule_available": common.rule_available(),
            "notes": {"untrained": args.train_epochs == 0, "timing": "median wall time per call after warm-up",
                      "solvers": "model built once, right-hand sides updated per instance"},
            "summary": summary}  # fmt: skip
    out = Path(args.out_dir)
    paths = common.write_results(out, NAME, rows, meta, COLUMNS)
    paths["summary"] = common.write_results(out, f"{NAME}_summary", summary, None, SUMMARY_COLUMNS)["csv"]
    paths["rounds"] = common.write_results(out, f"{NAME}_rounds", rounds, None, ROUNDS_COLUMNS)["csv"]
    if not args.no_plot:
        paths["png"] = plot(rows, out / f"{NAME}.png")
    return {"paths": paths, "rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
