"""FCPS under the scalar (1-5 rubric) verdict schema: every family against a direct row-level fit, the metrics
against scipy, and the rubric generator's exact Bayes risk against brute force."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats
from scipy.special import expit
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import Ridge
from sklearn.preprocessing import PolynomialFeatures

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.rubric_panel import DOC_ROWS, draw_rubric_panel, rubric_bayes_mse, score_confusion
from judgecal_dist.methods.fcps.select import (
    Cells,
    agreement,
    evaluate_candidates,
    fit_family,
    prefix_cells,
    prefix_squares,
)

PREFIX = np.array([2, 0, 5])  # a path prefix out of pool order
S = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 0.5])  # (score - 1)/4, err at the midpoint


@pytest.fixture(scope="module")
def rows() -> tuple[np.ndarray, np.ndarray]:
    return draw_rubric_panel(60 * DOC_ROWS, np.random.default_rng(3))


def _iso(u: np.ndarray, y: np.ndarray) -> IsotonicRegression:
    return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(u, y)


def _ours(family: str, codes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The study's path: aggregate rows into pattern cells, project the prefix, fit on cells, predict rows."""
    cells = Cells.from_rows(codes, y, schema="scalar")
    prefix_codes, n, s, _ = prefix_cells(cells, PREFIX)
    options = {"schema": "scalar", "ridge_lam": 1.0, "C": 1.0, "alpha": 1.0}
    model = fit_family(family, prefix_codes, n, s, options, prefix_squares(cells, PREFIX))
    return model.predict(codes[:, PREFIX])


