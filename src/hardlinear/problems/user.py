"""Hard linear constraints from one's own matrices: no Problem subclass, no objective needed.

    constraints = hardlinear.LinearConstraints(lo, hi, G=G, g=(g0, Gx), H=H, h=(h0, Hx))
    layer = hardlinear.feasibility_layer(constraints, cache_dir="cache")
    y = layer(theta, net(theta))          # feasible for every theta in [lo, hi]

The constraints are ``G(theta) y = g(theta)`` and ``H(theta) y <= h(theta)`` for every input ``theta`` in the
box ``lo <= theta <= hi``, or in the polytope ``A_in theta <= b_in`` (cut by the box when both are given). A right-hand side is given as a constant vector, as ``(constant, matrix)`` meaning
``constant + matrix @ theta``, or as a callable ``theta -> vector``; a left-hand side as a matrix or a callable
``theta -> matrix`` (an input-dependent left-hand side: the rule is then the paper's SDP). Callables must be
affine in ``theta``: they are read off at ``theta = 0`` and the unit vectors, and checked at a random point.
Everything is checked (shapes, dtypes, finiteness, the box's order) before any solving, with messages that
name the fix. ``c`` and ``Q`` (an objective ``c(theta)'y + 1/2 y'Qy``, ``c`` a vector or ``(c0, C)`` for
``c0 + C theta``) are optional: given, the layer's rule is the cost-aware one by default (``rule_objective="auto"``).
"""


from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from hardlinear.constraints.arrays import check_magnitudes, real_array
from hardlinear.constraints.family import ConstraintFamily, InputBox, InputDependentFamily, JointlyLinearFamily

Matrix = np.ndarray | sp.spmatrix
Side = np.ndarray | tuple | Callable[[np.ndarray], Any] | None


