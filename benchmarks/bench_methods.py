"""Every method of ``conf/method/`` timed on one footing, beside its arithmetic floor (issue 31, item 1).

Per problem, in one process of its own (the parent starts one per problem): every method config of
``conf/method/*.yaml`` (found at run time, so that a new method is timed as soon as its config exists) is
instantiated and set up as the harness does (:func:`common.make_method`: the problem's ``problem_method``
overrides apply). A method that does not apply is a ``not_applicable`` row with its reason; one whose solver or
licence is missing a ``skipped`` row; one that fails a ``failed`` row with the error: none is left out silently.
A method whose class needs another form of the problem (``required_form``: APM's and EAPM's slacks) is timed on
that form (``problem.form=standard``), its row labelled ``apm[form=standard]`` with that form's ``n`` and floor;
where the problem config has no ``form`` option it is ``not_applicable``, saying so. A ``--checkpoint`` of such a
method must be a run trained in that form (same instance); any other is refused, the row ``failed`` saying why.
Two references: ``mlp`` (the task network alone, float32, the default 256 x 2 with batch norm) and ``mlp_f64``
(the same network in float64: the machine's rate for float64 multiply-adds), and ``proposed[unfused]`` (the
layer the fused path replaces). ``--row-modes`` / ``--batch-modes`` add ``proposed[row=MODE]`` /
``proposed[batch=MODE]``: the fused layer built with that batch-1 / block path (``layers/fused.py`` ``ROW_MODE``,
``BATCH_MODE``; a compiled mode compiles in the warm-up calls, which are not timed). ``--compile`` adds
``mlp[torch.compile]`` and ``proposed[unfused, torch.compile]``: their forward passes under ``torch.compile``
(how much of the batch-1 time is per-operation dispatch); ``--mlp-folded`` adds ``mlp_folded``, the MLP with
``Standardize`` and batch norm folded into its linear layers as the fused path does (how much of the fused path's
gain is the folding alone).

The reference optimizers, one instance at a time (``--solvers``, ``--warm-modes``): rows
``optimizer[SOLVER/MODE]``, the solver's model built once, per instance only the right-hand sides changed (the
instance data prepared untimed). ``cold``: nothing carried over; ``warm_prev``: started from the previous test
instance's solution; ``warm_state``: from the solver's own state after it (simplex basis, iterates);
``warm_net``: from the proposed method's prediction (its time not counted). A backend that takes no start
(Clarabel) has ``skipped`` warm rows saying so, a licence that refuses the model ``skipped`` rows with its
message. The ``optimizer`` and ``post_projection`` configs are rows of their own as every config (the optimizer
warm-started from its own network, post-projection one QP per instance after the network).

Timing: from a freshly initialised network (``--checkpoint RUN_DIR``: the trained weights of a finished run
instead, for its problem instance and method; a second checkpoint of the same problem and method, e.g. a refined
and a plain ``proposed``, is a row ``proposed[checkpoint 2]`` of its own; ``--keep-fresh proposed`` keeps the fresh
``proposed`` row and names every checkpoint ``proposed[checkpoint N]``). Every row names its weights and the
method's ``variant`` (as in the run records), so that a table can tell which run each timing belongs to. Batch 1: ``--instances`` test inputs passed one at a time through
``method.predict``; each timed; median and interquartile range. Batch B: ``--repeats`` calls on one batch of
``B`` fresh inputs; median, min and max. A batch whose call would exceed ``--call-budget`` seconds
(extrapolated from the batch-1 time: per-instance solvers) is ``skipped`` with the estimate. Methods that
iterate report their iterations (mean and max over the instances); FSNet its line-search evaluations too
(``line_search_mean``, which its floor counts).

Floor (:mod:`floors`): multiply-adds per instance by dtype and bytes of constants per call, derived from the
shapes of each method. ``floor_ratio`` = time / the bare MLP's time for the same multiply-adds at the same batch:
``macs_float32 / rate_float32 + macs_float64 / rate_float64`` with the rates measured on ``mlp`` and ``mlp_f64``
in the same process. 1 means "as efficient as the bare MLP per multiply-add"; a method far above 1 spends its
time on something other than arithmetic (dispatch, memory passes, Python). Solvers' work is not a fixed product:
their floor is the network's only (``floor_exact`` False, noted).

Ratios against the speed targets (:mod:`targets`): proposed / MLP at batch 1 and 4096, the fastest cold optimizer
/ proposed at batch 1, proposed throughput / optimizer's, each within a round and then over ``--rounds`` rounds
(median, min, max; ``methods_summary.csv`` and the end of ``methods.md``). ``--train-epochs N`` trains every fresh
learned network N epochs first (an untrained network makes APM, EAPM and DC3 iterate more than trained ones).

Run: ``python benchmarks/bench_methods.py --problems dcopf_118 dcopf_200 dc3_qp`` (``--quick``: dcopf_14, small
settings; ``--help`` lists the settings). Outputs ``methods.csv``, ``methods.json``, ``methods.md`` (the table),
``methods_summary.csv`` (the ratios) and ``methods.png`` (every method's time beside its floor, :mod:`methods_figure`) in ``--out-dir``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import floors  # noqa: E402
import targets  # noqa: E402

NAME = "methods"
QUICK = {"problems": ["dcopf_14"], "batch_sizes": [1, 256], "repeats": 3, "instances": 10, "call_budget": 5.0}
FULL = {
    "problems": ["dcopf_118", "dcopf_200", "dc3_qp"],
    "batch_sizes": [1, 1024, 4096],
    "repeats": 7,
    "instances": 60,
    "call_budget": 30.0,
}
REFERENCES = ("mlp", "mlp_f64")
COMPILED = "torch.compile"  # the suffix of the rows whose forward pass runs under torch.compile (--compile)
SOLVERS = ("highs", "clarabel", "osqp", "gurobi")
WARM_MODES = ("cold", "warm_prev", "warm_state", "warm_net")
PINET_HCNN = "pinet-hcnn (JAX)"  # the Pinet package's own jitted projection after our network (pinet_reference.py)


class SkipRow(Exception):
    """A row that cannot be timed here for a reason worth a line (a package not installed)."""
# Rows proposed[row=MODE] and proposed[batch=MODE]: the fused layer's module constant each one sets.
FUSED_MODES = {"row": "ROW_MODE", "batch": "BATCH_MODE"}
PROBE = 64  # batch of the one call that estimates a large batch's time when the batch-1 time says it is too long
# Extra rows: a config with overrides, shown beside the config's own row.
VARIANTS = {
    "proposed[unfused]": ("proposed", ["method.fused_inference=false"]),
    f"proposed[unfused, {COMPILED}]": ("proposed", ["method.fused_inference=false"]),
}
COLUMNS = [
    "round", "problem", "method", "config", "variant", "status", "note", "batch_size", "median_ms", "spread_lo_ms", "spread_hi_ms",
    "spread", "calls", "failures", "solver_ms", "iterations_mean", "iterations_max", "moved_fraction", "line_search_mean",
    "macs_float32", "macs_float64", "const_bytes", "floor_ms", "floor_ratio", "floor_exact", "floor_terms",
    "weights", "n", "k", "device", "threads", "git_sha",
]  # fmt: skip


def parser():
    p = common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    p.add_argument("--instances", type=int, default=None, help="inputs timed one at a time (batch 1)")
    p.add_argument("--methods", nargs="+", default=None, help="method configs (default: every conf/method/*.yaml)")
    p.add_argument("--skip", nargs="*", default=[], help="method configs left out (listed as such in the output)")
    p.add_argument("--call-budget", type=float, default=None, help="seconds: a larger call is skipped, with its estimate")
    p.add_argument("--checkpoint", nargs="*", default=[], help="run directories whose trained weights replace the "
                   "fresh network of their problem and method")  # fmt: skip
    p.add_argument("--keep-fresh", nargs="*", default=[], metavar="METHOD",
                   help="method configs whose fresh network is timed too: their checkpoints are rows "
                   "METHOD[checkpoint N] beside it (a plain proposed without kept weights beside a refined run)")  # fmt: skip
    p.add_argument("--row-modes", nargs="*", default=["off", "eager", "script"],
                   help="also time proposed with each batch-1 path of the fused layer (layers/fused.py ROW_MODES: "
                   "off = the general path, eager, script = TorchScript, compile = torch.compile)")  # fmt: skip
    p.add_argument("--batch-modes", nargs="*", default=[],
                   help="also time proposed with each block path of the fused layer, rows proposed[batch=MODE] "
                   "(layers/fused.py BATCH_MODES: compile = torch.compile of the chunk functions, eager = the same "
                   "functions uncompiled; the default proposed row is off); a compile happens in the warm-up calls")  # fmt: skip
    p.add_argument("--compile", action="store_true", help=f"also time mlp[{COMPILED}] and proposed[unfused, "
                   f"{COMPILED}] (slow to compile)")  # fmt: skip
    p.add_argument("--mlp-folded", action="store_true", help="also time mlp_folded (batch norm folded into the MLP)")
    p.add_argument("--solvers", nargs="*", default=list(SOLVERS), choices=SOLVERS,
                   help="reference optimizers timed one instance at a time, rows optimizer[SOLVER/MODE]")  # fmt: skip
    p.add_argument("--warm-modes", nargs="+", default=list(WARM_MODES), choices=WARM_MODES)
    p.add_argument("--train-epochs", type=int, default=0, help="train every fresh learned network this many epochs first")
    p.add_argument("--rounds", type=int, default=1, help="run every problem this many times (the ratios' spread)")
    p.add_argument("--child", action="store_true", help=argparse_suppress())
    return p


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


def method_configs() -> list[str]:
    """Every method config, in name order."""
    return sorted(p.stem for p in (common.CONF_DIR / "method").glob("*.yaml"))


# --- timing ---------------------------------------------------------------------------------------------------
# What a method reports beside its iterations, for its floor: the prediction's extras key -> the row's column
# (mean over the calls). The blend's moved rows are read from ``alpha``.
REPORTED = {"line_search_evaluations": "line_search_mean"}


def _predict(method):
    """``xi -> (y, iterations or None, {column: value} of what it reported: moved fraction, REPORTED)``."""
    if not hasattr(method, "predict"):
        return lambda xi: (method(xi), None, {})
    failed = method._bench_failures = [0]  # solves that were not optimal (on_failure=nan), over every call

    def run(xi):
        pred = method.predict(xi)
        failed[0] += int(pred.extras.get("failures", 0)) if isinstance(pred.extras, dict) else 0
        it = pred.iterations if getattr(method, "iterative", False) else None
        alpha = pred.extras.get("alpha") if isinstance(pred.extras, dict) else None
        reported = {"moved_fraction": float((alpha > 0).double().mean())} if torch.is_tensor(alpha) and alpha.numel() else {}
        for key, column in REPORTED.items():
            if isinstance(pred.extras, dict) and pred.extras.get(key) is not None:
                reported[column] = float(torch.as_tensor(pred.extras[key], dtype=torch.float64).mean())
        return pred.y, it, reported

    return run


def time_batch1(predict, xi: torch.Tensor, device: str, warmup: int, budget: float = math.inf) -> dict:
    """Each input alone; stops once ``budget`` seconds of timed calls have passed (at least 3 are timed)."""
    for i in range(min(warmup, len(xi))):
        predict(xi[i : i + 1])
    times, iters, reported = [], [], {}
    for i in range(len(xi)):
        if i >= 3 and sum(times) > 1000.0 * budget:
            break
        dt, (_, it, rep) = common.time_call(lambda i=i: predict(xi[i : i + 1]), device)
        times.append(1000.0 * dt)
        if it is not None:
            iters.append(float(it.double().mean()))
        for column, value in rep.items():
            reported.setdefault(column, []).append(value)
    q1, _, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
    return {"median_ms": statistics.median(times), "spread_lo_ms": q1, "spread_hi_ms": q3, "spread": "IQR",
            "calls": len(times), **_iters(iters), **{c: float(np.mean(v)) for c, v in reported.items()}}  # fmt: skip


def time_batch(predict, xi: torch.Tensor, device: str, repeats: int, warmup: int, budget: float) -> dict:
    t0 = time.perf_counter()
    _, it, reported = predict(xi)
    if time.perf_counter() - t0 < 1.0:
        for _ in range(max(warmup - 1, 0)):
            predict(xi)
    times: list[float] = []
    while len(times) < repeats:
        times.append(1000.0 * common.time_call(lambda: predict(xi), device)[0])
        if sum(times) > 1000.0 * budget:
            break
    its = [] if it is None else it.double().tolist()
    return {"median_ms": statistics.median(times), "spread_lo_ms": min(times), "spread_hi_ms": max(times),
            "spread": "min-max", "calls": len(times), **_iters(its), **reported}  # fmt: skip


def _iters(values: list[float]) -> dict:
    return {"iterations_mean": float(np.mean(values)), "iterations_max": float(np.max(values))} if values else {}


# --- methods --------------------------------------------------------------------------------------------------
class BareMLP(torch.nn.Module):
    """The task network alone, as a predictor (in ``dtype``: float64 gives the float64 rate)."""

    def __init__(self, problem, ctx, dtype: torch.dtype) -> None:
        super().__init__()
        torch.manual_seed(ctx.seed)
        self.net = ctx.make_mlp(problem.box, problem.n).to(ctx.device, dtype).eval()
        self.dtype = dtype

    @torch.no_grad()
    def forward(self, xi):
        return self.net(xi.to(self.dtype))


class FoldedMLP(torch.nn.Module):
    """The same network with ``Standardize`` and batch norm folded into its linear layers (what the fused path does
    to the hidden layers): a reference, not a target."""

    def __init__(self, net: torch.nn.Module) -> None:
        from hardlinear.layers.fused import fold_network

        super().__init__()
        hidden, last = fold_network(net)
        for i, (W, b) in enumerate([*hidden, last]):
            self.register_buffer(f"W{i}", W.to(torch.float32))
            self.register_buffer(f"b{i}", b.to(torch.float32))
        self.depth = len(hidden) + 1

    @torch.no_grad()
    def forward(self, xi):
        z = xi.to(torch.float32)
        for i in range(self.depth):
            z = torch.nn.functional.linear(z, getattr(self, f"W{i}"), getattr(self, f"b{i}"))
            z = z.relu_() if i < self.depth - 1 else z
        return z


def is_reference(name: str) -> bool:
    """A row of the bare network (``mlp``, ``mlp_f64``, ``mlp_folded``, ``mlp[torch.compile]``), not a config."""
    return name.split("[")[0] in (*REFERENCES, "mlp_folded")


def config_name(name: str) -> str:
    """The method config of a row name (``proposed[unfused]``, ``proposed[row=eager]``, ``proposed[checkpoint 2]``
    -> ``proposed``; the ``pinet-hcnn (JAX)`` reference -> ``pinet``)."""
    if name == PINET_HCNN:
        return "pinet"
    return VARIANTS.get(name, (name.split("[")[0],))[0]


def build(name: str, problem_cfg: str, problem, ctx, run_dir: str | None = None, problem_overrides: Sequence[str] = (),
          train_epochs: int = 0) -> tuple[object, str]:  # fmt: skip
    """The method for a row name and where its weights come from (``run_dir``: a finished run's checkpoint, which
    must be a run on ``problem``'s instance and form; ``problem_overrides``: those that built ``problem``, e.g.
    ``problem.form=standard``, passed on to a fresh method's config; ``train_epochs``: a fresh learned network is
    trained that many epochs first)."""
    if name == "mlp_folded":
        return FoldedMLP(BareMLP(problem, ctx, torch.float32).net), "fresh"
    if is_reference(name):
        mlp = BareMLP(problem, ctx, torch.float64 if name == "mlp_f64" else torch.float32)
        if name.endswith(f"[{COMPILED}]"):
            mlp.net.forward = torch.compile(mlp.net.forward, dynamic=False)  # compiles in the untimed warm-up
        return mlp, "fresh"
    if name == PINET_HCNN:
        import pinet_reference

        if not pinet_reference.available():
            raise SkipRow(f"pinet-hcnn is not installed: {pinet_reference.INSTALL}")
        if run_dir is not None:  # the same trained network as the pinet row
            method = load_checkpoint(run_dir, problem, problem_cfg, problem_overrides, ctx)
            return pinet_reference.PinetHcnnReference(method), f"checkpoint {run_dir}"
        method, _, _ = common.make_method(problem_cfg, "pinet", problem, ctx, list(problem_overrides))
        return pinet_reference.PinetHcnnReference(method), "fresh"
    config, variant = VARIANTS.get(name, (config_name(name), []))
    if "on_failure" in common.compose(problem_cfg, config).method:  # solvers: a failed solve is counted, not fatal
        variant = [*variant, "method.on_failure='nan'"]  # quoted: Hydra reads a bare nan as a float
    overrides = [*problem_overrides, *variant]
    if run_dir is not None and not variant:
        return load_checkpoint(run_dir, problem, problem_cfg, problem_overrides, ctx), f"checkpoint {run_dir}"
    method, _, source = common.make_method(problem_cfg, config, problem, ctx, overrides)
    weights = "fresh" + (f" (rule: {source})" if source and source != "decision_rule" else "")
    if train_epochs and common.quick_train(method, problem, ctx, train_epochs) is not None:
        weights += f", trained {train_epochs} epochs"
    if name.endswith(f", {COMPILED}]"):
        method.forward = torch.compile(method.forward, dynamic=False)  # the unfused layer's path; compiles in the warm-up
    return method, weights


def load_checkpoint(run_dir: str, problem, problem_cfg: str, problem_overrides: Sequence[str], ctx):
    """A finished run's method, refused unless it was trained on ``problem``'s instance in ``problem``'s form (a
    method timed on another form, APM's standard one, needs a run trained in that form): the form its config
    names is checked before anything is loaded, the rebuilt problem's instance and form after."""
    from hardlinear.harness.checkpoint import load_run, read_checkpoint

    timed = f"{problem.name} in {problem.form} form (--problems {problem_cfg}{''.join(f' {o}' for o in problem_overrides)})"

    def refuse(what: str) -> ValueError:
        return ValueError(f"checkpoint {run_dir} is a run {what}, but this row times {timed}: "
                          f"pass a run trained on that instance with problem.form={problem.form}")  # fmt: skip

    form = (read_checkpoint(run_dir)["config"].get("problem") or {}).get("form")
    if form and form != problem.form:
        raise refuse(f"in {form} form")
    method = load_run(run_dir, device=ctx.device, cache_dir=ctx.cache_dir)
    built = getattr(method, "problem", None)
    name, form = getattr(built, "name", problem.name), getattr(built, "form", problem.form)
    if (name, form) != (problem.name, problem.form):
        raise refuse(f"on {name} in {form} form")
    return method


