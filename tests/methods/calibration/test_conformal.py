from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.calibration.conformal import SplitConformal


def test_hand_computed_threshold_and_sets():
    p = np.array([0.9, 0.2, 0.7, 0.4, 0.95, 0.3])
    y = np.array([1, 0, 0, 1, 1, 0])
    # scores 1 - p_y: 0.1, 0.2, 0.7, 0.6, 0.05, 0.3 -> sorted 0.05, 0.1, 0.2, 0.3, 0.6, 0.7
    # alpha = 0.3: k = ceil(7 * 0.7) = ceil(4.9) = 5 -> q = 0.6
    conf = SplitConformal(alpha=0.3).fit(p, y)
    assert (conf.rank_, conf.n_calibration_) == (5, 6)
    assert conf.threshold_ == pytest.approx(0.6)
    # label y is in the set iff p_y >= 1 - q = 0.4
    sets = conf.predict_set([0.5, 0.35, 0.65, 0.1])
    np.testing.assert_array_equal(sets, [[True, True], [True, False], [False, True], [True, False]])


@pytest.mark.parametrize(
    ("n_c", "alpha", "k"),
    [(9, 0.1, 9), (8, 0.1, 9), (99, 0.1, 90), (19, 0.05, 19), (18, 0.05, 19), (10, 0.2, 9), (4, 0.2, 4), (3, 0.2, 4)],
)
def test_finite_sample_rank(n_c, alpha, k):
    """k = ceil((n_c + 1)(1 - alpha)) worked out by hand; q = +inf when k > n_c (every set is {0, 1})."""
    scores_p = np.linspace(0.55, 0.95, n_c)  # all labels 1: scores 1 - p, distinct
    conf = SplitConformal(alpha=alpha).fit(scores_p, np.ones(n_c, dtype=int))
    assert conf.rank_ == k
    if k > n_c:
        assert conf.threshold_ == math.inf
        assert conf.predict_set([0.0, 0.5, 1.0]).all()
    else:
        assert conf.threshold_ == pytest.approx(np.sort(1 - scores_p)[k - 1])


def test_coverage_on_calibrated_data_within_binomial_error():
    rng = np.random.default_rng(0)
    alpha, n_c, n_test, reps = 0.1, 100, 200, 200
    covered = []
    for _ in range(reps):
        p = rng.random(n_c + n_test)
        y = (rng.random(p.size) < p).astype(int)
        sets = SplitConformal(alpha=alpha).fit(p[:n_c], y[:n_c]).predict_set(p[n_c:])
        covered.append(sets[np.arange(n_test), y[n_c:]].mean())
    mean, se = np.mean(covered), np.std(covered, ddof=1) / math.sqrt(reps)
    assert mean >= 1 - alpha - 3 * se  # P(Y in C) >= 1 - alpha
    assert mean <= 1 - alpha + 1 / (n_c + 1) + 3 * se  # continuous scores: no ties, at most 1/(n_c+1) over


def test_empty_sets_are_kept():
    p = np.array([0.99, 0.98, 0.02, 0.97, 0.01])
    y = np.array([1, 1, 0, 1, 0])  # confident and right: small scores, q < 1/2
    conf = SplitConformal(alpha=0.5).fit(p, y)
    assert conf.threshold_ < 0.5
    np.testing.assert_array_equal(conf.predict_set([0.5]), [[False, False]])


def test_item_whose_score_equals_the_threshold_is_covered():
    p = np.array([0.8, 0.3, 0.6])
    y = np.array([1, 0, 1])
    conf = SplitConformal(alpha=0.25).fit(p, y)  # k = 3: q is the largest score, that of p = 0.6, y = 1
    assert conf.predict_set([0.6])[0, 1]


def test_serialisation_round_trip():
    for n_c in (5, 50):
        rng = np.random.default_rng(n_c)
        conf = SplitConformal(alpha=0.1).fit(rng.random(n_c), rng.integers(0, 2, n_c))
        state = json.loads(json.dumps(conf.to_dict(), allow_nan=False))  # strict JSON: no Infinity
        restored = SplitConformal.from_dict(state)
        assert restored.threshold_ == conf.threshold_ and restored.rank_ == conf.rank_
        grid = np.linspace(0, 1, 11)
        np.testing.assert_array_equal(restored.predict_set(grid), conf.predict_set(grid))
    assert SplitConformal.from_dict({**state, "threshold": "inf"}).threshold_ == math.inf


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ({"alpha": 0.1, "threshold": 0.3}, r"missing keys \['n_calibration', 'rank'\]"),
        ({"alpha": 0.1, "threshold": "high", "rank": 3, "n_calibration": 5}, r"threshold: expected None, 'inf'"),
        ({"alpha": 0.1, "threshold": 1.5, "rank": 3, "n_calibration": 5}, r"threshold: expected None, 'inf'"),
    ],
)
def test_from_dict_rejects(state, match):
    with pytest.raises(InputError, match=f"SplitConformal.from_dict: {match}"):
        SplitConformal.from_dict(state)


def test_rejects_input_and_alpha():
    with pytest.raises(ConfigError, match=r"alpha == 1.0, must be < 1"):
        SplitConformal(alpha=1.0).fit([0.5], [1])
    with pytest.raises(InputError, match=r"SplitConformal.fit: p_cal: expected a 1-D array"):
        SplitConformal().fit(np.full((2, 2), 0.5), [0, 1])
    with pytest.raises(InputError, match=r"inconsistent numbers of items: p_cal has 2, y_cal has 1"):
        SplitConformal().fit([0.2, 0.4], [1])
    with pytest.raises(NotFittedError):
        SplitConformal().predict_set([0.5])
