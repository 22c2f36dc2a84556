"""The contract every score calibrator meets (spec §3.2-3.4); method-specific references live in test_<module>.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.calibration import BetaCalibration, IsotonicCalibrator, PlattCalibrator, TemperatureScaling

CALIBRATORS = [PlattCalibrator, TemperatureScaling, BetaCalibration, IsotonicCalibrator]
EPS = 1e-6


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_rows_are_probabilities_even_at_zero_and_one(cls, miscalibrated):
    s, y = miscalibrated
    s = np.r_[s, 0.0, 1.0, 0.0, 1.0]  # exact 0/1 scores in the fit data, both labels on each
    y = np.r_[y, 0, 1, 1, 0]
    cal = cls(score_input="probability").fit(s, y)
    proba = cal.predict_proba(np.r_[0.0, 1e-300, 0.5, 1.0 - 1e-17, 1.0, s])
    assert proba.shape == (len(s) + 5, 2) and np.isfinite(proba).all()
    assert np.all((proba >= 0.0) & (proba <= 1.0))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_monotone_in_the_score(cls, miscalibrated):
    cal = cls(score_input="probability").fit(*miscalibrated)
    grid = np.linspace(0.0, 1.0, 201)
    assert np.all(np.diff(cal.predict_proba(grid)[:, 1]) >= -1e-12)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_relabelling_symmetry(cls, miscalibrated):
    s, y = miscalibrated
    grid = np.linspace(0.01, 0.99, 25)
    p = cls(score_input="probability").fit(s, y).predict_proba(grid)
    q = cls(score_input="probability").fit(1.0 - s, 1 - y).predict_proba(1.0 - grid)
    np.testing.assert_allclose(q, p[:, ::-1], atol=1e-6)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_integer_weights_equal_repeated_items(cls, miscalibrated):
    s, y = miscalibrated
    w = np.random.default_rng(3).integers(0, 4, size=len(s))
    weighted = cls(score_input="probability").fit(s, y, sample_weight=w)
    repeated = cls(score_input="probability").fit(np.repeat(s, w), np.repeat(y, w))
    grid = np.linspace(0.0, 1.0, 41)
    np.testing.assert_allclose(weighted.predict_proba(grid), repeated.predict_proba(grid), atol=1e-6)


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize("label", [0, 1])
def test_constant_labels_are_finite_and_documented(cls, label):
    s = np.array([0.2, 0.6, 0.9, 0.4])
    y = np.full(4, label)
    expected = {  # (warning, fallback_) per calibrator, as documented in each class
        PlattCalibrator: (UserWarning, "constant_labels"),
        BetaCalibration: (None, None),  # penalised by default: a finite fit
        IsotonicCalibrator: (None, None),  # the constant map at the label, clipped
        # mean logit 0.2: it favours label 1 (interior optimum) and disfavours label 0 (T at its upper bound)
        TemperatureScaling: (None if label == 1 else ConvergenceWarning, None),
    }[cls]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = cls(score_input="probability").fit(s, y)
    assert [type(w.message) for w in caught] == ([expected[0]] if expected[0] else [])
    assert getattr(cal, "fallback_", None) == expected[1]
    proba = cal.predict_proba(np.linspace(0, 1, 11))
    assert np.isfinite(proba).all() and np.all((proba > 0) & (proba < 1))


def test_unpenalised_beta_constant_labels_fall_back_to_identity():
    s = np.array([0.2, 0.6, 0.9])
    with pytest.warns(UserWarning, match=r"y has a single class \(0\).*identity map"):
        cal = BetaCalibration(penalty=0.0, score_input="probability").fit(s, [0, 0, 0])
    assert (cal.a_, cal.b_, cal.c_, cal.fallback_) == (1.0, 1.0, 0.0, "constant_labels")
    np.testing.assert_allclose(cal.predict_proba(s)[:, 1], s)


def test_temperature_constant_labels_on_one_side_hit_the_bound():
    with pytest.warns(ConvergenceWarning, match=r"optimum is at the bound T = 0.01 .*correct side of 1/2"):
        cal = TemperatureScaling(score_input="probability").fit([0.6, 0.7, 0.9], [1, 1, 1])
    assert cal.temperature_ == pytest.approx(0.01, rel=1e-6)
    assert np.isfinite(cal.predict_proba([0.0, 0.55, 1.0])).all()


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_single_item(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Platt's single-class and temperature's bound warnings, tested above
        cal = cls(score_input="probability").fit([0.7], [1])
    assert np.isfinite(cal.predict_proba([0.0, 0.7, 1.0])).all()


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_constant_scores(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = cls(score_input="probability").fit(np.full(4, 0.7), [1, 0, 1, 1])
    p = cal.predict_proba([0.7])[0, 1]
    assert np.isfinite(p) and 0.5 < p < 1.0


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_clone_and_not_fitted(cls):
    cal = cls(score_input="probability", eps=1e-4)
    assert clone(cal).get_params() == cal.get_params() and cal.get_params()["eps"] == 1e-4
    with pytest.raises(NotFittedError, match=f"This {cls.__name__} instance is not fitted"):
        cal.predict_proba([0.5])


@pytest.mark.parametrize("cls", CALIBRATORS)
@pytest.mark.parametrize(
    ("s", "y", "kwargs", "match"),
    [
        (np.full((3, 2), 0.5), [0, 1, 1], {}, r"fit: s: expected a 1-D array .*pass column 1"),
        (
            [0.2, 1.5, 0.3],
            [0, 1, 1],
            {},
            r"s: probabilities must be finite and in \[0, 1\] \(1 items, e.g. \[1\]=1.5\)",
        ),
        ([0.2, np.nan, 0.3], [0, 1, 1], {}, r"s: probabilities must be finite"),
        ([0.2, 0.5, 0.3], [0, 1, -1], {}, r"y: labels must be 0 or 1"),
        ([0.2, 0.5], [0, 1, 1], {}, r"inconsistent numbers of items: s has 2, y has 3"),
        ([], [], {}, r"s: no probabilities \(0 items\)"),
        ([0.2, 0.5, 0.3], [0, 1, 1], {"sample_weight": [1, -1, 1]}, r"sample_weight: must be finite and >= 0"),
        ([0.2, 0.5, 0.3], [0, 1, 1], {"sample_weight": [0, 0, 0]}, r"sample_weight: all weights are zero"),
    ],
)
def test_fit_rejects_input(cls, s, y, kwargs, match):
    with pytest.raises(InputError, match=f"{cls.__name__}.{match}" if match.startswith("fit") else match):
        cls(score_input="probability").fit(s, y, **kwargs)


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_fit_rejects_eps(cls):
    with pytest.raises(ConfigError, match=r"eps == 0.5, must be < 0.5"):
        cls(score_input="probability", eps=0.5).fit([0.2, 0.7], [0, 1])


@pytest.mark.parametrize("cls", CALIBRATORS)
def test_predict_rejects_input(cls, miscalibrated):
    cal = cls(score_input="probability").fit(*miscalibrated)
    with pytest.raises(InputError, match=f"{cls.__name__}.predict_proba: s: probabilities must be finite"):
        cal.predict_proba([0.2, -0.1])
