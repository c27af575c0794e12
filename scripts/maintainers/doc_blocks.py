"""The code blocks of the README and the docs pages, extracted so that a test (and CI's wheel check) runs them.

A fenced block's kind comes from an HTML comment on the line just above its fence (GitHub and MkDocs show
neither):

    <!-- block: core -->        runs with the library alone (`pip install hardlinear`, no extra)
    <!-- block: full -->        needs the extras (`make install`); the same as no comment
    <!-- block: after-run -->   needs a finished run under results/runs (the test makes one, trainer=fast)
    <!-- block: skip REASON --> shown, not run; the reason is required

``continued`` after the kind (``<!-- block: core continued -->``) runs the block after the one before it, in the
same interpreter, as a reader who ran both would. A python block without a comment is ``full``. ``python scripts/maintainers/doc_blocks.py README.md
--kind core`` runs the core blocks, each in a fresh interpreter in its own empty folder, with whatever Python
runs this script (CI calls it from a virtual environment holding the wheel alone). Standard library only.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

KINDS = ("core", "full", "after-run", "skip")
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!--\s*block:\s*(core|full|after-run|skip)\b\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    path: str
    line: int  # 1-based line of the opening fence
    lang: str
    kind: str  # one of KINDS
    code: str  # the block's own lines
    reason: str = ""  # why a skipped block is not run
    prelude: str = ""  # the code of the blocks it continues

    @property
    def program(self) -> str:
        """What runs: the blocks it continues, then its own lines."""
        return self.prelude + self.code

    @property
    def label(self) -> str:
        return f"{self.path}:{self.line}"


def extract(path: str | Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the kind its comment gives (``full`` without one)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        start, lang = i, opened.group(1)
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path}:{start + 1}: a code block is opened and never closed")
        above = lines[start - 1].strip() if start > 0 else ""
        mark = _MARK.match(above)
        kind, rest = (mark.group(1), mark.group(2)) if mark else ("full", "")
        if kind == "skip" and not rest:
            raise ValueError(f"{path}:{start + 1}: '<!-- block: skip -->' needs a reason after 'skip'")
        prelude = ""
        if kind != "skip" and rest:
            if rest != "continued":
                raise ValueError(f"{path}:{start + 1}: unknown block option {rest!r} (only 'continued')")
            before = [b for b in blocks if b.lang == lang]
            if not before:
                raise ValueError(f"{path}:{start + 1}: a 'continued' block needs a {lang} block before it")
            prelude = before[-1].program
        code = "\n".join(body) + "\n"
        blocks.append(Block(str(path), start + 1, lang, kind, code, rest if kind == "skip" else "", prelude))
        i += 1
    return blocks


def run_block(block: Block, cwd: Path, python: str = sys.executable, env: dict | None = None, timeout: float = 600):
    """Run a python block in a fresh interpreter in ``cwd``; returns the finished process (output captured)."""
    source = f"# {block.label}\n" + block.program
    return subprocess.run(
        [python, "-c", source], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="Markdown files")
    parser.add_argument("--kind", default="core", choices=KINDS[:-1], help="which python blocks to run")
    args = parser.parse_args(argv)
    blocks = [b for f in args.files for b in extract(f) if b.lang == "python" and b.kind == args.kind]
    if not blocks:
        print(f"no python block of kind {args.kind!r} in {args.files}", file=sys.stderr)
        return 1
    failed = 0
    for block in blocks:
        with tempfile.TemporaryDirectory(prefix="doc-block-") as work:
            began = time.perf_counter()
            done = run_block(block, Path(work))
            took = time.perf_counter() - began
        status = "ok" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
        print(f"{block.label}: {status} in {took:.1f} s", flush=True)
        if done.returncode != 0:
            failed += 1
            print(done.stdout + done.stderr, file=sys.stderr)
    print(f"{len(blocks) - failed} of {len(blocks)} {args.kind} blocks ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
