"""Spec 001 §8.3 on RewardBench 2 k=8: the continuous study's CI preset on the whole data, each finding held or
named in the report as not held with its number, every number read again from the replicate rows.

The preset (``continuous_ci``) runs the nano judge and the synthetic judge at 100 and 1500 anchors per rubric over 3
seeds, trains every flow until its loss stops moving (early stop) and has one NUTS seed for the canary. The
verdicts below are those measured on this data; a change to the data path or a method that flips one fails here,
so it is looked at rather than passed over. The synthetic arm is the paper's judge on RewardBench 2's own reference
scores: finding (4) is the paper's crossover checked on real data (the toy tanh curve in
``tests/methods/continuous/test_score_flow.py`` tests the flow's fit of a known curve, not the study).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, spearmanr

from judgecal_dist.config import EngineConfig
from judgecal_dist.studies.runner import execute, prepare

pytestmark = [pytest.mark.heavy, pytest.mark.ray]

#: (finding, scope) -> holds, as measured with the preset on rewardbench2_k8 (notes of issue 29). (1): the linear
#: corrector keeps a mean error of 0.117 on nano/Math at 100 anchors (3 seeds). (3) nano: HB's KL still falls by
#: 0.075 from 100 to 1500 anchors against a seed s.d. of 0.063 (KL on a 10-level judge is dominated by atom spacing,
#: spec 001 section 8.3's caveat). (4): the flow wins at 1500 on all three metrics, but is already better on KL at
#: 100 (interval [-0.027, -0.001]): its upper end sits 0.001 below zero, so that half is read from the measured
#: interval (either verdict, said with its number) while the top-budget half is asserted.
EXPECTED = {
    (1, "all"): False,
    (2, "all"): True,
    (3, "nano"): False,
    (3, "synthetic"): True,
    (4, "synthetic"): None,
    (5, "nano"): True,
    (6, "all"): True,
}
CORRECTORS = ("linear_hb", "flow", "ot")  # what the preset runs besides the baselines raw, ot_oracle, constant


@pytest.fixture(scope="module")
def run(rb2_dir: Path, tmp_path_factory, ray_local) -> dict:
    out = tmp_path_factory.mktemp("spec001")
    folder = Path(execute(prepare("continuous_ci", [f"data={rb2_dir}"]), EngineConfig(ray_num_cpus=2), output=str(out)))
    parts = pd.concat(
        [pd.read_parquet(f) for f in sorted((folder / "replicates").glob("*.parquet"))], ignore_index=True
    )
    return {
        "folder": folder,
        "summary": json.loads((folder / "summary.json").read_text()),
        "report": (folder / "report.md").read_text(),
        "parts": parts,
    }


def _found(run: dict) -> dict[tuple[int, str], dict]:
    return {(f["number"], f["scope"]): f for f in run["summary"]["findings"]}


def test_every_finding_is_decided_and_said_in_the_report(run):
    found = _found(run)
    assert set(found) == set(EXPECTED)  # none dropped, none extra
    section = run["report"].split("## Findings the paper expects, checked on this data")[1].split("\n## ")[0]
    for key, holds in EXPECTED.items():
        f = found[key]
        assert f["holds"] is not None, f"finding {key} not checked: {f['text']}"
        if holds is not None:
            assert f["holds"] is holds, f"finding {key}: {f['verdict']}: {f['text']}"
        verdict = "held" if f["holds"] else "not held"
        assert f"- ({f['number']}) {f['text']} - {verdict}." in section
    # (4)'s crossover half: on the paper's judge drawn on RewardBench 2's references, the flow beats HB at 1500 on MAE,
    # Pearson and KL; its KL interval at 100 is printed whichever way it falls.
    m4 = found[(4, "synthetic")]["measured"]
    assert m4["mae_difference_top"] < 0 < m4["pearson_difference_top"] and m4["kl_difference_top"] < 0
    assert f"[{m4['kl_100_low']:+.3f}, {m4['kl_100_high']:+.3f}]" in found[(4, "synthetic")]["text"]


def _rubric_mean_by_seed(parts: pd.DataFrame, judge: str, corrector: str, budget: int, metric: str) -> pd.Series:
    g = parts[(parts["judge"] == judge) & (parts["corrector"] == corrector) & (parts["budget"] == budget)]
    return g.groupby("seed")[metric].mean()


def test_the_first_seeds_metrics_match_their_formulas_on_the_items(run):
    """The rows every finding reads: on seed 0's kept items, mean error (reference minus corrected), MAE, Pearson and
    Spearman from numpy/scipy; the linear corrector's Pearson equals the raw judge's (finding 2)."""
    parts = run["parts"]
    items = parts[parts["y_items"].notna()]
    assert set(items["corrector"]) >= {"raw", *CORRECTORS} and len(items) >= 5 * 2 * 4
    for _, row in items[items["corrector"].isin(["raw", *CORRECTORS])].iterrows():
        y, y_hat = np.asarray(row["y_items"]), np.asarray(row["y_hat_items"])
        assert row["mean_error"] == pytest.approx(y.mean() - y_hat.mean(), abs=1e-9)
        assert row["mae"] == pytest.approx(np.abs(y - y_hat).mean(), abs=1e-9)
        assert row["pearson"] == pytest.approx(pearsonr(y, y_hat).statistic, abs=1e-9)
        assert row["spearman"] == pytest.approx(spearmanr(y, y_hat).statistic, abs=1e-9)
    raw = items[items["corrector"] == "raw"].set_index(["judge", "rubric"])
    for _, row in items[items["corrector"] == "linear_hb"].iterrows():
        y_raw = raw.loc[(row["judge"], row["rubric"])]
        assert pearsonr(y_raw["y_items"], y_raw["y_hat_items"]).statistic == pytest.approx(row["pearson"], abs=1e-9)


def test_findings_numbers_are_those_of_the_replicate_rows(run):
    parts, found = run["parts"], _found(run)
    ok = ~((parts["corrector"] == "linear_hb") & (parts["converged"] == False))  # noqa: E712 - failed gate
    usable = parts[ok]
    # (1) correctors only: the largest seed-mean |mean error| over (judge, rubric, corrector, budget >= 100).
    cells = usable[usable["corrector"].isin(CORRECTORS) & (usable["budget"] >= 100)]
    me = cells.groupby(["judge", "rubric", "corrector", "budget"])["mean_error"].mean().abs()
    f1 = found[(1, "all")]["measured"]
    assert f1["largest"] == pytest.approx(me.max(), abs=1e-12) and f1["cells"] == len(me)
    assert f1["cells_over"] == int((me >= 0.08).sum()) and found[(1, "all")]["holds"] is bool(me.max() < 0.08)
    # (2) the linear map keeps the raw Pearson on every (judge, rubric, seed).
    raw = usable[usable["corrector"] == "raw"].set_index(["judge", "rubric", "seed"])["pearson"]
    lin = usable[usable["corrector"] == "linear_hb"].set_index(["judge", "rubric", "seed"])["pearson"]
    assert found[(2, "all")]["measured"]["pearson_gap"] == pytest.approx(
        np.max(np.abs(lin - raw.reindex(lin.index))), abs=1e-12
    )
    # (3) HB at 100 vs 1500 moves less than the seed s.d. at 100, for MAE and KL.
    for arm in ("nano", "synthetic"):
        holds = True
        for metric in ("mae", "kl"):
            lo = _rubric_mean_by_seed(usable, arm, "linear_hb", 100, metric)
            hi = _rubric_mean_by_seed(usable, arm, "linear_hb", 1500, metric)
            m = found[(3, arm)]["measured"]
            assert m[f"{metric}_difference"] == pytest.approx(hi.mean() - lo.mean(), abs=1e-12)
            assert m[f"{metric}_seed_sd"] == pytest.approx(lo.std(ddof=1), abs=1e-12)
            holds &= bool(abs(hi.mean() - lo.mean()) < lo.std(ddof=1))
        assert found[(3, arm)]["holds"] is holds
    # (4) synthetic: flow minus HB at 1500 on MAE, Pearson, KL; at 100 the KL difference's interval reaches 0.
    m4 = found[(4, "synthetic")]["measured"]
    diff = {
        m: _rubric_mean_by_seed(usable, "synthetic", "flow", b, m)
        - _rubric_mean_by_seed(usable, "synthetic", "linear_hb", b, m)
        for m, b in (("mae", 1500), ("pearson", 1500), ("kl", 1500))
    }
    for metric, d in diff.items():
        assert m4[f"{metric}_difference_top"] == pytest.approx(d.mean(), abs=1e-12)
    kl100 = _rubric_mean_by_seed(usable, "synthetic", "flow", 100, "kl") - _rubric_mean_by_seed(
        usable, "synthetic", "linear_hb", 100, "kl"
    )
    assert m4["kl_difference_100"] == pytest.approx(kl100.mean(), abs=1e-12)
    assert m4["kl_100_low"] <= kl100.mean() <= m4["kl_100_high"]
    wins = diff["mae"].mean() < 0 and diff["pearson"].mean() > 0 and diff["kl"].mean() < 0
    assert found[(4, "synthetic")]["holds"] is bool(wins and m4["kl_100_high"] >= 0)
    # (5) nano: HB's MAE minus the flow's at 1500, at most 0.02.
    gain = (
        _rubric_mean_by_seed(usable, "nano", "linear_hb", 1500, "mae")
        - _rubric_mean_by_seed(usable, "nano", "flow", 1500, "mae")
    ).mean()
    assert found[(5, "nano")]["measured"]["gain"] == pytest.approx(gain, abs=1e-12)
    assert found[(5, "nano")]["holds"] is bool(gain <= 0.02)
    # (6) the NUTS canary: the (judge, rubric) with the highest mean Pr(beta < 0.3) at n <= 100, alerting above 0.05.
    nuts = parts[(parts["linear_fit"] == "nuts") & (parts["budget"] <= 100)]
    canary = nuts.groupby(["judge", "rubric", "budget"])["canary_prob"].mean()
    (judge, rubric, budget), top = canary.idxmax(), canary.max()
    m6 = found[(6, "all")]["measured"]
    assert (m6["judge"], m6["rubric"], m6["budget"]) == (judge, rubric, budget)
    assert m6["pr_beta_lt_0_3"] == pytest.approx(top, abs=1e-12)
    assert found[(6, "all")]["holds"] is bool(judge == "nano" and rubric == "Precise IF" and top > 0.05)


def test_flows_trained_until_their_loss_stopped_moving(run):
    """Every flow fit stopped before the cap with its last 50-epoch mean loss within 0.5% of the window before,
    read again from the loss curve each fit keeps; the report shows the curves and the count."""
    parts = run["parts"]
    fits = parts[(parts["corrector"] == "flow") & parts["loss_curve"].notna()]
    assert len(fits) == 2 * 2 * 3  # arms x budgets x seeds, one curve per fit
    for _, row in fits.iterrows():
        curve = np.asarray(row["loss_curve"])
        assert len(curve) == row["epochs_run"] < 1500 and len(curve) % 50 == 0
        last, previous = curve[-50:].mean(), curve[-100:-50].mean()
        assert row["loss_change"] == pytest.approx((last - previous) / previous, rel=1e-9)
        assert abs(row["loss_change"]) < 0.005 and row["final_loss"] == curve[-1]
    assert "Trained: 12 of 12 fits" in run["report"]
    assert "![flow training loss](figures/flow_training.png)" in run["report"]
    assert (run["folder"] / "figures" / "flow_training.png").stat().st_size > 10_000
