"""PTDF flows and PTDF rows through a sparse factor of the bus susceptance matrix, in numpy, for the solver side.

Why: the flows of nodal injections ``p`` are ``pf = Bf theta`` with ``Bbus theta = p`` (reference bus removed), so
``pf = Bf Bbus^-1 p = PTDF p`` without forming the dense PTDF (1.2 GB at case9241). Row ``l`` of the PTDF is
``Bf[l] Bbus^-1``, i.e. the solution of ``Bbus^T r = Bf[l]^T`` (``Bbus`` is symmetric): one sparse solve per line,
what the lazy reference solves (:mod:`hardlinear.problems.ed_reference`) need for each line row they add.

The matrices come from :func:`susceptance_matrices`, which :func:`hardlinear.problems.ed.ptdf_matrix` and the layers'
flows (:mod:`hardlinear.problems.flows`) build from too, so all give the same numbers to rounding (tested to 1e-12). The torch-side flows of the layers live
elsewhere; this one has no gradient and no torch.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def susceptance_matrices(f_bus: np.ndarray, t_bus: np.ndarray, b: np.ndarray, nb: int, ref: int) -> tuple[sp.csr_matrix, sp.csc_matrix, np.ndarray]:
    """``(Bf, Bbus, keep)``: the branch-bus ``Bf = diag(b) A`` and bus ``Bbus = A' diag(b) A`` susceptance matrices
    of the DC model with the reference bus's column (and row) removed, and the kept buses' indices."""
    nl = len(f_bus)
    rows = np.r_[np.arange(nl), np.arange(nl)]
    A = sp.csr_matrix((np.r_[np.ones(nl), -np.ones(nl)], (rows, np.r_[f_bus, t_bus])), shape=(nl, nb))
    keep = np.setdiff1d(np.arange(nb), [ref])
    Bf = (sp.diags(b) @ A).tocsc()[:, keep].tocsr()
    Bbus = (A.T @ sp.diags(b) @ A).tocsc()[keep][:, keep].tocsc()
    return Bf, Bbus, keep


class SparsePTDF:
    """The PTDF of a DC network as a factor, on its ``lines`` (default: all): ``flows`` and ``rows`` on the buses'
    full index (the reference bus's column is zero, as in the dense matrix). Picklable: the factor is rebuilt on
    first use after unpickling (a SuperLU object does not pickle; the factor takes milliseconds)."""

    def __init__(self, f_bus: np.ndarray, t_bus: np.ndarray, b: np.ndarray, nb: int, ref: int,
                 lines: np.ndarray | None = None) -> None:
        self.f_bus, self.t_bus = np.asarray(f_bus, dtype=np.int64), np.asarray(t_bus, dtype=np.int64)
        self.b, self.nb, self.ref = np.asarray(b, dtype=np.float64), int(nb), int(ref)
        self.lines = np.arange(len(self.f_bus)) if lines is None else np.asarray(lines, dtype=np.int64)
        self.keep = np.setdiff1d(np.arange(self.nb), [self.ref])
        # a bus's row in the reduced system; the reference bus points at a zero appended to the angles
        position = np.full(self.nb, len(self.keep))
        position[self.keep] = np.arange(len(self.keep))
        self._f, self._t = position[self.f_bus[self.lines]], position[self.t_bus[self.lines]]
        self._b = self.b[self.lines]
        self._lu: spla.SuperLU | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_lu": None}

    def _factor(self) -> spla.SuperLU:
        if self._lu is None:
            _, bbus, _ = susceptance_matrices(self.f_bus, self.t_bus, self.b, self.nb, self.ref)
            self._lu = spla.splu(bbus, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        return self._lu

    def flows(self, p: np.ndarray) -> np.ndarray:
        """``p: (nb,)`` or ``(nb, B)`` nodal injections (p.u.) -> flows on the lines, ``(L,)`` or ``(L, B)``:
        ``b (theta_f - theta_t)`` with ``Bbus theta = p`` (the reference bus's injection ignored: the slack takes
        it)."""
        p = np.asarray(p, dtype=np.float64)
        theta = self._factor().solve(np.ascontiguousarray(p[self.keep]))
        theta = np.concatenate([theta, np.zeros((1,) + theta.shape[1:])])
        scale = self._b if theta.ndim == 1 else self._b[:, None]
        return scale * (theta[self._f] - theta[self._t])

    def rows(self, which: np.ndarray) -> np.ndarray:
        """``(len(which), nb)``: the PTDF rows of the lines at positions ``which`` of ``lines``, by one batched
        sparse solve with ``Bbus^T`` (right-hand sides: ``Bf``'s rows, ``+-b`` at the two ends), zero in the
        reference bus's column."""
        which = np.asarray(which, dtype=np.int64)
        out = np.zeros((len(which), self.nb))
        if len(which):
            rhs = np.zeros((len(self.keep) + 1, len(which)))  # the last row is the reference bus's: dropped
            cols = np.arange(len(which))
            rhs[self._f[which], cols] += self._b[which]
            rhs[self._t[which], cols] -= self._b[which]
            out[:, self.keep] = self._factor().solve(np.ascontiguousarray(rhs[:-1]), trans="T").T
        return out
