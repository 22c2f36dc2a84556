from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, logit
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.calibration.platt import PlattCalibrator

EPS = 1e-6


def sklearn_oracle(s, y, sample_weight=None, x=None):
    lr = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12, max_iter=1000)
    design = logit(np.clip(s, EPS, 1 - EPS)).reshape(-1, 1)
    lr.fit(design if x is None else np.column_stack([design, x]), y, sample_weight=sample_weight)
    return (lr.coef_[0, 0], lr.intercept_[0]) if x is None else (lr.coef_[0, 0], lr.intercept_[0], lr.coef_[0, 1:])


def test_matches_sklearn_logistic_regression(miscalibrated):
    s, y = miscalibrated
    cal = PlattCalibrator(score_input="probability").fit(s, y)
    slope, intercept = sklearn_oracle(s, y)
    assert cal.slope_ == pytest.approx(slope, abs=1e-5)
    assert cal.intercept_ == pytest.approx(intercept, abs=1e-5)
    assert cal.fallback_ is None and cal.n_iter_ == len(cal.loss_history_) > 0
    assert np.all(np.diff(cal.loss_history_) <= 1e-15)
    expected = expit(slope * logit(np.clip(s, EPS, 1 - EPS)) + intercept)
    np.testing.assert_allclose(cal.predict_proba(s)[:, 1], expected, atol=1e-5)


def test_weighted_matches_sklearn_and_counts_equal_items(miscalibrated):
    s, y = miscalibrated
    w = np.random.default_rng(3).integers(0, 4, size=len(s))
    cal = PlattCalibrator(score_input="probability").fit(s, y, sample_weight=w)
    slope, intercept = sklearn_oracle(s, y, sample_weight=w)
    assert (cal.slope_, cal.intercept_) == pytest.approx((slope, intercept), abs=1e-5)
    expanded = PlattCalibrator(score_input="probability").fit(np.repeat(s, w), np.repeat(y, w))
    assert (expanded.slope_, expanded.intercept_) == pytest.approx((cal.slope_, cal.intercept_), abs=1e-8)


def test_recovers_identity_on_calibrated_data():
    rng = np.random.default_rng(11)
    s = rng.beta(0.7, 0.7, size=20_000)
    y = (rng.random(s.size) < s).astype(int)
    cal = PlattCalibrator(score_input="probability").fit(s, y)
    assert cal.slope_ == pytest.approx(1.0, abs=0.05)
    assert cal.intercept_ == pytest.approx(0.0, abs=0.05)


def test_penalty_matches_direct_minimisation(miscalibrated):
    s, y = miscalibrated
    x = logit(np.clip(s, EPS, 1 - EPS))
    lam = 0.05

    def objective(params):  # independent: sklearn's log_loss plus the ridge toward the identity
        return log_loss(y, expit(params[0] * x + params[1]), labels=[0, 1]) + lam * (
            (params[0] - 1) ** 2 + params[1] ** 2
        )

    ref = minimize(objective, x0=[0.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12}).x
    cal = PlattCalibrator(penalty=lam, score_input="probability").fit(s, y)
    assert (cal.slope_, cal.intercept_) == pytest.approx(tuple(ref), abs=1e-5)
    unpenalised = PlattCalibrator(score_input="probability").fit(s, y)
    assert abs(cal.slope_ - 1) < abs(unpenalised.slope_ - 1)  # shrunk toward the identity
    huge = PlattCalibrator(penalty=1e6, score_input="probability").fit(s, y)
    assert (huge.slope_, huge.intercept_) == pytest.approx((1.0, 0.0), abs=1e-4)


def test_constant_labels_fall_back_to_identity():
    s = np.array([0.2, 0.6, 0.9])
    with pytest.warns(UserWarning, match=r"y has a single class \(1\).*identity map"):
        cal = PlattCalibrator(score_input="probability").fit(s, [1, 1, 1])
    assert (cal.slope_, cal.intercept_, cal.fallback_) == (1.0, 0.0, "constant_labels")
    np.testing.assert_allclose(cal.predict_proba(s)[:, 1], s)


def test_constant_labels_with_penalty_fit_finitely():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = PlattCalibrator(penalty=0.01, score_input="probability").fit(np.array([0.2, 0.6, 0.9]), [1, 1, 1])
    assert cal.fallback_ is None and np.isfinite([cal.slope_, cal.intercept_]).all()
    assert cal.intercept_ > 0


def test_constant_scores_give_best_constant():
    cal = PlattCalibrator(score_input="probability").fit(np.full(4, 0.7), [1, 0, 1, 1])
    assert (cal.slope_, cal.fallback_) == (0.0, "constant_scores")
    assert cal.intercept_ == pytest.approx(logit(0.75))
    np.testing.assert_allclose(cal.predict_proba([0.1, 0.9])[:, 1], 0.75)


def test_separable_data_warn():
    with pytest.warns(ConvergenceWarning, match="separates the classes"):
        PlattCalibrator(score_input="probability").fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])


