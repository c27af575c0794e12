"""Griffe extension for the API reference: the docstrings cross-reference in Sphinx's roles
(``:class:`~hardlinear.rules.DecisionRule```), which mkdocstrings would print as they are. At docs-build time
each role becomes an inline code span of its target (the last component when written with ``~``), so the pages
read cleanly; the source keeps the roles, which editors and ``help()`` read as they are."""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:class|func|mod|meth|data|attr|exc|obj):`(~?)([^`]+)`")


def _plain(match: re.Match) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def _rewrite(obj: griffe.Object, seen: set[str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    if obj.docstring is not None:
        obj.docstring.value = _ROLE.sub(_plain, obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _rewrite(member, seen)


class SphinxRoles(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        """Once the package is loaded: every docstring in it, the package's own included."""
        _rewrite(pkg, set())
