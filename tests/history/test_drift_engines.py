"""``judgecal drift`` reads the history in memory or through Spark, with equal output."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.history.drift import choose_history_engine, detect_drift
from judgecal_dist.history.drift_report import drift_document, figure_name
from judgecal_dist.history.judges import judge_counts, with_rates
from judgecal_dist.history.spark_history import read_history_spark
from judgecal_dist.history.store import read_history, record_run
from judgecal_dist.io.records import to_json
from judgecal_dist.io.synthetic_drift import generate_drift_sequence, night_url, parse_change

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[str, list[str]]:
    """Six nights (judge-001's accuracy drops at night 4), a failed attempt, a resume on another day, and
    runs whose judges and results rows differ in their columns (a model's weights in some runs only)."""
    root = tmp_path_factory.mktemp("engines")
    dest, out = str(root / "nights"), str(root / "out")
    changes = [parse_change("judge-001@4:accuracy=-0.25"), parse_change("judge-003@5:replace")]
    generate_drift_sequence(dest, nights=6, changes=changes, n_items=800, n_judges=5, seed=7)
    ids = []
    for night in range(6):
        stamp = f"2026-11-{night + 1:02d}T02:30:00+00:00"
        manifest = {"study": "inclusion", "run_id": f"nightly-{night}", "started": stamp}
        judges = with_rates(judge_counts(night_url(dest, night), engine="local"))
        if night % 2:
            judges = judges.assign(weight=0.1 * (judges.index + night))
        summary = pd.DataFrame({"aggregator": ["majority", "one_coin"], "nll": [0.5, 0.4 + night / 100]})
        if night == 3:  # failed first, resumed the next day
            record_run(out, manifest | {"status": "failed", "ended": stamp, "error": "OSError: disk"})
            stamp = f"2026-11-{night + 2:02d}T01:00:00+00:00"
            summary = summary.assign(ece=[0.02, 0.03])
        record_run(out, manifest | {"status": "succeeded", "ended": stamp}, summary=summary, judges=judges)
        ids.append(f"nightly-{night}")
    record_run(out, {"study": "budget", "run_id": "other", "status": "succeeded", "started": stamp, "ended": stamp})
    return out, ids


@pytest.mark.parametrize("table", ["runs", "results", "judges"])
def test_spark_reads_the_same_history_rows_and_types_as_pandas(history, spark, table):
    out, _ = history
    on_spark = read_history_spark(spark, out, table)
    in_memory = read_history(out, table)
    pd.testing.assert_frame_equal(on_spark[list(in_memory.columns)], in_memory)
    assert set(on_spark.columns) == set(in_memory.columns)


@pytest.mark.parametrize(("current", "baseline"), [(4, "previous"), (5, "window:3"), (3, "nightly-1")])
def test_drift_on_spark_equals_drift_in_memory(history, spark, current, baseline):
    out, ids = history
    config = EngineConfig(spark_master=spark.sparkContext.master)
    kwargs = dict(study="inclusion", current=ids[current], baseline=baseline, config=config)
    local, on_spark = detect_drift(out, engine="local", **kwargs), detect_drift(out, engine="spark", **kwargs)
    pd.testing.assert_frame_equal(on_spark.changes, local.changes)
    pd.testing.assert_frame_equal(on_spark.panel, local.panel)
    pd.testing.assert_frame_equal(on_spark.series[list(local.series.columns)], local.series)
    assert to_json(drift_document(on_spark)) == to_json(drift_document(local))  # NaN-safe, as drift.json
    if current == 4:
        assert "judge-001" in set(local.flagged["judge_id"])
    if current == 5:
        assert local.new_judges == ["judge-003-r"] and local.vanished_judges == ["judge-003"]


def test_auto_reads_through_spark_above_the_configured_number_of_runs(history, caplog):
    out, _ = history
    small, large = EngineConfig(history_local_max_runs=6), EngineConfig(history_local_max_runs=5)
    with caplog.at_level(logging.INFO, logger="judgecal_dist"):
        assert choose_history_engine(out, "inclusion", None, small, {}) == "local"
        assert choose_history_engine(out, "inclusion", "auto", large, {}) == "spark"
        assert choose_history_engine(out, "inclusion", "local", large, {}) == "local"
    assert "auto: 6 runs, in memory up to 5" in caplog.text


def test_the_drift_command_writes_the_same_drift_json_on_both_engines(history, spark, tmp_path):
    out, ids = history
    conf = tmp_path / "engine.yaml"
    conf.write_text(json.dumps({"spark_master": spark.sparkContext.master}))
    documents = {}
    for engine in ("local", "spark"):
        report = tmp_path / engine
        argv = ["drift", "--output", out, "--study", "inclusion", "--current", ids[4], "--engine", engine]
        result = CliRunner().invoke(cli, [*argv, "--conf", str(conf), "--report", str(report)])
        assert result.exit_code == 3, result.output
        documents[engine] = (report / "drift.json").read_text()
        assert (report / "figures" / figure_name("judge-001")).stat().st_size > 0
    assert documents["spark"] == documents["local"]
