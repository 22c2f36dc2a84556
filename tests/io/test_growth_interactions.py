"""The XOR / AND generators of spec 002 §7.2 and Table 25's interaction weight, against formulas written here.

Every output vector of seven fair binary judges is equally likely, so conditional means of the target are exact
averages over the 128 vectors; the sampled path (outputs, then labels) is checked against them within 4 SE.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import expit

from judgecal_dist.errors import ConfigError
from judgecal_dist.io.growth import BETA, draw_growth_outputs, draw_labels, growth_eta

BETA_ = np.array(BETA)
#: All 128 output vectors (1 = A, 0 = B) with t = 2x - 1.
X = np.array(list(itertools.product((1, 0), repeat=7)))
T = 2.0 * X - 1.0


def hand_eta(regime: str, b: float = 2.0, c: float = 2.0) -> np.ndarray:
    rest = T[:, 2:] @ BETA_[2:] / 2
    if regime == "xor":
        return expit(rest + b * T[:, 0] * T[:, 1])
    if regime == "and":
        return expit(rest - 1 + c * X[:, 0] * X[:, 1])
    return expit(T @ BETA_)


def cell_means(eta: np.ndarray) -> dict[tuple[int, int], float]:
    """E[eta | X1, X2] (the joint table of judges 1 and 2)."""
    return {(a, b): float(eta[(X[:, 0] == a) & (X[:, 1] == b)].mean()) for a in (0, 1) for b in (0, 1)}


@pytest.mark.parametrize("regime", ["xor", "and", "additive"])
def test_eta_is_the_spec_formula(regime):
    np.testing.assert_allclose(growth_eta(X, regime), hand_eta(regime), rtol=1e-12)
    if regime != "additive":
        np.testing.assert_allclose(growth_eta(X, regime, b=0.7, c=3.0), hand_eta(regime, b=0.7, c=3.0), rtol=1e-12)


def test_xor_has_no_marginal_signal_and_its_joint_table_is_a_parity():
    eta = growth_eta(X, "xor")
    for j in (0, 1):  # judges 1 and 2: no marginal signal at all
        assert eta[X[:, j] == 1].mean() == pytest.approx(eta[X[:, j] == 0].mean(), abs=1e-12)
    assert eta[X[:, 2] == 1].mean() - eta[X[:, 2] == 0].mean() > 0.05  # the additive judges keep theirs
    cells = cell_means(eta)
    assert cells[1, 1] == pytest.approx(cells[0, 0], abs=1e-12)
    assert cells[1, 0] == pytest.approx(cells[0, 1], abs=1e-12)
    assert cells[1, 1] - cells[1, 0] > 0.6  # agreement of 1 and 2 carries the signal (b = 2)


def test_and_moves_only_the_both_a_cell():
    eta = growth_eta(X, "and")
    cells = cell_means(eta)
    assert cells[0, 0] == pytest.approx(cells[0, 1], abs=1e-12) == pytest.approx(cells[1, 0], abs=1e-12)
    assert cells[1, 1] - cells[0, 0] > 0.3
    # Unlike XOR, each of judges 1 and 2 has a marginal signal (through the one cell).
    assert eta[X[:, 0] == 1].mean() - eta[X[:, 0] == 0].mean() > 0.1


def test_sampled_labels_follow_the_joint_table():
    rng = np.random.default_rng(0)
    codes = draw_growth_outputs(200_000, rng)
    for regime in ("xor", "and"):
        y = draw_labels(growth_eta(codes, regime), rng)
        exact = cell_means(growth_eta(X, regime))
        for (a, b), mean in exact.items():
            cell = (codes[:, 0] == a) & (codes[:, 1] == b)
            se = np.sqrt(mean * (1 - mean) / cell.sum())
            assert abs(y[cell].mean() - mean) < 4 * se


def test_interaction_weight_mixes_with_the_additive_regime():
    for w in (0.0, 0.3, 1.0):
        np.testing.assert_allclose(
            growth_eta(X, "xor", weight=w), (1 - w) * hand_eta("additive") + w * hand_eta("xor"), rtol=1e-12
        )
    with pytest.raises(ConfigError, match="weight=0.5"):
        growth_eta(X, "additive", weight=0.5)
    with pytest.raises(ConfigError, match="weight=1.5"):
        growth_eta(X, "xor", weight=1.5)
