"""The run history: per-judge statistics against brute force, atomic once-per-run rows, the runner's hook."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from statsmodels.stats.proportion import proportion_confint

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.history.judges import MEASURES, judge_counts, with_rates
from judgecal_dist.history.store import read_history, record_run
from judgecal_dist.io.synthetic import generate_panel
from tests.faults import fail_figures

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority, one_coin]", "calibrators=[none, beta]", "panels=[all]", "permutation_resamples=100"]


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> str:
    dest = str(tmp_path_factory.mktemp("history") / "panel")
    generate_panel(dest, n_items=300, n_judges=5, n_samples=2, seed=3, label_fraction=0.7, tie_rate=0.05)
    return dest


COUNTS = ["rows", "parsed", "votes", "n_A", "labelled_votes", "correct", "consensus_votes", "agree", "items"]


def _brute_force(url: str) -> pd.DataFrame:
    """Per-judge counts by a loop over items, from the raw tables (an independent reference)."""
    verdicts = pd.read_parquet(f"{url}/verdicts")
    labels = pd.read_parquet(f"{url}/labels").set_index("item_id")["label"]
    rows = {}
    for item, group in verdicts.groupby("item_id"):
        label = labels.get(item)
        for judge, mine in group.groupby("judge_id"):
            others = group[group["judge_id"] != judge]["verdict"]
            oa, ob = int((others == "A").sum()), int((others == "B").sum())
            consensus = "A" if oa > ob else "B" if ob > oa else None
            r = rows.setdefault(judge, dict.fromkeys(COUNTS, 0))
            for v in mine["verdict"]:
                r["rows"] += 1
                if v is None:
                    continue
                r["parsed"] += 1
                if v not in ("A", "B"):
                    continue
                r["votes"] += 1
                r["n_A"] += v == "A"
                r["labelled_votes"] += label in ("A", "B")
                r["correct"] += v == label
                r["consensus_votes"] += consensus is not None
                r["agree"] += v == consensus
            r["items"] += bool(mine["verdict"].notna().any())
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("judge_id").sort_index().reset_index()


def test_judge_counts_equal_a_brute_force_loop(panel):
    counts = judge_counts(panel, engine="local")
    reference = _brute_force(panel)
    pd.testing.assert_frame_equal(counts[reference.columns], reference, check_dtype=False)
    assert (counts["panel_items"] == 300).all()


def test_one_row_per_cell_counts_equal_a_brute_force_loop(tmp_path):
    """One sample: every (item, judge) cell holds one row, the counting path that needs no sort."""
    url = str(tmp_path / "one")
    generate_panel(url, n_items=200, n_judges=4, seed=8, label_fraction=0.6, tie_rate=0.1, missing_rate=0.2)
    reference = _brute_force(url)
    counts = judge_counts(url, engine="local")
    pd.testing.assert_frame_equal(counts[reference.columns], reference, check_dtype=False)


def test_rates_carry_wilson_intervals_from_counts(panel):
    rates = with_rates(judge_counts(panel, engine="local"))
    num, den = MEASURES["accuracy"]
    low, high = proportion_confint(rates[num], rates[den], method="wilson")
    np.testing.assert_allclose(rates["accuracy"], rates[num] / rates[den])
    np.testing.assert_allclose(rates["accuracy_ci_low"], low)
    np.testing.assert_allclose(rates["accuracy_ci_high"], high)


def test_spark_counts_equal_in_memory_counts(panel, spark):
    config = EngineConfig(spark_master=spark.sparkContext.master)
    on_spark = judge_counts(panel, engine="spark", config=config)
    pd.testing.assert_frame_equal(on_spark, judge_counts(panel, engine="local"))


def _manifest(run_id: str, ended: str, status: str = "succeeded") -> dict:
    return {"study": "inclusion", "run_id": run_id, "status": status, "started": ended, "ended": ended}


def test_a_run_resumed_on_another_day_appears_once_with_its_latest_attempt(tmp_path):
    out = str(tmp_path / "out")
    record_run(out, _manifest("nightly-1", "2026-11-01T02:00:00+00:00", "failed") | {"error": "OSError: disk"})
    record_run(out, _manifest("nightly-1", "2026-11-02T09:00:00+00:00"), summary=pd.DataFrame({"nll": [0.3]}))
    record_run(out, _manifest("nightly-2", "2026-11-02T10:00:00+00:00"))
    runs = read_history(out, "runs")
    assert runs["run_id"].tolist() == ["nightly-1", "nightly-2"]
    assert runs["status"].tolist() == ["succeeded", "succeeded"] and runs["date"].tolist() == ["2026-11-02"] * 2
    assert read_history(out, "results")["nll"].tolist() == [0.3]
    assert not list(Path(out).rglob("_tmp-*"))  # nothing half-written is left behind


def _run(data: str, out: Path, *extra: str):
    sets = [a for s in [f"data={data}", "replicates=2", *TINY] for a in ("--set", s)]
    return CliRunner().invoke(cli, ["run", CONFIG, *sets, "--output", str(out), "--serial", *extra])


def test_the_runner_records_a_failed_run_as_failed_then_its_resume_once(panel, tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_dir = out / "inclusion" / "fails"
    fail_figures(monkeypatch)  # the run fails at its figures
    assert _run(panel, out, "--run-id", "fails").exit_code == 1
    runs = read_history(str(out), "runs")
    assert runs["status"].tolist() == ["failed"] and "figures" in runs["error"].iloc[0]
    assert read_history(str(out), "judges").empty

    monkeypatch.undo()  # the disk has room again
    for _ in range(2):  # resumed, then returned as complete: its rows appear once
        assert _run(panel, out, "--run-id", "fails").exit_code == 0
    runs = read_history(str(out), "runs")
    assert runs["status"].tolist() == ["succeeded"] and runs["input_digest"].iloc[0]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert runs[["config_digest", "input_digest"]].iloc[0].tolist() == [
        manifest["config_digest"],
        manifest["input_digest"],
    ]
    judges = read_history(str(out), "judges")
    assert sorted(judges["judge_id"]) == [f"judge-{j:03d}" for j in range(5)]
    # the weights recorded are the exported (recommended) model's, whichever aggregator it is
    model = json.loads((run_dir / "model" / "model.json").read_text())
    recorded = judges.set_index("judge_id")["weight"]
    aggregator = model["aggregator"]
    expected = aggregator.get("weights") or aggregator.get("coef")
    if expected is None:
        assert recorded.isna().all()
    else:
        np.testing.assert_allclose(recorded.loc[model["judge_ids"]], expected)
    summary = pd.read_parquet(run_dir / "summary.parquet")
    assert len(read_history(str(out), "results")) == len(summary)
