#!/usr/bin/env bash
# Issue 41: the recommended refined setting (method=proposed_refined) on DC3's nine QP datasets, its nonconvex
# problem, DC-OPF 14/57/118 and the portfolio, seeds 0-2, with the final code. Records land in
# results/peers2026/records/frontier/<problem>-<eq>-<ineq>/<n>-...-seed<N> (record.json and epochs.csv committed).
# JOBS=2 runs two trainings at a time (hydra's joblib launcher); the table and the figure:
#   python scripts/maintainers/peers2026_frontier.py --figure results/peers2026/frontier.png
#   JOBS=2 bash scripts/maintainers/refined_frontier.sh
set -euo pipefail
PYTHON=${PYTHON:-python}
JOBS=${JOBS:-1}
SEEDS=${SEEDS:-0,1,2}
OUT=${OUT:-results/peers2026/records/frontier}
run() {  # $1: a name for the sweep folder, the rest: overrides
  local name=$1; shift
  # shellcheck disable=SC2068
  $PYTHON run.py -m study=peers2026 threads=1 progress=false method=proposed_refined seed="$SEEDS" \
    hydra/launcher=joblib hydra.launcher.n_jobs="$JOBS" hydra.sweep.dir="$OUT/$name" $@
}
run dc3_qp-eq problem=dc3_qp problem.num_eq=10,30,50,70,90
run dc3_qp-ineq problem=dc3_qp problem.num_ineq=10,30,70,90
run dc3_nonconvex problem=dc3_nonconvex
run dcopf-portfolio problem=dcopf_14,dcopf_57,dcopf_118,portfolio trainer=default   # as measured: the paper's trainer (not the method's own, conf/trainer/tuned.yaml)