def checkpoint_index(run_dirs: list[str]) -> dict:
    """``(problem instance name, method config name) -> [run dirs]`` of the given finished runs. The instance
    (``dc3_qp_eq10_ineq50``, not the config's ``dc3_qp``) is the run record's; a run without one is loaded."""
    from hardlinear.harness.checkpoint import load_run, read_checkpoint

    out: dict = {}
    for d in run_dirs:
        cfg = read_checkpoint(d)["config"]
        try:
            instance = json.loads((Path(d) / "record.json").read_text())["row"]["problem"]
        except (OSError, ValueError, KeyError):
            instance = load_run(d).problem.name
        out.setdefault((instance, cfg["method"]["name"]), []).append(d)
    return out


def with_checkpoints(
    names: list[str], problem_name: str, checkpoints: dict, keep_fresh: Sequence[str] = ()
) -> tuple[list[str], dict]:
    """Row names and the run dir each times: a method's first checkpoint replaces its fresh network (its row-mode
    rows too); each further one is a row ``method[checkpoint N]`` of its own. A method in ``keep_fresh`` keeps
    its fresh row (and row-mode rows) and each of its checkpoints is a row ``method[checkpoint N]`` from N = 1:
    a plain method whose trained weights were not kept is then timed fresh beside a refined run's weights."""
    out, dirs = list(names), {}
    for name in names:
        config = config_name(name)
        found = checkpoints.get((problem_name, config), [])
        keep = config in keep_fresh
        if not found or name in VARIANTS or (keep and name != config):
            continue
        own = found if keep else found[1:]  # the checkpoints that get rows of their own
        if not keep:
            dirs[name] = found[0]
        if name == config:
            first = len(found) - len(own) + 1
            extra = [f"{name}[checkpoint {i}]" for i in range(first, len(found) + 1)]
            at = out.index(name) + 1
            out[at:at] = extra
            dirs.update(zip(extra, own))
    return out, dirs


