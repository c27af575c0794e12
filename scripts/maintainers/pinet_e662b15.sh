#!/usr/bin/env bash
# Issue 41: Pinet's published DC3 runs (antonioterpin/pinet @ e662b15) with conf/experiment/pinet_e662b15.yaml,
# one run at a time: every variant of a seed before the next seed, the implicit high-accuracy runs first.
# Records land in results/pinet/e662b15/<problem>/<variant>/seed<N> (record.json and epochs.csv are committed).
#   SEEDS="0 1 2 3 4" PROBLEMS="dc3_qp dc3_nonconvex" bash scripts/maintainers/pinet_e662b15.sh
set -euo pipefail
SEEDS=${SEEDS:-"0 1 2 3 4"}
PROBLEMS=${PROBLEMS:-"dc3_qp dc3_nonconvex"}
PYTHON=${PYTHON:-python}
declare -A VARIANT=(
  [implicit-high]=""
  [fixed_point-high]="method.backward=fixed_point method.n_iter_bwd=25"
  [unrolled-high]="method.backward=unrolled"
  [implicit-low]="method.n_iter_test=30 method.n_iter_bwd=15"
  [fixed_point-low]="method.backward=fixed_point method.n_iter_bwd=75 method.n_iter_train=150 method.n_iter_test=30 trainer.epochs=25"
  [unrolled-low]="method.backward=unrolled method.n_iter_train=150 method.n_iter_test=30"
)
ORDER=${ORDER:-"implicit-high fixed_point-high unrolled-high implicit-low fixed_point-low unrolled-low"}
for seed in $SEEDS; do
  for variant in $ORDER; do
    for problem in $PROBLEMS; do
      # shellcheck disable=SC2086
      $PYTHON run.py +experiment=pinet_e662b15 problem="$problem" method=pinet seed="$seed" ${VARIANT[$variant]} \
        progress=false results_dir=results/pinet/e662b15 \
        hydra.run.dir="results/pinet/e662b15/$problem/$variant/seed$seed"
    done
  done
done
