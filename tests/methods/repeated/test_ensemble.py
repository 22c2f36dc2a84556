"""Ensemble scoring and escalation (spec 004 §3) against brute-force loops and hand-worked cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from judgecal_dist.errors import InputError
from judgecal_dist.methods.repeated.ensemble import (
    Outcome,
    agreement_curve,
    bootstrap_accuracy,
    dispersion,
    ensemble_curve,
    example_cost,
    prefix_means,
    winner_outcome,
)
from judgecal_dist.methods.repeated.routing import (
    HardVarianceRouting,
    SoftBlend,
    VarianceInformedEnsemble,
    hard_route,
    pareto_frontier,
    routing_thresholds,
    samples_per_response,
    stratified_split,
)


@pytest.fixture(scope="module")
def tensors() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """60 examples x 4 responses x 8 samples of integer scores 1..10 with 8% nulls; a correlated cheap tier."""
    rng = np.random.default_rng(7)
    quality = rng.normal(0, 1, (60, 4))
    quality[:, 0] += 0.8
    full = np.clip(np.rint(6 + 1.5 * quality[:, :, None] + rng.normal(0, 1.0, (60, 4, 8))), 1, 10)
    cheap = np.clip(np.rint(6 + 1.2 * quality[:, :, None] + rng.normal(0, 1.4, (60, 4, 8))), 1, 10)
    full[rng.random(full.shape) < 0.08] = np.nan
    cheap[rng.random(cheap.shape) < 0.08] = np.nan
    return full, cheap, rng.choice(["a", "b", "c"], 60)


def _loop_means(scores: np.ndarray, k) -> np.ndarray:
    out = np.full(scores.shape[:2], np.nan)
    for e in range(scores.shape[0]):
        for i in range(scores.shape[1]):
            kk = k if np.ndim(k) == 0 else k[e, i]
            vals = [v for v in scores[e, i, :kk] if not np.isnan(v)]
            if vals:
                out[e, i] = sum(vals) / len(vals)
    return out


def _loop_outcome(means: np.ndarray) -> tuple[list[bool], list[bool], list[bool]]:
    ev, co, ti = [], [], []
    for row in means.tolist():
        ok = not any(np.isnan(row))
        ev.append(ok)
        co.append(ok and all(row[0] > v for v in row[1:]))
        ti.append(ok and row.count(max(row)) > 1)
    return ev, co, ti


def test_prefix_means_outcomes_and_dispersion_equal_loops(tensors):
    full, _, _ = tensors
    for k in (1, 3, 8):
        means = prefix_means(full, k)
        assert np.array_equal(means, _loop_means(full, k), equal_nan=True)
        out = winner_outcome(means)
        assert [list(out.evaluable), list(out.correct), list(out.tied)] == [*map(list, _loop_outcome(means))]
    lengths = np.random.default_rng(1).integers(1, 9, full.shape[:2])
    assert np.array_equal(prefix_means(full, lengths), _loop_means(full, lengths), equal_nan=True)
    sigma = dispersion(full)
    for e, i in [(0, 0), (5, 2), (59, 3)]:
        vals = full[e, i][~np.isnan(full[e, i])]
        assert sigma[e, i] == pytest.approx(np.std(vals) if len(vals) >= 2 else 0.0)
    curve = ensemble_curve(full)
    assert curve["k"].tolist() == list(range(1, 9)) and (curve["rows"] == 60).all()


def test_strict_winner_rule_counts_a_top_tie_as_wrong():
    out = winner_outcome([[7.0, 7.0, 2.0, 1.0], [7.5, 7.0, 7.0, 1.0], [3.0, 5.0, np.nan, 1.0]], chosen=[0, 0, 1])
    assert out.correct.tolist() == [False, True, False] and out.tied.tolist() == [True, False, False]
    assert out.evaluable.tolist() == [True, True, False]
    with pytest.raises(InputError, match="chosen: indices outside"):
        winner_outcome([[1.0, 2.0]], chosen=[2])


def test_cost_formula_charges_input_once():
    # Spec 004 §2.4: input once per call, output x k/8; 1000 in, 8000 out at full prices.
    assert example_cost([1000], [8000], k=1, n_collected=8, price_in=2.5, price_out=15.0)[0] == pytest.approx(0.0175)
    assert example_cost([1000], [8000], k=8, n_collected=8, price_in=2.5, price_out=15.0)[0] == pytest.approx(0.1225)


def test_bootstrap_equals_a_resample_loop(tensors):
    full, _, strata = tensors
    out = winner_outcome(prefix_means(full, 1))
    got = bootstrap_accuracy(out, strata, n_resamples=300, random_state=42).set_index("stratum")
    # Reference: the paper's loop -- one RandomState(42), resample b = next randint(0, N, size=N).
    rng = np.random.RandomState(42)
    values = {s: [] for s in ["all", "a", "b", "c"]}
    for _ in range(300):
        idx = rng.randint(0, len(strata), size=len(strata))
        ev, co, st = out.evaluable[idx], out.correct[idx], strata[idx]
        values["all"].append(co[ev].mean())
        for s in "abc":
            values[s].append(co[ev & (st == s)].mean())
    for s, vals in values.items():
        low, high = np.percentile(vals, [2.5, 97.5])
        assert got.loc[s, "ci_low"] == pytest.approx(low, abs=1e-12)
        assert got.loc[s, "ci_high"] == pytest.approx(high, abs=1e-12)
        assert got.loc[s, "half_width"] == pytest.approx((high - low) / 2, abs=1e-12)


def test_agreement_curve_equals_per_row_spearman(tensors):
    full, cheap, _ = tensors
    reference = prefix_means(full, 8)
    got = agreement_curve(cheap, reference, ks=[1, 8]).set_index("k")
    for k in (1, 8):
        agree, rhos = [], []
        for e in range(len(full)):
            ref, ch = reference[e], prefix_means(cheap[e : e + 1], k)[0]
            if np.isnan(ref).any() or np.isnan(ch).any():
                continue
            rw = int(np.argmax(ref)) if (ref == ref.max()).sum() == 1 else -1
            cw = int(np.argmax(ch)) if (ch == ch.max()).sum() == 1 else -1
            agree.append(cw == rw and cw != -1)
            if np.ptp(ch) > 0 and np.ptp(ref) > 0:
                rhos.append(spearmanr(ch, ref).statistic)
        assert got.loc[k, "agreement"] == pytest.approx(np.mean(agree))
        assert got.loc[k, "spearman"] == pytest.approx(np.mean(rhos))
        assert got.loc[k, "rho_rows"] == len(rhos)


def test_hard_routing_sweep_and_frontier_against_loops(tensors):
    full, cheap, _ = tensors
    routing = HardVarianceRouting().fit(cheap, full, cost_cheap=1.0, cost_full=3.0)
    sigma, c_mean, f_mean = dispersion(cheap), prefix_means(cheap, 8), prefix_means(full, 8)
    deciles = np.percentile(sigma.ravel(), [10, 20, 30, 40, 50, 60, 70, 80, 90])
    assert routing.sweep_["theta"].tolist() == sorted(set(deciles.tolist()) | {i * 0.1 for i in range(21)})
    for row in routing.sweep_.itertuples():
        esc = (sigma >= row.theta) & ~np.isnan(f_mean)
        out = winner_outcome(np.where(esc, f_mean, c_mean))
        assert row.accuracy == out.correct.sum() / out.evaluable.sum()
        assert row.p_escalate == esc.mean() and row.cost == pytest.approx(1.0 + 3.0 * esc.mean())
    front = routing.frontier_
    assert (np.diff(front["cost"]) >= 0).all() and (np.diff(front["accuracy"]) > 0).all()
    points = routing.sweep_
    for row in points.itertuples():  # every swept point is dominated by (or on) the frontier
        cheaper = front[front["cost"] <= row.cost]
        assert len(cheaper) and cheaper["accuracy"].max() >= row.accuracy
    assert hard_route([[5.0]], [[np.nan]], [[9.0]], 0.0)[0].tolist() == [[5.0]]


def test_pareto_tie_breaking_keeps_the_first_of_equal_points():
    pts = pd.DataFrame({"theta": [0.1, 0.2, 0.3], "cost": [2.0, 2.0, 1.0], "accuracy": [0.8, 0.8, 0.7]})
    assert pareto_frontier(pts)["theta"].tolist() == [0.3, 0.1]
    assert routing_thresholds([0.0, 1.0], grid=()).tolist() == pytest.approx(np.linspace(0.1, 0.9, 9).tolist())


def test_soft_blend_takes_the_first_strict_improvement(tensors):
    full, cheap, _ = tensors
    blend = SoftBlend().fit(cheap, full)
    sigma = dispersion(cheap)
    best, best_m = 0.0, 0.0
    for m in sorted(set(sigma.ravel().tolist())):
        w = 1 / (1 + np.exp(-10 * (sigma - m)))
        c, f = prefix_means(cheap, 8), prefix_means(full, 8)
        s = np.where(np.isnan(f), c, np.where(np.isnan(c), f, (1 - w) * c + w * f))
        out = winner_outcome(s)
        acc = out.correct.sum() / out.evaluable.sum()
        if acc > best:
            best, best_m = acc, m
    assert (blend.midpoint_, blend.train_accuracy_) == (best_m, best)
    assert blend.score(cheap, full) == pytest.approx(best)


def test_variance_informed_rule_and_budget(tensors):
    # n_i: 1 at or below sigma1, n_max at or above sigma2, round-half-even in between (spec 004 §3.10).
    assert samples_per_response([0.5, 0.6, 0.75, 0.9, 1.0], 0.5, 1.0, 8).tolist() == [1, 2, 4, 7, 8]
    assert samples_per_response([0.25], 0.0, 1.0, 3).tolist() == [2]  # 1.5 -> 2 (half to even)
    assert samples_per_response([0.75], 0.0, 1.0, 3).tolist() == [2]  # 2.5 -> 2 (half to even)
    full, cheap, _ = tensors
    model = VarianceInformedEnsemble(budget=4.0, percentiles=[0, 50, 95], grid=[0.0, 0.5, 1.0, 2.0]).fit(cheap, full)
    sigma = dispersion(cheap)
    best = (0.0, None)
    grid = np.unique(np.concatenate([np.percentile(sigma.ravel(), [0, 50, 95]), [0.0, 0.5, 1.0, 2.0]]))
    for i, s1 in enumerate(grid):
        for s2 in grid[i + 1 :]:
            n = samples_per_response(sigma, s1, s2, 8)
            out = winner_outcome(prefix_means(full, n))
            acc = out.correct.sum() / out.evaluable.sum()
            if n.mean() <= 4.0 and acc > best[0]:
                best = (acc, (s1, s2))
    assert (model.train_accuracy_, (model.sigma1_, model.sigma2_)) == best
    assert best[1] is not None and model.train_budget_ <= 4.0


def test_stratified_split_is_the_paper_procedure():
    strata = np.array(["b"] * 7 + ["a"] * 11 + ["c"] * 3)
    test = stratified_split(strata, test_fraction=0.2, random_state=42)
    rng = np.random.RandomState(42)
    expected = np.zeros(len(strata), bool)
    for name in ("a", "b", "c"):
        rows = np.flatnonzero(strata == name).tolist()
        rng.shuffle(rows)
        expected[rows[: max(1, int(0.2 * len(rows)))]] = True
    assert (test == expected).all() and test.sum() == 2 + 1 + 1


def test_bootstrap_of_a_constant_outcome_has_zero_width():
    out = Outcome(np.ones(5, bool), np.ones(5, bool), np.zeros(5, bool))
    assert bootstrap_accuracy(out, n_resamples=50)["half_width"].tolist() == [0.0]