def form_plan(required: str | None, problem_section: dict, problem_cfg: str) -> tuple[str | None, str]:
    """``(form to build the problem in, or None; why the method does not apply, or "")`` for a method whose class
    needs ``required`` (its ``required_form``, e.g. APM's slacks): the problem's own form when it is that one
    or when nothing is required, the required one when the problem config has a ``form`` option, else none."""
    form = problem_section.get("form")
    if required is None or form == required:
        return None, ""
    if "form" not in problem_section:
        return None, f"needs problem.form={required}; problem {problem_cfg} has no form option (no {required} form)"
    return required, ""


def required_form(config: str, problem_cfg: str) -> tuple[str | None, dict]:
    """The form the method config's class needs (``required_form``), and the problem config's section."""
    from hydra.utils import get_class

    cfg = common.compose(problem_cfg, config)
    return getattr(get_class(cfg.method._target_), "required_form", None), dict(cfg.problem)


def method_rows(name: str, problem_cfg: str, problem, ctx, args, ident: dict, run_dir: str | None,
                problem_overrides: Sequence[str] = ()) -> list[dict]:  # fmt: skip
    base = {**ident, "method": name, "config": config_name(name)}
    switch = next((key for key in FUSED_MODES if name.startswith(f"proposed[{key}=")), None)
    if switch is None:
        return _method_rows(name, base, problem_cfg, problem, ctx, args, run_dir, problem_overrides)
    from hardlinear.layers import fused

    constant, mode = FUSED_MODES[switch], name.removeprefix(f"proposed[{switch}=").removesuffix("]")
    saved = getattr(fused, constant)
    setattr(fused, constant, mode)  # the fused module is built at the first predict
    try:
        return _method_rows(name, base, problem_cfg, problem, ctx, args, run_dir, problem_overrides)
    finally:
        setattr(fused, constant, saved)


