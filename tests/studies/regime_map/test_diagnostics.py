"""Risk bookkeeping, exact table pressure and the proxy score against independent references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from judgecal_dist.config import EngineConfig
from judgecal_dist.io.growth import draw_growth_outputs
from judgecal_dist.methods.fcps.scalar_families import make_family
from judgecal_dist.methods.fcps.select import Cells, fit_family, prefix_cells
from judgecal_dist.studies.regime_map import study as regime_map
from judgecal_dist.studies.regime_map.diagnostics import (
    Population,
    balanced_support_bound,
    decompose,
    estimation_pressure,
    growth_population,
    parametric_bound,
    table_pressure,
)
from judgecal_dist.studies.regime_map.proxy import auc, proxy_score, within_cell_permutation_p

OPTIONS = {"alpha": 1.0, "fallback": "global", "ridge_lam": 1.0, "C": 1.0}


def _tiny_law(seed: int = 0) -> Population:
    """Three judges with codes 0..3, a random pattern law and a random target."""
    rng = np.random.default_rng(seed)
    codes = np.array(list(itertools.product(range(4), repeat=3)))
    p = rng.dirichlet(np.full(len(codes), 0.7))
    return Population(codes, p, rng.uniform(0.05, 0.95, len(codes)))


def _draw(law: Population, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    rows = rng.choice(len(law.codes), size=n, p=law.p)
    return law.codes[rows], (rng.random(n) < law.eta[rows]).astype(float)


def _brute_risk(law: Population, prefix: list[int], predict) -> float:
    """E over every full pattern and both labels of (f(prefix) - Y)^2, row by row."""
    total = 0.0
    for x, p, eta in zip(law.codes, law.p, law.eta, strict=True):
        f = float(np.clip(predict(x[prefix][None, :])[0], 0.0, 1.0))
        total += p * (eta * (1.0 - f) ** 2 + (1.0 - eta) * f**2)
    return total


@pytest.mark.parametrize("family", ["table", "ridge_iso", "logistic"])
def test_bookkeeping_parts_add_up_and_match_brute_force(family):
    law, prefix = _tiny_law(), [2, 0]
    rng = np.random.default_rng(1)
    cal = Cells.from_rows(*_draw(law, 60, rng))
    codes, n, s, _ = prefix_cells(cal, np.array(prefix))
    model = fit_family(family, codes, n, s, OPTIONS)
    parts = decompose(model, family, law.prefix(prefix), OPTIONS)
    assert parts["information"] + parts["approximation"] + parts["calibration"] == pytest.approx(parts["total"])
    assert parts["total"] == pytest.approx(_brute_risk(law, prefix, model.predict), abs=1e-12)
    # The prefix's Bayes rule by explicit grouping of the full patterns.
    groups: dict[tuple, list[float]] = {}
    for x, p, eta in zip(law.codes, law.p, law.eta, strict=True):
        mass = groups.setdefault(tuple(x[prefix]), [0.0, 0.0])
        mass[0], mass[1] = mass[0] + p, mass[1] + p * eta
    bayes = {key: m1 / m0 for key, (m0, m1) in groups.items()}
    assert parts["information"] == pytest.approx(
        _brute_risk(law, prefix, lambda z: np.array([bayes[tuple(z[0])]])), abs=1e-12
    )
    if family == "table":
        assert parts["approximation"] == 0.0
    else:  # the family's best member: fitted on a million rows drawn from the law, row by row
        x, y = _draw(law, 400_000, np.random.default_rng(2))
        best = make_family(family).fit(x[:, prefix], y)
        gap = _brute_risk(law, prefix, best.predict) - parts["information"]
        assert parts["approximation"] == pytest.approx(gap, abs=2e-4)
        assert parts["approximation"] > 1e-3  # a real gap: the target is not additive


def test_exact_table_pressure_hand_case_and_simulation():
    law = Population(np.array([[0], [1]]), np.array([0.5, 0.5]), np.array([0.2, 0.8]))
    # Hand: each cell is unseen half the time (0.3^2) or seen once (0.16 / 4 + 0.3^2 / 4).
    assert table_pressure(law, 1, 1.0) == pytest.approx(0.5 * 0.09 + 0.5 * (0.04 + 0.0225), abs=1e-15)
    assert table_pressure(law, 1, 0.0) == pytest.approx(0.5 * 0.09 + 0.5 * 0.16, abs=1e-15)
    tiny = _tiny_law(3).prefix([0, 1])
    rng = np.random.default_rng(4)
    mean_y = float((tiny.p * tiny.eta).sum())
    for budget, alpha in ((5, 1.0), (40, 0.0), (40, 3.0)):
        # The estimator the formula describes: cell counts and label sums drawn, smoothing toward E[Y].
        n = rng.multinomial(budget, tiny.p, size=20_000)
        s = rng.binomial(n, tiny.eta)
        with np.errstate(invalid="ignore", divide="ignore"):
            est = np.where(n > 0, (s + alpha * mean_y) / (n + alpha), mean_y)
        risk = ((est - tiny.eta) ** 2 * tiny.p).sum(axis=1)
        se = risk.std(ddof=1) / math.sqrt(len(risk))
        assert abs(table_pressure(tiny, budget, alpha) - risk.mean()) < 4 * se


def test_family_pressure_is_the_mean_excess_of_refits():
    law = _tiny_law(5).prefix([1, 2])
    mean, se = estimation_pressure("table", law, 30, 40, np.random.default_rng(6), OPTIONS)
    assert 0 < se < mean  # the fitted table pays a clear estimation cost at 30 rows over 16 cells
    assert abs(mean - table_pressure(law, 30, 1.0)) < 0.5 * mean  # the formula's E[Y] vs the fitted mean: close


def test_correlated_generator_law_matches_its_draws():
    config = regime_map.Config(data="synthetic:additive", growth_gamma=0.4)
    law = growth_population(config)
    draws = draw_growth_outputs(200_000, np.random.default_rng(7), gamma=0.4)
    keys, powers = draws @ (2 ** np.arange(7)), 2 ** np.arange(7)
    freq = np.bincount(keys, minlength=128)[law.codes @ powers] / len(draws)
    assert np.abs(freq - law.p).max() < 5 * math.sqrt(law.p.max() / 200_000)
    assert law.p.sum() == pytest.approx(1.0)


def test_auc_and_permutation_p_against_sklearn_and_enumeration():
    rng = np.random.default_rng(8)
    score = rng.integers(0, 5, 40).astype(float)  # many ties
    event = rng.random(40) < 0.4
    assert auc(score, event) == pytest.approx(roc_auc_score(event, score), abs=1e-12)
    score, event = score[:7], np.array([1, 0, 1, 0, 0, 1, 0], dtype=bool)
    cells = np.array([0, 0, 0, 0, 1, 1, 1])
    observed = roc_auc_score(event, score)
    # Brute force: every permutation of the outcomes inside each cell (duplicates included).
    stats = [
        roc_auc_score(np.concatenate([a, b]), score)
        for a in itertools.permutations(event[:4])
        for b in itertools.permutations(event[4:])
    ]
    brute = float(np.mean(np.asarray(stats) >= observed - 1e-12))
    p, exact = within_cell_permutation_p(score, event, cells, 100, rng)
    assert exact and p == pytest.approx(brute, abs=1e-12)
    p_mc, exact = within_cell_permutation_p(score, event, cells, 5, np.random.default_rng(9))
    assert not exact  # 6 x 3 = 18 arrangements > 5 draws: Monte Carlo
    draws = 4000
    p_mc, exact = within_cell_permutation_p(score, event, cells, draws, np.random.default_rng(9))
    assert exact  # 18 <= 4000: enumerated; the Monte Carlo path is checked on a larger case
    score2, event2, cells2 = rng.normal(size=24), rng.random(24) < 0.5, np.repeat([0, 1, 2], 8)
    p_exact, exact = within_cell_permutation_p(score2, event2, cells2, 10**7, rng)
    assert exact
    p_mc, exact = within_cell_permutation_p(score2, event2, cells2, draws, rng)
    assert not exact and abs(p_mc - p_exact) < 4 * math.sqrt(p_exact * (1 - p_exact) / draws) + 2 / draws


def test_proxy_score_on_hand_made_units():
    rng = np.random.default_rng(10)
    rows = []
    for seed, budget in itertools.product(range(6), (20, 50)):
        table_mse, scalar_mse = rng.uniform(0.1, 0.3, 2)
        common = {"seed": seed, "budget": budget, "path": "p", "k": 2}
        support, unseen = rng.uniform(2, 20), rng.uniform(0, 0.5)
        diag = {"effective_support": support, "val_unseen_rate": unseen}
        rows.append(common | diag | {"family": "table", "val_mse": 0.2, "test_mse": table_mse, "selected_table": True})
        rows.append(common | diag | {"family": "ridge_iso", "val_mse": rng.uniform(0.1, 0.3), "test_mse": scalar_mse})
        rows[-1]["selected_scalar"] = True
        rows.append(common | diag | {"family": "ridge_pair_iso", "val_mse": rng.uniform(0.1, 0.3), "test_mse": 1.0})
    parts = pd.DataFrame(rows)
    parts["selected_table"] = parts["selected_table"].eq(True)
    parts["selected_scalar"] = parts["selected_scalar"].eq(True)
    out = proxy_score(parts, 200, 500, rng)
    units = parts.groupby(["seed", "budget"])
    support = units["effective_support"].first() / units["budget"].first()
    unseen = units["val_unseen_rate"].first()
    gain = units["val_mse"].nth(1).to_numpy() - units["val_mse"].nth(2).to_numpy()
    wins = units["test_mse"].nth(1).to_numpy() < units["test_mse"].nth(0).to_numpy()
    support, unseen = support.to_numpy(), unseen.to_numpy()

    def z(v):
        return (v - v.mean()) / v.std(ddof=0)

    q = z(support) + z(unseen) - z(gain)
    assert out["auc"] == pytest.approx(roc_auc_score(wins, q), abs=1e-12)
    assert out["gap"] == pytest.approx(q[wins].mean() - q[~wins].mean(), abs=1e-12)
    assert out["auc_ci"][0] <= out["auc"] <= out["auc_ci"][1] and out["cells"] == 2


def test_synthetic_study_reports_bookkeeping_and_boundary():
    config = regime_map.Config(
        data="synthetic:parity",
        replicates=2,
        budgets=(30, 300),
        families=("mean_iso", "ridge_iso"),
        main_families=("mean_iso", "ridge_iso"),
        hybrid_taus=(),
        jury=False,
        fallbacks=(),
        boundary_reps=4,
        proxy_bootstrap=50,
        proxy_permutations=200,
    )
    data = regime_map.load(config, EngineConfig())
    parts = pd.concat([regime_map.run_replicate(data, rep) for rep in regime_map.plan(config, data)])
    chosen = parts[parts["selected_union"]]
    # The exact risk and its 20 000-row test estimate agree (test MSE SE ~ 0.003).
    assert np.abs(chosen["risk_total"] - chosen["test_mse"]).max() < 0.015
    result = regime_map.summarise(config, parts, data)
    diag = result.extra["diagnostics"]
    assert {r["family"] for r in diag["boundary"]} == {"mean_iso", "ridge_iso"}
    # Parity: no additive family approaches the target, so the boundary predicts the table at 300 labels.
    assert all(r["predicted"] == "table" for r in diag["boundary"] if r["budget"] == 300)
    assert "## Risk bookkeeping" in result.report and "## Regime boundary" in result.report


def test_balanced_support_bound_holds_and_follows_from_the_cell_bound():
    cells, kappa, delta, alpha = 8, 1.0, 0.1, 1.0
    budget = math.ceil(8 * kappa * cells * math.log(2 * cells / delta))
    bound = balanced_support_bound(cells, kappa, budget, delta, alpha)
    assert balanced_support_bound(cells, kappa, budget - 1, delta, alpha) is None  # below its valid budget
    # The closed form is the per-cell bound (Hoeffding at delta/2 + smoothing bias) squared at the smallest count the
    # Chernoff event allows, n = B / (2 kappa M), after (a + b)^2 <= 2a^2 + 2b^2.
    n = budget / (2 * kappa * cells)
    cell = (math.sqrt(math.log(2 * cells / (delta / 2)) / (2 * n)) + alpha / (n + alpha)) ** 2
    assert cell <= bound == pytest.approx(2 * math.log(4 * cells / delta) / (2 * n) + 2 * (alpha / n) ** 2)
    # Simulated: a balanced law's table (as fitted) stays under the bound with probability >= 1 - delta, and every
    # cell reaches half its expected count far more often than 1 - delta / 2.
    rng = np.random.default_rng(11)
    law = Population(np.arange(cells)[:, None], np.full(cells, 1 / cells), rng.uniform(0.1, 0.9, cells))
    counts = rng.multinomial(budget, law.p, size=4000)
    sums = rng.binomial(counts, law.eta)
    ybar = sums.sum(axis=1, keepdims=True) / budget
    risk = ((((sums + alpha * ybar) / (counts + alpha)) - law.eta) ** 2 * law.p).sum(axis=1)
    assert np.quantile(risk, 1 - delta) <= bound
    assert (counts.min(axis=1) < budget / (2 * kappa * cells)).mean() <= delta / 2
    # The matching lower scale: the exact table pressure is sigma^2 M / B to first order in 1 / B.
    big = 200 * cells
    ratio = table_pressure(law, big, alpha) * big / (cells * law.bayes_risk)
    assert ratio == pytest.approx(1.0, abs=0.02)


def test_parametric_bound_covers_the_simulated_stacker_cost():
    # The Monte Carlo cost of ridge stacking at B rows never exceeds the Rademacher scale (with room to spare).
    law = _tiny_law(12).prefix([0, 1])
    mean, se = estimation_pressure("ridge_iso", law, 200, 20, np.random.default_rng(13), OPTIONS)
    assert mean + 4 * se < parametric_bound(dim=3, norm=1.0, budget=200, delta=0.05)
    assert parametric_bound(3, 1.0, 200, 0.05) == pytest.approx(
        4 * 2 * math.sqrt(3) / math.sqrt(200) + 2 * math.sqrt(math.log(40) / 400)
    )
