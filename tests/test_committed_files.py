"""Committed files name no machine: no absolute path under a machine's own folders (``/work``, ``/root``, ``/home``,
``/Users``), and none under ``/tmp`` in the committed results. Why: records, logs, tables and captions are data
that others read on their machines; a path of the machine that made them is noise at best and a leak at worst
(records store ``run_dir`` relative to their results root; ``scripts/maintainers/relocate_results.py`` rewrote
the older ones). Code and docs may still name ``/tmp/...`` as an example or a hostile input."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MACHINE = re.compile(r"(?<![\w.~<>-])/(?:work|root|home|Users)/[\w.+-]")
SCRATCH = re.compile(r"(?<![\w.~<>-])/tmp/[\w.+-]")


def committed_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (an sdist): nothing is committed here to check")
    return [name for name in out.stdout.decode().split("\0") if name]


def machine_paths(name: str, text: str) -> list[str]:
    found = [m.group(0) for m in MACHINE.finditer(text)]
    if name.startswith("results/"):
        found += [m.group(0) for m in SCRATCH.finditer(text)]
    return found


def test_no_committed_file_names_a_machine_path():
    offenders = {}
    for name in committed_files():
        path = ROOT / name
        if path.is_symlink() or not path.is_file() or name == "tests/test_committed_files.py":
            continue
        try:
            text = path.read_bytes().decode()
        except UnicodeDecodeError:
            continue
        if hits := machine_paths(name, text):
            offenders[name] = hits[:2]
    listed = "\n".join(f"  {name}: {hits}" for name, hits in list(offenders.items())[:20])
    assert not offenders, (f"{len(offenders)} committed file(s) carry a machine's absolute path "
                           f"(python scripts/maintainers/relocate_results.py results rewrites records and logs):\n{listed}")


def test_the_check_sees_a_machine_path():
    assert machine_paths("results/x/record.json", '"run_dir": "' + '/' + 'work/main/results/x"') == ["/work/m"]
    assert machine_paths("results/x.log", "cache /tmp/i18b/cache") == ["/tmp/i"]
    assert machine_paths("docs/x.md", "results_dir=/tmp/ed_smoke") == []
