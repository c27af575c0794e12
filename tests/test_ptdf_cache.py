"""The dispatch's PTDF kept on disk (hardlinear.problems.ptdf_cache): read back bit for bit, the same problem as a
fresh build, rebuilt when the file is damaged, and keyed by what its bits depend on."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import hardlinear.problems.ptdf_cache as ptdf_cache
from hardlinear.problems import build_problem
from hardlinear.problems import ed as ed_module

CASE = "pglib_opf_case30_ieee"


def test_a_stored_ptdf_is_read_back_and_the_problem_is_a_fresh_builds(tmp_path, monkeypatch):
    first = build_problem("ed", case=CASE, cache_dir=tmp_path)
    (stored,) = tmp_path.glob("ptdf-*.npz")

    def no_solve(*args, **kwargs):
        raise AssertionError("the PTDF was computed again")

    monkeypatch.setattr(ed_module.sla, "solve", no_solve)
    again = build_problem("ed", case=CASE, cache_dir=tmp_path, form="inequality")
    monkeypatch.undo()
    fresh = build_problem("ed", case=CASE)
    assert np.array_equal(again.ptdf, fresh.ptdf) and np.array_equal(first.ptdf, fresh.ptdf)
    assert first.fingerprint() == fresh.fingerprint() and stored.stat().st_size > 0
    assert again.rebuild(0.5).cache_dir == str(tmp_path)  # the rule's search for a level reads it too


def test_a_damaged_file_is_computed_again_with_a_warning(tmp_path, caplog):
    want = build_problem("ed", case=CASE, cache_dir=tmp_path).ptdf
    (stored,) = tmp_path.glob("ptdf-*.npz")
    with np.load(stored) as f:
        ptdf, digest = f["ptdf"].copy(), str(f["sha256"])
    ptdf[0, 0] += 1.0
    np.savez(stored, ptdf=ptdf, sha256=np.array(digest))  # edited, with the old checksum
    with caplog.at_level(logging.WARNING, logger="hardlinear.problems.ptdf_cache"):
        got = build_problem("ed", case=CASE, cache_dir=tmp_path).ptdf
    assert np.array_equal(got, want) and "fails its checksum" in caplog.text
    stored.write_bytes(b"not a zip file")
    with caplog.at_level(logging.WARNING, logger="hardlinear.problems.ptdf_cache"):
        assert np.array_equal(build_problem("ed", case=CASE, cache_dir=tmp_path).ptdf, want)
    assert "unreadable" in caplog.text


def test_the_key_follows_the_topology_and_the_blas_pool(monkeypatch):
    a = np.arange(5)
    base = ptdf_cache.ptdf_key(a, a + 1.0)
    assert ptdf_cache.ptdf_key(a, a + 1.0) == base and ptdf_cache.ptdf_key(a, a + 2.0) != base
    monkeypatch.setattr(ptdf_cache, "_blas_threads", lambda: 97)
    assert ptdf_cache.ptdf_key(a, a + 1.0) != base


@pytest.mark.parametrize("name", ["dcopf_14", "portfolio"])
def test_problems_without_a_stored_part_ignore_the_cache_dir(tmp_path, name):
    assert build_problem(name, cache_dir=tmp_path).sizes() == build_problem(name).sizes()
    assert not any(tmp_path.iterdir())
