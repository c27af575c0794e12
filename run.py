"""Entry point: ``python run.py problem=dcopf_118 method=proposed`` (``-m`` for sweeps)."""

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hardlinear.threads import size_native_pools

    size_native_pools(cfg.get("threads"))  # before numpy and torch load: pool sizes change rounding
    from hardlinear.harness import run, run_in_sweep

    hc = HydraConfig.get()
    if hc.mode == RunMode.MULTIRUN:
        run_in_sweep(cfg, hc.runtime.output_dir)  # a failing run is recorded and the sweep goes on
    else:
        run(cfg, hc.runtime.output_dir)


if __name__ == "__main__":
    main()
