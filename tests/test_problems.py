"""Problem builders: sizes, forms, residual conventions, bad arguments."""

import numpy as np
import pytest
import torch

from hardlinear.problems import PAPER_SIZES, build_problem


@pytest.mark.parametrize("name", sorted(PAPER_SIZES))
def test_standard_form_sizes_match_the_paper(name):
    p = build_problem(name)
    assert (p.n, p.m_eq, p.m_ineq, p.k) == PAPER_SIZES[name]


@pytest.mark.parametrize("name", ["dcopf_14", "portfolio"])
@pytest.mark.parametrize("objective", ["lp", "qp"])
def test_reference_solution_is_feasible_in_both_forms(name, objective):
    gen = torch.Generator().manual_seed(0)
    for form in ("standard", "inequality"):
        p = build_problem(name, objective=objective, form=form)
        xi = p.sample(8, generator=gen)
        sol = p.solve(xi)
        y = torch.as_tensor(sol.y)
        assert y.shape == (8, p.n)
        assert p.eq_resid(xi, y).abs().max() < 1e-7
        assert p.ineq_resid(xi, y).max() < 1e-7
        np.testing.assert_allclose(p.objective(xi, y).numpy(), sol.objective, rtol=1e-9)


def test_forms_agree_on_the_optimum():
    xi = build_problem("dcopf_30").sample(4, generator=torch.Generator().manual_seed(1))
    std = build_problem("dcopf_30", form="standard").solve(xi, solver="highs")
    ineq = build_problem("dcopf_30", form="inequality").solve(xi, solver="highs")
    np.testing.assert_allclose(std.objective, ineq.objective, rtol=1e-9)


def test_standard_form_slacks_follow_from_the_equalities():
    p = build_problem("dcopf_14")
    xi = p.sample(5, generator=torch.Generator().manual_seed(2))
    y_orig = torch.randn(5, p.n_orig, dtype=torch.float64)
    y = p.to_form(xi, y_orig)
    # slack rows of the standard form hold exactly for any original point
    slack_rows = p.eq_resid(xi, y)[:, p.m_eq :]
    assert slack_rows.abs().max() < 1e-12
    assert torch.equal(p.from_form(y), y_orig)


def test_qp_differs_from_lp_on_ieee_cases_and_says_where_the_costs_come_from():
    lp, qp = build_problem("dcopf_57", objective="lp"), build_problem("dcopf_57", objective="qp")
    xi = torch.zeros(1, lp.k, dtype=torch.float64)
    assert qp.quadratic_source == "matpower:case57"
    assert qp.solve(xi).objective[0] > lp.solve(xi).objective[0] + 1.0
    assert build_problem("dcopf_200", objective="qp").quadratic_source == "pglib"


def test_float32_evaluation_matches_float64():
    p = build_problem("portfolio")
    xi = p.sample(16, generator=torch.Generator().manual_seed(3))
    y = torch.rand(16, p.n, dtype=torch.float64)
    r64 = p.ineq_resid(xi, y)
    r32 = p.ineq_resid(xi.float(), y.float())
    assert r32.dtype == torch.float32
    torch.testing.assert_close(r32.double(), r64, rtol=1e-5, atol=1e-5)


def test_any_pglib_case_by_name():
    p = build_problem("dcopf", case="pglib_opf_case5_pjm", uncertainty=0.1)
    assert p.k == 5 and p.name == "pglib_opf_case5_pjm"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "dcopf_13"}, "choose one of"),
        ({"name": "dcopf", "case": "pglib_opf_case14_iee"}, "unknown PGLib case"),
        ({"name": "dcopf_14", "uncertainty": 1.4}, "uncertainty must be in"),
        ({"name": "dcopf_14", "uncertainty": -0.1}, "uncertainty must be in"),
        ({"name": "dcopf_14", "form": "canonical"}, "form must be one of"),
        ({"name": "dcopf_14", "objective": "milp"}, "objective must be one of"),
        ({"name": "dcopf_14", "case": "pglib_opf_case30_ieee"}, "fixes"),
        ({"name": "dcopf_14", "inputs": "some_buses"}, "inputs must be one of"),
        ({"name": "portfolio", "yields": [0.1, 0.2]}, "differ in length"),
        ({"name": "portfolio", "coupling": "loose"}, "coupling must be one of"),
    ],
)
def test_bad_arguments_name_the_fix(kwargs, message):
    name = kwargs.pop("name")
    with pytest.raises(ValueError, match=message):
        build_problem(name, **kwargs)


def test_loaded_buses_inputs_drop_zero_load_buses():
    p = build_problem("dcopf_14", inputs="loaded_buses")
    assert p.k == 11  # three of the 14 buses carry no load


def test_case_without_a_paper_level_gets_the_default_loudly():
    """A case the paper gives no level for runs at DEFAULT_UNCERTAINTY (loads +-2 %), with a warning that names
    it, and the level is the problem's identity like any other (so the run's record carries it)."""
    from hardlinear.problems.dcopf import DEFAULT_UNCERTAINTY, PAPER_UNCERTAINTY

    with pytest.warns(UserWarning, match=r"no paper uncertainty level: using the default uncertainty=0.02"):
        problem = build_problem("dcopf", case="pglib_opf_case5_pjm")
    assert problem.uncertainty == DEFAULT_UNCERTAINTY == 0.02
    assert problem.identity()["uncertainty"] == 0.02
    explicit = build_problem("dcopf", case="pglib_opf_case5_pjm", uncertainty=0.02)
    assert explicit.fingerprint() == problem.fingerprint()
    assert build_problem("dcopf", case="pglib_opf_case30_ieee").uncertainty == PAPER_UNCERTAINTY["pglib_opf_case30_ieee"]
