"""Bad input of issue 4's "Done when": each case gives a documented result or a clear error, never a NaN."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.one_coin import OneCoinPanel, simulate_one_coin, write_one_coin_panel
from judgecal_dist.studies.inclusion import study as inclusion
from judgecal_dist.studies.runner import execute, prepare

CONFIG = Path(__file__).resolve().parents[3] / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml"
FAST = ["replicates=3", "permutation_resamples=200", "conformal_alphas=[0.2]"]


def _run(url: str, tmp_path: Path, *extra: str) -> tuple[dict, str]:
    out = execute(
        prepare(CONFIG, [f"data={url}", *FAST, *extra]),
        EngineConfig(stats_engine="local"),
        output=str(tmp_path / "out"),
        serial=True,
    )
    return json.loads(Path(out, "summary.json").read_text()), Path(out, "report.md").read_text()


def _no_nan(summary: dict, report: str) -> None:
    text = json.dumps(summary)
    assert "NaN" not in text and "Infinity" not in text
    assert not re.search(r"\bnan\b", report.lower())  # a printed NaN (words like "dominant" hold the letters)
    for rec in summary["results"]:
        for key in ("nll", "brier", "ece", "accuracy"):
            assert rec[key] is not None and math.isfinite(rec[key])


def test_silent_judge_and_certain_votes(tmp_path):
    """Judge 0 never votes (no calibration votes in any split: weight 0, skipped, never imputed); judge 1 is
    always right, so vote fractions and one-coin scores reach exactly 0 and 1 before clipping."""
    sim = simulate_one_coin(240, [0.7, 0.999999, 0.7, 0.65, 0.6], seed=1, missing_rate=[0.999, 0, 0.05, 0.05, 0.05])
    votes = sim.votes.copy()
    votes[:, 0] = -1
    panel = OneCoinPanel(votes, sim.labels, sim.difficulty, sim.accuracy, sim.missing_prob, sim.families)
    url = str(tmp_path / "silent")
    write_one_coin_panel(url, panel)
    summary, report = _run(url, tmp_path, "panels=[all, top3, beam]")
    _no_nan(summary, report)
    judges = {j["judge_id"]: j for j in summary["judges"]}
    assert judges["judge-000"]["votes"] == 0 and judges["judge-000"]["accuracy"] is None  # null, not NaN
    records = {(r["aggregator"], r["calibrator"], r["panel"]): r for r in summary["results"]}
    # a perfect judge: calibrated one-coin is near-certain and right, and the search finds a tiny panel
    assert records["one_coin", "beta", "all"]["accuracy"] > 0.99
    assert records["one_coin", "beta", "beam"]["panel_size"] <= 3


def test_single_judge(tmp_path):
    url = str(tmp_path / "one")
    write_one_coin_panel(url, simulate_one_coin(300, [0.75], seed=2))
    summary, report = _run(url, tmp_path, "panels=[all, top3, dedup, beam, backward]")
    _no_nan(summary, report)
    panels = {r["panel"] for r in summary["results"]}
    # top-3 and dedup equal the full panel and are skipped; a search over one judge keeps it
    assert panels == {"all", "beam", "backward"}
    assert all(r["panel_size"] == 1 for r in summary["results"])


def test_identical_labels_are_a_clear_error(tmp_path):
    sim = simulate_one_coin(100, [0.8, 0.7], seed=3)
    panel = OneCoinPanel(
        sim.votes, np.ones_like(sim.labels), sim.difficulty, sim.accuracy, sim.missing_prob, sim.families
    )
    url = str(tmp_path / "same")
    write_one_coin_panel(url, panel)
    with pytest.raises(ConfigError, match="labels: label: every labelled item has the same label"):
        inclusion.load(inclusion.Config(data=url), EngineConfig(stats_engine="local"))


def test_irt_diagnostic_without_a_vote_in_the_calibration_half_is_skipped_and_said():
    """A panel whose calibration half of the diagnostic split holds no A/B vote (the votes all fall on the other
    half) passes the study's checks; the 2PL IRT cannot be fitted there, so it is skipped with a sentence and every
    other diagnostic is still computed."""
    from judgecal_dist.engine.jobs.panel import Panel
    from judgecal_dist.splits import calibration_mask, group_keys
    from judgecal_dist.studies.inclusion.diagnostics import diagnose
    from judgecal_dist.studies.inclusion.report import _scope_diagnostic_lines

    sim = simulate_one_coin(200, [0.8, 0.7, 0.6], seed=4, missing_rate=[0.0, 0.0, 0.0])
    ids = np.array([f"i{k}" for k in range(200)], dtype=object)
    keys = group_keys(ids.astype(str))
    in_cal = calibration_mask(keys, [0], 0.5)[0]
    votes = np.where(in_cal[:, None], -1, sim.votes).astype(np.int8)
    judges = np.array(["j0", "j1", "j2"], dtype=object)
    panel = Panel("d", ids, keys, judges, votes, sim.labels.astype(np.int8), judges.copy())
    diag = diagnose(panel, seed=0, calib_fraction=0.5)
    assert diag["irt_variance_shares"] == {} and diag["irt_ability_accuracy_spearman"] is None
    assert diag["irt_skipped"].startswith(f"skipped: no judge voted A or B on the {int(in_cal.sum())} items")
    assert diag["p1_filter"] == ["j0", "j1", "j2"]  # the parse-rate flags still answer: nobody parsed there
    assert "- 2PL IRT variance shares: skipped: no judge voted A or B" in "\n".join(_scope_diagnostic_lines(diag))
