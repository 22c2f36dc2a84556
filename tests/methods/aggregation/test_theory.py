"""Spec 000 §3.9 as numerical tests: each check fails if the formula it tests is wrong.

References are independent of the package: brute-force Bayes over every vote vector (products of probabilities,
never the log-odds sum), entropies and conditional mutual information of the enumerated joint table, and the
exact error of the Bayes decision by enumeration. Propositions 1-2 and Theorem 1 test the package's closed
forms (:mod:`judgecal_dist.methods.aggregation.theory`); Theorem 2 and Proposition 3 test the package's
calibrators (Platt, beta, isotonic) on the properties the paper proves for them.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import expit, logit

from judgecal_dist.errors import InputError
from judgecal_dist.io.one_coin import simulate_one_coin
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.aggregation.theory import (
    bhattacharyya_exponents,
    jury_error_bound,
    oracle_posterior,
    oracle_weights,
)
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.isotonic import IsotonicCalibrator
from judgecal_dist.methods.calibration.platt import PlattCalibrator


def all_vote_vectors(n_judges: int, values: tuple[int, ...] = (1, 0)) -> np.ndarray:
    return np.array(list(itertools.product(values, repeat=n_judges)), dtype=np.int8)


def joint_table(p: np.ndarray, prior: float, missing: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every vote vector (codes 1, 0 and, with ``missing``, -1) and its joint probability with Y=0 and Y=1.

    Plain products of per-judge probabilities: P(V_j = v | Y = y) = (1 - m_j) p_j if v = y, (1 - m_j)(1 - p_j)
    if v = 1 - y, m_j if v is missing (a label-independent missing rate).
    """
    m = np.zeros_like(p) if missing is None else missing
    values = (1, 0) if missing is None else (1, 0, -1)
    V = all_vote_vectors(p.size, values)
    joint = np.empty((V.shape[0], 2))
    for y in (0, 1):
        per_judge = np.where(V == -1, m, np.where(y == V, (1 - m) * p, (1 - m) * (1 - p)))
        joint[:, y] = (prior if y == 1 else 1 - prior) * per_judge.prod(axis=1)
    return V, joint


def marginal(V: np.ndarray, joint: np.ndarray, subset: list[int]) -> dict[tuple[int, ...], np.ndarray]:
    """P(V_A = v, Y = y) for every v, summed over the judges outside ``subset``."""
    out: dict[tuple[int, ...], np.ndarray] = {}
    for row, prob in zip(V[:, subset], joint, strict=True):
        key = tuple(row.tolist())
        out[key] = out.get(key, np.zeros(2)) + prob
    return out


def conditional_entropy(table: dict[tuple[int, ...], np.ndarray]) -> float:
    """H(Y | V_A) in nats from the joint table."""
    h = 0.0
    for prob in table.values():
        cond = prob / prob.sum()
        h -= float(sum(q * np.log(c) for q, c in zip(prob, cond, strict=True) if q > 0))
    return h


# --- Proposition 2 --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_judges", [1, 5, 12])
def test_proposition2_equals_brute_force_bayes_over_all_panels(n_judges):
    rng = np.random.default_rng(n_judges)
    p = rng.uniform(0.05, 0.95, n_judges)  # below-chance judges included
    prior = float(rng.uniform(0.2, 0.8))
    V, joint = joint_table(p, prior)
    brute = joint[:, 1] / joint.sum(axis=1)
    assert np.abs(oracle_posterior(V, p, prior) - brute).max() < 1e-10


def test_proposition2_sums_only_over_the_judges_that_voted():
    """Missing votes: brute force marginalises the missing judges out of the joint table."""
    rng = np.random.default_rng(3)
    p = rng.uniform(0.1, 0.9, 7)
    prior = 0.35
    V, joint = joint_table(p, prior)
    for subset in ([0], [1, 4], [0, 2, 3, 6]):
        table = marginal(V, joint, subset)
        keys = np.array(list(table))
        brute = np.array([prob[1] / prob.sum() for prob in table.values()])
        padded = np.full((keys.shape[0], p.size), -1, dtype=np.int8)
        padded[:, subset] = keys
        assert np.abs(oracle_posterior(padded, p, prior) - brute).max() < 1e-12


