"""Seeded toy panels shared by the methods tests."""

from __future__ import annotations

import numpy as np
import pytest


def simulate_panel(
    rng: np.random.Generator, *, n_items: int, accuracies: list[float], missing: float
) -> tuple[np.ndarray, np.ndarray]:
    """One-coin panel: judge j is right with probability accuracies[j]; each verdict is missing w.p. ``missing``."""
    y = rng.integers(0, 2, size=n_items)
    right = rng.random((n_items, len(accuracies))) < np.asarray(accuracies)
    V = np.where(right, y[:, None], 1 - y[:, None]).astype(np.int8)
    V[rng.random(V.shape) < missing] = -1
    return V, y


@pytest.fixture(scope="module")
def panel() -> tuple[np.ndarray, np.ndarray]:
    """80 items x 5 judges (one below chance), 20% missing."""
    return simulate_panel(np.random.default_rng(42), n_items=80, accuracies=[0.9, 0.75, 0.6, 0.5, 0.25], missing=0.2)


@pytest.fixture(scope="module")
def miscalibrated() -> tuple[np.ndarray, np.ndarray]:
    """400 overconfident scores: the true P(Y=1 | s) is sigma(0.6 logit(s) + 0.3)."""
    from scipy.special import expit, logit

    rng = np.random.default_rng(7)
    s = expit(rng.normal(0.0, 2.5, size=400))
    y = (rng.random(400) < expit(0.6 * logit(s) + 0.3)).astype(int)
    return s, y
