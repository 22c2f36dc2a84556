"""The continuous study's paper items on small in-memory data: baselines, KL crossover, predictive intervals,
per-rubric flows, the saturation projection and the full / reduced plans, each against an independent reference."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate
from scipy.optimize import brentq
from scipy.stats import halfnorm, norm

from judgecal_dist.methods.continuous.saturation import conditional_mean_headroom
from judgecal_dist.studies.continuous import report
from judgecal_dist.studies.continuous import study as continuous
from judgecal_dist.studies.runner import _study_values, _validated


def _input(n_groups: int = 40, seed: int = 0) -> continuous.ContinuousInput:
    """Two rubrics of prompt groups (4 items each) with a real-valued judge and a human score."""
    rng = np.random.default_rng(seed)
    rows = []
    for rubric, shift in (("A", 0.6), ("B", -0.4)):
        for g in range(n_groups):
            for r in range(4):
                y = float(rng.uniform(1.5, 4.5))
                j = y - shift + 0.3 * rng.standard_normal()
                rows.append((rubric, f"x/{rubric}/{g}/{r}", f"{rubric}/{g}", "cheap", j, y))
    scores = pd.DataFrame(rows, columns=["rubric", "item_id", "group_id", "judge_id", "j", "y"])
    return continuous.ContinuousInput(scores=scores, rubrics=("A", "B"), arms=("cheap",))


def _rep(kind: str, budget: int, seeds: tuple[int, ...], **settings) -> continuous.Replicate:
    config = continuous.Config(data="x", test_groups=10, budgets=(budget,), replicates=len(seeds), **settings)
    return continuous.Replicate(0, kind, "cheap", budget, seeds, config)


def test_ot_oracle_and_constant_baselines_match_their_formulas():
    data = _input()
    rows = pd.DataFrame(continuous._linear_rows(data, _rep("linear", 60, (0,), nuts_seeds=0), 0))
    frame = data.scores.reset_index(drop=True)
    test, pool = continuous.split(frame, 0, 10)
    for rubric in ("A", "B"):
        t = frame.iloc[test][frame.iloc[test]["rubric"] == rubric]
        anchors = frame.iloc[pool][frame.iloc[pool]["rubric"] == rubric].head(60)
        got = rows[(rows["rubric"] == rubric)].set_index("corrector")
        # ot_oracle maps the k-th smallest test judge score to the k-th smallest test human score (no ties here).
        oracle = np.sort(t["y"].to_numpy())[np.argsort(np.argsort(t["j"].to_numpy()))]
        np.testing.assert_allclose(got.loc["ot_oracle", "y_hat_items"], oracle, atol=1e-12)
        assert got.loc["ot_oracle", "kl"] == pytest.approx(0.0, abs=1e-12)  # same multiset: the shape floor
        assert got.loc["ot_oracle", "w1"] == pytest.approx(0.0, abs=1e-12)
        # constant = the anchors' mean; MAE is the mean absolute deviation around it, KL undefined (not a crash).
        level = anchors["y"].mean()
        assert got.loc["constant", "mae"] == pytest.approx(np.mean(np.abs(t["y"] - level)))
        assert got.loc["constant", "mean_error"] == pytest.approx(t["y"].mean() - level)
        assert np.isnan(got.loc["constant", "kl"]) and np.isnan(got.loc["constant", "pearson"])


def test_kl_crossover_is_read_like_the_mae_crossover():
    rng = np.random.default_rng(1)
    rows = []
    for budget, flow_kl in ((25, 0.08), (100, 0.05), (400, 0.02), (1500, 0.01)):
        for seed in range(20):
            hb = 0.05 + 0.002 * rng.standard_normal()
            for corrector, kl in (("linear_hb", hb), ("flow", flow_kl + 0.002 * rng.standard_normal())):
                rows.append(("j", "R", corrector, budget, seed, kl, 0.3, True))
    parts = pd.DataFrame(rows, columns=["judge", "rubric", "corrector", "budget", "seed", "kl", "mae", "converged"])
    config = continuous.Config(data="x", budgets=(25, 100, 400, 1500))
    (kl,) = report.crossover(config, parts, "kl")
    assert kl["metric"] == "kl" and kl["budget_or_none"] == 400  # 100 is a tie (mean difference 0)
    by = {d["budget"]: d for d in kl["delta_kl_by_budget"]}
    assert by[100]["ci_low"] < 0 < by[100]["ci_high"] and by[400]["ci_high"] < 0 < by[25]["ci_low"]
    (mae,) = report.crossover(config, parts, "mae")
    assert mae["budget_or_none"] is None  # equal MAE everywhere: never reached


def _grid_predictive_interval(j_anchor, y_anchor, j_star, level):
    """Brute-force posterior predictive quantiles on a 3-D (alpha, beta, sigma) grid under the spec priors."""
    a = np.linspace(-0.7, 1.7, 81)[:, None, None]  # about +-6 posterior s.d. around the truth (0.5, 0.8, 0.4)
    b = np.linspace(0.45, 1.15, 81)[None, :, None]
    s = np.linspace(0.15, 0.9, 60)[None, None, :]
    resid = y_anchor[:, None, None, None] - a - b * j_anchor[:, None, None, None]
    loglik = np.sum(norm.logpdf(resid, scale=s), axis=0)
    logp = loglik + norm.logpdf(a, 0, 2) + norm.logpdf(b, 1, 2) + halfnorm.logpdf(s, scale=1)
    w = np.exp(logp - logp.max())
    w /= w.sum()
    mu, sd = (a + b * j_star), s
    cdf = lambda x, q: float(np.sum(w * norm.cdf((x - mu) / sd))) - q  # noqa: E731
    tail = (1 - level) / 2
    return brentq(cdf, -5, 10, args=(tail,)), brentq(cdf, -5, 10, args=(1 - tail,))


def test_predictive_interval_matches_brute_force_and_covers():
    rng = np.random.default_rng(3)
    j = rng.uniform(1, 5, 30)
    y = 0.5 + 0.8 * j + 0.4 * rng.standard_normal(30)
    low, high = continuous.conjugate_interval(j, y, np.array([1.0, 3.0, 4.5]), 0.9)
    for i, js in enumerate((1.0, 3.0, 4.5)):
        ref = _grid_predictive_interval(j, y, js, 0.9)
        assert (low[i], high[i]) == pytest.approx(ref, abs=0.01)
    # Interpolating between 60 nodes when the scores are many stays on the exact quantiles.
    many = rng.uniform(1, 5, 500)
    lo_i, hi_i = continuous.conjugate_interval(j, y, many, 0.9)
    lo_x, hi_x = continuous.conjugate_interval(j, y, many, 0.9, nodes=10_000)
    assert np.max(np.abs(lo_i - lo_x)) < 2e-3 and np.max(np.abs(hi_i - hi_x)) < 2e-3
    # On a linear-Gaussian world the study's HB rows cover about as often as promised.
    data = _input(n_groups=60)
    rows = pd.DataFrame(continuous._linear_rows(data, _rep("linear", 150, (0,), nuts_seeds=0), 0))
    hb = rows[rows["corrector"] == "linear_hb"]
    assert hb["coverage"].between(0.85, 1.0).all() and hb["interval_width"].between(0.9, 1.5).all()
    assert continuous.interval_metrics(np.array([1.0, 2.0, 3.0]), np.full(3, 1.5), np.full(3, 3.0)) == {
        "coverage": pytest.approx(2 / 3),
        "interval_width": 1.5,
    }


def test_per_rubric_flows_beside_the_shared_flow():
    data = _input(n_groups=20)
    rep = _rep("flow", 40, (0, 1), flow_epochs=100, flow_passes=4, flow_rubrics=("shared", "per_rubric"))
    rows = pd.DataFrame(continuous._flow_rows(data, rep))
    assert set(rows["corrector"]) == {"flow", "flow_per_rubric"}
    assert len(rows) == 2 * 2 * 2 and (rows["n_anchors"] == 40).all()
    raw = {r: np.mean(np.abs(g["y"] - g["j"])) for r, g in data.scores.groupby("rubric")}
    # Rubric A's judge is 0.6 low, B's 0.4 high: one plain flow per rubric learns each shift on its own anchors.
    per = rows[rows["corrector"] == "flow_per_rubric"]
    assert all(m < 0.7 * raw[r] for r, m in zip(per["rubric"], per["mae"], strict=True))
    assert rows[["coverage", "interval_width", "mc_sd_mean"]].notna().all().all()


def test_saturation_projection_of_the_paper_tanh_matches_quadrature():
    g = lambda j: 0.4 * np.tanh(0.9 * (j - 3))  # noqa: E731
    b = integrate.quad(lambda j: g(j) * (j - 3), 1, 5)[0] / 4 / (16 / 12)  # Cov(g, j) / Var(j), j ~ U[1, 5]
    left = lambda j: g(j) - b * (j - 3)  # noqa: E731 - E g(j) = 0 by symmetry
    mean_abs = integrate.quad(lambda j: abs(left(j)), 1, 5, points=[3.0])[0] / 4
    out = report.paper_tanh_leftover()
    assert out["mean_abs"] == pytest.approx(mean_abs, abs=1e-6) and out["mean_abs"] == pytest.approx(0.040, abs=2e-3)
    assert out["range"] == pytest.approx(2 * abs(left(5.0)), abs=1e-4) and out["range"] == pytest.approx(0.18, abs=0.01)
    # Per-level conditional means against a hand groupby on a judge with three score levels.
    j = np.repeat([1.0, 3.0, 5.0], [10, 20, 10])
    y = np.where(j == 3.0, 3.5, j) + np.tile([-0.1, 0.1], 20)
    got = conditional_mean_headroom(j, y)
    assert got["conditional_mean_mae"] == pytest.approx(0.1)
    slope, icpt = np.polyfit(j, y, 1)
    assert got["linear_mae"] == pytest.approx(np.mean(np.abs(y - icpt - slope * j)))
    assert got["headroom_mae"] > 0 and got["levels"] == 3


@pytest.mark.parametrize(
    ("preset", "expected"), [("continuous_full", 3 * 7 * (5 + 45 + 50)), ("continuous_reduced", None)]
)
def test_presets_plan_one_replicate_per_seed_budget_arm(preset, expected):
    values, source = _study_values(preset)
    module, config = _validated({**values, "data": "x"}, source, partial=False)
    assert module.NAME == "continuous"
    data = continuous.ContinuousInput(scores=pd.DataFrame(), rubrics=("A",), arms=("nano", "mini", "synthetic"))
    plan = continuous.plan(config, data)
    if expected is not None:  # every (arm, budget, seed, family) its own part, so a resumed run skips each one done
        assert len(plan) == expected and all(len(r.seeds) == 1 for r in plan)
        assert len({(r.arm, r.budget, r.seeds, r.kind) for r in plan}) == len(plan)
        assert sorted(config.budgets) == [25, 50, 100, 200, 400, 800, 1500]
    assert set(config.flow_rubrics) == {"shared", "per_rubric"}


def test_seed_intervals_keep_the_width_of_the_data_as_seeds_grow():
    """Every seed tests on 40 of the same 160 items: the interval over seeds is the corrected t (40 / 120), whose
    width stays that of the data; a bootstrap over seed means narrows as 1/sqrt(seeds)."""
    rng = np.random.default_rng(2)
    err = np.abs(rng.normal(0.0, 0.5, 160))  # one rubric's fixed per-item absolute errors
    rows = []
    for seed in range(400):
        m = err[rng.permutation(160)[:40]].mean()
        rows.append({"judge": "cheap", "rubric": "A", "corrector": "linear_hb", "budget": 25, "seed": seed})
        rows[-1] |= {metric: m for metric in report.METRICS} | {"n_anchors": 25, "n_test": 40, "n_items": 160}
        rows[-1]["converged"] = True
    parts = pd.DataFrame(rows)
    width = {}
    for seeds in (25, 400):
        config = continuous.Config(data="x", budgets=(25,), replicates=seeds)
        row = report.summary_table(config, parts[parts["seed"] < seeds]).iloc[0]
        width[seeds] = row["mae_ci_high"] - row["mae_ci_low"]
    assert width[400] / width[25] > 0.7  # the bootstrap over seed means: about 0.25
    assert width[400] == pytest.approx(2 * 1.96 * err.std() / np.sqrt(160), rel=0.25)  # the 160 items' own width
    assert report.split_overlap_ratio(parts) == pytest.approx(40 / 120)


def test_finding_one_judges_correctors_only():
    """(1) reads correctors' mean errors at n >= 100: the anchors' mean (``constant``), the raw judge and the test-set
    oracle are baselines, however biased; a corrector at 0.08 or over is named with its cell and the finding fails."""
    from judgecal_dist.studies.continuous.findings import _bias

    rows = [
        ("nano", "Math", "constant", 100, 0.30),
        ("nano", "Math", "raw", 100, 0.50),
        ("nano", "Math", "ot_oracle", 100, 0.20),
        ("nano", "Math", "linear_hb", 100, 0.03),
        ("nano", "Math", "flow", 100, -0.05),
        ("nano", "Math", "ot", 25, 0.40),  # below 100 anchors: not judged
    ]
    table = pd.DataFrame(rows, columns=["judge", "rubric", "corrector", "budget", "mean_error"])
    got = _bias(table)
    assert got.holds is True and got.measured["largest"] == pytest.approx(0.05) and got.measured["cells"] == 2
    assert got.measured["corrector"] == "flow" and "held" in got.line and "not held" not in got.line
    table.loc[len(table)] = ("nano", "Focus", "ot", 1500, -0.09)
    got = _bias(table)
    assert got.holds is False and got.measured["largest"] == pytest.approx(0.09) and got.measured["cells_over"] == 1
    assert "largest 0.090 (ot, nano/Focus, n=1500)" in got.line and got.line.endswith("- not held.")