def test_proposition2_weights_chance_judges_zero_and_flips_below_chance():
    assert oracle_weights([0.5])[0] == 0.0
    np.testing.assert_allclose(oracle_weights([0.3, 0.7]), [np.log(3 / 7), np.log(7 / 3)])
    # A vote from a 0.3-accurate judge for A is evidence for B.
    assert oracle_posterior([[1]], [0.3])[0] == pytest.approx(0.3)
    with pytest.raises(InputError, match="accuracy"):
        oracle_weights([0.0, 0.5])


# --- Proposition 1 --------------------------------------------------------------------------------------------


def oracle_risks(p, prior, missing, subset) -> tuple[float, float]:
    """(NLL, Brier) of the oracle-calibrated predictor p*_A = the package's Proposition 2 posterior on V_A."""
    V, joint = joint_table(p, prior, missing)
    masked = np.full_like(V, -1)
    masked[:, subset] = V[:, subset]
    q = oracle_posterior(masked, p, prior)
    nll = float((joint[:, 1] * -np.log(q) + joint[:, 0] * -np.log1p(-q)).sum())
    brier = float((joint[:, 1] * (1 - q) ** 2 + joint[:, 0] * q**2).sum())
    return nll, brier


@pytest.mark.parametrize("with_missing", [False, True])
def test_proposition1_oracle_risk_is_monotone_and_the_gap_is_the_cmi(with_missing):
    n_judges = 7
    rng = np.random.default_rng(11)
    p = rng.uniform(0.2, 0.9, n_judges)
    p[3] = 0.5  # a chance judge: adding it changes nothing
    prior = 0.4
    missing = rng.uniform(0.05, 0.4, n_judges) if with_missing else None
    V, joint = joint_table(p, prior, missing)
    order = list(rng.permutation(n_judges))
    risks = [oracle_risks(p, prior, missing, order[:k]) for k in range(n_judges + 1)]
    for k in range(n_judges):
        a, b = order[:k], order[: k + 1]
        table_a, table_b = marginal(V, joint, a), marginal(V, joint, b)
        # R_NLL(A) = H(Y | V_A): the oracle-calibrated predictor's risk is the conditional entropy.
        assert risks[k][0] == pytest.approx(conditional_entropy(table_a), abs=1e-12)
        # R_NLL(A) - R_NLL(B) = I(Y; V_{B \ A} | V_A), from its definition on the joint table.
        cmi = 0.0
        for key_b, prob_b in table_b.items():
            prob_a = table_a[key_b[:-1]]
            cmi += sum(q * np.log(q * prob_a.sum() / (prob_a[y] * prob_b.sum())) for y, q in enumerate(prob_b) if q > 0)
        assert risks[k][0] - risks[k + 1][0] == pytest.approx(cmi, abs=1e-12)
        # R_Br(A) - R_Br(B) = E[Var(p*_B | V_A)].
        var = 0.0
        for key_a in table_a:
            cells = [(pb.sum(), pb[1] / pb.sum()) for kb, pb in table_b.items() if kb[:-1] == key_a]
            mass = np.array([c[0] for c in cells])
            post = np.array([c[1] for c in cells])
            mean = (mass * post).sum() / mass.sum()
            var += (mass * (post - mean) ** 2).sum()
        assert risks[k][1] - risks[k + 1][1] == pytest.approx(var, abs=1e-12)
        if p[order[k]] == 0.5:
            assert risks[k][0] - risks[k + 1][0] == pytest.approx(0.0, abs=1e-12)
        else:  # strict for any judge away from chance
            assert risks[k + 1][0] < risks[k][0] - 1e-6 and risks[k + 1][1] < risks[k][1] - 1e-6