@pytest.mark.parametrize(
    ("params", "match"),
    [({"penalty": -0.1}, r"penalty == -0.1, must be >= 0"), ({"eps": 0.5}, r"eps == 0.5, must be < 0.5")],
)
def test_fit_rejects_params(params, match):
    with pytest.raises(ConfigError, match=match):
        PlattCalibrator(score_input="probability", **params).fit([0.2, 0.7], [0, 1])


# ---------------------------------------------------------------- item features (eq. (3))


@pytest.fixture(scope="module")
def with_features():
    """Scores plus a 3-level subset (one-hot, first level dropped) and an agreement level; true map uses both."""
    rng = np.random.default_rng(21)
    m = 600
    s = expit(rng.normal(0.0, 2.0, size=m))
    subset = rng.integers(0, 3, size=m)
    agreement = rng.random(m)
    x = np.column_stack([subset == 1, subset == 2, agreement]).astype(float)
    t = 0.7 * logit(s) - 0.2 + x @ np.array([0.8, -0.5, 1.0])
    y = (rng.random(m) < expit(t)).astype(int)
    return s, y, x


def test_features_match_sklearn(with_features):
    s, y, x = with_features
    cal = PlattCalibrator(score_input="probability").fit(s, y, x=x)
    slope, intercept, gamma = sklearn_oracle(s, y, x=x)
    assert (cal.slope_, cal.intercept_) == pytest.approx((slope, intercept), abs=1e-5)
    np.testing.assert_allclose(cal.coef_, gamma, atol=1e-5)
    assert cal.n_item_features_ == 3
    expected = expit(slope * logit(s) + intercept + x @ gamma)
    np.testing.assert_allclose(cal.predict_proba(s, x=x)[:, 1], expected, atol=1e-6)


def test_features_ridge_matches_direct_minimisation(with_features):
    s, y, x = with_features
    u, lam = logit(s), 0.02

    def objective(theta):  # independent: sklearn's log_loss plus the ridge toward (1, 0, 0, 0, 0)
        p = expit(theta[0] * u + theta[1] + x @ theta[2:])
        return log_loss(y, p, labels=[0, 1]) + lam * ((theta[0] - 1) ** 2 + theta[1] ** 2 + np.sum(theta[2:] ** 2))

    ref = minimize(objective, x0=np.zeros(5), method="BFGS", options={"gtol": 1e-10}).x
    cal = PlattCalibrator(penalty=lam, score_input="probability").fit(s, y, x=x)
    np.testing.assert_allclose(np.r_[cal.slope_, cal.intercept_, cal.coef_], ref, atol=1e-5)


def test_constant_scores_with_features_fit_the_features_alone(with_features):
    _, y, x = with_features
    cal = PlattCalibrator(score_input="probability").fit(np.full(len(y), 0.3), y, x=x)
    lr = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12).fit(x, y)
    assert (cal.slope_, cal.fallback_) == (0.0, "constant_scores")
    assert cal.intercept_ == pytest.approx(lr.intercept_[0], abs=1e-6)
    np.testing.assert_allclose(cal.coef_, lr.coef_[0], atol=1e-6)


def test_feature_that_separates_warns():
    s = np.array([0.2, 0.8, 0.3, 0.7, 0.6, 0.4])  # the score alone does not separate
    y = np.array([0, 0, 0, 1, 1, 1])
    with pytest.warns(ConvergenceWarning, match=r"a hyperplane in \(logit\(s\), x\) separates the classes"):
        PlattCalibrator(score_input="probability").fit(s, y, x=y.reshape(-1, 1).astype(float))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PlattCalibrator(score_input="probability").fit(
            s, y, x=np.array([[0.0], [1.0], [0.0], [1.0], [0.0], [1.0]])
        )  # overlaps: no warning


def test_constant_labels_with_features_is_identity(with_features):
    s, _, x = with_features
    with pytest.warns(UserWarning, match=r"single class"):
        cal = PlattCalibrator(score_input="probability").fit(s, np.ones(len(s), dtype=int), x=x)
    np.testing.assert_allclose(cal.predict_proba(s, x=x)[:, 1], np.clip(s, EPS, 1 - EPS), atol=1e-12)


@pytest.mark.parametrize(
    ("fit_x", "predict_x", "match"),
    [
        (True, None, r"x: the calibrator was fitted with item features; pass x accordingly"),
        (False, np.ones((4, 1)), r"x: the calibrator was fitted without item features"),
        (True, np.ones((4, 2)), r"x: has 2 features, but the calibrator was fitted on 3"),
        (True, np.ones((3, 3)), r"inconsistent numbers of items: s has 4, x has 3"),
        (True, np.ones(4), r"x: expected a 2-D array of item features .*x.reshape\(-1, 1\)"),
    ],
)
def test_predict_checks_features(with_features, fit_x, predict_x, match):
    s, y, x = with_features
    cal = PlattCalibrator(score_input="probability").fit(s, y, x=x if fit_x else None)
    with pytest.raises(InputError, match=match):
        cal.predict_proba(np.full(4, 0.5), x=predict_x)


def test_fit_rejects_non_finite_features(with_features):
    s, y, x = with_features
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InputError, match=r"x: item features must be finite \(1 cells, e.g. \[\[3, 1\]\]\)"):
        PlattCalibrator(score_input="probability").fit(s, y, x=bad)