def _method_rows(name: str, base: dict, problem_cfg: str, problem, ctx, args, run_dir: str | None,
                 problem_overrides: Sequence[str] = ()) -> list[dict]:  # fmt: skip
    from hardlinear.methods.base import NotApplicable
    from hardlinear.solvers import SolverUnavailable

    try:
        method, weights = build(name, problem_cfg, problem, ctx, run_dir, problem_overrides, args.train_epochs)
    except NotApplicable as err:
        return [{**base, "status": "not_applicable", "note": " ".join(str(err).split())}]
    except (SolverUnavailable, SkipRow) as err:
        return [{**base, "status": "skipped", "note": str(err).splitlines()[0]}]
    except Exception as err:  # noqa: BLE001 - recorded loudly, the other methods still run
        common.log(traceback.format_exc())
        return [{**base, "status": "failed", "note": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}]
    if hasattr(method, "eval"):
        method.eval()
    base = {**base, "variant": method.describe().get("variant", "") if hasattr(method, "describe") else ""}
    predict = _predict(method)
    xi1 = common.sample(problem, args.instances, args.seed + 12345, args)
    rows = []
    try:
        with torch.no_grad():
            t1 = time_batch1(predict, xi1, args.device, args.warmup, args.call_budget)
            rows.append({**base, "weights": weights, "batch_size": 1, "status": "ok", **t1})
            for B in [b for b in args.batch_sizes if b != 1]:
                est, basis = t1["median_ms"] * B / 1000.0, "batch-1 time"
                if est > args.call_budget and B > PROBE:  # a method that batches may be far faster per instance
                    probe = common.sample(problem, PROBE, args.seed + PROBE, args)
                    est = common.time_call(lambda probe=probe: predict(probe), args.device)[0] * B / PROBE
                    basis = f"one call at batch {PROBE}"
                if est > args.call_budget:
                    rows.append({**base, "weights": weights, "batch_size": B, "status": "skipped",
                                 "note": f"a call would take ~{est:.0f} s ({basis} x {B} / its batch) > --call-budget {args.call_budget:g} s"})  # fmt: skip
                    continue
                xi = common.sample(problem, B, args.seed + B, args)
                tb = time_batch(predict, xi, args.device, args.repeats, args.warmup, args.call_budget)
                rows.append({**base, "weights": weights, "batch_size": B, "status": "ok", **tb})
    except Exception as err:  # noqa: BLE001
        common.log(traceback.format_exc())
        rows.append({**base, "status": "failed", "note": f"{type(err).__name__}: {str(err).splitlines()[0]}"})
        return rows
    failures = getattr(method, "_bench_failures", [0])[0]
    for r in rows:
        if r["status"] == "ok":
            r.update(floor_columns(method, r))
        if failures:
            r["failures"] = failures  # over all of this method's timed and warm-up calls
            r["note"] = (r.get("note", "") + f"; {failures} solves not optimal (NaN rows)").lstrip("; ")
    return rows


