"""One run or a sweep: ``hardlinear run problem=dcopf_118 method=proposed`` (``-m`` for sweeps), the configs shipped
inside the package; ``python run.py ...`` in a checkout is the same command on the checkout's ``conf/``.

``--config-dir DIR`` (Hydra's flag) puts your own config folder on the search path after the shipped one: a file
``DIR/problem/my_problem.yaml`` is then ``problem=my_problem``, ``DIR/experiment/mine.yaml`` is
``+experiment=mine``; a name the shipped configs already use resolves to the shipped file.

Before Hydra starts: the harness extra must be installed (one line naming it otherwise), and every override must
name a key or a choice that exists (Hydra's own answer to a misspelt key is the wrong fix, "use +key"), and the
composed ``hydra.callbacks`` may name only hardlinear's own callbacks: a config folder runs only what it declares.
Your own callback runs when you allow it by name: ``HARDLINEAR_ALLOW_CALLBACKS=mylab.hooks.Notify hardlinear run ...``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_CONFIG_DIR: list[Path] = []
"""The primary config folder of this process's run (set by :func:`main`; the shipped one in a launcher's worker)."""
_PROG: list[str] = []
"""How this process was started (``hardlinear run`` or ``run.py``): the closing lines name the matching commands."""


def config_dirs_given(argv: Sequence[str]) -> list[Path]:
    """The folders named by Hydra's ``--config-dir DIR`` / ``--config-dir=DIR`` / ``-cd DIR`` in ``argv``."""
    found = []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            found.append(Path(argv[i + 1]))
        elif arg.startswith("--config-dir="):
            found.append(Path(arg.split("=", 1)[1]))
    return found


def main(argv: Sequence[str] | None = None, prog: str = "hardlinear run", config_dir: str | Path | None = None) -> int:
    """Check the extra and the overrides, then hand ``argv`` to Hydra; 0, or 1 when a job of a sweep failed
    (a single run that fails exits 1 itself, with its one-line error)."""
    from hardlinear.commands import CONF
    from hardlinear.harness import require_extra
    from hardlinear.runtime.extras import MissingExtra

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        require_extra("run.py and hardlinear run (training and sweeps)")
    except MissingExtra as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    import hydra

    from hardlinear.harness.origin import git_sha
    from hardlinear.harness.overrides import hydra_target_errors, unknown_override_errors
    from hardlinear.harness.rundirs import register_resolvers

    git_sha()  # the commit of the code this process imports: kept for every record of the sweep
    primary = Path(config_dir or CONF).resolve()
    _CONFIG_DIR[:], _PROG[:] = [primary], [prog]
    register_resolvers()  # ${uid:} of the run and sweep directories (conf/config.yaml)
    user_dirs = config_dirs_given(argv)
    errors = [f"--config-dir {d}: no such folder; give the folder that holds your config groups (problem/, method/, ...)"
              for d in user_dirs if not d.is_dir()]
    errors = errors or unknown_override_errors(argv, primary, search_dirs=user_dirs)
    errors = errors or hydra_target_errors(argv, primary, search_dirs=user_dirs)  # before Hydra builds its callbacks
    if errors:  # before Hydra, whose answer to a misspelt key is the wrong fix ("use +key")
        print("\n".join(f"error: {e}" for e in errors), file=sys.stderr)
        return 1
    task = hydra.main(config_path=str(primary), config_name="config", version_base="1.3")(run_task)
    saved = sys.argv
    sys.argv = [prog, *argv]  # Hydra reads its command line from sys.argv
    try:
        task()
    finally:
        sys.argv = saved
    from hardlinear.harness.sweep import sweep_failed

    return 1 if sweep_failed() else 0  # a sweep with a failed job is not a success


def run_task(cfg: Any) -> float | None:
    """Hydra's task function: one job (a run, or one run of a sweep) from its composed ``cfg``. In a
    hyperparameter search (a config with ``search.metric``: conf/hparams_search/) it returns the run's value of that
    metric, which the sweeper minimises (:mod:`hardlinear.harness.search`); otherwise None."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from hardlinear.runtime.threads import size_native_pools

    size_native_pools(cfg.get("threads"))  # before numpy and torch load: pool sizes change rounding
    from hardlinear.commands import CONF
    from hardlinear.harness.runner import EXPECTED_ERRORS, error_line, full_errors, run, run_in_sweep
    from hardlinear.runtime.atomic import DiskFull

    hc = HydraConfig.get()
    try:
        from hardlinear.harness.pretraining import fit_pretraining
        from hardlinear.harness.trainer_choice import apply_trainer_choice

        note = apply_trainer_choice(cfg, hc.overrides.task, (_CONFIG_DIR or [CONF])[0])
        if note:  # the run's record (its config, train/epochs) and its done line say what ran
            print(f"[hardlinear] {note}", flush=True)
        note = fit_pretraining(cfg, hc.overrides.task)  # an explicit trainer.epochs wins over the pre-training schedule
        if note:
            print(f"[hardlinear] {note}", flush=True)
        if hc.mode == RunMode.MULTIRUN:
            row = run_in_sweep(cfg, hc.runtime.output_dir)  # a failing run is recorded and the sweep goes on
        else:
            row = run(cfg, hc.runtime.output_dir)
            if row is not None and row.get("status") == "ok":  # what to do next, with this run's own paths
                from omegaconf import OmegaConf

                from hardlinear.harness.checkpoint import files_to_name
                from hardlinear.harness.content import with_content
                from hardlinear.harness.next_steps import next_steps
                from hardlinear.harness.results import study_of

                study = study_of({"study": cfg.get("study"), "experiment": cfg.get("experiment")})
                print(next_steps(row["run_dir"], study, installed=_PROG[:1] == ["hardlinear run"],
                                 overrides=list(hc.overrides.task), files=files_to_name(with_content(OmegaConf.to_container(cfg, resolve=True))),
                                 results_dir=cfg.get("results_dir", "results"), config_dirs=config_dirs_given(sys.argv[1:])),
                      flush=True)
    except DiskFull as err:  # one line, not three chained tracebacks
        print(f"error: {err.strerror}", file=sys.stderr, flush=True)
        sys.exit(1)
    except KeyboardInterrupt:  # the run's record says status=interrupted
        print(f"\n[hardlinear] interrupted: recorded as status=interrupted in {hc.runtime.output_dir}", file=sys.stderr, flush=True)
        sys.exit(130)
    except EXPECTED_ERRORS as err:  # the message is the whole story; HYDRA_FULL_ERROR=1 shows the traceback
        if full_errors():
            raise
        print(f"error: {error_line(err)}", file=sys.stderr, flush=True)
        sys.exit(1)
    from hardlinear.harness.search import search_metric, search_objective

    metric = search_metric(cfg)
    return None if metric is None else search_objective(row, metric)
