"""Where a run writes: run and sweep directories under ``results_dir``, each unique whatever its start time.

Hydra names a run directory from the config (``conf/config.yaml``: ``${results_dir}/runs/<problem>/<method>/
<time>-seed<seed>-${uid:}``). The time has second resolution, so two runs started in the same second (four
learning rates launched together) shared one folder and overwrote each other's checkpoint and epochs log. The
``uid`` resolver appends six random hex digits, drawn once per process and cached in the config, so a sweep's
directory is the same for the parent and its jobs (Hydra copies the resolver cache into every job's config).

The ``lookup`` resolver lives here too, as the config's other resolver: ``${lookup:KEY,{a: 1, b: 2},DEFAULT}`` is the
table's entry for ``KEY``, else ``DEFAULT``. What it is for: a setting that depends on a value given on the command
line, which a Hydra defaults list cannot select by (it selects by config-group choices only), e.g.
``conf/experiment/e2elr_tpwrs2024.yaml``'s network depth per PGLib case.
"""

from __future__ import annotations

import secrets

UID_RESOLVER = "uid"
UID_HEX = 6
LOOKUP_RESOLVER = "lookup"


def lookup(key, table, default):
    """``table[key]`` when ``table`` has ``key``, else ``default`` (the ``${lookup:...}`` resolver)."""
    return table[key] if key in table else default


def register_resolvers() -> None:
    """Register the ``${uid:}`` and ``${lookup:...}`` resolvers with OmegaConf (idempotent); call before Hydra composes
    the config (``run.py``, and :func:`hardlinear.harness.runner.run` for callers that compose themselves)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(UID_RESOLVER):
        OmegaConf.register_new_resolver(UID_RESOLVER, lambda *_: secrets.token_hex(UID_HEX // 2), use_cache=True)
    if not OmegaConf.has_resolver(LOOKUP_RESOLVER):
        OmegaConf.register_new_resolver(LOOKUP_RESOLVER, lookup)
