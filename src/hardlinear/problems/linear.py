"""A parametric LP/QP given as arrays: benchmark every method on one's own problem without writing code.

``problem=linear problem.path=my_problem.npz`` reads these keys (``n`` variables, ``k`` inputs ``xi``)::

    c        (n,)          linear cost                                 required
    Q        (n, n)        quadratic cost, symmetric PSD               optional (absent: an LP)
    G        (m_eq, n)     equality rows  G y = g0 + Gx xi             optional (absent: no equalities)
    g0       (m_eq,)       constant part of g                          optional (zeros)
    Gx       (m_eq, k)     input part of g                             optional (zeros)
    H        (m_ineq, n)   inequality rows  H y <= h0 + Hx xi          optional (absent: none)
    h0       (m_ineq,)                                                 optional (zeros)
    Hx       (m_ineq, k)                                               optional (zeros)
    lo, hi   (k,)          the input box lo <= xi <= hi                 required unless A_in, b_in are given
    A_in     (p, k)        an input polytope  A_in xi <= b_in           optional (cut by lo/hi when both given)
    b_in     (p,)                                                       with A_in
    train_inputs, val_inputs, test_inputs  (N, k)  fixed inputs of a split   optional
    variable_names  (n,)       names of the variables y (strings)          optional: messages read them
    eq_names        (m_eq,)    names of the equality rows                   optional
    ineq_names      (m_ineq,)  names of the inequality rows                 optional

A matrix may be dense or sparse: a sparse ``M`` is stored as the CSR triplet ``M_data, M_indices, M_indptr``
plus ``M_shape`` (``scipy.sparse.csr_matrix`` attributes). Shapes are checked before anything is solved, and
every error names the key and the fix. From Python, :class:`LinearProblem` takes the same arrays directly.

With ``A_in, b_in`` the input set is that polytope (bounded, with an interior: checked, see
:mod:`hardlinear.constraints.polytope`): the decision rule is robust over it, seeded samples are drawn uniformly from it (by
rejection from its bounding box), given inputs must lie in it, and the cost-aware rule uses its uniform moments.
``scripts/audit_guarantee.py``'s box vertices and box-clamped attacks do not apply to it (the audit refuses it).

Fixed inputs replace the seeded samples of their split: ``val_inputs`` and ``test_inputs`` become the
validation and test sets, ``train_inputs`` the trainer's training set (see :mod:`hardlinear.problems.datasets` and
``hardlinear.train.trainer``). The variables are free (add bounds as rows of ``H``); the default form is
``inequality`` (the constraints as given; ``form=standard`` appends a slack per inequality row).

Names (``numpy.savez(path, ..., variable_names=np.array(["charge[0]", ...]))``) change no result: messages that
name a row or a variable use them (the decision rule's binding row reads ``row 21 (soc_max[3]): +1 soc[3] <= 4``
instead of ``row 21: +1 y[14] <= 4``).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hardlinear.constraints.arrays import check_magnitudes, real_array
from hardlinear.constraints.family import InputBox, JointlyLinearFamily
from hardlinear.problems.base import Form, Objective, Problem
from hardlinear.runtime.names import printable
from hardlinear.runtime.npz import ArraysTooLarge, check_npz_fits

SPLIT_KEYS = {"train": "train_inputs", "val": "val_inputs", "test": "test_inputs"}
MATRIX_KEYS = ("Q", "G", "Gx", "H", "Hx")
NAME_KEYS = ("variable_names", "eq_names", "ineq_names")
KNOWN_KEYS = ("c", "Q", "G", "g0", "Gx", "H", "h0", "Hx", "lo", "hi", "A_in", "b_in", *SPLIT_KEYS.values(), *NAME_KEYS)
CSR_PARTS = ("data", "indices", "indptr", "shape")
# Inputs may sit outside the box by this much (rounding of a file written in float32, say).
BOX_TOL = 1e-9


def load_arrays_npz(path: str | os.PathLike) -> dict[str, Any]:
    """The problem's arrays from a ``.npz`` (sparse matrices rebuilt from their CSR triplets)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"problem file {str(path)!r} not found; pass problem.path=<file.npz> (relative to the working directory)")
    if not path.is_file():
        raise ValueError(f"problem file {str(path)!r} is not a regular file (a folder or a device); pass problem.path=<file.npz>")
    try:
        if zipfile.is_zipfile(path):  # the declared shapes against the memory, before anything is inflated
            check_npz_fits(path, "problem file")
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise ValueError("it holds one array, not named arrays (save with numpy.savez(path, c=..., lo=..., hi=...))")
            raw = {key: z[key] for key in z.files}
    except ArraysTooLarge:
        raise
    except Exception as err:  # noqa: BLE001 - a damaged zip, a pickled array, a text file: all "not a problem file"
        raise ValueError(f"problem file {str(path)!r} cannot be read as .npz ({type(err).__name__}: {err}); write it with numpy.savez") from None
    arrays: dict[str, Any] = {}
    for name in MATRIX_KEYS:
        parts = [f"{name}_{p}" for p in CSR_PARTS]
        present = [p for p in parts if p in raw]
        if present and len(present) < len(parts):
            raise ValueError(f"{path}: sparse {name} needs all of {parts}; missing {sorted(set(parts) - set(present))}")
        if present:
            if name in raw:
                raise ValueError(f"{path}: {name} is given both dense and as a CSR triplet; keep one")
            data, indices, indptr, shape = (raw.pop(p) for p in parts)
            arrays[name] = _csr(path, name, data, indices, indptr, shape)
    unknown = sorted(set(raw) - set(KNOWN_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; the keys are {list(KNOWN_KEYS)} (see hardlinear.problems.linear)")
    for key, value in raw.items():  # text or complex arrays named by key, before anything reads them
        if key in NAME_KEYS:  # names are text by design (checked against the sizes by names_of)
            arrays[key] = value
            continue
        try:
            arrays[key] = real_array(value, key)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    return arrays


def _csr(path: Path, name: str, data: Any, indices: Any, indptr: Any, shape: Any) -> sp.csr_matrix:
    """A CSR triplet checked in full (indices inside the declared shape, ``indptr`` monotone and as long as the
    rows): scipy's default check does not look at the indices, and a bad one fails deep inside a solver."""
    try:
        shape = tuple(int(v) for v in np.asarray(shape).reshape(-1))
        if len(shape) != 2 or min(shape) < 0:
            raise ValueError(f"{name}_shape must be two non-negative integers; got {shape}")
        matrix = sp.csr_matrix((real_array(data, f"{name}_data"), indices, indptr), shape=shape)
        matrix.check_format(full_check=True)
    except (ValueError, TypeError, IndexError, OverflowError) as err:
        raise ValueError(
            f"{path}: sparse {name} (CSR {name}_data, {name}_indices, {name}_indptr, {name}_shape) is inconsistent: {err}; "
            "write it from scipy.sparse.csr_matrix attributes"
        ) from None
    return matrix


def _check_psd(Q: sp.csr_matrix) -> None:
    """``ValueError`` if the symmetric ``Q`` has a clearly negative eigenvalue (the Python API checks the same)."""
    scale = 1.0 + (abs(Q).max() if Q.nnz else 0.0)
    if Q.shape[0] <= 4000:
        smallest = float(np.linalg.eigvalsh(Q.toarray()).min()) if Q.nnz else 0.0
    else:
        from scipy.sparse.linalg import eigsh

        smallest = float(eigsh(Q, k=1, which="SA", return_eigenvectors=False, tol=1e-8)[0])
    if smallest < -1e-9 * scale:
        raise ValueError(f"Q must be positive semidefinite (smallest eigenvalue {smallest:.3g}): the objective c'y + 1/2 y'Qy must be convex")


def _check_size(n: int, k: int, rows: int) -> None:
    """Refuse, before any work, a problem whose dense working matrices cannot fit in this machine's memory: the
    decision rule and its input moments hold ``(k + 1) x (k + 1)`` and ``(n + rows) x (k + 1)`` float64 arrays."""
    needed = 8 * max((k + 1) ** 2, (n + rows) * (k + 1))
    try:
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return
    if needed > available:
        raise ValueError(
            f"the problem is too large for this machine: k = {k} inputs and n = {n} variables need dense float64 "
            f"matrices of {needed / 2**30:.1f} GiB ((k+1)^2 or (n+rows)(k+1)), {available / 2**30:.1f} GiB available; "
            "reduce the inputs (lo/hi) or run where memory allows"
        )


def _vector(arrays: Mapping[str, Any], key: str, length: int, default: float | None = 0.0) -> np.ndarray:
    if key not in arrays or arrays[key] is None:
        if default is None:
            raise ValueError(f"{key} is required: give a ({length},) array")
        return np.full(length, default)
    v = real_array(arrays[key], key)
    if v.ndim == 2 and 1 in v.shape:
        v = v.reshape(-1)
    if v.shape != (length,):
        raise ValueError(f"{key} must have shape ({length},); got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{key} has non-finite entries at {np.flatnonzero(~np.isfinite(v))[:10].tolist()}")
    return check_magnitudes(v, key)


def _matrix(arrays: Mapping[str, Any], key: str, rows: int | None, cols: int, what: str) -> sp.csr_matrix | None:
    """``arrays[key]`` as CSR of shape ``(rows, cols)`` (``rows=None``: any), or None if absent."""
    if key not in arrays or arrays[key] is None:
        return None
    value = arrays[key]
    M = sp.csr_matrix(value) if sp.issparse(value) else None
    if M is not None:
        M = sp.csr_matrix((real_array(M.data, key), M.indices, M.indptr), shape=M.shape)
    else:
        dense = real_array(value, key)
        if dense.ndim != 2:
            raise ValueError(f"{key} ({what}) must be a 2-D matrix; got an array of shape {dense.shape}")
        M = sp.csr_matrix(dense)
    if (rows is not None and M.shape[0] != rows) or M.shape[1] != cols:
        want = f"({rows if rows is not None else 'm'}, {cols})"
        raise ValueError(f"{key} ({what}) must have shape {want}; got {M.shape}")
    if not np.all(np.isfinite(M.data)):
        raise ValueError(f"{key} has non-finite entries")
    check_magnitudes(M, key)
    return M


def _rhs(arrays: Mapping[str, Any], const_key: str, input_key: str, rows: int, k: int) -> np.ndarray:
    """``[const | input]``: the ``(rows, k + 1)`` right-hand-side matrix on ``x = (1, xi)``."""
    const = _vector(arrays, const_key, rows)
    Mx = _matrix(arrays, input_key, rows, k, f"input part of the right-hand side, one column per input; k = {k} from lo/hi")
    inputs = np.zeros((rows, k)) if Mx is None else Mx.toarray()
    return np.column_stack([const, inputs])


def check_inputs(name: str, xi: Any, box: InputBox, polytope: Any = None) -> np.ndarray:
    """Given inputs ``(N, k)`` in float64, inside the box (and the input polytope, if any; to ``BOX_TOL``), or a
    ValueError naming the fix."""
    xi = np.asarray(xi, dtype=np.float64)
    if xi.ndim != 2 or xi.shape[1] != box.k or xi.shape[0] < 1:
        raise ValueError(f"{name} must have shape (N, {box.k}) with N >= 1 (one row per instance); got {xi.shape}")
    if not np.all(np.isfinite(xi)):
        raise ValueError(f"{name} has non-finite entries")
    outside = np.maximum(box.lo - xi, xi - box.hi).max(axis=1)
    if np.any(outside > BOX_TOL):
        rows = np.flatnonzero(outside > BOX_TOL)
        raise ValueError(
            f"{name}: {len(rows)} rows lie outside the input box (first: row {rows[0]}, by {outside[rows[0]]:.3g}); "
            "widen lo/hi to contain them: the decision rule is only guaranteed on the box"
        )
    if polytope is not None and not np.all(inside := polytope.contains(xi, tol=BOX_TOL)):
        rows = np.flatnonzero(~inside)
        raise ValueError(
            f"{name}: {len(rows)} rows lie outside the input polytope A_in xi <= b_in (first: row {rows[0]}); widen b_in "
            "to contain them: the decision rule is only guaranteed on the polytope"
        )
    return np.clip(xi, box.lo, box.hi)


def family_from_arrays(arrays: Mapping[str, Any]) -> tuple[JointlyLinearFamily, Objective, dict[str, np.ndarray]]:
    """The constraint family, objective and given inputs that ``arrays`` (module docstring) describe."""
    if "c" not in arrays:
        raise ValueError("c (the linear cost, shape (n,)) is required: it fixes the number of variables n")
    c = real_array(arrays["c"], "c").reshape(-1)
    n = c.size
    if n < 1:
        raise ValueError("c is empty: a problem needs at least one variable")
    c = _vector(arrays, "c", n)
    box, polytope = _input_set(arrays)
    k = box.k
    if k < 1:
        raise ValueError("lo/hi are empty: give at least one input")
    Q = _matrix(arrays, "Q", n, n, "quadratic cost")
    if Q is not None:
        asym = abs(Q - Q.T).max() if Q.nnz else 0.0
        if asym > 1e-9 * max(1.0, abs(Q).max()):
            raise ValueError(f"Q must be symmetric (max |Q - Q'| = {asym:.3g}); pass (Q + Q')/2")
        _check_psd(Q)
    G = _matrix(arrays, "G", None, n, f"equality rows, one column per variable; n = {n} from c")
    H = _matrix(arrays, "H", None, n, f"inequality rows, one column per variable; n = {n} from c")
    G = G if G is not None else sp.csr_matrix((0, n))
    H = H if H is not None else sp.csr_matrix((0, n))
    _check_size(n, k, G.shape[0] + H.shape[0])
    for key, matrix, partner in (("g0", G, "G"), ("Gx", G, "G"), ("h0", H, "H"), ("Hx", H, "H")):
        if matrix.shape[0] == 0 and arrays.get(key) is not None and np.size(arrays[key]):
            raise ValueError(f"{key} is given but {partner} is not: give {partner} (rows, n) as well")
    family = JointlyLinearFamily(
        box=box, G=G, B_eq=_rhs(arrays, "g0", "Gx", G.shape[0], k), H=H, B_ineq=_rhs(arrays, "h0", "Hx", H.shape[0], k),
        polytope=polytope,
    )
    given = {
        split: check_inputs(key, arrays[key], box, polytope) for split, key in SPLIT_KEYS.items() if arrays.get(key) is not None
    }
    return family, Objective(c=c, Q=Q if Q is not None and Q.nnz else None), given


def names_from_arrays(arrays: Mapping[str, Any], family: JointlyLinearFamily) -> dict[str, list[str] | None]:
    """The optional names (``variable_names``, ``eq_names``, ``ineq_names``) as lists of strings, each as long as
    what it names, or None where absent; a ValueError naming the fix otherwise."""
    lengths = {"variable_names": (family.n, "n variables"), "eq_names": (family.m_eq, "m_eq equality rows"),
               "ineq_names": (family.m_ineq, "m_ineq inequality rows")}
    out: dict[str, list[str] | None] = {}
    for key, (length, what) in lengths.items():
        value = arrays.get(key)
        if value is None:
            out[key] = None
            continue
        names = np.asarray(value)
        if names.dtype.kind not in "US" or names.ndim != 1:
            raise ValueError(f"{key} must be a 1-D array of strings (numpy.array(['a', 'b', ...])); got dtype {names.dtype}, "
                             f"shape {names.shape}")
        if names.shape != (length,):
            raise ValueError(f"{key} must name each of the {what}: shape ({length},); got {names.shape}")
        # control characters stripped: a name is printed (the rule's messages) and recorded, never a terminal command
        out[key] = [printable(v.decode(errors="replace") if isinstance(v, bytes) else str(v)) for v in names.tolist()]
    return out


def _input_set(arrays: Mapping[str, Any]) -> tuple[InputBox, Any]:
    """The input box, or the polytope ``A_in xi <= b_in`` (cut by ``lo, hi`` when given) and its bounding box."""
    has_box = [key in arrays for key in ("lo", "hi")]
    has_poly = [key in arrays for key in ("A_in", "b_in")]
    if any(has_poly) and not all(has_poly):
        raise ValueError("A_in and b_in go together: the input polytope is A_in xi <= b_in; give both")
    if not all(has_poly):
        for key in ("lo", "hi"):
            if key not in arrays:
                raise ValueError(f"{key} (the input box, shape (k,)) is required (or an input polytope A_in, b_in): the decision rule needs a bounded input set")
    box = None
    if any(has_box):
        if not all(has_box):
            raise ValueError("lo and hi go together: give both (the input box) or neither (with A_in, b_in)")
        lo = real_array(arrays["lo"], "lo").reshape(-1)
        box = InputBox(_vector(arrays, "lo", lo.size), _vector(arrays, "hi", lo.size))
    if not all(has_poly):
        return box, None
    from hardlinear.constraints.polytope import bounded_input_set

    A = check_magnitudes(real_array(arrays["A_in"], "A_in"), "A_in")
    polytope, blo, bhi = bounded_input_set(A, check_magnitudes(real_array(arrays["b_in"], "b_in"), "b_in"), *((box.lo, box.hi) if box else (None, None)))
    return InputBox(blo, bhi), polytope


class LinearProblem(Problem):
    """A problem from arrays (module docstring): ``LinearProblem(path="p.npz")`` or ``LinearProblem(arrays={...})``."""

    def __init__(
        self,
        path: str | None = None,
        arrays: Mapping[str, Any] | None = None,
        form: Form = "inequality",
        name: str = "linear",
    ) -> None:
        if (path is None) == (arrays is None):
            raise ValueError("give exactly one of path (a .npz file: problem.path=<file.npz>) or arrays (a dict)")
        source = load_arrays_npz(path) if path is not None else dict(arrays)
        family, objective, given = family_from_arrays(source)
        self.path = None if path is None else str(path)
        super().__init__(family, objective, "qp" if objective.is_quadratic else "lp", form, name)
        self.given_inputs = given
        names = names_from_arrays(source, family)  # for messages only (the decision rule's binding row, ...)
        self.variable_names, self.eq_names, self.ineq_names = names["variable_names"], names["eq_names"], names["ineq_names"]
        self.cost_moments = None  # the cost-aware rule's expectation: the box's closed form, or the polytope's samples
        if family.polytope is not None:
            from hardlinear.constraints.moments import sample_moments
            from hardlinear.constraints.polytope import MOMENT_SAMPLES

            self.cost_moments = sample_moments(family.polytope.sample(MOMENT_SAMPLES, self.box.lo, self.box.hi, seed=0))

    def sample(self, n: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """``n`` inputs ``(n, k)`` uniform on the input set: the box, or the polytope (rejection from its box)."""
        if self.compact.polytope is None:
            return super().sample(n, generator=generator, dtype=dtype)
        from hardlinear.constraints.polytope import sample_inside

        return sample_inside(self.compact.polytope, self.box, n, generator, dtype)
