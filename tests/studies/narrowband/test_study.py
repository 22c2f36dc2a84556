"""The synthetic narrow-band ablation (spec 000 §5.6(a), Theorem 3) against closed forms computed here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError
from judgecal_dist.studies import STUDIES
from judgecal_dist.studies.narrowband import study as narrowband
from judgecal_dist.studies.runner import execute, prepare

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "narrowband.yaml"


@pytest.fixture(autouse=True)
def _registered(monkeypatch):
    monkeypatch.setitem(STUDIES, "narrowband", "judgecal_dist.studies.narrowband.study")


def test_generator_follows_the_spec_model():
    draw = narrowband.draw_panel(np.random.default_rng(1), n_items=40_000, n_judges=15, calib_fraction=0.5)
    p, votes = narrowband.panel_votes(draw, mean_accuracy=0.6, spread=0.15, bounds=(0.02, 0.98))
    assert np.allclose(p, np.clip(0.6 + 0.15 * draw.zeta, 0.02, 0.98))
    assert set(np.unique(votes).tolist()) == {0, 1}  # no missing verdicts
    hit_rate = (votes == draw.labels[:, None]).mean(axis=0)
    assert np.all(np.abs(hit_rate - p) < 4 * np.sqrt(p * (1 - p) / 40_000))  # V_ij = Y_i with probability p_j
    assert abs(draw.labels.mean() - 0.5) < 4 * np.sqrt(0.25 / 40_000)
    assert draw.calibration.sum() == 20_000
    wide, _ = narrowband.panel_votes(draw, mean_accuracy=0.6, spread=2.0, bounds=(0.02, 0.98))
    assert wide.min() == 0.02 and wide.max() == 0.98


def test_theorem3_exponent_gap_matches_its_expansion():
    rng = np.random.default_rng(0)
    delta = 0.1 + 0.01 * rng.standard_normal(15)  # small delta: the O(J max delta^4) term is negligible
    w = np.log((1 + 2 * delta) / (1 - 2 * delta))
    e_lo = 2 * (w @ delta) ** 2 / (w @ w)
    e_mv = 2 * delta.sum() ** 2 / 15
    assert narrowband.hoeffding_exponent(w, delta) == pytest.approx(e_lo)
    assert narrowband.hoeffding_exponent(np.ones(15), delta) == pytest.approx(e_mv)
    assert e_lo - e_mv == pytest.approx(2 * 15 * delta.var(), rel=0.05)


def test_replicate_is_pure_and_matches_binomial_closed_forms_at_the_narrowest_spread():
    cfg = narrowband.Config(replicates=40, spreads=(0.01,))
    data = narrowband.load(cfg, EngineConfig())
    parts = pd.concat([narrowband.run_replicate(data, rep) for rep in narrowband.plan(cfg, data)])
    rep = narrowband.plan(cfg, data)[3]
    pd.testing.assert_frame_equal(narrowband.run_replicate(data, rep), narrowband.run_replicate(data, rep))
    # With every p_j ~ 0.60, majority vote of m judges is a binomial tail (ties of an even m count one half).
    mv15 = binom.sf(7, 15, 0.6)
    top_third = binom.sf(2, 5, 0.6)
    top_half = binom.sf(4, 8, 0.6) + 0.5 * binom.pmf(4, 8, 0.6)
    assert parts["acc_majority"].mean() == pytest.approx(mv15, abs=0.01)
    assert parts["acc_oracle"].mean() == pytest.approx(mv15, abs=0.01)  # near-equal weights: MV
    assert parts["acc_top_third"].mean() == pytest.approx(top_third, abs=0.03)  # selection adds ~0.01
    assert parts["acc_top_half"].mean() == pytest.approx(top_half, abs=0.03)
    assert (parts["n_top_half"] == 8).all() and (parts["n_top_third"] == 5).all()


def test_narrowband_study_through_the_runner(tmp_path, ray_local):
    folder = Path(execute(prepare(CONFIG, ["replicates=30"]), EngineConfig(ray_num_cpus=2), output=str(tmp_path)))
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["study"] == "narrowband" and summary["generator"]["n_judges"] == 15
    rec = {r["spread"]: r for r in summary["results"]}
    assert sorted(rec) == list(narrowband.SPREADS)
    # Largest gap at the narrowest spread, clearly positive, and shrinking as the spread grows (spec §5.6(a)).
    assert rec[0.01]["gap_ci_low"] > 0.04
    for spread in (0.05, 0.08, 0.10, 0.15, 0.20):
        assert rec[spread]["gap"] < rec[0.01]["gap"] - 0.015
    assert rec[0.05]["gap"] < rec[0.02]["gap"] < rec[0.01]["gap"]
    # Estimated weights never beat the oracle by much; accuracy rises with spread for weighting.
    for r in rec.values():
        assert r["acc_log_odds"] <= r["acc_oracle"] + 0.01
        assert r["exponent_gap_nominal"] == pytest.approx(2 * 15 * r["spread"] ** 2)
        assert 1 - r["acc_oracle"] <= r["theorem1_bound"]  # Theorem 1, with sampling error far below the slack
    assert rec[0.20]["acc_log_odds"] > 0.95 > rec[0.01]["acc_log_odds"]
    for spread in (0.01, 0.02, 0.05):  # Theorem 3's expansion is tight for small delta
        assert rec[spread]["exponent_gap_theorem3"] == pytest.approx(rec[spread]["exponent_gap_exact"], rel=0.02)
    assert (folder / "figures" / "gap_vs_spread.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (folder / "report.md").read_text()
    assert "exponent gain" in report and "## The oracle panel's error against its bound" in report


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"data": "/some/panel"}, "data=/some/panel: must be one of synthetic:narrowband"),
        ({"n_judges": 2}, r"n_judges=2: must be an integer in \[3, 1000\]"),
        ({"spreads": ()}, r"spreads=\[\]: must be a non-empty list"),
        (
            {"accuracy_bounds": (0.6, 0.4)},
            r"accuracy_bounds=\[0.6, 0.4\]: must be \[low, high\] with 0 < low < high < 1",
        ),
        ({"mean_accuracy": 0.99}, "mean_accuracy=0.99: must lie in accuracy_bounds"),
        ({"n_items": 5, "calib_fraction": 0.1}, "calib_fraction=0.1: must leave >= 2 of the n_items=5 on each side"),
    ],
)
def test_bad_config_is_rejected(overrides, match):
    with pytest.raises(ConfigError, match=match):
        narrowband.Config(**overrides)
