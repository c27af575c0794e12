"""Entry point: ``python run.py problem=dcopf_118 method=proposed`` (``-m`` for sweeps)."""

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hardlinear.harness import run

    run(cfg, HydraConfig.get().runtime.output_dir)


if __name__ == "__main__":
    main()
