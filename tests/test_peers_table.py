"""The peer-methods table (scripts/maintainers/peers_table.py): its input is the records' rows (``load_records`` dicts), so the
table logic is tested on small synthetic rows; one test reads real records of results/peers.

What could go wrong and is checked: a refined proposed run averaged into the plain one, two schedules averaged
into one mean, a planned cell silently absent, another instance's published figure beside ours, a timing taken
from anywhere but the --timings benchmark output."""

import csv
import json
from pathlib import Path

import pytest

from hardlinear.harness.results import load_records
from hardlinear.reporting.peer_timings import load_timings
from hardlinear.reporting.peers import load_pinet_readme_figures, load_published, peers_table

REPO = Path(__file__).resolve().parents[1]


def rec(problem, method, seed, gap=1.0, status="ok", reason="", refine=None, epochs=300, lr=1e-4, variant="",
        study="table_peers", time_ms=0.5, **extra):  # fmt: skip
    row = {
        "problem": problem, "cfg.problem.name": problem.split("_eq")[0], "method": method, "seed": seed,
        "status": status, "reason": reason, "variant": variant, "form": "standard", "study": study,
        "identity": f"{problem}-{method}-{seed}-{refine}-{epochs}-{lr}-{study}", "n": 10, "m_eq": 2, "m_ineq": 5,
        "cfg.trainer.name": "default", "cfg.trainer.epochs": epochs, "cfg.trainer.lr": lr,
        "cfg.trainer.pretrain_epochs": 0, "cfg.method.refine": refine,
        "record": f"/nowhere/{problem}-{method}-{seed}-{refine}-{epochs}-{lr}/record.json",
    }  # fmt: skip
    if status == "ok":
        row.update({"test/gap_mean": gap, "test/gap_worst": 3 * gap, "test/eq_viol_mean": 1e-15,
                    "test/eq_viol_worst": 2e-15, "test/ineq_viol_mean": 0.0, "test/ineq_viol_worst": 0.0,
                    "test/eq_max_mean": 4e-15, "test/ineq_max_mean": 0.0, "test/max_abs_viol": 9e-15,
                    "test/objective_mean": 10 + gap, "test/time_ms": time_ms, "test/throughput": 1e4,
                    "train/time_s": 30.0, "train/epochs": float(epochs)})  # fmt: skip
    return {**row, **extra}


def lines_of(text, start):
    """The table lines of the section that begins with ``start`` (up to the next heading)."""
    block = text.split(start, 1)[1].split("\n#", 1)[0]
    return [line for line in block.splitlines() if line.startswith("| ")]


def cells(line):
    return [c.strip() for c in line.strip("|").split(" | ")]


def row_of(lines, method):
    return next(cells(line) for line in lines if cells(line)[0] == method)


def test_refined_proposed_forms_its_own_row():
    records = [rec("dcopf_14", "proposed", s, gap=2.0) for s in (0, 1, 2)]
    records += [rec("dcopf_14", "proposed", s, gap=0.5, refine="dr", variant="refine=dr(10/50 steps, sigma=0.3)") for s in (0, 1, 2)]
    lines = lines_of(peers_table(records, problems=("dcopf_14",), datasets=False), "### dcopf_14")
    plain = row_of(lines, "proposed")
    refined = row_of(lines, "proposed (refined) [refine=dr(10/50 steps, sigma=0.3)]")
    assert plain[1] == "ok" and plain[7] == "2 ± 0"
    assert refined[1] == "ok" and refined[7] == "0.5 ± 0"


def test_schedules_are_never_averaged_together():
    records = [rec("dcopf_14", "proposed", s, gap=1.0, epochs=300) for s in (0, 1, 2)]
    records += [rec("dcopf_14", "proposed", 0, gap=9.0, epochs=100, study="peers2026")]
    records += [rec("dcopf_14", "proposed", 0, gap=5.0, epochs=300, lr=1e-3, study="peers2026")]
    lines = [c for c in map(cells, lines_of(peers_table(records, problems=("dcopf_14",), datasets=False), "### dcopf_14"))
             if c[0].startswith("proposed") and c[1].startswith("ok")]  # fmt: skip
    gaps = sorted(c[7] for c in lines)
    assert gaps == ["1 ± 0", "5", "9"]  # three rows, no mean across schedules
    assert any("seeds 1,2: not run" in c[1] and "lr 0.001" in c[3] for c in lines)
    assert any("100 ep." in c[3] for c in lines)


