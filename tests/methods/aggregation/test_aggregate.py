from __future__ import annotations

import itertools
import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import roots_legendre
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.aggregation.aggregate import MajorityVote, OneCoin
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.aggregation.stacking import LogisticStacking
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.methods.aggregation.weighted import AccuracyWeighted, LogOddsWeighted
from tests.methods.conftest import simulate_panel

AGGREGATORS = [MajorityVote, OneCoin, AccuracyWeighted, LogOddsWeighted]
COUNT_AGGREGATORS = [OneCoin, AccuracyWeighted, LogOddsWeighted]
ALL_AGGREGATORS = [*AGGREGATORS, DawidSkene, LogisticStacking]


# ---------------------------------------------------------------- shared contract


@pytest.mark.parametrize("cls", AGGREGATORS)
def test_rows_are_probabilities(cls, panel):
    V, y = panel
    proba = clone(cls()).fit(V, y).predict_proba(V)
    assert proba.shape == (len(y), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all((proba >= 0) & (proba <= 1))


@pytest.mark.parametrize("cls", AGGREGATORS)
def test_item_without_votes_gets_prior(cls, panel):
    V, y = panel
    model = cls().fit(V, y)
    np.testing.assert_allclose(model.predict_proba(np.full((2, V.shape[1]), -1)), 0.5)


@pytest.mark.parametrize("cls", AGGREGATORS)
def test_not_fitted(cls):
    with pytest.raises(NotFittedError, match="not fitted"):
        cls().predict_proba(np.ones((1, 3)))


@pytest.mark.parametrize("cls", AGGREGATORS)
@pytest.mark.parametrize(
    ("V", "y", "match"),
    [
        (np.array([1, 0]), np.array([1, 0]), r"fit: V: expected a 2-D vote matrix"),
        (np.array([[1, 3], [0, 0]]), np.array([1, 0]), r"fit: V: codes must be"),
        (np.array([[1, 0], [0, 0]]), np.array([1, 2]), r"fit: y: labels must be 0 or 1 \(1 items, e.g. \[1\]=2\)"),
        (np.array([[1, 0], [0, 0]]), np.array([1, 0, 1]), r"fit: inconsistent numbers of items: V has 2, y has 3"),
    ],
)
def test_fit_rejects(cls, V, y, match):
    with pytest.raises(InputError, match=match):
        cls().fit(V, y)


@pytest.mark.parametrize("cls", AGGREGATORS)
def test_predict_rejects_other_panel(cls, panel):
    V, y = panel
    model = cls().fit(V, y)
    with pytest.raises(InputError, match=r"predict_proba: V: has 3 judges .* fitted on 5"):
        model.predict_proba(V[:, :3])


@pytest.mark.parametrize("cls", AGGREGATORS)
def test_relabelling_swaps_columns(cls, panel):
    V, y = panel
    swapped = np.where(V == -1, -1, 1 - V)
    p = cls().fit(V, y).predict_proba(V)
    q = cls().fit(swapped, 1 - y).predict_proba(swapped)
    np.testing.assert_allclose(q, p[:, ::-1], atol=1e-12)


# ---------------------------------------------------------------- majority vote


def test_majority_vote_hand_case():
    V = np.array([[1, 1, 0, -1], [0, 0, 0, 1], [1, 0, -1, -1]])
    model = MajorityVote().fit(V)
    np.testing.assert_allclose(model.predict_proba(V)[:, 1], [2 / 3, 1 / 4, 1 / 2])
    np.testing.assert_array_equal(model.predict(V), [1, 0, 0])  # a tie predicts B


# ---------------------------------------------------------------- one-coin: brute-force posterior


def brute_force_predictive(V_cal, y_cal, patterns, *, alpha0, beta0, prior, nodes=16):
    """P(Y=1 | v, C) by joint Gauss-Legendre quadrature over (theta_1..theta_J[, pi]).

    The integrand is built cell by cell from the raw calibration votes and the Beta prior density (integer
    alpha0, beta0 make it a polynomial of degree < 2 * nodes per axis, so the quadrature is exact); the joint
    integral is never factorised over judges. With prior="empirical" the class prior pi gets its own axis with a
    uniform prior and the calibration labels' binomial likelihood.
    """
    x, w = roots_legendre(nodes)
    t, w = (x + 1) / 2, w / 2  # nodes and weights on [0, 1]
    J = V_cal.shape[1]
    axes = J + (prior == "empirical")
    grid = np.meshgrid(*([t] * axes), indexing="ij")
    weight = np.ones_like(grid[0])
    for wa in np.meshgrid(*([w] * axes), indexing="ij"):
        weight = weight * wa
    post = weight.copy()
    for j in range(J):
        th = grid[j]
        post = post * th ** (alpha0 - 1) * (1 - th) ** (beta0 - 1)  # unnormalised Beta prior
        for i in range(len(y_cal)):
            if V_cal[i, j] != -1:
                post = post * np.where(V_cal[i, j] == y_cal[i], th, 1 - th)
    if prior == "empirical":
        pi = grid[J]
        post = post * pi ** y_cal.sum() * (1 - pi) ** (len(y_cal) - y_cal.sum())
    else:
        pi = 0.5
    out = []
    for v in patterns:
        like1, like0 = pi * np.ones_like(post), (1 - pi) * np.ones_like(post)
        for j, vj in enumerate(v):
            if vj != -1:
                like1 = like1 * (grid[j] if vj == 1 else 1 - grid[j])
                like0 = like0 * (grid[j] if vj == 0 else 1 - grid[j])
        m1, m0 = (post * like1).sum(), (post * like0).sum()
        out.append(m1 / (m1 + m0))
    return np.array(out)


@pytest.mark.parametrize(
    ("n_judges", "alpha0", "beta0", "prior", "seed"),
    [(3, 1, 1, "half", 0), (3, 2, 3, "empirical", 1), (4, 1, 1, "half", 2), (4, 3, 1, "half", 3)],
)
def test_one_coin_equals_brute_force_posterior(n_judges, alpha0, beta0, prior, seed):
    rng = np.random.default_rng(seed)
    V_cal, y_cal = simulate_panel(rng, n_items=10, accuracies=[0.85, 0.6, 0.3, 0.7][:n_judges], missing=0.2)
    assert (V_cal != -1).any(axis=0).all()  # every judge votes at least once
    patterns = np.array(list(itertools.product([-1, 0, 1], repeat=n_judges)), dtype=np.int8)
    model = OneCoin(alpha0=alpha0, beta0=beta0, prior=prior).fit(V_cal, y_cal)
    expected = brute_force_predictive(V_cal, y_cal, patterns, alpha0=alpha0, beta0=beta0, prior=prior)
    np.testing.assert_allclose(model.predict_proba(patterns)[:, 1], expected, rtol=0, atol=1e-6)


def test_one_coin_attributes_closed_form():
    V = np.array([[1, 0], [1, -1], [0, 0], [1, 1]])
    y = np.array([1, 1, 0, 0])
    model = OneCoin(alpha0=2.0, beta0=0.5).fit(V, y)
    np.testing.assert_array_equal(model.n_votes_, [4, 3])
    np.testing.assert_array_equal(model.n_correct_, [3, 1])
    np.testing.assert_allclose(model.posterior_a_, [5.0, 3.0])
    np.testing.assert_allclose(model.posterior_b_, [1.5, 2.5])
    np.testing.assert_allclose(model.accuracy_, [5 / 6.5, 3 / 5.5])
    np.testing.assert_allclose(model.weights_, [np.log(5 / 1.5), np.log(3 / 2.5)])
    assert model.prior_ == 0.5


def test_one_coin_flips_below_chance_judge(panel):
    V, y = panel
    model = OneCoin().fit(V, y)
    assert model.accuracy_[4] < 0.5 and model.weights_[4] < 0  # the 25%-accurate judge
    assert model.weights_[0] > model.weights_[1] > 0
    only_bad = np.array([[-1, -1, -1, -1, 1]])
    assert model.predict_proba(only_bad)[0, 1] < 0.5  # its vote for A is evidence for B


def test_one_coin_unseen_judge_has_zero_weight():
    V = np.array([[1, -1], [0, -1], [1, -1]])
    y = np.array([1, 0, 0])
    model = OneCoin(alpha0=3.0, beta0=1.0).fit(V, y)
    assert model.weights_[1] == 0.0
    assert model.accuracy_[1] == pytest.approx(0.75)  # still the prior mean
    np.testing.assert_allclose(model.predict_proba([[1, 1]]), model.predict_proba([[1, -1]]))


def test_one_coin_empirical_prior():
    V = np.array([[1], [1], [1], [0]])
    model = OneCoin(prior="empirical").fit(V, [1, 1, 1, 0])
    assert model.prior_ == pytest.approx(4 / 6)
    assert model.predict_proba([[-1]])[0, 1] == pytest.approx(4 / 6)


@pytest.mark.parametrize(
    ("cls", "params"),
    [
        (OneCoin, {"prior": "half", "alpha0": 0.5, "beta0": 2.0}),
        (OneCoin, {"prior": "empirical", "alpha0": 0.5, "beta0": 2.0}),
        (AccuracyWeighted, {}),
        (LogOddsWeighted, {"prior": "empirical", "eps_theta": 0.01}),
    ],
)
def test_from_counts_equals_fit(panel, cls, params):
    V, y = panel
    fitted = cls(**params).fit(V, y)
    n_votes, n_correct = count_judge_votes(V, y)
    from_counts = cls.from_counts(n_votes, n_correct, n_items=len(y), n_positive=int(y.sum()), **params)
    np.testing.assert_array_equal(from_counts.predict_proba(V), fitted.predict_proba(V))
    assert from_counts.get_params() == fitted.get_params()
    assert type(from_counts) is cls


def test_one_coin_extreme_panel_is_finite():
    V = np.ones((500, 300), dtype=np.int8)
    model = OneCoin().fit(V, np.ones(500, dtype=int))
    proba = model.predict_proba(np.vstack([V[:1], 1 - V[:1]]))
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_votes": [2, 3], "n_correct": [3, 1]}, r"n_correct: exceeds n_votes \(1 judges"),
        ({"n_votes": [2, -1], "n_correct": [1, 0]}, r"n_votes: counts must be non-negative integers"),
        ({"n_votes": [2.5], "n_correct": [1]}, r"n_votes: counts must be non-negative integers"),
        ({"n_votes": [2, 3], "n_correct": [1]}, r"inconsistent numbers of items: n_votes has 2, n_correct has 1"),
        ({"n_votes": [], "n_correct": []}, r"n_votes: expected a non-empty 1-D array"),
    ],
)
@pytest.mark.parametrize("cls", COUNT_AGGREGATORS)
def test_fit_counts_rejects(cls, kwargs, match):
    with pytest.raises(InputError, match=f"{cls.__name__}.fit_counts: {match}"):
        cls().fit_counts(**kwargs)


