"""Make a results folder free of the paths of the machines that made it: each record's ``row.run_dir`` relative to
its results root, absolute ``results_dir``/``cache_dir`` config values rewritten, and absolute paths in logs and
tables shortened, with every record's checksum recomputed (its identity is left as it is).

    python scripts/maintainers/relocate_results.py results            # rewrite in place
    python scripts/maintainers/relocate_results.py results --check    # only list what would change (exit 1 if any)

Why: a results folder is data that is copied, shared and committed; since the record store writes ``run_dir``
relative to the results root (``hardlinear.harness.results.stored_run_dir``), older records are rewritten once by
this script. A path under a checkout of this repository (``<anything>/results/...``, ``<anything>/data/...``)
becomes relative to that checkout; any other absolute path under a scratch or home folder becomes
``<scratch>/<its last parts>``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from hardlinear.harness import results

MACHINE_PATH = re.compile(r"(?<![\w.~<>-])/(?:work|tmp|root|home|Users)/[^\s\"',;:)\]|]*")
"""An absolute path under a folder that belongs to one machine (what ``tests/test_committed_files.py`` refuses)."""
CHECKOUT_PARTS = ("results", "data", "src", "benchmarks", "scripts", "tests", "docs", "conf", ".venv")


def relocate_path(text: str) -> str:
    """One absolute machine path made portable: relative to the checkout it sat in, else ``<scratch>/...``."""
    parts = Path(text).parts[1:]
    for i, part in enumerate(parts):
        if part in CHECKOUT_PARTS and i >= 1:
            return "/".join(parts[i:])
    return "<scratch>/" + "/".join(parts[2:] if len(parts) > 2 else parts[1:])


def relocate_text(text: str) -> str:
    return MACHINE_PATH.sub(lambda m: relocate_path(m.group(0)), text)


def relocate_record(path: Path, body: dict, top: Path) -> dict:
    """The record with its machine paths rewritten (``run_dir`` relative to the results root it now lies under)."""
    config = json.loads(relocate_text(json.dumps(body["config"])))
    root = config.get("results_dir")
    if not isinstance(root, str) or root.startswith("<scratch>") or not path.parent.resolve().is_relative_to(Path(root).resolve()):
        root = top.as_posix()  # where the record lies now: its results root moved with it
        if isinstance(config.get("results_dir"), str) and config["results_dir"] != body["config"].get("results_dir"):
            config["results_dir"] = root
    new = {**body, "config": config, "row": {**body["row"], "run_dir": results.stored_run_dir(path.parent, root)}}
    new = json.loads(relocate_text(json.dumps(new)))
    new["checksum"] = results._checksum(new)
    return new


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path, help="a results folder (relative to the working directory)")
    parser.add_argument("--check", action="store_true", help="list the files that would change; change nothing")
    args = parser.parse_args()
    changed = []
    for path in sorted(p for p in args.root.rglob("*") if p.is_file() and not p.is_symlink()):
        raw = path.read_bytes()
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            continue
        if path.name == results.RECORD_FILE:
            body = results.read_record(path)
            new = relocate_record(path, body, args.root)
            out = json.dumps(new, indent=1, sort_keys=True, allow_nan=False) + "\n" if new != body else text
        else:
            out = relocate_text(text)
        if out != text:
            changed.append(path)
            if not args.check:
                path.write_text(out)
                if path.name == results.RECORD_FILE:
                    assert results.read_record(path)["identity"] == body["identity"]
    for path in changed:
        print(path)
    print(f"{len(changed)} file(s) {'would change' if args.check else 'rewritten'}", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
