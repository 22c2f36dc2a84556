"""Probes of the history doors: names taken from data never become paths, and drift's report never overwrites
a folder it did not write.

The history is recorded from generated nights (the same generator as the drift tests) with one judge renamed to
a hostile id; references are the file trees on disk before and after.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.history.drift_report import MARKER, figure_name
from judgecal_dist.history.judges import judge_counts, with_rates
from judgecal_dist.history.store import record_run
from judgecal_dist.io.synthetic_drift import generate_drift_sequence, night_url, parse_change

HOSTILE = "../../x"
NIGHTS = 3


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, str]:
    """A history whose judge ``../../x`` drops in accuracy on the last night; returns (root, last run id)."""
    root = tmp_path_factory.mktemp("hostile")
    change = parse_change(f"judge-002@{NIGHTS - 1}:accuracy=-0.3")
    generate_drift_sequence(str(root / "nights"), nights=NIGHTS, changes=[change], n_items=2000, n_judges=5, seed=7)
    out = str(root / "deep" / "out")
    for night in range(NIGHTS):
        stamp = f"2026-11-0{night + 1}T02:30:00+00:00"
        manifest = {"study": "inclusion", "run_id": f"n{night}", "status": "succeeded", "ended": stamp}
        judges = with_rates(judge_counts(night_url(str(root / "nights"), night), engine="local"))
        judges["judge_id"] = judges["judge_id"].replace({"judge-002": HOSTILE})
        record_run(out, manifest | {"started": stamp}, judges=judges)
    return root, f"n{NIGHTS - 1}"


def test_a_judge_id_with_dots_and_slashes_writes_its_figure_inside_the_report_folder(hostile):
    root, current = hostile
    report = root / "deep" / "report"
    before = _tree(root / "deep" / "out") | _tree(root / "nights")
    result = CliRunner().invoke(
        cli, ["drift", "--output", str(root / "deep" / "out"), "--current", current, "--report", str(report)]
    )
    assert result.exit_code == 3 and f"FLAG {HOSTILE} accuracy" in result.output, result.output
    figures = sorted((report / "figures").iterdir())
    assert figure_name(HOSTILE) in [p.name for p in figures]
    assert all(p.resolve().is_relative_to(report.resolve()) for p in report.rglob("*"))
    # nothing appeared beside the report, nor in the history or the nights
    assert sorted(p.name for p in (root / "deep").iterdir()) == ["out", "report"]
    assert not (root / "x.png").exists() and not (root.parent / "x.png").exists()
    assert (_tree(root / "deep" / "out") | _tree(root / "nights")).keys() == before.keys()
    assert f"figures/{figure_name(HOSTILE)}" in (report / "report.md").read_text()


def test_figure_names_are_safe_and_distinct():
    names = {figure_name(j) for j in ["../../x", "../..x", "a/b", "a_b", "", ".", "é", "x" * 500]}
    assert len(names) == 8
    assert all("/" not in n and not n.startswith(".") and len(n) < 80 for n in names)


def test_drift_refuses_a_report_folder_it_did_not_write_and_leaves_it_untouched(hostile, tmp_path):
    root, current = hostile
    report = tmp_path / "mine"
    report.mkdir()
    (report / "report.md").write_text("my own notes\n")
    before = _tree(report)
    result = CliRunner().invoke(
        cli, ["drift", "--output", str(root / "deep" / "out"), "--current", current, "--report", str(report)]
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(report) in lines[0] and "--report" in lines[0] and MARKER in lines[0]
    assert _tree(report) == before


def test_drift_rewrites_its_own_report_folder(hostile, tmp_path):
    root, current = hostile
    report = tmp_path / "ours"
    argv = ["drift", "--output", str(root / "deep" / "out"), "--report", str(report)]
    assert CliRunner().invoke(cli, [*argv, "--current", current]).exit_code == 3
    marker = json.loads((report / MARKER).read_text())
    assert sorted(marker["files"]) == sorted(k for k in _tree(report) if k != MARKER)
    # the first night (no baseline, no flag) into the same folder: the report is replaced, stale figures go
    result = CliRunner().invoke(cli, [*argv, "--current", "n0"])
    assert result.exit_code == 0, result.output
    assert sorted(_tree(report)) == sorted([MARKER, "drift.json", "report.md"])
    assert json.loads((report / "drift.json").read_text())["current"] == "n0"
