"""What every benchmark shares: settings, the machine's identity, timing, problem and method set-up, outputs.

Problems and methods are built from the project's Hydra configs (``conf/problem``, ``conf/method`` and the
per-(problem, method) overrides in ``conf/problem_method``), so a benchmark runs each method with the settings
the experiments use and no per-method ``if`` lives here.

Timing protocol (every benchmark): ``torch.set_num_threads(threads)`` (default 1), untimed warm-up calls, then
the median over repeats of ``time.perf_counter`` around one call, with ``torch.cuda.synchronize()`` before and
after the call when the device is CUDA. Medians, not means: a 2-core machine shared with other jobs has
outliers that a mean would report.

Outputs: each benchmark writes ``<name>.csv`` (tidy: one row per measurement, identity columns on every row),
``<name>.json`` (the machine, versions, git sha, date, settings) and ``<name>.png`` under ``--out-dir``
(default ``results/bench``, or ``results/bench/quick`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = REPO / "conf"
RESULTS = REPO / "results" / "bench"
DEFAULT_CACHE = REPO / "data" / "cache"
VERSIONED = ("torch", "numpy", "scipy", "highspy", "clarabel", "osqp", "gurobipy", "cvxpy", "hydra-core")
RULE_MODULE = "hardlinear.rules.decision_rule"


# --- settings ---------------------------------------------------------------------------------------------
def base_parser(description: str) -> argparse.ArgumentParser:
    """Flags every benchmark takes; each adds its own and resolves ``--quick`` / ``--full`` defaults."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="CI-sized run (the default when neither is given)")
    size.add_argument("--full", action="store_true", help="the paper-sized run")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--problems", nargs="+", default=None, help="problem configs (conf/problem/*.yaml); default by size")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (median reported)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before each measurement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=None, help="default: results/bench (full) or results/bench/quick")
    p.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="decision rules and datasets (hash-keyed)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    return p


def resolve(args: argparse.Namespace, quick: dict[str, Any], full: dict[str, Any]) -> argparse.Namespace:
    """Fill every ``None`` setting from the quick or full defaults; checks the shared settings."""
    size = "full" if args.full else "quick"
    for key, value in (full if size == "full" else quick).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.size = size
    if args.out_dir is None:
        args.out_dir = str(RESULTS if size == "full" else RESULTS / "quick")
    if args.threads < 1:
        raise ValueError(f"--threads must be >= 1; got {args.threads}")
    if args.repeats is not None and args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1; got {args.repeats}")
    if str(args.device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device} asked for, but torch sees no CUDA device here: use --device cpu")
    return args


# --- the machine ------------------------------------------------------------------------------------------
def device_name(device: str) -> str:
    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return "cpu"


def versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def environment(device: str, threads: int) -> dict[str, Any]:
    """Where and with what a benchmark ran: machine, device, library versions, git sha, date, threads."""
    from hardlinear.harness.origin import cpu_model, git_sha

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    return {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_model": cpu_model(),
            "cores": os.cpu_count(),
            "usable_cores": usable,
            "python": platform.python_version(),
        },
        "device": str(device),
        "device_name": device_name(device),
        "threads": int(threads),
        "versions": versions(),
        "git_sha": git_sha(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# --- timing -----------------------------------------------------------------------------------------------
def sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def time_call(fn: Callable[[], Any], device: str) -> tuple[float, Any]:
    """Seconds of one call of ``fn`` (synchronised on CUDA), and its result."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def median_time(
    fn: Callable[[], Any], device: str, repeats: int, warmup: int, budget_s: float = float("inf")
) -> tuple[float, int]:
    """Median seconds of ``fn`` over ``repeats`` calls after ``warmup`` untimed ones, and the calls timed.

    Stops early (after at least one timed call) once ``budget_s`` of timed calls have passed: a large batch
    of a slow method is timed fewer times rather than not at all.
    """
    for _ in range(warmup):
        fn()
    times: list[float] = []
    while len(times) < repeats:
        times.append(time_call(fn, device)[0])
        if sum(times) > budget_s:
            break
    return statistics.median(times), len(times)


# --- problems and methods -----------------------------------------------------------------------------------
def compose(problem: str, method: str | None = None, overrides: Sequence[str] = ()):
    """The project's config for ``problem`` (a ``conf/problem`` name) and ``method`` (``conf/method``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from hardlinear.harness.rundirs import register_resolvers

    register_resolvers()  # ${lookup:} (conf/experiment/e2elr_tpwrs2024.yaml's network per case), ${uid:}
    items = [f"problem={problem}"] + ([f"method={method}"] if method else []) + list(overrides)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return hydra_compose("config", overrides=items)


def load_problem(problem: str, overrides: Sequence[str] = ()):
    """The problem a ``conf/problem`` name configures (e.g. ``dcopf_118_qp``; ``["problem.form=inequality"]``)."""
    from hardlinear.harness.runner import problem_from_config

    return problem_from_config(compose(problem, overrides=overrides))


def make_context(args: argparse.Namespace, network: dict | None = None):
    from hardlinear.methods.base import Context

    return Context(
        cache_dir=str(args.cache_dir),
        device=str(args.device),
        dtype=torch.float32,
        seed=int(args.seed),
        progress=False,
        network=dict(network or {"hidden": 256, "layers": 2, "batch_norm": True}),
    )


def sample(problem, n: int, seed: int, args: argparse.Namespace) -> torch.Tensor:
    """``(n, k)`` inputs from the box in the networks' dtype on the device (as the harness hands them over)."""
    xi = problem.sample(n, generator=torch.Generator().manual_seed(seed))
    return xi.to(args.device, torch.float32)


def rule_available() -> bool:
    """Whether the real decision-rule module exists (else methods that need it run with a stand-in)."""
    import importlib.util

    return importlib.util.find_spec(RULE_MODULE) is not None


class StandInRule(nn.Module):
    """``xi: (B, k) -> (B, n)``: an affine map ``F x`` of the real rule's shape, used only for timing where no
    real rule can be had. Not feasible: rows made with it say ``rule_source = stand-in``."""

    def __init__(self, n: int, k: int, generator: torch.Generator) -> None:
        super().__init__()
        self.register_buffer("F", 0.01 * torch.randn(n, k + 1, generator=generator, dtype=torch.float64))
        self.t_star = float("nan")
        self.info = {"stand_in": True}

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return torch.cat([xi.new_ones(xi.shape[0], 1), xi], dim=1) @ self.F.to(xi.dtype).T


# How a method's set-up gets its rule, tried in this order: the real one; the real one with a margin t* <= 0
# accepted (the paper's portfolio at 0.4 sits at t* = 0: same shape and cost, feasible to solver accuracy);
# a stand-in of the same shape (timing needs no feasibility).
RULE_SOURCES = {"real": "decision_rule", "weak": "decision_rule (t* <= 0 accepted)", "stand-in": "stand-in"}


@contextlib.contextmanager
def rule_source(kind: str, seed: int) -> Iterator[None]:
    """For the duration of a method's set-up only, make ``solve_decision_rule`` give the ``kind`` of rule;
    the module is restored afterwards so that nothing else in the process sees the change."""
    if kind == "real":
        yield
        return
    saved = sys.modules.get(RULE_MODULE)
    if kind == "weak":
        real = (
            saved.solve_decision_rule if saved is not None else importlib.import_module(RULE_MODULE).solve_decision_rule
        )
        module = types.ModuleType(RULE_MODULE)
        module.solve_decision_rule = functools.partial(real, require_positive_margin=False)
    else:

        def solve_decision_rule(problem, solver: str = "auto", cache_dir=None, **_) -> StandInRule:
            return StandInRule(problem.n, problem.k, torch.Generator().manual_seed(seed))

        module = types.ModuleType(RULE_MODULE)
        module.solve_decision_rule = solve_decision_rule
    sys.modules[RULE_MODULE] = module
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop(RULE_MODULE, None)
        else:
            sys.modules[RULE_MODULE] = saved


def make_method(problem_cfg: str, method: str, problem, ctx, overrides: Sequence[str] = ()):
    """Instantiate ``conf/method/<method>`` (with the problem's overrides) and run its offline set-up.

    Returns ``(method, offline_s, rule_source)``; ``rule_source`` (see :data:`RULE_SOURCES`) is empty for
    methods without a decision rule. A rule that cannot be had is replaced (logged), never fatal: timing
    does not depend on the rule's values.
    """
    from hydra.utils import instantiate

    from hardlinear.methods.base import NotApplicable

    cfg = compose(problem_cfg, method, overrides)
    kinds = list(RULE_SOURCES) if rule_available() else ["stand-in"]
    for kind in kinds:
        m = instantiate(cfg.method, _convert_="all")
        needs_rule = hasattr(m, "rule_solver")
        try:
            with rule_source(kind if needs_rule else "real", ctx.seed):
                offline = m.setup(problem, ctx)
            break
        except NotApplicable:
            raise  # the method does not apply here, whichever rule it would get
        except Exception as err:
            if not needs_rule or kind == kinds[-1]:
                raise
            log(f"  [{problem_cfg} {method}] decision rule ({RULE_SOURCES[kind]}) failed: {type(err).__name__}: {err}")
    m.eval()
    return m, float(offline), RULE_SOURCES[kind] if needs_rule else ""


def quick_train(method, problem, ctx, epochs: int, val_size: int = 32):
    """A few epochs of the project's trainer (for honest iteration counts of the iterative methods)."""
    from hardlinear.problems.datasets import build_dataset
    from hardlinear.train.trainer import TrainerConfig, train

    if epochs <= 0 or not method.trainable or method.supervised:
        return None
    val = build_dataset(problem, "val", val_size, ctx.seed, None, ctx.cache_dir, progress=False)
    cfg = TrainerConfig(epochs=epochs, pretrain_epochs=epochs // 3, lr=1e-3, progress=False)
    result = train(method, problem, val, cfg, ctx)
    method.eval()
    return result


# --- outputs ----------------------------------------------------------------------------------------------
def write_results(
    out_dir: str | os.PathLike, name: str, rows: list[dict], meta: dict | None, columns: Sequence[str]
) -> dict[str, Path]:
    """``<name>.csv`` with exactly ``columns`` (missing values empty) and, unless ``meta`` is None,
    ``<name>.json``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out / f"{name}.csv", out / f"{name}.json"
    tmp = csv_path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="raise")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: _cell(row.get(c, "")) for c in columns})
    tmp.replace(csv_path)
    if meta is None:
        return {"csv": csv_path}
    json_path.write_text(json.dumps(meta, indent=2, default=_json_default) + "\n")
    return {"csv": csv_path, "json": json_path}


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return "" if np.isnan(value) else f"{value:.6g}"
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def new_figure(n_panels: int, ncols: int = 3, size: tuple[float, float] = (4.8, 3.6)):
    """A grid of panels on the Agg backend (no display needed); returns ``(fig, flat list of axes)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = max(1, min(ncols, n_panels))
    nrows = (n_panels + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


def save_figure(fig, path: str | os.PathLike) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def problem_identity(problem_cfg: str, problem) -> dict[str, Any]:
    """Identity columns of a problem: its config name, name, objective, form and the paper's sizes."""
    return {
        "problem": problem_cfg,
        "case": problem.name,
        "objective": problem.objective_kind,
        "form": problem.form,
        **problem.sizes(),
    }


def log(msg: str) -> None:
    print(msg, flush=True)


def ed_method_runs(methods: Sequence[str], proposed_variants: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """``(method, overrides)`` for the dispatch benchmarks: each method once, the proposed one once per variant (a
    space-separated list of Hydra overrides; ``''`` is its problem-method config as it is)."""
    runs = [(m, ()) for m in methods if m != "proposed"]
    if "proposed" in methods:
        runs += [("proposed", tuple(v.split())) for v in proposed_variants]
    return runs


def write_rows(path: str | Path, env: dict, settings: dict, rows: list[dict], tag: str, **extra: object) -> None:
    """``{"environment", "settings", "rows", **extra}`` as JSON at ``path`` (folders made), logged under ``tag``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {"environment": env, "settings": settings, "rows": rows, **extra}
    out.write_text(json.dumps(body, indent=1, default=str) + "\n")
    log(f"[{tag}] wrote {out}")


def ed_rows(args: argparse.Namespace, measure, describe, tag: str) -> list[dict]:
    """``measure(case, method, args, overrides) -> row`` for every case and :func:`ed_method_runs` pair, each row
    logged (``describe(row)`` when its status is ok, else its status and note)."""
    rows = []
    for case in args.cases:
        for method, overrides in ed_method_runs(args.methods, args.proposed_variants):
            row = measure(case, method, args, overrides)
            label = row.get("variant", row.get("overrides", ""))
            log(f"[{tag}] {row['case']} {method} {label}: " + (describe(row) if row["status"] == "ok" else f"{row['status']}: {row['note']}"))
            rows.append(row)
    return rows


def setup_ed_method(case: str, method: str, overrides: Sequence[str], cache_dir: str | Path):
    """``(cfg, problem, dtype, method, None)`` for a dispatch benchmark, the method set up from its run configuration
    (``conf/problem_method/ed_<method>.yaml`` and ``overrides``, the rule from ``cache_dir``); ``method`` is None and
    the last item says why when its set-up fails (a row's status, never skipped silently)."""
    import torch
    from hydra.utils import instantiate

    from hardlinear.harness.runner import problem_from_config
    from hardlinear.methods.base import Context

    cfg = compose("ed", method, [f"problem.case={case}", *overrides])
    problem = problem_from_config(cfg)
    dtype = {"float32": torch.float32, "float64": torch.float64}[str(cfg.dtype)]
    ctx = Context(cache_dir=str(cache_dir), device="cpu", dtype=dtype, seed=0, progress=False, network=dict(cfg.network))
    m = instantiate(cfg.method, _convert_="all")
    try:
        m.setup(problem, ctx)
    except Exception as err:  # noqa: BLE001 - the caller records it
        return cfg, problem, dtype, None, f"{type(err).__name__}: {str(err)[:200]}"
    return cfg, problem, dtype, m, None
