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
    # the first night (no baseline, no flag) into the same folder: another comparison, refused without
    # --overwrite; with it the report is replaced and stale figures go
    refused = CliRunner().invoke(cli, [*argv, "--current", "n0"])
    assert refused.exit_code == 2 and "other inputs" in refused.output and "--overwrite" in refused.output
    result = CliRunner().invoke(cli, [*argv, "--current", "n0", "--overwrite"])
    assert result.exit_code == 0, result.output
    assert sorted(_tree(report)) == sorted([MARKER, "drift.json", "report.md"])
    assert json.loads((report / "drift.json").read_text())["current"] == "n0"


# -- run history: gaps and junk are named, never taken for data ----------------------------------------------------
def _copy_history(hostile, tmp_path) -> Path:
    import shutil

    root, _ = hostile
    out = tmp_path / "out"
    shutil.copytree(root / "deep" / "out", out)
    return out


def _one_error(result) -> str:
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def test_a_missing_judges_file_is_named_not_taken_for_every_judge_vanished(hostile, tmp_path):
    out = _copy_history(hostile, tmp_path)
    _, current = hostile
    (part,) = (out / "history" / "judges").rglob(f"{current}.parquet")
    part.unlink()
    before = _tree(out)
    result = CliRunner().invoke(cli, ["drift", "--output", str(out), "--current", current])
    error = _one_error(result)
    assert "judges table" in error and current in error and "vanished" not in result.output
    assert _tree(out) == before


@pytest.mark.parametrize("table", ["runs", "judges"])
@pytest.mark.parametrize("junk", [b"", b"not parquet at all", b"PAR1\x00\x00"])
def test_a_truncated_or_junk_history_part_is_named(hostile, tmp_path, table, junk):
    out = _copy_history(hostile, tmp_path)
    (part,) = (out / "history" / table).rglob("n1.parquet")
    part.write_bytes(junk)
    before = _tree(out)
    error = _one_error(CliRunner().invoke(cli, ["drift", "--output", str(out), "--current", "n2"]))
    assert str(part) in error and "history file" in error
    assert _tree(out) == before


@pytest.mark.parametrize("junk", [b"", b'{"study": "inclusion", "run_', b"[1, 2]", b"\xff\xfe"])
def test_status_on_a_truncated_manifest_exits_2_naming_the_file(tmp_path, junk):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_bytes(junk)
    before = _tree(tmp_path)
    error = _one_error(CliRunner().invoke(cli, ["status", str(run)]))
    assert "manifest.json" in error and str(run) in error
    assert _tree(tmp_path) == before


# -- run history: a kill between _SUCCESS and the history write is repaired by the rerun ---------------------------
RUN_CONFIG = str(Path(__file__).resolve().parents[2] / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
RUN_SETS = ["aggregators=[majority]", "calibrators=[none]", "panels=[all]", "permutation_resamples=100", "replicates=2"]


def _history(out: Path) -> dict[str, bytes]:
    return _tree(out / "history") if (out / "history").exists() else {}


def test_the_rerun_of_a_complete_run_repairs_its_missing_history_entry_once(tmp_path):
    data, out = tmp_path / "D", tmp_path / "out"
    gen = ["generate", "--items", "120", "--judges", "4", "--seed", "3", str(data)]
    assert CliRunner().invoke(cli, gen).exit_code == 0
    sets = [arg for item in [f"data={data}", *RUN_SETS] for arg in ("--set", item)]
    argv = ["run", RUN_CONFIG, *sets, "--output", str(out), "--serial", "--run-id", "r"]
    first = CliRunner().invoke(cli, argv)
    assert first.exit_code == 0, first.output
    recorded = _history(out)
    assert any(k.startswith("runs/") and k.endswith("r.parquet") for k in recorded)
    assert any(k.startswith("judges/") for k in recorded)
    results = {k: v for k, v in _tree(out).items() if not k.startswith("history/")}
    # the state a kill -9 between _SUCCESS and the history write leaves: the run committed, no history entry
    import shutil

    shutil.rmtree(out / "history")
    again = CliRunner().invoke(cli, argv)
    assert again.exit_code == 0, again.output
    assert _history(out).keys() == recorded.keys()
    runs = [k for k in recorded if k.startswith("runs/")]
    assert all(_history(out)[k] == recorded[k] for k in recorded if not k.startswith("runs/")) and runs
    assert {k: v for k, v in _tree(out).items() if not k.startswith("history/")} == results  # results untouched
    # a rerun of a recorded run writes nothing
    before = _tree(out)
    assert CliRunner().invoke(cli, argv).exit_code == 0
    assert _tree(out) == before
