# HardLinear. `make help` lists the targets. Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch that these machines keep on disk; on a GPU box install your CUDA build of torch
# into .venv first and call `make install TORCH=` (empty: keep the torch that is there).
TORCH ?= torch==2.13.0
EXTRAS ?= dev,wandb,gurobi
ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install run test test-slow lint data paper paper-tables tables figures aggregate bench bench-quick gpu-check sizes clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if [ -n "$(TORCH)" ]; then $(PY) -m pip install -q "$(TORCH)"; fi
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	@touch $@

install: $(VENV)/.installed  ## create .venv and install the package with its extras

run: install  ## the default experiment: proposed method on dcopf_14 (no licence, no account, no network)
	$(PY) run.py $(ARGS)

test: install  ## the test suite (slow tests excluded)
	$(PY) -m pytest -q $(ARGS)

test-slow: install  ## only the slow tests
	$(PY) -m pytest -q -m slow $(ARGS)

lint: install  ## ruff
	$(VENV)/bin/ruff check src tests scripts benchmarks run.py

sizes: install  ## the paper's problem sizes beside ours
	$(PY) scripts/sizes.py

data: install  ## build the validation and test sets of the paper's problems (cached under data/cache)
	$(PY) scripts/build_data.py

paper: install  ## run every paper experiment (long: see README "Reproduce the paper")
	$(PY) scripts/run_paper.py $(ARGS)

paper-tables: install  ## the committed reproduction: tables, figures and provenance of the paper study (results/paper)
	$(PY) scripts/paper_snapshot.py $(ARGS)

# Selection shared by tables, figures and aggregate: RESULTS (roots: record dirs and legacy CSVs), STUDY, WHERE.
RESULTS ?= results results/paper/runs.csv
SELECT = --results $(RESULTS) $(if $(STUDY),--study $(STUDY)) $(if $(WHERE),--where $(WHERE))

aggregate: install  ## the derived results table (one row per run) -> results/aggregated.csv; STUDY=, WHERE='key=value'
	$(PY) scripts/aggregate.py $(SELECT) --out $(or $(OUT),results/aggregated.csv)

tables: install  ## the paper's tables per study -> results/tables/<study>/*.md, *.tex; STUDY=, WHERE='key=value'
	$(PY) scripts/make_tables.py $(SELECT) --out $(or $(OUT),results/tables)

figures: install  ## figures per study (gap-time, violations, training curves) -> results/figures/<study>/*.png, *.pdf; STUDY=, WHERE='key=value'
	$(PY) scripts/make_figures.py $(SELECT) --out $(or $(OUT),results/figures)

bench: install  ## all benchmarks (long)
	$(PY) benchmarks/run_all.py --full

bench-quick: install  ## a small version of the benchmarks (minutes)
	$(PY) benchmarks/run_all.py --quick

clean:  ## remove caches and run directories (keeps committed results)
	rm -rf data/cache results/runs results/multirun outputs multirun .pytest_cache

# Not behind `install`: a GPU box without network runs the .venv carried with the checkout as it is.
gpu-check:  ## the GPU end to end: run.py device=cuda (proposed, pinet, hardnet_aff, dc3 on dc3_qp, dcopf_118) and bench_methods on CUDA vs CPU -> results/bench/gpu/<date>/; DRY_RUN=1: on the CPU, tiny settings
	@test -x $(PY) || { echo "gpu-check: $(PY) not found; carry the project's .venv (torch with CUDA and every dependency) with the checkout: nothing is installed here"; exit 1; }
	$(PY) benchmarks/gpu_check.py $(if $(DRY_RUN),--dry-run) $(ARGS)