def _logistic_reference(phi: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Soft-label cross-entropy + (1/2C)|w|^2 (C = 1, intercept unpenalised), minimised directly on the rows."""

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = theta[0] + phi @ theta[1:]
        p = expit(z)
        value = -(y * np.log(p) + (1 - y) * np.log1p(-p)).sum() + 0.5 * theta[1:] @ theta[1:]
        grad = np.r_[(p - y).sum(), phi.T @ (p - y) + theta[1:]]
        return float(value), grad

    theta = optimize.minimize(loss, np.zeros(phi.shape[1] + 1), jac=True, method="BFGS", tol=1e-10).x
    return expit(theta[0] + phi @ theta[1:])


def test_scalar_families_match_direct_row_level_fits(rows):
    codes, y = rows
    s = S[codes[:, PREFIX]]
    t = 2 * s - 1
    pair = PolynomialFeatures(2, interaction_only=True, include_bias=False).fit_transform(t)
    expected = {
        "mean_iso": _iso(s.mean(axis=1), y).predict(s.mean(axis=1)),
        "ridge_iso": _iso(u := Ridge(alpha=1.0).fit(t, y).predict(t), y).predict(u),
        "ridge_pair_iso": _iso(v := Ridge(alpha=1.0).fit(pair, y).predict(pair), y).predict(v),
        "logistic": _logistic_reference(t, y),
        "logistic_pair": _logistic_reference(pair, y),
    }
    # Scalar-schema reliability: per judge OLS of Y on s, w = slope / max(residual variance, 1e-3), u = w . s.
    fits = [np.polyfit(s[:, j], y, 1) for j in range(s.shape[1])]
    var = [max(np.mean((y - np.polyval(f, s[:, j])) ** 2), 1e-3) for j, f in enumerate(fits)]
    u = s @ np.array([f[0] / v for f, v in zip(fits, var, strict=True)])
    expected["one_coin_iso"] = _iso(u, y).predict(u)
    frame = pd.DataFrame(codes[:, PREFIX]).assign(y=y)
    cell = frame.groupby([0, 1, 2])["y"]
    expected["table"] = (cell.transform("sum") + y.mean()) / (cell.transform("size") + 1.0)  # alpha = 1
    for family, want in expected.items():
        # The logistic families stop at lbfgs's default tolerance: objective equal to 1e-8 relative, p to ~2e-4.
        tol = 5e-4 if family.startswith("logistic") else 1e-9
        np.testing.assert_allclose(_ours(family, codes, y), want, atol=tol, err_msg=family)


def test_metrics_on_a_continuous_target_match_scipy(rows):
    codes, y = rows
    cells = Cells.from_rows(codes, y, schema="scalar")
    assert cells.histogram()[1].sum() == len(y) and len(cells.levels) == 13
    rng = np.random.default_rng(0)
    p_cell = np.round(rng.random(len(cells.n)), 1)  # rounded: tied predictions and p = 1/2 exactly
    _, inverse = np.unique(codes, axis=0, return_inverse=True)
    p = p_cell[inverse.ravel()]
    accuracy, pearson, spearman = agreement(cells, p_cell)
    hit = np.where(p == 0.5, 0.5, (p > 0.5) == (y > 0.5))  # threshold at 1/2: rubric midpoint 3 is "not above"
    assert accuracy == pytest.approx(hit.mean(), abs=1e-12)
    assert pearson == pytest.approx(stats.pearsonr(p, y)[0], abs=1e-10)
    assert spearman == pytest.approx(stats.spearmanr(p, y)[0], abs=1e-10)
    assert cells.mse(p_cell) == pytest.approx(np.mean((p - y) ** 2), abs=1e-12)


def test_rubric_bayes_risk_equals_brute_force_enumeration():
    # Independent route: enumerate the levels and judge outputs one pattern at a time for k = 2.
    from judgecal_dist.io.rubric_panel import LEVEL_PRIORS, target_levels

    prior, (values, prob), conf = LEVEL_PRIORS.mean(axis=0), target_levels(), score_confusion()
    assert np.allclose(prob.sum(axis=1), 1.0) and np.allclose(conf.sum(axis=2), 1.0)
    risk = 0.0
    for a in range(6):
        for b in range(6):
            joint = prior * conf[0, :, a] * conf[1, :, b]  # P(z, L)
            post = joint / joint.sum()
            # E[(Y - eta)^2 | z] with eta = E[Y | z]: the conditional variance of the 13-level target
            eta = post @ prob @ values
            risk += joint.sum() * (post @ prob @ (values - eta) ** 2)
    assert rubric_bayes_mse(2) == pytest.approx(risk, abs=1e-12)
    assert rubric_bayes_mse(7) < rubric_bayes_mse(2) < rubric_bayes_mse(1) < rubric_bayes_mse(0)


def test_rubric_generator_draws_its_model_and_refuses_partial_documents():
    codes, y = draw_rubric_panel(4000 * DOC_ROWS, np.random.default_rng(1))
    assert codes.min() >= 0 and codes.max() == 5 and len(np.unique(y)) == 13
    freq = np.stack([np.bincount(codes[:, j], minlength=6) for j in range(7)]) / len(codes)
    from judgecal_dist.io.rubric_panel import LEVEL_PRIORS

    np.testing.assert_allclose(freq, LEVEL_PRIORS.mean(axis=0) @ score_confusion(), atol=0.006)
    with pytest.raises(InputError, match="not a positive multiple of 16"):
        draw_rubric_panel(20, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="k: must be in 0..7"):
        rubric_bayes_mse(8)


def test_jury_and_mixed_schemas_are_refused(rows):
    codes, y = rows
    cells = Cells.from_rows(codes, y, schema="scalar")
    binary = Cells.from_rows(np.minimum(codes, 3), (y > 0.5).astype(float))
    with pytest.raises(ConfigError, match="the jury needs pairwise A/B verdicts"):
        evaluate_candidates({"pool": np.arange(7)}, cells, cells, families=("jury",), max_k=1)
    with pytest.raises(InputError, match="mix verdict schemas"):
        evaluate_candidates({"pool": np.arange(7)}, cells, binary, families=("table",), max_k=1)
