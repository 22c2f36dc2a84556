from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import permutation_test

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.permutation import _t_from_sum, paired_permutation_test, paired_permutation_test_many


def paired_t(d, axis=-1):
    d = np.asarray(d, dtype=np.float64)
    n = d.shape[axis]
    return d.mean(axis=axis) / (d.std(axis=axis, ddof=1) / np.sqrt(n))


def exact_pvalue(d):
    """Exact sign-flip p-value #{|t(eps * d)| >= |t(d)|} / 2^n by enumerating every sign vector."""
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=d.size)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t_null = paired_t(signs * d, axis=1)
    t_obs = paired_t(d)
    return np.mean(np.abs(t_null) >= abs(t_obs) * (1 - 1e-12))


@pytest.mark.parametrize(
    "d",
    [
        np.array([0.31, 0.12, -0.05, 0.22, 0.08, 0.15, -0.02, 0.27, 0.11, 0.04]),  # clear effect
        np.array([0.3, -0.2, 0.1, -0.15, 0.05, 0.02, -0.01, 0.12]),  # weak effect
        np.array([1.0, 2.0, 1.0, -1.0, 3.0, 2.0, -2.0, 1.0, 1.0, 2.0, -1.0, 1.0]),  # integers: many exact ties
    ],
)
def test_pvalue_matches_exact_enumeration(d):
    n_resamples = 20_000
    res = paired_permutation_test(d, n_resamples=n_resamples, rng=np.random.default_rng(11))
    p_exact = exact_pvalue(d)
    mc_se = np.sqrt(p_exact * (1 - p_exact) / n_resamples)
    assert res.pvalue == pytest.approx(p_exact, abs=4 * mc_se + 1.0 / n_resamples)
    assert res.statistic == pytest.approx(paired_t(d))


def test_pvalue_matches_scipy_permutation_test():
    d = np.random.default_rng(5).normal(0.1, 0.3, size=11)  # 2^11 = 2048 sign vectors: scipy enumerates them
    oracle = permutation_test(
        (d,), paired_t, permutation_type="samples", vectorized=True, n_resamples=10_000, alternative="two-sided"
    )
    res = paired_permutation_test(d, n_resamples=20_000, rng=np.random.default_rng(1))
    assert res.statistic == pytest.approx(oracle.statistic)
    se = np.sqrt(oracle.pvalue * (1 - oracle.pvalue) / 20_000)
    assert res.pvalue == pytest.approx(oracle.pvalue, abs=4 * se + 1e-4)


def test_t_from_sums_equals_direct_t():
    rng = np.random.default_rng(3)
    d = rng.normal(size=30)
    eps = rng.choice([-1.0, 1.0], size=(50, 30))
    via_sums = _t_from_sum(eps @ d, float(d @ d), d.size)
    np.testing.assert_allclose(via_sums, paired_t(eps * d, axis=1), rtol=1e-10)


def test_null_pvalues_are_roughly_uniform():
    rng = np.random.default_rng(8)
    d = rng.normal(size=(200, 40))
    res = paired_permutation_test_many(d, n_resamples=500, rng=np.random.default_rng(9))
    assert 0.02 <= np.mean(res.pvalue < 0.05) <= 0.09
    assert 0.4 <= np.median(res.pvalue) <= 0.6


def test_smallest_pvalue_and_degenerate_inputs():
    rng = np.random.default_rng(0)
    strong = paired_permutation_test(np.full(300, 0.5) + rng.normal(0, 0.01, 300), n_resamples=999, rng=rng)
    assert strong.pvalue == pytest.approx(1 / 1000)
    zeros = paired_permutation_test(np.zeros(5), rng=rng)
    assert zeros == (0.0, 1.0)
    constant = paired_permutation_test(np.full(6, 0.2), n_resamples=4000, rng=rng)
    assert constant.statistic == np.inf  # only the identity and all-flipped draws tie: p ~ 2 / 64
    assert constant.pvalue == pytest.approx(2 / 64, abs=0.015)


def test_many_equals_sequential_single_tests_and_is_reproducible():
    rng = np.random.default_rng(4)
    splits = [rng.normal(0.05, 1, size=n) for n in (210, 211, 50, 209)]  # ragged sizes are fine
    many = paired_permutation_test_many(splits, n_resamples=3000, rng=np.random.default_rng(7))
    gen = np.random.default_rng(7)
    single = [paired_permutation_test(s, n_resamples=3000, rng=gen) for s in splits]
    np.testing.assert_array_equal(many.pvalue, [r.pvalue for r in single])
    np.testing.assert_array_equal(many.statistic, [r.statistic for r in single])
    assert many.median_pvalue == np.median(many.pvalue)
    assert many.median_statistic == np.median(many.statistic)
    again = paired_permutation_test_many(splits, n_resamples=3000, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(many.pvalue, again.pvalue)


def test_block_boundaries_do_not_change_a_large_test():
    # n = 50,000 splits the draws into several blocks; the p-value must stay within Monte-Carlo error of the
    # normal approximation for a large-sample t test.
    d = np.random.default_rng(2).normal(0.0, 1.0, size=50_000)
    res = paired_permutation_test(d, n_resamples=2000, rng=np.random.default_rng(3))
    from scipy.stats import norm

    p_normal = 2 * norm.sf(abs(paired_t(d)))
    assert res.pvalue == pytest.approx(p_normal, abs=0.05)


@pytest.mark.parametrize(
    ("d", "match"),
    [
        ([0.1], r"need >= 2 paired differences for a t statistic, got 1"),
        ([[0.1, 0.2]], r"d: expected a 1-D array of paired differences, got shape \(1, 2\)"),
        ([0.1, np.nan, np.inf], r"d: must be finite \(2 items, e.g. positions \[1, 2\]\)"),
        (["a", "b"], r"d: expected numbers"),
    ],
)
def test_bad_differences_are_rejected(d, match):
    with pytest.raises(InputError, match=match):
        paired_permutation_test(d, rng=np.random.default_rng(0))


def test_bad_parameters_are_rejected():
    with pytest.raises(ConfigError, match=r"n_resamples == 0, must be >= 1"):
        paired_permutation_test([0.1, 0.2], n_resamples=0, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"rng: expected a numpy.random.Generator"):
        paired_permutation_test([0.1, 0.2], rng=0)


def test_many_rejects_bad_splits():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match=r"split 1: .*need >= 2 paired differences"):
        paired_permutation_test_many([[0.1, 0.2], [0.3]], rng=rng)
    with pytest.raises(InputError, match=r"d: no splits \(0 rows\)"):
        paired_permutation_test_many([], rng=rng)
    with pytest.raises(InputError, match=r"for one split use paired_permutation_test"):
        paired_permutation_test_many(np.zeros(5), rng=rng)
