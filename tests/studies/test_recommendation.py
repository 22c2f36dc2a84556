"""The Recommendation block: where it goes in a report, what summary.json keeps, what the console prints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.recommendation import Recommendation, estimate, overlap, preview

ROWS = pd.DataFrame(
    {
        "panel": ["all", "top3"],
        "k": [8, 8],
        "nll": [0.30, 0.35],
        "nll_ci_low": [0.29, 0.34],
        "nll_ci_high": [0.31, 0.36],
        "delta": [np.nan, 0.05],
    }
)


def _rec(**kw) -> Recommendation:
    base = dict(
        use="one_coin + beta on all judges",
        expected=estimate(ROWS.iloc[0], "nll", "NLL"),
        runner_up="top3",
        changes=["with fewer than 30 labels use one_coin uncalibrated"],
        interval="95% intervals over 10 splits",
        support=ROWS,
        keys=("panel", "k"),
        metrics=("nll", "delta"),
    )
    return Recommendation(**(base | kw))


def test_estimate_formats_the_studys_own_interval_and_overlap_reads_it():
    assert estimate(ROWS.iloc[0], "nll", "NLL") == "NLL 0.3000 [0.2900, 0.3100]"
    assert estimate(ROWS.iloc[1], "delta", "", "+.2f") == "+0.05"  # no interval columns: the value alone
    assert not overlap(ROWS.iloc[0], ROWS.iloc[1], "nll")
    assert overlap({"nll": 1.0}, {"nll": 2.0}, "nll")  # nothing to compare: never claims a separation


def test_block_opens_the_report_right_after_the_title_and_lands_in_summary_json():
    result = StudyResult(records=[], summary=ROWS, report="# Title\n\nEvidence.\n", recommendation=_rec())
    lines = result.report.splitlines()
    assert lines[0] == "# Title" and lines[2] == "## Recommendation"
    assert lines.index("Evidence.") > lines.index("- **Use:** one_coin + beta on all judges")
    rec = json.loads(json.dumps(result.extra["recommendation"], allow_nan=False))
    assert rec["keys"] == ["panel", "k"] and len(rec["support"]) == 2 and rec["support"][0]["delta"] is None
    untitled = StudyResult(records=[], summary=ROWS, report="Evidence.\n", recommendation=_rec(changes=()))
    assert untitled.report.startswith("## Recommendation") and "When this changes" not in untitled.report


def test_console_preview_prints_the_answer_and_every_key_column():
    result = StudyResult(records=[], summary=ROWS, report="# T\n", recommendation=_rec())
    text = preview(json.loads(json.dumps(result.extra["recommendation"])))
    assert text.splitlines()[0] == "Recommendation: use one_coin + beta on all judges"
    assert "when this changes: with fewer than 30 labels" in text
    table = text.split("Supporting rows:\n")[1].splitlines()
    assert table[0].split() == ["panel", "k", "nll", "delta"]
    assert table[1].split()[:3] == ["all", "8", "0.3000"] and "[0.2900, 0.3100]" in table[1]
    assert table[2].split()[-1] == "0.0500"


def test_run_prints_the_recommendation_and_its_rows_then_the_url(tmp_path):
    from click.testing import CliRunner

    from judgecal_dist.cli import cli

    args = ["run", "narrowband", "--set", "replicates=3", "--serial", "--output", str(tmp_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Recommendation: use "))
    assert "  expected: at spread 0.20: accuracy" in lines[start + 1]
    header = lines[lines.index("Supporting rows:") + 1].split()
    assert header[0] == "spread" and "lo_vs_majority" in header
    assert (Path(lines[-1]) / "_SUCCESS").exists()  # the run's folder, last
