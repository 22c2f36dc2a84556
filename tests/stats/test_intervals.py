"""The interval service: every interval inside its metric's range, each method against an independent reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t
from statsmodels.stats.proportion import proportion_confint

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.inference import summarise_over_splits
from judgecal_dist.stats.intervals import (
    corrected_resampled_t,
    mean_interval,
    proportion_difference_interval,
    proportion_interval,
)
from judgecal_dist.stats.ranges import METRIC_RANGES, MetricRange, metric_range


def _by_hand(x: np.ndarray, ratio: float, bounds: MetricRange) -> tuple[float, float]:
    """The delta-method interval written out: se of the corrected t, the scale's slope, mapped back."""
    m, s = x.mean(), x.std(ddof=1)
    half = student_t.ppf(0.975, x.size - 1) * math.sqrt((1 / x.size + ratio) * s**2)
    a, b = bounds
    if bounds.kind == "bounded":
        u = (m - a) / (b - a)
        g = math.log(u / (1 - u))
        step = half / ((b - a) * u * (1 - u))
        return tuple(a + (b - a) / (1 + math.exp(-(g + d))) for d in (-step, step))  # type: ignore[return-value]
    if bounds.kind == "positive":
        return a + (m - a) * math.exp(-half / (m - a)), a + (m - a) * math.exp(half / (m - a))
    return m - half, m + half


@pytest.mark.parametrize(
    ("bounds", "values"),
    [
        (MetricRange(0.0, 1.0), [0.01, 0.05, 0.02, 0.09, 0.03]),  # ECE near 0
        (MetricRange(0.0, 1.0), [0.97, 0.99, 0.95, 1.0, 0.98]),  # accuracy near 1
        (MetricRange(0.0, math.inf), [0.2, 1.9, 0.4, 0.3, 2.4]),  # NLL with a wide spread
        (MetricRange(0.0, 2.0), [0.05, 0.3, 0.1]),  # MAE of labels in {-1, 0, 1}
        (MetricRange(-math.inf, math.inf), [-0.2, 0.1, 0.3, -0.05]),  # a difference of NLL
    ],
)
def test_mean_interval_is_the_delta_method_on_the_ranges_scale(bounds, values):
    x = np.asarray(values)
    res = mean_interval(x, bounds, test_train_ratio=1.0)
    np.testing.assert_allclose([res.low, res.high], _by_hand(x, 1.0, bounds), rtol=1e-10)
    assert bounds.low <= res.low <= x.mean() <= res.high <= bounds.high
    symmetric = corrected_resampled_t(x, test_train_ratio=1.0)
    if bounds.kind == "unbounded":  # where the range allows, exactly the corrected resampled t
        assert (res.low, res.high) == pytest.approx((symmetric.low, symmetric.high))
    else:  # these data send the symmetric interval out of the range; ours stays in
        assert not (bounds.low <= symmetric.low and symmetric.high <= bounds.high)


def test_mean_interval_never_leaves_the_range_on_random_data():
    rng = np.random.default_rng(0)
    share, positive = MetricRange(0.0, 1.0), MetricRange(0.0, math.inf)
    for _ in range(300):
        n = int(rng.integers(2, 8))
        p = rng.beta(0.3, 0.3, size=n)
        for bounds, x in ((share, p), (positive, -np.log(p + 1e-9))):
            res = mean_interval(x, bounds, test_train_ratio=float(rng.uniform(0, 20)))
            assert bounds.low <= res.low <= res.high <= bounds.high


def test_mean_interval_on_a_bound_is_the_point_and_rejects_values_outside():
    res = mean_interval([0.0, 0.0, 0.0], MetricRange(0.0, 1.0), test_train_ratio=1.0)
    assert (res.low, res.high) == (0.0, 0.0)
    with pytest.raises(InputError, match=r"outside the metric's range \[0.0, 1.0\]"):
        mean_interval([0.5, 1.2], MetricRange(0.0, 1.0), test_train_ratio=1.0)
    with pytest.raises(ConfigError, match="critical"):
        mean_interval([0.5, 0.6], None, test_train_ratio=0.0, critical="z")


def test_normal_critical_value_is_the_1_96_error_bar():
    x = np.array([0.4, 0.5, 0.45, 0.55])
    res = mean_interval(x, None, test_train_ratio=0.0, critical="normal")
    half = 1.959964 * x.std(ddof=1) / 2
    assert (res.low, res.high) == pytest.approx((x.mean() - half, x.mean() + half))


def test_wilson_and_newcombe_against_statsmodels_and_the_published_example():
    res = proportion_interval(19, 20, confidence=0.9)
    assert (res.low, res.high) == pytest.approx(proportion_confint(19, 20, alpha=0.1, method="wilson"))
    assert proportion_interval(20, 20).high == 1.0
    # Newcombe (1998), Table II, example (a): 56/70 - 48/80, hybrid score interval 0.0524 to 0.3339.
    diff = proportion_difference_interval(56, 70, 48, 80)
    assert (round(diff.low, 4), round(diff.high, 4)) == (0.0524, 0.3339)
    with pytest.raises(InputError):
        proportion_interval(3, 2)


def test_summaries_over_splits_use_each_metrics_declared_range():
    import pandas as pd

    rows = pd.DataFrame({"seed": range(3), "ece": [0.01, 0.04, 0.07], "delta_nll": [-0.1, 0.05, 0.2]})
    out = summarise_over_splits(
        rows, by=[], metrics=["ece", "delta_nll"], rng=np.random.default_rng(0), split_sizes=1.0
    ).iloc[0]
    assert 0 < out["ece_ci_low"] < 0.04 < out["ece_ci_high"] < 1
    t = corrected_resampled_t(rows["delta_nll"], test_train_ratio=1.0)
    assert (out["delta_nll_ci_low"], out["delta_nll_ci_high"]) == pytest.approx((t.low, t.high))


def test_every_declared_range_is_ordered():
    assert all(r.low < r.high for r in METRIC_RANGES.values())
    assert metric_range("mae", study="itc") == MetricRange(0.0, 2.0)
    assert metric_range("delta_nll") == MetricRange(-math.inf, math.inf)
