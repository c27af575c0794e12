"""Pinet's published DC3 runs (reporting/data/pinet_published.csv, issue 41) and the experiment that reruns them.

What could go wrong and is checked: a row read from the wrong file (the RS and violations would not be the ones
issue 41 reads from antonioterpin/pinet @ e662b15), a setting transcribed wrongly into the experiment config (the
"low" runs differ in more than the test iterations), our runs matched to the wrong published row."""

import math

import pytest
from test_configs import compose_cfg

from hardlinear.reporting.pinet_published import (
    accuracy_of,
    load_pinet_published,
    ours_for,
    published_run,
)

ROWS = load_pinet_published()


def test_every_published_run_is_sourced_once():
    pinet = [r for r in ROWS if r["method"] == "Pinet"]
    keys = {(r["problem"], r["backward"], r["accuracy"]) for r in pinet}
    assert len(pinet) == len(keys) == 12  # 2 problems x 3 backwards x 2 accuracies
    for r in ROWS:
        assert r["source_repo"] == "antonioterpin/pinet" and r["commit"] == "e662b15"
        assert r["path"].startswith("src/benchmarks/simple_QP/results/") and r["path"].endswith(".npz")
    assert {r["n_test"] for r in pinet} == {833}
    assert all(accuracy_of(r["n_iter_test"]) == r["accuracy"] for r in pinet)


@pytest.mark.parametrize(
    ("problem", "backward", "rs", "ineq_mean", "ineq_worst", "train_s"),
    [
        ("dc3_qp", "implicit", 0.31, 7.9e-5, 1.8e-3, 69),
        ("dc3_qp", "fixed_point", 0.97, 2.5e-5, 1.0e-4, 72),
        ("dc3_qp", "unrolled", 0.48, 5.7e-5, 1.1e-3, 102),
        ("dc3_nonconvex", "implicit", 0.18, 1.1e-4, 1.6e-3, 71),
        ("dc3_nonconvex", "unrolled", 0.14, 1.1e-4, 1.9e-3, 101),
    ],
)
def test_high_accuracy_rows_match_issue_41(problem, backward, rs, ineq_mean, ineq_worst, train_s):
    r = published_run(ROWS, problem, backward, "high")
    assert round(r["rs_gap_of_means_pct"], 2) == rs
    assert r["ineq_max_abs_mean"] == pytest.approx(ineq_mean, rel=0.07)
    assert r["ineq_max_abs_worst"] == pytest.approx(ineq_worst, rel=0.07)
    assert round(r["train_s"]) == train_s
    # the per-instance mean sits within a hair of the gap of means here (the optima barely vary across inputs)
    assert abs(r["rs_mean_pct"] - r["rs_gap_of_means_pct"]) < 0.01
    assert r["eq_max_abs_worst"] < 1e-12


def test_dc3_rows_and_optima():
    dc3 = {r["problem"]: r for r in ROWS if r["method"].startswith("DC3")}
    assert (
        round(dc3["dc3_qp"]["objective_mean"], 4) == -13.4869 and round(dc3["dc3_qp"]["rs_gap_of_means_pct"], 1) == 10.4
    )
    assert round(dc3["dc3_nonconvex"]["rs_gap_of_means_pct"], 1) == 8.0
    assert round(published_run(ROWS, "dc3_qp", "implicit", "high")["opt_objective_mean"], 4) == -15.0469
    assert round(published_run(ROWS, "dc3_nonconvex", "implicit", "low")["opt_objective_mean"], 4) == -11.5923


def test_missing_row_names_what_exists():
    with pytest.raises(KeyError, match="the file has"):
        published_run(ROWS, "dc3_qp", "implicit", "medium")
    with pytest.raises(ValueError, match="neither"):
        accuracy_of(50)


def _rec(seed, objective, backward="implicit", n_iter_test=100, status="ok"):
    return {
        "status": status, "cfg.problem.name": "dc3_qp", "cfg.method.backward": backward, "seed": seed,
        "cfg.method.n_iter_test": n_iter_test, "cfg.method.n_iter_train": 100, "cfg.trainer.epochs": 50,
        "test/objective_mean": objective, "test/gap_mean": 0.3, "test/ineq_max_mean": 1e-4,
        "test/max_abs_viol": 2e-3 * (seed + 1), "train/time_s": 60.0 + seed,
    }  # fmt: skip


def test_ours_matches_only_the_same_setting():
    pub = published_run(ROWS, "dc3_qp", "implicit", "high")
    opt = pub["opt_objective_mean"]
    records = [_rec(0, opt * 0.997), _rec(1, opt * 0.995), _rec(2, opt * 0.5, backward="unrolled"),
               _rec(3, opt * 0.5, n_iter_test=30), _rec(4, opt * 0.5, status="failed")]  # fmt: skip
    ours = ours_for(records, pub)
    assert ours is not None and ours.seeds == 2
    assert ours.rs_gap_of_means_pct[0] == pytest.approx(0.4)
    assert ours.rs_gap_of_means_by_seed == pytest.approx((0.3, 0.5))
    assert ours.abs_worst == pytest.approx(4e-3)
    assert ours_for(records[2:], published_run(ROWS, "dc3_qp", "fixed_point", "high")) is None
    assert math.isnan(ours_for(records[:1], pub).rs_mean_pct[1])


@pytest.mark.parametrize("problem", ["dc3_qp", "dc3_nonconvex"])
def test_experiment_has_the_published_settings(problem):
    cfg = compose_cfg("+experiment=pinet_e662b15", f"problem={problem}")
    pub = published_run(ROWS, problem, "implicit", "high")
    m, t = cfg.method, cfg.trainer
    assert m.name == "pinet" and m.backward == "implicit" and cfg.dtype == "float64"
    assert (m.sigma, m.omega, m.n_iter_train, m.n_iter_test, m.n_iter_bwd) == (
        pub["sigma"],
        pub["omega"],
        pub["n_iter_train"],
        pub["n_iter_test"],
        pub["n_iter_bwd"],
    )
    assert (t.epochs, t.lr, t.batch_size, t.sampling) == (pub["epochs"], pub["lr"], 2000, "pass")
    # the experiment must undo the autotuned problem_method file (Ruiz on, sigma 0.068, 50 iterations)
    assert m.equilibrate_iter == 0 and cfg.network.hidden == 200 and not cfg.network.batch_norm
    assert m.start == "raw"  # e662b15 starts DR from the raw output
    assert cfg.network.init == "lecun_normal" and cfg.trainer.keep == "last"  # flax's Dense; the last epoch tested
    assert cfg.study == "pinet_e662b15"