class LinearConstraints:
    """``G(theta) y = g(theta)``, ``H(theta) y <= h(theta)`` for ``theta`` in the input set (``y: (n,)``).

    Args:
        lo: the input box's lower corner, ``(k,)``, finite; may be omitted when ``A_in, b_in`` are given.
        hi: its upper corner, ``(k,)``, finite, ``lo <= hi``.
        G: ``(m_eq, n)`` matrix (dense or scipy sparse), or a callable ``theta: (k,) -> matrix`` affine in
            ``theta``; may be omitted (no equality rows).
        g: the equalities' right-hand side: ``(m_eq,)`` constant, ``(constant (m_eq,), matrix (m_eq, k))`` for
            ``constant + matrix @ theta``, or a callable ``theta -> (m_eq,)`` affine in ``theta``.
        H: ``(m_ineq, n)`` matrix or callable, as ``G``; may be omitted (no inequality rows).
        h: the inequalities' right-hand side, as ``g``.
        c: an optional objective ``c(theta)'y + 1/2 y'Qy`` for ``rule_objective="cost"``: an ``(n,)`` vector,
            ``(c0 (n,), C (n, k))`` for ``c0 + C theta``, or a callable ``theta -> (n,)`` affine in ``theta``.
        Q: the objective's ``(n, n)`` symmetric PSD matrix (optional).
        A_in: an input polytope ``{theta : A_in theta <= b_in}``, ``(p, k)``, cut by the box when both are
            given. It must be bounded with a non-empty interior (checked, :mod:`hardlinear.constraints.polytope`); the rule is
            then robust over the polytope (LP duality per row), not over its bounding box, and the layer counts
            inputs outside the polytope as out of domain. Needs constant ``G`` and ``H``.
        b_in: the polytope's right-hand side, ``(p,)``.
        inputs: optional ``(N, k)`` inputs (e.g. the training set): the cost-aware rule then minimises the mean
            cost over them. Without them it minimises the expectation under the uniform distribution on the input
            set (closed form on a box; on a polytope estimated from 20,000 seeded samples).
        name: a label for messages and the rule's cache file.
        variable_names: optional names of the ``n`` variables (a sequence of strings); errors and diagnostics read
            them (the rule's binding row ``row 21 (soc_max[3]): +1 soc[3] <= 4`` instead of ``row 21: +1 y[14] <= 4``).
            They change no result.
        eq_names: optional names of the ``m_eq`` equality rows, read likewise.
        ineq_names: optional names of the ``m_ineq`` inequality rows, read likewise.
    """

    form = "inequality"  # the rule and the layer work on the variables as given (no slacks appended)

    def __init__(
        self,
        lo: Any = None,
        hi: Any = None,
        *,
        G: Matrix | Callable | None = None,
        g: Side = None,
        H: Matrix | Callable | None = None,
        h: Side = None,
        c: Any = None,
        Q: Any = None,
        A_in: Any = None,
        b_in: Any = None,
        inputs: Any = None,
        name: str = "constraints",
        variable_names: Any = None,
        eq_names: Any = None,
        ineq_names: Any = None,
    ) -> None:
        box, polytope = _input_set(lo, hi, A_in, b_in)
        if polytope is not None and (callable(G) or callable(H)):
            raise ValueError(
                "an input polytope (A_in, b_in) needs constant G and H (the robust LP); with an input-dependent "
                "left-hand side (the SDP) give the input set as a box (lo, hi)"
            )
        if G is None and H is None:
            raise ValueError("give at least one of G (equalities G y = g) and H (inequalities H y <= h)")
        for lhs, rhs, label in ((G, g, "G"), (H, h, "H")):
            if (lhs is None) != (rhs is None):
                given, missing = (label, label.lower()) if rhs is None else (label.lower(), label)
                raise ValueError(f"{given} is given but {missing} is not: each side of {label} y ~ {label.lower()} needs both")
        k = box.k
        theta0 = box.mid
        lhs_at = {lab: (_call(m, lab, theta0) if callable(m) else m) for lab, m in (("G", G), ("H", H)) if m is not None}
        n = _columns(lhs_at)
        if n == 0:
            raise ValueError("G and H have 0 columns: a layer needs at least one output variable (n = the number of "
                             "columns, one per output)")
        G0 = _matrix(lhs_at["G"], "G", n) if "G" in lhs_at else np.zeros((0, n))
        H0 = _matrix(lhs_at["H"], "H", n) if "H" in lhs_at else np.zeros((0, n))
        B_eq = _rhs(g, "g", "G", G0.shape[0], k, box) if G is not None else np.zeros((0, k + 1))
        B_ineq = _rhs(h, "h", "H", H0.shape[0], k, box) if H is not None else np.zeros((0, k + 1))
        if callable(G) or callable(H):
            G_stack = _stack(G, "G", G0.shape, box) if G is not None else np.zeros((k + 1, 0, n))
            H_stack = _stack(H, "H", H0.shape, box) if H is not None else np.zeros((k + 1, 0, n))
            self.compact: ConstraintFamily = InputDependentFamily(box=box, G_stack=G_stack, B_eq=B_eq, H_stack=H_stack, B_ineq=B_ineq)
        else:
            self.compact = JointlyLinearFamily(
                box=box, G=sp.csr_matrix(G0), B_eq=B_eq, H=sp.csr_matrix(H0), B_ineq=B_ineq, polytope=polytope
            )
        self.name = name
        self.variable_names, self.eq_names, self.ineq_names = _names(
            self.compact, variable_names=variable_names, eq_names=eq_names, ineq_names=ineq_names)
        c0, self.cost_input_matrix = _cost_side(c, n, k, box)
        self.objective_data = _objective(c0, Q, n)
        self.cost_moments = _cost_moments(inputs, box, polytope) if self.objective_data is not None else None

    @classmethod
    def from_family(cls, family: ConstraintFamily, name: str = "constraints") -> LinearConstraints:
        """Wrap an existing constraint family (already checked by its own constructor)."""
        self = cls.__new__(cls)
        self.compact, self.name, self.objective_data = family, name, None
        self.variable_names = self.eq_names = self.ineq_names = None
        self.cost_input_matrix = self.cost_moments = None
        return self

    # --- what the rule solver and the layer read -------------------------------------------------------
    @property
    def family(self) -> ConstraintFamily:
        return self.compact

    @property
    def box(self) -> InputBox:
        return self.compact.box

    @property
    def n(self) -> int:
        return self.compact.n

    @property
    def k(self) -> int:
        return self.compact.k

    @property
    def objective_kind(self) -> str:
        data = self.objective_data
        return "qp" if data is not None and data.is_quadratic else "lp"

    def constraints_fingerprint(self) -> str:
        from hardlinear.problems.base import Problem

        return Problem.constraints_fingerprint(self)  # type: ignore[arg-type]  # reads compact and form only

    def fingerprint(self) -> str:
        """The constraints' and the objective's fingerprint (the cost-aware rule's cache key)."""
        from hardlinear.problems.base import Problem

        if self.objective_data is None:
            return self.constraints_fingerprint()
        base = Problem.fingerprint(self)  # type: ignore[arg-type]
        if self.cost_input_matrix is None and self.cost_moments is None:
            return base
        import hashlib

        h = hashlib.sha256(base.encode())
        for arr in (self.cost_input_matrix, *(self.cost_moments or ())):
            if arr is not None:
                h.update(np.ascontiguousarray(arr).tobytes() + np.asarray(np.shape(arr)).tobytes())
        return h.hexdigest()

    def __repr__(self) -> str:
        c = self.compact
        kind = "input-dependent" if c.input_dependent_lhs else "constant"
        where = "" if getattr(c, "polytope", None) is None else f", input polytope of {c.polytope.A.shape[0]} rows"
        return f"LinearConstraints({self.name!r}: n={c.n}, m_eq={c.m_eq}, m_ineq={c.m_ineq}, k={c.k}, {kind} left-hand side{where})"