# --- the reference optimizers, one instance at a time ---------------------------------------------------------
NOT_A_PRODUCT = {"floor_exact": False, "floor_terms": "a solver: its work per instance is not a fixed product"}
WARM_NOTES = {"cold": "no basis or solution carried over", "warm_prev": "started from the previous instance's solution",
              "warm_state": "started from the solver's state after the previous instance (simplex basis / iterates)",
              "warm_net": "started from the proposed method's prediction (its time not counted)"}  # fmt: skip


def solver_rows(solver: str, problem, args, ident: dict, xi: torch.Tensor, starts: np.ndarray | None) -> list[dict]:
    """Rows ``optimizer[SOLVER/MODE]``: the compact model solved for each input of ``xi`` in turn, per ``--warm-modes``
    (``warm_net`` only where ``starts``, the proposed method's predictions, are given)."""
    from hardlinear.solvers import SolverUnavailable, make_solver, solver_class

    modes = [m for m in args.warm_modes if m != "warm_net" or starts is not None]

    def row(mode: str, **values) -> dict:
        return {**ident, "method": f"optimizer[{solver}/{mode}]", "config": "optimizer", "variant": f"{solver}/{mode}",
                "batch_size": 1, **values}  # fmt: skip

    try:
        backend = make_solver(problem, solver)
    except SolverUnavailable as err:
        return [row(m, status="skipped", note=str(err).splitlines()[0]) for m in modes]
    data = [problem.compact.instance(x) for x in xi.detach().cpu().double().numpy()]  # prepared, not timed
    cls, rows = solver_class(solver), []
    for i, mode in enumerate(modes):
        if mode != "cold" and not cls.supports_warm_start:
            rows.append(row(mode, status="skipped", note=f"{solver} takes no warm start"))
        elif mode == "warm_state" and not cls.supports_previous_state:
            rows.append(row(mode, status="skipped", note=f"{solver} keeps no state between solves here"))
        else:
            try:
                rows.append(row(mode, **solve_each(backend, data, problem.compact.input_dependent_lhs, mode, starts, problem.n_orig)))
            except SolverUnavailable as err:  # a licence that refuses this model refuses it in every mode
                rows += [row(m, status="skipped", note=str(err).splitlines()[0]) for m in modes[i:]]
                break
    return rows


