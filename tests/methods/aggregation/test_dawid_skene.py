from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.aggregation.cells import label_cells, vote_cells
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from tests.methods.conftest import simulate_panel

# crowd-kit (test-only dependency) can emit pandas/transformers deprecation noise; it is silenced for its tests
# only, by the two filterwarnings marks on each of them.
# crowd-kit's conventions: no smoothing, counts and prior floored at 1e-10, exactly n_iter iterations.
CROWDKIT_LIKE = {"smoothing": 0.0, "eps": 1e-10, "fixed_iter": True}


@pytest.fixture(scope="module")
def ds_panel() -> tuple[np.ndarray, np.ndarray]:
    """600 items x 8 judges of mixed quality (one below chance), 30% missing, every item with >= 1 verdict."""
    V, y = simulate_panel(
        np.random.default_rng(5), n_items=600, accuracies=[0.9, 0.85, 0.8, 0.7, 0.65, 0.6, 0.55, 0.3], missing=0.3
    )
    V[(V == -1).all(axis=1), 0] = 1  # crowd-kit drops items without verdicts; keep every item in both
    return V, y


def crowdkit_fit(V: np.ndarray, n_iter: int, true_labels: pd.Series | None = None):
    ck = pytest.importorskip("crowdkit.aggregation")
    items, judges = np.nonzero(V != -1)
    long = pd.DataFrame({"task": items, "worker": judges, "label": V[items, judges].astype(int)})
    model = ck.DawidSkene(n_iter=n_iter, tol=-np.inf).fit(long, true_labels=true_labels)  # tol=-inf: no early stop
    probas = model.probas_.sort_index()[[0, 1]].to_numpy()
    errors = np.zeros((V.shape[1], 2, 2))
    for (worker, observed), row in model.errors_.iterrows():  # errors_[worker, observed][true] = P(v | y)
        errors[worker, :, observed] = row[[0, 1]].to_numpy()
    return probas, float(model.priors_[1]), errors


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("n_iter", [1, 3, 20])
def test_matches_crowdkit_at_equal_iterations(ds_panel, n_iter):
    V, _ = ds_panel
    probas, prior, errors = crowdkit_fit(V, n_iter)
    ours = DawidSkene(n_iter=n_iter, **CROWDKIT_LIKE).fit(V)
    assert ours.n_iter_ == n_iter and not ours.label_switched_
    np.testing.assert_allclose(ours.posteriors_, probas, rtol=0, atol=1e-6)
    assert ours.prior_ == pytest.approx(prior, abs=1e-6)
    seen = errors.sum(axis=2) > 0  # crowd-kit has no row for a (judge, verdict) never observed
    np.testing.assert_allclose(ours.confusion_[seen], errors[seen], rtol=0, atol=1e-6)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_semi_supervised_matches_crowdkit_true_labels(ds_panel):
    V, y = ds_panel
    known = np.arange(0, 600, 4)
    probas, _, _ = crowdkit_fit(V, 5, true_labels=pd.Series(y[known], index=known))
    partial = np.full(len(y), -1)
    partial[known] = y[known]
    ours = DawidSkene(n_iter=5, semi_supervised=True, **CROWDKIT_LIKE).fit(V, partial)
    np.testing.assert_allclose(ours.posteriors_, probas, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(ours.posteriors_[known, 1], y[known])  # clamped


def test_one_em_step_by_hand_with_smoothing():
    """Init, M-step with eta, E-step, written cell by cell with explicit loops (no matrix products)."""
    V = np.array([[1, 1, -1], [1, 0, 0], [0, 0, 1], [-1, 1, 1], [0, -1, 0]])
    eta, n, J = 0.01, 5, 3
    T1 = []
    for i in range(n):
        votes = [V[i, j] for j in range(J) if V[i, j] != -1]
        T1.append(sum(votes) / len(votes))
    T = np.column_stack([1 - np.array(T1), T1])
    pi = T[:, 1].mean()
    Pi = np.zeros((J, 2, 2))
    for j in range(J):
        for yy in range(2):
            mass = sum(T[i, yy] for i in range(n) if V[i, j] != -1)
            for v in range(2):
                Pi[j, yy, v] = (sum(T[i, yy] for i in range(n) if V[i, j] == v) + eta) / (mass + 2 * eta)
    post = np.zeros((n, 2))
    for i in range(n):
        joint = [1 - pi, pi]
        for j in range(J):
            if V[i, j] != -1:
                joint = [joint[yy] * Pi[j, yy, V[i, j]] for yy in range(2)]
        post[i] = np.array(joint) / sum(joint)
    model = DawidSkene(n_iter=1, fixed_iter=True, smoothing=eta).fit(V)
    np.testing.assert_allclose(model.posteriors_, post, rtol=0, atol=1e-12)
    marginal = [  # P(V_i) = sum_k pi_k prod_j Pi[j, k, V_ij] over the observed votes
        (1 - pi) * np.prod([Pi[j, 0, V[i, j]] for j in range(J) if V[i, j] != -1])
        + pi * np.prod([Pi[j, 1, V[i, j]] for j in range(J) if V[i, j] != -1])
        for i in range(n)
    ]
    assert model.loss_history_[0] == pytest.approx(-np.log(marginal).mean())


def test_converges_and_recovers_accuracies(ds_panel):
    V, y = ds_panel
    model = DawidSkene().fit(V)
    assert model.converged_ and 1 < model.n_iter_ < 100 and len(model.loss_history_) == model.n_iter_
    assert np.all(np.diff(model.loss_history_) <= 1e-9)  # EM never increases the negative log-likelihood
    balanced = 0.5 * (model.confusion_[:, 1, 1] + model.confusion_[:, 0, 0])
    np.testing.assert_allclose(balanced, [0.9, 0.85, 0.8, 0.7, 0.65, 0.6, 0.55, 0.3], atol=0.08)
    assert (model.predict(V) == y).mean() > 0.9
    np.testing.assert_allclose(model.predict_proba(V), model.posteriors_, atol=1e-3)  # one M-step apart


def test_stopping_rules(ds_panel):
    V, _ = ds_panel
    loose = DawidSkene(tol=1e-3, tol_posterior=0.0).fit(V)
    strict = DawidSkene(tol=0.0, tol_posterior=1e-9).fit(V)
    assert loose.converged_ and strict.converged_ and loose.n_iter_ < strict.n_iter_
    fixed = DawidSkene(n_iter=7, fixed_iter=True).fit(V)
    assert fixed.n_iter_ == 7


def test_not_converged_warns(ds_panel):
    V, _ = ds_panel
    with pytest.warns(ConvergenceWarning, match=r"EM stopped after n_iter=2 iterations"):
        model = DawidSkene(n_iter=2).fit(V)
    assert not model.converged_ and model.n_iter_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DawidSkene(n_iter=2, fixed_iter=True).fit(V)  # the comparison mode never warns


def test_label_switching_fix():
    """Small noisy panels: EM's mode sometimes has judges worse than chance on average; the fix swaps it back."""
    switched = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        accuracies = list(rng.uniform(0.05, 0.95, rng.integers(2, 6)))
        V, _ = simulate_panel(rng, n_items=int(rng.integers(5, 60)), accuracies=accuracies, missing=rng.uniform(0, 0.6))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # tiny panels may stop at n_iter
            model = DawidSkene().fit(V)
        voted = (V != -1).any(axis=0)
        balanced = 0.5 * (model.confusion_[voted, 1, 1] + model.confusion_[voted, 0, 0])
        assert balanced.mean() >= 0.5
        np.testing.assert_allclose(model.posteriors_.sum(axis=1), 1.0)
        np.testing.assert_allclose(model.predict_proba(V), model.posteriors_, atol=0.05)  # swapped consistently
        switched += model.label_switched_
    assert switched >= 2


def test_adversarial_majority_is_read_as_the_truth():
    """Three below-chance judges outvote one good judge: the labelling with judges above chance wins (no swap)."""
    V, y = simulate_panel(np.random.default_rng(3), n_items=400, accuracies=[0.2, 0.25, 0.3, 0.85], missing=0.0)
    model = DawidSkene().fit(V)
    assert not model.label_switched_
    assert (model.predict(V) == y).mean() < 0.2  # unsupervised EM cannot know better


def test_relabelling_and_item_order_invariance(ds_panel):
    V, _ = ds_panel
    swapped = np.where(V == -1, -1, 1 - V)
    p = DawidSkene().fit(V).posteriors_
    np.testing.assert_allclose(DawidSkene().fit(swapped).posteriors_, p[:, ::-1], atol=1e-10)
    order = np.random.default_rng(0).permutation(len(V))
    np.testing.assert_allclose(DawidSkene().fit(V[order]).posteriors_, p[order], atol=1e-10)


def test_item_without_votes_gets_fitted_prior(ds_panel):
    V, _ = ds_panel
    model = DawidSkene().fit(V)
    np.testing.assert_allclose(model.predict_proba(np.full((1, V.shape[1]), -1)), [[1 - model.prior_, model.prior_]])


def test_judge_without_votes_is_neutral(ds_panel):
    V, _ = ds_panel
    extra = np.column_stack([V, np.full(len(V), -1)])
    model = DawidSkene().fit(extra)
    np.testing.assert_allclose(model.confusion_[-1], 0.5)
    np.testing.assert_allclose(model.posteriors_, DawidSkene().fit(V).posteriors_, atol=1e-10)
    probe = np.full((1, extra.shape[1]), -1)
    probe[0, -1] = 1
    assert np.isfinite(model.predict_proba(probe)).all()


def test_clone_and_not_fitted():
    assert clone(DawidSkene(n_iter=5, smoothing=0.1)).get_params()["smoothing"] == 0.1
    with pytest.raises(NotFittedError):
        DawidSkene().predict_proba(np.ones((1, 2)))


@pytest.mark.parametrize(
    ("params", "y", "match"),
    [
        ({"semi_supervised": True}, None, r"y: required with semi_supervised=True"),
        ({"semi_supervised": True}, [1, 2, -1], r"y: labels must be 0, 1 or -1 \(no label\) \(1 items, e.g. \[1\]=2\)"),
        ({"semi_supervised": True}, [1, 0], r"inconsistent numbers of items: V has 3, y has 2"),
    ],
)
def test_semi_supervised_rejects_labels(params, y, match):
    with pytest.raises(InputError, match=match):
        DawidSkene(**params).fit(np.array([[1, 0], [0, 0], [1, 1]]), y)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_iter": 0}, r"n_iter == 0, must be >= 1"),
        ({"tol": -1.0}, r"tol == -1.0, must be >= 0"),
        ({"smoothing": -0.1}, r"smoothing == -0.1, must be >= 0"),
        ({"fixed_iter": 1}, r"fixed_iter must be an instance of"),
        ({"eps": 0.0}, r"eps == 0.0, must be > 0"),
    ],
)
def test_rejects_hyperparameters(params, match):
    with pytest.raises(ConfigError, match=match):
        DawidSkene(**params).fit(np.array([[1, 0], [0, 0]]))