def test_every_planned_cell_without_a_record_says_not_run():
    records = [rec("dcopf_14", "proposed", 0), rec("dcopf_14", "hardnet_aff", 0, status="not_applicable", reason="84 rows")]
    text = peers_table(records, problems=("dcopf_14", "portfolio"),
                       missing_notes={("dcopf_14", "dc3"): "not run (compute): too slow"})  # fmt: skip
    dcopf = lines_of(text, "### dcopf_14")
    assert row_of(dcopf, "proposed")[1] == "ok; **seeds 1,2: not run (compute)**"
    assert row_of(dcopf, "hardnet_aff")[1:3] == ["not applicable: 84 rows", "0"]
    assert row_of(dcopf, "pinet")[1:3] == ["**not run (compute)**", "0,1,2"]
    assert row_of(dcopf, "dc3")[1] == "**not run (compute): too slow**"
    for slot in ("proposed", "proposed (refined)", "ldr", "pinet", "fsnet", "hardnet_aff", "projection_layer", "gauge", "dc3", "optimizer"):
        assert row_of(lines_of(text, "### portfolio"), slot)[1] == "**not run (compute)**"
    datasets = lines_of(text, "## DC3's nine QP datasets")
    assert len(datasets) - 1 == 9 * 5 and all("not run" in line for line in datasets[1:])


def test_a_dataset_record_lands_in_its_dataset_row_only():
    text = peers_table([rec("dc3_qp_eq10_ineq50", "pinet", s, gap=0.7) for s in (0, 1, 2)], problems=("dc3_qp",))
    assert row_of(lines_of(text, "### dc3_qp"), "pinet")[1] == "**not run (compute)**"
    ten = [cells(line) for line in lines_of(text, "## DC3's nine") if line.startswith("| 10 eq. / 50 ineq. | pinet")]
    assert len(ten) == 1 and ten[0][2] == "ok" and ten[0][5].startswith("0.7 ± ")


def test_other_instances_published_figures_stay_out_of_our_blocks():
    published = load_published()
    assert all(p["source"].strip() and p["same_instance"] in ("yes", "no") for p in published)
    hardnet = [p for p in published if "HardNet" in p["problem"]]
    assert hardnet and all(p["same_instance"] == "no" for p in hardnet)
    text = peers_table([rec("dc3_nonconvex_eq50_ineq50", "proposed", 0)], published, problems=("dc3_nonconvex",),
                       pinet_published=load_pinet_readme_figures())  # fmt: skip
    block = "\n".join(lines_of(text, "### dc3_nonconvex"))
    assert "NonconvexOpt" not in block and "-13.79" not in block  # HardNet's notebook: another instance
    assert "nonconvex_ineq50_eq50" in block  # DC3's own figures on the same instance stay
    other = "\n".join(lines_of(text, "## Other instances: not comparable row by row"))
    assert "NonconvexOpt-100-50-50-10000" in other and "-13.79" in other
    pinet = "\n".join(lines_of(text, "## Pinet's published figures"))
    assert "last 1024 rows" in pinet and "Pinet" not in block


