"""Command-line overrides of keys that do not exist, caught before Hydra answers them.

Hydra rejects ``trainer.epoch=5`` with "Could not override 'trainer.epoch' ... use +trainer.epoch", which is the
wrong fix: ``+`` adds a key that no code reads (validation then rejects it). :func:`unknown_override_errors`
composes the config with the command line's group choices and names each plain override whose key is not in
it, with the closest existing key. Imports neither numpy nor torch (``run.py`` sizes their thread pools later).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

_ABSENT = object()

# Top-level keys of older versions and what replaced them (also checked by ``schemas.validate_config``).
RENAMED_KEYS = {
    "skip_recorded": "skip_recorded was replaced by rerun=true (the default skips a run whose identity is recorded; "
                     "rerun=true runs it again)",
    "results_csv": "results_csv was replaced by results_dir (a folder: each run writes record.json in its run "
                   "directory, and the loader reads the records under results_dir)",
}


def _overrides(argv: Sequence[str]) -> list[tuple[str, str]]:
    """``(key, value)`` of the plain ``key=value`` overrides (no ``+``, ``++`` or ``~``; flags skipped)."""
    out = []
    for arg in argv:
        if arg.startswith(("-", "+", "~")) or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        if key and "@" not in key and not key.startswith("hydra"):
            out.append((key, value))
    return out


SWEEP_SYNTAX = "()[]{}*$"
"""Characters of Hydra's sweep functions, globs and interpolations: such a value's choices are not known here."""
NAME_KEYS = ("study", "experiment")


def _choices(config_dir: Path, group: str) -> list[str]:
    """The options of config group ``group`` (its YAML files, in sub-folders too: ``problem_method/dc3/...``)."""
    return sorted(str(f.relative_to(config_dir / group).with_suffix("")) for f in (config_dir / group).rglob("*.yaml"))


def unknown_choice_errors(argv: Sequence[str], config_dir: str | Path, search_dirs: Sequence[str | Path] = ()) -> list[str]:
    """One line per group choice that names no option of its group (``method=nonexistent``, ``experiment=../x``)
    and per study or experiment name Hydra's grammar cannot take (non-ASCII, a newline): Hydra's own answers are a
    28-line listing or a grammar error that does not say the fix. ``search_dirs``: the user's config folders
    (``--config-dir``), whose options count too."""
    config_dir = Path(config_dir).resolve()
    folders = [config_dir, *(Path(d).resolve() for d in search_dirs)]
    errors = []
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.lstrip("+~").split("=", 1)
        if key in NAME_KEYS and not all(" " < c < "\x7f" for c in value):
            safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in value).strip("-.")[:60]
            errors.append(f"{key}={value!r}: a {key} name is one folder name of printable ASCII letters, digits, '-', '_' "
                          f"or '.'; e.g. {key}={safe or 'mystudy'}")
            continue
        if "." in key or "@" in key or not any((d / key).is_dir() for d in folders) or any(c in value for c in SWEEP_SYNTAX):
            continue
        if key == "experiment" and not arg.startswith("+") and "/" not in value:
            continue  # experiment=<label> sets the label (a top-level key); +experiment=<name> chooses a file
        options = sorted({o for d in folders if (d / key).is_dir() for o in _choices(d, key)})
        for choice in value.split(","):
            if choice in ("", "null") or choice in options:
                continue
            close = difflib.get_close_matches(choice, options, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            errors.append(f"{key}={choice!r} is not an option of conf/{key}/{hint}; choose one of: {', '.join(options)}")
    return errors


def unknown_override_errors(argv: Sequence[str], config_dir: str | Path, config_name: str = "config",
                            search_dirs: Sequence[str | Path] = ()) -> list[str]:
    """One message per override of a key the composed config does not have, or of a group choice that does not
    exist (:func:`unknown_choice_errors`); [] when all exist (or when the config cannot be composed: Hydra then
    reports that itself). ``search_dirs``: the user's config folders, on the search path after ``config_dir``."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    config_dir = Path(config_dir).resolve()
    choice_errors = unknown_choice_errors(argv, config_dir, search_dirs)
    if choice_errors:
        return choice_errors
    pairs = _overrides(argv)
    renamed = [RENAMED_KEYS[k] for k, _ in pairs if k in RENAMED_KEYS]
    if renamed:  # known without composing the config
        return renamed
    folders = [config_dir, *(Path(d).resolve() for d in search_dirs)]
    groups = {k for k, _ in pairs if "." not in k and any((d / k).is_dir() for d in folders)}
    candidates = [k for k, _ in pairs if k not in groups]
    if not candidates:
        return []
    choices = []
    for key, value in pairs:
        if key in groups:
            if any(c in value for c in "()[]{}*"):
                return []  # a sweep function or glob: the choices are not known here
            choices.append(f"{key}={value.split(',')[0]}")  # a sweep over choices: its first one
    for arg in argv:  # +experiment=NAME: an added group (an experiment may choose the problem: its keys count)
        key, sep, value = arg.partition("=")
        if sep and key.startswith("+") and not key.startswith("++") and any((d / key[1:]).is_dir() for d in folders):
            if any(c in value for c in "()[]{}*"):
                return []
            choices.append(f"{key}={value.split(',')[0]}")
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            searchpath = [f"hydra.searchpath=[{','.join(repr(f'file://{d}') for d in folders[1:])}]"] if search_dirs else []
            cfg = compose(config_name=config_name, overrides=[*choices, *searchpath])
    except (HydraException, OmegaConfBaseException, ValueError):
        return []
    errors = []
    for key in candidates:
        if OmegaConf.select(cfg, key, default=_ABSENT, throw_on_resolution_failure=False) is not _ABSENT:
            continue
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent, default=None, throw_on_resolution_failure=False) if parent else cfg
        keys = [str(k) for k in node.keys()] if OmegaConf.is_dict(node) else []
        if leaf in keys:
            continue  # present, with a mandatory value still missing (``???``, e.g. problem.case of problem=dcopf)
        if not keys and parent:
            errors.append(f"unknown key {key}: the config has no section {parent!r}")
            continue
        others = _options_setting(config_dir, parent, leaf) if "." not in parent else []
        if others:
            choice = OmegaConf.select(cfg, f"{parent}.name", default="its default")
            errors.append(
                f"unknown key {key}: {parent}={choice} has no such key; {', '.join(f'{parent}={o}' for o in others)} "
                f"sets it: choose one, e.g. {parent}={others[0]} {key}={dict(pairs)[key]}"
            )
            continue
        close = difflib.get_close_matches(leaf, keys, n=1)
        where = f"{parent}." if parent else ""
        hint = f"; did you mean {where}{close[0]}?" if close else ""
        listing = f" ({parent or 'the config'} has: {', '.join(sorted(keys))})"
        errors.append(
            f"unknown key {key}{hint}{listing}. Hydra's '+{key}' would add a key that nothing reads; "
            "fix the name instead"
        )
    return errors


