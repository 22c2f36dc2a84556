from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.inference import bootstrap_ci, corrected_resampled_t, summarise_over_splits


@pytest.fixture(scope="module")
def split_results():
    rng = np.random.default_rng(2)
    arms = np.repeat(["all", "top5"], 20)
    return pd.DataFrame(
        {
            "dataset": "toy",
            "arm": arms,
            "seed": np.tile(np.arange(20), 2),
            "nll": np.where(arms == "all", 0.40, 0.45) + rng.normal(0, 0.02, 40),
            "brier": 0.12,  # constant: a degenerate metric
        }
    )


def test_coverage_is_near_nominal():
    rng = np.random.default_rng(123)
    hits = 0
    n_reps = 300
    for _ in range(n_reps):
        sample = rng.normal(1.0, 2.0, size=40)
        low, high = bootstrap_ci(sample, n_resamples=999, rng=rng)
        hits += low <= 1.0 <= high
    # nominal 0.95; the percentile interval under-covers slightly at n = 40 (binomial sd ~ 0.013)
    assert 0.88 <= hits / n_reps <= 0.99


@pytest.mark.parametrize("values", [[0.3], [0.2, 0.2, 0.2], np.full(100, -1.5)])
def test_degenerate_inputs_give_point_interval(values):
    low, high = bootstrap_ci(values, rng=np.random.default_rng(0))
    assert low == high == pytest.approx(np.mean(values))


def test_two_values_are_finite_and_ordered():
    low, high = bootstrap_ci([0.1, 0.3], rng=np.random.default_rng(0))
    assert np.isfinite([low, high]).all() and 0.1 <= low <= high <= 0.3


def test_same_seed_same_interval():
    values = np.random.default_rng(9).normal(size=30)
    a = bootstrap_ci(values, rng=np.random.default_rng(4))
    b = bootstrap_ci(values, rng=np.random.default_rng(4))
    assert a == b


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([], r"values: no values \(0 splits\)"),
        ([0.1, np.nan, np.inf], r"values: must be finite \(2 values, e.g. positions \[1, 2\]\)"),
        ([[0.1, 0.2]], r"values: expected a 1-D array, got shape \(1, 2\)"),
        (["a", "b"], r"values: expected numbers"),
    ],
)
def test_bootstrap_ci_rejects_values(values, match):
    with pytest.raises(InputError, match=match):
        bootstrap_ci(values, rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"confidence": 1.0}, r"confidence == 1.0, must be < 1.0"),
        ({"n_resamples": 0}, r"n_resamples == 0, must be >= 1"),
        ({"rng": 0}, r"rng: expected a numpy.random.Generator"),
    ],
)
def test_bootstrap_ci_rejects_params(kwargs, match):
    kwargs = {"rng": np.random.default_rng(0), **kwargs}
    with pytest.raises(ConfigError, match=match):
        bootstrap_ci([0.1, 0.2], **kwargs)


def test_summarise_over_splits(split_results):
    summary = summarise_over_splits(
        split_results, by=["dataset", "arm"], metrics=["nll", "brier"], n_resamples=500, rng=np.random.default_rng(0)
    )
    assert list(summary.columns) == [
        "dataset",
        "arm",
        "n_splits",
        "nll_mean",
        "nll_ci_low",
        "nll_ci_high",
        "brier_mean",
        "brier_ci_low",
        "brier_ci_high",
    ]
    assert summary["arm"].tolist() == ["all", "top5"] and summary["n_splits"].tolist() == [20, 20]
    means = split_results.groupby("arm")["nll"].mean()
    np.testing.assert_allclose(summary["nll_mean"], means.to_numpy())
    assert (summary["nll_ci_low"] < summary["nll_mean"]).all() and (summary["nll_mean"] < summary["nll_ci_high"]).all()
    np.testing.assert_allclose(summary[["brier_mean", "brier_ci_low", "brier_ci_high"]], 0.12)
    assert not summary.isna().any().any()


def test_summary_of_a_group_does_not_depend_on_other_groups(split_results):
    kwargs = {"by": ["arm"], "metrics": ["nll"], "n_resamples": 300}
    both = summarise_over_splits(split_results, rng=np.random.default_rng(1), **kwargs)
    alone = summarise_over_splits(split_results[split_results.arm == "top5"], rng=np.random.default_rng(1), **kwargs)
    pd.testing.assert_frame_equal(both.iloc[[1]].reset_index(drop=True), alone)


def test_summarise_without_groups(split_results):
    summary = summarise_over_splits(split_results, by=[], metrics=["nll"], rng=np.random.default_rng(0))
    assert len(summary) == 1 and summary.loc[0, "n_splits"] == 40


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"by": ["arm"], "metrics": ["ece"]}, InputError, r"missing columns \['ece'\]; found \["),
        ({"by": ["arm"], "metrics": []}, ConfigError, r"metrics: name at least one metric column"),
        ({"by": ["arm"], "metrics": ["arm"]}, ConfigError, r"columns both in by and metrics: \['arm'\]"),
        ({"by": ["nll"], "metrics": ["dataset"]}, InputError, r"metric columns must be numeric: \['dataset'\]"),
    ],
)
def test_summarise_rejects(split_results, kwargs, error, match):
    with pytest.raises(error, match=match):
        summarise_over_splits(split_results, rng=np.random.default_rng(0), **kwargs)


def test_summarise_rejects_nan_naming_group(split_results):
    broken = split_results.copy()
    broken.loc[25, "nll"] = np.nan
    with pytest.raises(InputError, match=r"nll: group \{'arm': 'top5'\}: .*must be finite"):
        summarise_over_splits(broken, by=["arm"], metrics=["nll"], rng=np.random.default_rng(0))


