"""Time the offline decision rule (the safe network) on the paper's problems, one process per case.

Each (case, form, solver) runs in a fresh Python process so that its peak RSS is its own; one CSV row per
run: case, form, solver, t*, binding row, solve time, peak RSS, sizes. Examples::

    python benchmarks/bench_decision_rules.py                       # the six paper problems, both forms
    python benchmarks/bench_decision_rules.py --cases dcopf_118 --solvers clarabel highs
    python benchmarks/bench_decision_rules.py --cases pglib_opf_case300_ieee:0.1 --forms standard
    python benchmarks/bench_decision_rules.py --csv results/bench_decision_rules.csv
    python benchmarks/bench_decision_rules.py --cases pglib_opf_case500_goc:0.05 --max-uncertainty
    python benchmarks/bench_decision_rules.py --cases pglib_opf_case2000_goc:0.02:areas --solvers sparse reduced auto

``--max-uncertainty`` adds, from a second fresh process per row, the largest uncertainty level at which a rule
with a positive margin exists (``hardlinear.layers.max_uncertainty_exact``: one LP of the rule's size), with
its own time and peak RSS.

A case is a paper problem name, ``portfolio[:uncertainty]``, or any PGLib case ``pglib_opf_...:uncertainty[:inputs]``
(``inputs``: ``loaded_buses``, ``zones`` or ``areas``; see ``hardlinear.problems.dcopf``). ``--solvers sparse`` runs the
whole robust LP in the grid's sparse variables (``hardlinear.rules.robust_lp_sparse``: HiGHS IPX, for few inputs),
``--solvers reduced`` the structured interior point of ``hardlinear.rules.reduced``; its rows also carry the free dimension ``d``,
the active inputs ``q`` and the rule's unknowns ``d (q + 1)`` beside the full rule's ``n (k + 1)``.
Nothing is cached: every row is a cold solve (the problem build is not timed). With ``--csv``, the file
gets the rows (appended), ``<csv stem>.json`` the machine, versions, git sha and settings of this call, and
``<csv stem>.png`` a plot of every row in the file: solve time and peak memory against the LP's size.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hardlinear.rules.decision_rule import peak_rss_mb

# Each child sizes numpy's and torch's native pools to one thread (unless the caller exported otherwise): an
# unbounded OpenBLAS pool spins against the other processes on a shared machine.
CHILD_ENV = {**os.environ, **{name: os.environ.get(name, "1") for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
PAPER_CASES = ["dcopf_14", "dcopf_30", "dcopf_57", "dcopf_118", "dcopf_200", "portfolio"]
COLUMNS = [
    "case", "form", "solver", "t_star", "binding_row", "binding", "solve_time_s", "peak_rss_mb", "status",
    "n", "m_eq", "m_ineq", "k", "lp_variables", "lp_constraints", "lp_nnz", "rounds", "rows_in_lp", "error",
    "uncertainty", "max_uncertainty", "max_uncertainty_time_s", "max_uncertainty_rss_mb", "t_upper", "margin_gap",
    "inputs", "null_dim", "active_inputs", "rule_unknowns", "rule_unknowns_full", "ipm_iterations", "reduce_time_s", "ipm_gap",
    "block_solves", "ipm_time_parts", "certified", "coarse_seed", "buses",
]


def build(case: str, form: str):
    from hardlinear.problems import Portfolio, build_problem

    name, _, rest = case.partition(":")
    level, _, inputs = rest.partition(":")
    if name == "portfolio":
        return Portfolio(form=form, **({"uncertainty": float(level)} if level else {}))
    if name.startswith("pglib_opf_"):
        options = {"uncertainty": float(level)} if level else {}
        return build_problem("dcopf", case=name, form=form, **options, **({"inputs": inputs} if inputs else {}))
    return build_problem(name, form=form, **({"uncertainty": float(level)} if level else {}))


def run_one(case: str, form: str, solver: str, margin_gap: float = 0.0) -> dict:
    """Solve one rule in this process and return its CSV row."""
    import clarabel  # noqa: F401  (imports are not part of the solve time)
    import cvxpy  # noqa: F401
    import highspy  # noqa: F401
    import torch

    from hardlinear.rules import DecisionRuleInfeasible, solve_decision_rule

    torch.set_num_threads(1)
    problem = build(case, form)
    row = {
        "case": case, "form": form, "solver": solver, "uncertainty": getattr(problem, "uncertainty", None),
        "inputs": getattr(problem, "inputs", None), **problem.sizes(),
        "buses": len(problem.network.bus_ids) if hasattr(problem, "network") else None,
    }
    start = time.perf_counter()
    try:
        # the paper's portfolio sits at t* = 0 (see solve_decision_rule): report it rather than fail
        rule = solve_decision_rule(
            problem, solver=solver, find_max_uncertainty=False, require_positive_margin=False, margin_gap=margin_gap
        )
        info = rule.info
        if solver == "auto":  # which solver auto chose (rows before issue 20's sparse solver say "auto": Clarabel)
            row["solver"] = f"auto:{info.get('solver')}"
        row.update(
            t_star=rule.t_star, binding_row=rule.binding_row, binding=rule.binding_description,
            status=info.get("status"), lp_variables=info.get("n_variables"), lp_constraints=info.get("n_constraints"),
            lp_nnz=info.get("nnz"), rounds=info.get("rounds"), rows_in_lp=info.get("rows_in_lp"),
            t_upper=info.get("t_working_set"), margin_gap=margin_gap or None,
            null_dim=info.get("null_dim"), active_inputs=info.get("active_inputs"), rule_unknowns=info.get("rule_unknowns"),
            rule_unknowns_full=info.get("rule_unknowns_full"), ipm_iterations=info.get("ipm_iterations"),
            reduce_time_s=info.get("reduce_time_s"), ipm_gap=info.get("ipm_gap"), block_solves=info.get("block_solves"),
            ipm_time_parts=_time_parts(info),
            certified=info.get("certified"), coarse_seed=json.dumps(info["coarse_seed"]) if info.get("coarse_seed") else None,
        )
    except DecisionRuleInfeasible as err:
        row.update(t_star=err.t_star, error=str(err))
    row["solve_time_s"] = round(time.perf_counter() - start, 3)
    row["peak_rss_mb"] = peak_rss_mb()
    return row


def _time_parts(info: dict) -> str | None:
    """The reduced solver's stages (seconds, JSON): the seed, the zero-spread bound, the sparse working-set LPs and
    the structured interior point's kernels, whichever ran."""
    parts = {k: v for k, v in info.get("timers_s", {}).items()}
    for key in ("seed_time_s", "zero_spread_bound_time_s", "sparse_lp_time_s"):
        if info.get(key) is not None:
            parts[key.removesuffix("_time_s")] = info[key]
    if info.get("working_set_solver"):
        parts["working_sets"] = info["working_set_solver"]
    return json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in parts.items()}) if parts else None


