"""The active sampler's invariants and its draw, against independent references (a bisection for the capped
mixture, binomial bounds for the draw's inclusion frequencies)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.labels.sampling import (
    cost_optimal_design,
    draw,
    draw_mask,
    inclusion_probabilities,
)
from judgecal_dist.splits import group_keys


def _reference(p: np.ndarray, budget: float, floor: float) -> np.ndarray:
    """The unstratified design written from its definition: min(1, c * w) with c found by root finding."""
    sigma = np.sqrt(p * (1 - p))
    active = sigma / sigma.sum() if sigma.sum() > 0 else np.full(len(p), 1 / len(p))
    w = floor / len(p) + (1 - floor) * active
    c = optimize.brentq(lambda c: np.minimum(1.0, c * w).sum() - budget, 0.0, 1 / w.min(), xtol=1e-15, maxiter=2000)
    return np.minimum(1.0, c * w)


probs = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=200)


@settings(max_examples=200, deadline=None)
@given(p=probs, share=st.floats(0.01, 1.0), floor=st.floats(0.01, 1.0))
def test_sum_floor_and_cap(p: list[float], share: float, floor: float) -> None:
    q = np.array(p)
    budget = max(share * len(q), 1e-3)
    pi = inclusion_probabilities(q, budget, floor=floor)
    assert pi.sum() == pytest.approx(budget, rel=1e-9, abs=1e-9)
    assert (pi <= 1.0 + 1e-12).all()
    assert (pi >= floor * budget / len(q) * (1 - 1e-9)).all()
    np.testing.assert_allclose(pi, _reference(q, budget, floor), rtol=1e-7, atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(p=probs, floor=st.floats(0.05, 1.0), data=st.data())
def test_more_uncertain_items_never_get_less(p: list[float], floor: float, data: st.DataObject) -> None:
    q = np.array(p)
    pi = inclusion_probabilities(q, data.draw(st.floats(0.1, 1.0)) * len(q), floor=floor)
    order = np.argsort(np.sqrt(q * (1 - q)), kind="stable")
    assert (np.diff(pi[order]) >= -1e-12).all()


def test_hand_worked_case() -> None:
    # sigma = (0.5, 0.5, sqrt(.99*.01), sqrt(.999*.001)); w = 0.2/4 + 0.8 * sigma / sum(sigma); pi = 2 w (no cap)
    sigma = np.array([0.5, 0.5, np.sqrt(0.0099), np.sqrt(0.000999)])
    expected = 2 * (0.05 + 0.8 * sigma / sigma.sum())
    np.testing.assert_allclose(inclusion_probabilities([0.5, 0.5, 0.99, 0.999], 2), expected)


def test_cap_redistributes_excess() -> None:
    p = np.r_[np.full(5, 0.5), np.full(95, 0.999)]
    pi = inclusion_probabilities(p, 20, floor=0.1)
    assert (pi[:5] == 1.0).all()
    np.testing.assert_allclose(pi[5:], 15 / 95)  # the rest share what is left equally (equal weights)
    assert pi.sum() == pytest.approx(20)


def test_floor_one_is_uniform_and_certain_proxy_falls_back() -> None:
    p = np.linspace(0, 1, 50)
    np.testing.assert_allclose(inclusion_probabilities(p, 10, floor=1.0), 0.2)
    np.testing.assert_allclose(inclusion_probabilities(np.r_[np.zeros(5), np.ones(5)], 4, floor=0.3), 0.4)


def test_strata_budgets() -> None:
    rng = np.random.default_rng(0)
    p = np.r_[rng.uniform(0.3, 0.7, 300), rng.uniform(0.95, 1.0, 700)]
    strata = np.r_[np.full(300, "hard"), np.full(700, "easy")]
    budget, floor = 50.0, 0.2
    prop = inclusion_probabilities(p, budget, floor=floor, strata=strata, allocation="proportional")
    assert prop[:300].sum() == pytest.approx(budget * 0.3) and prop[300:].sum() == pytest.approx(budget * 0.7)
    ney = inclusion_probabilities(p, budget, floor=floor, strata=strata, allocation="neyman")
    sigma = np.sqrt(p * (1 - p))
    hard = floor * budget * 0.3 + (1 - floor) * budget * sigma[:300].sum() / sigma.sum()
    assert ney[:300].sum() == pytest.approx(hard)
    np.testing.assert_allclose(ney, inclusion_probabilities(p, budget, floor=floor))  # Neyman = unstratified
    # within a stratum the active share follows sigma
    within = (prop[300:] - floor * budget / 1000) / sigma[300:]
    np.testing.assert_allclose(within, within[0])


def test_draw_frequencies_match_pi() -> None:
    p = np.r_[np.full(10, 0.5), np.linspace(0.9, 1.0, 30)]
    pi = inclusion_probabilities(p, 8, floor=0.2)
    seeds = 4000
    hits = np.zeros(len(pi))
    for seed in range(seeds):
        hits[draw(pi, seed)] += 1
    # each item's count is Binomial(seeds, pi_i): two-sided p-values, Bonferroni over items
    pvals = np.array([stats.binomtest(int(h), seeds, float(q)).pvalue for h, q in zip(hits, pi, strict=True)])
    assert pvals.min() > 1e-3 / len(pi), (hits / seeds - pi)[pvals.argmin()]
    chi2 = (((hits - seeds * pi) ** 2) / (seeds * pi * (1 - pi))).sum()
    assert stats.chi2.sf(chi2, len(pi)) > 1e-4
    sizes = [len(draw(pi, s)) for s in range(200)]
    assert np.mean(sizes) == pytest.approx(8, abs=0.5)


def test_draw_is_reproducible_and_keyed() -> None:
    pi = np.full(5000, 0.05)
    keys = group_keys([f"ds\x00item-{i}" for i in range(5000)])
    first = draw(pi, 7, keys=keys)
    assert (draw(pi, 7, keys=keys) == first).all() and not np.array_equal(draw(pi, 8, keys=keys), first)
    order = np.random.default_rng(1).permutation(5000)  # the same items in another order: the same items drawn
    again = draw(pi[order], 7, keys=keys[order])
    assert set(keys[order][again]) == set(keys[first])
    assert draw_mask(np.r_[0.0, 1.0], 3).tolist() == [False, True]


def test_cost_optimal_design() -> None:
    rng = np.random.default_rng(2)
    p = np.where(rng.random(2000) < 0.5, rng.uniform(0.97, 1, 2000), rng.uniform(0, 0.03, 2000))
    cheap = cost_optimal_design(p, 500.0, label_cost=5.0, proxy_cost=0.01)
    assert cheap.use_proxy and cheap.labels == pytest.approx((500 - 2000 * 0.01) / 5)
    assert cheap.inclusion_prob.sum() == pytest.approx(cheap.labels)
    assert cheap.variance_with_proxy < cheap.variance_labels_only
    dear = cost_optimal_design(p, 500.0, label_cost=5.0, proxy_cost=0.249)  # leaves 2 labels: not worth it
    assert not dear.use_proxy and dear.labels == pytest.approx(100)
    np.testing.assert_allclose(dear.inclusion_prob, 100 / 2000)
    np.testing.assert_allclose(inclusion_probabilities(p, 500.0, label_cost=5.0, proxy_cost=0.01), cheap.inclusion_prob)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"budget": 11}, ConfigError, "budget: 11 labels asked of 10 items"),
        ({"budget": 0}, ConfigError, "budget"),
        ({"floor": 0.0}, ConfigError, "floor"),
        ({"floor": 1.5}, ConfigError, "floor"),
        ({"allocation": "equal"}, ConfigError, "allocation"),
        ({"strata": ["a"] * 3}, InputError, "strata"),
        ({"label_cost": -1.0, "proxy_cost": 1.0}, ConfigError, "label_cost"),
        ({"label_cost": 1.0, "proxy_cost": -1.0}, ConfigError, "proxy_cost"),
        ({"label_cost": 1.0}, ConfigError, "both costs"),
        ({"p": [0.5] * 9 + [1.2]}, InputError, "probabilities"),
    ],
)
def test_errors(kwargs: dict, error: type, match: str) -> None:
    args = {"p": [0.5] * 10, "budget": 2} | kwargs
    with pytest.raises(error, match=match):
        inclusion_probabilities(args.pop("p"), args.pop("budget"), **args)
