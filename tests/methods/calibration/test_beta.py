from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, logit, xlogy

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.platt import PlattCalibrator

EPS = 1e-6


def nll(y, p):
    return float(-(xlogy(y, p) + xlogy(1 - y, 1 - p)).mean())


@pytest.fixture(scope="module")
def bent():
    """Scores in [1e-3, 1 - 1e-3] (no clipping anywhere) whose true map is a beta map with a != b."""
    rng = np.random.default_rng(1)
    s = np.clip(rng.beta(0.8, 0.8, 2000), 1e-3, 1 - 1e-3)
    y = (rng.random(s.size) < expit(1.8 * np.log(s) - 0.6 * np.log1p(-s) + 0.3)).astype(int)
    return s, y


def test_unregularised_nll_no_higher_than_betacal(bent):
    """Oracle: the betacal package (Kull et al.'s reference code) on the same data, 'abm' parametrisation."""
    s, y = bent
    before = list(warnings.filters)
    with warnings.catch_warnings():  # betacal calls warnings.filterwarnings("ignore") on every fit
        betacal = pytest.importorskip("betacal")
        reference = betacal.BetaCalibration(parameters="abm").fit(s, y).predict(s)
    assert list(warnings.filters) == before
    cal = BetaCalibration(penalty=0.0, score_input="probability").fit(s, y)
    assert nll(y, cal.predict_proba(s)[:, 1]) <= nll(y, reference) + 1e-9
    assert cal.fallback_ is None and cal.n_iter_ == len(cal.loss_history_) > 0
    assert (cal.a_, cal.b_) == pytest.approx((1.8, 0.6), abs=0.25)


def test_elastic_net_matches_direct_minimisation(bent):
    s, y = bent
    lam, l1 = 0.02, 0.3
    f1, f2 = np.log(s), -np.log1p(-s)

    def objective(abc):  # independent: probabilities, xlogy and the penalty as written in spec §3.3
        a, b, c = abc
        pen = l1 * (abs(a - 1) + abs(b - 1) + abs(c)) + (1 - l1) / 2 * ((a - 1) ** 2 + (b - 1) ** 2 + c**2)
        return nll(y, expit(a * f1 + b * f2 + c)) + lam * pen

    ref = minimize(objective, x0=[1.0, 1.0, 0.0], method="Powell", options={"xtol": 1e-10, "ftol": 1e-14}).x
    cal = BetaCalibration(penalty=lam, l1_ratio=l1, score_input="probability").fit(s, y)
    np.testing.assert_allclose([cal.a_, cal.b_, cal.c_], ref, atol=1e-4)
    assert objective([cal.a_, cal.b_, cal.c_]) <= objective(ref) + 1e-10


def test_sum_scale_is_mean_scale_with_lambda_over_m(bent):
    s, y = bent
    summed = BetaCalibration(penalty=5.0, penalty_scale="sum", score_input="probability").fit(s, y)
    averaged = BetaCalibration(penalty=5.0 / len(s), score_input="probability").fit(s, y)
    np.testing.assert_allclose([summed.a_, summed.b_, summed.c_], [averaged.a_, averaged.b_, averaged.c_], atol=1e-7)


def test_recovers_identity_on_calibrated_data():
    rng = np.random.default_rng(11)
    s = rng.beta(0.7, 0.7, size=20_000)
    y = (rng.random(s.size) < s).astype(int)
    cal = BetaCalibration(penalty=0.0, score_input="probability").fit(s, y)
    assert (cal.a_, cal.b_, cal.c_) == pytest.approx((1.0, 1.0, 0.0), abs=0.15)  # sampling error, ~2 SE
    default = BetaCalibration(score_input="probability").fit(
        s, y
    )  # the default elastic net sits at the identity on calibrated data
    assert (default.a_, default.b_, default.c_) == pytest.approx((1.0, 1.0, 0.0), abs=1e-6)


