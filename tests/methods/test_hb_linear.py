"""HB linear corrector: NUTS vs the exact conjugate posterior, sufficient statistics, pooling, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from judgecal_dist.errors import InputError
from judgecal_dist.methods.hb_linear import HierarchicalLinear, _model
from judgecal_dist.methods.linear_conjugate import ConjugateLinear, ols_from_stats, sufficient_stats


@pytest.fixture(scope="module")
def small_cell():
    # Few noisy anchors with a weak slope: the canary probability is far from 0 and 1, so it is a real check.
    rng = np.random.default_rng(3)
    j = rng.uniform(1, 5, 25)
    y = np.clip(2.0 + 0.4 * j + 0.8 * rng.standard_normal(25), 1, 5)
    return j, y


@pytest.fixture(scope="module")
def nuts_cell(small_cell):
    j, y = small_cell
    return HierarchicalLinear(pooled=False, random_state=0).fit(j, y)


def test_nuts_matches_conjugate_closed_form(small_cell, nuts_cell):
    j, y = small_cell
    exact = ConjugateLinear().fit(sufficient_stats(j, y))
    assert nuts_cell.converged_
    for k, name in enumerate(("alpha", "beta")):
        draws = nuts_cell.draws_[name][..., 0]
        mcse = draws.std() / np.sqrt(nuts_cell.ess_bulk_["z_" + name])
        assert abs(draws.mean() - exact.mean_[k]) < 4 * mcse, name  # spec §3.8: within 4 Monte-Carlo s.e.
    assert 0.02 < exact.canary_prob_ < 0.98
    p = exact.canary_prob_
    # A proportion of correlated draws: Monte-Carlo s.e. sqrt(p(1-p)/ESS) (spec's 0.01 needs ~10^4 draws).
    assert abs(nuts_cell.canary_prob_[0] - p) < 4 * np.sqrt(p * (1 - p) / nuts_cell.ess_bulk_["z_beta"])
    assert abs(nuts_cell.sigma_[0] - exact.sigma_mean_) < 0.03


def test_predictive_interval_matches_conjugate_mixture(small_cell, nuts_cell):
    exact = ConjugateLinear().fit(sufficient_stats(*small_cell))
    scores = np.array([1.0, 3.0, 5.0])
    low, high = nuts_cell.predict_interval(scores, kind="predictive")
    # 2.5%/97.5% quantiles of ~1000 effective draws: Monte-Carlo s.e. ~0.07 on this scale, hence 0.25.
    np.testing.assert_allclose(low, exact.predictive_quantiles(scores, 0.025), atol=0.25)
    np.testing.assert_allclose(high, exact.predictive_quantiles(scores, 0.975), atol=0.25)
    mean, sd = exact.predictive_moments(scores)
    np.testing.assert_allclose(nuts_cell.predict(scores), mean, atol=0.05)
    c_low, c_high = nuts_cell.predict_interval([3.0], kind="credible")
    assert high[1] - low[1] > 2 * (c_high[0] - c_low[0])  # the predictive interval integrates sigma


def test_sufficient_statistic_potential_equals_rowwise_likelihood(small_cell):
    from numpyro.handlers import substitute
    from numpyro.infer.util import log_density

    j, y = small_cell
    params = {"z_alpha": np.array([0.3]), "z_beta": np.array([-0.2]), "sigma": np.array([0.7])}
    args = (sufficient_stats(j, y)[None, :], np.array([True]), (0.0, 2.0, 1.0, 2.0), False)
    logp, trace = log_density(substitute(_model, data=params), args, {}, {})
    alpha, beta = 0.0 + 2.0 * 0.3, 1.0 + 2.0 * -0.2
    expected = norm.logpdf(y, alpha + beta * j, 0.7).sum()
    expected += norm.logpdf([0.3, -0.2]).sum() + np.log(2) + norm.logpdf(0.7)  # priors: N(0,1) x2, HalfNormal(1)
    assert float(logp) == pytest.approx(expected, rel=1e-6)


def test_ols_and_conjugate_agree_at_large_n():
    rng = np.random.default_rng(0)
    j = rng.uniform(1, 5, 1500)
    y = 1.1 + 0.86 * j + 0.48 * rng.standard_normal(1500)
    a, b, s = ols_from_stats(sufficient_stats(j, y))
    slope, intercept = np.polyfit(j, y, 1)
    assert (a, b) == pytest.approx((intercept, slope), abs=1e-10)
    exact = ConjugateLinear().fit(sufficient_stats(j, y))
    np.testing.assert_allclose(exact.mean_, [a, b], atol=1e-3)  # spec §3.8(a): agree within 1e-3 at n >= 100


def test_pooling_shrinks_a_five_anchor_rubric():
    rng = np.random.default_rng(11)
    js, ys, rs = [], [], []
    for r, (alpha, beta) in enumerate([(0.5, 0.9), (0.6, 0.88), (0.4, 0.92), (0.55, 0.9)]):
        j = rng.uniform(1, 5, 300)
        js.append(j)
        ys.append(np.clip(alpha + beta * j + 0.4 * rng.standard_normal(300), 1, 5))
        rs += [f"big{r}"] * 300
    j_small = np.array([1.5, 2.0, 3.0, 4.0, 4.5])
    y_small = np.array([3.4, 3.3, 3.2, 3.3, 3.1])  # own OLS slope ~ -0.07, far from the population ~0.9
    j_all, y_all = np.concatenate([*js, j_small]), np.concatenate([*ys, y_small])
    rubric = np.array(rs + ["small"] * 5)
    own = ols_from_stats(sufficient_stats(j_small, y_small))[1]
    pooled = HierarchicalLinear(num_warmup=300, num_samples=400, retry_target_accept=0.9, random_state=1).fit(
        j_all, y_all, rubric
    )
    i = pooled.rubrics_.index("small")
    mu_beta = pooled.draws_["mu_beta"].mean()
    assert abs(pooled.beta_[i] - mu_beta) < 0.5 * abs(own - mu_beta)  # pulled most of the way to the population
    assert pooled.beta_[i] > own + 0.3
    assert not pooled.canary_alert_[[k for k, r in enumerate(pooled.rubrics_) if r != "small"]].any()


def test_one_anchor_rubric_uses_pooled_prior_and_says_so():
    rng = np.random.default_rng(5)
    j = rng.uniform(1, 5, 200)
    y = np.clip(0.5 + 0.9 * j + 0.3 * rng.standard_normal(200), 1, 5)
    rubric = np.array(["a"] * 100 + ["b"] * 100 + ["c"])
    j, y = np.append(j, 3.0)[:201], np.append(y, 4.9)[:201]
    with pytest.warns(UserWarning, match="pooled prior"):
        model = HierarchicalLinear(num_warmup=300, num_samples=400, retry_target_accept=0.9).fit(
            j, y, rubric, rubrics=["a", "b", "c", "d"]
        )
    assert model.fallback_ == ["c", "d"] and model.n_anchors_.tolist() == [100, 100, 1, 0]
    # The fallback rubrics get the population predictive: their beta draws have the population's spread.
    assert model.draws_["beta"][..., 3].std() > model.draws_["beta"][..., 0].std()
    with pytest.raises(InputError, match="fewer than 2 anchors"):
        HierarchicalLinear(pooled=False).fit(j, y, rubric)


def test_bad_input_is_rejected():
    with pytest.raises(InputError, match=r"j \(judge score\): scores outside the declared range \[1, 5\]"):
        HierarchicalLinear().fit([0.5, 2.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(InputError, match="y \\(reference score\\)"):
        HierarchicalLinear().fit([1.0, 2.0, 3.0], [1.0, 2.0, np.nan])
    with pytest.raises(InputError, match="constant judge scores"):
        ols_from_stats(sufficient_stats([3.0, 3.0, 3.0], [1.0, 2.0, 3.0]))
