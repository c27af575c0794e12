"""Attack every input surface with bad inputs and classify what happens (issue 29, item 10).

    python scripts/attack_inputs.py              # every attack; prints the table by surface, exits 1 if any
                                                 # outcome is unclear, silent, corrupts data or a security hole
    python scripts/attack_inputs.py --fast       # the in-process attacks only (what tests/test_hostile_inputs.py runs)
    python scripts/attack_inputs.py --verbose    # one line per attack with its message

Surfaces: the npz problem file, an inputs file (evaluate.py --inputs), the config (overrides, validation), a
checkpoint, a results root, a layer call, the CLIs (run.py, evaluate.py, make_tables.py). Each attack says what a
careful user should get: a *rejection* before work whose message matches a pattern naming the field and the fix,
or *handling* (the attack is absorbed and the result is right). Outcomes:

- ``rejected``: refused before work, with an error of a clear type whose message matches;
- ``handled``: absorbed, and the check of the result holds (the good record still loads, the bad one reported);
- ``unclear``: an error, but of a raw type (IndexError, a torch RuntimeError, RecursionError) or not naming it;
- ``silent``: accepted where it should have been refused, or absorbed without a word;
- ``corrupts``: data lost or mixed (a record replaced, an output half-overwritten, the test set served as validation);
- ``security``: a file written or truncated by a crafted input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = ("rejected", "handled", "unclear", "silent", "corrupts", "security")
BAD_OUTCOMES = ("unclear", "silent", "corrupts", "security")
CLEAR_TYPES: tuple[type, ...] = (ValueError, TypeError, FileNotFoundError, FileExistsError, PermissionError)


class CLIRefused(Exception):
    """A command line that ended with a non-zero status and no traceback; its message is the stderr."""


class Verdict(Exception):
    """Raised by an attack's own check: the outcome it found (``silent``, ``corrupts``, ``security``) and why."""

    def __init__(self, outcome: str, why: str) -> None:
        super().__init__(why)
        self.outcome = outcome


@dataclass
class Attack:
    surface: str
    name: str
    run: Callable[[Path], Any]
    expect: str = "reject"  # or "handle"
    pattern: str = ""
    slow: bool = False


ATTACKS: list[Attack] = []


def attack(surface: str, name: str, expect: str = "reject", pattern: str = "", slow: bool = False):
    def register(fn):
        ATTACKS.append(Attack(surface, name, fn, expect, pattern, slow))
        return fn

    return register


