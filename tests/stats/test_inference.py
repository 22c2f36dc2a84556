from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.inference import bootstrap_ci, summarise_over_splits


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