# --- Theorem 1 ------------------------------------------------------------------------------------------------


def bayes_error(p: np.ndarray) -> float:
    """Exact P(y_hat != Y) of sign(sum_j w*_j Z_j) with equal priors, ties at 0 counted as half an error."""
    V, joint = joint_table(p, 0.5)
    score = (2 * V.astype(float) - 1) @ logit(p)
    tie = np.isclose(score, 0.0, atol=1e-12)
    err = np.where(tie, 0.5 * joint.sum(axis=1), np.where(score > 0, joint[:, 0], joint[:, 1]))
    return float(err.sum())


def test_theorem1_closed_form_matches_the_bhattacharyya_product():
    p = np.array([0.5, 0.6, 0.9, 0.1, 0.99])
    bc = 2 * np.sqrt(p * (1 - p))
    np.testing.assert_allclose(bhattacharyya_exponents(p), -np.log(bc), rtol=1e-12)
    assert jury_error_bound(p) == pytest.approx(0.5 * bc.prod(), rel=1e-12)
    delta = p - 0.5
    assert (bhattacharyya_exponents(p) >= 2 * delta**2 - 1e-15).all()
    np.testing.assert_allclose(bhattacharyya_exponents(p), bhattacharyya_exponents(1 - p), rtol=1e-12)
    assert bhattacharyya_exponents([0.5])[0] == 0.0


@pytest.mark.parametrize("seed", range(4))
def test_theorem1_bounds_the_exact_bayes_error(seed):
    rng = np.random.default_rng(100 + seed)
    n_judges = int(rng.integers(3, 15))
    p = rng.uniform(0.1, 0.9, n_judges)  # below-chance judges included
    error = bayes_error(p)
    assert error <= jury_error_bound(p) + 1e-15
    # The bound is not vacuous: within a factor that stays moderate for these panels.
    assert jury_error_bound(p) < 0.5


def test_theorem1_single_judge_and_a_flipped_below_chance_judge():
    # One judge: the Bayes error is min(p, 1-p) and the bound is sqrt(p (1 - p)) exactly.
    for p in (0.2, 0.7, 0.95):
        assert bayes_error(np.array([p])) == pytest.approx(min(p, 1 - p), abs=1e-15)
        assert jury_error_bound([p]) == pytest.approx(np.sqrt(p * (1 - p)), rel=1e-12)
    base = np.array([0.7, 0.65, 0.8, 0.6, 0.72])
    with_below = np.append(base, 0.2)
    assert bayes_error(with_below) < bayes_error(base)  # flipped by its negative weight, it helps
    assert jury_error_bound(with_below) < jury_error_bound(base)


def test_theorem1_monte_carlo_for_a_large_panel():
    rng = np.random.default_rng(5)
    n_judges, draws = 150, 50_000
    p = 0.5 + rng.uniform(-0.06, 0.06, n_judges)  # close to chance, so the error is measurable
    y = rng.integers(0, 2, draws)
    right = rng.random((draws, n_judges)) < p
    z = np.where(right, 2 * y[:, None] - 1, 1 - 2 * y[:, None])
    y_hat = (z @ logit(p) > 0).astype(int)
    error = float((y_hat != y).mean())
    se = np.sqrt(error * (1 - error) / draws)
    assert error <= jury_error_bound(p) + 3 * se


# --- Theorem 2 ------------------------------------------------------------------------------------------------


def _nll(q: np.ndarray, y: np.ndarray) -> float:
    q = np.clip(q, 1e-6, 1 - 1e-6)
    return float(-(y * np.log(q) + (1 - y) * np.log1p(-q)).mean())


