"""Davidson aggregation (spec 003 §3) against closed forms, brute force and the spec's reference runs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import approx_fprime, check_grad
from sklearn.exceptions import NotFittedError

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.repeated.davidson import (
    TIE_MODELS,
    DavidsonAggregator,
    davidson_design,
    davidson_features,
    davidson_nll,
    mae_action,
    mae_risks,
)
from judgecal_dist.methods.repeated.self_consistency import (
    MISSING,
    confidence_self_consistency,
    decisive_majority,
    majority_vote,
    rounded_median,
    soft_self_consistency,
)
from judgecal_dist.methods.repeated.vote_simulation import davidson_labels, simulate_label_first, vote_counts


@pytest.fixture(scope="module")
def g2() -> tuple[np.ndarray, np.ndarray]:
    """4,000 items, 12 samples, tie propensity 0 (spec 003 §7.9 G2 defaults)."""
    sim = simulate_label_first(4000, 12, random_state=11)
    return vote_counts(sim.votes), sim.labels


def test_features_match_the_spec_examples():
    # Spec 003 §3.2: (1,8,0) -> 0.347, (9,0,0) -> 1.151, (5,0,4) -> 0.091; |s| <= log(n+1)/2; t in [log(1/(n+1)), 0].
    s, t = davidson_features([[1, 8, 0], [9, 0, 0], [5, 0, 4], [0, 20, 0], [20, 0, 0], [0, 0, 0]])
    assert s[:3].round(3).tolist() == [0.347, 1.151, 0.091]
    assert s[4] == pytest.approx(0.5 * np.log(21)) and s[5] == 0.0 and t[5] == 0.0
    assert t[3] == pytest.approx(np.log(21 / 21)) and t[4] == pytest.approx(np.log(1 / 21))


@pytest.mark.parametrize("tie", TIE_MODELS)
def test_nll_is_convex_and_its_gradient_is_exact(tie, g2):
    counts, y = g2
    s, t = davidson_features(counts[:500])
    X = davidson_design(s, t, tie)
    yi = y[:500] + 1
    rng = np.random.default_rng(0)
    dim = X.shape[2]
    for _ in range(200):  # midpoint convexity along random chords
        a, b = rng.normal(0, 3, dim), rng.normal(0, 3, dim)
        lam = rng.random()
        mid = davidson_nll(lam * a + (1 - lam) * b, X, yi)[0]
        assert mid <= lam * davidson_nll(a, X, yi)[0] + (1 - lam) * davidson_nll(b, X, yi)[0] + 1e-12
    for _ in range(20):  # finite-difference Hessian is positive semi-definite; analytic gradient is exact
        theta = rng.normal(0, 2, dim)
        assert check_grad(lambda th: davidson_nll(th, X, yi)[0], lambda th: davidson_nll(th, X, yi)[1], theta) < 1e-5
        hess = np.array([approx_fprime(theta, lambda th, j=j: davidson_nll(th, X, yi)[1][j], 1e-6) for j in range(dim)])
        assert np.linalg.eigvalsh((hess + hess.T) / 2).min() > -1e-5


def test_fit_recovers_generating_parameters():
    # Spec 003 §7.9 G1: N = 20,000, n = 12, beta* = 1.5, eta0* = 0.5 -> MLE within 0.05 (reference run 1.47, 0.51).
    counts = vote_counts(simulate_label_first(20_000, 12, random_state=0).votes)
    y = davidson_labels(counts, 1.5, 0.5, random_state=1)
    model = DavidsonAggregator().fit(counts, y)
    assert model.coef_["beta"] == pytest.approx(1.5, abs=0.05)
    assert model.coef_["eta0"] == pytest.approx(0.5, abs=0.05)
    assert np.ptp(model.start_losses_) < 1e-6 and not any(model.at_bound_.values())
    # Interior optimum: the mean fitted tie probability equals the tie rate (spec 003 §3.5 invariant).
    assert model.predict_proba(counts)[:, 1].mean() == pytest.approx((y == 0).mean(), abs=1e-5)
    # Fresh G1 data: empirical MAE of the Bayes action ~ the Bayes risk, within 3 SE.
    fresh_counts = vote_counts(simulate_label_first(20_000, 12, random_state=5).votes)
    fresh_y = davidson_labels(fresh_counts, 1.5, 0.5, random_state=6)
    err = np.abs(model.predict(fresh_counts) - fresh_y)
    risk = mae_risks(model.predict_proba(fresh_counts)).min(axis=1)
    assert abs(err.mean() - risk.mean()) < 3 * err.std() / np.sqrt(len(err))


def test_mae_action_equals_brute_force_risk_minimisation():
    rng = np.random.default_rng(3)
    u, eta = rng.normal(0, 3, 20_000), rng.normal(0, 3, 20_000)
    logits = np.column_stack([-u, eta, u])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    risks = np.array([[sum(abs(a - y) * p[i, y + 1] for y in (-1, 0, 1)) for a in (-1, 0, 1)] for i in range(500)])
    assert np.allclose(risks, mae_risks(p[:500]))
    brute = np.array([-1, 0, 1])[np.argmin(mae_risks(p), axis=1)]
    assert (mae_action(u, eta) == brute).all()
    # Equal risks break toward 0 (spec 003 §3.7): at u = tau exactly, R(+1) = R(0).
    tau = np.arcsinh(np.exp(0.3) / 2)
    assert mae_action([tau, -tau], 0.3).tolist() == [0, 0]


def test_fitted_model_predicts_argmin_risk_and_mode_for_accuracy(g2):
    counts, y = g2
    model = DavidsonAggregator().fit(counts[:300], y[:300])
    proba = model.predict_proba(counts)
    assert (model.predict(counts) == np.array([-1, 0, 1])[mae_risks(proba).argmin(axis=1)]).all()
    mode = DavidsonAggregator(decision="accuracy").fit(counts[:300], y[:300]).predict(counts)
    assert (mode == np.array([-1, 0, 1])[proba.argmax(axis=1)]).all()


@pytest.mark.parametrize("propensity", [-1.0, 0.0, 1.0])
def test_davidson_mae_below_majority_vote_with_ties(propensity):
    # Spec 003 §7.9 G2 reference: Ours 0.38-0.45 and below SC at every tie propensity (N = 4,000, |C| = 200).
    sim = simulate_label_first(4000, 12, tie_propensity=propensity, random_state=21)
    counts, y = vote_counts(sim.votes), sim.labels
    maes = {"davidson": [], "sc": []}
    for seed in range(10):
        cal = np.zeros(len(y), bool)
        cal[np.random.default_rng(seed).permutation(len(y))[:200]] = True
        pred = DavidsonAggregator(random_state=seed).fit(counts[cal], y[cal]).predict(counts[~cal])
        maes["davidson"].append(np.abs(pred - y[~cal]).mean())
        maes["sc"].append(np.abs(majority_vote(counts[~cal]) - y[~cal]).mean())
        pa = (pred == y[~cal]).mean()
        assert maes["davidson"][-1] >= 1 - pa - 1e-12  # MAE >= 1 - PA for every prediction vector
    assert np.mean(maes["davidson"]) < np.mean(maes["sc"])
    assert 0.36 < np.mean(maes["davidson"]) < 0.46


def test_simulated_tie_vote_rates_match_the_spec():
    # Spec 003 §7.9: per-sample tie-vote rate 0.12 / 0.26 / 0.48 for eta_J = -1 / 0 / 1.
    rates = [(simulate_label_first(4000, 12, tie_propensity=e, random_state=2).votes == 0).mean() for e in (-1, 0, 1)]
    assert np.allclose(rates, [0.12, 0.26, 0.48], atol=0.015)


def test_no_tie_labels_collapse_to_the_sign_rule():
    # Spec 003 §7.8: without tie labels eta0 runs to its lower bound and the MAE action is sign(c+ - c-).
    sim = simulate_label_first(3000, 8, prior=(0.5, 0.0, 0.5), random_state=4)
    counts = vote_counts(sim.votes)
    model = DavidsonAggregator().fit(counts, sim.labels)
    assert model.at_bound_["eta0"] and model.coef_["eta0"] == pytest.approx(-20.0)
    assert (model.predict(counts) == decisive_majority(counts)).all()


def test_local_tie_variants_fit_and_weights_equal_repetition(g2):
    counts, y = g2
    for tie in ("local", "local_intercept"):
        model = DavidsonAggregator(tie=tie).fit(counts[:400], y[:400])
        assert set(model.coef_) == {"beta", "gamma"} | ({"eta0"} if tie == "local_intercept" else set())
        assert np.ptp(model.start_losses_) < 1e-6
    cells, inverse, weights = np.unique(
        np.column_stack([counts[:400], y[:400]]), axis=0, return_inverse=True, return_counts=True
    )
    weighted = DavidsonAggregator().fit(cells[:, :3], cells[:, 3], sample_weight=weights)
    plain = DavidsonAggregator().fit(counts[:400], y[:400])
    assert weighted.coef_ == pytest.approx(plain.coef_, abs=1e-5)


def test_errors():
    with pytest.raises(InputError, match=r"counts: expected shape \(n_items, 3\)"):
        DavidsonAggregator().fit([[1, 2]], [1])
    with pytest.raises(InputError, match="counts: must be non-negative integers"):
        DavidsonAggregator().fit([[1, -2, 0]], [1])
    with pytest.raises(InputError, match="y: labels must be -1, 0 or"):
        DavidsonAggregator().fit([[1, 2, 0]], [2])
    with pytest.raises(ConfigError, match="tie: must be one of"):
        DavidsonAggregator(tie="both").fit([[1, 2, 0]], [1])
    with pytest.raises(NotFittedError):
        DavidsonAggregator().predict([[1, 2, 0]])


# -- baselines -----------------------------------------------------------------------------------------------------


def test_majority_vote_against_brute_force():
    for counts in itertools.product(range(4), repeat=3):
        votes = [1] * counts[0] + [0] * counts[1] + [-1] * counts[2]
        tally = {v: votes.count(v) for v in (-1, 0, 1)}
        top = max(tally.values())
        winners = [v for v in (-1, 0, 1) if tally[v] == top]
        expected = 0 if not votes or len(winners) > 1 else winners[0]
        assert majority_vote([counts]).tolist() == [expected]
        if votes and len(winners) > 1:
            # "median": the ordinal median of all votes (mean of the two middle ones, rounded toward 0)
            ordered = sorted(votes)
            mid = (ordered[(len(votes) - 1) // 2] + ordered[len(votes) // 2]) / 2
            assert majority_vote([counts], tie_break="median").tolist() == [int(np.trunc(mid))]
            assert majority_vote([counts], tie_break="random").tolist()[0] in winners


def test_rounded_median_and_confidence_rules_on_hand_worked_cases():
    # Spec 003 §4.1: (1, -1) -> 0, (0, -1) -> -1, (0, 0) -> 0, (0, 1) -> 1; one missing -> the other.
    assert rounded_median([1, 0, 0, 0, MISSING], [-1, -1, 0, 1, -1]).tolist() == [0, -1, 0, 1, -1]
    R = np.array([[1, 1, 0, MISSING], [-1, 0, 0, 1]])
    W = np.array([[0.9, 0.2, 0.8, 0.0], [0.7, 0.5, 0.5, 0.7]])
    # min: +1 -> 0.2, 0 -> 0.8; mean: +1 -> 0.55, 0 -> 0.8; product: +1 -> 0.18, 0 -> 0.8 / row 2 ties +1/-1 at 0.7
    for agg in ("min", "mean", "product"):
        assert soft_self_consistency(R, W, aggregate=agg)[0] == 0
    assert soft_self_consistency(R, W, aggregate="mean").tolist() == [0, 0]
    assert confidence_self_consistency(R, W).tolist() == [1, 0]  # 1.1 > 0.8; row 2: 0.7 / 1.0 / 0.7 -> 0 wins
    assert confidence_self_consistency([[MISSING, MISSING]], [[0.0, 0.0]]).tolist() == [0]