def _options_setting(config_dir: Path, group: str, leaf: str) -> list[str]:
    """The options of config group ``group`` whose YAML sets the top-level key ``leaf`` (e.g. ``trainer``'s
    ``budget_120s`` sets ``time_budget_s``, which the default trainer lacks): the fix for such a key is to choose
    that option, not ``+`` (which would add the key to a config that was not written for it)."""
    folder = config_dir / group
    if not folder.is_dir():
        return []
    prefix = f"{leaf}:"
    return sorted(
        f.stem for f in folder.glob("*.yaml") if any(line.startswith(prefix) for line in f.read_text().splitlines())
    )


TRUSTED_CALLBACKS = ("hardlinear.harness.outputs.OutputPreflight", "hardlinear.harness.sweep.SweepProgress")
"""The ``hydra.callbacks`` targets a config may name: the package's own (``conf/config.yaml``)."""
ALLOW_CALLBACKS_VARIABLE = "HARDLINEAR_ALLOW_CALLBACKS"
"""The opt-in for one's own Hydra callbacks: a comma-separated list of the ``_target_`` names allowed besides
:data:`TRUSTED_CALLBACKS` (``HARDLINEAR_ALLOW_CALLBACKS=mylab.hooks.Notify hardlinear run ...``). An environment
variable, so a config folder cannot allow what it names by itself."""
PLUGIN_PREFIXES = ("hydra.", "hydra_plugins.")
"""Where ``hydra.launcher._target_`` and ``hydra.sweeper._target_`` may point: Hydra and its installed plugins."""
_VALUE_FLAGS = ("--config-dir", "-cd", "--config-name", "-cn", "--config-path", "-cp", "--cfg", "-c", "--package", "-p",
                "--experimental-rerun", "--info", "-i")


