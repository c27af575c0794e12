"""Every code block of the README and of the docs pages listed here runs as written (scripts/maintainers/doc_blocks.py).

Python blocks run each in a fresh interpreter in an empty folder; a block marked ``after-run`` gets a folder
holding one finished run (``run.py trainer=fast``, as ``make run`` leaves one). Shell blocks are checked without
running them: each ``make`` target exists, each ``hardlinear`` command exists, and each ``python run.py`` (or
``hardlinear run``) line composes with Hydra (the first value of a sweep's list) with no unknown key.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/getting_started.md", "docs/own_problem.md", "docs/harness.md", "docs/gpu.md",
         "docs/results_dc3.md", "docs/results_dcopf.md", "docs/results_dispatch.md", "docs/results_speed.md"]


sys.path.insert(0, str(ROOT / "scripts" / "maintainers"))
try:
    import doc_blocks  # scripts/maintainers/ is not a package
finally:
    sys.path.pop(0)


def _blocks(lang: str):
    return [b for page in PAGES if (ROOT / page).exists() for b in doc_blocks.extract(ROOT / page) if b.lang == lang]


PYTHON_BLOCKS = [b for b in _blocks("python") if b.kind != "skip"]
SHELL_BLOCKS = _blocks("bash")


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> Path:
    """A folder holding one finished run of the default experiment, made as `make run` makes it (smaller)."""
    work = tmp_path_factory.mktemp("finished-run")
    overrides = ["trainer=fast", "progress=false", "data.val_size=20", "data.test_size=20",
                 "eval.throughput_batch=64", "eval.warmup=0", "eval.time_instances=2"]
    done = subprocess.run([sys.executable, str(ROOT / "run.py"), *overrides], cwd=work, env=_env(),
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return work


def test_the_readme_library_blocks_are_marked_core():
    """CI's wheel check runs the core blocks with the library alone: the README must have them."""
    core = [b for b in PYTHON_BLOCKS if b.path.endswith("README.md") and b.kind == "core"]
    assert len(core) >= 2, "the README's library section lost its '<!-- block: core -->' examples"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: f"{Path(b.path).name}:{b.line}")
def test_python_block_runs(block, tmp_path, request):
    if block.kind == "after-run":
        shutil.copytree(request.getfixturevalue("finished_run"), tmp_path, dirs_exist_ok=True)
    done = doc_blocks.run_block(block, tmp_path, env=_env(), timeout=600)
    assert done.returncode == 0, f"{block.label} fails as written:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


def _commands(block) -> list[list[str]]:
    """The block's commands as argument lists: comments dropped, continued lines joined."""
    text = re.sub(r"\\\n\s*", " ", block.code)
    out = []
    for line in text.splitlines():
        line = line.split(" #")[0].split("\t#")[0].strip()
        if line and not line.startswith("#"):
            out.append(shlex.split(line))
    return out


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))


def _composable(args: list[str]) -> list[str]:
    """run.py's arguments as Hydra compose overrides: Hydra's own and sweep-only ones dropped, lists cut to one."""
    out = []
    for arg in args:
        if arg in ("-m", "--multirun") or arg.startswith(("hydra", "--")) or arg == "...":
            continue
        key, _, value = arg.partition("=")
        out.append(f"{key}={value.split(',')[0]}" if "," in value and "[" not in value else arg)
    return out


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: f"{Path(b.path).name}:{b.line}")
def test_shell_block_commands_exist(block):
    from hydra import compose, initialize_config_dir

    from hardlinear.harness.overrides import unknown_override_errors

    targets = _make_targets()
    for argv in _commands(block):
        if argv[0] == "make":
            target = next((a for a in argv[1:] if "=" not in a), None)
            assert target is None or target in targets, f"{block.label}: `make {target}` is not a Makefile target"
        elif argv[0] == "hardlinear" and len(argv) > 1 and not argv[1].startswith("-"):
            from hardlinear.commands import COMMANDS

            assert argv[1] in COMMANDS, f"{block.label}: `hardlinear {argv[1]}` is not a command ({', '.join(COMMANDS)})"
        if argv[:2] in (["python", "run.py"], ["hardlinear", "run"]) and not any(
            "<" in a or a == "..." or a.startswith(("--config-dir", "-cd")) for a in argv
        ):
            overrides = _composable(argv[2:])
            assert unknown_override_errors(overrides, ROOT / "conf") == [], f"{block.label}: {shlex.join(argv)}"
            if "--help" in argv:
                continue
            with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
                compose(config_name="config", overrides=overrides)  # raises on an unknown group option
