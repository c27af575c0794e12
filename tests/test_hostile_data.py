"""Issue 29, item 6: the dataset cache checks that a file is the set it is named for (split, seed, size, problem),
not only that it is whole: a test-split file copied over the validation file is rebuilt, never served."""

import logging
import shutil

import numpy as np
import torch

from hardlinear.problems import build_problem
from hardlinear.problems.datasets import build_dataset, load_arrays, save_arrays


def test_the_test_split_copied_over_the_validation_file_is_not_served_as_validation(tmp_path, caplog):
    p = build_problem("portfolio")
    val = build_dataset(p, "val", 5, seed=0, cache_dir=tmp_path, progress=False)
    (val_path,) = tmp_path.glob("*-val-*.npz")
    test = build_dataset(p, "test", 5, seed=0, cache_dir=tmp_path, progress=False)
    (test_path,) = tmp_path.glob("*-test-*.npz")
    assert not torch.equal(val.xi, test.xi)
    shutil.copyfile(test_path, val_path)  # checksum still valid: the file is whole, just not this set
    with caplog.at_level(logging.WARNING):
        again = build_dataset(p, "val", 5, seed=0, cache_dir=tmp_path, progress=False)
    assert not again.from_cache and "not the portfolio val set" in caplog.text and "split='test'" in caplog.text
    assert torch.equal(again.xi, val.xi)  # the validation inputs, rebuilt
    assert build_dataset(p, "val", 5, seed=0, cache_dir=tmp_path, progress=False).from_cache


def test_another_seed_or_size_relabelled_with_a_valid_checksum_is_rebuilt(tmp_path, caplog):
    """A file re-saved by hand with a fresh checksum and another seed's inputs (honestly labelled seed 1)."""
    p = build_problem("portfolio")
    build_dataset(p, "val", 5, seed=0, cache_dir=tmp_path, progress=False)
    other = build_dataset(p, "val", 5, seed=1, cache_dir=tmp_path / "b", progress=False)
    (path,) = tmp_path.glob("*-val-*.npz")
    arrays, meta = load_arrays(path)
    forged = {k: np.asarray(v) for k, v in {"xi": other.xi, "y": other.y, "objective": other.objective, "solve_time_s": other.solve_time_s}.items()}
    save_arrays(path, forged, {**{k: v for k, v in meta.items() if k != "checksum"}, "seed": 1})
    with caplog.at_level(logging.WARNING):
        again = build_dataset(p, "val", 5, seed=0, cache_dir=tmp_path, progress=False)
    assert not again.from_cache and "it holds seed=1, not 0" in caplog.text
    assert not torch.equal(again.xi, other.xi)