def test_fit_counts_empirical_needs_item_counts():
    with pytest.raises(InputError, match=r"n_items, n_positive: both are required with prior='empirical'"):
        OneCoin(prior="empirical").fit_counts([3], [2])
    with pytest.raises(InputError, match=r"n_positive: must be in \[0, n_items=3\], got 5"):
        OneCoin(prior="empirical").fit_counts([3], [2], n_items=3, n_positive=5)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"alpha0": 0.0}, r"alpha0 == 0.0, must be > 0"),
        ({"beta0": -1}, r"beta0 == -1, must be > 0"),
        ({"alpha0": "1"}, r"alpha0 must be an instance of"),
        ({"prior": "uniform"}, r"prior: must be 'half' or 'empirical', got 'uniform'"),
    ],
)
def test_one_coin_rejects_hyperparameters(params, match):
    with pytest.raises(ConfigError, match=match):
        OneCoin(**params).fit(np.array([[1]]), [1])


# ---------------------------------------------------------------- awkward panels: documented results, never NaN


def _fit_quietly(cls, V, y):
    """Fit, allowing only the warnings each estimator documents for these panels."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = cls().fit(V, y)
    for w in caught:  # stacking on a single class; EM that is slow on this small panel (169 iterations needed)
        documented = (cls is LogisticStacking and "single class" in str(w.message)) or (
            cls is DawidSkene and issubclass(w.category, ConvergenceWarning)
        )
        assert documented, str(w.message)
    return model


@pytest.mark.parametrize("cls", ALL_AGGREGATORS)
def test_judge_who_never_votes(cls, panel):
    V, y = panel
    silent = np.column_stack([V, np.full(len(V), -1)])
    model = _fit_quietly(cls, silent, y)
    probe = np.vstack([silent[:5], np.r_[np.full(V.shape[1], -1), 1][None, :]])
    proba = model.predict_proba(probe)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba[:5], _fit_quietly(cls, V, y).predict_proba(V[:5]), atol=1e-6)
    if cls is not MajorityVote:  # MV has no fitted weights: any verdict counts at prediction time
        no_votes = model.predict_proba(np.full((1, silent.shape[1]), -1))[0]
        np.testing.assert_allclose(proba[5], no_votes, atol=1e-12)  # an unseen judge's verdict is neutral


@pytest.mark.parametrize("cls", ALL_AGGREGATORS)
@pytest.mark.parametrize("label", [0, 1])
def test_all_identical_labels(cls, panel, label):
    V, _ = panel
    y = np.full(len(V), label)
    model = _fit_quietly(cls, V, y) if cls is not LogisticStacking else None
    if model is None:
        with pytest.warns(UserWarning, match=r"y has a single class"):
            model = LogisticStacking().fit(V, y)
        np.testing.assert_allclose(model.oof_scores_, 1e-6 if label == 0 else 1 - 1e-6)
    proba = model.predict_proba(V)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("cls", ALL_AGGREGATORS)
def test_single_judge(cls, panel):
    V, y = panel
    model = _fit_quietly(cls, V[:, :1], y)
    proba = model.predict_proba(np.array([[1], [0], [-1]]))
    assert np.isfinite(proba).all()
    assert proba[0, 1] >= proba[1, 1]  # the 90%-accurate judge's vote for A is evidence for A


# ---------------------------------------------------------------- invariants (hypothesis)


@st.composite
def panels_and_permutations(draw):
    n_items = draw(st.integers(1, 12))
    n_judges = draw(st.integers(1, 6))
    V = draw(hnp.arrays(np.int8, (n_items, n_judges), elements=st.sampled_from([-1, 0, 1])))
    y = draw(hnp.arrays(np.int64, n_items, elements=st.sampled_from([0, 1])))
    judge_order = draw(st.permutations(range(n_judges)))
    item_order = draw(st.permutations(range(n_items)))
    return V, y, np.array(judge_order), np.array(item_order)


@settings(max_examples=60, deadline=None)
@given(panels_and_permutations(), st.sampled_from(["half", "empirical"]))
def test_one_coin_order_invariance(case, prior):
    V, y, judges, items = case
    model = OneCoin(prior=prior).fit(V, y)
    permuted = OneCoin(prior=prior).fit(V[items][:, judges], y[items])
    np.testing.assert_allclose(permuted.weights_, model.weights_[judges])
    np.testing.assert_allclose(permuted.predict_proba(V[:, judges]), model.predict_proba(V), atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(panels_and_permutations())
def test_majority_vote_order_invariance(case):
    V, y, judges, items = case
    p = MajorityVote().fit(V).predict_proba(V)
    q = MajorityVote().fit(V[items][:, judges]).predict_proba(V[items][:, judges])
    np.testing.assert_allclose(q, p[items], atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(panels_and_permutations(), st.sampled_from([AccuracyWeighted, LogOddsWeighted]))
def test_weighted_order_invariance(case, cls):
    V, y, judges, items = case
    model = cls().fit(V, y)
    permuted = cls().fit(V[items][:, judges], y[items])
    np.testing.assert_allclose(permuted.weights_, model.weights_[judges])
    proba = model.predict_proba(V)
    np.testing.assert_allclose(permuted.predict_proba(V[:, judges]), proba, atol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
