"""problem=linear: an LP/QP from arrays or a .npz, its shape checks, given inputs, and a run of the harness."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hardlinear.problems import build_problem
from hardlinear.problems.datasets import build_dataset
from hardlinear.problems.linear import LinearProblem


def small_arrays(seed: int = 0) -> dict:
    """A bounded QP in R^6 with 2 inputs: y boxed in [-2, 2], sum(y) = xi_0, two coupling rows."""
    rng = np.random.default_rng(seed)
    n, k = 6, 2
    H = np.vstack([np.eye(n), -np.eye(n), rng.normal(size=(2, n))])
    h0 = np.concatenate([2 * np.ones(2 * n), 3 * np.ones(2)])
    Hx = np.zeros((2 * n + 2, k))
    Hx[-2:, 1] = 0.5
    return {
        "c": rng.normal(size=n), "Q": np.diag(rng.uniform(0.5, 1.0, n)),
        "G": np.ones((1, n)), "g0": np.zeros(1), "Gx": np.array([[1.0, 0.0]]),
        "H": H, "h0": h0, "Hx": Hx, "lo": -np.ones(k), "hi": np.ones(k),
    }


def test_npz_problem_solves_and_matches_arrays(tmp_path):
    arrays = small_arrays()
    path = tmp_path / "p.npz"
    np.savez(path, **arrays)
    p = build_problem("linear", path=str(path))
    assert p.sizes() == {"n": 6, "m_eq": 1, "m_ineq": 14, "k": 2} and p.objective_kind == "qp"
    xi = torch.tensor([[0.5, -1.0], [-0.2, 1.0]], dtype=torch.float64)
    sol = p.solve(xi)
    y = torch.as_tensor(sol.y)
    assert sol.all_optimal
    assert torch.allclose(y.sum(1), xi[:, 0], atol=1e-7) and p.ineq_resid(xi, y).max() < 1e-6
    # sparse CSR triplets give the same problem
    csr = sp.csr_matrix(arrays["H"])
    sparse = {k: v for k, v in arrays.items() if k != "H"}
    sparse.update(H_data=csr.data, H_indices=csr.indices, H_indptr=csr.indptr, H_shape=np.array(csr.shape))
    np.savez(tmp_path / "s.npz", **sparse)
    q = LinearProblem(path=str(tmp_path / "s.npz"))
    assert q.constraints_fingerprint() == p.constraints_fingerprint()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"G": np.ones((1, 5))}, r"G \(equality rows.*shape \(m, 6\)"),
        ({"Gx": np.ones((1, 3))}, r"Gx .*k = 2 from lo/hi.*shape \(1, 2\)"),
        ({"h0": np.ones(3)}, r"h0 must have shape \(14,\)"),
        ({"hi": np.ones(3)}, r"hi must have shape \(2,\)"),
        ({"Q": np.triu(np.ones((6, 6)))}, "Q must be symmetric"),
        ({"c": None}, "c .* is required"),
        ({"lo": None}, "lo .* is required"),
        ({"extra": np.ones(2)}, r"unknown keys \['extra'\]"),
        ({"test_inputs": np.array([[0.0, 2.0]])}, "outside the input box.*widen lo/hi"),
        ({"val_inputs": np.ones((3, 5))}, r"val_inputs must have shape \(N, 2\)"),
        ({"G": None}, "g0 is given but G is not"),
    ],
)
def test_bad_arrays_are_named_with_the_fix(tmp_path, change, message):
    arrays = {**small_arrays(), **change}
    arrays = {k: v for k, v in arrays.items() if v is not None}
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=message):
        LinearProblem(path=str(tmp_path / "bad.npz"))


def test_missing_file_and_incomplete_csr(tmp_path):
    with pytest.raises(FileNotFoundError, match="problem.path"):
        LinearProblem(path=str(tmp_path / "nope.npz"))
    arrays = small_arrays()
    csr = sp.csr_matrix(arrays.pop("H"))
    np.savez(tmp_path / "half.npz", **arrays, H_data=csr.data, H_indices=csr.indices)
    with pytest.raises(ValueError, match="sparse H needs all of"):
        LinearProblem(path=str(tmp_path / "half.npz"))


def test_given_inputs_become_the_datasets(tmp_path):
    val = np.array([[0.1, 0.2], [-0.3, 0.9], [1.0, -1.0]])
    p = LinearProblem(arrays={**small_arrays(), "val_inputs": val})
    ds = build_dataset(p, "val", 100, seed=0, cache_dir=tmp_path, progress=False)
    assert torch.equal(ds.xi, torch.as_tensor(val)) and len(ds) == 3
    assert build_dataset(p, "val", 100, seed=5, cache_dir=tmp_path, progress=False).from_cache  # seed is irrelevant
    # explicit inputs win over sampling, and a different set is a different cache entry
    other = build_dataset(p, "test", 100, seed=0, cache_dir=tmp_path, progress=False, inputs=val[:2])
    assert len(other) == 2 and not other.from_cache
    with pytest.raises(ValueError, match="outside the input box"):
        build_dataset(p, "test", 4, seed=0, cache_dir=tmp_path, progress=False, inputs=np.array([[3.0, 0.0]]))


def test_harness_runs_a_method_on_a_file(tmp_path):
    from hydra import compose, initialize_config_dir

    from hardlinear.harness.runner import run

    path = tmp_path / "p.npz"
    np.savez(path, **small_arrays(), test_inputs=np.array([[0.0, 0.0], [0.5, 0.5], [-0.5, 1.0]]))
    conf = str((__import__("pathlib").Path(__file__).parents[1] / "conf").resolve())
    with initialize_config_dir(config_dir=conf, version_base=None):
        cfg = compose(config_name="config", overrides=[
            "problem=linear", f"problem.path={path}", "method=penalty", "trainer=fast", "progress=false",
            f"results_dir={tmp_path / 'results'}", f"cache_dir={tmp_path / 'cache'}", "logger=csv",
        ])
        row = run(cfg, tmp_path / "run")
    assert row is not None and row["problem"] == "linear" and np.isfinite(row["test/gap_mean"])


def _simplex_arrays() -> dict:
    """small_arrays on the input triangle xi >= -1, xi_0 + xi_1 <= 0 (half the box), given as a polytope."""
    arrays = small_arrays()
    del arrays["lo"], arrays["hi"]
    return {**arrays, "A_in": np.array([[-1.0, 0.0], [0.0, -1.0], [1.0, 1.0]]), "b_in": np.array([1.0, 1.0, 0.0])}


def test_npz_polytope_keys_give_a_polytope_problem(tmp_path):
    np.savez(tmp_path / "p.npz", **_simplex_arrays())
    p = LinearProblem(path=str(tmp_path / "p.npz"))
    poly = p.compact.polytope
    np.testing.assert_allclose(p.box.lo, -1.0, atol=1e-8) and np.testing.assert_allclose(p.box.hi, 1.0, atol=1e-8)
    xi = p.sample(400, generator=torch.Generator().manual_seed(0))
    assert poly.contains(xi.numpy(), tol=0.0).all() and xi.sum(dim=1).max() <= 0  # drawn inside, not in its box
    assert torch.equal(xi, p.sample(400, generator=torch.Generator().manual_seed(0)))  # reproducible
    assert p.cost_moments is not None and p.constraints_fingerprint() != LinearProblem(arrays=small_arrays()).constraints_fingerprint()
    with pytest.raises(ValueError, match="outside the input polytope"):
        LinearProblem(arrays={**_simplex_arrays(), "test_inputs": np.array([[0.5, 0.5]])})
    with pytest.raises(ValueError, match="A_in and b_in go together"):
        LinearProblem(arrays={k: v for k, v in _simplex_arrays().items() if k != "b_in"})
    with pytest.raises(ValueError, match="is empty"):
        LinearProblem(arrays={**_simplex_arrays(), "b_in": np.array([1.0, 1.0, -3.0])})
    with pytest.raises(ValueError, match="audit draws box vertices"):
        from hardlinear.evaluation.audit import audit

        audit(p, None)


def test_harness_runs_proposed_on_a_polytope_file(tmp_path):
    from hydra import compose, initialize_config_dir

    from hardlinear.harness.runner import run

    path = tmp_path / "p.npz"
    np.savez(path, **_simplex_arrays())
    conf = str((__import__("pathlib").Path(__file__).parents[1] / "conf").resolve())
    with initialize_config_dir(config_dir=conf, version_base=None):
        cfg = compose(config_name="config", overrides=[
            "problem=linear", f"problem.path={path}", "method=proposed", "trainer=fast", "progress=false",
            f"results_dir={tmp_path / 'results'}", f"cache_dir={tmp_path / 'cache'}", "logger=csv",
        ])
        row = run(cfg, tmp_path / "run")
    assert row is not None and row["status"] == "ok" and np.isfinite(row["test/gap_mean"])
    assert row["test/ineq_viol_worst"] <= 1e-9  # every test input is drawn inside the polytope, where the rule holds