def _naive_row_em(V: np.ndarray, y: np.ndarray, n_iter: int, smoothing: float, eps: float) -> tuple:
    """Row-by-row semi-supervised EM written from the model's equations (no cells, no indicator matrices)."""
    n, J = V.shape
    T1 = np.array([np.mean(row[row >= 0]) if (row >= 0).any() else 0.5 for row in V])
    T1[y >= 0] = y[y >= 0]
    for it in range(n_iter + 1):  # n_iter M- and E-steps, then the final M-step
        prior = T1.mean()
        conf = np.full((J, 2, 2), smoothing)
        for i in range(n):
            for j in range(J):
                if V[i, j] >= 0:
                    conf[j, 1, V[i, j]] += T1[i]
                    conf[j, 0, V[i, j]] += 1.0 - T1[i]
        conf /= conf.sum(axis=2, keepdims=True)
        if it == n_iter:
            break
        logc = np.log(np.clip(conf, eps, 1 - eps))
        new = np.empty(n)
        for i in range(n):
            lj = np.log(np.clip([1 - prior, prior], eps, 1 - eps))
            for j in range(J):
                if V[i, j] >= 0:
                    lj = lj + logc[j, :, V[i, j]]
            new[i] = 1.0 / (1.0 + np.exp(lj[0] - lj[1]))
        new[y >= 0] = y[y >= 0]
        T1 = new
    return prior, conf, T1


