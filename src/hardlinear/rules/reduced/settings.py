"""The reduced solver's settings: tolerances, iteration limits, step sizes, memory budgets and the order of the
sparse LP solvers, each with the measurement behind its value.

Each submodule imports the names it reads (``from hardlinear.rules.reduced.settings import X``), and each name is
read by one submodule only (``REGULARIZATION`` aside: a default argument in two). A test that changes a setting
patches it in the submodule that reads it (``interior_point.CHUNK_BYTES``, ``row_generation.SPARSE_LP_SOLVERS``):
patching it here changes nothing already imported. Where a setting is a default argument (``REGULARIZATION``,
``IPM_TOL``, ``PACKED_BYTES``, ``PCG_ITERATIONS``, ``VERIFY_CHUNK_ROWS``, ``COARSE_SEED_MIN_INPUTS``), that default
is fixed when its module is imported.
"""

IPM_TOL = 1e-9
REGULARIZATION = 1e-9
# The proximal term's weight in the final working set's objective, (eps/2)||W||^2 / |t|. Above this share the
# rule's margin may be below the LP's optimum (by at most (eps/2)||W_opt||^2): a warning says so, and with
# exact_optimum=True the working set is solved again with eps shrunk to bring the share here (at most
# PROXIMAL_RESOLVES times; a quadratic regularisation of an LP is exact below some eps, so the share need not go to
# zero). Measured: 0.082 at case9241_pegase with one area input (rule 2.3 % short; the optimal rule's ||W||^2 is
# ~140x the regularised one's), <= 7e-4 on 14-300 buses (margins equal to Clarabel's to 1e-7). With the re-solve,
# case9241's rounds after it each found one to three more rows and took 1-5 min: not finished in 32 min (t 0.00570
# of 0.00573 at round 17), against 17 min for the short rule; hence opt-in.
PROXIMAL_SHARE = 1e-3
PROXIMAL_RESOLVES = 3
MAX_IPM_ITERATIONS = 200
PCG_ITERATIONS = 50
# Conjugate-gradient iterations spent on the exact system before the step falls back to the regularised one
# (which its own factorisation preconditions exactly): near the optimum the exact one can take all 50, and each
# iteration is a pass over every input's block (measured: 85 s steps at case2000_goc under load).
EXACT_PCG_ITERATIONS = 10
# The interior point's starting absolute values (see solve_working_set): with every load of case2000_goc an input
# (q = 1010) a start of 1 each made the spreads start at ~1000 and its second round stall at gap 0.5.
START_SPREAD = 1.0
# Proximal (primal) and dual regularisation of each Newton system, relative to the data's scale.
PRIMAL_REGULARIZATION = 1e-8
DUAL_REGULARIZATION = 1e-8
# Near the optimum y/s spans ~1e-20..1e20 and the block elimination loses accuracy (at ~1e-7 relative gap on
# the paper's 14-bus case): the iteration then stops at the best point reached, if its gap is below STALL_GAP.
STALL_GAP = 1e-5
# Dual residual accepted (relative): the regularisation leaves ~1e-8; the margin is verified on the primal rule.
DUAL_TOL = 1e-6
# Row generation does not wait for a working set's optimum: from an iterate with a gap below PROBE_GAP on, the
# rows outside the set that the iterate's rule violates are added at once (a round that finds none runs on to
# IPM_TOL). Each round starts cold: a warm start from the previous round's iterate (new rows' slacks floored,
# their violation left as primal infeasibility) was measured slower at case2000_goc (the steps stay short).
PROBE_GAP = 1e-3
# A rule whose verified margin over every expression is within CERTIFY_GAP (relative) of the zero-spread bound
# is optimal to that gap and stops the solve (the tests ask 1e-6 against the interior point). Once an
# iterate's t is within POLISH_WINDOW of the bound, its offset W_0 is also re-optimised (an LP) before checking.
POLISH_WINDOW = 1e-5
CERTIFY_GAP = 1e-7
# The seed's least-squares rows and each round's new rows: d of them, at most WORKING_SET_STEP. A working set of
# |S| < d expressions is solved in a basis of |S| unknowns per input (_working_set), so its Newton steps cost
# O(q |S|^3) instead of O(q d^3) (d = 1,444 at case9241_pegase, 4,091 at case13659_pegase).
WORKING_SET_STEP = 500
# working_sets="sparse": each round adds up to SPARSE_STEP expressions.
SPARSE_STEP = 2000
# Tried in this order on each sparse working-set LP: HiGHS's interior point without crossover (no proximal term:
# any optimal rule), then Clarabel (with it). Clarabel first stopped with NumericalError on case9241_pegase's
# second working set (1,179 expressions, 117 s for the first); at case6470_rte (one area) HiGHS's rounds took
# 0.4-2.1 s against Clarabel's 2.6-2.9 s, both certified in 4 rounds.
SPARSE_LP_SOLVERS = ("highs", "clarabel")
COARSE_SEED_MIN_INPUTS = 200  # solve_with_coarse_seed: below this many inputs the rule is solved directly
POLISH_ROWS = 1000  # expressions in that LP (the smallest margins of the iterate's rule; at least 4 (d + 1))
# Per-input Cholesky factors (q d^2 float64) are kept between the two solves of a Newton step up to this size.
FACTOR_BUDGET_BYTES = 1.5e9
# Inputs processed together in one batched kernel: bounds the temporaries to CHUNK_BYTES (DEVICE_CHUNK_BYTES on a
# GPU, where small batches leave it idle; the temporaries of one chunk are ~5x this).
CHUNK_BYTES = 64e6
DEVICE_CHUNK_BYTES = 512e6
# On a GPU the kept factors and the packed outer products may use these shares of its free memory instead of
# FACTOR_BUDGET_BYTES and PACKED_BYTES, when larger (recomputing the factors in every block solve is what a
# small budget costs).
DEVICE_FACTOR_SHARE = 0.5
DEVICE_PACKED_SHARE = 0.2
# The working set's packed outer products (E d^2 / 2 float64) are kept up to this size; beyond it the blocks are
# formed as batched X' X products.
PACKED_BYTES = 512e6
# Rows of B_ineq - H F formed at once in the verification.
VERIFY_CHUNK_ROWS = 4096