def _failure(err: subprocess.CalledProcessError) -> str:
    """A failed child's error for its row: the end of its stderr, or (``--verbose``, stderr not captured) its exit."""
    return (err.stderr or f"exit {err.returncode}, see the log above").strip()[-300:]


def run_level(case: str, form: str, solver: str, margin_gap: float = 0.0) -> dict:
    """The largest uncertainty level of one case in this process (exact LP; None where it does not apply)."""
    import torch

    from hardlinear.rules import max_uncertainty_exact

    torch.set_num_threads(1)
    problem = build(case, form)
    start = time.perf_counter()
    level = max_uncertainty_exact(problem, solver, margin_gap=margin_gap)
    return {
        "max_uncertainty": level,
        "max_uncertainty_time_s": round(time.perf_counter() - start, 3),
        "max_uncertainty_rss_mb": peak_rss_mb(),
    }


def append_rows(path, rows: list[dict]) -> None:
    """Append to a CSV, rewriting it once under the current columns if it was written with older ones."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old: list[dict] = []
    if path.exists():
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames != COLUMNS:
                old = list(reader)
    if old or not path.exists():
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows(old)
    with path.open("a", newline="") as fh:
        csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore").writerows(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=PAPER_CASES)
    parser.add_argument("--forms", nargs="+", default=["standard", "inequality"], choices=["standard", "inequality"])
    parser.add_argument("--solvers", nargs="+", default=["auto"])
    parser.add_argument("--csv", default=None, help="append rows to this CSV file (header written if new)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per case before it is skipped")
    parser.add_argument("--max-uncertainty", action="store_true", help="also the largest level with a rule (exact LP)")
    parser.add_argument("--single", nargs=3, metavar=("CASE", "FORM", "SOLVER"), help=argparse.SUPPRESS)
    parser.add_argument("--level", nargs=3, metavar=("CASE", "FORM", "SOLVER"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--margin-gap", type=float, default=0.0,
        help="stop the row generation at this relative gap on t* (and on the level); 0: to the last row",
    )
    parser.add_argument("--verbose", action="store_true", help="log each row-generation round of the robust LP to stderr (long solves)")
    args = parser.parse_args(argv)
    if args.verbose:
        import logging

        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
        logging.getLogger("hardlinear.rules.robust_lp").setLevel(logging.DEBUG)
        logging.getLogger("hardlinear.rules.reduced").setLevel(logging.DEBUG)
    if args.single:
        print(json.dumps(run_one(*args.single, margin_gap=args.margin_gap)))
        return
    if args.level:
        print(json.dumps(run_level(*args.level, margin_gap=args.margin_gap)))
        return

    writer = csv.DictWriter(sys.stdout, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    from hardlinear.rules.robust_lp import LP_SOLVERS
    from hardlinear.rules.robust_sdp import SDP_SOLVERS

    rows = []
    for case in args.cases:
        valid = SDP_SOLVERS if case.startswith("portfolio") else (*LP_SOLVERS, "sparse", "reduced")  # the portfolio's rule is an SDP
        for form in args.forms:
            for solver in args.solvers:
                if solver != "auto" and solver not in valid:
                    continue
                cmd = [sys.executable, __file__, *(["--verbose"] if args.verbose else []), "--margin-gap", str(args.margin_gap), "--single", case, form, solver]
                stderr = None if args.verbose else subprocess.PIPE  # verbose: the child's log goes straight to ours
                try:
                    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=args.timeout, check=True, env=CHILD_ENV)
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                except subprocess.TimeoutExpired:
                    row = {"case": case, "form": form, "solver": solver, "error": f"timeout {args.timeout:g} s"}
                except subprocess.CalledProcessError as err:
                    row = {"case": case, "form": form, "solver": solver, "error": _failure(err)}
                if args.max_uncertainty and not row.get("error"):
                    cmd[-4] = "--level"
                    try:
                        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=args.timeout, check=True, env=CHILD_ENV)
                        row.update(json.loads(out.stdout.strip().splitlines()[-1]))
                    except subprocess.TimeoutExpired:
                        row["error"] = f"max-uncertainty LP: timeout {args.timeout:g} s"
                    except subprocess.CalledProcessError as err:
                        row["error"] = "max-uncertainty LP: " + _failure(err)
                writer.writerow(row)
                sys.stdout.flush()
                rows.append(row)
    if args.csv:
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import common

        append_rows(args.csv, rows)
        path = Path(args.csv)
        record = {**common.environment("cpu", 1), "settings": {k: v for k, v in vars(args).items() if k not in ("single", "level")}, "rows": rows}
        path.with_suffix(".json").write_text(json.dumps(record, indent=2, default=str) + "\n")
        plot(path, path.with_suffix(".png"))
        plot_by_buses(path, path.with_name(path.stem + "_buses.png"))


def plot(csv_path, png_path):
    """Solve time and peak RSS of every row in ``csv_path`` against the LP's nonzeros (the SDP rows, with no
    LP, are left out), one marker per form, each point labelled with its case and margin t*."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
    import common

    with open(csv_path, newline="") as fh:
        # a row whose rule was solved counts even if its level LP then failed (its error names the level)
        rows = [r for r in csv.DictReader(fh) if r.get("lp_nnz") and r.get("solve_time_s") and r.get("t_star")]
    if not rows:
        return None
    fig, (ax_t, ax_m) = common.new_figure(2, ncols=2, size=(5.6, 4.2))
    for form, marker in (("standard", "o"), ("inequality", "s")):
        sel = [r for r in rows if r["form"] == form]
        if not sel:
            continue
        nnz = [float(r["lp_nnz"]) for r in sel]
        ax_t.scatter(nnz, [float(r["solve_time_s"]) for r in sel], marker=marker, label=f"{form} form", alpha=0.8)
        ax_m.scatter(nnz, [float(r["peak_rss_mb"]) / 1024 for r in sel], marker=marker, label=f"{form} form", alpha=0.8)
    labelled = set()
    for r in rows:
        name = r["case"].replace("pglib_opf_", "").split(":")[0]
        if name in labelled:
            continue
        labelled.add(name)
        t_star = float(r["t_star"]) if r.get("t_star") else float("nan")
        ax_t.annotate(f"{name}\nt*={t_star:.3g}", (float(r["lp_nnz"]), float(r["solve_time_s"])), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax_m.annotate(name, (float(r["lp_nnz"]), float(r["peak_rss_mb"]) / 1024), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax_t.axhline(60, color="grey", ls=":", lw=0.8)
    ax_t.axhline(1800, color="grey", ls="--", lw=0.8)
    ax_m.axhline(8, color="grey", ls="--", lw=0.8)
    for ax, label in ((ax_t, "solve time (s); targets 60 s, 30 min"), (ax_m, "peak RSS (GB); target 8 GB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("robust LP nonzeros (final working set)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Decision rules: offline solve against size (one cold process per row, 1 thread)", fontsize=9)
    return common.save_figure(fig, png_path)


def _buses(row: dict) -> int | None:
    """A row's bus count: its ``buses`` column, else the number in the case name (``case2000_goc``, ``dcopf_118``)."""
    import re

    if row.get("buses"):
        return int(float(row["buses"]))
    found = re.search(r"(?:case|dcopf_)(\d+)", row["case"])
    return int(found.group(1)) if found else None


INPUT_MARKERS = {"all loads": "o", "zones": "s", "areas": "^"}


def _input_label(row: dict) -> str:
    """``all loads`` (every bus or every loaded bus an input), ``zones`` or ``areas``."""
    inputs = row.get("inputs") or "all_buses"
    return "all loads" if inputs in ("all_buses", "loaded_buses") else inputs


def plot_by_buses(csv_path, png_path):
    """Solve time and peak RSS of every DC-OPF row against the grid's buses: colour by solver, marker by input mode
    (all loads / zones / areas), each reduced-solver point labelled with its case; a run that failed or was
    stopped (an error and no t*) is drawn as an open marker at the time and memory it reached, where the row has
    them. The issue's targets: 5 min and 4 GB at 2,000 buses, 1 hour and 20 GB above 6,000 (the interior
    point's rows have no buses column before issue 20: read from the name)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
    import common

    with open(csv_path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("solve_time_s") and not r["case"].startswith("portfolio")]
    rows = [r for r in rows if _buses(r)]
    if not rows:
        return None
    fig, (ax_t, ax_m) = common.new_figure(2, ncols=2, size=(5.6, 4.2))
    colours = {}
    for r in rows:
        chosen = r["solver"].split(":")[-1]  # "auto:sparse" -> sparse
        solver = "interior point (Clarabel)" if chosen in ("auto", "clarabel") else chosen
        colour = colours.setdefault(solver, f"C{len(colours)}")
        inputs, solved = _input_label(r), bool(r.get("t_star"))
        style = {"marker": INPUT_MARKERS.get(inputs, "D"), "s": 22, "alpha": 0.85}
        style.update({"color": colour} if solved else {"facecolors": "none", "edgecolors": colour})
        label = f"{solver}, {inputs}" + ("" if solved else " (failed / stopped)")
        x = _buses(r)
        ax_t.scatter(x, float(r["solve_time_s"]), label=label, **style)
        if r.get("peak_rss_mb"):
            ax_m.scatter(x, float(r["peak_rss_mb"]) / 1024, label=label, **style)
        if chosen in ("reduced", "sparse"):
            name = r["case"].replace("pglib_opf_", "").split(":")[0]
            ax_t.annotate(name, (x, float(r["solve_time_s"])), fontsize=5, xytext=(3, 2), textcoords="offset points")
    for ax, targets, label in ((ax_t, (300, 3600), "solve time (s)"), (ax_m, (4, 20), "peak RSS (GB)")):
        ax.plot([1500, 2500], [targets[0]] * 2, color="grey", ls="--", lw=0.8)
        ax.plot([6000, 14000], [targets[1]] * 2, color="grey", ls=":", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(10, 20000)
        ax.set_xlabel("buses")
        ax.set_ylabel(label + "; targets dashed")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax_t.get_legend_handles_labels()
    unique = dict(zip(labels, handles))  # one legend entry per (solver, inputs, outcome)
    ax_t.legend(unique.values(), unique.keys(), fontsize=5)
    fig.suptitle("Decision rules against grid size (one cold process per row, 1 thread; marker: inputs)", fontsize=9)
    return common.save_figure(fig, png_path)


if __name__ == "__main__":
    main()
