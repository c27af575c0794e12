"""Entry point: ``python run.py problem=dcopf_118 method=proposed`` (``-m`` for sweeps)."""

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hardlinear.threads import size_native_pools

    size_native_pools(cfg.get("threads"))  # before numpy and torch load: pool sizes change rounding
    from hardlinear.atomic import DiskFull
    from hardlinear.harness.runner import EXPECTED_ERRORS, error_line, full_errors, run, run_in_sweep

    hc = HydraConfig.get()
    try:
        from hardlinear.harness.trainer_choice import apply_trainer_choice

        note = apply_trainer_choice(cfg, hc.overrides.task, Path(__file__).resolve().parent / "conf")
        if note:  # the run's record (its config, train/epochs) and its done line say what ran
            print(f"[hardlinear] {note}", flush=True)
        if hc.mode == RunMode.MULTIRUN:
            run_in_sweep(cfg, hc.runtime.output_dir)  # a failing run is recorded and the sweep goes on
        else:
            row = run(cfg, hc.runtime.output_dir)
            if row is not None and row.get("status") == "ok":  # what to do next, with this run's own paths
                from hardlinear.harness.next_steps import next_steps
                from hardlinear.harness.results import study_of

                print(next_steps(row["run_dir"], study_of({"study": cfg.get("study"), "experiment": cfg.get("experiment")})), flush=True)
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


if __name__ == "__main__":
    from hardlinear.harness.overrides import unknown_override_errors
    from hardlinear.harness.rundirs import register_resolvers

    register_resolvers()  # ${uid:} of the run and sweep directories (conf/config.yaml)
    errors = unknown_override_errors(sys.argv[1:], Path(__file__).resolve().parent / "conf")
    if errors:  # before Hydra, whose answer to a misspelt key is the wrong fix ("use +key")
        print("\n".join(f"error: {e}" for e in errors), file=sys.stderr)
        sys.exit(1)
    main()
    from hardlinear.harness.sweep import sweep_failed

    sys.exit(1 if sweep_failed() else 0)  # a sweep with a failed job is not a success