def _first_of_sweep(argv: Sequence[str]) -> list[str]:
    """The overrides of ``argv`` (flags and their values dropped) with a sweep's first value (``seed=0,1`` ->
    ``seed=0``); an override with a sweep function, glob or interpolation is left out (Hydra composes it itself)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            skip = arg in _VALUE_FLAGS
            continue
        if "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        if any(c in value for c in "()[]{}*$"):
            continue
        out.append(f"{key}={value.split(',')[0]}")
    return out


def hydra_target_errors(argv: Sequence[str], config_dir: str | Path, config_name: str = "config",
                        search_dirs: Sequence[str | Path] = ()) -> list[str]:
    """One line per ``_target_`` under ``hydra.callbacks`` (nested ones included) that is not one of
    :data:`TRUSTED_CALLBACKS` or the user's opt-in (:data:`ALLOW_CALLBACKS_VARIABLE`), and per ``hydra.launcher`` /
    ``hydra.sweeper`` target outside Hydra and its plugins. Why before Hydra: Hydra builds its callbacks before the
    task function (where ``method`` and ``logger`` targets are checked) runs, so a config folder's
    ``hydra.callbacks.x._target_: os.system`` ran, and the run recorded ``ok``. [] when the config does not compose
    (Hydra then reports that itself)."""
    import os

    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    config_dir = Path(config_dir).resolve()
    touches_hydra = any(a.lstrip("+~").startswith("hydra") for a in argv if not a.startswith("-"))
    if not search_dirs and not touches_hydra:
        return []  # the shipped configs alone, untouched: nothing to compose (their callbacks are the trusted ones)
    folders = [config_dir, *(Path(d).resolve() for d in search_dirs)]
    searchpath = [f"hydra.searchpath=[{','.join(repr(f'file://{d}') for d in folders[1:])}]"] if search_dirs else []
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=[*_first_of_sweep(argv), *searchpath], return_hydra_config=True)
        hydra_cfg = OmegaConf.to_container(cfg.hydra, resolve=False)
    except (HydraException, OmegaConfBaseException, ValueError):
        return []
    allowed = set(TRUSTED_CALLBACKS) | {t.strip() for t in os.environ.get(ALLOW_CALLBACKS_VARIABLE, "").split(",") if t.strip()}
    errors = []
    for path, target in _targets(hydra_cfg.get("callbacks") or {}, "hydra.callbacks"):
        if target not in allowed:
            errors.append(f"{path}._target_ {target!r} is not a hardlinear callback ({', '.join(TRUSTED_CALLBACKS)}); "
                          f"a config folder may not run other code. To run your own callback, allow it by name: "
                          f"{ALLOW_CALLBACKS_VARIABLE}={target} (comma-separated for several)")
    for section in ("launcher", "sweeper"):
        for path, target in _targets(hydra_cfg.get(section) or {}, f"hydra.{section}"):
            if not str(target).startswith(PLUGIN_PREFIXES):
                errors.append(f"{path}._target_ {target!r} is not a Hydra {section} (hydra.* or hydra_plugins.*); "
                              f"choose one with hydra/{section}=<name>")
    return errors


def _targets(node, path: str):
    """``(dotted path, target)`` of every ``_target_`` in ``node``, iteratively."""
    stack = [(path, node)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            if "_target_" in value:
                yield where, value["_target_"]
            stack.extend((f"{where}.{k}", v) for k, v in value.items() if k != "_target_")
        elif isinstance(value, list):
            stack.extend((f"{where}.{i}", v) for i, v in enumerate(value))
