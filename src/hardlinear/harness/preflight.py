"""Checks that need the built problem but no data: run by the harness after the problem is built and before
any dataset, rule or training (milliseconds). ``schemas.validate_config`` runs before, on the config alone."""

from __future__ import annotations

import math

from hardlinear.harness.schemas import ConfigError

FLOAT64, FLOAT32 = 8, 4


USABLE_FRACTION = 0.8
"""Share of the memory this process may use that the checks let one allocation plan take: the rest is for the
interpreter, the libraries, the data and the allocator's slack."""


def memory_room(device: str = "cpu") -> tuple[int | None, str]:
    """``(bytes, why)``: the memory the tensors may take where they will live. CPU: the smallest of the free memory,
    the room under this process's memory cgroup and under ``RLIMIT_AS`` / ``RLIMIT_DATA``
    (:func:`hardlinear.runtime.limits.memory_room`); CUDA: the device's free bytes. ``(None, "")`` where it
    cannot be read (the checks are then skipped)."""
    if str(device).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return None, ""
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free), f"free on {device}"
    from hardlinear.runtime.limits import memory_room as process_room

    return process_room()


def available_memory_bytes(device: str = "cpu") -> int | None:
    """The bytes of :func:`memory_room` (None where unknown)."""
    return memory_room(device)[0]


def bytes_per_instance(problem, network: dict, net_bytes: int = FLOAT32, unrolled_steps: int = 0, training: bool = True) -> int:
    """Rough memory one instance of a batch costs: the network's activations (each hidden layer's linear,
    normalised and activated outputs; twice for training: their gradients) and the float64 rows of the
    constraint layers (outputs, residuals and slacks, a few copies each; in training one set per unrolled correction
    step, which the backward pass keeps: inference keeps only the current step's). An estimate within a small
    factor, meant to refuse batches that are off by orders of magnitude."""
    hidden, layers = int(network.get("hidden", 256)), int(network.get("layers", 2))
    n, m = int(problem.n), int(problem.m_eq + problem.m_ineq)
    net = (3 * hidden * layers + n + int(problem.k)) * net_bytes
    rows = 6 * (n + m) * FLOAT64 * (1 + (max(int(unrolled_steps), 0) if training else 0))
    return int((net + rows) * (2 if training else 1))


def network_weight_bytes(problem, network: dict, net_bytes: int = FLOAT32, training: bool = True) -> int:
    """Bytes of the task network's weights (``k -> hidden -> ... -> n``); training holds three more copies (the
    gradients and Adam's two moments), a reload one more (the saved weights beside the built network's)."""
    hidden, layers = int(network.get("hidden", 256)), int(network.get("layers", 2))
    k, n = int(problem.k), int(problem.n)
    widths = [k] + [hidden] * layers + [n]
    weights = sum(a * b + b for a, b in zip(widths, widths[1:]))
    return int(weights * net_bytes * (4 if training else 2))


def network_memory_errors(problem, network: dict, net_bytes: int = FLOAT32, *, device: str = "cpu",
                          training: bool = True, available: int | None = None) -> list[str]:
    """One line when the network's weights alone would not fit in the free memory (``network.hidden=10**7`` met the
    allocator's raw error before), naming the largest ``network.hidden`` that fits; [] otherwise."""
    why = "usable"
    if available is None:
        room, why = memory_room(device)
        available = None if room is None else int(room * USABLE_FRACTION)
    need = network_weight_bytes(problem, network, net_bytes, training)
    if not available or need <= available:
        return []
    hidden, layers = int(network.get("hidden", 256)), int(network.get("layers", 2))
    fits = hidden
    while fits > 1 and network_weight_bytes(problem, {**network, "hidden": fits}, net_bytes, training) > available:
        fits //= 2
    return [f"network.hidden={hidden} with network.layers={layers} needs about {_size(need)} for the network's weights "
            f"on {device}{' (training: with gradients and optimizer state)' if training else ' (a reload holds two copies)'} "
            f"but {_size(available)} may be used ({USABLE_FRACTION:.0%} of what is {why}); set network.hidden to at most "
            f"{fits:,} (or fewer layers)"]


def check_batch_memory(problem, network: dict, batch_size: int, throughput_batch: int, ctx=None, *,
                       device: str = "cpu", net_bytes: int = FLOAT32, unrolled_steps: int = 0,
                       available: int | None = None, method=None) -> None:
    """:class:`ConfigError` when ``trainer.batch_size`` (training) or ``eval.throughput_batch`` (inference)
    would need more memory than is free, with the estimate and the largest batch that fits. ``ctx`` (a
    :class:`~hardlinear.methods.base.Context`) gives the device and the network's dtype; ``method`` the
    correction steps its training unrolls (DC3's ``train_steps``)."""
    if ctx is not None:
        import torch

        device, net_bytes = str(ctx.device), torch.finfo(ctx.dtype).bits // 8
    if method is not None:
        unrolled_steps = int(getattr(method, "train_steps", 0) or 0)
    why = "usable"
    if available is None:
        room, why = memory_room(device)
        available = None if room is None else int(room * USABLE_FRACTION)
    if not available:
        return
    errors = network_memory_errors(problem, network, net_bytes, device=device, available=available)
    if errors:
        raise ConfigError(errors)  # the batch estimates below assume the weights fit
    for key, batch, training in (("trainer.batch_size", batch_size, True), ("eval.throughput_batch", throughput_batch, False)):
        per = bytes_per_instance(problem, network, net_bytes, unrolled_steps, training)
        need = per * int(batch)
        if need > available:
            fits = max(int(available // per), 1)
            errors.append(
                f"{key}={batch} needs about {_size(need)} on {device} for {problem.name} (n={problem.n}, "
                f"network {network.get('layers', 2)}x{network.get('hidden', 256)}: ~{_size(per)} per instance"
                f"{', training' if training else ''}) but {_size(available)} may be used ({USABLE_FRACTION:.0%} of what is "
                f"{why}); set {key} to at most {fits:,}"
            )
    if errors:
        raise ConfigError(errors)


def _size(nbytes: float) -> str:
    units = ("B", "kB", "MB", "GB", "TB", "PB")
    i = min(int(math.log(max(nbytes, 1), 1000)), len(units) - 1)
    return f"{nbytes / 1000**i:.3g} {units[i]}"


def setup_method(method, problem, ctx) -> float:
    """``method.setup(problem, ctx)`` (its seconds); a decision rule that does not exist at the problem's
    uncertainty level is reported as the config's fault, naming the largest level that has one."""
    from hardlinear.rules.decision_rule import DecisionRuleInfeasible

    try:
        return method.setup(problem, ctx)
    except DecisionRuleInfeasible as err:
        level = getattr(problem, "uncertainty", None)
        if level is None or err.max_uncertainty is None or level < err.max_uncertainty:
            raise
        raise ConfigError([
            f"problem.uncertainty={level:g} is above the largest level at which {problem.name} has a decision rule "
            f"({err.max_uncertainty:.4f}, margin t* = {err.t_star:.3g} at {level:g}); set problem.uncertainty "
            f"below {err.max_uncertainty:.4f}, or use a method without a rule"
        ]) from err
