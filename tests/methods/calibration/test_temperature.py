from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logit, xlogy

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.calibration.temperature import TemperatureScaling

EPS = 1e-6


def nll_at(s, y, T):
    """Mean NLL for each temperature in T (vectorised over a grid), from probabilities and xlogy."""
    p = expit(logit(np.clip(s, EPS, 1 - EPS))[None, :] / np.atleast_1d(T)[:, None])
    return -(xlogy(y, p) + xlogy(1 - y, 1 - p)).mean(axis=1)


def test_matches_brute_force_grid(miscalibrated):
    s, y = miscalibrated
    coarse = np.exp(np.linspace(np.log(0.01), np.log(100.0), 2001))
    best = coarse[np.argmin(nll_at(s, y, coarse))]
    fine = best * np.exp(np.linspace(-0.01, 0.01, 2001))  # refine around the coarse optimum
    losses = nll_at(s, y, fine)
    T_grid = fine[np.argmin(losses)]
    cal = TemperatureScaling(score_input="probability").fit(s, y)
    assert cal.temperature_ == pytest.approx(T_grid, rel=2e-5)
    assert nll_at(s, y, cal.temperature_)[0] <= losses.min() + 1e-12
    assert cal.temperature_ > 1.0  # the fixture is overconfident
    assert cal.fallback_ is None and cal.n_iter_ > 0 and len(cal.loss_history_) >= cal.n_iter_


def test_recovers_temperature():
    rng = np.random.default_rng(2)
    s = expit(rng.normal(0.0, 3.0, size=20_000))
    y = (rng.random(s.size) < expit(logit(s) / 2.5)).astype(int)
    assert TemperatureScaling(score_input="probability").fit(s, y).temperature_ == pytest.approx(2.5, rel=0.05)


def test_keeps_decisions_and_ranking(miscalibrated):
    s, y = miscalibrated
    p = TemperatureScaling(score_input="probability").fit(s, y).predict_proba(s)[:, 1]
    np.testing.assert_array_equal(p > 0.5, s > 0.5)
    np.testing.assert_array_equal(np.argsort(p, kind="stable"), np.argsort(s, kind="stable"))


def test_uninformative_scores_give_identity():
    cal = TemperatureScaling(score_input="probability").fit([0.5, 0.5, 0.5], [0, 1, 1])
    assert (cal.temperature_, cal.fallback_) == (1.0, "uninformative_scores")


def test_anti_informative_scores_hit_upper_bound():
    with pytest.warns(Warning, match=r"bound T = 100 .*no better than 1/2"):
        cal = TemperatureScaling(score_input="probability").fit([0.9, 0.1, 0.8], [0, 1, 0])
    assert cal.temperature_ == pytest.approx(100.0, rel=1e-6)


@pytest.mark.parametrize(
    ("t_bounds", "match"),
    [((1.0, 0.5), r"need 0 < T_min < T_max < inf"), ((0.0, 2.0), r"need 0 < T_min"), ("ab", r"expected a pair")],
)
def test_rejects_bounds(t_bounds, match):
    with pytest.raises(ConfigError, match=f"TemperatureScaling.fit: t_bounds: {match}"):
        TemperatureScaling(t_bounds=t_bounds, score_input="probability").fit([0.2, 0.8], [0, 1])
