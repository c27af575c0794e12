"""problem=ed's E2ELR sampler (issue 58, item 1): ``pd = gamma eta pd0``, ``gamma ~ U[0.8, 1.2]``, ``eta`` log-normal
with mean 1 and standard deviation 5 % (truncated at 4 standard deviations of its logarithm), and the paper's
``pmin = 0``."""

import math

import numpy as np
import pytest
import torch

from hardlinear.problems import build_problem
from hardlinear.problems.dcopf import load_network
from hardlinear.problems.ed import E2ELR_TRUNCATION, lognormal_parameters, noise_range

CASE = "pglib_opf_case14_ieee"
PAPER = {"sampler": "e2elr", "load_low": 0.8, "load_high": 1.2, "load_noise": 0.05}


def _factors(problem, n: int, seed: int) -> torch.Tensor:
    xi = problem.sample(n, torch.Generator().manual_seed(seed))
    assert xi.abs().max() <= 1.0
    return problem.loads(xi) / torch.as_tensor(problem.network.pd[problem.load_bus])


def test_the_noise_is_lognormal_with_mean_one_and_the_papers_spread():
    fixed_scale = build_problem("ed", case=CASE, **{**PAPER, "load_low": 1.0, "load_high": 1.0})  # gamma = 1: factor = eta
    eta = _factors(fixed_scale, 20000, 0).flatten().numpy()  # 220,000 draws
    mu, s = lognormal_parameters(0.05)
    assert s == pytest.approx(math.sqrt(math.log(1.0025))) and mu == pytest.approx(-0.5 * math.log(1.0025))
    n = eta.size
    assert eta.mean() == pytest.approx(1.0, abs=4 * 0.05 / math.sqrt(n))  # 4 standard errors
    assert eta.std() == pytest.approx(0.05, rel=0.01)
    logs = np.log(eta)
    assert logs.mean() == pytest.approx(mu, abs=4 * s / math.sqrt(n))
    skew = np.mean((logs - logs.mean()) ** 3) / logs.std() ** 3
    assert abs(skew) < 0.02  # the logarithm is normal: symmetric
    assert (eta.max() - 1.0) > (1.0 - eta.min()) - 0.05  # a log-normal's right tail is the longer
    lo, hi = noise_range(0.05, "e2elr")
    assert lo == pytest.approx(math.exp(mu - E2ELR_TRUNCATION * s)) and hi == pytest.approx(math.exp(mu + E2ELR_TRUNCATION * s))
    assert lo <= eta.min() and eta.max() <= hi


def test_the_scale_is_uniform_and_draws_fill_the_papers_range():
    paper = build_problem("ed", case=CASE, **PAPER)
    factors = _factors(paper, 20000, 1)
    assert factors.mean().item() == pytest.approx(1.0, abs=0.005)
    lo, hi = noise_range(0.05, "e2elr")
    assert 0.8 * lo - 1e-12 <= factors.min() and factors.max() <= 1.2 * hi + 1e-12
    # the box is the recipe's bounding box: its ends are 0.8 * the lowest noise and 1.2 * the highest
    assert paper.centre - paper.half_width == pytest.approx(0.8 * lo) and paper.centre + paper.half_width == pytest.approx(1.2 * hi)
    row_mean = factors.mean(dim=1)  # gamma up to the noise's average over 11 loads
    assert row_mean.min() < 0.82 and row_mean.max() > 1.18
    assert torch.equal(paper.sample(50, torch.Generator().manual_seed(3)), paper.sample(50, torch.Generator().manual_seed(3)))


def test_the_recipes_sets_hold_every_e2elr_draw():
    for input_set in ("recipe", "recipe_total"):
        problem = build_problem("ed", case=CASE, input_set=input_set, **PAPER)
        xi = problem.sample(5000, torch.Generator().manual_seed(2))
        assert problem.compact.polytope.violation(xi).max() <= 1e-12


def test_the_sampler_keys_the_data_not_the_rule():
    pglearn, paper = build_problem("ed", case=CASE), build_problem("ed", case=CASE, **PAPER)
    same_box = build_problem("ed", case=CASE, **{**PAPER, "sampler": "pglearn"})
    assert paper.fingerprint() != same_box.fingerprint()  # same settings, other draws: other cached sets
    assert pglearn.fingerprint() == build_problem("ed", case=CASE, sampler="pglearn").fingerprint()


def test_zero_pmin_is_the_papers_model_and_leaves_the_case_alone():
    rts = "pglib_opf_case24_ieee_rts"  # 32 of its 33 generators have pmin > 0, one has pmin = pmax
    case = load_network(rts)
    assert (case.pmin > 0).sum() == 32
    paper = build_problem("ed", case=rts, zero_pmin=True)
    assert np.all(paper.network.pmin == 0.0) and np.array_equal(paper.network.pmax, case.pmax)
    assert load_network(rts) is case and (case.pmin > 0).sum() == 32  # the cached case is not modified
    xi = paper.sample(32, torch.Generator().manual_seed(0))
    pg = np.asarray(paper.solve(xi).y)[:, paper.variable_slices()["pg"]]
    assert pg.min() >= -1e-9 and (pg < case.pmin - 1e-6).any()  # some generator runs below the case's own minimum
    assert paper.m_eq == 1 + int((case.pmax == 0).sum())  # the generator fixed at pmin = pmax > 0 is free now
    assert paper.m_ineq == 2 * int((case.pmax > 0).sum()) + 3 * len(paper.limited)
    sizes = type(paper).planned_sizes(case=rts, zero_pmin=True)
    assert (sizes["m_eq"], sizes["m_ineq"], sizes["n"]) == (paper.m_eq, paper.m_ineq, paper.n)


@pytest.mark.parametrize("options, phrase", [
    ({"sampler": "gaussian"}, "sampler must be one of ('pglearn', 'e2elr')"),
])
def test_bad_sampler_names_the_choices(options, phrase):
    with pytest.raises(ValueError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        build_problem("ed", case=CASE, **options)
