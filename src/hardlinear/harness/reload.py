"""A saved model reloads anywhere: the thread pools pinned as the run had them, and a probe tolerance derived from
the computation's rounding.

Why: ``run.py`` sizes the BLAS and torch pools from ``threads`` before numpy loads (``hardlinear.runtime.threads``), but a
reload in another process (``load_run``, ``evaluate.py``) used every core. LAPACK's SVD of ``G`` (the equality
projector's basis, rebuilt at reload) and torch's float32 matrix products round differently on another thread
count, and the probe replay of a dcopf_118 model differed by 4.9e-8 against a 1e-12 tolerance: the model was
refused on the machine that wrote it.

Two remedies, both here. ``pinned_threads`` runs the reload's set-up and the probe replay with the run's
``threads`` (torch's pool and, through threadpoolctl, numpy's BLAS pool), so the rebuilt structure is the one the
run built. ``probe_tolerance`` bounds what rounding alone can change: a dot product of length L computed in a
precision with unit roundoff u differs from any other summation order by at most ``gamma(L) = L u / (1 - L u)``
relative to the sum of its terms' magnitudes (Higham, Accuracy and Stability of Numerical Algorithms, 3.1). The
network's products (its longest reduction ``max(k, hidden)``, once per layer) in its dtype and the layer's float64
work (reductions over ``n + m`` terms) add up to the tolerance: about 9e-5 for a float32 network of 2 x 256, 2e-13
in float64. A changed rule or changed code moves outputs by far more (a rule's margin alone is ~1e-3 relative),
so the check still tells a different model from the same one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

MAX_THREADS = 1024  # harness.schemas.tables.MAX_THREADS (not imported: this module loads without omegaconf)
FLOAT64_EPS = float(torch.finfo(torch.float64).eps) / 2  # unit roundoff


def gamma(length: int, unit_roundoff: float) -> float:
    """Higham's ``gamma_L = L u / (1 - L u)``: the relative error bound of an L-term sum in any order."""
    lu = max(int(length), 1) * unit_roundoff
    return lu / (1.0 - lu) if lu < 1 else float("inf")


def probe_tolerance(config: dict[str, Any], sizes: dict[str, int]) -> tuple[float, str]:
    """``(tolerance, how it was derived)`` of the probe replay of a run with this resolved ``config`` on a problem of
    these ``sizes`` (n, m_eq, m_ineq, k)."""
    dtype = getattr(torch, str(config.get("dtype", "float32")), torch.float32)
    u_net = float(torch.finfo(dtype).eps) / 2
    network = config.get("network") or {}
    hidden, layers = int(network.get("hidden", 256)), int(network.get("layers", 2))
    k, n = int(sizes.get("k", 1)), int(sizes.get("n", 1))
    m = int(sizes.get("m_eq", 0)) + int(sizes.get("m_ineq", 0))
    longest = max(k, hidden, n)
    net = (layers + 1) * gamma(longest, u_net)
    layer = gamma(n + m, FLOAT64_EPS)
    how = (f"{layers + 1} products of length <= {longest} in {str(dtype).replace('torch.', '')} "
           f"({layers + 1} x gamma({longest}) = {net:.2g}) + the float64 layer (gamma({n + m}) = {layer:.2g})")
    return net + layer, how


def thread_info() -> dict[str, Any]:
    """The pools a computation ran with: torch's, and what the environment asked of the native ones."""
    info: dict[str, Any] = {"torch": int(torch.get_num_threads())}
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        info[name] = os.environ.get(name, "")
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = ",".join(f"{p.get('internal_api')}:{p.get('num_threads')}" for p in threadpool_info())
    except Exception:  # noqa: BLE001 - provenance only
        info["blas"] = "unknown"
    return info


@contextmanager
def pinned_threads(threads: Any) -> Iterator[None]:
    """Run the body with torch's pool and numpy's BLAS/OpenMP pools at ``threads`` (the run's), then restore them."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        threads = 1
    threads = min(threads, MAX_THREADS)  # validated before; a bound here too, as 100000 threads segfault
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


def mismatch_message(now: torch.Tensor, saved: torch.Tensor, tolerance: float, how: str, saved_threads: dict | None,
                     run_dir: Any, relative: float) -> str:
    """What differs and by how much: the worst entry (probe row, output index, both values), the relative
    difference against the tolerance and its derivation, and the thread pools then and now."""
    if now.shape != saved.shape:
        where = f"the outputs have shape {tuple(now.shape)} now and {tuple(saved.shape)} when saved"
    else:
        diff = (now.double() - saved.double()).abs()
        flat = int(diff.argmax())
        row, col = divmod(flat, diff.shape[1]) if diff.ndim == 2 else (flat, 0)
        where = (f"worst at probe input {row}, output {col}: {float(now.reshape(-1)[flat]):.17g} now, "
                 f"{float(saved.reshape(-1)[flat]):.17g} saved (absolute difference {float(diff.max()):.3g})")
    return (
        f"the model reloaded from {run_dir} does not reproduce its saved outputs: {where}; relative difference "
        f"{relative:.3g} > tolerance {tolerance:.3g} [{how}]. Thread pools now {thread_info()}, at save "
        f"{saved_threads or 'not recorded'}. More than rounding: the code, the rule or the problem changed since the "
        "run; load_run(..., verify=False) loads it anyway"
    )
