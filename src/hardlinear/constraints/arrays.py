"""The checks every user-given array of a problem passes before it is used: real numbers, within float64's range.

Why: an array is coerced to float64 by ``numpy.asarray(..., dtype=float64)`` everywhere, which drops the imaginary
part of a complex array with a warning that a run's log buries (a problem recorded ``ok`` was not the one given),
and fails on a string with numpy's ``could not convert string to float`` (no key named). And an entry of 1e300 or
1e-300 is finite but breaks the linear algebra downstream in ways that name the wrong cause: row norms and Gram
matrices square the entries, so 1e300 overflows to inf ("Invalid input for linprog: ... inf, nan" for a file with
none) and 1e-300 underflows to 0 ("rows of H are zero" for non-zero rows). Entries are therefore refused outside
``[MIN_MAGNITUDE, MAX_MAGNITUDE]`` (zero excepted): their squares stay finite and normal in float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

MAX_MAGNITUDE = 1e150
"""Largest magnitude of an entry: its square (1e300) is still finite in float64."""
MIN_MAGNITUDE = 1e-150
"""Smallest magnitude of a non-zero entry: its square (1e-300) is still a normal float64."""


def real_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a float64 array (a sparse matrix: its dense form), or ``ValueError`` naming ``name`` and the fix
    when it holds text, objects or complex numbers."""
    if sp.issparse(value):
        value = value.toarray()
    arr = np.asarray(value)
    if np.iscomplexobj(arr):
        imag = float(np.abs(arr.imag).max()) if arr.size else 0.0
        raise ValueError(
            f"{name} must be a real numeric array; it is complex (imaginary parts up to {imag:.3g}): pass "
            f"numpy.real({name}) if the imaginary part is meant to be dropped"
        )
    if arr.dtype.kind not in "biuf":
        raise ValueError(
            f"{name} must be a real numeric array; it holds {_kind(arr)} (dtype {arr.dtype}): store it as a float "
            f"array, e.g. numpy.asarray({name}, dtype=float)"
        )
    return arr.astype(np.float64)


def check_magnitudes(arr: Any, name: str) -> Any:
    """``arr`` (dense or scipy sparse) unchanged, or ``ValueError`` naming ``name``, the first entry out of range and
    the fix (module docstring). Non-finite entries are left to the caller's own check."""
    if sp.issparse(arr):
        coo = arr.tocoo()
        entries = np.asarray(coo.data, dtype=np.float64)

        def position(i: int) -> list[int]:
            return [int(coo.row[i]), int(coo.col[i])]
    else:
        entries = np.asarray(arr, dtype=np.float64).reshape(-1)

        def position(i: int) -> list[int]:
            return [int(j) for j in np.unravel_index(i, np.shape(arr))]
    values = np.abs(entries)
    finite = np.isfinite(values)
    for bad, what, fix in (
        (finite & (values > MAX_MAGNITUDE), f"above {MAX_MAGNITUDE:g}", "rescale its rows or variables"),
        (finite & (values > 0) & (values < MIN_MAGNITUDE), f"non-zero and below {MIN_MAGNITUDE:g}",
         "set such entries to 0 or rescale"),
    ):
        if bad.any():
            first_bad = int(np.flatnonzero(bad)[0])
            where, first = position(first_bad), float(entries[first_bad])
            raise ValueError(
                f"{name} has {int(bad.sum())} entries of magnitude {what} (first at index {where}: {first:.3g}); "
                f"squared in the solvers' linear algebra they leave float64's range: {fix}"
            )
    return arr


def _kind(arr: np.ndarray) -> str:
    return {"U": "text", "S": "bytes", "O": "Python objects", "V": "records", "M": "dates", "m": "time spans"}.get(
        arr.dtype.kind, "non-numbers"
    )
