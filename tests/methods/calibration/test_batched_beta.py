"""The batched beta-calibration Newton against the scalar estimator (BetaCalibration, L-BFGS-B) it must equal."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import expit

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.calibration.base import logistic_loss
from judgecal_dist.methods.calibration.batched_beta import beta_cv_nll, beta_features, fit_beta_batched
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.stats.metrics import nll


def _panel_scores(rng: np.random.Generator, n_candidates: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Log-odds like a large panel's one-coin scores: tens of nats, mostly on the right side."""
    y = rng.integers(0, 2, n)
    sign = np.where(rng.random((n_candidates, n)) < 0.85, 1.0, -1.0)
    return (2 * y - 1)[None, :] * sign * rng.gamma(2.0, rng.uniform(0.5, 30.0, (n_candidates, 1))), y


def _objective(F: np.ndarray, y: np.ndarray, theta: np.ndarray, penalty: float, l1_ratio: float) -> float:
    u = theta - np.array([1.0, 1.0, 0.0])
    loss = float(np.mean(logistic_loss(F @ theta, y.astype(float))))
    return loss + penalty * (l1_ratio * np.abs(u).sum() + 0.5 * (1 - l1_ratio) * u @ u)


def _scalar(t: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, **kw) -> tuple[np.ndarray, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BetaCalibration(**kw).fit(t, y, sample_weight=w)
    return np.array([model.a_, model.b_, model.c_]), model


@pytest.mark.parametrize(
    ("penalty", "l1_ratio", "score_input"),
    [(0.01, 0.5, "logit"), (0.1, 1.0, "logit"), (0.01, 0.0, "logit"), (0.0, 0.5, "logit"), (0.01, 0.5, "probability")],
)
def test_batched_fit_equals_the_scalar_estimator(penalty, l1_ratio, score_input):
    rng = np.random.default_rng(1)
    t, y = _panel_scores(rng, 12, 70)
    scores = t if score_input == "logit" else expit(t / 20.0)
    F = beta_features(scores, score_input=score_input)
    params, converged = fit_beta_batched(F, y, np.ones(y.size), penalty=penalty, l1_ratio=l1_ratio)
    assert converged.all()
    for c in range(t.shape[0]):
        ref, model = _scalar(scores[c], y, penalty=penalty, l1_ratio=l1_ratio, score_input=score_input)
        # never a worse objective than L-BFGS-B; the same optimum wherever the penalty makes it unique and sharp
        assert _objective(F[c], y, params[c], penalty, l1_ratio) <= _objective(F[c], y, ref, penalty, l1_ratio) + 1e-9
        if penalty > 0:
            assert params[c] == pytest.approx(ref, abs=1e-4)


def test_weights_select_training_items_like_the_scalar_fit_on_the_subset():
    rng = np.random.default_rng(2)
    t, y = _panel_scores(rng, 6, 60)
    w = (rng.random(60) < 0.7).astype(float)
    params, _ = fit_beta_batched(beta_features(t), y, w)
    for c in range(6):
        ref, _ = _scalar(t[c][w > 0], y[w > 0], score_input="logit")
        assert params[c] == pytest.approx(ref, abs=1e-5)


def test_cv_nll_equals_a_loop_of_scalar_fits():
    rng = np.random.default_rng(3)
    t, y = _panel_scores(rng, 8, 55)
    folds = np.arange(55) % 5
    got = beta_cv_nll(t, y, folds, penalty=0.01, l1_ratio=0.5, eps=1e-6)
    for c in range(8):
        p = np.empty(55)
        for k in range(5):
            _, model = _scalar(t[c][folds != k], y[folds != k], score_input="logit")
            p[folds == k] = model.predict_proba(t[c][folds == k])[:, 1]
        assert got[c] == pytest.approx(nll(y, p, eps=1e-6), abs=1e-6)


def test_logit_features_stay_finite_where_clipped_probabilities_collapse():
    t = np.array([-800.0, -40.0, -14.0, 14.0, 40.0, 800.0])
    F = beta_features(t)
    assert np.isfinite(F).all() and np.all(np.diff(F[:, 0]) > 0)
    clipped = beta_features(expit(t), score_input="probability")
    assert np.unique(clipped[:, 0]).size == 2  # eps = 1e-6 leaves two values for these six scores


def test_bad_input():
    with pytest.raises(InputError):
        fit_beta_batched(np.zeros((2, 3)), [0, 1], [1, 1])
    with pytest.raises(InputError):
        fit_beta_batched(np.zeros((1, 2, 3)), [0, 1], [0, 0])
    with pytest.raises(ConfigError):
        beta_features([0.1], score_input="odds")
    with pytest.raises(InputError):
        beta_features([np.inf])