def as_rule_target(obj: Any) -> Any:
    """What :func:`~hardlinear.rules.decision_rule.solve_decision_rule` works on: a Problem or
    :class:`LinearConstraints` as they are, a bare :class:`ConstraintFamily` wrapped (inequality form)."""
    if isinstance(obj, ConstraintFamily):
        return LinearConstraints.from_family(obj)
    if not hasattr(obj, "compact"):
        raise TypeError(
            f"expected a Problem, hardlinear.LinearConstraints or a ConstraintFamily; got {type(obj).__name__}"
        )
    return obj


# --- checks -------------------------------------------------------------------------------------------------
def _names(family: ConstraintFamily, **given: Any) -> tuple[list[str] | None, ...]:
    """``(variable_names, eq_names, ineq_names)``: each a list of strings as long as what it names, or None; a
    ValueError naming the argument and the length it needs otherwise (as a problem file's names are checked)."""
    from hardlinear.problems.linear import names_from_arrays

    arrays = {}
    for key, value in given.items():
        if value is None:
            continue
        if isinstance(value, str) or not all(isinstance(v, str | np.str_) for v in np.asarray(value, dtype=object).ravel()):
            raise ValueError(f"{key} must be a sequence of strings, one per {'variable' if key == 'variable_names' else 'row'}; "
                             f"got {type(value).__name__}")
        arrays[key] = np.asarray([str(v) for v in value])
    names = names_from_arrays(arrays, family)
    return names["variable_names"], names["eq_names"], names["ineq_names"]


def _input_set(lo: Any, hi: Any, A_in: Any, b_in: Any) -> tuple[InputBox, Any]:
    """The box, or the polytope and its bounding box (widened by 1e-9 relative, cut by the box when given)."""
    if (lo is None) != (hi is None):
        raise ValueError("give both lo and hi (the input box), or neither (with A_in, b_in: an input polytope)")
    if (A_in is None) != (b_in is None):
        raise ValueError("give both A_in and b_in: the input polytope is {theta : A_in theta <= b_in}")
    if lo is None and A_in is None:
        raise ValueError("give the input set: a box (lo, hi), a polytope (A_in, b_in), or both")
    box = _box(lo, hi) if lo is not None else None
    if A_in is None:
        return box, None
    from hardlinear.constraints.polytope import bounded_input_set

    A = _finite(_real(A_in, "A_in"), "A_in")
    b = _finite(_real(b_in, "b_in"), "b_in")
    polytope, blo, bhi = bounded_input_set(A, b, None if box is None else box.lo, None if box is None else box.hi)
    return InputBox(blo, bhi), polytope


def _cost_side(c: Any, n: int, k: int, box: InputBox) -> tuple[Any, np.ndarray | None]:
    """``c`` as ``(c0 or None, C (n, k) or None)``: a vector, ``(c0, C)`` or a callable affine in ``theta``."""
    if c is None:
        return None, None
    if callable(c):
        c0 = _finite(_real(_call(c, "c", np.zeros(k)), "c(0)"), "c(0)").reshape(-1)
        if c0.shape != (n,):
            raise ValueError(f"c(theta) has {c0.size} entries but the constraints have n = {n} variables")
        C = np.column_stack([_finite(_real(_call(c, "c", e), f"c(e_{j})"), "c").reshape(-1) - c0 for j, e in enumerate(np.eye(k))]) if k else np.zeros((n, 0))
        _check_affine(lambda th: _real(_call(c, "c", th), "c").reshape(-1), lambda th: c0 + C @ th, "c", box)
        return c0, (C if np.any(C) else None)
    if isinstance(c, tuple):
        if len(c) != 2:
            raise ValueError(f"c as a tuple must be (c0, C) for c(theta) = c0 + C @ theta; got {len(c)} items")
        C = _finite(_real(c[1], "c's input matrix C"), "c's input matrix C")
        if C.ndim == 1 and k == 1:
            C = C.reshape(-1, 1)
        if C.shape != (n, k):
            raise ValueError(f"c's input matrix C has shape {C.shape}; it must be (n, k) = ({n}, {k}): one row per variable, one column per input")
        return c[0], (C if np.any(C) else None)
    return c, None