@pytest.mark.parametrize("l1_ratio", [0.0, 0.5, 1.0])
def test_large_penalty_collapses_to_identity(bent, l1_ratio):
    s, y = bent
    cal = BetaCalibration(penalty=1e4, l1_ratio=l1_ratio, score_input="probability").fit(s, y)
    assert (cal.a_, cal.b_, cal.c_) == pytest.approx((1.0, 1.0, 0.0), abs=1e-3 if l1_ratio == 0.0 else 1e-12)
    np.testing.assert_allclose(cal.predict_proba(s)[:, 1], s, atol=1e-3)


def test_penalty_path_shrinks_toward_identity(bent):
    s, y = bent
    dist = [
        np.abs(np.array([c.a_ - 1, c.b_ - 1, c.c_])).sum()
        for c in (
            BetaCalibration(penalty=lam, score_input="probability").fit(s, y) for lam in (0.0, 1e-3, 1e-2, 1e-1, 1.0)
        )
    ]
    assert all(d1 >= d2 - 1e-9 for d1, d2 in zip(dist, dist[1:], strict=False))
    assert dist[0] > 0.5 and dist[-1] < 1e-9


def test_a_and_b_stay_non_negative():
    """Scores anti-correlated near s -> 0: the unconstrained optimum has a < 0; the fit stops at a = 0."""
    rng = np.random.default_rng(8)
    s = rng.uniform(0.001, 0.999, 3000)
    y = (rng.random(s.size) < expit(-0.8 * np.log(s) - 1.5 * np.log1p(-s) - 1.0)).astype(int)
    for lam in (0.0, 0.01):
        cal = BetaCalibration(penalty=lam, score_input="probability").fit(s, y)
        assert cal.a_ == 0.0 and cal.b_ > 0.0
        grid = np.linspace(0, 1, 101)
        assert np.all(np.diff(cal.predict_proba(grid)[:, 1]) >= 0)


def test_platt_subfamily(miscalibrated):
    """Data from a Platt map: beta (a = b) is Platt on logit(s); fitted beta is never worse than Platt (nested)."""
    s, y = miscalibrated
    beta = BetaCalibration(penalty=0.0, score_input="probability").fit(s, y)
    platt = PlattCalibrator(score_input="probability").fit(s, y)
    assert nll(y, beta.predict_proba(s)[:, 1]) <= nll(y, platt.predict_proba(s)[:, 1]) + 1e-10
    tied = BetaCalibration(penalty=0.0, score_input="probability").fit(s, y)
    tied.a_, tied.b_, tied.c_ = platt.slope_, platt.slope_, platt.intercept_
    np.testing.assert_allclose(tied.predict_proba(s), platt.predict_proba(s), atol=1e-12)


def test_constant_scores_unpenalised_give_best_constant():
    cal = BetaCalibration(penalty=0.0, score_input="probability").fit(np.full(4, 0.7), [1, 0, 1, 1])
    assert (cal.a_, cal.b_, cal.fallback_) == (0.0, 0.0, "constant_scores")
    assert cal.c_ == pytest.approx(logit(0.75))


def test_separable_unpenalised_warns_and_stays_finite():
    with pytest.warns(Warning, match=r"a threshold on s separates the classes"):
        cal = BetaCalibration(penalty=0.0, score_input="probability").fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    assert np.isfinite([cal.a_, cal.b_, cal.c_]).all()
    assert np.isfinite(cal.predict_proba([0.0, 0.5, 1.0])).all()


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"penalty": -1.0}, r"penalty == -1.0, must be >= 0"),
        ({"l1_ratio": 1.5}, r"l1_ratio == 1.5, must be <= 1"),
        ({"penalty_scale": "median"}, r"penalty_scale: must be 'mean' or 'sum', got 'median'"),
    ],
)
def test_rejects_hyperparameters(params, match):
    with pytest.raises(ConfigError, match=match):
        BetaCalibration(score_input="probability", **params).fit([0.2, 0.7], [0, 1])
