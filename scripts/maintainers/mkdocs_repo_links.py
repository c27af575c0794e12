"""MkDocs hook: the docs pages link to files of the repository outside docs/ (committed result tables, benchmark
plots) and include benchmarks/README.md as a page. On GitHub those links work as written; on the site the hook
makes them work too, and keeps `--strict` meaningful:

* ``PAGES_FROM_REPO``: repository Markdown files served as site pages (their links resolved from where they
  really are);
* a relative link that leaves docs/ to a file that exists is served from ``_repo/<path>`` (the file is copied
  into the site); a link to a folder becomes its path in code; a link to nothing is left as written, so MkDocs
  reports it and a strict build fails.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

PAGES_FROM_REPO = {"benchmarks.md": "benchmarks/README.md", "benchmarks_history.md": "benchmarks/HISTORY.md"}  # site page -> repository file
SERVED = "_repo"
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s#]+)(#[^)\s]*)?\)")


def _root(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _source(page_uri: str, config) -> Path:
    """Where a page's Markdown really is (a repository file for ``PAGES_FROM_REPO``)."""
    if page_uri in PAGES_FROM_REPO:
        return _root(config) / PAGES_FROM_REPO[page_uri]
    return Path(config["docs_dir"]).resolve() / page_uri


def _outward(target: str, page_uri: str, config) -> Path | None:
    """The repository path a relative link leads to when it leaves docs/, else None."""
    if re.match(r"^[a-z]+:", target) or target.startswith("/"):
        return None
    docs = Path(config["docs_dir"]).resolve()
    path = (_source(page_uri, config).parent / target).resolve()
    if path.is_relative_to(docs):
        return None
    return path if path.is_relative_to(_root(config)) else None


def on_files(files: Files, config) -> Files:
    root = _root(config)
    for uri, repo_path in PAGES_FROM_REPO.items():
        files.append(File.generated(config, uri, abs_src_path=str(root / repo_path)))
    served: set[str] = set()
    for file in list(files):
        if not file.src_uri.endswith(".md"):
            continue
        text = Path(file.abs_src_path).read_text(encoding="utf-8")
        for match in _LINK.finditer(text):
            path = _outward(match.group(2), file.src_uri, config)
            if path is not None and path.is_file():
                served.add(path.relative_to(root).as_posix())
    for rel in sorted(served):
        uri = f"{SERVED}/{rel}"
        if files.get_file_from_path(uri) is None:
            # served as a static file (a result table in Markdown stays text, not a page of the site)
            files.append(File.generated(config, uri + (".txt" if rel.endswith(".md") else ""), abs_src_path=str(root / rel)))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    root = _root(config)
    depth = page.file.src_uri.count("/")

    def rewrite(match: re.Match) -> str:
        head, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        path = _outward(target, page.file.src_uri, config)
        if path is None and page.file.src_uri in PAGES_FROM_REPO and not re.match(r"^[a-z]+:", target):
            # a repository page linking into docs/ (benchmarks/README.md -> ../docs/x.md): the page's site path
            docs = Path(config["docs_dir"]).resolve()
            real = (_source(page.file.src_uri, config).parent / target).resolve()
            if real.is_relative_to(docs):
                rel = posixpath.relpath(real.relative_to(docs).as_posix(), posixpath.dirname(page.file.src_uri) or ".")
                return f"{head}{rel}{anchor})"
        if path is None or not path.exists():
            return match.group(0)  # inside docs/, external, or missing: MkDocs validates it
        rel = path.relative_to(root).as_posix()
        if path.is_dir():
            return match.group(0) if head.startswith("!") else f"{head[1:-2]} (`{rel}/` in the repository)"
        uri = f"{SERVED}/{rel}" + (".txt" if rel.endswith(".md") else "")
        return f"{head}{posixpath.join(*(['..'] * depth), uri) if depth else uri}{anchor})"

    return _LINK.sub(rewrite, markdown)
