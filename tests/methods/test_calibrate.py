from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, logit
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.calibrate import PlattCalibrator

EPS = 1e-6


@pytest.fixture(scope="module")
def miscalibrated():
    """Overconfident scores: the true P(Y=1 | s) is sigma(0.6 logit(s) + 0.3)."""
    rng = np.random.default_rng(7)
    s = expit(rng.normal(0.0, 2.5, size=400))
    y = (rng.random(400) < expit(0.6 * logit(s) + 0.3)).astype(int)
    return s, y


def sklearn_oracle(s, y, sample_weight=None):
    lr = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12, max_iter=1000)
    lr.fit(logit(np.clip(s, EPS, 1 - EPS)).reshape(-1, 1), y, sample_weight=sample_weight)
    return lr.coef_[0, 0], lr.intercept_[0]


def test_matches_sklearn_logistic_regression(miscalibrated):
    s, y = miscalibrated
    cal = PlattCalibrator().fit(s, y)
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
    cal = PlattCalibrator().fit(s, y, sample_weight=w)
    slope, intercept = sklearn_oracle(s, y, sample_weight=w)
    assert (cal.slope_, cal.intercept_) == pytest.approx((slope, intercept), abs=1e-5)
    expanded = PlattCalibrator().fit(np.repeat(s, w), np.repeat(y, w))
    assert (expanded.slope_, expanded.intercept_) == pytest.approx((cal.slope_, cal.intercept_), abs=1e-8)


def test_recovers_identity_on_calibrated_data():
    rng = np.random.default_rng(11)
    s = rng.beta(0.7, 0.7, size=20_000)
    y = (rng.random(s.size) < s).astype(int)
    cal = PlattCalibrator().fit(s, y)
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
    cal = PlattCalibrator(penalty=lam).fit(s, y)
    assert (cal.slope_, cal.intercept_) == pytest.approx(tuple(ref), abs=1e-5)
    unpenalised = PlattCalibrator().fit(s, y)
    assert abs(cal.slope_ - 1) < abs(unpenalised.slope_ - 1)  # shrunk toward the identity
    huge = PlattCalibrator(penalty=1e6).fit(s, y)
    assert (huge.slope_, huge.intercept_) == pytest.approx((1.0, 0.0), abs=1e-4)


def test_constant_labels_fall_back_to_identity():
    s = np.array([0.2, 0.6, 0.9])
    with pytest.warns(UserWarning, match=r"y has a single class \(1\).*identity map"):
        cal = PlattCalibrator().fit(s, [1, 1, 1])
    assert (cal.slope_, cal.intercept_, cal.fallback_) == (1.0, 0.0, "constant_labels")
    np.testing.assert_allclose(cal.predict_proba(s)[:, 1], s)


def test_constant_labels_with_penalty_fit_finitely():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = PlattCalibrator(penalty=0.01).fit(np.array([0.2, 0.6, 0.9]), [1, 1, 1])
    assert cal.fallback_ is None and np.isfinite([cal.slope_, cal.intercept_]).all()
    assert cal.intercept_ > 0


def test_constant_scores_give_best_constant():
    cal = PlattCalibrator().fit(np.full(4, 0.7), [1, 0, 1, 1])
    assert (cal.slope_, cal.fallback_) == (0.0, "constant_scores")
    assert cal.intercept_ == pytest.approx(logit(0.75))
    np.testing.assert_allclose(cal.predict_proba([0.1, 0.9])[:, 1], 0.75)


def test_separable_data_warn():
    with pytest.warns(ConvergenceWarning, match="separates the classes"):
        PlattCalibrator().fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])


def test_extreme_scores_are_clipped(miscalibrated):
    cal = PlattCalibrator().fit(*miscalibrated)
    proba = cal.predict_proba([0.0, 1.0])
    assert np.isfinite(proba).all() and np.all((proba > 0) & (proba < 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_clone_and_params():
    cal = PlattCalibrator(penalty=0.1, eps=1e-4)
    assert clone(cal).get_params() == {"penalty": 0.1, "eps": 1e-4}


def test_not_fitted():
    with pytest.raises(NotFittedError, match="PlattCalibrator instance is not fitted"):
        PlattCalibrator().predict_proba([0.5])


@pytest.mark.parametrize(
    ("s", "y", "kwargs", "match"),
    [
        (np.full((3, 2), 0.5), [0, 1, 1], {}, r"s: expected a 1-D array .*pass column 1"),
        (
            [0.2, 1.5, 0.3],
            [0, 1, 1],
            {},
            r"s: probabilities must be finite and in \[0, 1\] \(1 items, e.g. \[1\]=1.5\)",
        ),
        ([0.2, np.nan, 0.3], [0, 1, 1], {}, r"s: probabilities must be finite"),
        ([0.2, 0.5, 0.3], [0, 1, -1], {}, r"y: labels must be 0 or 1"),
        ([0.2, 0.5], [0, 1, 1], {}, r"inconsistent numbers of items: s has 2, y has 3"),
        ([0.2, 0.5, 0.3], [0, 1, 1], {"sample_weight": [1, -1, 1]}, r"sample_weight: must be finite and >= 0"),
        ([0.2, 0.5, 0.3], [0, 1, 1], {"sample_weight": [0, 0, 0]}, r"sample_weight: all weights are zero"),
    ],
)
def test_fit_rejects_input(s, y, kwargs, match):
    with pytest.raises(InputError, match=match):
        PlattCalibrator().fit(s, y, **kwargs)


@pytest.mark.parametrize(
    ("params", "match"),
    [({"penalty": -0.1}, r"penalty == -0.1, must be >= 0"), ({"eps": 0.5}, r"eps == 0.5, must be < 0.5")],
)
def test_fit_rejects_params(params, match):
    with pytest.raises(ConfigError, match=match):
        PlattCalibrator(**params).fit([0.2, 0.7], [0, 1])