def _cost_moments(inputs: Any, box: InputBox, polytope: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``(E[x], E[x x'])`` for the cost-aware rule: of the given inputs, of uniform samples of a polytope, or None
    (the box's closed form)."""
    from hardlinear.constraints.moments import sample_moments
    from hardlinear.constraints.polytope import MOMENT_SAMPLES

    if inputs is None:
        return None if polytope is None else sample_moments(polytope.sample(MOMENT_SAMPLES, box.lo, box.hi, seed=0))
    xi = _finite(_real(inputs, "inputs"), "inputs")
    if xi.ndim != 2 or xi.shape[1] != box.k or len(xi) == 0:
        raise ValueError(f"inputs must be (N >= 1, k = {box.k}); got shape {xi.shape}")
    outside = ~np.all((xi >= box.lo - 1e-9 * (1 + np.abs(box.lo))) & (xi <= box.hi + 1e-9 * (1 + np.abs(box.hi))), axis=1)
    if polytope is not None:
        outside |= ~polytope.contains(xi)
    if outside.any():
        raise ValueError(
            f"{int(outside.sum())} of {len(xi)} inputs lie outside the input set (first: row {int(np.argmax(outside))}): "
            "the rule's guarantee covers the input set only; widen it or drop those inputs"
        )
    return sample_moments(xi)


def _box(lo: Any, hi: Any) -> InputBox:
    lo_a, hi_a = _real(lo, "lo").reshape(-1), _real(hi, "hi").reshape(-1)
    if lo_a.shape != hi_a.shape:
        raise ValueError(f"lo has {lo_a.size} entries but hi has {hi_a.size}: both must have k entries (one per input)")
    for name, arr in (("lo", lo_a), ("hi", hi_a)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ValueError(f"{name} is not finite at inputs {bad[:10].tolist()}: the rule needs a bounded input box")
        check_magnitudes(arr, name)
    swapped = np.flatnonzero(lo_a > hi_a)
    if swapped.size:
        raise ValueError(f"lo > hi at inputs {swapped[:10].tolist()}: swap them (lo is the lower corner of the box)")
    return InputBox(lo_a, hi_a)


def _real(value: Any, name: str) -> np.ndarray:
    """A real float64 array (text, objects and complex numbers refused, naming ``name``)."""
    return real_array(value, name)


def _finite(arr: np.ndarray, name: str) -> np.ndarray:
    """``arr`` when every entry is finite and within float64's working range (:mod:`hardlinear.constraints.arrays`)."""
    if not np.all(np.isfinite(arr)):
        where = np.argwhere(~np.isfinite(arr))[0].tolist()
        raise ValueError(f"{name} has a NaN or inf entry (first at index {where}): every coefficient must be finite")
    return check_magnitudes(arr, name)


def _call(f: Callable, name: str, theta: np.ndarray) -> Any:
    """``f(theta)``; an error inside the user's callable is reported as theirs, with the input it was called at."""
    try:
        return f(theta)
    except Exception as err:  # noqa: BLE001 - any error of a user's function means the same thing here
        raise ValueError(
            f"{name}(theta) raised {type(err).__name__}: {err} (called at theta = {np.array2string(theta, precision=4)}); "
            f"{name} must return its value for every theta of the input box"
        ) from err


def _columns(lhs: dict[str, Any]) -> int:
    cols = {}
    for label, mat in lhs.items():
        shape = mat.shape if sp.issparse(mat) else np.shape(mat)
        if len(shape) != 2:
            raise ValueError(f"{label} must be a 2-D matrix (rows, n); got shape {tuple(shape)}")
        cols[label] = shape[1]
    if len(set(cols.values())) > 1:
        raise ValueError(f"G has {cols['G']} columns but H has {cols['H']}: both must have n columns (one per output)")
    return next(iter(cols.values()))


def _matrix(mat: Any, name: str, n: int) -> np.ndarray:
    arr = _real(mat, name)
    if arr.ndim != 2 or arr.shape[1] != n:
        raise ValueError(f"{name} must be (rows, n = {n}); got shape {arr.shape}")
    return _finite(arr, name)


def _rhs(side: Side, name: str, lhs: str, rows: int, k: int, box: InputBox) -> np.ndarray:
    """``(rows, k + 1)``: ``[constant | input matrix]`` for ``x = (1, theta)``."""
    if callable(side):
        const = _vector(_call(side, name, np.zeros(k)), f"{name}(0)", rows, lhs)
        B = np.zeros((rows, k + 1))
        B[:, 0] = const
        for j in range(k):
            e = np.zeros(k)
            e[j] = 1.0
            B[:, j + 1] = _vector(_call(side, name, e), f"{name}(e_{j})", rows, lhs) - const
        _check_affine(lambda th: _vector(_call(side, name, th), name, rows, lhs), lambda th: B[:, 0] + B[:, 1:] @ th, name, box)
        return B
    if isinstance(side, tuple):
        if len(side) != 2:
            raise ValueError(f"{name} as a tuple must be (constant, matrix) for {name} = constant + matrix @ theta; got {len(side)} items")
        const = _vector(side[0], f"{name}'s constant", rows, lhs)
        mat = _finite(_real(side[1], f"{name}'s input matrix"), f"{name}'s input matrix")
        if mat.ndim == 1 and k == 1:
            mat = mat.reshape(-1, 1)
        if mat.shape != (rows, k):
            raise ValueError(
                f"{name}'s input matrix has shape {mat.shape}; it must be ({lhs} rows, k) = ({rows}, {k}): one row per "
                f"row of {lhs}, one column per input (lo has k = {k} entries)"
            )
        return np.hstack([const[:, None], mat])
    const = _vector(side, name, rows, lhs)
    return np.hstack([const[:, None], np.zeros((rows, k))])


def _vector(value: Any, name: str, rows: int, lhs: str) -> np.ndarray:
    arr = _finite(_real(value, name), name)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.shape != (rows,):
        raise ValueError(f"{name} has shape {arr.shape} but {lhs} has {rows} rows: one right-hand side per row of {lhs}")
    return arr


def _stack(lhs: Matrix | Callable, name: str, shape: tuple[int, int], box: InputBox) -> np.ndarray:
    """``(k + 1, rows, n)`` slices of ``lhs(theta) = L_0 + sum_j theta_j L_j`` (a constant matrix: one slice)."""
    k = box.k
    out = np.zeros((k + 1, *shape))
    if not callable(lhs):
        out[0] = _matrix(lhs, name, shape[1])
        return out
    out[0] = _matrix(_call(lhs, name, np.zeros(k)), f"{name}(0)", shape[1])
    for j in range(k):
        e = np.zeros(k)
        e[j] = 1.0
        out[j + 1] = _matrix(_call(lhs, name, e), f"{name}(e_{j})", shape[1]) - out[0]
    _check_affine(lambda th: _matrix(_call(lhs, name, th), name, shape[1]), lambda th: np.tensordot(np.r_[1.0, th], out, axes=1), name, box)
    return out


def _check_affine(f: Callable, model: Callable, name: str, box: InputBox) -> None:
    theta = box.lo + np.random.default_rng(0).random(box.k) * (box.hi - box.lo)
    got, want = f(theta), model(theta)
    err = float(np.abs(got - want).max()) if np.size(got) else 0.0
    if err > 1e-9 * (1.0 + float(np.abs(want).max()) if np.size(want) else 1.0):
        raise ValueError(
            f"{name}(theta) is not affine in theta: at a point of the box it differs by {err:.3g} from its values at "
            "theta = 0 and the unit vectors. The rule needs constraints affine in the input"
        )


def _objective(c: Any, Q: Any, n: int):
    from hardlinear.problems.base import Objective

    if c is None and Q is None:
        return None
    c_arr = np.zeros(n) if c is None else _finite(_real(c, "c"), "c").reshape(-1)
    if c_arr.shape != (n,):
        raise ValueError(f"c has {c_arr.size} entries but the constraints have n = {n} variables")
    Q_mat = None
    if Q is not None:
        Q_arr = _finite(_real(Q, "Q"), "Q")
        if Q_arr.shape != (n, n):
            raise ValueError(f"Q has shape {Q_arr.shape}; it must be (n, n) = ({n}, {n})")
        if not np.allclose(Q_arr, Q_arr.T, atol=1e-12 * (1.0 + np.abs(Q_arr).max())):
            raise ValueError("Q must be symmetric (the objective is c'y + 1/2 y'Qy)")
        if np.linalg.eigvalsh(Q_arr).min() < -1e-9 * (1.0 + np.abs(Q_arr).max()):
            raise ValueError("Q must be positive semidefinite: the cost-aware rule minimises a convex expected cost")
        Q_mat = sp.csr_matrix(Q_arr)
    return Objective(c=c_arr, Q=Q_mat)