def test_summarise_rejects_empty_frame(split_results):
    with pytest.raises(InputError, match=r"results: no rows"):
        summarise_over_splits(split_results.iloc[:0], by=["arm"], metrics=["nll"], rng=np.random.default_rng(0))


# --- corrected resampled t (Nadeau and Bengio) ---


def test_corrected_t_without_overlap_is_scipys_one_sample_t():
    values = np.random.default_rng(5).normal(0.02, 0.05, size=30)
    res = corrected_resampled_t(values, test_train_ratio=0.0, confidence=0.9)
    ref = stats.ttest_1samp(values, 0.0)
    ci = ref.confidence_interval(0.9)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    assert (res.low, res.high) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert res.df == 29


@pytest.mark.parametrize("ratio", [0.25, 1.0, 3.0])
def test_corrected_t_inflates_the_variance_by_one_plus_r_times_the_ratio(ratio):
    """Independent closed form, in plain Python: Var = (1/R + n2/n1) s^2, so t = t_plain / sqrt(1 + R n2/n1)."""
    values = [0.031, -0.004, 0.052, 0.017, 0.026, 0.009, 0.044, -0.012]
    r = len(values)
    mean = sum(values) / r
    s2 = sum((v - mean) ** 2 for v in values) / (r - 1)
    se = math.sqrt((1 / r + ratio) * s2)
    res = corrected_resampled_t(values, test_train_ratio=ratio)
    t_plain = stats.ttest_1samp(values, 0.0).statistic
    assert res.statistic == pytest.approx(t_plain / math.sqrt(1 + r * ratio), rel=1e-12)
    assert res.standard_error == pytest.approx(se, rel=1e-12)
    q = stats.t.ppf(0.975, r - 1)
    assert (res.low, res.high) == pytest.approx((mean - q * se, mean + q * se), rel=1e-12)
    assert res.pvalue == pytest.approx(2 * stats.t.sf(abs(mean / se), r - 1), rel=1e-10)


def test_corrected_t_llmbar_figures():
    """The numbers of the LLMBar claim: mean 0.0407, split sd 0.028, 100 half splits give t = 1.45."""
    z = np.random.default_rng(0).standard_normal(100)
    values = 0.0407 + 0.028 * (z - z.mean()) / z.std(ddof=1)
    res = corrected_resampled_t(values, test_train_ratio=1.0)
    assert res.statistic == pytest.approx(0.0407 / (0.028 * math.sqrt(1.01)), rel=1e-9)
    assert res.low < 0 < res.high and res.pvalue > 0.05


@pytest.mark.parametrize(("values", "t", "p"), [([0.0, 0.0, 0.0], 0.0, 1.0), ([0.2, 0.2], np.inf, 0.0)])
def test_corrected_t_constant_values(values, t, p):
    res = corrected_resampled_t(values, test_train_ratio=1.0)
    assert res.low == res.high == res.estimate == pytest.approx(values[0])
    assert (res.statistic, res.pvalue) == (t, p)


@pytest.mark.parametrize(
    ("values", "ratio", "error", "match"),
    [
        ([0.1], 1.0, InputError, r"need >= 2 splits for a variance across splits, got 1"),
        ([0.1, np.nan], 1.0, InputError, r"values: must be finite"),
        ([0.1, 0.2], -0.5, ConfigError, r"test_train_ratio"),
    ],
)
def test_corrected_t_refusals(values, ratio, error, match):
    with pytest.raises(error, match=match):
        corrected_resampled_t(values, test_train_ratio=ratio)


def test_summarise_with_split_sizes_uses_the_ratio_of_mean_sizes():
    rows = pd.DataFrame(
        {
            "arm": ["a"] * 4 + ["b"],
            "delta": [0.01, 0.03, 0.02, 0.06, 0.5],
            "n_eval": [100, 110, 90, 100, 100],
            "n_cal": [300, 290, 310, 300, 300],
        }
    )
    out = summarise_over_splits(
        rows,
        by=["arm"],
        metrics=["delta"],
        rng=np.random.default_rng(0),
        split_sizes=("n_eval", "n_cal"),
        tested=["delta"],
    ).set_index("arm")
    ref = corrected_resampled_t([0.01, 0.03, 0.02, 0.06], test_train_ratio=100 / 300)
    assert (out.at["a", "delta_ci_low"], out.at["a", "delta_ci_high"]) == pytest.approx((ref.low, ref.high))
    assert (out.at["a", "delta_t"], out.at["a", "delta_p"]) == pytest.approx((ref.statistic, ref.pvalue))
    assert np.isnan(out.at["b", "delta_ci_low"]) and np.isnan(out.at["b", "delta_p"])  # one split: no spread
    fixed = summarise_over_splits(rows, by=["arm"], metrics=["delta"], rng=np.random.default_rng(0), split_sizes=0.0)
    t_ci = stats.ttest_1samp([0.01, 0.03, 0.02, 0.06], 0.0).confidence_interval()
    assert (fixed.at[0, "delta_ci_low"], fixed.at[0, "delta_ci_high"]) == pytest.approx((t_ci.low, t_ci.high))


def test_summarise_tested_needs_split_sizes():
    rows = pd.DataFrame({"delta": [0.1, 0.2]})
    with pytest.raises(ConfigError, match="tested: a test across splits needs split_sizes"):
        summarise_over_splits(rows, by=[], metrics=["delta"], rng=np.random.default_rng(0), tested=["delta"])
