"""benchmarks/bench_methods.py: every method config accounted for (timed, not applicable with its reason, or
skipped with it), floors derived from the shapes, ratios against the MLP. No timing is asserted."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
import torch

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
CONF = Path(__file__).resolve().parents[1] / "conf" / "method"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH_DIR))
    import bench_methods
    import floors

    torch.set_num_threads(1)
    yield bench_methods, floors
    sys.path.remove(str(BENCH_DIR))


def test_every_method_config_is_found(bench):
    bench_methods, _ = bench
    assert bench_methods.method_configs() == sorted(p.stem for p in CONF.glob("*.yaml"))


def test_tiny_run(bench, tmp_path):
    bench_methods, floors = bench
    out = bench_methods.main(["--quick", "--problems", "dcopf_14", "--methods", "ldr", "proposed", "hardnet_aff", "dc3",
                              "--batch-sizes", "1", "16", "--instances", "3", "--repeats", "2", "--row-modes", "off", "--call-budget", "600",
                              "--batch-modes", "eager", "--solvers",
                              "--out-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache")])  # fmt: skip
    from hardlinear.layers import fused

    assert fused.BATCH_MODE == "off" and fused.ROW_MODE == "script"  # the rows' modes were set for them only
    assert out["paths"]["png"].stat().st_size > 10_000  # the figure: every method beside its floor
    with out["paths"]["csv"].open(newline="") as f:
        rows = list(csv.DictReader(f))
    by = {(r["method"], r["batch_size"]): r for r in rows}
    names = {r["method"] for r in rows}
    assert names == {"mlp", "mlp_f64", "ldr", "proposed", "proposed[unfused]", "proposed[row=off]", "proposed[batch=eager]",
                     "hardnet_aff", "dc3"}  # fmt: skip
    assert by[("hardnet_aff", "")]["status"] == "not_applicable" and "row rank" in by[("hardnet_aff", "")]["note"]
    for name in ("mlp", "ldr", "proposed", "proposed[unfused]", "proposed[row=off]", "proposed[batch=eager]", "dc3"):
        for B in ("1", "16"):
            r = by[(name, B)]
            assert r["status"] == "ok" and float(r["median_ms"]) > 0
            assert float(r["spread_lo_ms"]) <= float(r["median_ms"]) <= float(r["spread_hi_ms"])
            assert float(r["floor_ratio"]) > 0 and float(r["macs_float32"]) + float(r["macs_float64"]) > 0
    assert float(by[("mlp", "1")]["floor_ratio"]) == pytest.approx(1.0)
    assert float(by[("dc3", "1")]["iterations_mean"]) >= 1  # an iterative method reports its iterations
    assert by[("proposed", "1")]["floor_exact"] == "True" and by[("proposed[unfused]", "1")]["floor_exact"] == "False"
    table = out["paths"]["md"].read_text()
    assert "### dcopf_14" in table and "| hardnet_aff | not_applicable |" in table


def test_fused_floor_is_derived_from_its_shapes(bench, tmp_path):
    """The fused path's floor: hidden layers and ``A_T`` in float32; ``M_T``, the completion and the two rank-d
    updates (the second for the moved rows only) in float64, as its docstring derives."""
    bench_methods, floors = bench
    import common

    problem = common.load_problem("dcopf_14")
    args = type("A", (), {"cache_dir": str(tmp_path / "cache"), "device": "cpu", "seed": 0})()
    method, _, _ = common.make_method("dcopf_14", "proposed", problem, common.make_context(args))
    fused = method.fused_module()
    f = floors.floor(method, moved=0.25)
    f32 = sum(W.numel() for W, _ in fused.hidden) + fused.A_T.numel()
    f64 = fused.M_T.numel() + fused.completion._nnz() + 1.25 * fused.N_T.numel()
    assert f.exact and f.macs["float32"] == f32 and f.macs["float64"] == pytest.approx(f64)
    mlp_macs = floors.network(method.net).macs["float32"]
    assert f32 < mlp_macs  # the last layer onto d null coordinates instead of n outputs


def test_each_checkpoint_of_one_method_gets_a_row_of_its_own(bench):
    """A plain and a refined proposed run of one problem are both timed (the peers table needs both), row-mode rows
    take the first run's weights, variants with overrides stay fresh, and another instance's run is not used."""
    bench_methods, _ = bench
    names = ["mlp", "proposed", "proposed[unfused]", "proposed[row=off]", "gauge"]
    checkpoints = {("dc3_qp_eq50_ineq50", "proposed"): ["runs/plain", "runs/refined"],
                   ("dc3_qp_eq10_ineq50", "gauge"): ["runs/other-instance"]}  # fmt: skip
    rows, dirs = bench_methods.with_checkpoints(names, "dc3_qp_eq50_ineq50", checkpoints)
    assert rows == ["mlp", "proposed", "proposed[checkpoint 2]", "proposed[unfused]", "proposed[row=off]", "gauge"]
    assert dirs == {"proposed": "runs/plain", "proposed[checkpoint 2]": "runs/refined", "proposed[row=off]": "runs/plain"}
    assert bench_methods.config_name("proposed[checkpoint 2]") == "proposed"


def test_keep_fresh_times_the_fresh_network_beside_every_checkpoint(bench):
    """--keep-fresh proposed: the fresh proposed row and its row-mode rows stay fresh (a plain run whose weights were
    not kept is timed so), and each checkpoint, the first included, is a row of its own; other methods unchanged."""
    bench_methods, _ = bench
    names = ["mlp", "proposed", "proposed[unfused]", "proposed[row=off]", "gauge"]
    checkpoints = {("dcopf_118", "proposed"): ["runs/refined"], ("dcopf_118", "gauge"): ["runs/gauge"]}
    rows, dirs = bench_methods.with_checkpoints(names, "dcopf_118", checkpoints, keep_fresh=["proposed"])
    assert rows == ["mlp", "proposed", "proposed[checkpoint 1]", "proposed[unfused]", "proposed[row=off]", "gauge"]
    assert dirs == {"proposed[checkpoint 1]": "runs/refined", "gauge": "runs/gauge"}


def tiny_problem():
    """n = 3 variables, one equality, two inequalities, k = 1 input: every floor below is countable by hand."""
    import numpy as np

    from hardlinear.problems.linear import LinearProblem

    return LinearProblem(arrays=dict(
        c=np.array([1.0, 2.0, 0.5]), G=np.array([[1.0, 1.0, 1.0]]), g0=np.array([1.0]), Gx=np.array([[0.5]]),
        H=np.array([[1.0, -1.0, 0.0], [0.0, 1.0, 2.0]]), h0=np.array([1.0, 2.0]), Hx=np.array([[0.0], [1.0]]),
        lo=np.array([-1.0]), hi=np.array([1.0]),
    ))  # fmt: skip


def counted_matmuls(method, xi) -> tuple[float, object]:
    """The multiply-adds of every matrix product ``method.predict(xi)`` runs (torch's flop counter: 2 per MAC)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        pred = method.predict(xi)
    return counter.get_total_flops() / 2, pred


TINY_NET = 1 * 4 + 4 * 3  # the network below: k = 1 -> 4 hidden -> n = 3 (float32)
TINY_RHS = 1 * 2 + 2 * 2  # B_eq (m_eq x (k + 1)) and B_ineq (m_ineq x (k + 1)), once


def test_pinet_floor_by_hand_and_by_torch(bench):
    """Pinet's floor: the right-hand sides, ``K_eq`` (N x m_eq) once and the dense projector (N x N, N = n + m)
    once per DR iteration and once for the output; here it is every product the forward runs, to the unit."""
    _, floors = bench
    from hardlinear.methods.base import Context
    from hardlinear.methods.pinet import Pinet

    problem = tiny_problem()
    method = Pinet(n_iter_test=7)
    method.setup(problem, Context(progress=False, network={"hidden": 4, "layers": 1, "batch_norm": False}))
    method.eval()
    counted, pred = counted_matmuls(method, problem.sample(1, generator=torch.Generator().manual_seed(0)).float())
    assert int(pred.iterations[0]) == 7
    f = floors.floor(method, iterations=7.0)
    N, n = 3 + 2, 3
    assert f.exact and f.macs["float32"] == TINY_NET
    if method.layer.factored:  # P = V V' of rank r: two thin products an iteration (dr_loop.AffineProjection)
        r = method.layer.consts.V.shape[1]
        assert 2 * r < N
        assert f.macs["float64"] == TINY_RHS + N * 1 + 7 * 2 * N * r + N * r + r * n
    else:
        assert f.macs["float64"] == TINY_RHS + N * 1 + (7 + 1) * N * N == 211
    assert f.macs["float32"] + f.macs["float64"] == counted


@pytest.mark.parametrize("iterations, line_search", [(5.0, None), (2.5, None), (5.0, 12.0)])
def test_fsnet_floor_by_hand(bench, iterations, line_search):
    """FSNet's floor with memory M = 3, K iterations and E line-search evaluations (one per iteration when not
    reported): products with the stacked [G; H] (3 rows x 3 = 9 MACs each) 2 + 2K + E times, the two-loop
    recursion over min(i, M) pairs at iteration i, the slope and the new pair's rho."""
    _, floors = bench
    from hardlinear.methods.base import Context
    from hardlinear.methods.fsnet import FSNet

    problem = tiny_problem()
    method = FSNet(max_iter=6, unrolled=0, memory=3)
    method.setup(problem, Context(progress=False, network={"hidden": 4, "layers": 1, "batch_norm": False}))
    K, n, R = iterations, 3, 9
    E = K if line_search is None else line_search
    visits = {5.0: 0 + 1 + 2 + 3 + 3, 2.5: 0 + 1 + 0.5 * 2}[K]
    f = floors.floor(method, iterations=K, line_search=line_search)
    assert f.exact and f.macs["float32"] == TINY_NET
    assert f.macs["float64"] == pytest.approx(TINY_RHS + R * (2 + 2 * K + E) + 4 * n * visits + 2 * n * (K - 1) + 2 * n * K)
    assert ("lower bound" in f.describe()) == (line_search is None)


def test_fsnet_floor_products_are_the_ones_torch_runs(bench):
    """With the line-search evaluations FSNet reports, the products torch counts are the floor's stacked products
    plus the right-hand sides that ours recomputes at each of its ``1 + K + E`` evaluations (the floor counts
    them once)."""
    bench_methods, floors = bench
    from hardlinear.methods.base import Context
    from hardlinear.methods.fsnet import FSNet

    problem = tiny_problem()
    torch.manual_seed(0)  # the network's initialisation: an infeasible start, so that it iterates
    method = FSNet(max_iter=6, unrolled=0, memory=3, test_val_tol=1e-30, grad_tol=0.0)
    method.setup(problem, Context(progress=False, network={"hidden": 4, "layers": 1, "batch_norm": False}))
    method.eval()
    xi = problem.sample(1, generator=torch.Generator().manual_seed(0)).float()
    counted, pred = counted_matmuls(method, xi)  # constant rows: the closed-form path, right-hand sides once
    K, E = int(pred.iterations[0]), pred.extras["line_search_evaluations"]
    assert K >= 2 and E >= K  # it iterated, and each line search evaluated at least once
    # its two-loop's dot products are batched products too: 2 per visited pair, gamma's 2, a new pair's rho
    visits = floors.history_visits(K, 3)
    dots = 3 * (2 * visits + 2 * (K - 1) + K)
    assert counted == TINY_NET + 9 * (2 + 2 * K + E) + TINY_RHS + dots
    f = floors.floor(method, iterations=float(K), line_search=float(E))
    two_loop = 4 * 3 * visits + 2 * 3 * (K - 1) + 2 * 3 * K  # the floor's: these dots and the axpys beside them
    assert f.macs["float32"] + f.macs["float64"] - two_loop == counted - dots
    assert dots <= two_loop
    rows_T, method._rows_T = method._rows_T, None  # the autograd path recomputes the right-hand sides at each evaluation
    counted_autograd, pred_autograd = counted_matmuls(method, xi)
    assert (int(pred_autograd.iterations[0]), pred_autograd.extras["line_search_evaluations"]) == (K, E)
    assert counted_autograd == TINY_NET + 9 * (2 + 2 * K + E) + TINY_RHS * (1 + K + E)
    method._rows_T = rows_T
    _, it, reported = bench_methods._predict(method)(xi)  # what the benchmark passes to the floor
    assert int(it[0]) == K and reported == {"line_search_mean": float(E)}



def test_fsnet_floor_on_an_input_dependent_family(bench):
    """The portfolio's standard form has ``G(x), H(x)``: ours forms them from their ``k + 1`` slices at every
    evaluation (torch counts it), the floor once; the products with them are ``(m_eq + m_ineq) n`` each."""
    _, floors = bench
    from hardlinear.methods.base import Context
    from hardlinear.methods.fsnet import FSNet
    from hardlinear.problems import build_problem

    problem = build_problem("portfolio")
    family = problem.family
    torch.manual_seed(0)
    method = FSNet(max_iter=4, unrolled=0, memory=3, test_val_tol=1e-30, grad_tol=0.0)
    method.setup(problem, Context(progress=False, network={"hidden": 4, "layers": 1, "batch_norm": False}))
    method.eval()
    counted, pred = counted_matmuls(method, problem.sample(1, generator=torch.Generator().manual_seed(0)).float())
    K, E = int(pred.iterations[0]), pred.extras["line_search_evaluations"]
    R = (family.m_eq + family.m_ineq) * family.n
    forming, rhs = family.G_stack.size + family.H_stack.size, family.B_eq.size + family.B_ineq.size
    net = floors.network(method.net).macs["float32"]
    assert K >= 2 and counted == net + (1 + K + E) * (forming + rhs) + (2 + 2 * K + E) * R
    f = floors.floor(method, iterations=float(K), line_search=float(E))
    n = family.n
    two_loop = 4 * n * floors.history_visits(K, 3) + 2 * n * (K - 1) + 2 * n * K
    assert f.macs["float64"] == forming + rhs + (2 + 2 * K + E) * R + two_loop

def test_form_plan(bench):
    """A method whose class needs a form runs in it where the problem config has a ``form`` option, and is not
    applicable, with the reason, where it has none; a method that needs no form runs in the problem's own."""
    bench_methods, _ = bench
    plan = bench_methods.form_plan
    assert plan(None, {"form": "inequality"}, "dc3_qp") == (None, "")
    assert plan("standard", {"form": "standard"}, "dcopf_118") == (None, "")
    assert plan("standard", {"form": "inequality"}, "dc3_qp") == ("standard", "")
    form, reason = plan("standard", {"name": "x"}, "x")
    assert form is None and "needs problem.form=standard" in reason and "no form option" in reason
    assert bench_methods.required_form("apm", "dc3_qp")[0] == "standard"
    assert bench_methods.required_form("eapm", "dc3_qp")[0] == "standard"  # inherited
    assert bench_methods.required_form("pinet", "dc3_qp")[0] is None


def test_apm_is_timed_on_the_standard_form(bench, tmp_path):
    """dc3_qp is in inequality form: APM runs on its standard form (slacks appended: n = 100 + 50), its row
    labelled so, with that form's floor; the references stay in the problem's own form (and are timed once when
    ``--methods`` names one)."""
    bench_methods, _ = bench
    out = bench_methods.main(["--quick", "--problems", "dc3_qp", "--methods", "apm", "mlp", "--solvers", "--batch-sizes", "1", "--instances", "3",
                              "--repeats", "2", "--call-budget", "600", "--out-dir", str(tmp_path),
                              "--cache-dir", str(tmp_path / "cache")])  # fmt: skip
    by = {r["method"]: r for r in out["rows"]}
    assert [r["method"] for r in out["rows"]] == ["mlp", "mlp_f64", "apm[form=standard]"]  # a reference named again: once
    apm = by["apm[form=standard]"]
    assert apm["status"] == "ok" and apm["config"] == "apm" and apm["n"] == 150 and by["mlp"]["n"] == 100
    assert apm["iterations_mean"] >= 1 and apm["floor_exact"] and apm["macs_float64"] > 0
    assert "| apm[form=standard] |" in out["paths"]["md"].read_text()


@pytest.mark.slow
def test_a_checkpoint_is_timed_only_on_the_form_it_was_trained_in(bench, tmp_path):
    """Real runs (trainer=fast) on dcopf_14: APM in its standard form and proposed in the inequality form. Timed on
    dcopf_14's own (standard) form, APM's checkpoint is used and proposed's is refused, the row saying which form
    to train in; built in the inequality form (as a method that needs that form is), proposed's loads."""
    import subprocess

    bench_methods, _ = bench
    repo = BENCH_DIR.parent
    env = {**__import__("os").environ, "PYTHONPATH": str(repo / "src")}
    for method, form in (("apm", "standard"), ("proposed", "inequality")):
        subprocess.run([sys.executable, "run.py", "problem=dcopf_14", f"problem.form={form}", "trainer=fast", "threads=1",
                        "progress=false", "study=bm_test", f"method={method}", "seed=0", f"cache_dir={tmp_path / 'cache'}",
                        f"hydra.run.dir={tmp_path / 'runs' / method}"], cwd=repo, env=env, check=True, timeout=600)  # fmt: skip
    apm_run, proposed_run = str(tmp_path / "runs" / "apm"), str(tmp_path / "runs" / "proposed")
    out = bench_methods.main(["--quick", "--problems", "dcopf_14", "--methods", "apm", "proposed", "--row-modes",
                              "--batch-sizes", "1", "--instances", "3", "--repeats", "2", "--call-budget", "600",
                              "--out-dir", str(tmp_path / "bench"), "--cache-dir", str(tmp_path / "cache"),
                              "--checkpoint", apm_run, proposed_run])  # fmt: skip
    by = {r["method"]: r for r in out["rows"]}
    assert by["apm"]["status"] == "ok" and by["apm"]["weights"] == f"checkpoint {apm_run}"
    refused = by["proposed"]
    assert refused["status"] == "failed" and "in inequality form" in refused["note"]
    assert "problem.form=standard" in refused["note"]
    args = bench_methods.common.resolve(bench_methods.parser().parse_args(["--quick", "--cache-dir", str(tmp_path / "cache")]),
                                        bench_methods.QUICK, bench_methods.FULL)  # fmt: skip
    overrides = ["problem.form=inequality"]
    problem = bench_methods.common.load_problem("dcopf_14", overrides)
    ctx = bench_methods.common.make_context(args)
    method, weights = bench_methods.build("proposed", "dcopf_14", problem, ctx, proposed_run, overrides)
    assert weights == f"checkpoint {proposed_run}" and method.problem.form == "inequality"


def test_the_pinet_hcnn_row_runs_the_package_on_our_settings_or_says_why_not(bench, tmp_path):
    """``pinet-hcnn (JAX)``: where the package is installed its output equals our pinet method's on the same network
    and settings (the row times the same function); where it is not, the row is skipped with the install line."""
    bench_methods = bench[0]
    sys.path.insert(0, str(BENCH_DIR))
    try:
        import common
        import pinet_reference
    finally:
        sys.path.remove(str(BENCH_DIR))
    problem = common.load_problem("dc3_qp")
    ctx = common.make_context(bench_methods.parser().parse_args(["--quick", "--cache-dir", str(tmp_path)]))
    if not pinet_reference.available():
        with pytest.raises(bench_methods.SkipRow, match="pip install"):
            bench_methods.build(bench_methods.PINET_HCNN, "dc3_qp", problem, ctx)
        return
    ref, weights = bench_methods.build(bench_methods.PINET_HCNN, "dc3_qp", problem, ctx)
    ref.eval()
    xi = problem.sample(4, generator=torch.Generator().manual_seed(0))
    got = ref.predict(xi).y
    ours = ref.method.predict(xi).y
    assert weights == "fresh" and float((got - ours).abs().max()) <= 1e-10 * max(1.0, float(ours.abs().max()))


def test_reference_optimizers_cold_and_warm_and_the_target_ratios(bench, tmp_path):
    """The optimizers one instance at a time in each warm mode (a backend without warm starts says so), the folded
    MLP beside the MLP, and the ratios against the targets in ``methods_summary.csv``."""
    bench_methods, _ = bench
    out = bench_methods.main(["--quick", "--problems", "dcopf_14", "--methods", "proposed", "--mlp-folded", "--row-modes",
                              "--solvers", "highs", "clarabel", "--batch-sizes", "1", "16", "--instances", "3",
                              "--repeats", "2", "--call-budget", "600", "--out-dir", str(tmp_path),
                              "--cache-dir", str(tmp_path / "cache")])  # fmt: skip
    by = {(r["method"], r["batch_size"]): r for r in out["rows"]}
    for mode in ("cold", "warm_prev", "warm_state", "warm_net"):
        r = by[(f"optimizer[highs/{mode}]", 1)]
        assert r["status"] == "ok" and r["median_ms"] > 0 and r["calls"] == 3 and r["failures"] == 0, r
        assert r["floor_exact"] is False and "floor_ratio" not in r  # a solver has no fixed product
    assert by[("optimizer[clarabel/cold]", 1)]["status"] == "ok"
    skipped = by[("optimizer[clarabel/warm_net]", 1)]
    assert skipped["status"] == "skipped" and skipped["note"] == "clarabel takes no warm start"
    assert by[("mlp_folded", 16)]["status"] == "ok"
    with out["paths"]["summary"].open(newline="") as f:
        summary = list(csv.DictReader(f))
    targets = bench_methods.targets
    assert {s["ratio"] for s in summary} == set(targets.TARGETS) | {f"{t} (unfused)" for t in targets.TARGETS}
    got = {s["ratio"]: s for s in summary}
    p1, m1 = by[("proposed", 1)]["median_ms"], by[("mlp", 1)]["median_ms"]
    assert float(got["proposed_over_mlp_b1"]["value"]) == pytest.approx(p1 / m1, rel=1e-5)
    fastest = min(by[(f"optimizer[{s}/cold]", 1)]["median_ms"] for s in ("highs", "clarabel"))
    assert float(got["optimizer_over_proposed_b1"]["value"]) == pytest.approx(fastest / p1, rel=1e-5)
    assert got["proposed_over_mlp_b4096"]["detail"] == "batch 16"  # the largest batch both were timed at
    assert "Ratios against the speed targets" in out["paths"]["md"].read_text()


def test_the_folded_mlp_computes_the_mlp(bench, tmp_path):
    """``mlp_folded`` is a reference only if it is the same function as ``mlp`` (batch norm folded, not dropped)."""
    bench_methods, _ = bench
    args = bench_methods.common.resolve(bench_methods.parser().parse_args(["--quick", "--cache-dir", str(tmp_path)]),
                                        bench_methods.QUICK, bench_methods.FULL)  # fmt: skip
    problem = bench_methods.common.load_problem("dcopf_14")
    ctx = bench_methods.common.make_context(args)
    mlp, _ = bench_methods.build("mlp", "dcopf_14", problem, ctx)
    torch.manual_seed(1)
    for m in mlp.net.modules():  # batch-norm statistics that are not the identity, so that folding them matters
        if isinstance(m, torch.nn.BatchNorm1d):
            m.running_mean.uniform_(-1, 1), m.running_var.uniform_(0.5, 2), m.weight.data.uniform_(0.5, 2)
    folded = bench_methods.FoldedMLP(mlp.net)
    xi = bench_methods.common.sample(problem, 8, 0, args)
    torch.testing.assert_close(folded(xi), mlp(xi), rtol=1e-4, atol=1e-4)


def test_a_batch_whose_call_would_exceed_the_budget_is_skipped_with_its_estimate(bench, tmp_path):
    bench_methods, _ = bench
    out = bench_methods.main(["--quick", "--problems", "dcopf_14", "--methods", "ldr", "--row-modes", "--solvers",
                              "--batch-sizes", "1", "16", "--instances", "3", "--repeats", "2", "--call-budget", "1e-9",
                              "--out-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache")])  # fmt: skip
    rows = {r["batch_size"]: r for r in out["rows"] if r["method"] == "ldr"}
    assert rows[1]["status"] == "ok"  # batch 1 is timed (at least three calls) whatever the budget
    assert rows[16]["status"] == "skipped" and "> --call-budget" in rows[16]["note"]