def classify(a: Attack, work: Path) -> tuple[str, str]:
    """``(outcome, message)`` of one attack run in the empty folder ``work``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            a.run(work)
        except Verdict as v:
            return v.outcome, str(v)
        except CLIRefused as err:
            text = str(err)
            if "Traceback" in text:
                return "unclear", text.strip().splitlines()[-1][:200]
            return ("rejected" if re.search(a.pattern, text) else "unclear"), text.strip()[:300]
        except Exception as err:  # noqa: BLE001 - classifying every outcome is the point
            text = f"{type(err).__name__}: {err}"
            clear = isinstance(err, _clear_types()) and re.search(a.pattern, str(err), re.S) and a.expect == "reject"
            return ("rejected" if clear else "unclear"), text[:300]
    return ("handled", "") if a.expect == "handle" else ("silent", "accepted without an error")


def _clear_types() -> tuple[type, ...]:
    from hardlinear.harness.checkpoint import CheckpointError
    from hardlinear.harness.results import BadRecord
    from hardlinear.harness.schemas import ConfigError

    return (*CLEAR_TYPES, CheckpointError, ConfigError, BadRecord)


# --- helpers ---------------------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HYDRA_FULL_ERROR": ""}


def _cli(args: list[str], timeout: int = 600) -> str:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env(), timeout=timeout, cwd=ROOT)
    if out.returncode != 0:
        raise CLIRefused(out.stderr or out.stdout)
    return out.stdout


def _problem_file(work: Path, **arrays) -> Path:
    base = {"c": np.ones(2), "H": np.array([[1.0, 1.0], [-1.0, 0.0], [0.0, -1.0]]), "h0": np.array([4.0, 0.0, 0.0]),
            "Hx": np.array([[1.0], [0.0], [0.0]]), "lo": np.zeros(1), "hi": np.ones(1)}
    base.update(arrays)
    path = work / "p.npz"
    np.savez(path, **{k: v for k, v in base.items() if v is not None})
    return path


def _build(path) -> Any:
    from hardlinear.problems import build_problem

    return build_problem("linear", path=str(path))


# --- surface: the npz problem file -----------------------------------------------------------------------------
@attack("npz problem file", "file missing", pattern="not found; pass problem.path")
def _(w):
    _build(w / "absent.npz")


@attack("npz problem file", "a directory", pattern="not a regular file")
def _(w):
    _build(w)


@attack("npz problem file", "/dev/zero", pattern="not a regular file")
def _(w):
    _build("/dev/zero")


@attack("npz problem file", "text named .npz", pattern="cannot be read as .npz")
def _(w):
    (w / "t.npz").write_text("c = 1, 2")
    _build(w / "t.npz")


@attack("npz problem file", "pickled object array", pattern="cannot be read as .npz")
def _(w):
    np.savez(w / "o.npz", c=np.array([{"a": 1}], dtype=object), lo=np.zeros(1), hi=np.ones(1))
    _build(w / "o.npz")


@attack("npz problem file", "one .npy array under .npz", pattern="cannot be read as .npz|one array")
def _(w):
    np.save(w / "a.npy", np.ones(3))
    shutil.move(w / "a.npy", w / "a.npz")
    _build(w / "a.npz")


@attack("npz problem file", "CSR indices beyond the shape", pattern="sparse H .* inconsistent")
def _(w):
    path = _problem_file(w, H=None, h0=None, Hx=None, H_data=np.ones(2), H_indices=np.array([0, 7]), H_indptr=np.array([0, 1, 2]), H_shape=np.array([2, 2]))
    _build(path)


@attack("npz problem file", "CSR indptr too short", pattern="sparse H .* inconsistent")
def _(w):
    path = _problem_file(w, H=None, h0=None, Hx=None, H_data=np.ones(2), H_indices=np.array([0, 1]), H_indptr=np.array([0, 2]), H_shape=np.array([2, 2]))
    _build(path)


@attack("npz problem file", "CSR part missing", pattern="needs all of")
def _(w):
    path = _problem_file(w, H=None, h0=None, Hx=None, H_data=np.ones(2), H_indices=np.array([0, 1]), H_shape=np.array([2, 2]))
    _build(path)


@attack("npz problem file", "non-PSD Q", pattern="positive semidefinite")
def _(w):
    _build(_problem_file(w, Q=np.array([[1.0, 0.0], [0.0, -1.0]])))


@attack("npz problem file", "asymmetric Q", pattern="symmetric")
def _(w):
    _build(_problem_file(w, Q=np.array([[1.0, 2.0], [0.0, 1.0]])))


@attack("npz problem file", "NaN in c", pattern="non-finite")
def _(w):
    _build(_problem_file(w, c=np.array([1.0, np.nan])))


@attack("npz problem file", "c missing", pattern="c .*required")
def _(w):
    _build(_problem_file(w, c=None))


@attack("npz problem file", "unknown key", pattern="unknown keys")
def _(w):
    _build(_problem_file(w, cost=np.ones(2)))


@attack("npz problem file", "H with the wrong column count", pattern="H .*must have shape")
def _(w):
    _build(_problem_file(w, H=np.ones((3, 5))))


@attack("npz problem file", "Hx without H", pattern="Hx is given but H is not")
def _(w):
    _build(_problem_file(w, H=None, h0=None))


@attack("npz problem file", "lo above hi", pattern="lo|hi")
def _(w):
    _build(_problem_file(w, lo=np.ones(1), hi=np.zeros(1)))


@attack("npz problem file", "empty lo/hi", pattern="at least one input|empty|shape")
def _(w):
    _build(_problem_file(w, lo=np.zeros(0), hi=np.zeros(0), Hx=np.zeros((3, 0))))


@attack("npz problem file", "200,000 inputs", pattern="too large for this machine")
def _(w):
    k = 200_000
    _build(_problem_file(w, Hx=np.full((3, k), 1e-6), lo=np.zeros(k), hi=np.ones(k)))


@attack("npz problem file", "val_inputs outside the box", pattern="outside the input box")
def _(w):
    _build(_problem_file(w, val_inputs=np.array([[2.0]])))


@attack("npz problem file", "val_inputs with no rows", pattern=r"N >= 1")
def _(w):
    _build(_problem_file(w, val_inputs=np.zeros((0, 1))))


# --- surface: an inputs file (evaluate.py --inputs) -------------------------------------------------------------
def _inputs(path) -> Any:
    from hardlinear.harness.reevaluate import read_inputs

    return read_inputs(path, 3)


@attack("inputs file", "(0, k) array", pattern="no rows")
def _(w):
    np.save(w / "x.npy", np.zeros((0, 3)))
    _inputs(w / "x.npy")


@attack("inputs file", "wrong k", pattern=r"shape \(N, 3\)")
def _(w):
    np.save(w / "x.npy", np.zeros((4, 2)))
    _inputs(w / "x.npy")


@attack("inputs file", "1-D array", pattern=r"shape \(N, 3\)")
def _(w):
    np.save(w / "x.npy", np.zeros(3))
    _inputs(w / "x.npy")


@attack("inputs file", "NaN", pattern="NaN or inf")
def _(w):
    np.save(w / "x.npy", np.full((2, 3), np.nan))
    _inputs(w / "x.npy")


@attack("inputs file", "strings", pattern="not real numbers")
def _(w):
    np.save(w / "x.npy", np.array([["a", "b", "c"]]))
    _inputs(w / "x.npy")


@attack("inputs file", "complex numbers", pattern="not real numbers")
def _(w):
    np.save(w / "x.npy", np.ones((2, 3), dtype=complex))
    _inputs(w / "x.npy")


@attack("inputs file", "a directory", pattern="not a regular file")
def _(w):
    (w / "d.npy").mkdir()
    _inputs(w / "d.npy")


@attack("inputs file", "symlink to /dev/zero", pattern="not a regular file")
def _(w):
    os.symlink("/dev/zero", w / "z.npy")
    _inputs(w / "z.npy")


@attack("inputs file", "garbage .npy", pattern="cannot be read as .npy")
def _(w):
    (w / "g.npy").write_bytes(b"\x93NUMPY garbage")
    _inputs(w / "g.npy")


@attack("inputs file", "truncated .npz", pattern="cannot be read as .npz")
def _(w):
    np.savez(w / "t.npz", xi=np.ones((5, 3)))
    data = (w / "t.npz").read_bytes()
    (w / "t.npz").write_bytes(data[: len(data) // 2])
    _inputs(w / "t.npz")


@attack("inputs file", ".npz without xi", pattern="no array 'xi'")
def _(w):
    np.savez(w / "n.npz", inputs=np.ones((5, 3)))
    _inputs(w / "n.npz")


@attack("inputs file", "text in a .csv", pattern="cannot be read as .csv")
def _(w):
    (w / "c.csv").write_text("1,2,three\n")
    _inputs(w / "c.csv")


@attack("inputs file", "wrong suffix", pattern="must be .npy, .npz")
def _(w):
    (w / "x.txt").write_text("1,2,3\n")
    _inputs(w / "x.txt")


@attack("inputs file", "file missing", pattern="not found")
def _(w):
    _inputs(w / "absent.npy")


# --- surface: the config ------------------------------------------------------------------------------------------
def _validate(*overrides: str, merge: dict | None = None) -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from hardlinear.harness.schemas import validate_config

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    if merge:
        cfg = OmegaConf.merge(cfg, merge)
    validate_config(cfg)


for _name, _override, _pattern in (
    ("study escaping with ..", "study=../../x", "study=.*must be one folder name"),
    ("study absolute", "study=/tmp/abs", "study=.*must be one folder name"),
    ("study with a separator", "study=a/b", "study=.*must be one folder name"),
    ("study empty", "study=''", "study=.*is empty"),
    ("negative epochs", "trainer.epochs=-1", "trainer.epochs"),
    ("text epochs", "trainer.epochs=abc", "trainer.epochs"),
    ("negative seed", "seed=-1", "seed"),
    ("seed beyond 64 bits", "seed=18446744073709551616", "seed"),
    ("float16 dtype", "dtype=float16", "dtype"),
    ("uncertainty out of (0, 1)", "problem.uncertainty=2", "problem.uncertainty"),
    ("negative penalty", "method=dc3 method.penalty=-5", "penalty"),
    ("zero validation size", "data.val_size=0", "data.val_size"),
    ("zero threads", "threads=0", "threads"),
    ("unknown device", "device=tpu", "device"),
    ("unknown key", "+problem.foo=1", "foo"),
):
    def _make(override: str):
        return lambda w: _validate("problem=dcopf_14", *override.split())

    ATTACKS.append(Attack("config", _name, _make(_override), "reject", _pattern))


@attack("config", "experiment escaping (experiment configs set it)", pattern="experiment=.*must be one folder name")
def _(w):
    _validate("problem=dcopf_14", merge={"experiment": "../up"})


@attack("config", "results_dir is a file", pattern="results_dir=.*is a file")
def _(w):
    (w / "f").write_text("")
    _validate("problem=dcopf_14", f"results_dir={w / 'f'}")


@attack("config", "cache_dir is a file", pattern="cache_dir=.*is a file")
def _(w):
    (w / "f").write_text("")
    _validate("problem=dcopf_14", f"cache_dir={w / 'f'}")


@attack("config", "hydra.run.dir is a file (run.py)", pattern=r"^error: hydra.run.dir=.*is a file", slow=True)
def _(w):
    (w / "f").write_text("")
    _cli(["run.py", "problem=dcopf_14", f"hydra.run.dir={w / 'f'}"])


@attack("config", "misspelt key (run.py)", pattern=r"error: .*trainer.epoch", slow=True)
def _(w):
    _cli(["run.py", "problem=dcopf_14", "trainer.epoch=3"])


@attack("config", "full disk before the run (run.py)", pattern=r"^error: no space to start a run", slow=True)
def _(w):
    # a folder whose file system has too little space: simulated by asking for more than any disk has
    code = (
        "import sys, runpy; import hardlinear.harness.outputs as o; o.MIN_FREE_BYTES = 2**62; "
        f"sys.argv = ['run.py', 'problem=dcopf_14', 'hydra.run.dir={w / 'run'}']; runpy.run_path('run.py', run_name='__main__')"
    )
    _cli(["-c", code])


# --- surface: a checkpoint --------------------------------------------------------------------------------------
def _plant(run: Path, config: Any, probe: Any = None, fmt: int = 1) -> Path:
    import torch

    run.mkdir(parents=True, exist_ok=True)
    torch.save({"format": fmt, "method": "x", "config": config, "state_dict": {}, "probe": probe}, run / "checkpoint.pt")
    return run


def _load(run: Path) -> Any:
    from hardlinear.harness.checkpoint import load_run

    return load_run(run)


PROBLEM = {"name": "dcopf", "case": "pglib_opf_case14_ieee"}


@attack("checkpoint", "numpy.savetxt writes a script", pattern="refused to load")
def _(w):
    script = w / "evil.sh"
    try:
        _load(_plant(w / "run", {"problem": PROBLEM, "method": {"_target_": "numpy.savetxt", "_args_": [str(script), [0.0]], "header": "echo pwned", "comments": ""}}))
    finally:
        if script.exists():
            raise Verdict("security", f"{script} was written by the checkpoint")


@attack("checkpoint", "builtins.open truncates a file", pattern="refused to load")
def _(w):
    victim = w / "precious"
    victim.write_text("keep")
    try:
        _load(_plant(w / "run", {"problem": PROBLEM, "method": {"_target_": "builtins.open", "file": str(victim), "mode": "w"}}))
    finally:
        if victim.read_text() != "keep":
            raise Verdict("security", f"{victim} was truncated by the checkpoint")


@attack("checkpoint", "nested _target_ in a method option", pattern="refused to load")
def _(w):
    victim = w / "precious"
    victim.write_text("keep")
    method = {"_target_": "hardlinear.methods.proposed.Proposed", "gradient": {"_target_": "builtins.open", "file": str(victim), "mode": "w"}}
    try:
        _load(_plant(w / "run", {"problem": PROBLEM, "method": method}))
    finally:
        if victim.read_text() != "keep":
            raise Verdict("security", f"{victim} was truncated by the checkpoint")


@attack("checkpoint", "_partial_ on our method", pattern="refused to load")
def _(w):
    _load(_plant(w / "run", {"problem": PROBLEM, "method": {"_target_": "hardlinear.methods.ldr.LDR", "_partial_": True}}))


@attack("checkpoint", "interpolation reading the environment", pattern="no usable probe|refused")
def _(w):
    _load(_plant(w / "run", {"problem": PROBLEM, "method": {"_target_": "hardlinear.methods.ldr.LDR", "name": "${oc.env:HOME}"}}))


@attack("checkpoint", "config not a mapping", pattern="no 'method' section")
def _(w):
    _load(_plant(w / "run", ["not", "a", "config"]))


@attack("checkpoint", "config nested 200 deep", pattern="nests deeper")
def _(w):
    deep: dict = {}  # torch.save itself cannot write ~500 levels
    node = deep
    for _ in range(200):
        node["x"] = {}
        node = node["x"]
    _load(_plant(w / "run", {"problem": PROBLEM, "method": {"_target_": "hardlinear.methods.ldr.LDR"}, "x": deep}))


@attack("checkpoint", "probe deleted", pattern="no usable probe")
def _(w):
    _load(_plant(w / "run", {"problem": PROBLEM, "method": {"_target_": "hardlinear.methods.ldr.LDR"}}))


@attack("checkpoint", "pickle with a reduce to os.system", pattern="cannot be read")
def _(w):
    import pickle

    marker = w / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (w / "run").mkdir()
    (w / "run" / "checkpoint.pt").write_bytes(pickle.dumps({"format": 1, "x": Evil()}))
    try:
        _load(w / "run")
    finally:
        if marker.exists():
            raise Verdict("security", "the checkpoint ran a shell command")


@attack("checkpoint", "garbage bytes", pattern="cannot be read")
def _(w):
    (w / "run").mkdir()
    (w / "run" / "checkpoint.pt").write_bytes(os.urandom(1000))
    _load(w / "run")


@attack("checkpoint", "wrong format version", pattern="not a hardlinear checkpoint")
def _(w):
    _load(_plant(w / "run", {}, fmt=99))


@attack("checkpoint", "no checkpoint", pattern="no saved model")
def _(w):
    _load(w)


# --- surface: a results root ------------------------------------------------------------------------------------
def _good_record(root: Path) -> Path:
    from hardlinear.harness import results

    return results.write_record(root / "good", {
        "identity": "abc", "study": "s", "status": "ok", "config": {"seed": 0},
        "row": {"problem": "p", "method": "m", "timestamp": "2026-01-01T00:00:00Z"},
    })


def _signed(body: dict) -> str:
    from hardlinear.harness import results

    body = {"schema": results.RECORD_SCHEMA, "results_version": results.RESULTS_VERSION, "reason": "", "provenance": {}, **body}
    body["checksum"] = results._checksum(body)
    return json.dumps(body)


def _root_attack(make: Callable[[Path], None]) -> Callable[[Path], None]:
    """Plant one bad entry beside a good record; handled when the good record loads, the bad entry is reported by
    path, and the resume check (``find_recorded``) goes on."""

    def run(w: Path) -> None:
        from hardlinear.harness import results

        root = w / "results"
        good = _good_record(root)
        bad_dir = root / "bad"
        bad_dir.mkdir(parents=True)
        make(bad_dir)
        df = results.load_records([root], quiet=True)
        if list(df["record"]) != [str(good)]:
            raise Verdict("corrupts", f"the table holds {list(df['record'])}, not just the good record")
        if not any(str(bad_dir) in line for line in df.attrs["unreadable"]):
            raise Verdict("silent", "the bad entry was skipped without a word")
        results.find_recorded(root, "abc")

    return run


_BASE = {"identity": "x", "study": "s", "status": "ok", "row": {}, "config": {}}
for _name, _make in (
    ("JSON nested 100,000 deep", lambda d: (d / "record.json").write_text("[" * 100_000 + "]" * 100_000)),
    ("config a string (valid checksum)", lambda d: (d / "record.json").write_text(_signed({**_BASE, "config": "oops"}))),
    ("row a list (valid checksum)", lambda d: (d / "record.json").write_text(_signed({**_BASE, "row": [1]}))),
    ("study a list (valid checksum)", lambda d: (d / "record.json").write_text(_signed({**_BASE, "study": ["a"]}))),
    ("study ../../x (valid checksum)", lambda d: (d / "record.json").write_text(_signed({**_BASE, "study": "../../x"}))),
    ("checksum edited", lambda d: (d / "record.json").write_text(_signed(_BASE).replace('"ok"', '"failed"'))),
    ("not JSON", lambda d: (d / "record.json").write_bytes(b"\xff\xfe garbage")),
    ("symlink loop", lambda d: os.symlink(d / "record.json", d / "record.json")),
    ("dangling symlink", lambda d: os.symlink(d / "nowhere", d / "record.json")),
    ("directory named record.json", lambda d: (d / "record.json").mkdir()),
    ("FIFO named record.json", lambda d: os.mkfifo(d / "record.json")),
    ("symlink to /dev/zero", lambda d: os.symlink("/dev/zero", d / "record.json")),
    ("1 GB sparse file", lambda d: os.truncate(open(d / "record.json", "wb").name, 2**30)),  # noqa: SIM115
    ("record.json a link to a record outside the root (issue 59)", lambda d: (
        (d.parents[1] / "outside.json").write_text(_signed({**_BASE, "identity": "outside"})),
        os.symlink(d.parents[1] / "outside.json", d / "record.json"))),
):
    ATTACKS.append(Attack("results root", _name, _root_attack(_make), "handle"))


@attack("results root", "directory that cannot be listed", expect="handle")
def _(w):
    from hardlinear.harness import results

    root = w / "results"
    _good_record(root)
    hidden = root / "hidden"
    hidden.mkdir()
    real = os.scandir

    def scandir(path="."):
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    os.scandir = scandir  # what chmod 000 does for a user other than root
    try:
        df = results.load_records([root], quiet=True)
    finally:
        os.scandir = real
    if not any(str(hidden) in line for line in df.attrs["unreadable"]):
        raise Verdict("silent", "the unreadable directory was skipped without a word")


@attack("results root", "two writers of one record at once", expect="handle")
def _(w):
    from hardlinear.harness import results

    for attempt in range(20):
        run_dir = w / f"r{attempt}"
        barrier, errors = threading.Barrier(2), []

        def write(lr, run_dir=run_dir, barrier=barrier, errors=errors):
            barrier.wait()
            try:
                results.write_record(run_dir, {"identity": "i", "study": "s", "status": "ok", "config": {"lr": lr}, "row": {}})
            except FileExistsError as err:
                errors.append(err)

        threads = [threading.Thread(target=write, args=(lr,)) for lr in (1, 2)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        kept = list(run_dir.glob("record.conflict-*.json"))
        if len(errors) != 1 or len(kept) != 1:
            raise Verdict("corrupts", f"attempt {attempt}: {2 - len(errors)} writers succeeded; one record replaced the other")


@attack("results root", "test split copied over the validation cache", expect="handle")
def _(w):
    import torch

    from hardlinear.problems import build_problem
    from hardlinear.problems.datasets import build_dataset

    p = build_problem("portfolio")
    val = build_dataset(p, "val", 4, seed=0, cache_dir=w, progress=False)
    build_dataset(p, "test", 4, seed=0, cache_dir=w, progress=False)
    shutil.copyfile(next(w.glob("*-test-*.npz")), next(w.glob("*-val-*.npz")))
    again = build_dataset(p, "val", 4, seed=0, cache_dir=w, progress=False)
    if again.from_cache or not torch.equal(again.xi, val.xi):
        raise Verdict("corrupts", "the test set was served as the validation set")


@attack("results root", "make tables with --study ../../x", pattern="--study .*must be one folder name", slow=True)
def _(w):
    _good_record(w / "results")
    try:
        _cli(["scripts/make_tables.py", "--results", str(w / "results"), "--study", "../../x", "--out", str(w / "a" / "b" / "t")])
    finally:
        if (w / "x").exists():
            raise Verdict("corrupts", "tables were written outside the output folder")


# --- surface: a layer call ----------------------------------------------------------------------------------------
_LAYER: dict[str, Any] = {}


def _layer(cache: Path):
    if "layer" not in _LAYER:
        from hardlinear.api import feasibility_layer
        from hardlinear.problems import build_problem

        problem = build_problem("dcopf_14")
        _LAYER.update(layer=feasibility_layer(problem, cache_dir=cache, progress=False), problem=problem)
    return _LAYER["layer"], _LAYER["problem"]


def _xi_y(w: Path, rows: int = 4):
    import torch

    layer, problem = _layer(w)
    xi = problem.sample(rows, generator=torch.Generator().manual_seed(0)).double()
    return layer, xi, torch.zeros(rows, layer.n, dtype=torch.float64)


@attack("layer call", "batch mismatch", pattern="rows")
def _(w):
    layer, xi, y = _xi_y(w)
    layer(xi, y[:3])


@attack("layer call", "numpy arrays", pattern="torch.Tensor")
def _(w):
    layer, xi, y = _xi_y(w)
    layer(xi.numpy(), y.numpy())


@attack("layer call", "integer tensors", pattern="floating")
def _(w):
    layer, xi, y = _xi_y(w)
    layer(xi.long(), y.long())


@attack("layer call", "wrong input width", pattern=r"expected xi \(B, \d+\)")
def _(w):
    layer, xi, y = _xi_y(w)
    layer(xi[:, :3], y)


@attack("layer call", "1-D inputs", pattern=r"expected xi")
def _(w):
    layer, xi, y = _xi_y(w)
    layer(xi[0], y[0])


@attack("layer call", "empty batch", expect="handle")
def _(w):
    layer, xi, y = _xi_y(w)
    out = layer(xi[:0], y[:0])
    if tuple(out.shape) != (0, layer.n):
        raise Verdict("silent", f"an empty batch gave shape {tuple(out.shape)}")


@attack("layer call", "NaN and inf task outputs", expect="handle")
def _(w):
    import torch

    layer, xi, y = _xi_y(w)
    y[0, 0], y[1, :] = float("nan"), float("inf")
    out = layer(xi, y)
    if not torch.isfinite(out).all():
        raise Verdict("silent", "non-finite outputs passed through the layer")


# --- surface: evaluate.py -------------------------------------------------------------------------------------------
_RUN: dict[str, Path] = {}


def _finished_run(w: Path) -> Path:
    """One finished dcopf_14 run of the decision rule alone (made once per process, seconds)."""
    if "run" not in _RUN:
        from hydra import compose, initialize_config_dir

        from hardlinear.harness import runner

        work = Path(tempfile.mkdtemp(prefix="attack-run-"))
        overrides = ["problem=dcopf_14", "method=ldr", "trainer=fast", "progress=false", "data.val_size=5", "data.test_size=5",
                     "eval.throughput_batch=8", "eval.warmup=0", "eval.time_instances=2", f"cache_dir={work / 'cache'}",
                     f"results_dir={work / 'results'}"]
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(config_name="config", overrides=overrides)
        runner.run(cfg, work / "run")
        _RUN["run"] = work / "run"
    return _RUN["run"]


@attack("evaluate.py", "(0, k) inputs file", pattern="no rows", slow=True)
def _(w):
    np.save(w / "x.npy", np.zeros((0, 14)))
    _cli(["evaluate.py", str(_finished_run(w)), "--inputs", str(w / "x.npy"), "--out", str(w / "o")])


@attack("evaluate.py", "existing --out", pattern="--out .* exists", slow=True)
def _(w):
    out = w / "o"
    out.mkdir()
    (out / "metrics.json").write_text("mine")
    try:
        _cli(["evaluate.py", str(_finished_run(w)), "--out", str(out), "--test-size", "3"])
    finally:
        if (out / "metrics.json").read_text() != "mine":
            raise Verdict("corrupts", "an existing --out was overwritten")


@attack("evaluate.py", "not a run directory", pattern="no saved model", slow=True)
def _(w):
    _cli(["evaluate.py", str(w)])


@attack("evaluate.py", "--study ../x", pattern="--study .*must be one folder name", slow=True)
def _(w):
    _cli(["evaluate.py", str(_finished_run(w)), "--study", "../x", "--out", str(w / "o")])


@attack("evaluate.py", "probe deleted", pattern="no usable probe.*--allow-missing-probe", slow=True)
def _(w):
    import torch

    copy = w / "run"
    shutil.copytree(_finished_run(w), copy)
    payload = torch.load(copy / "checkpoint.pt", weights_only=True)
    payload["probe"] = None
    torch.save(payload, copy / "checkpoint.pt")
    _cli(["evaluate.py", str(copy)])


@attack("evaluate.py", "negative --test-size", pattern=r"--test-size must be in \[1, ", slow=True)
def _(w):
    _cli(["evaluate.py", str(w), "--test-size", "-3"])


# --- issue 43: a checkpoint is data (stored options checked like the command line), the last unclear and silent ---
BASE_STORED = {"problem": {"name": "dcopf_14"}, "seed": 0, "dtype": "float32", "threads": 1}
OPTIMIZER = {"_target_": "hardlinear.methods.optimizer.Optimizer", "name": "optimizer", "solver": "highs"}
POST_PROJECTION = {"_target_": "hardlinear.methods.post_projection.PostProjection", "name": "post_projection"}
PROPOSED = {"_target_": "hardlinear.methods.proposed.Proposed", "name": "proposed"}
LDR = {"_target_": "hardlinear.methods.ldr.LDR", "name": "ldr"}


def _stored(method: dict, **top) -> dict:
    return {**BASE_STORED, **top, "method": method}


def _probe() -> dict:
    """A probe of the right form (an edited real checkpoint keeps its own): the loader's probe check passes, so the
    attack reaches what the loader builds from the stored config."""
    import torch

    return {"xi": torch.zeros(1, 14, dtype=torch.float64), "y": torch.zeros(1, 5, dtype=torch.float64)}


def _load_unchecked(run: Path) -> Any:
    """``load_run`` past the probe check (a planted checkpoint has none), so the set-up itself is attacked."""
    from hardlinear.harness.checkpoint import load_run

    return load_run(run, allow_missing_probe=True)


def _untouched(victim: Path, before: str | None, what: str) -> None:
    """``Verdict("security")`` when ``victim`` was created (``before`` None) or changed by a load."""
    now = victim.read_text() if victim.is_file() else None
    if now != before or (before is None and victim.exists()):
        raise Verdict("security", f"{victim} was {'created' if before is None else 'changed'} by {what}")


def _solver_option_attack(method: dict, target: str, creates: bool):
    def run(w: Path) -> None:
        victim = w / target
        before = None if creates else "keep"
        if not creates:
            victim.write_text("keep")
        stored = {k: (str(victim) if v == "<victim>" else v) for k, v in method.items()}
        try:
            _load(_plant(w / "run", _stored(stored), probe=_probe()))
        finally:
            _untouched(victim, before, "a stored solver option")

    return run


for _name, _method, _target, _creates in (
    ("HiGHS solution_file overwrites a file", {**OPTIMIZER, "write_solution_to_file": True, "solution_file": "<victim>"}, "precious", False),
    ("HiGHS log_file creates a file", {**OPTIMIZER, "output_flag": True, "log_file": "<victim>"}, "highs.log", True),
    ("Gurobi LogFile through the optimizer", {**OPTIMIZER, "solver": "gurobi", "LogFile": "<victim>"}, "gurobi.log", True),
    ("Gurobi LogFile through post-projection", {**POST_PROJECTION, "solver": "gurobi", "LogFile": "<victim>"}, "gurobi.log", True),
    ("SCS write_data_filename through the projection layer",
     {"_target_": "hardlinear.methods.projection_layer.ProjectionLayer", "solve_method": "SCS", "write_data_filename": "<victim>"}, "scs", True),
):
    ATTACKS.append(Attack("checkpoint", _name, _solver_option_attack(_method, _target, _creates), "reject",
                          "refused to load: its stored config fails the checks run.py applies: .*has no option"))


@attack("checkpoint", "cache_dir names a folder to create", pattern="does not fit")
def _(w):
    evil = w / "evil" / "dir"
    try:
        _load_unchecked(_plant(w / "run", _stored(LDR, cache_dir=str(evil))))  # the empty planted state fails after set-up
    finally:
        if (w / "evil").exists():
            raise Verdict("security", f"{evil} was created: the checkpoint chose where this process writes")


@attack("checkpoint", "problem.case climbing out of the case folder", pattern="is not a PGLib-OPF case")
def _(w):
    (w / "evil.m").write_text("function mpc = evil\nmpc.baseMVA = 100;\n")
    _load(_plant(w / "run", _stored(LDR, problem={"name": "dcopf", "case": "../" * 12 + str(w / "evil")[1:], "uncertainty": 0.1}),
                 probe=_probe()))


@attack("checkpoint", "problem.path naming a file to read", pattern="does not choose the files this process reads")
def _(w):
    _load(_plant(w / "run", _stored(PROPOSED, problem={"name": "linear", "path": "/etc/hostname"}), probe=_probe()))


for _name, _top, _pattern in (
    ("threads=100000 (segfaulted)", {"threads": 100000}, r"threads must be in \[1, 1024\]"),
    ("threads=-3 (loaded)", {"threads": -3}, r"threads must be in \[1, 1024\]"),
    ("network.hidden=10**7 (allocator error)", {"network": {"hidden": 10**7, "layers": 2}}, r"network.hidden must be in"),
    ("a network beyond the free memory", {"network": {"hidden": 65536, "layers": 255}}, r"network.hidden=65536 .*needs about"),
):
    ATTACKS.append(Attack("checkpoint", _name, (lambda top: lambda w: _load_unchecked(_plant(w / "run", _stored(LDR, **top))))(_top),
                          "reject", _pattern))


@attack("checkpoint", "method.refine_eval_steps=10**9 (hung)", pattern=r"refine_eval_steps must be in \[1, 100000\]")
def _(w):
    _load(_plant(w / "run", _stored({**PROPOSED, "refine": "dr", "refine_eval_steps": 10**9})))


@attack("checkpoint", "an option the method does not declare", pattern="method has no option 'log_file'")
def _(w):
    _load(_plant(w / "run", _stored({**PROPOSED, "log_file": str(w / "x")}), probe=_probe()))


for _name, _overrides, _pattern in (
    ("a solver option that writes a log", ["method=optimizer", "+method.log_file=/tmp/highs.log"], "has no option 'log_file'"),
    ("pinet bwd_tol=nan (recorded ok)", ["method=pinet", "method.bwd_tol=nan"], "bwd_tol must be a finite number"),
    ("a constructor-only check (refine_pick without refine)", ["method=proposed", "method.refine_pick=objective"], "refine_pick=objective"),
    ("fsnet unrolled > max_iter (a started run)", ["method=fsnet", "method.unrolled=100", "method.max_iter=50"], "unrolled must be in"),
    ("threads=100000", ["threads=100000"], r"threads must be in \[1, 1024\]"),
    ("network.hidden=10**7", ["network.hidden=10000000"], "network.hidden must be in"),
):
    ATTACKS.append(Attack("config", _name, (lambda o: lambda w: _validate("problem=dcopf_14", *o))(_overrides), "reject", _pattern))


@attack("config", "trainer.resume with a method that trains nothing (ignored, ok)", pattern="trains nothing here")
def _(w):
    from hydra import compose, initialize_config_dir

    from hardlinear.harness import runner

    (w / "earlier").mkdir()
    (w / "earlier" / "last.pt").write_bytes(b"")
    overrides = ["problem=dcopf_14", "method=ldr", "trainer=fast", "progress=false", f"trainer.resume={w / 'earlier'}",
                 f"cache_dir={w / 'cache'}", f"results_dir={w / 'results'}"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    runner.run(cfg, w / "run")


for _name, _args, _pattern in (
    ("method=nonexistent (run.py)", ["method=nonexistent"], r"^error: method='nonexistent' is not an option of conf/method/; choose one of"),
    ("problem=nonexistent (run.py)", ["problem=nonexistent"], r"^error: problem='nonexistent' is not an option of conf/problem/"),
    ("+experiment=../x (run.py)", ["+experiment=../x"], r"^error: experiment='../x' is not an option of conf/experiment/"),
    ("study with non-ASCII (run.py)", ["study=caf\u00e9"], r"^error: study='caf\u00e9': a study name is one folder name"),
    ("study with a newline (run.py)", ["study=a\nb"], r"^error: study='a\\nb': a study name is one folder name"),
    ("threads=100000 (run.py: segfaulted)", ["threads=100000"], r"^error: threads must be in \[1, 1024\]; got 100000"),
):
    ATTACKS.append(Attack("config", _name, (lambda a: lambda w: _cli(["run.py", "problem=dcopf_14", *a, f"hydra.run.dir={w / 'run'}"]))(_args),
                          "reject", _pattern, slow=True))


for _name, _change, _pattern in (
    ("c as strings", {"c": np.array(["1", "2"])}, "c must be a real numeric array; it holds text"),
    ("c complex (recorded ok)", {"c": np.array([1 + 1j, 1.0])}, "c must be a real numeric array; it is complex"),
    ("an entry of 1e300 in H", {"H": np.array([[1e300, 1.0], [-1.0, 0.0], [0.0, -1.0]])}, r"H has 1 entries of magnitude above 1e\+150"),
    ("an entry of 1e-300 in H", {"H": np.array([[1.0, 1e-300], [-1.0, 0.0], [0.0, -1.0]])}, r"H has 1 entries of magnitude non-zero and below"),
    ("an entry of 1e300 in h0", {"h0": np.array([1e300, 0.0, 0.0])}, r"h0 has 1 entries of magnitude above"),
):
    ATTACKS.append(Attack("npz problem file", _name, (lambda c: lambda w: _build(_problem_file(w, **c)))(_change), "reject", _pattern))


def _layer_constraints(**kw):
    from hardlinear import LinearConstraints

    args = {"H": np.vstack([np.eye(2), -np.eye(2)]), "h": (np.ones(4), np.zeros((4, 1))), **kw}
    return LinearConstraints(np.zeros(1), np.ones(1), **args)


def _raises(theta):
    raise ZeroDivisionError("a bug in the user's function")


for _name, _kw, _pattern in (
    ("LinearConstraints with n = 0 (accepted)", {"H": np.zeros((2, 0)), "h": np.ones(2)}, "0 columns"),
    ("LinearConstraints with a callable H that raises", {"H": _raises, "h": np.ones(2)}, r"H\(theta\) raised ZeroDivisionError"),
    ("LinearConstraints with 1e300 in H", {"H": np.array([[1e300, 0.0], [0.0, 1.0]]), "h": np.ones(2)}, "magnitude above"),
    ("LinearConstraints with 1e-300 in H", {"H": np.array([[1e-300, 1.0], [0.0, 1.0]]), "h": np.ones(2)}, "non-zero and below"),
):
    ATTACKS.append(Attack("layer call", _name, (lambda kw: lambda w: _layer_constraints(**kw))(_kw), "reject", _pattern))


@attack("layer call", "feasibility_layer with cache_dir a file", pattern="cannot hold the rule cache")
def _(w):
    from hardlinear import feasibility_layer

    (w / "f").write_text("x")
    feasibility_layer(_layer_constraints(), cache_dir=w / "f", progress=False)


@attack("layer call", "feasibility_layer with cache_dir under /proc", pattern="cannot hold the rule cache")
def _(w):
    from hardlinear import feasibility_layer

    feasibility_layer(_layer_constraints(), cache_dir="/proc/hardlinear-cache", progress=False)


@attack("layer call", "a folder where the rule cache file goes", pattern="a folder sits where the rule's cache file goes")
def _(w):
    from hardlinear import feasibility_layer

    feasibility_layer(_layer_constraints(), cache_dir=w, progress=False)
    for cached in (w / "decision_rules").glob("*.rule"):
        cached.unlink()
        cached.mkdir()
    feasibility_layer(_layer_constraints(), cache_dir=w, progress=False)


@attack("evaluate.py", "--out under a file", pattern="--out .* cannot be created: .* is a file", slow=True)
def _(w):
    (w / "f").write_text("x")
    _cli(["evaluate.py", str(_finished_run(w)), "--out", str(w / "f" / "sub"), "--test-size", "3"])


@attack("evaluate.py", "--out under /proc", pattern="--out /proc/x cannot be written", slow=True)
def _(w):
    _cli(["evaluate.py", str(_finished_run(w)), "--out", "/proc/x", "--test-size", "3"])


@attack("evaluate.py", "--test-size 1000000000", pattern=r"--test-size must be in \[1, 10,000,000\]", slow=True)
def _(w):
    _cli(["evaluate.py", str(_finished_run(w)), "--test-size", "1000000000"])


@attack("evaluate.py", "--inputs outside the box", pattern="outside the input box", slow=True)
def _(w):
    np.save(w / "x.npy", np.full((2, 14), 1e3))
    _cli(["evaluate.py", str(_finished_run(w)), "--inputs", str(w / "x.npy"), "--out", str(w / "o")])


@attack("results root", "two sweeps forced into one folder (8 of 8 ok, exit 0)", pattern=r"run\(s\) of this sweep failed", slow=True)
def _(w):
    sweep = ["run.py", "-m", "problem=dcopf_14", "method=penalty", "trainer=fast", "progress=false", "data.val_size=8",
             "data.test_size=8", "eval.throughput_batch=64", "seed=0,1", f"results_dir={w}", f"cache_dir={w / 'cache'}",
             f"hydra.sweep.dir={w / 'multirun'}"]
    _cli(sweep)
    _cli([*sweep, "rerun=true"])  # every job finds the first sweep's record in its directory



# --- issue 59: a results folder is data (file names, FIFOs, links, W&B links, control characters) ---------------------
STUDY_ROW = {"objective": "lp", "form": "standard", "method": "ldr", "variant": "", "seed": 0, "timestamp": "2026-01-01T00:00:00Z",
             "test/gap_mean": 1.0, "test/gap_worst": 2.0, "test/eq_viol_mean": 0.0, "test/eq_viol_worst": 0.0,
             "test/ineq_viol_mean": 0.0, "test/ineq_viol_worst": 0.0, "test/time_ms": 0.5}


def _study_record(root: Path, name: str, **row) -> Path:
    """A record of study ``s`` that the figures draw (its checksum computed by the writer, as anyone can)."""
    from hardlinear.harness import results

    return results.write_record(root / name, {"identity": name, "study": "s", "status": "ok", "config": {"seed": 0},
                                              "row": {**STUDY_ROW, "problem": "p", **row}})


def _command(name: str, *args: str) -> str:
    """``hardlinear <name> ARGS`` in this process: its stdout, or :class:`CLIRefused` with its stderr (exit code not 0)."""
    import contextlib
    import importlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = importlib.import_module(f"hardlinear.commands.{name}").main(list(args))
        except SystemExit as exit_:  # Hydra's own error path exits
            code = exit_.code if exit_.code is not None else 0
    if code:
        raise CLIRefused(err.getvalue() or out.getvalue())
    return out.getvalue()


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def _no_writes_outside(w: Path, victim: Path, out: Path, what: str) -> None:
    """``Verdict("security")`` when a file appeared in ``victim``; ``silent`` when the good record drew nothing."""
    if _files_under(victim):
        raise Verdict("security", f"{what} wrote {_files_under(victim)[:3]} into {victim}")
    if not any(n.endswith(("_gap_time.png", "index.html")) for n in _files_under(out)):
        raise Verdict("silent", f"nothing drawn for the good record in {out}: {_files_under(out)[:5]}")


def _field_attack(field: str, value: str, command: str):
    def run(w: Path) -> None:
        victim = w / "victim"
        victim.mkdir()
        _study_record(w / "res", "good", problem="good")
        _study_record(w / "res", "bad", **{field: value.replace("<victim>", str(victim / "x"))})
        formats = ("--formats", "png") if command == "figures" else ()
        _command(command, "--results", str(w / "res"), "--out", str(w / "out"), "--study", "s", *formats)
        _no_writes_outside(w, victim, w / "out", f"a record's {field}")

    return run


for _field, _value, _cmd in (("problem", "<victim>", "figures"), ("problem", "<victim>", "report"),
                             ("problem", "../../../victim/x", "figures"), ("objective", "../../victim/x", "report"),
                             ("form", "/x/../../victim/y", "figures")):
    ATTACKS.append(Attack("results root", f"record {_field}={_value.replace('<victim>', '/abs/dir/x')} ({_cmd})",
                          _field_attack(_field, _value, _cmd), "handle", slow=(_field, _cmd) != ("problem", "figures")))


@attack("results root", "legacy CSV row whose problem is a path (figures)", expect="handle", slow=True)
def _(w):
    victim = w / "victim"
    victim.mkdir()
    _study_record(w / "res", "good", problem="good")
    header = ["problem", *STUDY_ROW, "status", "study", "run_dir"]
    row = {**STUDY_ROW, "problem": str(victim / "x"), "status": "ok", "study": "s", "run_dir": ""}
    (w / "legacy").mkdir()
    (w / "legacy" / "runs.csv").write_text(",".join(header) + "\n" + ",".join(str(row[h]) for h in header) + "\n")
    _command("figures", "--results", str(w / "res"), str(w / "legacy" / "runs.csv"), "--out", str(w / "out"), "--study", "s",
             "--formats", "png")
    _no_writes_outside(w, victim, w / "out", "a legacy CSV row's problem")


@attack("results root", "method named $\\frac{$ (figures of the study)", expect="handle")
def _(w):
    _study_record(w / "res", "good", problem="good")
    _study_record(w / "res", "bad", problem="good", method="$\\frac{$", seed=1)
    _command("figures", "--results", str(w / "res"), "--out", str(w / "out"), "--study", "s", "--formats", "png")
    if not (w / "out" / "s" / "good_lp_gap_time.png").is_file():
        raise Verdict("silent", f"the study's figure was not drawn: {_files_under(w / 'out')}")


def _with_timeout(fn: Callable[[], Any], unblock: Callable[[], None], seconds: float = 60.0) -> Any:
    """``fn()`` in a thread; ``Verdict("silent")`` when it is still running after ``seconds`` (then ``unblock()``)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed back to the caller
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        unblock()
        thread.join(10)
        raise Verdict("silent", f"still waiting after {seconds:g} s (blocked on a FIFO)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _open_fifos(fifos: list[Path]) -> Callable[[], None]:
    def unblock() -> None:  # a writer that closes at once: a reader blocked in open() gets end of file
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    return unblock


def _blocking_entry(where: str, kind: str):
    """The report of a study whose run directory holds ``where`` (``epochs.csv``, a W&B log) as a FIFO or a link
    to /dev/zero: handled when the page is written within a minute."""

    def run(w: Path) -> None:
        record = _study_record(w / "res", "good", problem="good")
        target = record.parent / where
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "FIFO":
            os.mkfifo(target)
        else:
            os.symlink("/dev/zero", target)
        fifos = [target] if kind == "FIFO" else []
        _with_timeout(lambda: _command("report", "--results", str(w / "res"), "--out", str(w / "out"), "--study", "s"),
                      _open_fifos(fifos))
        if not (w / "out" / "s" / "index.html").is_file():
            raise Verdict("silent", "no page written")

    return run


for _where in ("epochs.csv", "wandb/offline-run-20260101_000000-abc/logs/debug.log",
               "wandb/offline-run-20260101_000000-abc/files/output.log"):
    for _kind in ("FIFO", "link to /dev/zero"):
        ATTACKS.append(Attack("results root", f"{_where.split('/')[-1]} a {_kind} (report)", _blocking_entry(_where, _kind), "handle",
                              slow=_kind != "FIFO" or _where.endswith("output.log")))


@attack("results root", "legacy CSV whose run_dir holds a FIFO epochs.csv (figures)", expect="handle")
def _(w):
    run_dir = w / "run"
    run_dir.mkdir()
    os.mkfifo(run_dir / "epochs.csv")
    header = ["problem", *STUDY_ROW, "status", "study", "run_dir"]
    row = {**STUDY_ROW, "problem": "good", "status": "ok", "study": "s", "run_dir": str(run_dir)}
    (w / "legacy").mkdir()
    (w / "legacy" / "runs.csv").write_text(",".join(header) + "\n" + ",".join(str(row[h]) for h in header) + "\n")
    _with_timeout(lambda: _command("figures", "--results", str(w / "legacy" / "runs.csv"), "--out", str(w / "out"),
                                   "--study", "s", "--formats", "png"), _open_fifos([run_dir / "epochs.csv"]))


@attack("results root", "epochs.csv a link out of the run directory (figures)", expect="handle")
def _(w):
    record = _study_record(w / "res", "good", problem="good")
    (w / "elsewhere.csv").write_text("epoch,val/gap_mean\n1,123456.5\n2,123457.5\n")
    os.symlink(w / "elsewhere.csv", record.parent / "epochs.csv")
    _command("figures", "--results", str(w / "res"), "--out", str(w / "out"), "--study", "s", "--formats", "png")
    if (w / "out" / "s" / "good_lp_training.png").exists():
        raise Verdict("security", "a link out of the run directory was read as its epochs.csv")


@attack("results root", "W&B log naming a run on another host (report)", expect="handle")
def _(w):
    record = _study_record(w / "res", "good", problem="good")
    logs = record.parent / "wandb" / "offline-run-20260101_000000-abc" / "logs"
    logs.mkdir(parents=True)
    (logs / "debug.log").write_text("View run at https://evil.example/x/y/runs/abc\n")
    _command("report", "--results", str(w / "res"), "--out", str(w / "out"), "--study", "s")
    if "evil.example" in (w / "out" / "s" / "index.html").read_text():
        raise Verdict("silent", "a log line's URL on another host became the run's W&B link")


@attack("results root", "a method name with terminal escapes (report)", expect="handle")
def _(w):
    _study_record(w / "res", "good", problem="good", method="ldr\x1b]0;owned\x07\x1b[2J")
    printed = _command("report", "--results", str(w / "res"), "--out", str(w / "out"), "--study", "s")
    page = (w / "out" / "s" / "index.html").read_text()
    if "\x1b" in printed or "\x1b" in page:
        raise Verdict("silent", "an escape sequence from a record reached the terminal or the page")


for _name, _out, _pattern in (
    ("--out /dev/null", "/dev/null", r"^error: --out /dev/null is a file, not a folder"),
    ("--out a file", "<file>", r"^error: --out .* is a file, not a folder"),
    ("--out under /proc", "/proc", r"^error: --out /proc cannot be written"),
):
    for _cmd in ("tables", "figures", "report"):
        def _out_attack(w, out=_out, cmd=_cmd):
            _study_record(w / "res", "good", problem="good")
            (w / "file").write_text("mine")
            _command(cmd, "--results", str(w / "res"), "--out", out.replace("<file>", str(w / "file")), "--study", "s")

        ATTACKS.append(Attack("results root", f"{_name} ({_cmd})", _out_attack, "reject", _pattern))


@attack("results root", "report killed by SIGTERM leaves no temporary folder", expect="handle", slow=True)
def _(w):
    _study_record(w / "res", "good", problem="good")
    code = ("import os, signal, sys, hardlinear.reporting.figures as f\n"
            "real = f.study_figures\n"
            "def study_figures(*a, **k):\n    out = real(*a, **k)\n    os.kill(os.getpid(), signal.SIGTERM)\n    return out\n"
            "f.study_figures = study_figures\n"
            "from hardlinear.commands.report import main\n"
            f"sys.exit(main(['--results', {str(w / 'res')!r}, '--out', {str(w / 'out')!r}, '--study', 's']))\n")
    env = {**_env(), "TMPDIR": str(w / "tmp")}
    (w / "tmp").mkdir()
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    left = _files_under(w / "tmp") + [n for n in _files_under(w / "out") if "partial" in n]
    if left:
        raise Verdict("silent", f"a killed report left {left[:3]}")


@attack("npz problem file", "ineq_names with terminal escape sequences", expect="handle")
def _(w):
    problem = _build(_problem_file(w, ineq_names=np.array(["a\x1b[2J\x1b]0;owned\x07", "b\rc", "d"])))
    if any(c in "".join(problem.ineq_names) for c in "\x1b\x07\r"):
        raise Verdict("silent", f"control characters kept in the names: {problem.ineq_names!r}")


# --- issue 59: a config folder runs only what it declares --------------------------------------------------------
def _evil_experiment(w: Path, hydra_yaml: str) -> Path:
    conf = w / "myconf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "evil.yaml").write_text("# @package _global_\n" + hydra_yaml.replace("<victim>", str(w / "victim")))
    return conf


def _run_evil(w: Path, conf: Path, *extra: str) -> None:
    try:
        _command("run", "--config-dir", str(conf), "+experiment=evil", "problem=dcopf_14", "method=ldr", "trainer=fast",
                 "progress=false", "data.val_size=8", "data.test_size=8", f"results_dir={w / 'res'}",
                 f"cache_dir={w / 'cache'}", f"hydra.run.dir={w / 'run'}", *extra)
    finally:
        if (w / "victim").exists():
            raise Verdict("security", "a config folder's hydra section ran os.makedirs")


for _name, _yaml in (
    ("hydra.callbacks naming os.makedirs", "hydra:\n  callbacks:\n    e:\n      _target_: os.makedirs\n      name: <victim>\n"),
    ("a nested _target_ in a hardlinear callback's options",
     "hydra:\n  callbacks:\n    progress:\n      _target_: hardlinear.harness.sweep.SweepProgress\n"
     "      x:\n        _target_: os.makedirs\n        name: <victim>\n"),
):
    ATTACKS.append(Attack("config", f"{_name} (config folder)", (lambda y: lambda w: _run_evil(w, _evil_experiment(w, y)))(_yaml),
                          "reject", slow="nested" in _name, pattern= r"^error: hydra\.callbacks\.\S+\._target_ 'os\.makedirs' is not a hardlinear callback.*HARDLINEAR_ALLOW_CALLBACKS"))


@attack("config", "+hydra.callbacks.e._target_=os.makedirs on the command line", pattern=r"^error: hydra\.callbacks\.e\._target_ 'os\.makedirs' is not a hardlinear callback")
def _(w):
    try:
        _command("run", "problem=dcopf_14", "method=ldr", "trainer=fast", "progress=false", f"hydra.run.dir={w / 'run'}",
                 f"results_dir={w / 'res'}", f"cache_dir={w / 'cache'}", "+hydra.callbacks.e._target_=os.makedirs",
                 f"+hydra.callbacks.e.name={w / 'victim'}")
    finally:
        if (w / "victim").exists():
            raise Verdict("security", "a command-line hydra.callbacks entry ran os.makedirs")


@attack("config", "hydra.launcher naming os.getcwd (config folder)", pattern=r"^error: hydra\.launcher\._target_ 'os\.getcwd' is not a Hydra launcher")
def _(w):
    _run_evil(w, _evil_experiment(w, "hydra:\n  launcher:\n    _target_: os.getcwd\n"), "-m")


# --- issue 59: resume checks identity --------------------------------------------------------------------------------
TRAINED = ["problem=dcopf_14", "method=penalty", "trainer=fast", "trainer.epochs=2", "trainer.val_every=1", "progress=false",
           "data.val_size=5", "data.test_size=5", "eval.throughput_batch=8", "eval.warmup=0", "eval.time_instances=2"]


def _trained_run() -> Path:
    """One dcopf_14 run of the penalty method, 2 epochs, with its ``last.pt`` (made once per process, seconds)."""
    if "trained" not in _RUN:
        work = Path(tempfile.mkdtemp(prefix="attack-trained-"))
        _run_config(work, "run", *TRAINED)
        _RUN["trained"] = work / "run"
    return _RUN["trained"]


def _run_config(work: Path, name: str, *overrides: str) -> Any:
    from hydra import compose, initialize_config_dir

    from hardlinear.harness import runner

    overrides = (*overrides, f"cache_dir={work / 'cache'}", f"results_dir={work / 'results'}")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return runner.run(cfg, work / name)


@attack("config", "seed=5 trainer.resume=<a seed-0 run> (recorded ok as seed 5)", pattern=r"trainer.resume=.*differs from this one in seed 0 there, 5 here")
def _(w):
    _run_config(w, "resumed", *TRAINED, "seed=5", "trainer.epochs=3", f"trainer.resume={_trained_run()}")


@attack("config", "trainer.resume with other method options", slow=True, pattern=r"differs from this one in method.penalty ")
def _(w):
    _run_config(w, "resumed", *TRAINED, "method.penalty=7", "trainer.epochs=3", f"trainer.resume={_trained_run()}")


def _edited_last(w: Path, **state) -> Path:
    import torch

    copy = w / "earlier"
    shutil.copytree(_trained_run(), copy)
    payload = torch.load(copy / "last.pt", weights_only=True)
    payload["state"].update(state)
    torch.save(payload, copy / "last.pt")
    return copy


for _name, _state, _pattern in (
    ("last.pt with epoch=-1 (ran 14 epochs of 8)", {"epoch": -1}, r"impossible training state \(epoch=-1"),
    ("last.pt with epoch 'x'", {"epoch": "x"}, r"impossible training state \(epoch is str"),
    ("last.pt with time_s=-inf", {"time_s": float("-inf")}, r"impossible training state \(time_s=-inf"),
):
    ATTACKS.append(Attack("checkpoint", _name, (lambda st: lambda w: _run_config(
        w, "resumed", *TRAINED, "trainer.epochs=3", f"trainer.resume={_edited_last(w, **st)}"))(_state), "reject", _pattern,
        slow="epoch=-1" not in _name))


# --- issue 59: memory and threads checked against what this process may use, before allocation ---------------------
class _MemoryCap:
    """``RLIMIT_AS`` of this process lowered to what it has mapped plus ``room`` bytes for the block (restored after):
    the memory checks must see it, and an allocation they let through fails at once instead of filling the machine."""

    def __init__(self, room: int = 3 * 2**30) -> None:
        self.room = room

    def __enter__(self):
        import resource

        self.saved = resource.getrlimit(resource.RLIMIT_AS)
        mapped = next(int(line.split()[1]) * 1024 for line in Path("/proc/self/status").read_text().splitlines()
                      if line.startswith("VmSize:"))
        hard = self.saved[1]
        cap = mapped + self.room if hard == resource.RLIM_INFINITY else min(mapped + self.room, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        return self

    def __exit__(self, *exc) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, self.saved)


for _name, _network in (
    ("network.hidden=65536 from a small checkpoint (17 GB)", {"hidden": 65536, "layers": 2}),
    ("network.hidden=4096, layers=200 (13 GB)", {"hidden": 4096, "layers": 200}),
):
    def _capped_load(w, network=_network):
        with _MemoryCap():
            _load_unchecked(_plant(w / "run", _stored(PROPOSED, network=network)))

    ATTACKS.append(Attack("checkpoint", f"{_name} under ulimit -v", _capped_load, "reject",
                          r"network.hidden=\d+ with network.layers=\d+ needs about .* may be used .*RLIMIT_AS"))


@attack("checkpoint", "eval.throughput_batch=10**9 in a checkpoint (a 112 GB allocation on evaluate)", slow=True,
        pattern=r"eval.throughput_batch=1000000000 needs about .* may be used")
def _(w):
    import torch

    from hardlinear.harness.reevaluate import evaluate_run

    copy = w / "run"
    shutil.copytree(_finished_run(w), copy)
    payload = torch.load(copy / "checkpoint.pt", weights_only=True)
    payload["config"]["eval"]["throughput_batch"] = 10**9
    torch.save(payload, copy / "checkpoint.pt")
    with _MemoryCap():
        evaluate_run(copy, out_dir=w / "o", test_size=3)


def _bomb(path: Path, member: str, shape: tuple[int, ...], extra: dict | None = None) -> Path:
    """An npz whose ``member`` declares ``shape`` (float64) in its header over a few bytes of data: what a zip bomb
    of zeros declares, without writing gigabytes to make one."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{member}.npy", header.getvalue() + bytes(4096))
        for key, value in (extra or {}).items():
            buf = io.BytesIO()
            np.save(buf, value)
            archive.writestr(f"{key}.npy", buf.getvalue())
    return path


@attack("npz problem file", "a zip bomb: c declaring 50,000 x 50,000 (20 GB)", pattern=r"declares 20 GB of arrays \(c: shape \(50000, 50000\)")
def _(w):
    with _MemoryCap():
        _build(_bomb(w / "bomb.npz", "c", (50_000, 50_000), {"lo": np.zeros(1), "hi": np.ones(1)}))


@attack("inputs file", "a zip bomb: xi declaring 10**9 x 3 (24 GB)", pattern=r"declares 24 GB of arrays \(xi: shape")
def _(w):
    with _MemoryCap():
        _inputs(_bomb(w / "bomb.npz", "xi", (10**9, 3)))


def _pids_cgroup() -> Path | None:
    """A child of the pids cgroup (v1 or v2) this process may make (root in a container), or None."""
    for base in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
        if (base / "cgroup.procs").exists() and os.access(base, os.W_OK) and (base != Path("/sys/fs/cgroup") or (base / "cgroup.subtree_control").exists()):
            return base
    return None


if _pids_cgroup() is not None:
    @attack("config", "threads=1024 where 250 threads may start (segfaulted or hung; run.py)", slow=True,
            pattern=r"^error: threads=1024 needs about \d+ threads .* may start only \d+ more .*set threads to at most")
    def _(w):
        group = _pids_cgroup() / f"hardlinear-attack-{os.getpid()}"
        group.mkdir()
        try:
            (group / "pids.max").write_text("250")

            def enter() -> None:
                (group / "cgroup.procs").write_text(str(os.getpid()))

            out = subprocess.run([sys.executable, "run.py", "problem=dcopf_14", "method=ldr", "trainer=fast", "threads=1024",
                                  "progress=false", f"hydra.run.dir={w / 'run'}", f"results_dir={w / 'res'}",
                                  f"cache_dir={w / 'cache'}"], preexec_fn=enter, capture_output=True, text=True, env=_env(),
                                 timeout=120, cwd=ROOT)
        finally:
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:
                    import time

                    time.sleep(0.1)
        if out.returncode != 0:
            raise CLIRefused(out.stderr or out.stdout)


# --- issue 59: no method returns NaN silently -------------------------------------------------------------------------
@attack("layer call", "E2ELR given NaN network outputs (a NaN dispatch, the run went on)", expect="handle", slow=True)
def _(w):
    import torch

    from hardlinear.evaluation.protocol import EvalConfig, divergence_reason, evaluate_method
    from hardlinear.harness.runner import done_line
    from hardlinear.methods.base import Context
    from hardlinear.methods.e2elr import E2ELR
    from hardlinear.problems import build_problem
    from hardlinear.problems.datasets import Dataset
    from hardlinear.reporting.study_table import build_study_table
    from hardlinear.train.trainer import TrainerConfig

    problem = build_problem("ed", case="pglib_opf_case14_ieee")
    method = E2ELR()
    ctx = Context(cache_dir=None, dtype=torch.float64)
    method.setup(problem, ctx)
    with torch.no_grad():
        last = [m for m in method.net.modules() if isinstance(m, torch.nn.Linear)][-1]
        last.bias[0] = float("nan")
    xi = problem.sample(6, torch.Generator().manual_seed(0))
    test = Dataset(xi=xi, y=torch.zeros(6, problem.n, dtype=torch.float64), objective=torch.ones(6, dtype=torch.float64),
                   solve_time_s=np.zeros(6), solver="none")
    metrics = evaluate_method(method, problem, test, ctx, EvalConfig(warmup=0, time_instances=1, throughput_batch=0))
    if metrics.get("test/nonfinite") != 6.0:
        raise Verdict("silent", f"non-finite outputs not counted: test/nonfinite={metrics.get('test/nonfinite')}")
    reason = divergence_reason(metrics, EvalConfig()) or ""
    line = done_line("ed/e2elr", {**metrics, "test/time_ms": 0.1}, TrainerConfig(), "fast", trainable=False)
    if "non-finite outputs" not in reason or "non-finite outputs" not in line:
        raise Verdict("silent", f"not flagged: reason {reason!r}; done line {line!r}")
    import pandas as pd

    row = {"problem": "ed", "objective": "lp", "form": "standard", "uncertainty": "", "method": "e2elr", "variant": "",
           "seed": 0, "status": "ok", "timestamp": "t", "config_hash": "c", "reason": "", "study": "s",
           **{k: v for k, v in metrics.items()}}
    table, _ = build_study_table(pd.DataFrame([row]), "s")
    cells = [c.text for block in table.blocks for r in block.rows for c in r]
    notes = " ".join(n for block in table.blocks for n in block.notes)
    if "NO" not in cells or "non-finite outputs" not in notes:
        raise Verdict("silent", f"the table does not flag it: {cells} {notes!r}")


@attack("layer call", "a prediction with NaN rows (counted and flagged)", expect="handle")
def _(w):
    import torch

    from hardlinear.evaluation.metrics import evaluate, infeasibility
    from hardlinear.evaluation.protocol import EvalConfig, divergence_reason

    problem = _build(_problem_file(w))
    xi = torch.full((4, 1), 0.5, dtype=torch.float64)
    y = torch.ones(4, 2, dtype=torch.float64)
    y[1, 0] = float("nan")
    y[3, 1] = float("inf")
    metrics = evaluate(problem, xi, y, torch.ones(4, dtype=torch.float64))
    if metrics.get("test/nonfinite") != 2.0:
        raise Verdict("silent", f"non-finite outputs not counted: {metrics.get('test/nonfinite')}")
    if "on 2 test instances" not in (divergence_reason(metrics, EvalConfig()) or "") or "non-finite" not in infeasibility(metrics):
        raise Verdict("silent", "not flagged in the divergence reason or the done line's flag")


@attack("layer call", "inputs outside the box (an infeasible output without a word)", expect="handle")
def _(w):
    import torch

    from hardlinear import feasibility_layer

    layer = feasibility_layer(_layer_constraints(), progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            layer(torch.full((2, 1), 5.0, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64))
    said = [str(c.message) for c in caught if "outside the box" in str(c.message)]
    if len(said) != 1:
        raise Verdict("silent", f"{len(said)} warnings about inputs outside the box over 3 calls (wanted 1)")


if shutil.which("make"):
    @attack("results root", "make report STUDY='a b; touch X' (the Makefile did not quote)", expect="handle")
    def _(w):
        import shlex

        study, out = f"a b; touch {w / 'X'}", str(w / "o u t")
        done = subprocess.run(["make", "-n", "--no-print-directory", "report", f"STUDY={study}", f"OUT={out}",
                               "WHERE=seed=0 trainer.name=it's", f"VENV={w / 'venv'}"], capture_output=True, text=True, cwd=ROOT,
                              timeout=60)
        line = next((ln for ln in done.stdout.splitlines() if "make_report.py" in ln), "")
        try:
            args = shlex.split(line)
        except ValueError as err:  # an unbalanced quote: the shell would fail or run something else
            raise Verdict("corrupts", f"the shell cannot split {line!r} ({err})") from None
        wanted = ["--study", study]
        if not any(args[i:i + 2] == wanted for i in range(len(args))) or args[-2:] != ["--out", out] or "trainer.name=it's" not in args:
            raise Verdict("corrupts", f"the shell would see {args[2:]} (from {line!r})")


# --- the table ------------------------------------------------------------------------------------------------------
def run_all(fast: bool = False, verbose: bool = False) -> dict[str, Counter]:
    table: dict[str, Counter] = defaultdict(Counter)
    for a in ATTACKS:
        if fast and a.slow:
            continue
        with tempfile.TemporaryDirectory(prefix="attack-") as tmp:
            outcome, message = classify(a, Path(tmp))
        table[a.surface][outcome] += 1
        if verbose or outcome in BAD_OUTCOMES:
            print(f"{outcome:9s} {a.surface} / {a.name}: {message}", file=sys.stderr)
    return table


def markdown(table: dict[str, Counter]) -> str:
    lines = ["| surface | tried | " + " | ".join(OUTCOMES) + " |", "|---|---:|" + "---:|" * len(OUTCOMES)]
    total: Counter = Counter()
    for surface, counts in table.items():
        total.update(counts)
        lines.append(f"| {surface} | {sum(counts.values())} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + " |")
    lines.append(f"| **all** | {sum(total.values())} | " + " | ".join(str(total[o]) for o in OUTCOMES) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help="in-process attacks only (no subprocess CLIs)")
    parser.add_argument("--verbose", action="store_true", help="one line per attack with its message")
    args = parser.parse_args()
    table = run_all(fast=args.fast, verbose=args.verbose)
    print(markdown(table))
    bad = sum(c[o] for c in table.values() for o in BAD_OUTCOMES)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
