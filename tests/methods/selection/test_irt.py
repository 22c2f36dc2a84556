from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import check_grad
from scipy.stats import spearmanr
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.selection.irt import TwoPLIRT, _neg_log_posterior, correctness_matrix, variance_decomposition


def simulate_2pl(rng, n_items, n_judges, missing=0.1, one_pl=False):
    theta = rng.normal(0, 1, n_judges)
    d = rng.normal(0, 1, n_items)
    kappa = np.ones(n_items) if one_pl else np.exp(rng.normal(0, 0.3, n_items))
    eta = kappa[:, None] * (theta[None, :] - d[:, None])
    U = (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(np.int8)
    U[rng.random(U.shape) < missing] = -1
    return U, theta


@pytest.fixture(scope="module")
def synthetic():
    return simulate_2pl(np.random.default_rng(0), n_items=300, n_judges=25)


@pytest.fixture(scope="module")
def fitted(synthetic):
    return TwoPLIRT().fit(synthetic[0])


def test_recovers_generating_abilities(synthetic, fitted):
    _, theta = synthetic
    assert spearmanr(fitted.ability_, theta).statistic > 0.9
    assert fitted.accuracy_spearman_ > 0.9


def test_standardised_scale_and_shares(fitted):
    assert fitted.ability_.mean() == pytest.approx(0, abs=1e-10)
    assert fitted.ability_.std() == pytest.approx(1)
    assert np.all(fitted.discrimination_ > 0)
    shares = fitted.variance_shares_
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(0 <= v <= 1 for v in shares.values())
    assert fitted.logits().shape == (300, 25) and fitted.predict_proba().shape == (300, 25)
    assert fitted.n_iter_ == len(fitted.loss_history_) and np.all(np.diff(fitted.loss_history_) <= 1e-9)


def test_raw_accuracy_matches_counts(synthetic, fitted):
    U = synthetic[0]
    observed = U != -1
    np.testing.assert_allclose(fitted.raw_accuracy_, (U == 1).sum(axis=0) / observed.sum(axis=0))


def test_fitted_probabilities_track_judge_accuracy(synthetic, fitted):
    U = synthetic[0]
    observed = U != -1
    predicted = np.where(observed, fitted.predict_proba(), 0).sum(axis=0) / observed.sum(axis=0)
    np.testing.assert_allclose(predicted, fitted.raw_accuracy_, atol=0.03)


def test_one_pl_decomposition_formula():
    U, _ = simulate_2pl(np.random.default_rng(1), n_items=150, n_judges=12, one_pl=True)
    irt = TwoPLIRT(model="1pl").fit(U)
    assert np.allclose(irt.discrimination_, irt.discrimination_[0])  # one common kappa = the scale factor
    theta, d = irt.ability_, irt.difficulty_
    shares = irt.variance_shares_
    assert shares["interaction"] == pytest.approx(0.0, abs=1e-12)
    assert shares["judge"] == pytest.approx(theta.var() / (theta.var() + d.var()))


def test_variance_decomposition_closed_forms():
    theta, d = np.array([-1.0, 0.0, 1.0]), np.array([0.0, 2.0])
    assert variance_decomposition(theta[None, :] - d[:, None]) == pytest.approx(
        {"judge": 0.4, "item": 0.6, "interaction": 0.0}
    )
    # a pure interaction grid: row and column means are all 0
    assert variance_decomposition([[1.0, -1.0], [-1.0, 1.0]]) == pytest.approx(
        {"judge": 0.0, "item": 0.0, "interaction": 1.0}
    )
    eta = np.random.default_rng(2).normal(size=(40, 7))
    shares = variance_decomposition(eta)
    assert sum(shares.values()) == pytest.approx(1.0)
    total = ((eta - eta.mean()) ** 2).sum()
    assert shares["judge"] == pytest.approx(40 * ((eta.mean(axis=0) - eta.mean()) ** 2).sum() / total)
    assert all(np.isnan(v) for v in variance_decomposition(np.ones((3, 3))).values())


@pytest.mark.parametrize("two_pl", [True, False])
def test_analytic_gradient(two_pl):
    rng = np.random.default_rng(3)
    n, J = 15, 5
    u = (rng.random((n, J)) < 0.6).astype(float)
    mask = (rng.random((n, J)) < 0.8).astype(float)
    x = rng.normal(size=J + (2 * n if two_pl else n))
    args = (u, mask, two_pl, (1.0, 2.0, 0.5))
    err = check_grad(lambda p: _neg_log_posterior(p, *args)[0], lambda p: _neg_log_posterior(p, *args)[1], x)
    assert err < 1e-5 * np.linalg.norm(_neg_log_posterior(x, *args)[1])


def test_missing_items_are_skipped(synthetic, fitted):
    U = np.vstack([synthetic[0], np.full((5, 25), -1, dtype=np.int8)])
    irt = TwoPLIRT().fit(U)
    np.testing.assert_allclose(irt.ability_, fitted.ability_, atol=1e-4)


def test_correctness_matrix():
    U = correctness_matrix([[1, 0, -1], [0, 0, 1]], [1, 0])
    np.testing.assert_array_equal(U, [[1, 0, -1], [1, 1, 0]])


def test_sklearn_contract_and_warnings(synthetic):
    irt = TwoPLIRT(difficulty_sd=3.0)
    assert clone(irt).get_params()["difficulty_sd"] == 3.0
    with pytest.raises(NotFittedError):
        irt.logits()
    with pytest.warns(ConvergenceWarning, match=r"TwoPLIRT.fit: L-BFGS did not converge"):
        TwoPLIRT(max_iter=1).fit(synthetic[0])


@pytest.mark.parametrize(
    ("U", "kwargs", "error", "match"),
    [
        ([[1], [0]], {}, InputError, r"U: need >= 2 judges to standardise abilities, got 1"),
        ([[-1, -1], [-1, -1]], {}, InputError, r"U: no observed response \(4 cells, all -1\)"),
        ([[1, 2]], {}, InputError, r"codes must be 1 \(A\), 0 \(B\) or -1"),
        ([[1, 0]], {"model": "3pl"}, ConfigError, r"model: must be '2pl' or '1pl', got '3pl'"),
        ([[1, 0]], {"ability_sd": 0}, ConfigError, r"ability_sd == 0, must be > 0.0"),
    ],
)
def test_documented_errors(U, kwargs, error, match):
    with pytest.raises(error, match=match):
        TwoPLIRT(**kwargs).fit(U)


def test_variance_decomposition_rejects_bad_grids():
    with pytest.raises(InputError, match=r"eta: expected a non-empty finite 2-D grid, got shape \(3,\)"):
        variance_decomposition([1.0, 2.0, 3.0])
    with pytest.raises(InputError, match=r"eta: expected a non-empty finite 2-D grid"):
        variance_decomposition([[1.0, np.nan]])
