"""Marginal optimal transport (inverse-CDF map) against its closed forms.

With distinct anchor scores the map is the piecewise-linear monotone rearrangement through the points
(j_(i), y_(i)) of the two sorted samples, flat outside; with large samples of two known laws it is
G^-1(F(j)); ties take the mid-rank level.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import expon, norm
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from judgecal_dist.errors import InputError
from judgecal_dist.methods.continuous.score_transport import MarginalOT


def test_distinct_anchors_give_the_sorted_rearrangement():
    rng = np.random.default_rng(4)
    j, y = rng.normal(3, 1, 40), rng.uniform(1, 5, 40)  # unpaired: only the two marginals matter
    model = MarginalOT().fit(j, y)
    x = np.concatenate([np.linspace(j.min() - 1, j.max() + 1, 301), j])
    assert np.allclose(model.predict(x), np.interp(x, np.sort(j), np.sort(y)))
    # each anchor goes to the reference score of its rank, whatever the pairing
    assert np.allclose(model.predict(j), np.sort(y)[np.argsort(np.argsort(j))])
    assert np.allclose(MarginalOT().fit(j, rng.permutation(y)).predict(x), model.predict(x))


def test_ties_take_the_mid_rank_level():
    # j = (1, 1, 2, 3): ranks 1.5, 1.5, 3, 4, so levels 1/6, 1/6, 2/3, 1 on (n - 1) = 3; y sorted (10, 20, 30, 40)
    # gives the linear quantile at position 3 * level: 1/6 -> 15, 2/3 -> 30, 1 -> 40.
    model = MarginalOT().fit([1.0, 2.0, 1.0, 3.0], [40.0, 10.0, 30.0, 20.0])
    assert model.knots_.tolist() == [1.0, 2.0, 3.0]
    assert np.allclose(model.levels_, [1 / 6, 2 / 3, 1.0])
    assert np.allclose(model.predict([0.0, 1.0, 1.5, 2.0, 2.5, 3.0, 9.0]), [15, 15, 22.5, 30, 35, 40, 40])


def test_large_samples_recover_the_transport_map_between_laws():
    rng = np.random.default_rng(8)
    j, y = rng.normal(0, 1, 40_000), rng.exponential(1.0, 40_000)
    x = np.linspace(-2, 2, 41)
    assert np.allclose(MarginalOT().fit(j, y).predict(x), expon.ppf(norm.cdf(x)), atol=0.05)


def test_estimator_contract_and_bad_input():
    model = MarginalOT()
    assert clone(model).get_params() == {}
    with pytest.raises(NotFittedError):
        model.predict([1.0])
    with pytest.raises(InputError, match=r"ot: j, y: need two or more paired anchors, got 3 and 2"):
        model.fit([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(InputError, match=r"got 1 and 1"):
        model.fit([1.0], [1.0])
