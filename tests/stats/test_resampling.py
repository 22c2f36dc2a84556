from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.resampling import multiplier_max_t, paired_bootstrap_ci

# ---- (c) item-level paired bootstrap within splits ----


def test_paired_bootstrap_matches_the_analytic_standard_error():
    rng = np.random.default_rng(0)
    d = rng.normal(0.03, 0.2, size=(10, 150))
    res = paired_bootstrap_ci(d, n_resamples=2000, rng=np.random.default_rng(1))
    # mean of S independent split means: SE = sqrt(sum_s var_s / n_s) / S (plug-in variances)
    se = np.sqrt((d.var(axis=1) / d.shape[1]).sum()) / d.shape[0]
    assert res.estimate == pytest.approx(d.mean())
    assert res.standard_error == pytest.approx(se, rel=0.1)
    assert res.low == pytest.approx(res.estimate - 1.96 * se, abs=0.3 * se)
    assert res.high == pytest.approx(res.estimate + 1.96 * se, abs=0.3 * se)


def test_paired_bootstrap_coverage_is_near_nominal():
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(100):
        d = [rng.normal(0.1, 1.0, size=n) for n in (60, 80, 70)]
        res = paired_bootstrap_ci(d, n_resamples=400, rng=rng)
        hits += res.low <= 0.1 <= res.high
    assert 0.85 <= hits / 100 <= 1.0


def test_paired_bootstrap_same_seed_same_interval_and_degenerate_case():
    d = np.random.default_rng(2).normal(size=(3, 40))
    assert paired_bootstrap_ci(d, rng=np.random.default_rng(5)) == paired_bootstrap_ci(d, rng=np.random.default_rng(5))
    flat = paired_bootstrap_ci([[0.2, 0.2], [0.4, 0.4, 0.4]], rng=np.random.default_rng(0))
    assert flat == pytest.approx((0.3, 0.3, 0.3, 0.0))


def test_shared_units_keep_the_width_of_one_data_set_when_splits_reuse_its_items():
    """Halves of one set of 400 items, 50 times: with the items as shared units the interval keeps the width of the
    items' own sampling (reference: the delta-method SE of the weighted split means); resampled split by split it
    narrows about sqrt(50) times further."""
    rng = np.random.default_rng(7)
    d_items = rng.normal(0.05, 0.3, 400)
    halves = [np.flatnonzero(rng.random(400) < 0.5) for _ in range(50)]
    ds, units = [d_items[h] for h in halves], [h for h in halves]
    shared = paired_bootstrap_ci(ds, n_resamples=2000, rng=np.random.default_rng(1), units=units)
    alone = paired_bootstrap_ci(ds, n_resamples=2000, rng=np.random.default_rng(1))
    assert shared.estimate == alone.estimate == pytest.approx(np.mean([d.mean() for d in ds]), abs=1e-12)
    # Reference: the delta-method SE of the mean of per-split weighted means under multinomial item weights,
    # sum_i a_i^2 with a_i = sum over the splits holding item i of (d_i - split mean) / (S n_s).
    a = np.zeros(400)
    for h in halves:
        a[h] += (d_items[h] - d_items[h].mean()) / (len(halves) * h.size)
    assert shared.standard_error == pytest.approx(np.sqrt(np.sum(a**2)), rel=0.03)
    assert shared.standard_error > 4 * alone.standard_error


def test_shared_units_refuse_a_unit_list_that_does_not_match_the_splits():
    d = np.zeros((2, 3)) + np.arange(3)
    with pytest.raises(InputError, match="units: one array per split expected"):
        paired_bootstrap_ci(d, rng=np.random.default_rng(0), units=[np.arange(3)])
    with pytest.raises(InputError, match="units: each split needs one unit per item"):
        paired_bootstrap_ci(d, rng=np.random.default_rng(0), units=[np.arange(3), np.arange(2)])


@pytest.mark.parametrize(
    ("d", "match"),
    [
        ([], r"d: no splits \(0 rows\)"),
        ([[0.1, 0.2], [0.3]], r"split 1: expected a 1-D array of >= 2 differences, got shape \(1,\)"),
        ([[0.1, np.nan]], r"split 0: must be finite \(1 items\)"),
        (np.zeros(4), r"d: expected a 2-D array \(n_splits, n\)"),
    ],
)
def test_paired_bootstrap_rejects_bad_input(d, match):
    with pytest.raises(InputError, match=match):
        paired_bootstrap_ci(d, rng=np.random.default_rng(0))


