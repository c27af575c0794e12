"""Identity by content: a problem read from a file enters a run's identity by the file's sha256.

Why: the identity held ``problem.path`` but not what the file says, so a rerun after editing ``ed5.npz`` printed
``skip: already recorded`` for every run, and tables and figures drew two different files under one problem
name as one. ``with_content`` adds ``content: {"problem.path": "<sha256>", ...}`` to the resolved config before
the identity is hashed, so an edited file is a new identity (its runs rerun), the record keeps the digest
(``cfg.content.*`` columns, and ``problem_sha256`` in the row), and the reporting splits rows by it.
``check_content`` lets a reload refuse a model whose problem file changed since the run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CONTENT_KEY = "content"
FILE_SECTIONS = ("problem", "data")
"""Config sections whose file-valued keys are hashed."""
FILE_KEY_SUFFIXES = ("path", "_file", "inputs")
"""A key holds a file when its name ends so (``problem.path``, ``data.test_inputs``): a plain string such as
``data.solver=clarabel`` is never taken for a file even when a file of that name happens to exist."""
CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    """The file's sha256 in hex, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def file_keys(config: Mapping[str, Any]) -> dict[str, str]:
    """``{"problem.path": "ed5.npz", ...}``: the config's file-valued keys (``FILE_SECTIONS``) set to a string."""
    found: dict[str, str] = {}

    def walk(node: Mapping, prefix: str) -> None:
        for key, value in node.items():
            name = f"{prefix}.{key}"
            if isinstance(value, Mapping):
                walk(value, name)
            elif isinstance(value, str) and value and str(key).endswith(FILE_KEY_SUFFIXES):
                found[name] = value

    for section in FILE_SECTIONS:
        if isinstance(config.get(section), Mapping):
            walk(config[section], section)
    return found


def file_digests(config: Mapping[str, Any]) -> dict[str, str]:
    """``{"problem.path": "<sha256>"}`` for each file-valued key naming a readable regular file (a missing file
    is left to the problem's own error, which names the key and the fix)."""
    return {key: sha256_file(path) for key, path in sorted(file_keys(config).items()) if Path(path).is_file()}


def with_content(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` plus ``content`` (``file_digests``) when it names files; unchanged otherwise, so the identity of a
    run without files is what it was."""
    digests = file_digests(config)
    return {**config, CONTENT_KEY: digests} if digests else config


def short_digest(config: Mapping[str, Any], key: str = "problem.path") -> str:
    """The first 12 hex digits of ``key``'s recorded digest ("" when the run read no such file)."""
    return str((config.get(CONTENT_KEY) or {}).get(key, ""))[:12]


def changed_files(config: Mapping[str, Any]) -> list[str]:
    """One line per file the run read that is missing now or whose content differs from the recorded digest."""
    lines = []
    for key, recorded in sorted((config.get(CONTENT_KEY) or {}).items()):
        path = file_keys(config).get(key)
        if path is None:
            continue
        if not Path(path).is_file():
            lines.append(f"{key}={path} is gone (the run read sha256 {recorded[:12]})")
            continue
        now = sha256_file(path)
        if now != recorded:
            lines.append(f"{key}={path} changed since the run: sha256 {now[:12]} now, {recorded[:12]} when it ran")
    return lines
