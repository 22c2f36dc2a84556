from __future__ import annotations

import math

import numpy as np
import pytest

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.metrics import (
    accuracy,
    brier,
    ece,
    ece_positive,
    metric_table,
    nll,
    reliability_bins,
)

METRICS = [nll, brier, accuracy, ece, ece_positive]


@pytest.fixture(scope="module")
def predictions():
    rng = np.random.default_rng(5)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(int)
    return y, p


def test_nll_closed_forms():
    assert nll([0, 1, 1], [0.5, 0.5, 0.5]) == pytest.approx(math.log(2))
    assert nll([1, 0], [0.8, 0.4]) == pytest.approx(-(math.log(0.8) + math.log(0.6)) / 2)
    assert nll([1], [0.0]) == pytest.approx(math.log(1e6), rel=1e-9)  # Lemma 1: bounded by log(1/eps)
    assert nll([1], [0.0], eps=1e-3) == pytest.approx(-math.log(1e-3))
    assert nll([0, 1], [0.0, 1.0]) == pytest.approx(-math.log(1 - 1e-6))


def test_brier_and_accuracy_hand_cases():
    assert brier([1, 0, 1], [0.9, 0.2, 0.5]) == pytest.approx((0.01 + 0.04 + 0.25) / 3)
    assert brier([1, 1], [1.0, 1.0]) == 0.0
    assert accuracy([1, 0, 1, 0], [0.9, 0.6, 0.5, 0.5]) == pytest.approx((1 + 0 + 0.5 + 0.5) / 4)


def test_ece_of_perfectly_calibrated_binned_predictor_is_zero():
    # p = 0.7 on 10 items with 7 positives, p = 0.2 on 10 items with 2 positives
    p = np.r_[np.full(10, 0.7), np.full(10, 0.2)]
    y = np.r_[np.ones(7), np.zeros(3), np.ones(2), np.zeros(8)].astype(int)
    assert ece(y, p) == pytest.approx(0.0, abs=1e-12)
    assert ece_positive(y, p) == pytest.approx(0.0, abs=1e-12)


def test_ece_hand_case_and_bin_edges():
    # conf 0.6 lies in (0.5, 0.6] and conf 0.65 in (0.6, 0.7]: separate bins -> (0.4 + 0.65) / 2
    assert ece([1, 0], [0.6, 0.65]) == pytest.approx(0.525)
    # conf 0.7 (from p = 0.3, correct) closes (0.6, 0.7]; conf 0.75 (wrong) is in (0.7, 0.8]; one bin would
    # give |0.5 - 0.725| = 0.225
    assert ece([0, 0], [0.3, 0.75]) == pytest.approx((0.3 + 0.75) / 2)
    assert ece([1, 0], [0.9, 0.9], n_bins=1) == pytest.approx(0.4)


def test_ece_ties_take_half_credit():
    assert ece([1, 0, 0], [0.5, 0.5, 0.5]) == pytest.approx(0.0)
    assert accuracy([1, 0, 0], [0.5, 0.5, 0.5]) == 0.5


def test_ece_positive_gold_positive_closed_form(predictions):
    _, p = predictions
    assert ece_positive(np.ones_like(p, dtype=int), p) == pytest.approx(1 - p.mean())


@pytest.mark.parametrize("metric", [nll, brier, accuracy, ece])
def test_relabelling_symmetry(metric, predictions):
    y, p = predictions
    p = np.r_[p, 0.5, 0.5]
    y = np.r_[y, 0, 1]
    assert metric(1 - y, 1 - p) == pytest.approx(metric(y, p), abs=1e-12)


def test_reliability_bins(predictions):
    y, p = predictions
    bins = reliability_bins(y, p, n_bins=10)
    assert list(bins.columns) == ["bin", "lower", "upper", "count", "mean_p", "frac_pos"]
    assert len(bins) == 10 and bins["count"].sum() == len(y)
    full = bins[bins["count"] > 0]
    recomputed = (full["count"] / len(y) * (full["frac_pos"] - full["mean_p"]).abs()).sum()
    assert recomputed == pytest.approx(ece_positive(y, p))


def test_reliability_bins_edges_and_empty_bins():
    bins = reliability_bins([0, 1, 1], [0.0, 0.5, 1.0], n_bins=4)
    np.testing.assert_array_equal(bins["count"], [1, 1, 0, 1])  # 0 -> first bin, 0.5 closes (0.25, 0.5]
    assert np.isnan(bins.loc[2, "mean_p"]) and np.isnan(bins.loc[2, "frac_pos"])


def test_metric_table(predictions):
    y, p = predictions
    table = metric_table(y, p)
    assert table == {"nll": nll(y, p), "brier": brier(y, p), "ece": ece(y, p), "accuracy": accuracy(y, p)}
    assert all(isinstance(v, float) for v in table.values())


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize(
    ("y", "p", "match"),
    [
        ([0, 2], [0.1, 0.2], r"y: labels must be 0 or 1 \(1 items, e.g. \[1\]=2\)"),
        ([0, 1], [0.1, 1.2], r"p: probabilities must be finite and in \[0, 1\]"),
        ([0, 1], [0.1, np.nan], r"p: probabilities must be finite"),
        ([0, 1], [[0.9, 0.1], [0.2, 0.8]], r"p: expected a 1-D array .*pass column 1"),
        ([0, 1, 1], [0.1, 0.2], r"inconsistent numbers of items: y has 3, p has 2"),
        ([], [], r"y: no labels"),
    ],
)
def test_metrics_reject_input(metric, y, p, match):
    with pytest.raises(InputError, match=match):
        metric(y, p)


def test_metrics_reject_params():
    with pytest.raises(ConfigError, match=r"n_bins == 0, must be >= 1"):
        ece([0, 1], [0.2, 0.8], n_bins=0)
    with pytest.raises(ConfigError, match=r"eps == 0.0, must be > 0.0"):
        nll([0, 1], [0.2, 0.8], eps=0.0)


def test_nll_and_brier_equal_sklearn_oracles():
    from sklearn.metrics import brier_score_loss, log_loss

    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 500)
    p = np.concatenate([rng.random(497), [0.0, 1.0, 0.5]])
    eps = 1e-6
    assert nll(y, p, eps=eps) == pytest.approx(log_loss(y, np.clip(p, eps, 1 - eps), labels=[0, 1]), rel=1e-12)
    assert brier(y, p) == pytest.approx(brier_score_loss(y, p, labels=[0, 1]), rel=1e-12)
