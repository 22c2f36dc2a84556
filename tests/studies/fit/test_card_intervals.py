"""The card's grouped bootstrap from per-group sums equals the bootstrap that gathers each resample's items."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.stats.metrics import brier, ece_positive, nll
from judgecal_dist.stats.resampling import group_resample_totals
from judgecal_dist.studies.fit.report import grouped_intervals


def _gathered(y: np.ndarray, p: np.ndarray, groups: np.ndarray, config: SimpleNamespace) -> dict:
    """The reference: each resample indexes its groups' items and scores them with the metric functions."""
    rng = np.random.default_rng(config.seed)
    uniq, inverse = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inverse == g) for g in range(len(uniq))]
    draws = []
    for _ in range(config.resamples):
        pick = np.concatenate([members[g] for g in rng.integers(0, len(uniq), len(uniq))])
        yy, pp = y[pick], p[pick]
        draws.append(
            {"nll": nll(yy, pp, eps=config.eps), "brier": brier(yy, pp), "ece": ece_positive(yy, pp, n_bins=10)}
        )
    frame = pd.DataFrame(draws)
    point = {"nll": nll(y, p, eps=config.eps), "brier": brier(y, p), "ece": ece_positive(y, p, n_bins=10)}
    tail = (1 - config.ci_level) / 2
    return {k: (v, frame[k].quantile(tail), frame[k].quantile(1 - tail)) for k, v in point.items()}


@pytest.mark.parametrize("n_groups", [1, 7, 40])
def test_grouped_intervals_equal_gathered_resamples(n_groups: int) -> None:
    rng = np.random.default_rng(3)
    n = 301
    groups = np.array([f"g{k}" for k in rng.integers(0, n_groups, n)])
    y = rng.integers(0, 2, n)
    p = np.clip(0.6 * y + rng.uniform(-0.3, 0.5, n), 0.0, 1.0)
    p[:5] = [0.0, 1.0, 0.3, 0.5, 0.7]  # on bin edges and the clipping bounds
    config = SimpleNamespace(seed=11, resamples=257, ci_level=0.9, eps=1e-6, n_bins=10)
    got, want = grouped_intervals(y, p, groups, config), _gathered(y, p, groups, config)
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-15)


def test_group_resample_totals_counts_each_draw() -> None:
    # Closed form: with one-hot group sums the totals are the draw counts, and every replicate draws G groups.
    totals = group_resample_totals(np.eye(5), 1000, np.random.default_rng(0))
    assert totals.shape == (1000, 5)
    np.testing.assert_array_equal(totals.sum(axis=1), 5.0)
    rng = np.random.default_rng(0)
    first = np.bincount(rng.integers(0, 5, 5), minlength=5)
    np.testing.assert_array_equal(totals[0], first)


def test_group_resample_totals_across_batches_equal_a_loop() -> None:
    # 20001 groups: several batches of replicates, and an odd count (no random bits carried between replicates).
    n_groups, resamples = 20_001, 230
    sums = np.random.default_rng(1).normal(size=(n_groups, 2))
    totals = group_resample_totals(sums, resamples, np.random.default_rng(4))
    rng = np.random.default_rng(4)
    want = np.stack([sums[rng.integers(0, n_groups, n_groups)].sum(axis=0) for _ in range(resamples)])
    np.testing.assert_allclose(totals, want, rtol=1e-9, atol=1e-9)