def solve_each(backend, data: list, lhs_varies: bool, mode: str, starts: np.ndarray | None, n_orig: int) -> dict:
    """Median wall ms of ``backend.solve`` (right-hand side update and solve) over the instances, its own reported
    time, iterations and the solves that were not optimal. The last instance is solved first, untimed (warm-up:
    its solution starts the first ``warm_prev`` solve)."""
    from hardlinear.solvers import PREVIOUS

    def solve(i: int, warm):
        G, g, H, h = data[i]
        return backend.solve(g, h, G=G if lhs_varies else None, H=H if lhs_varies else None, warm_start=warm)

    prev = solve(len(data) - 1, None)
    walls, own, iters, failures = [], [], [], 0
    for i in range(len(data)):
        warm = {"cold": None, "warm_prev": prev.y if prev.optimal else None, "warm_state": PREVIOUS,
                "warm_net": starts[i, :n_orig] if starts is not None else None}[mode]  # fmt: skip
        t0 = time.perf_counter()
        prev = solve(i, warm)
        walls.append(1000.0 * (time.perf_counter() - t0))
        own.append(1000.0 * prev.time_s)
        iters.append(prev.iterations)
        failures += not prev.optimal
    q1, _, q3 = statistics.quantiles(walls, n=4) if len(walls) > 1 else (walls[0],) * 3
    return {"median_ms": statistics.median(walls), "spread_lo_ms": q1, "spread_hi_ms": q3, "spread": "IQR",
            "calls": len(walls), "solver_ms": statistics.median(own), **_iters(iters), "failures": failures,
            "status": "ok", "note": WARM_NOTES[mode], **NOT_A_PRODUCT}  # fmt: skip


def proposed_starts(problem_cfg: str, problem, ctx, args, run_dir: str | None, xi: torch.Tensor) -> np.ndarray | None:
    """The proposed method's predictions for ``xi`` in the compact model's variables (``warm_net``'s starts), from
    the weights its row timed; None when it cannot be built (its own row says why)."""
    try:
        method, _ = build("proposed", problem_cfg, problem, ctx, run_dir, (), args.train_epochs)
    except Exception as err:  # noqa: BLE001 - the proposed row records the error; warm_net is left out
        common.log(f"  {problem_cfg:>10} warm_net left out: the proposed method could not be built ({type(err).__name__})")
        return None
    with torch.no_grad():
        y = method.predict(xi).y
    return problem.from_form(y.double().cpu()).numpy()


def floor_columns(method, row: dict) -> dict:
    it = row.get("iterations_mean", 1.0)
    f = floors.floor(method, iterations=it, moved=row.get("moved_fraction", 1.0), line_search=row.get("line_search_mean"))
    solver = hasattr(method, "solver") or type(method).__name__ == "ProjectionLayer"
    return {
        "macs_float32": f.macs.get("float32", 0.0),
        "macs_float64": f.macs.get("float64", 0.0),
        "const_bytes": f.const_bytes,
        "floor_exact": f.exact and not solver,
        "floor_terms": ("network only: a solver's work per instance is not a fixed product; " if solver else "")
        + f.describe(),
    }


def add_floor_ratios(rows: list[dict]) -> None:
    """``floor_ms`` and ``floor_ratio`` from the MLP's float32 and float64 rates at each batch size."""
    rates = {}
    for r in rows:
        if r["method"] in REFERENCES and r["status"] == "ok":
            macs = r["macs_float32"] + r["macs_float64"]
            rates[(r["method"], r["batch_size"])] = macs * r["batch_size"] / r["median_ms"]  # MACs per ms
    for r in rows:
        if r["status"] != "ok" or "macs_float32" not in r:
            continue
        B = r["batch_size"]
        r32, r64 = rates.get(("mlp", B)), rates.get(("mlp_f64", B))
        if not r32 or not r64:
            continue
        r["floor_ms"] = B * (r["macs_float32"] / r32 + r["macs_float64"] / r64)
        if r["floor_ms"] > 0:
            r["floor_ratio"] = r["median_ms"] / r["floor_ms"]


