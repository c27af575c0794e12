"""The docs read as results, not as a lab notebook: no internal issue number in a user-facing heading (docs/, the
benchmarks' pages, the README, and the generated tables the results pages include), and every table a page
includes (pymdownx.snippets, ``--8<-- "path[:lines|:section]"``) exists, with its section markers where it names one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "HISTORY.md",
                                                 ROOT / "README.md"]
ISSUE = re.compile(r"\bissues? \d+", re.IGNORECASE)
SNIPPET = re.compile(r'^\s*-{1,}8<-{1,}\s+"([^"]+)"\s*$', re.M)
FENCE = re.compile(r"^\s*(```|~~~)")


def headings(text: str) -> list[str]:
    """The Markdown (ATX) headings of a page, code fences skipped (a `# comment` in a shell block is no heading)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6}\s", line):
            out.append(line)
    return out


def issue_headings(text: str) -> list[str]:
    return [h for h in headings(text) if ISSUE.search(h)]


def test_issue_headings_are_found_and_code_comments_are_not():
    text = "# Title\n\n## Economic dispatch (issue 42): E2ELR\n\n```bash\n# the issue 42 pass\n```\n### Issue 21: fused\n"
    assert issue_headings(text) == ["## Economic dispatch (issue 42): E2ELR", "### Issue 21: fused"]
    assert issue_headings("## Where each wins\n\ntext citing issue 42\n") == []


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_number_in_a_heading(page):
    found = issue_headings(page.read_text(encoding="utf-8"))
    assert found == [], f"{page.relative_to(ROOT)}: headings name an internal issue (say what it is instead): {found}"


def _includes() -> list[tuple[Path, str]]:
    return [(page, ref) for page in PAGES if page.exists() for ref in SNIPPET.findall(page.read_text(encoding="utf-8"))]


def test_the_results_pages_include_generated_tables():
    included = {ref.split(":")[0] for _, ref in _includes()}
    for table in ("results/peers2026/nine.md", "results/peers/table.md", "results/ed/table.md", "results/bench/speed.md"):
        assert table in included, f"no docs page includes {table}"


@pytest.mark.parametrize("page_ref", _includes(), ids=lambda pr: f"{pr[0].name}:{pr[1]}")
def test_every_included_table_exists_with_its_section(page_ref):
    page, ref = page_ref
    path, _, rest = ref.partition(":")
    target = ROOT / path
    assert target.is_file(), f"{page.relative_to(ROOT)} includes {path}, which does not exist (make artifacts writes it)"
    text = target.read_text(encoding="utf-8")
    if rest and not re.fullmatch(r"[\d:,]*", rest):  # a named section, not line ranges
        for kind in ("start", "end"):
            assert f"--8<-- [{kind}:{rest}]" in text, f"{path} has no [{kind}:{rest}] marker ({page.name} includes it)"
        text = text.split(f"--8<-- [start:{rest}]")[1].split(f"--8<-- [end:{rest}]")[0]
    elif rest:  # line ranges `a:b,c:` (1-based, inclusive; an open end runs to the last line)
        lines = text.splitlines()
        kept = []
        for span in rest.split(","):
            start, _, end = span.partition(":")
            kept += lines[int(start or 1) - 1:int(end) if end else None]
        text = "\n".join(kept)
    assert re.search(r"^\|[\s:]*-{3,}", text, re.M), f"{page.name} includes {ref}, which holds no table"
    assert issue_headings(text) == [], f"{ref}, included by {page.name}, has headings naming an internal issue"
