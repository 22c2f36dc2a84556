"""Continuous-score metrics against hand computations, brute force and numpy's own formulas (not scipy's)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.stats.continuous_metrics import METRICS, continuous_metrics, kde_kl, kde_on_grid, mean_error


def _kde_reference(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Spec 001 §6: Gaussian kernels of width sd(x, ddof=1) * m^(-1/5), normalised to sum 1 on the grid."""
    h = x.std(ddof=1) * len(x) ** (-0.2)
    dens = np.exp(-0.5 * ((grid[:, None] - x[None, :]) / h) ** 2).sum(axis=1)
    return dens / dens.sum()


def _rank(x: np.ndarray) -> np.ndarray:
    """Mid-ranks by brute force (each value's rank is the mean position of its equals)."""
    order = np.sort(x)
    return np.array([np.mean(np.flatnonzero(order == v)) + 1 for v in x])


@pytest.fixture(scope="module")
def pair() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    y = np.round(rng.uniform(1, 5, 300) * 4) / 4  # a 0.25 grid, like the reference scores: ties for Spearman
    return y, np.clip(0.8 * y + 0.4 + rng.normal(0, 0.4, 300), 1, 5)


def test_hand_computed_values():
    y, y_hat = [1.0, 2.0, 4.0, 5.0], [2.0, 2.0, 3.0, 3.0]
    m = continuous_metrics(y, y_hat)
    assert m["mean_error"] == mean_error(y, y_hat) == pytest.approx(0.5)  # 3 - 2.5: the corrector under-rates
    assert m["mae"] == pytest.approx((1 + 0 + 1 + 2) / 4)
    # sorted y_hat (2, 2, 3, 3) against sorted y (1, 2, 4, 5): |1| + |0| + |1| + |2|, over 4
    assert m["w1"] == pytest.approx(1.0)
    # Pearson by hand: y - 3 = (-2, -1, 1, 2), y_hat - 2.5 = (-.5, -.5, .5, .5): 3 / sqrt(10 * 1)
    assert m["pearson"] == pytest.approx(3 / math.sqrt(10))
    assert set(m) == set(METRICS)


def test_against_independent_formulas(pair):
    y, y_hat = pair
    m = continuous_metrics(y, y_hat)
    assert m["mean_error"] == pytest.approx(y.mean() - y_hat.mean())
    assert m["mae"] == pytest.approx(np.abs(y - y_hat).mean())
    assert m["pearson"] == pytest.approx(np.corrcoef(y_hat, y)[0, 1])
    assert m["spearman"] == pytest.approx(np.corrcoef(_rank(y_hat), _rank(y))[0, 1])
    assert m["w1"] == pytest.approx(np.abs(np.sort(y_hat) - np.sort(y)).mean())  # equal sizes: sorted pairs
    grid = np.linspace(1, 5, 500)
    p, q = _kde_reference(y_hat, grid), _kde_reference(y, grid)
    forward = np.sum(p * np.log((p + 1e-10) / (q + 1e-10)))
    backward = np.sum(q * np.log((q + 1e-10) / (p + 1e-10)))
    assert m["kl"] == pytest.approx(forward, rel=1e-9)  # the paper's direction KL(p_hat || q)
    assert m["kl_sym"] == pytest.approx((forward + backward) / 2, rel=1e-9)
    assert abs(forward - backward) > 1e-3  # the two directions differ here, so the direction is tested
    assert np.allclose(kde_on_grid(y, grid), q)


def test_kl_of_two_wide_normals_is_the_closed_form():
    # Far from the support's ends the grid KDE of a large normal sample is close to N(mean, sd^2 (1 + m^-2/5)), and
    # KL(N(a, s^2) || N(b, s^2)) = (a - b)^2 / (2 s^2).
    rng = np.random.default_rng(3)
    a, b = rng.normal(2.8, 0.3, 8_000), rng.normal(3.1, 0.3, 8_000)
    s2 = (a.var(ddof=1) + b.var(ddof=1)) / 2 * (1 + 8_000**-0.4)
    kl, kl_sym = kde_kl(a, b)
    assert kl == pytest.approx((a.mean() - b.mean()) ** 2 / (2 * s2), rel=0.1)  # KDE tails add noise
    assert kl_sym == pytest.approx(kl, rel=0.1)
    assert kde_kl(a, a) == (0.0, 0.0)


def test_constant_samples_give_nan_not_an_error():
    m = continuous_metrics([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    assert all(math.isnan(m[k]) for k in ("pearson", "spearman", "kl", "kl_sym"))
    assert m["mean_error"] == pytest.approx(0.0) and m["mae"] == pytest.approx(2 / 3)
    assert m["w1"] == pytest.approx(2 / 3)
    assert kde_on_grid([3.0, 3.0], np.linspace(1, 5, 5)) is None


@pytest.mark.parametrize(
    ("y", "y_hat", "message"),
    [
        ([1.0, 2.0], [1.0], "need equal lengths >= 2, got 2 and 1"),
        ([1.0], [1.0], "need equal lengths >= 2, got 1 and 1"),
        ([1.0, np.nan], [1.0, 2.0], "non-finite values"),
        ([1.0, 2.0], [np.inf, 2.0], "non-finite values"),
    ],
)
def test_bad_input(y, y_hat, message):
    with pytest.raises(InputError, match=f"continuous metrics: y, y_hat: {message}"):
        continuous_metrics(y, y_hat)
