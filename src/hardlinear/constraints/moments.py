"""The first two moments of the lifted input ``x = (1, theta)``: what the cost-aware rule's expected objective
needs, of the uniform distribution on a box (closed form) or of samples (a polytope's, or given inputs)."""

from __future__ import annotations

import numpy as np

from hardlinear.constraints.family import InputBox


def input_moments(box: InputBox) -> tuple[np.ndarray, np.ndarray]:
    """``(E[x]: (K,), E[x x']: (K, K))`` for ``x = (1, xi)``, ``xi`` uniform on ``box``."""
    mean = np.concatenate([[1.0], box.mid])
    second = np.outer(mean, mean)
    second[1:, 1:] += np.diag(box.radius**2 / 3.0)
    return mean, second


def sample_moments(xi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(E[x], E[x x'])`` of the empirical distribution of ``xi: (N, k)`` (``x = (1, xi)``)."""
    x = np.hstack([np.ones((len(xi), 1)), np.asarray(xi, dtype=np.float64)])
    second = x.T @ x / len(x)
    return x.mean(axis=0), 0.5 * (second + second.T)