def test_theorem2_nested_calibration_never_raises_the_evaluation_nll():
    """Step 1 >= Step 1+2 >= Step 1+3 (up to 1e-3) on a one-coin panel with n_cal = 1e5 (spec §3.9).

    Item difficulty makes the one-coin posterior overconfident, so the larger classes do strictly better here.
    """
    n = 100_000
    accuracy = np.array([0.85, 0.75, 0.7, 0.65, 0.6, 0.4, 0.55])
    panel = simulate_one_coin(2 * n, accuracy, seed=9, difficulty_sd=1.0, missing_rate=0.1)
    V, y = panel.votes, panel.labels.astype(int)
    cal, ev = slice(0, n), slice(n, 2 * n)
    step1 = OneCoin().fit(V[cal], y[cal])
    s_cal, s_ev = step1.predict_proba(V[cal])[:, 1], step1.predict_proba(V[ev])[:, 1]
    nll1 = _nll(s_ev, y[ev])
    nll12 = _nll(PlattCalibrator(score_input="probability").fit(s_cal, y[cal]).predict_proba(s_ev)[:, 1], y[ev])
    nll13 = _nll(BetaCalibration(score_input="probability").fit(s_cal, y[cal]).predict_proba(s_ev)[:, 1], y[ev])
    assert nll12 <= nll1 + 1e-3
    assert nll13 <= nll12 + 1e-3
    assert nll1 - nll13 > 0.01  # the difficulty makes calibration matter, so the check has teeth


# --- Proposition 3 --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scores() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(21)
    t = rng.normal(0.0, 1.5, 6000)
    s = expit(t)
    y = (rng.random(t.size) < expit(0.7 * t + 0.2)).astype(int)
    return s[:3000], y[:3000], s[3000:], y[3000:]


@pytest.mark.parametrize("h", [lambda s: s**3, lambda s: np.sqrt(s), lambda s: expit(2.0 * logit(s) - 1.0)])
def test_proposition3_isotonic_is_invariant_under_increasing_distortions(scores, h):
    """The attained risk (the infimum over the class) is the same; new scores only approximately agree, because
    the package's isotonic map interpolates linearly between fitted scores (sklearn's convention), and linear
    interpolation is not invariant under a non-linear h."""
    s, y, s_ev, _ = scores
    clean = IsotonicCalibrator(score_input="probability").fit(s, y)
    distorted = IsotonicCalibrator(score_input="probability").fit(h(s), y)
    np.testing.assert_allclose(distorted.predict_proba(h(s))[:, 1], clean.predict_proba(s)[:, 1], atol=1e-12)
    between = np.abs(distorted.predict_proba(h(s_ev))[:, 1] - clean.predict_proba(s_ev)[:, 1])
    assert between.max() < 0.01


def test_proposition3_platt_is_invariant_inside_its_class_and_beta_only_approximately(scores):
    s, y, s_ev, y_ev = scores
    # h(s) = sigma(a logit s + b), a > 0: the Platt class is closed under h, so the attained risk is the same.
    h = lambda v: expit(1.5 * logit(v) - 0.5)  # noqa: E731
    clean = _nll(PlattCalibrator(score_input="probability").fit(s, y).predict_proba(s)[:, 1], y)
    moved = _nll(PlattCalibrator(score_input="probability").fit(h(s), y).predict_proba(h(s))[:, 1], y)
    assert moved == pytest.approx(clean, abs=1e-9)
    # s -> s^3 leaves the beta family only approximately unchanged (not a reparametrisation of its class).
    beta = BetaCalibration(penalty=0.0, score_input="probability")
    nll_beta = _nll(beta.fit(s, y).predict_proba(s_ev)[:, 1], y_ev)
    nll_cubed = _nll(
        BetaCalibration(penalty=0.0, score_input="probability").fit(s**3, y).predict_proba(s_ev**3)[:, 1], y_ev
    )
    assert abs(nll_cubed - nll_beta) < 0.01
    # A non-monotone distortion (shuffling the scores) destroys the information: no calibrator recovers it.
    shuffled = np.random.default_rng(0).permutation(s.size)
    nll_shuffled = _nll(
        IsotonicCalibrator(score_input="probability").fit(s[shuffled], y).predict_proba(s_ev)[:, 1], y_ev
    )
    assert nll_shuffled > nll_beta + 0.05
