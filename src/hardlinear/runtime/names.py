"""Text from data made safe where it becomes a file name, or is printed or rendered.

Why: a results folder is data anyone may share, and a record's ``problem``, ``objective`` or ``form`` (its checksum
recomputed) or a legacy CSV row (no checksum at all) can hold ``/some/dir/x`` or ``../../..``. Figure and table
writers derived file names from them and wrote outside ``--out``. Every name a writer takes from a record goes
through :func:`slug` and :func:`inside`; every name printed to a terminal or rendered goes through
:func:`printable` (an ``ineq_names`` entry with terminal escape sequences reached the terminal raw).
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path

MAX_SLUG = 80
"""Longest slug (characters) before its digest: file names stay well under the 255 bytes of common file systems."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def printable(text: object, newlines: bool = False) -> str:
    """``text`` as a string without control or format characters (C0, C1, DEL, bidi overrides; ``ESC[31m`` loses
    its ``ESC``; a tab or a newline becomes a space unless ``newlines`` keeps ``\\n``), so a name from a file cannot
    move the cursor, recolour the terminal, reorder a line or split a log line."""
    out = []
    for ch in str(text):
        if ch == "\n" and newlines:
            out.append(ch)
        elif ch in "\n\r\t":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf"):
            continue
        else:
            out.append(ch)
    return "".join(out)


def slug(text: object) -> str:
    """One safe file-name component for any text: letters, digits and ``._+-`` kept, every other run of characters
    one ``-``, no leading dot, at most :data:`MAX_SLUG` characters. A text that changed on the way gets 8 hex
    digits of its sha256 appended, so two different texts never share a slug (``a/b`` and ``a_b`` stay apart)."""
    raw = str(text)
    safe = _UNSAFE.sub("-", raw).strip("-.")[:MAX_SLUG].strip("-.")
    if safe == raw and safe:
        return safe
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe}-{digest}" if safe else f"x-{digest}"


def inside(folder: str | os.PathLike, name: str) -> Path:
    """``folder / name`` when it stays inside ``folder`` (after resolving links); ``ValueError`` naming both
    otherwise: the last guard before a writer opens a path made from data."""
    base = Path(folder).resolve()
    path = (base / name).resolve()
    if path.parent != base or name in ("", ".", ".."):
        raise ValueError(f"refused to write {name!r}: it is not one file name inside {base}")
    return base / name
