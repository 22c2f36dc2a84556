"""Log-odds input to the calibrators and the aggregators' decision_function (calibrator_input = logit)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import expit, logit

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.aggregation.aggregate import MajorityVote, OneCoin
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.aggregation.stacking import LogisticStacking
from judgecal_dist.methods.aggregation.weighted import AccuracyWeighted, LogOddsWeighted
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.isotonic import IsotonicCalibrator
from judgecal_dist.methods.calibration.platt import PlattCalibrator
from judgecal_dist.methods.calibration.temperature import TemperatureScaling
from judgecal_dist.methods.pipeline import Settings, aggregate, calibrate, step1_scores

CALIBRATORS = [PlattCalibrator, TemperatureScaling, BetaCalibration, IsotonicCalibrator]


def _votes(rng: np.random.Generator, n: int, acc: np.ndarray, missing: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, n).astype(np.int8)
    right = rng.random((n, acc.size)) < acc
    v = np.where(right, y[:, None], 1 - y[:, None]).astype(np.int8)
    v[rng.random(v.shape) < missing] = -1
    return v, y


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_logit_input_equals_probability_input_inside_the_clip(cls):
    """On scores inside [eps, 1 - eps] the two inputs are the same data, so the same map must come out."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.98, 300)
    y = (rng.random(300) < p**1.5).astype(int)
    by_p = cls(score_input="probability").fit(p, y).predict_proba(p)[:, 1]
    by_t = cls(score_input="logit").fit(logit(p), y).predict_proba(logit(p))[:, 1]
    np.testing.assert_allclose(by_t, by_p, atol=1e-7)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_logit_input_keeps_scores_beyond_the_clip_apart(cls):
    """Log-odds of +-14..+-200 all clip to two probabilities; on the logit scale the map still sees their order."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 400)
    t = (2 * y - 1) * rng.uniform(14.0, 200.0, 400) * np.where(rng.random(400) < 0.9, 1, -1)
    t += rng.normal(0, 5, 400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = cls(score_input="logit").fit(t, y)
    p = fitted.predict_proba(np.sort(t))[:, 1]
    assert np.isfinite(p).all() and (np.diff(p) >= -1e-12).all()  # monotone, finite at |t| = 200
    if cls is not IsotonicCalibrator:
        assert np.unique(np.round(p, 12)).size > 50


def test_logit_input_rejects_non_finite_and_bad_mode():
    with pytest.raises(InputError, match="log-odds must be finite"):
        BetaCalibration(score_input="logit").fit([0.0, np.inf], [0, 1])
    with pytest.raises(ConfigError, match="score_input"):
        PlattCalibrator(score_input="odds").fit([0.2, 0.8], [0, 1])


def test_decision_functions_against_a_direct_sum():
    rng = np.random.default_rng(2)
    v, y = _votes(rng, 200, np.array([0.9, 0.8, 0.3, 0.6, 0.55]))
    z = np.where(v < 0, 0.0, 2.0 * v - 1.0)
    for model in (OneCoin().fit(v, y), LogOddsWeighted().fit(v, y), OneCoin(prior="empirical").fit(v, y)):
        expected = np.array(
            [logit(model.prior_) + sum(z[i, j] * model.weights_[j] for j in range(5)) for i in range(200)]
        )
        np.testing.assert_allclose(model.decision_function(v), expected, atol=1e-12)
        np.testing.assert_allclose(expit(model.decision_function(v)), model.predict_proba(v)[:, 1], atol=1e-14)
    for model in (MajorityVote().fit(v, y), AccuracyWeighted().fit(v, y)):
        p = model.predict_proba(v)[:, 1]
        t = model.decision_function(v)
        inside = (p > 0) & (p < 1)
        np.testing.assert_allclose(t[inside], logit(p[inside]), atol=1e-12)
        assert (t[p == 1] == np.inf).all() and (t[p == 0] == -np.inf).all()


def test_one_coin_log_odds_are_exact_where_the_probability_saturates():
    """200 judges at 0.9: log-odds ~ +-400; P(Y=1) is 1.0 or 0.0 in float64, the decision function is not."""
    rng = np.random.default_rng(3)
    v, y = _votes(rng, 300, np.full(200, 0.9), missing=0.0)
    model = OneCoin().fit(v, y)
    t = model.decision_function(v)
    assert np.abs(t).max() > 300 and np.isfinite(t).all()
    assert np.unique(model.predict_proba(v)[:, 1]).size < np.unique(t).size


def test_pipeline_scores_on_the_logit_scale():
    rng = np.random.default_rng(4)
    v, y = _votes(rng, 300, np.array([0.85, 0.75, 0.7, 0.35, 0.6, 0.65]))
    v_fit, y_fit, v_new = v[:200], y[:200], v[200:]
    logit_settings, prob_settings = Settings(calibrator_input="logit"), Settings(calibrator_input="probability")
    for name in ("majority", "accuracy_weighted", "log_odds", "one_coin", "dawid_skene", "stacking"):
        _, s_prob, model = aggregate(name, prob_settings, v_fit, y_fit, v_new)
        _, s_logit, _ = aggregate(name, logit_settings, v_fit, y_fit, v_new)
        inside = (s_prob > 1e-6) & (s_prob < 1 - 1e-6)
        np.testing.assert_allclose(s_logit[inside], logit(s_prob[inside]), atol=1e-7, err_msg=name)
        assert np.isfinite(s_logit).all()
        # same data on the two scales: every calibrator gives the same probabilities where nothing was clipped
        for cal in ("none", "platt", "beta"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p1 = calibrate(cal, prob_settings, s_prob, y[200:], {"x": s_prob})["x"]
                p2 = calibrate(cal, logit_settings, s_logit, y[200:], {"x": s_logit})["x"]
            if inside.all():
                np.testing.assert_allclose(p2, p1, atol=1e-6, err_msg=f"{name} {cal}")
    ds = DawidSkene().fit(v_fit)
    np.testing.assert_allclose(
        expit(step1_scores("dawid_skene", ds, v_new, logit_settings)), ds.predict_proba(v_new)[:, 1], atol=1e-12
    )
    st = LogisticStacking(random_state=0).fit(v_fit, y_fit)
    np.testing.assert_allclose(
        expit(step1_scores("stacking", st, v_new, logit_settings)), st.predict_proba(v_new)[:, 1], atol=1e-12
    )


def test_settings_reject_an_unknown_input():
    with pytest.raises(ConfigError, match="calibrator_input"):
        Settings(calibrator_input="odds")
