"""HB linear corrector: NUTS vs the exact conjugate posterior, sufficient statistics, pooling, bad input."""

from __future__ import annotations

import os
import warnings
from functools import partial

import numpy as np
import pytest
from scipy.stats import norm

from judgecal_dist.errors import InputError
from judgecal_dist.methods.continuous.hb_centring import centred_stats, centring_rule
from judgecal_dist.methods.continuous.hb_linear import ConvergenceGateWarning, HierarchicalLinear, _model
from judgecal_dist.methods.continuous.linear_conjugate import ConjugateLinear, ols_from_stats, sufficient_stats

FULL = os.environ.get("JUDGECAL_FULL") == "1"  # heavy tests at the spec's 500 + 1000 draws


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
        mcse = draws.std() / np.sqrt(nuts_cell.ess_bulk_[name])
        assert abs(draws.mean() - exact.mean_[k]) < 4 * mcse, name  # spec §3.8: within 4 Monte-Carlo s.e.
    assert 0.02 < exact.canary_prob_ < 0.98
    p = exact.canary_prob_
    # A proportion of correlated draws: Monte-Carlo s.e. sqrt(p(1-p)/ESS) (spec's 0.01 needs ~10^4 draws).
    assert abs(nuts_cell.canary_prob_[0] - p) < 4 * np.sqrt(p * (1 - p) / nuts_cell.ess_bulk_["beta"])
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


@pytest.mark.parametrize("centred", [0.0, 1.0])
def test_sufficient_statistic_potential_equals_rowwise_likelihood(small_cell, centred):
    from numpyro.handlers import substitute
    from numpyro.infer.util import log_density

    j, y = small_cell
    j, y = np.concatenate([j] * 80), np.concatenate([y] * 80)  # n = 2000: the float32 potential must not cancel
    alpha, beta, sigma = 0.6, 0.6, 0.7
    # Sampler coordinates: (alpha, beta) themselves when centred, z = (theta - mu) / tau when non-centred.
    coords = (alpha, beta) if centred else ((alpha - 0.0) / 2.0, (beta - 1.0) / 2.0)
    params = {"alpha_decentered": np.array([coords[0]]), "beta_decentered": np.array([coords[1]])}
    params["sigma"] = np.array([sigma])
    args = (centred_stats(sufficient_stats(j, y)[None, :]), np.array([True]), np.full((2, 1), centred))
    model = partial(_model, prior=(0.0, 2.0, 1.0, 2.0), pooled=False)
    logp, _ = log_density(substitute(model, data=params), args, {}, {})
    expected = norm.logpdf(y, alpha + beta * j, sigma).sum() + np.log(2) + norm.logpdf(sigma)  # HalfNormal(1)
    expected += norm.logpdf(coords, 0, 1).sum() if not centred else norm.logpdf([alpha, beta], [0, 1], 2).sum()
    assert float(logp) == pytest.approx(expected, rel=2e-6)


def test_centring_rule_matches_ols_sampling_variance():
    rng = np.random.default_rng(2)
    sizes, params = [1500, 1500, 400, 5, 1], [(0.5, 0.9), (1.2, 0.7), (0.8, 0.5), (0.6, 0.8), (0.7, 0.8)]
    stats, fits = [], []
    for n, (a, b) in zip(sizes, params, strict=True):
        j = rng.uniform(1, 5, n) if n > 5 else rng.uniform(2.5, 3.5, n)  # 5 anchors in a narrow band: weak
        y = a + b * j + 0.5 * rng.standard_normal(n)
        stats.append(sufficient_stats(j, y))
        if n >= 3:  # independent reference: numpy's least squares, its (n - 2)-scaled covariance and residuals
            coef, cov = np.polyfit(j, y, 1, cov=True)
            s2 = np.sum((y - np.polyval(coef, j)) ** 2) / (n - 2)
            fits.append((coef[::-1], np.diag(cov)[::-1] / s2, s2, n - 2))
    mask = np.array(sizes) >= 2
    kappa = centring_rule(np.array(stats), mask, (0.0, 2.0, 1.0, 2.0), pooled=True)
    est = np.array([f[0] for f in fits]).T
    s2_pool = sum(f[2] * f[3] for f in fits) / sum(f[3] for f in fits)
    var = np.array([f[1] * (f[2] * f[3] + 10 * s2_pool) / (f[3] + 10) for f in fits]).T  # moderated, d0 = 10
    tau2 = []
    for theta, v in zip(est, var, strict=True):  # DerSimonian-Laird, written out per parameter
        w = 1 / v
        mean = np.average(theta, weights=w)
        tau2.append(max(0.0, (np.sum(w * (theta - mean) ** 2) - 3) / (w.sum() - np.sum(w**2) / w.sum())))
    tau2 = np.array(tau2)
    np.testing.assert_allclose(kappa[:, :4], var / (var + tau2[:, None]), rtol=1e-8)
    assert kappa[0, 4] == kappa[1, 4] == 1.0  # one anchor: no own information, non-centred
    assert (kappa[:, :3] < 0.5).all() and (kappa[:, 3] > 0.5).all()  # big rubrics centred, 5 anchors not


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


def _funnel_data(n: int = 4000, seed: int = 7):
    # Five data-rich rubrics with distinct (alpha, beta) and little noise: each rubric's likelihood pins its
    # parameters far more tightly than the population spread, the regime where the non-centred form's
    # z = (theta - mu) / tau becomes an inverted funnel in tau (the RB2 failure, exaggerated).
    rng = np.random.default_rng(seed)
    js, ys, rs = [], [], []
    for r, (alpha, beta) in enumerate([(0.4, 0.9), (0.9, 0.75), (1.4, 0.55), (0.7, 0.85), (1.1, 0.65)]):
        j = rng.uniform(1, 5, n)
        js.append(j)
        ys.append(np.clip(alpha + beta * j + 0.3 * rng.standard_normal(n), 1, 5))
        rs += [f"r{r}"] * n
    return np.concatenate(js), np.concatenate(ys), np.array(rs)


def test_data_rich_rubrics_are_centred_and_pass_the_gate():
    j, y, rubric = _funnel_data()
    model = HierarchicalLinear(num_warmup=300, num_samples=500, retry_target_accept=0.9, random_state=0)
    model.fit(j, y, rubric)
    assert model.centred_.all()  # every rubric's anchors dominate its prior
    assert model.divergences_ == 0 and model.converged_  # gate passed at the first attempt (no retry)
    assert not model.retried_
    assert model.mean_steps_ < 64  # no tree-depth saturation (non-centred: ~1000 leapfrog steps per draw)
    a, b, _ = ols_from_stats(sufficient_stats(j[rubric == "r2"], y[rubric == "r2"]))
    i = model.rubrics_.index("r2")
    assert model.alpha_[i] == pytest.approx(a, abs=0.01) and model.beta_[i] == pytest.approx(b, abs=0.005)


@pytest.mark.heavy
def test_noncentred_form_reproduces_the_funnel_failure():
    # The failure the data-driven centring fixes: same data, every rubric non-centred (the previous default).
    # ~1000 leapfrog steps per draw, so the reduced default runs 150 + 200 draws (about a minute).
    j, y, rubric = _funnel_data()
    warmup, draws = (500, 1000) if FULL else (150, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceGateWarning)
        model = HierarchicalLinear(
            num_warmup=warmup, num_samples=draws, retry_target_accept=0.9, centring="noncentred", random_state=0
        ).fit(j, y, rubric)
    assert not model.centred_.any() and not model.converged_
    assert model.mean_steps_ > 500  # tree depth saturated: the inverted funnel in (tau, z)