def test_target_ratios_within_each_round_then_over_the_rounds(bench):
    """A ratio is taken within a round, its median and range over the rounds reported, the verdict on the median;
    a solver that failed an instance is not the fastest."""
    targets = bench[0].targets

    def row(method, batch, ms, variant="", failures=0):
        return {"problem": "dcopf_118_qp", "method": method, "batch_size": batch, "median_ms": ms, "status": "ok",
                "variant": variant, "failures": failures}  # fmt: skip

    rounds = []
    for mlp, proposed, big in [(1.0, 1.2, 30.0), (2.0, 2.0, 10.0), (1.0, 3.0, 20.0)]:
        rounds.append([row("mlp", 1, mlp), row("proposed", 1, proposed), row("mlp", 4096, 10.0), row("proposed", 4096, big),
                       row("optimizer[clarabel/cold]", 1, 50.0, "clarabel/cold"),
                       row("optimizer[osqp/cold]", 1, 5.0, "osqp/cold", failures=2)])  # fmt: skip
    got = {s["ratio"]: s for s in targets.summarize(rounds)}
    b1 = got["proposed_over_mlp_b1"]
    assert (b1["value"], b1["min"], b1["max"], b1["rounds"]) == (pytest.approx(1.2), 1.0, 3.0, 3)
    assert b1["verdict"] == "PASS" and b1["target_applies"]
    big = got["proposed_over_mlp_b4096"]
    assert big["value"] == pytest.approx(2.0) and big["verdict"] == "PASS" and big["detail"] == "batch 4096"
    opt = got["optimizer_over_proposed_b1"]  # osqp failed instances: clarabel is the fastest
    assert opt["value"] == pytest.approx(50.0 / 2.0) and opt["verdict"] == "PASS"
    assert got["throughput_over_optimizer"]["value"] == pytest.approx(4096 / 20.0 * 50.0)
    assert "proposed_over_mlp_b1 (unfused)" not in got  # not timed: not reported
