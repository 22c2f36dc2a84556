"""The ensemble study reaches the engine's one-pass accuracy-vs-k job (on Spark here) and checks it on its curve."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.io.ingest import ingest
from judgecal_dist.studies.runner import execute, prepare

from .test_study import CONFIG, TABLE8


@pytest.mark.spark
def test_ensemble_study_checks_the_spark_accuracy_job_against_its_curve(rb2_dir, tmp_path, spark):
    url = str(tmp_path / "ds")
    ingest("rb2-k8", str(rb2_dir), url)
    engine = EngineConfig(ray_num_cpus=1, stats_engine="spark")
    folder = Path(
        execute(prepare(CONFIG, [f"data={url}", "replicates=200"]), engine, output=str(tmp_path), serial=True)
    )
    summary = json.loads((folder / "summary.json").read_text())
    check = summary["engine_curve"]
    assert check["equal"] and check["cells_compared"] == 5 * 8  # five tiers of their own collection, k = 1..8
    full = [r for r in check["rows"] if (r["dataset"], r["judge_id"]) == ("base_both_k8", "full")]
    accuracy, n = TABLE8[("full", "base", "own")]
    assert np.round([100 * r["accuracy"] for r in full], 2).tolist() == accuracy  # the paper's Table 8 column
    assert [r["n"] for r in full] == n
    assert "counts of evaluable, correct and tied examples equal" in (folder / "report.md").read_text()
