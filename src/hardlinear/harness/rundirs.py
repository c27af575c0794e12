"""Where a run writes: run and sweep directories under ``results_dir``, each unique whatever its start time.

Hydra names a run directory from the config (``conf/config.yaml``: ``${results_dir}/runs/<problem>/<method>/
<time>-seed<seed>-${uid:}``). The time has second resolution, so two runs started in the same second (four
learning rates launched together) shared one folder and overwrote each other's checkpoint and epochs log. The
``uid`` resolver appends six random hex digits, drawn once per process and cached in the config, so a sweep's
directory is the same for the parent and its jobs (Hydra copies the resolver cache into every job's config).
"""

from __future__ import annotations

import secrets

UID_RESOLVER = "uid"
UID_HEX = 6


def register_resolvers() -> None:
    """Register the ``${uid:}`` resolver with OmegaConf (idempotent); call before Hydra composes the config."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(UID_RESOLVER):
        OmegaConf.register_new_resolver(UID_RESOLVER, lambda *_: secrets.token_hex(UID_HEX // 2), use_cache=True)
