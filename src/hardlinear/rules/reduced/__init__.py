"""The robust LP of :mod:`hardlinear.rules.robust_lp` for large grids: the same LP, a structured solver.

Same program, same verified margin: ``max t`` over rules ``y = F x`` with ``G F = B_eq`` and every row's worst
case over the box at least ``w_i t``. What changes is how it is solved, so that memory stays linear in the
working set and the time in dense kernels:

1. **Sparse elimination of the equalities** (:func:`reduce_sparse`, :mod:`~hardlinear.rules.reduced.elimination`):
   ``F = F_p + N W`` with the min-norm particular solution ``F_p = G' (G G')^{-1} B_eq`` and an orthonormal basis
   ``N`` of ``null(G)`` obtained by projecting ``d = n - m_eq`` random vectors, both from one sparse LU of ``G G'``
   (``m_eq x m_eq``, as sparse as the grid's Laplacian). The dense SVD of ``G`` that
   :func:`~hardlinear.rules.robust_lp._reduce` uses needs ``O(n^2)`` memory (1.5-2 GB at 2,000 buses, ~35 GB at
   13,659); this needs ``O(n d)``. Falls back to the SVD when ``G`` has dependent rows (then ``G G'`` is singular).
2. **Closed-form robust rows**, one box-dual per two-sided expression, and **row generation**
   (:mod:`~hardlinear.rules.reduced.row_generation`) from the seed of the interior-point solver
   (:func:`~hardlinear.rules.robust_lp._seed`: the smallest half-ranges and the worst rows of the least-squares
   rule, here at most ``WORKING_SET_STEP`` of them, :func:`~hardlinear.rules.reduced.row_generation._seed_rule`),
   plus optional seed rows (:func:`solve_with_coarse_seed`: the working set of the same grid with loads aggregated
   by area). A round does not wait for its working set's optimum: from a gap of ``PROBE_GAP`` on, each iterate's
   rule is checked against every expression, and the round stops at the first one that violates rows outside the
   set (they are added), or that is **certified optimal** (:mod:`~hardlinear.rules.reduced.certification`): every
   spread is nonnegative, so the margin with all spreads zero
   (:func:`~hardlinear.rules.reduced.certification._best_offset`) bounds ``t*`` from above, and a rule whose margin
   over every expression is within ``CERTIFY_GAP`` (1e-7 relative) of that bound is optimal to that gap, whatever
   the working set (on the large PGLib cases ``t*`` is a generator's half-range, and this ends the solve long
   before the interior point's slow final steps on its degenerate optimal face). The seed's own rule is checked the
   same way before any step. The offset LPs (that bound, the seed's offset, the polish) are solved in the grid's
   sparse variables (:class:`~hardlinear.rules.reduced.elimination._OffsetLP`, a DC-OPF-sized LP), not in ``W_0``,
   where they are dense (``2 E (d + 1)`` nonzeros, which stopped case9241_pegase at 11 GB). A working set of
   ``|S| < d`` expressions is written in an orthonormal basis of its rows' span
   (:func:`~hardlinear.rules.reduced.row_generation._working_set`): the same LP and minimiser with ``|S|`` unknowns
   per input.
3. **A primal-dual interior point that exploits the block-angular structure** (:func:`solve_working_set`,
   :mod:`~hardlinear.rules.reduced.interior_point`). On a working set of ``E`` expressions the LP is, per input
   ``j`` (``q`` of them), a block ``(W_j, U_j)`` with ``-U_ej <= M_e W_j + C_ej <= U_ej``, and the blocks meet only
   in the ``E`` spread rows and in ``(W_0, t)``. Each Newton step eliminates every block on its own (a ``d x d``
   Cholesky of ``M' diag(delta_j) M`` per input; the blocks as one GEMM ``delta @ KR`` on the rows' packed outer
   products, the spread rows' Schur complement as two GEMMs over the stacked inverses: float64 BLAS-3 throughout),
   leaving a dense system of the spread rows (``<= 2E``) and ``(W_0, t)``. A general sparse LDL' of the assembled
   LP (Clarabel) fills in the same dense blocks with scalar kernels, and its memory grows with ``E q d`` nonzeros;
   here memory is ``O(E q + q d^2)`` (the per-input inverses are kept for the solves of each step when they fit in
   ``FACTOR_BUDGET_BYTES``, recomputed otherwise) and the time is ``O(q (E d^2 + E^2 d + d^3))`` per step, in
   chunks of inputs. ``device="cuda"`` runs these kernels and the conjugate gradients on a GPU
   (:class:`~hardlinear.rules.reduced.interior_point._NormalSolver`'s torch backend; ``benchmarks/bench_gpu.py``
   times it).
4. **Independent verification** of the rule (:func:`verified_row_margins_chunked`,
   :mod:`~hardlinear.rules.reduced.certification`): the worst slack over the box of every inequality row in
   float64, a chunk of rows at a time; ``t_star`` is that value, never the solver's.

With few inputs (zones, areas) the whole LP kept in the grid's sparse variables is smaller and faster
(:mod:`~hardlinear.rules.robust_lp_sparse`, which ``solver="auto"`` prefers while it fits). At case9241_pegase
with one area input this solver's rule is 2.3 % below the optimum: the proximal term ``(eps/2) ||W||^2`` below,
1e-9 of the data's scale (1,987 there), weighs 0.082 of ``t`` in the last working set, and the optimal rule is much
larger (``||W||^2`` = 63,143), so the regularised optimum trades margin for a smaller rule (benchmarks/README.md,
fourth and fifth passes). The rule is safe (the verified margin is reported) but not optimal there; the solve warns
when that share exceeds ``PROXIMAL_SHARE``, and ``exact_optimum=True`` re-solves with ``eps`` shrunk (exact on
14-300 buses even from ``eps`` = 1e-3; at case9241 not finished in 32 min).

Tolerances (:mod:`~hardlinear.rules.reduced.settings`, each with its measurement): the interior point stops at
relative primal residual and gap ``IPM_TOL`` (1e-9) and dual residual ``DUAL_TOL`` (1e-6; the regularisation
leaves ~1e-8). Each Newton system carries proximal terms ``PRIMAL_`` / ``DUAL_REGULARIZATION`` (1e-8 of the data's
scale) in its factorisation; conjugate gradients then solve the exact system, preconditioned by it. Near the
optimum the elimination's rounding can defeat them (``y/s`` spans ~1e-20..1e20): the iteration then returns the
best point reached if its gap is below ``STALL_GAP`` (1e-5) and records it (``info["ipm_gap"]``, the last
round's). The proximal term ``(eps/2) ||W||^2`` (``REGULARIZATION`` = 1e-9 relative) picks one rule among the many
optimal ones. None of this touches the guarantee: ``t_star`` is the verified margin of the rule actually returned.
Measured: ``t*`` equal to the interior point's (Clarabel) to 1e-6 relative or better on 14-300 buses
(benchmarks/README.md; tests/test_rule_solver_reduced.py).

The submodules hold one idea each and import in one direction only: ``settings`` <- ``elimination`` <-
``interior_point``, ``certification`` <- ``row_generation`` <- this package, which re-exports the public names
(a private one is imported from its submodule). The settings are not re-exported: a test that changes one patches
it in the submodule that reads it.
"""

from hardlinear.rules.reduced.certification import verified_row_margins_chunked
from hardlinear.rules.reduced.elimination import reduce_sparse
from hardlinear.rules.reduced.interior_point import packed_outer_products, solve_working_set
from hardlinear.rules.reduced.row_generation import (
    backend_device,
    expressions_of_rows,
    rows_of_expressions,
    solve_robust_lp_reduced,
    solve_with_coarse_seed,
)

__all__ = [
    "backend_device",
    "expressions_of_rows",
    "packed_outer_products",
    "reduce_sparse",
    "rows_of_expressions",
    "solve_robust_lp_reduced",
    "solve_with_coarse_seed",
    "solve_working_set",
    "verified_row_margins_chunked",
]
