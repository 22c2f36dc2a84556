from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation.votes import check_votes, count_judge_votes, signed_votes


def test_check_votes_accepts_float_and_bool_codes():
    assert check_votes(np.array([[1.0, -1.0, 0.0]]), where="t").dtype == np.int8
    np.testing.assert_array_equal(check_votes(np.array([[True, False]]), where="t"), [[1, 0]])


@pytest.mark.parametrize(
    ("V", "match"),
    [
        (np.array([1, 0, -1]), r"expected a 2-D vote matrix .*V\.reshape\(1, -1\)"),
        (np.zeros((0, 3)), r"empty vote matrix"),
        (np.array([[1, 2, -2]]), r"codes must be 1 \(A\), 0 \(B\) or -1 \(missing\) \(2 cells"),
        (np.array([[1.0, np.nan]]), r"codes must be .*\[0, 1\]=nan"),
        (np.array([["A", "B"]]), r"expected numeric vote codes"),
    ],
)
def test_check_votes_rejects(V, match):
    with pytest.raises(InputError, match=match):
        check_votes(V, where="t")


def test_check_votes_panel_size():
    with pytest.raises(InputError, match=r"has 2 judges .* fitted on 3"):
        check_votes(np.zeros((1, 2)), where="t", n_judges=3)


def test_signed_votes_and_counts(panel):
    V, y = panel
    z = signed_votes(V)
    assert set(np.unique(z)) <= {-1.0, 0.0, 1.0}
    n_votes, n_correct = count_judge_votes(V, y)
    # independent reference: loop over cells
    for j in range(V.shape[1]):
        assert n_votes[j] == sum(V[i, j] != -1 for i in range(len(y)))
        assert n_correct[j] == sum(V[i, j] == y[i] for i in range(len(y)))


def test_count_judge_votes_shape_mismatch():
    with pytest.raises(InputError, match=r"inconsistent numbers of items: V has 2, y has 3"):
        count_judge_votes(np.zeros((2, 2)), [0, 1, 1])