def test_paired_bootstrap_rejects_bad_parameters():
    d = np.zeros((2, 3))
    with pytest.raises(ConfigError, match=r"confidence == 1.0, must be < 1.0"):
        paired_bootstrap_ci(d, confidence=1.0, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"rng: expected a numpy.random.Generator"):
        paired_bootstrap_ci(d, rng=None)


# ---- (d) Gaussian multiplier bootstrap max-t ----


def correlated_null(rng, n_splits, n_budgets, rho):
    cov = np.full((n_budgets, n_budgets), rho) + (1 - rho) * np.eye(n_budgets)
    return rng.multivariate_normal(np.zeros(n_budgets), cov, size=n_splits)


@pytest.mark.parametrize("alternative", ["greater", "two-sided"])
def test_max_t_size_under_the_null(alternative):
    rng = np.random.default_rng(2024)
    n_sim = 300
    rejections = sum(
        multiplier_max_t(correlated_null(rng, 100, 8, 0.6), n_resamples=1000, alternative=alternative, rng=rng).reject
        for _ in range(n_sim)
    )
    # nominal 0.05; binomial sd at n_sim = 300 is 0.0126
    assert 0.015 <= rejections / n_sim <= 0.095


def test_max_t_detects_a_shift_and_reports_the_figures():
    rng = np.random.default_rng(1)
    delta = 0.3 + correlated_null(rng, 100, 8, 0.5)
    res = multiplier_max_t(delta, rng=np.random.default_rng(2))
    t = np.sqrt(100) * delta.mean(axis=0) / delta.std(axis=0, ddof=1)
    np.testing.assert_allclose(res.statistics, t)
    assert res.statistic == pytest.approx(t.max())
    assert res.reject and res.margin == pytest.approx(res.statistic - res.critical_value)
    assert res.pvalue == pytest.approx(1 / 10_001)
    assert (res.n_budgets, res.n_splits, res.alternative) == (8, 100, "greater")
    # the max of K correlated standard normals lies between the one-budget and the Bonferroni quantiles
    assert 1.645 < res.critical_value < res.bonferroni


@pytest.mark.parametrize(
    ("n_budgets", "alternative", "expected"),
    [(8, "greater", 2.50), (9, "greater", 2.54), (1, "greater", 1.64), (8, "two-sided", 2.73)],
)
def test_bonferroni_thresholds(n_budgets, alternative, expected):
    delta = np.random.default_rng(0).normal(size=(20, n_budgets))
    res = multiplier_max_t(delta, n_resamples=10, alternative=alternative, rng=np.random.default_rng(0))
    assert res.bonferroni == pytest.approx(expected, abs=0.005)


def test_one_budget_critical_value_is_the_normal_quantile():
    delta = np.random.default_rng(0).normal(size=(50, 1))
    res = multiplier_max_t(delta, n_resamples=50_000, rng=np.random.default_rng(1))
    assert res.critical_value == pytest.approx(1.645, abs=0.03)


def test_constant_budget_does_not_break_the_test():
    rng = np.random.default_rng(0)
    delta = np.column_stack([rng.normal(size=30), np.zeros(30)])  # top-k = all at k >= J: Delta = 0 exactly
    res = multiplier_max_t(delta, n_resamples=500, rng=rng)
    assert res.statistics[1] == 0.0 and np.isfinite(res.critical_value)


@pytest.mark.parametrize(
    ("delta", "match"),
    [
        (np.zeros((1, 3)), r"expected shape \(n_splits >= 2, n_budgets >= 1\), got \(1, 3\)"),
        (np.zeros(5), r"expected shape \(n_splits >= 2, n_budgets >= 1\), got \(5,\)"),
        ([[0.1, np.inf], [0.2, 0.1]], r"delta: must be finite \(1 cells\)"),
    ],
)
def test_max_t_rejects_bad_input(delta, match):
    with pytest.raises(InputError, match=match):
        multiplier_max_t(delta, rng=np.random.default_rng(0))


def test_max_t_rejects_bad_parameters():
    delta = np.zeros((3, 2))
    with pytest.raises(ConfigError, match=r"alternative: must be 'greater' or 'two-sided', got 'less'"):
        multiplier_max_t(delta, alternative="less", rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"alpha == 0, must be > 0.0"):
        multiplier_max_t(delta, alpha=0, rng=np.random.default_rng(0))
