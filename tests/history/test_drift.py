"""Drift detection on generated nightly sequences: the changed judges flagged at their night, false flags rare."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.history.drift import DriftSettings, detect_drift
from judgecal_dist.history.drift_report import figure_name
from judgecal_dist.history.judges import judge_counts, with_rates
from judgecal_dist.history.store import record_run
from judgecal_dist.io.synthetic_drift import generate_drift_sequence, night_url, parse_change

NIGHTS = 8  # the issue asks for 30; 8 keep the suite fast and still leave 4 quiet nights before the change
CHANGE_NIGHT = 5
# Holm keeps the chance of a false flag on one quiet night under alpha; over the 4 quiet nights before the change
# it is under 4 x alpha, so "none before" asks for alpha = 0.01 (a 30-night sequence would ask for 0.05 / 30).
STRICT = DriftSettings(alpha=0.01)


def _record_sequence(dest: str, out: str, nights: int) -> list[str]:
    """Record night k of the sequence as run nightly-<date k> of study inclusion; return the run ids."""
    ids = []
    for night in range(nights):
        day = f"2026-11-{night + 1:02d}"
        stamp = f"{day}T02:30:00+00:00"
        manifest = {"study": "inclusion", "run_id": f"nightly-{day}", "status": "succeeded", "ended": stamp}
        judges = with_rates(judge_counts(night_url(dest, night), engine="local"))
        record_run(out, manifest | {"started": stamp}, judges=judges)
        ids.append(f"nightly-{day}")
    return ids


def _changed_sequence(root: Path, seed: int) -> tuple[str, list[str]]:
    changes = [parse_change(f"judge-002@{CHANGE_NIGHT}:accuracy=-0.2"), parse_change(f"judge-006@{CHANGE_NIGHT}:parse")]
    generate_drift_sequence(str(root / "nights"), nights=NIGHTS, changes=changes, n_items=3000, n_judges=10, seed=seed)
    out = str(root / "out")
    return out, _record_sequence(str(root / "nights"), out, NIGHTS)


@pytest.fixture(scope="module")
def changed(tmp_path_factory) -> tuple[str, list[str]]:
    return _changed_sequence(tmp_path_factory.mktemp("drift"), seed=1)


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_both_changed_judges_are_flagged_at_their_night_with_the_kind_named_and_none_before(tmp_path, seed):
    out, ids = _changed_sequence(tmp_path, seed)
    for night in range(1, CHANGE_NIGHT):
        comparison = detect_drift(out, current=ids[night], settings=STRICT)
        assert not comparison.raised, comparison.flagged
    at = detect_drift(out, current=ids[CHANGE_NIGHT], settings=STRICT)
    kinds = at.flagged.groupby("judge_id")["kind"].apply(set).to_dict()
    assert set(kinds) == {"judge-002", "judge-006"}, at.flagged
    assert "accuracy drop" in kinds["judge-002"] and "parse failures" in kinds["judge-006"]
    # the next night compares with the changed night: the change is not news any more
    assert not detect_drift(out, current=ids[CHANGE_NIGHT + 1], settings=STRICT).raised


def test_a_window_baseline_pools_the_counts_of_the_runs_before(changed):
    out, ids = changed
    comparison = detect_drift(out, current=ids[CHANGE_NIGHT], baseline="window:3")
    assert comparison.baseline == ids[CHANGE_NIGHT - 3 : CHANGE_NIGHT]
    row = comparison.changes.query("judge_id == 'judge-002' and measure == 'accuracy'").iloc[0]
    frames = [judge_counts(night_url(str(Path(out).parent / "nights"), n), engine="local") for n in (2, 3, 4)]
    pooled = pd.concat(frames).groupby("judge_id")[["correct", "labelled_votes"]].sum().loc["judge-002"]
    assert (row["k_baseline"], row["n_baseline"]) == (pooled["correct"], pooled["labelled_votes"])


def _wilson(k: float, n: float, z: float = 1.959963984540054) -> tuple[float, float]:
    centre = (k + z * z / 2) / (n + z * z)
    half = z * np.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return centre - half, centre + half


def test_the_change_interval_is_newcombes_hybrid_score_interval(changed):
    out, ids = changed
    row = detect_drift(out, current=ids[CHANGE_NIGHT]).changes.iloc[0]
    p0, p1 = row["k_baseline"] / row["n_baseline"], row["k_current"] / row["n_current"]
    l0, u0 = _wilson(row["k_baseline"], row["n_baseline"])
    l1, u1 = _wilson(row["k_current"], row["n_current"])
    low = p1 - p0 - np.sqrt((p1 - l1) ** 2 + (u0 - p0) ** 2)  # Newcombe 1998, method 10
    high = p1 - p0 + np.sqrt((u1 - p1) ** 2 + (p0 - l0) ** 2)
    np.testing.assert_allclose([row["change_ci_low"], row["change_ci_high"]], [low, high], rtol=1e-9)


def test_nights_without_change_raise_a_flag_at_most_at_the_configured_level(tmp_path):
    settings = DriftSettings(alpha=0.05)
    flagged, compared = 0, 0
    for seed in range(4):
        dest, out = str(tmp_path / f"n{seed}"), str(tmp_path / f"out{seed}")
        generate_drift_sequence(dest, nights=NIGHTS, n_items=1000, n_judges=8, seed=100 + seed)
        ids = _record_sequence(dest, out, NIGHTS)
        for current in ids[1:]:
            flagged += detect_drift(out, current=current, settings=settings).raised
            compared += 1
    assert compared == 4 * (NIGHTS - 1)
    assert flagged / compared <= settings.alpha


def test_drift_command_exits_3_on_a_flag_and_writes_its_report(changed, tmp_path):
    out, ids = changed
    report = tmp_path / "report"
    argv = ["drift", "--output", out, "--alpha", "0.01"]
    result = CliRunner().invoke(cli, [*argv, "--current", ids[CHANGE_NIGHT], "--report", str(report)])
    assert result.exit_code == 3, result.output
    assert "FLAG judge-002 accuracy: accuracy drop" in result.output
    document = json.loads((report / "drift.json").read_text())
    assert document["raised"] and {f["judge_id"] for f in document["flags"]} == {"judge-002", "judge-006"}
    text = (report / "report.md").read_text()
    assert text.index("judge-002") < text.index("## Method")  # the answer comes first
    assert (report / "figures" / figure_name("judge-002")).stat().st_size > 0

    quiet = CliRunner().invoke(cli, [*argv, "--current", ids[2], "--report", str(tmp_path / "q")])
    assert quiet.exit_code == 0 and "FLAG" not in quiet.output
    first = CliRunner().invoke(cli, [*argv, "--current", ids[0], "--report", str(tmp_path / "f")])
    assert first.exit_code == 0 and "no baseline" in first.output


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--alpha", "0"], r"alpha=0.0: must be a number in \(0, 0.5\]"),
        (["--baseline", "window:x"], r"--baseline: 'window:x' is not previous, window:N"),
        (["--current", "nope"], r"--current: run 'nope' is not a succeeded run"),
        (["--study", "budget"], r"--study: 'budget' has no runs"),
    ],
)
def test_drift_rejects_bad_settings_with_exit_2_and_writes_nothing(changed, tmp_path, args, pattern):
    import re

    out, _ = changed
    result = CliRunner().invoke(cli, ["drift", "--output", out, *args, "--report", str(tmp_path / "r")])
    assert result.exit_code == 2 and re.search(pattern, result.output), result.output
    assert not (tmp_path / "r").exists()


def test_drift_without_history_is_rejected(tmp_path):
    result = CliRunner().invoke(cli, ["drift", "--output", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "no run history" in result.output


def test_a_flag_on_agreement_alone_names_the_judges_whose_own_measures_changed(changed):
    from judgecal_dist.history.drift_report import render_markdown

    out, ids = changed
    comparison = detect_drift(out, current=ids[CHANGE_NIGHT], settings=STRICT)
    changes = comparison.changes.copy()
    spill = (changes["judge_id"] == "judge-003") & (changes["measure"] == "agreement")
    changes.loc[spill, "flag"] = True
    changes.loc[spill, "kind"] = "agreement with the panel drop"
    text = render_markdown(dataclasses.replace(comparison, changes=changes), figures={})
    line = next(row for row in text.splitlines() if row.startswith("- `judge-003`"))
    assert "agreement only: may follow the change of `judge-002`, `judge-006`" in line
    own = next(row for row in text.splitlines() if row.startswith("- `judge-002`"))
    assert "may follow" not in own