def run_problem(problem_cfg: str, args, env: dict) -> list[dict]:
    problem = common.load_problem(problem_cfg)
    ctx = common.make_context(args)
    ident = {"problem": problem_cfg, "n": problem.n, "k": problem.k, "device": env["device_name"],
             "threads": args.threads, "git_sha": env["git_sha"]}  # fmt: skip
    refs = [*REFERENCES, *(["mlp_folded"] if args.mlp_folded else []), *([f"mlp[{COMPILED}]"] if args.compile else [])]
    names = list(dict.fromkeys([*refs, *(args.methods or method_configs())]))  # a reference named again: once
    if "proposed" in names:
        at = names.index("proposed") + 1
        names[at:at] = ["proposed[unfused]", *([f"proposed[unfused, {COMPILED}]"] if args.compile else []),
                        *(f"proposed[row={m}]" for m in args.row_modes), *(f"proposed[batch={m}]" for m in args.batch_modes)]
    if "pinet" in names and PINET_HCNN not in names:  # the package's own layer beside ours, where it applies
        names.insert(names.index("pinet") + 1, PINET_HCNN)
    names, run_dirs = with_checkpoints(names, problem.name, checkpoint_index(args.checkpoint), args.keep_fresh)
    rows = []
    in_form = {problem.form: problem}  # the problem in each form a method needs (built once)
    for name in names:
        if name in args.skip:
            rows.append({**ident, "method": name, "config": name, "status": "skipped", "note": "--skip"})
            continue
        t0 = time.perf_counter()
        required, section = (None, {}) if is_reference(name) else required_form(config_name(name), problem_cfg)
        form, reason = form_plan(required, section, problem_cfg)
        if reason:
            out = [{**ident, "method": name, "config": config_name(name), "status": "not_applicable", "note": reason}]
        elif form is not None:  # timed on the form it needs, labelled so, with that form's sizes and floor
            overrides = [f"problem.form={form}"]
            if form not in in_form:
                in_form[form] = common.load_problem(problem_cfg, overrides)
            other = in_form[form]  # the same instance (its name), in that form: a checkpoint must be a run in it
            out = method_rows(name, problem_cfg, other, ctx, args, {**ident, "n": other.n, "k": other.k}, run_dirs.get(name), overrides)
            name = f"{name}[form={form}]"
            for r in out:
                r["method"] = name
        else:
            out = method_rows(name, problem_cfg, problem, ctx, args, ident, run_dirs.get(name))
        rows += out
        b1 = next((r for r in out if r.get("batch_size") == 1 and r["status"] == "ok"), None)
        what = f"b1 {b1['median_ms']:9.3f} ms" if b1 else f"{out[0]['status']}: {out[0].get('note', '')[:90]}"
        common.log(f"  {problem_cfg:>10} {name:<24} {what}  ({time.perf_counter() - t0:.1f} s)")
    if args.solvers:
        xi = common.sample(problem, args.instances, args.seed + 12345, args)  # the batch-1 rows' inputs
        wanted = "warm_net" in args.warm_modes and "proposed" in names and "proposed" not in args.skip
        starts = proposed_starts(problem_cfg, problem, ctx, args, run_dirs.get("proposed"), xi) if wanted else None
        for solver in args.solvers:
            t0 = time.perf_counter()
            out = solver_rows(solver, problem, args, ident, xi, starts)
            rows += out
            done = ", ".join(f"{r['variant'].split('/')[1]} {r['median_ms']:.3f} ms" if r["status"] == "ok" else
                             f"{r['variant'].split('/')[1]} {r['status']}" for r in out)  # fmt: skip
            common.log(f"  {problem_cfg:>10} optimizer[{solver}] {done}  ({time.perf_counter() - t0:.1f} s)")
    add_floor_ratios(rows)
    return rows


# --- output ---------------------------------------------------------------------------------------------------
def _fmt(v, spec: str) -> str:
    return "" if v in (None, "") or (isinstance(v, float) and np.isnan(v)) else format(v, spec)