def _bench_csv(path, rows):
    path.mkdir(parents=True, exist_ok=True)
    cols = ["problem", "method", "config", "status", "note", "batch_size", "median_ms", "spread_lo_ms", "spread_hi_ms", "weights", "variant"]
    with (path / "methods.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)


def test_timings_come_only_from_the_benchmark_output(tmp_path):
    run = tmp_path / "runs" / "refined-seed0"
    run.mkdir(parents=True)
    (run / "record.json").write_text(json.dumps({"identity": "the-refined-run"}))
    records = [rec("dcopf_14", "proposed", 0, time_ms=123.0), rec("dcopf_14", "gauge", 0, time_ms=456.0),
               rec("dcopf_14", "dc3", 0, time_ms=789.0),
               {**rec("dcopf_14", "proposed", 0, refine="dr", variant="refine=dr"), "identity": "the-refined-run"}]  # fmt: skip
    untimed = lines_of(peers_table(records, problems=("dcopf_14",), datasets=False), "### dcopf_14")
    assert all(cells(line)[16:18] == ["—¹", "—¹"] for line in untimed if cells(line)[1] == "ok")  # no --timings: nothing timed
    assert "123" in row_of(untimed, "proposed")[18]  # the in-run timing stays in its own column
    b = dict(problem="dcopf_14", status="ok", spread_lo_ms=0.1, spread_hi_ms=0.9)
    _bench_csv(tmp_path / "bench", [
        {**b, "method": "proposed", "config": "proposed", "batch_size": 1, "median_ms": 0.25, "weights": "fresh", "variant": ""},
        {**b, "method": "proposed", "config": "proposed", "batch_size": 1024, "median_ms": 10.24, "weights": "fresh", "variant": ""},
        {**b, "method": "proposed[ckpt]", "config": "proposed", "batch_size": 1, "median_ms": 7.5, "weights": f"checkpoint {run}", "variant": "refine=dr"},
        {**b, "method": "gauge", "config": "gauge", "batch_size": 1, "median_ms": 0.4, "weights": "fresh", "variant": "other variant"},
        {**b, "method": "proposed[unfused]", "config": "proposed", "batch_size": 1, "median_ms": 99.0, "weights": "fresh", "variant": ""},
    ])  # fmt: skip
    timings = load_timings([tmp_path / "bench"])
    lines = lines_of(peers_table(records, problems=("dcopf_14",), timings=timings, datasets=False), "### dcopf_14")
    plain = row_of(lines, "proposed")
    assert plain[16].startswith("0.25 (0.10-0.90) (fresh net)") and plain[17].startswith("100,000")
    refined = row_of(lines, "proposed (refined) [refine=dr]")
    assert refined[16].startswith("7.50") and "fresh" not in refined[16]  # the run's own checkpoint, matched by identity
    assert refined[17].startswith("— (not timed at batch 1024)")
    assert row_of(lines, "gauge")[16] == "—¹"  # another variant's timing is not this row's
    assert row_of(lines, "dc3")[16] == "—¹"


def test_load_timings_refuses_a_problem_timed_in_two_processes(tmp_path):
    row = dict(problem="dcopf_14", method="proposed", config="proposed", status="ok", batch_size=1, median_ms=1,
               spread_lo_ms=1, spread_hi_ms=1, weights="fresh", variant="")  # fmt: skip
    _bench_csv(tmp_path / "a", [row])
    _bench_csv(tmp_path / "b", [row])
    with pytest.raises(ValueError, match="dcopf_14 is timed in both"):
        load_timings([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(FileNotFoundError, match="bench_methods.py"):
        load_timings([tmp_path / "empty"])


def test_real_records_of_the_peers_study():
    df = load_records([REPO / "results/peers/records/main-seed0"], study="table_peers", quiet=True)
    assert not df.empty
    text = peers_table(df.to_dict("records"), problems=("dcopf_14",), datasets=False)
    lines = lines_of(text, "### dcopf_14")
    proposed = row_of(lines, "proposed")
    assert proposed[1] == "ok; **seeds 1,2: not run (compute)**" and "300 ep." in proposed[3]
    assert proposed[12] == "0.0e+00"  # exactly feasible: worst relative inequality violation
    assert row_of(lines, "hardnet_aff")[1].startswith("not applicable: HardNet-Aff needs")
    assert row_of(lines, "proposed (refined)")[1] == "**not run (compute)**"


@pytest.mark.slow
def test_trained_runs_timed_by_bench_methods_fill_their_own_rows(tmp_path):
    """Real runs (a plain and a refined proposed, trainer=fast), timed from their checkpoints by
    benchmarks/bench_methods.py in one process, then the table: each row carries its own run's timing."""
    import subprocess
    import sys

    env = {**__import__("os").environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run([sys.executable, "run.py", "-m", "problem=dcopf_14", "trainer=fast", "threads=1", "progress=false",
                    "study=pt_test", "method=proposed", "method.refine=none,dr", "seed=0", f"cache_dir={tmp_path / 'cache'}",
                    f"hydra.sweep.dir={tmp_path / 'runs'}"], cwd=REPO, env=env, check=True, timeout=600)  # fmt: skip
    runs = sorted(str(p.parent) for p in (tmp_path / "runs").glob("*/checkpoint.pt"))
    assert len(runs) == 2
    subprocess.run([sys.executable, "benchmarks/bench_methods.py", "--quick", "--problems", "dcopf_14", "--methods",
                    "proposed", "--row-modes", "--batch-sizes", "1", "1024", "--instances", "5", "--repeats", "2",
                    "--call-budget", "30", "--out-dir", str(tmp_path / "bench"), "--cache-dir", str(tmp_path / "cache"),
                    "--checkpoint", *runs], cwd=REPO, env=env, check=True, timeout=600)  # fmt: skip
    df = load_records([tmp_path / "runs"], study="pt_test", quiet=True)
    text = peers_table(df.to_dict("records"), problems=("dcopf_14",), timings=load_timings([tmp_path / "bench"]), datasets=False)
    lines = lines_of(text, "### dcopf_14")
    plain, refined = row_of(lines, "proposed"), next(cells(x) for x in lines if x.startswith("| proposed (refined) ["))
    for row in (plain, refined):
        assert row[16] != "—¹" and "fresh" not in row[16] and row[17][0].isdigit()
    assert plain[16] != refined[16]  # two runs, two timings (the refinement's DR steps cost time)
