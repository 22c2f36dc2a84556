from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.metrics import accuracy
from judgecal_dist.stats.selective import accuracy_at_confidence, auac


def auac_by_enumeration(y, p):
    """Mean over every ordering of tied items of the naive AUAC (the block rule is its expectation)."""
    import itertools

    conf = np.maximum(p, 1 - p)
    correct = np.where(p == 0.5, 0.5, ((p > 0.5) == (y == 1)).astype(float))
    values = []
    for perm in itertools.permutations(range(len(y))):
        perm = np.array(perm)
        if np.all(np.diff(conf[perm]) <= 0):  # a valid descending order, ties in any order
            c = correct[perm]
            values.append(np.mean(np.cumsum(c) / np.arange(1, len(c) + 1)))
    return np.mean(values)


def test_hand_worked_case():
    # conf 0.9, 0.8, 0.8, 0.6, correctness 1, 1, 0, 1: acc(m) = 1, (1 + 0.5) / 2, 2 / 3, 3 / 4
    assert auac([1, 1, 1, 1], [0.9, 0.8, 0.2, 0.6]) == pytest.approx((1 + 0.75 + 2 / 3 + 0.75) / 4)


def test_no_ties_equals_the_naive_curve():
    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 2, 50), rng.random(50)
    order = np.argsort(-np.maximum(p, 1 - p))
    c = ((p[order] > 0.5) == (y[order] == 1)).astype(float)
    assert auac(y, p) == pytest.approx(np.mean(np.cumsum(c) / np.arange(1, 51)))


def test_permuting_tied_items_changes_nothing():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    p = rng.choice([0.1, 0.25, 0.5, 0.75, 0.9, 1.0], size=300)  # heavy ties, exact 1/2 included
    base = auac(y, p)
    for _ in range(5):
        perm = rng.permutation(300)
        assert auac(y[perm], p[perm]) == pytest.approx(base, abs=1e-12)
    assert auac(1 - y, 1 - p) == pytest.approx(base, abs=1e-12)  # relabelling symmetry


@pytest.mark.parametrize("seed", range(3))
def test_block_rule_is_the_mean_over_tie_orders(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 6)
    p = rng.choice([0.2, 0.5, 0.7, 0.9], size=6)
    assert auac(y, p) == pytest.approx(auac_by_enumeration(y, p))


def test_all_tied_auac_is_accuracy():
    y, p = [1, 0, 0, 1, 1], [0.7, 0.7, 0.3, 0.3, 0.7]
    assert auac(y, p) == pytest.approx(accuracy(y, p))


def test_accuracy_at_confidence():
    y = np.array([1, 0, 1, 0, 1])
    p = np.array([0.95, 0.04, 0.91, 0.6, 0.5])
    assert accuracy_at_confidence(y, p, tau=0.9) == (0.6, 1.0, 3)
    assert accuracy_at_confidence(y, p, tau=0.95) == (0.4, 1.0, 2)
    empty = accuracy_at_confidence(y, p, tau=1.0)
    assert empty.coverage == 0.0 and np.isnan(empty.accuracy) and empty.n_retained == 0
    assert accuracy_at_confidence(y, p, tau=0.5).accuracy == pytest.approx(accuracy(y, p))


def test_errors():
    with pytest.raises(ConfigError, match=r"tau == 0.4, must be >= 0.5"):
        accuracy_at_confidence([1], [0.9], tau=0.4)
    with pytest.raises(InputError, match=r"auac: inconsistent numbers of items: y has 2, p has 1"):
        auac([1, 0], [0.9])