def markdown(rows: list[dict], batch_sizes: list[int]) -> str:
    """One table per problem: a line per method, per batch size the median (spread) and the floor ratio."""
    out = []
    for problem in dict.fromkeys(r["problem"] for r in rows):
        pr = [r for r in rows if r["problem"] == problem]
        big = [b for b in batch_sizes if b != 1]
        head = ["method", "b1 ms (IQR)", "b1 / floor"] + [f"b{b} ms (min-max)" for b in big] + [
            f"b{b} / floor" for b in big] + ["MACs f32 / f64 per instance", "constants", "iterations", "note"]  # fmt: skip
        out += [f"### {problem} (n = {pr[0]['n']}, k = {pr[0]['k']})", "", "| " + " | ".join(head) + " |",
                "|" + "---|" * len(head)]  # fmt: skip
        for name in dict.fromkeys(r["method"] for r in pr):
            mr = {r.get("batch_size"): r for r in pr if r["method"] == name}
            first = next(iter(mr.values()))
            if first["status"] != "ok":
                out.append(f"| {name} | {first['status']} | | " + "| " * (2 * len(big)) + f"| | | {first.get('note', '')} |")
                continue

            def cell(B, mr=mr):
                r = mr.get(B)
                if r is None or r["status"] != "ok":
                    return (r or {}).get("status", ""), ""
                t = f"{r['median_ms']:.3g} ({r['spread_lo_ms']:.3g}-{r['spread_hi_ms']:.3g})"
                return t, _fmt(r.get("floor_ratio"), ".2f")

            b1 = cell(1)
            cells = [cell(B) for B in big]
            r1 = mr[1]
            macs = f"{r1.get('macs_float32', 0):,.0f} / {r1.get('macs_float64', 0):,.0f}" if "macs_float32" in r1 else ""
            const = f"{r1['const_bytes'] / 1e6:.2f} MB" if "const_bytes" in r1 else ""
            iters = _fmt(r1.get("iterations_mean"), ".1f")
            if "iterations_max" in r1:
                iters += f" (max {r1['iterations_max']:.0f})"
            if "line_search_mean" in r1:
                iters += f"; line search {r1['line_search_mean']:.1f} evaluations"
            bound = "floor: lower bound" if "macs_float32" in r1 and not r1.get("floor_exact", True) else ""
            notes = [n for n in (r1.get("note", ""), bound) if n]
            notes += [f"b{B}: {mr[B]['status']} ({mr[B].get('note', '')})" for B in big if B in mr and mr[B]["status"] != "ok"]
            if "moved_fraction" in r1:
                notes.append(f"rows moved: b1 {r1['moved_fraction']:.0%}")
            out.append("| " + " | ".join([name, b1[0], b1[1], *[c[0] for c in cells], *[c[1] for c in cells], macs,
                                          const, iters, "; ".join(notes)]) + " |")  # fmt: skip
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> dict:
    args = common.resolve(parser().parse_args(argv), QUICK, FULL)
    torch.set_num_threads(args.threads)
    env = common.environment(args.device, args.threads)
    out = Path(args.out_dir)
    if args.child:  # one problem, rows as JSON on the path given
        rows = run_problem(args.problems[0], args, env)
        Path(os.environ["BENCH_METHODS_ROWS"]).write_text(json.dumps(rows, default=float))
        return {"rows": rows}
    if args.rounds < 1:
        raise ValueError(f"--rounds must be >= 1; got {args.rounds}")
    common.log(f"[methods] {args.size}: {', '.join(args.problems)} on {env['device_name']}, {args.threads} thread(s)")
    rounds: list[list[dict]] = []
    out.mkdir(parents=True, exist_ok=True)
    for rnd in range(args.rounds):
        this: list[dict] = []
        for problem_cfg in args.problems:  # one process per problem
            tmp = out / f".{NAME}_{problem_cfg}.json"
            child = [sys.executable, __file__, "--child", "--problems", problem_cfg, *_passthrough(argv)]
            proc = subprocess.run(child, env={**os.environ, "BENCH_METHODS_ROWS": str(tmp)})
            if proc.returncode != 0 or not tmp.exists():
                this.append({"problem": problem_cfg, "method": "*", "status": "failed",
                             "note": f"the problem's process exited with {proc.returncode}"})  # fmt: skip
                continue
            this += json.loads(tmp.read_text())
            tmp.unlink()
        rounds.append([{**r, "round": rnd} for r in this])
        if args.rounds > 1:
            common.log(f"[methods] round {rnd + 1} of {args.rounds} done")
    rows = [r for rnd in rounds for r in rnd]
    summary = targets.summarize(rounds)
    for s in summary:
        tag = "target" if s["target_applies"] else "reference"
        common.log(f"  {s['verdict']:>4}  {s['problem']:>14}  {s['ratio']:<40} {s['value']:10.3g}  (target {s['target']}, {tag})")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    meta = {**env, "benchmark": NAME, "size": args.size, "settings": vars(args), "load_average_at_end": load,
            "method_configs": method_configs()}  # fmt: skip
    paths = common.write_results(out, NAME, rows, meta, COLUMNS)
    paths["summary"] = common.write_results(out, f"{NAME}_summary", summary, None, targets.COLUMNS)["csv"]
    md = out / f"{NAME}.md"
    cpu = env["machine"]["cpu_model"]
    last = rounds[-1]  # the table and the figure: the last round (every round is in the CSV, the ratios span them)
    which = f"; round {args.rounds} of {args.rounds}" if args.rounds > 1 else ""
    md.write_text(f"Machine: {cpu}, {args.threads} thread(s), device {env['device_name']}; load average at the end "
                  f"{load}; git {env['git_sha']}; {env['date']}{which}\n\n" + markdown(last, args.batch_sizes)
                  + "\n" + targets.markdown(summary))  # fmt: skip
    paths["md"] = md
    import methods_figure

    figure = methods_figure.draw(last, out / f"{NAME}.png", f"{env['device_name']}, {args.threads} thread(s), {env['date']}")
    if figure is not None:
        paths["png"] = figure
    common.log(f"[methods] wrote {', '.join(str(p) for p in paths.values())}")
    return {"paths": paths, "rows": rows}


def _passthrough(argv: list[str] | None) -> list[str]:
    """The parent's arguments less ``--problems`` and its values (the child gets its one problem)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out, skipping = [], False
    for a in argv:
        if a == "--problems":
            skipping = True
            continue
        if skipping and not a.startswith("--"):
            continue
        skipping = False
        out.append(a)
    return out


if __name__ == "__main__":
    main()