def test_cell_em_equals_naive_row_em_with_held_out_labels_latent():
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 2, 300)
    acc = np.array([0.9, 0.75, 0.65, 0.55])
    V = np.where(rng.random((300, 4)) < acc, truth[:, None], 1 - truth[:, None]).astype(np.int8)
    V[rng.random(V.shape) < 0.2] = -1
    y = np.where(rng.random(300) < 0.2, truth, -1)
    y[:30] = -1  # a held-out fold: its labels left latent
    cells, cell_labels, inverse, counts = vote_cells(V, y)
    assert len(cells) < 150 and counts.sum() == 300
    np.testing.assert_array_equal(cells[inverse], V)
    np.testing.assert_array_equal(cell_labels[inverse], y)
    model = DawidSkene(n_iter=5, fixed_iter=True, smoothing=0.1, semi_supervised=True).fit(V, y)
    prior, conf, T1 = _naive_row_em(V, y, 5, 0.1, model.eps)
    assert model.prior_ == pytest.approx(prior, rel=1e-12)
    np.testing.assert_allclose(model.confusion_, conf, rtol=1e-12)
    np.testing.assert_allclose(model.posteriors_[:, 1], T1, rtol=1e-10, atol=1e-14)


def test_vote_cells_of_a_wide_panel():
    rng = np.random.default_rng(3)
    V = rng.integers(-1, 2, (50, 45)).astype(np.int8)
    V = np.vstack([V, V[:10]])  # ten items repeat a pattern
    cells, labels, inverse, counts = vote_cells(V)
    assert labels is None and len(cells) == 50 and counts.sum() == 60
    np.testing.assert_array_equal(cells[inverse], V)


