"""The regime map's further menus and tables against independent references (spec 002 §3.4, §3.6, §4.4, §5.6, §5.7)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from sklearn.metrics import log_loss

from judgecal_dist.config import EngineConfig
from judgecal_dist.methods.fcps.joint_table import HybridResidualShrinkage, JointTableCalibrator
from judgecal_dist.methods.fcps.scalar_families import make_family
from judgecal_dist.methods.fcps.select import Cells, agreement, evaluate_candidates
from judgecal_dist.studies.regime_map import study as regime_map
from judgecal_dist.studies.regime_map.extended import _comparators, binomial_upper_tail, pressure_association


def _blocks(seed: int = 0, m: int = 4) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 2, n)
        right = rng.random((n, m)) < np.linspace(0.55, 0.85, m)
        codes = np.where(right, y[:, None], 1 - y[:, None])
        codes[rng.random((n, m)) < 0.1] = 2  # ties
        return codes, y

    return draw(80), draw(300), draw(400)


@pytest.mark.parametrize("base", ["logistic", "ridge_iso"])
def test_hybrid_rows_equal_the_hybrid_estimator(base):
    (cx, cy), (vx, vy), (tx, ty) = _blocks()
    cal, val, test = Cells.from_rows(cx, cy), Cells.from_rows(vx, vy), Cells.from_rows(tx, ty)
    taus = (0.5, 5.0, 100.0)
    path = np.array([2, 0, 3, 1])
    frame = evaluate_candidates(
        {"information_first": path}, cal, val, test, families=(base, "hybrid"), hybrid_taus=taus
    )
    for k in (1, 3, 4):
        for tau in taus:
            row = frame[(frame["family"] == "hybrid") & (frame["k"] == k) & (frame["tau"] == tau)].iloc[0]
            model = HybridResidualShrinkage(make_family(base), tau=tau).fit(cx[:, path[:k]], cy)
            p = model.predict(tx[:, path[:k]])
            assert row["base"] == base
            assert row["test_mse"] == pytest.approx(np.mean((p - ty) ** 2), abs=1e-10)
            accuracy = np.where(p == 0.5, 0.5, (p > 0.5) == (ty == 1)).mean()
            assert row["test_accuracy"] == pytest.approx(accuracy, abs=1e-12)
            assert row["test_pearson"] == pytest.approx(np.corrcoef(p, ty)[0, 1], abs=1e-10)
            assert row["test_spearman"] == pytest.approx(sps.spearmanr(p, ty).statistic, abs=1e-10)
            assert row["val_nll"] == pytest.approx(
                log_loss(vy, np.clip(model.predict(vx[:, path[:k]]), 1e-3, 1 - 1e-3)), abs=1e-10
            )


def test_cell_metrics_equal_row_level_references():
    (_, _), (_, _), (tx, ty) = _blocks(1)
    p_rows = JointTableCalibrator(fallback="lower_prefix").fit(tx[:200], ty[:200]).predict(tx)
    cells = Cells.from_rows(tx, ty)
    p = JointTableCalibrator(fallback="lower_prefix").fit(tx[:200], ty[:200]).predict(cells.codes)
    accuracy, pearson, spearman = agreement(cells, p)
    expected = np.where(p_rows == 0.5, 0.5, (p_rows > 0.5) == (ty == 1)).mean()
    assert accuracy == pytest.approx(expected, abs=1e-12)
    assert pearson == pytest.approx(sps.pearsonr(p_rows, ty)[0], abs=1e-10)
    assert spearman == pytest.approx(sps.spearmanr(p_rows, ty)[0], abs=1e-10)
    assert cells.nll(p) == pytest.approx(log_loss(ty, np.clip(p_rows, 1e-3, 1 - 1e-3)), abs=1e-12)


def test_jury_never_reads_the_calibration_labels():
    (cx, cy), (vx, vy), (tx, ty) = _blocks(2)
    path = {"information_first": np.arange(4)}
    val, test = Cells.from_rows(vx, vy), Cells.from_rows(tx, ty)
    one = evaluate_candidates(path, Cells.from_rows(cx, cy), val, test, families=("jury",))
    other = evaluate_candidates(path, Cells.from_rows(cx, 1 - cy), val, test, families=("jury",))
    pd.testing.assert_frame_equal(one, other)
    # Better than a coin from two judges on (one judge alone does not identify the classes).
    assert (one["test_mse"].iloc[1:] < 0.25).all()


@pytest.mark.parametrize(("k", "n"), [(16, 20), (5, 5), (0, 7), (9, 30), (3, 3)])
def test_exact_binomial_tail_equals_scipy(k, n):
    assert binomial_upper_tail(k, n) == pytest.approx(sps.binomtest(k, n, 0.5, alternative="greater").pvalue, abs=1e-14)
    assert binomial_upper_tail(k, n, 0.3) == pytest.approx(sps.binomtest(k, n, 0.3, alternative="greater").pvalue)


def test_pressure_association_equals_a_fixed_effects_regression():
    rng = np.random.default_rng(3)
    rows = []
    for budget in (20, 50, 100):
        for seed in range(6):
            for path in ("information_first", "random"):
                for k in range(1, 6):
                    support = rng.random() * k / budget * 50
                    rows.append(
                        {"seed": seed, "budget": budget, "path": path, "k": k, "family": "table"}
                        | {"effective_support": support * budget, "unseen_rate": rng.random() * 0.3}
                        | {"test_mse": 0.1 + 0.2 * support + 0.05 * rng.random() + budget / 1000}
                    )
    parts = pd.DataFrame(rows)
    out = pressure_association(parts)
    # Frisch-Waugh: the residuals of OLS on budget dummies, correlated.
    dummies = pd.get_dummies(parts["budget"]).to_numpy(dtype=float)

    def resid(v: np.ndarray) -> np.ndarray:
        return v - dummies @ np.linalg.lstsq(dummies, v, rcond=None)[0]

    r = np.corrcoef(resid(parts["effective_support"] / parts["budget"]), resid(parts["test_mse"].to_numpy()))[0, 1]
    assert out["support"]["r"] == pytest.approx(r, abs=1e-12)
    assert out["support"]["se"] == pytest.approx((1 - r * r) / np.sqrt(len(parts)))
    groups = [
        sps.pearsonr(g["effective_support"] / g["budget"], g["test_mse"])[0]
        for _, g in parts.groupby(["budget", "path"])
    ]
    assert out["groups"]["count"] == 6 and out["groups"]["mean_r"] == pytest.approx(np.mean(groups))


def test_best_single_judge_and_envelopes_equal_brute_force():
    (cx, cy), (vx, vy), (tx, ty) = _blocks(4)
    cal, val, test = Cells.from_rows(cx, cy), Cells.from_rows(vx, vy), Cells.from_rows(tx, ty)
    paths = {"information_first": np.array([3, 2, 1, 0]), "random": np.array([1, 3, 0, 2])}
    frame = evaluate_candidates(paths, cal, val, test, families=("table",)).assign(seed=0, budget=80)
    singles = evaluate_candidates({f"single:{j}": np.array([j]) for j in range(4)}, cal, val, test, families=("table",))
    named = _comparators(frame, singles.assign(seed=0, budget=80))

    def mse(x: np.ndarray, cols: list[int]) -> float:
        model = JointTableCalibrator().fit(cx[:, cols], cy)
        return float(np.mean((model.predict(x[:, cols]) - (vy if x is vx else ty)) ** 2))

    best = min(range(4), key=lambda j: mse(vx, [j]))
    assert named["best single judge (val.)"]["test_mse"].iloc[0] == pytest.approx(mse(tx, [best]))
    assert named["all 4 judges"]["test_mse"].iloc[0] == pytest.approx(mse(tx, [0, 1, 2, 3]))
    prefixes = [list(p[:k]) for p in paths.values() for k in range(1, 5)]
    oracle = min(mse(tx, c) for c in prefixes)
    assert named["test oracle envelope (not a method)"]["test_mse"].iloc[0] == pytest.approx(oracle)
    chosen = min(prefixes, key=lambda c: (mse(vx, c), len(c)))
    assert named["path-family envelope"]["test_mse"].iloc[0] == pytest.approx(mse(tx, chosen))


def test_study_reports_every_further_menu_and_table():
    config = regime_map.Config(
        data="synthetic:parity", replicates=2, budgets=(64, 256), synthetic_test_rows=2000, hybrid_taus=(1.0, 10.0)
    )
    data = regime_map.load(config, EngineConfig())
    parts = pd.concat([regime_map.run_replicate(data, r) for r in regime_map.plan(config, data)])
    result = regime_map.summarise(config, parts, data)
    for menu in ("scalar_main", "full", "table_lower_prefix", "table_hierarchical", "hybrid", "jury", "scalar_nll"):
        assert parts.groupby(["seed", "budget"])[f"selected_{menu}"].sum().eq(1).all()
        assert f"| {menu} | 64 |" in result.report
    for heading in ("Named comparators", "(path, k) validated", "exact binomial", "Pressure-risk association"):
        assert heading in result.report
    assert {"pressure_risk.png", "marginal_stopping.png"} <= set(result.figures)
    assert result.extra["hard_rule"]["p_value"] == pytest.approx(
        sps.binomtest(result.extra["hard_rule"]["agreement"], 2, alternative="greater").pvalue
    )
    # Parity: the table family beats every additive scalar menu (the unseen pattern mass is small at B = 256).
    menus = {(r["menu"], r["budget"]): r["test_mse"] for r in result.extra["menus"]}
    assert menus[("table_lower_prefix", 256)] < menus[("scalar", 256)]
