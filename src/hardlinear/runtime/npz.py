"""An ``.npz``'s arrays sized from their headers, before anything is decompressed.

Why: ``numpy.load`` of an ``.npz`` member allocates the shape its header declares and then inflates the data: a
2 MB zip of zeros declaring a few GB reached 4.5 GB of memory before the problem loader could refuse its shape.
:func:`check_npz_fits` reads each member's ``.npy`` header (the first bytes of the member, a few hundred bytes
inflated) and refuses the file when the declared arrays exceed the memory this process may use.
"""

from __future__ import annotations

import math
import os
import zipfile

import numpy as np

from hardlinear.runtime.limits import memory_room

USABLE_FRACTION = 0.5
"""Share of the process's memory room the arrays of one file may declare (they are copied and converted after)."""


class ArraysTooLarge(ValueError):
    """An ``.npz`` whose declared arrays would not fit in the memory this process may use."""


def declared_arrays(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{name: (shape, dtype)}`` of every ``.npy`` member of the zip ``path``, from the headers alone."""
    out = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(member)
                else:
                    shape, _, dtype = np.lib.format._read_array_header(member, version)  # noqa: SLF001 - 3.0 headers
            out[info.filename[: -len(".npy")]] = (tuple(int(d) for d in shape), dtype)
    return out


def check_npz_fits(path: str | os.PathLike, what: str, room: int | None = None) -> None:
    """:class:`ArraysTooLarge` naming the largest member when the arrays ``path`` declares exceed
    :data:`USABLE_FRACTION` of the memory this process may use (``room``: that memory, read when None)."""
    arrays = declared_arrays(path)
    sizes = {name: math.prod(shape) * dtype.itemsize for name, (shape, dtype) in arrays.items()}
    total = sum(sizes.values())
    why = "given"
    if room is None:
        room, why = memory_room()
    if room is None or total <= room * USABLE_FRACTION:
        return
    name = max(sizes, key=sizes.get)
    shape, dtype = arrays[name]
    raise ArraysTooLarge(
        f"{what} {str(path)!r} declares {total / 1e9:.3g} GB of arrays ({name}: shape {shape}, {dtype}); this process "
        f"may use {room / 1e9:.3g} GB ({why}), so it is refused before anything is decompressed; "
        "give a smaller file (or split it)"
    )