def test_fold_cells_recounted_from_patterns_equal_naive_row_em():
    """Patterns keyed once, labels of a fold set to none, cells recounted by label state (``label_cells``) and
    ``fit_cells``: the naive row EM with that fold's labels latent."""
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 2, 240)
    acc = np.array([0.85, 0.7, 0.6])
    V = np.where(rng.random((240, 3)) < acc, truth[:, None], 1 - truth[:, None]).astype(np.int8)
    V[rng.random(V.shape) < 0.25] = -1
    y = np.where(rng.random(240) < 0.3, truth, -1)
    patterns, _, pattern, _ = vote_cells(V)
    for fold in range(2):
        y_fold = np.where(np.arange(240) % 2 == fold, -1, y)
        cell_pattern, cell_labels, inverse, counts = label_cells(pattern, len(patterns), y_fold)
        np.testing.assert_array_equal(patterns[cell_pattern][inverse], V)
        np.testing.assert_array_equal(cell_labels[inverse], y_fold)
        model = DawidSkene(n_iter=4, fixed_iter=True, smoothing=0.1, semi_supervised=True)
        model.fit_cells(patterns[cell_pattern], cell_labels, counts, inverse)
        prior, conf, T1 = _naive_row_em(V, y_fold, 4, 0.1, model.eps)
        assert model.prior_ == pytest.approx(prior, rel=1e-12)
        np.testing.assert_allclose(model.confusion_, conf, rtol=1e-12)
        np.testing.assert_allclose(model.posteriors_[:, 1], T1, rtol=1e-10, atol=1e-14)
