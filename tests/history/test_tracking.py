"""``judgecal run --mlflow URI``: the run read back through MLflow's own client from a local file store."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.io.synthetic import generate_panel

mlflow = pytest.importorskip("mlflow", reason="the tracking extra (mlflow-skinny) is not installed")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority, one_coin]", "calibrators=[none]", "panels=[all]", "permutation_resamples=100"]


def _run(data: str, out: Path, uri: str):
    sets = [a for s in [f"data={data}", "replicates=2", *TINY] for a in ("--set", s)]
    argv = ["run", CONFIG, *sets, "--output", str(out), "--serial", "--run-id", "nightly-t", "--mlflow", uri]
    return CliRunner().invoke(cli, argv)


def test_a_run_is_logged_once_with_params_metrics_figures_and_model(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps its file store behind this switch
    data = str(tmp_path / "panel")
    generate_panel(data, n_items=300, n_judges=4, seed=2)
    uri = (tmp_path / "mlruns").as_uri()
    result = _run(data, tmp_path / "out", uri)
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "out" / "inclusion" / "nightly-t"
    assert result.output.strip().splitlines()[-1] == str(run_dir)

    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("inclusion")
    [logged] = client.search_runs([experiment.experiment_id])
    assert f"mlflow: run {logged.info.run_id} (experiment inclusion)" in result.output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert logged.info.run_name == "nightly-t" and logged.info.status == "FINISHED"
    assert logged.data.tags["judgecal.config_digest"] == manifest["config_digest"]
    assert logged.data.params["replicates"] == "2" and logged.data.params["data"] == data

    summary = pd.read_parquet(run_dir / "summary.parquet")
    keys = [c for c in summary.columns if summary[c].dtype == object and c not in ("run_id", "study", "dataset")]
    row = summary.iloc[0]
    name = "nll." + ".".join(str(row[k]) for k in keys)
    assert logged.data.metrics[name] == pytest.approx(float(row["nll"]), rel=1e-12)

    figures = sorted(a.path for a in client.list_artifacts(logged.info.run_id, "figures"))
    assert figures == sorted(f"figures/{p.name}" for p in (run_dir / "figures").iterdir()) and figures
    # The exported model is logged as written; the legacy model/calibration.json is no longer written.
    assert [a.path for a in client.list_artifacts(logged.info.run_id, "model")] == ["model/model.json"]
    model = client.download_artifacts(logged.info.run_id, "model/model.json", str(tmp_path / "dl"))
    assert Path(model).read_text() == (run_dir / "model" / "model.json").read_text()

    again = _run(data, tmp_path / "out", uri)  # the run is complete: found, not logged a second time
    assert again.exit_code == 0 and f"mlflow: run {logged.info.run_id}" in again.output
    assert len(client.search_runs([experiment.experiment_id])) == 1
