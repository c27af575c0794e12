"""The rules written down: valid ranges and choices of the config keys, section by section.

The keys and their types come from the code they configure (see :mod:`.sections`); these tables add what a
signature cannot say: the top level and ``data`` (key -> type, range or choices), and the ranges of the
network, eval, trainer, problem and method options. :class:`Range` is how a table says an interval.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """An interval of valid numbers; ``str`` gives how the error message says it (``in (0, 1)``, ``>= 1``)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def __contains__(self, value: float) -> bool:
        if self.lo is not None and not (value > self.lo if self.lo_open else value >= self.lo):
            return False
        if self.hi is not None and not (value < self.hi if self.hi_open else value <= self.hi):
            return False
        return value == value  # NaN is in no range

    def __str__(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {self.lo:g}"
        return f"{'<' if self.hi_open else '<='} {self.hi:g}"


POSITIVE, NON_NEGATIVE, AT_LEAST_1 = Range(lo=0, lo_open=True), Range(lo=0), Range(lo=1)
MAX_THREADS = 1024  # = hardlinear.runtime.threads.MAX_THREADS (that module sizes the pools before this one may load)
"""Most ``threads`` a run may ask for: more than any node's cores (a larger count only oversubscribes, and
``threads=100000`` made OpenBLAS fail to allocate its buffers and the process segfault)."""
MAX_ITERATIONS = 100_000
"""Most steps an iterative option may ask for (the largest any study runs is Pinet's 20,000 test iterations):
``refine_eval_steps=10**9`` made a reload's probe replay run for days."""
MAX_HIDDEN, MAX_LAYERS = 65_536, 256
"""The largest network a config may ask for (``network.hidden=10**7`` asked the allocator for 40 TB)."""
ITERATIONS, STEPS = Range(0, MAX_ITERATIONS), Range(1, MAX_ITERATIONS)
SEED_LIMIT = 2**63
"""Seeds are in ``[0, 2**63)``: torch generators take a signed 64-bit seed (and offsets are added to it)."""
MISSING_VALUE = "???"

# --- top level: key -> (type, range or choices) ---
DEVICE_PATTERN = re.compile(r"cpu|cuda(?::(\d+))?")
DTYPE_NAMES = ("float32", "float64")
TOP_LEVEL: dict[str, tuple[Any, Range | tuple | None]] = {
    "seed": (int, NON_NEGATIVE),  # and < SEED_LIMIT (_check_seed)
    "device": (str, None),
    "dtype": (str, DTYPE_NAMES),
    "threads": (int, Range(1, MAX_THREADS)),
    "cache_dir": (str, None),
    "results_dir": (str, None),
    "study": (str | None, None),
    "experiment": (str | None, None),
    "rerun": (bool, None),
    "progress": (bool, None),
    "network": (dict, None),
    "data": (dict, None),
    "eval": (dict, None),
    "logger": (dict, None),
    "problem": (dict, None),
    "method": (dict, None),
    "trainer": (dict, None),
}
OPTIONAL_TOP_LEVEL = ("hydra",)  # present only when a caller composes with return_hydra_config=True
SEARCH_TOP_LEVEL = ("search",)  # present in a hyperparameter search (conf/hparams_search/): what the sweeper minimises
DATA: dict[str, tuple[Any, Range | tuple | None]] = {
    "val_size": (int, Range(1, 10_000_000)),  # each instance is solved by the reference solver
    "test_size": (int, Range(1, 10_000_000)),
    "test_seed": (int, NON_NEGATIVE),
    "solver": (str | None, None),  # choices: hardlinear.solvers.BACKENDS (checked below)
    "workers": (int, AT_LEAST_1),
    "executor": (str, ("process", "dask")),  # = hardlinear.solvers.EXECUTORS (tested)
    "scheduler": (str | None, None),  # a dask scheduler's address; only with executor=dask (checked below)
    "lazy_rows": (bool | None, None),  # true only where the problem offers lazy rows (checked when the problem is built)
}
NETWORK_RANGES = {"hidden": Range(1, MAX_HIDDEN), "layers": Range(0, MAX_LAYERS), "dropout": Range(0, 1, hi_open=True)}
EVAL_RANGES = {
    "warmup": NON_NEGATIVE, "time_instances": AT_LEAST_1, "throughput_batch": AT_LEAST_1,
    "diverged_gap": POSITIVE, "diverged_viol": POSITIVE,
}
TRAINER_RANGES = {
    "epochs": NON_NEGATIVE,
    "pretrain_epochs": NON_NEGATIVE,
    "batches_per_epoch": AT_LEAST_1,
    "batch_size": Range(lo=2),  # batch normalisation needs two rows
    "lr": POSITIVE,
    "weight_decay": NON_NEGATIVE,
    "train_size": AT_LEAST_1,
    "supervised_size": AT_LEAST_1,
    "grad_clip": POSITIVE,
    "val_every": AT_LEAST_1,
    "time_budget_s": POSITIVE,
    "plateau_factor": Range(0, 1, lo_open=True, hi_open=True),
    "plateau_patience": NON_NEGATIVE,
    "early_stop_patience": AT_LEAST_1,
    "time_cap_min": POSITIVE,
}

# --- problem ---
PROBLEM_META_KEYS = ("name", "train")  # config keys that are not constructor arguments
PROBLEM_RANGES = {
    "uncertainty": Range(0, 1, lo_open=True, hi_open=True),
    "extra_inputs": NON_NEGATIVE,
    "budget": POSITIVE,
    "min_government": NON_NEGATIVE,
    "risk_aversion": POSITIVE,
}
PROBLEM_SEQUENCES = ("yields", "quality", "maturity", "government", "volatility")  # one entry per asset
PROBLEM_NONE_PASSED = ("uncertainty",)  # the one option the harness passes on even when null
# Module constants that list a problem option's choices: option -> constant name in the class's module.
PROBLEM_CHOICE_CONSTANTS = {
    "inputs": "INPUT_MODES",
    "quadratic_costs": "QUADRATIC_MODES",
    "susceptance": "SUSCEPTANCES",
    "coupling": "COUPLINGS",
    "split": "SPLITS",
    "sampler": "SAMPLERS",
}

# --- method: rules by parameter name, for every method that has the parameter ---
HYDRA_KEYS = ("_target_", "_convert_", "_recursive_", "_partial_", "_args_")
METHOD_RANGES = {
    "penalty": NON_NEGATIVE,  # 0 = objective only (the paper's penalty grids start at 0)
    "tol": POSITIVE,
    "max_iter": STEPS,
    "train_steps": ITERATIONS,
    "train_iter": ITERATIONS,
    # iteration counts and sizes of the iterative layers (Proposed's refinement, Pinet, FSNet, HardNet-Aff)
    "refine_steps": STEPS, "refine_eval_steps": STEPS, "n_iter_train": ITERATIONS, "n_iter_test": STEPS,
    "n_iter_bwd": ITERATIONS, "equilibrate_iter": ITERATIONS, "max_lifted": Range(1, MAX_ITERATIONS),
    "memory": STEPS, "unrolled": ITERATIONS, "max_ls": ITERATIONS, "decay_tol_step": STEPS,
    "rank_checks": ITERATIONS,
    "refine_sigma": POSITIVE, "refine_omega": Range(0, 2, lo_open=True, hi_open=True),
    "sigma": POSITIVE, "omega": Range(0, 2, lo_open=True, hi_open=True),
    "bwd_tol": NON_NEGATIVE, "equilibrate_tol": NON_NEGATIVE,
    "lr": POSITIVE,
    "momentum": Range(0, 1, hi_open=True),
    "relaxation": Range(0, 2, lo_open=True, hi_open=True),
    "max_extrapolation": Range(lo=1),
    "eq_fraction": Range(0, 1),
}
