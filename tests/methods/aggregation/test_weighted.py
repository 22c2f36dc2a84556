from __future__ import annotations

import math

import numpy as np
import pytest

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.aggregation.weighted import AccuracyWeighted, LogOddsWeighted


def hand_accuracies(V, y):
    """theta_j = c_j / n_j by explicit loops; None for a judge without verdicts."""
    out = []
    for j in range(V.shape[1]):
        voted = [i for i in range(len(y)) if V[i, j] != -1]
        out.append(None if not voted else sum(V[i, j] == y[i] for i in voted) / len(voted))
    return out


def hand_aw(theta, v):
    num = sum(t * vj for t, vj in zip(theta, v, strict=True) if vj != -1 and t is not None)
    den = sum(t for t, vj in zip(theta, v, strict=True) if vj != -1 and t is not None)
    return num / den if den > 0 else 0.5


def hand_lo(theta, v, eps_theta, prior):
    log_odds = math.log(prior / (1 - prior))
    for t, vj in zip(theta, v, strict=True):
        if vj != -1 and t is not None:
            tc = min(max(t, eps_theta), 1 - eps_theta)
            log_odds += (1 if vj == 1 else -1) * math.log(tc / (1 - tc))
    return 1 / (1 + math.exp(-log_odds))


@pytest.fixture(scope="module")
def awkward():
    """Judge 0 always right, 1 always wrong, 2 never votes, 3 at chance, 4 right 2/3; items with no verdicts."""
    V = np.array(
        [
            [1, 0, -1, 1, 1],
            [0, 1, -1, 1, 0],
            [1, 0, -1, 0, -1],
            [0, 1, -1, 0, 0],
            [-1, -1, -1, -1, -1],
        ]
    )
    y = np.array([1, 0, 1, 0, 1])
    probes = np.array([[1, 1, 1, 1, 1], [0, -1, 1, 1, 0], [-1, 1, 0, -1, -1], [-1, -1, 1, 1, -1], [-1] * 5])
    return V, y, probes


def test_accuracy_weighted_by_hand(awkward, panel):
    for V, y, probes in (awkward, (*panel, panel[0][:20])):
        theta = hand_accuracies(V, y)
        model = AccuracyWeighted().fit(V, y)
        np.testing.assert_allclose(model.weights_, [0.0 if t is None else t for t in theta], atol=1e-15)
        expected = [hand_aw(theta, v) for v in probes]
        np.testing.assert_allclose(model.predict_proba(probes)[:, 1], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("eps_theta", "prior"), [(1e-3, "half"), (0.05, "empirical")])
def test_log_odds_weighted_by_hand(awkward, panel, eps_theta, prior):
    for V, y, probes in (awkward, (*panel, panel[0][:20])):
        theta = hand_accuracies(V, y)
        pi = 0.5 if prior == "half" else (y.sum() + 1) / (len(y) + 2)
        model = LogOddsWeighted(eps_theta=eps_theta, prior=prior).fit(V, y)
        assert model.prior_ == pytest.approx(pi)
        expected = [hand_lo(theta, v, eps_theta, pi) for v in probes]
        np.testing.assert_allclose(model.predict_proba(probes)[:, 1], expected, rtol=0, atol=1e-12)


def test_awkward_judges(awkward):
    V, y, probes = awkward
    lo = LogOddsWeighted().fit(V, y)
    assert lo.weights_[0] == pytest.approx(math.log(0.999 / 0.001))  # clipped at eps_theta, not infinite
    assert lo.weights_[1] == pytest.approx(-math.log(0.999 / 0.001))  # always wrong: flipped
    assert lo.weights_[2] == 0.0 and lo.weights_[3] == 0.0  # never votes; at chance
    aw = AccuracyWeighted().fit(V, y)
    assert aw.weights_[1] == 0.0 and aw.weights_[2] == 0.0
    # only judges with weight 0 voted: no evidence, 1/2
    np.testing.assert_allclose(aw.predict_proba([[-1, 1, 0, -1, -1]]), [[0.5, 0.5]])
    assert np.isfinite(lo.predict_proba(probes)).all() and np.isfinite(aw.predict_proba(probes)).all()


def test_from_counts_of_a_never_seen_panel():
    model = LogOddsWeighted.from_counts([0, 0], [0, 0])
    np.testing.assert_array_equal(model.weights_, [0.0, 0.0])
    np.testing.assert_allclose(model.predict_proba([[1, 0]]), [[0.5, 0.5]])
    np.testing.assert_allclose(AccuracyWeighted.from_counts([0, 4], [0, 3]).predict_proba([[1, -1]]), [[0.5, 0.5]])


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"eps_theta": 0.0}, r"LogOddsWeighted.fit_counts: eps_theta == 0.0, must be > 0"),
        ({"eps_theta": 0.5}, r"eps_theta == 0.5, must be < 0.5"),
        ({"prior": "flat"}, r"prior: must be 'half' or 'empirical', got 'flat'"),
    ],
)
def test_log_odds_rejects_hyperparameters(params, match):
    with pytest.raises(ConfigError, match=match):
        LogOddsWeighted(**params).fit(np.array([[1]]), [1])
