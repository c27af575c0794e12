"""The docs' math pages are equations, not code text (issue 44, item 6): ``$...$`` / ``$$...$$`` in the pages,
marked by ``pymdownx.arithmatex`` and rendered by KaTeX bundled into the site (``docs/assets/katex``), so the site
renders offline. Three tests convert the pages with the site's own Markdown settings; the last one builds the
site (``mkdocs build --strict``, about 5 s) and looks at the rendered page in headless Chromium (skipped without one)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
markdown = pytest.importorskip("markdown")
pytest.importorskip("pymdownx.arithmatex", reason="pymdown-extensions comes with the docs extra")

ROOT = Path(__file__).resolve().parents[1]
MATH_PAGES = ("math.md", "cost_aware_rule.md")
FORMULAS = {
    "math.md": ("max_{F, t}", "s.t.", "G' (G G')^-1", "alpha = max", "&lt;=", "&gt;="),
    "cost_aware_rule.md": ("min_F", "E[f(F x)]", "E[x x']", "t* = max t", "max {-b'lam", "c' F E[x]"),
}
"""What each page once wrote as code text: none of it may be left in a code span or block."""
CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


class _Loader(yaml.SafeLoader):
    """mkdocs.yml with its ``!!python/name:`` tags read as plain strings (the fences' formatters are not needed here)."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)


def _site_config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)


def _html(page: str) -> str:
    """``docs/<page>`` converted with mkdocs.yml's arithmatex settings (the other extensions do not touch math)."""
    options = next(e["pymdownx.arithmatex"] for e in _site_config()["markdown_extensions"]
                   if isinstance(e, dict) and "pymdownx.arithmatex" in e)
    md = markdown.Markdown(extensions=["pymdownx.arithmatex", "tables", "attr_list"],
                           extension_configs={"pymdownx.arithmatex": options or {}})
    return md.convert((ROOT / "docs" / page).read_text())


@pytest.mark.parametrize("page", MATH_PAGES)
def test_the_math_pages_hold_equations_not_code(page):
    html = _html(page)
    displays = re.findall(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', html, flags=re.S)
    inline = re.findall(r'<span class="arithmatex">\\\((.*?)\\\)</span>', html, flags=re.S)
    assert len(displays) >= 2 and len(inline) >= 5, (len(displays), len(inline))
    code = " ".join(re.findall(r"<(?:pre|code)>(.*?)</(?:pre|code)>", html, flags=re.S))
    for formula in FORMULAS[page]:
        assert formula not in code, f"{page}: {formula!r} is still code text"


def test_the_math_page_states_the_robust_lp_and_the_blend():
    displays = " ".join(re.findall(r'<div class="arithmatex">(.*?)</div>', _html("math.md"), flags=re.S))
    for tex in (r"\max_{F,\, t}", r"G F = B_{\mathrm{eq}}", r"w_i\, t", r"(1 - \alpha)\, y_{\mathrm{EQ}}"):
        assert tex in displays


def test_katex_is_bundled_and_wired():
    """The renderer is in docs/ (no network at reading time), with its licence, and mkdocs.yml loads it."""
    config = _site_config()
    assets = ROOT / "docs"
    for path in (*config["extra_javascript"], *config["extra_css"]):
        assert (assets / path).is_file(), path
        assert not str(path).startswith(("http:", "https:", "//"))
    css = (assets / "assets/katex/katex.min.css").read_text()
    fonts = set(re.findall(r"url\((fonts/[^)]+\.woff2)\)", css))
    assert len(fonts) >= 15 and all((assets / "assets/katex" / f).is_file() for f in fonts)
    assert "MIT" in (assets / "assets/katex/LICENSE").read_text()


def test_the_built_site_renders_the_math(tmp_path):
    """``mkdocs build --strict``, then math/index.html in headless Chromium: KaTeX's markup, no KaTeX error."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is in the docs extra")
    site = tmp_path / "site"
    built = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(site)], cwd=ROOT, capture_output=True,
                           text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    page = site / "math" / "index.html"
    assert 'class="arithmatex"' in page.read_text()
    assert (site / "assets" / "katex" / "katex.min.js").is_file()
    if CHROMIUM is None:
        pytest.skip("no Chromium here to render the page (Debian: apt-get install chromium)")
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert dom.count('class="katex-display"') >= 4 and dom.count('class="katex"') >= 20
    assert "katex-error" not in dom
