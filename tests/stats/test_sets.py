from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.stats.sets import set_metrics


def test_hand_worked_sets():
    y = [1, 0, 1, 0, 1]
    sets = np.array([[False, True], [True, True], [False, False], [False, True], [True, False]])
    m = set_metrics(y, sets)
    assert m == pytest.approx({"coverage": 0.4, "set_size": 1.0, "empty_rate": 0.2, "both_rate": 0.2})
    assert m["set_size"] == pytest.approx(m["both_rate"] + 1 - m["empty_rate"])


def test_full_sets_cover_everything_and_integer_codes_are_accepted():
    y = np.random.default_rng(0).integers(0, 2, 20)
    assert set_metrics(y, np.ones((20, 2), dtype=int)) == {
        "coverage": 1.0,
        "set_size": 2.0,
        "empty_rate": 0.0,
        "both_rate": 1.0,
    }


@pytest.mark.parametrize(
    ("sets", "match"),
    [
        (np.ones((2, 3), dtype=bool), r"sets: expected a boolean array of shape \(n_items >= 1, 2\), got \(2, 3\)"),
        (np.full((2, 2), 0.5), r"sets: expected booleans \(or 0/1\), got dtype float64"),
        (np.ones((3, 2), dtype=bool), r"inconsistent numbers of items: y has 2, sets has 3"),
    ],
)
def test_bad_sets_are_rejected(sets, match):
    with pytest.raises(InputError, match=match):
        set_metrics([1, 0], sets)
