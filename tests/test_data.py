"""Datasets: reference solutions, the hash-keyed checksummed cache, corruption handling."""

import logging

import torch

from hardlinear.data import build_dataset
from hardlinear.problems import build_problem


def test_dataset_is_cached_and_reused(tmp_path):
    p = build_problem("dcopf_14")
    first = build_dataset(p, "test", 6, seed=0, cache_dir=tmp_path, progress=False)
    second = build_dataset(p, "test", 6, seed=0, cache_dir=tmp_path, progress=False)
    assert not first.from_cache and second.from_cache
    assert torch.equal(first.xi, second.xi) and torch.allclose(first.objective, second.objective)
    other = build_dataset(p, "val", 6, seed=0, cache_dir=tmp_path, progress=False)
    assert not torch.equal(other.xi, first.xi)
    # a different problem (uncertainty) never reads this cache
    q = build_problem("dcopf_14", uncertainty=0.2)
    assert not build_dataset(q, "test", 6, seed=0, cache_dir=tmp_path, progress=False).from_cache


def test_corrupt_cache_is_detected_and_rebuilt(tmp_path, caplog):
    p = build_problem("portfolio")
    build_dataset(p, "test", 5, seed=1, cache_dir=tmp_path, progress=False)
    (path,) = tmp_path.glob("*.npz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated
    with caplog.at_level(logging.WARNING):
        rebuilt = build_dataset(p, "test", 5, seed=1, cache_dir=tmp_path, progress=False)
    assert not rebuilt.from_cache and "rebuilding" in caplog.text
    assert build_dataset(p, "test", 5, seed=1, cache_dir=tmp_path, progress=False).from_cache


def test_edited_cache_fails_its_checksum(tmp_path, caplog):
    import numpy as np

    p = build_problem("portfolio")
    build_dataset(p, "test", 5, seed=2, cache_dir=tmp_path, progress=False)
    (path,) = tmp_path.glob("*.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["objective"] = arrays["objective"] + 1.0  # an edit that keeps the file readable
    np.savez(path, **arrays)
    with caplog.at_level(logging.WARNING):
        rebuilt = build_dataset(p, "test", 5, seed=2, cache_dir=tmp_path, progress=False)
    assert "checksum" in caplog.text and not rebuilt.from_cache
