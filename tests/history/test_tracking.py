"""``judgecal run|fit --mlflow URI``: runs read back through MLflow's own client from a local file store and from
sqlite, with no environment setting; the logged model loaded with ``mlflow.pyfunc.load_model`` scores as
``judgecal score`` does."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.io.synthetic import generate_panel

mlflow = pytest.importorskip("mlflow", reason="the tracking extra (mlflow-skinny) is not installed")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority, one_coin]", "calibrators=[none]", "panels=[all]", "permutation_resamples=100"]
STORES = ["file-uri", "plain-path", "sqlite"]


@pytest.fixture()
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A fresh working folder, and no MLflow variable in the environment (as a user's shell has none)."""
    for name in [n for n in os.environ if n.startswith("MLFLOW_")]:
        monkeypatch.delenv(name)
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _store(kind: str, tmp_path: Path) -> tuple[str, str]:
    """(what the user passes to --mlflow, the URI MLflow's client reads it with)."""
    if kind == "sqlite":
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        return uri, uri
    folder = tmp_path / "mlruns"
    return (folder.as_uri() if kind == "file-uri" else str(folder)), folder.as_uri()


def _client(uri: str, monkeypatch) -> object:
    if uri.startswith("file:"):  # MLflow's own rule for reading a file store back; our commands need no setting
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return mlflow.tracking.MlflowClient(tracking_uri=uri, registry_uri=uri)


def _run(data: str, out: Path, uri: str, *extra: str):
    sets = [a for s in [f"data={data}", "replicates=2", *TINY] for a in ("--set", s)]
    argv = ["run", CONFIG, *sets, "--output", str(out), "--serial", "--run-id", "nightly-t", "--mlflow", uri, *extra]
    return CliRunner().invoke(cli, argv)


def _fit(data: str, out: Path, uri: str, *extra: str):
    argv = ["fit", "--data", data, "--output", str(out), "--serial", "--run-id", "f1", "--mlflow", uri, *extra]
    return CliRunner().invoke(cli, argv)


def _no_leftovers(cwd: Path) -> None:
    """Nothing written into the folder the command ran in, and the environment as it was."""
    assert list(cwd.iterdir()) == []
    assert not [n for n in os.environ if n.startswith("MLFLOW_")]


@pytest.mark.parametrize("kind", ["file-uri", "sqlite"])
def test_a_run_is_logged_once_with_params_metrics_figures_and_model(tmp_path, elsewhere, monkeypatch, kind):
    data = str(tmp_path / "panel")
    generate_panel(data, n_items=300, n_judges=4, seed=2)
    given, uri = _store(kind, tmp_path)
    result = _run(data, tmp_path / "out", given)
    assert result.exit_code == 0, result.output
    _no_leftovers(elsewhere)
    run_dir = tmp_path / "out" / "inclusion" / "nightly-t"
    assert result.output.strip().splitlines()[-1] == str(run_dir)

    client = _client(uri, monkeypatch)
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
    # The exported model is an MLflow model whose artifact is the run's JSON document, byte for byte.
    model_files = {a.path for a in client.list_artifacts(logged.info.run_id, "model")}
    assert {"model/MLmodel", "model/artifacts"} <= model_files
    document = client.download_artifacts(logged.info.run_id, "model/artifacts/model.json", str(tmp_path / "dl"))
    assert Path(document).read_text() == (run_dir / "model" / "model.json").read_text()
    if kind == "sqlite":  # artifacts beside the database, not in the folder the command ran in
        assert logged.info.artifact_uri.startswith((tmp_path / "mlartifacts").as_uri())

    again = _run(data, tmp_path / "out", given)  # the run is complete: found, not logged a second time
    assert again.exit_code == 0 and f"mlflow: run {logged.info.run_id}" in again.output
    assert len(client.search_runs([experiment.experiment_id])) == 1


@pytest.mark.parametrize("kind", STORES)
def test_a_fit_is_logged_registered_and_its_pyfunc_model_scores_as_judgecal_score(
    tmp_path, elsewhere, monkeypatch, kind
):
    data = str(tmp_path / "panel")
    generate_panel(data, n_items=300, n_judges=4, seed=2)
    given, uri = _store(kind, tmp_path)
    result = _fit(data, tmp_path / "out", given, "--mlflow-register", "weekly-panel")
    assert result.exit_code == 0, result.output
    _no_leftovers(elsewhere)
    run_dir = Path(result.output.strip().splitlines()[-1])

    client = _client(uri, monkeypatch)
    [logged] = client.search_runs([client.get_experiment_by_name("fit").experiment_id])
    assert f"mlflow: model runs:/{logged.info.run_id}/model, registered as weekly-panel version 1" in result.output
    assert logged.data.params["data"] == data
    summary = pd.read_parquet(run_dir / "summary.parquet")
    assert logged.data.metrics and all(np.isfinite(v) for v in logged.data.metrics.values())
    assert any(name.startswith("nll.") for name in logged.data.metrics) and "nll" in summary
    card = client.download_artifacts(logged.info.run_id, "report.md", str(tmp_path / "dl"))
    assert Path(card).read_text() == (run_dir / "report.md").read_text()
    [version] = client.search_model_versions("name = 'weekly-panel'")
    assert version.run_id == logged.info.run_id and version.description == (run_dir / "report.md").read_text()[:5000]

    # the registered model, loaded as MLflow users load one, against `judgecal score` on the same table
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    model = mlflow.pyfunc.load_model("models:/weekly-panel/1")
    scored = CliRunner().invoke(
        cli,
        ["score", "--model", str(run_dir), "--data", data, "--output", str(tmp_path / "scored"), "--engine", "local",
         "--ignore-unknown-judges"],
    )  # fmt: skip
    assert scored.exit_code == 0, scored.output
    reference = pd.read_parquet(tmp_path / "scored" / "items").set_index("item_id").sort_index()
    verdicts = pd.read_parquet(Path(data) / "verdicts")
    got = model.predict(verdicts, params={"unknown_judges": "ignore"}).set_index("item_id").sort_index()
    assert got.index.equals(reference.index)
    np.testing.assert_array_equal(got["p"].to_numpy(), reference["p"].to_numpy())
    assert got["verdict"].equals(reference["verdict"]) and (got["n_votes"] == reference["n_votes"]).all()
    # crowd-kit's layout, verdicts as 1/0: the same scores
    crowd = verdicts.rename(columns={"item_id": "task", "judge_id": "worker", "verdict": "label"})
    crowd = crowd[["task", "worker", "label"]].assign(label=crowd["label"].map({"A": 1, "B": 0}))
    again = model.predict(crowd, params={"unknown_judges": "ignore"}).set_index("item_id").sort_index()
    np.testing.assert_array_equal(again["p"].to_numpy(), reference["p"].to_numpy())
    with pytest.raises(Exception, match=r"judge\(s\) not in the model .*params=\{'unknown_judges': 'ignore'\}"):
        model.predict(verdicts)

    twice = _fit(data, tmp_path / "out", given, "--mlflow-register", "weekly-panel")  # found, not a new version
    assert twice.exit_code == 0 and "registered as weekly-panel version 1" in twice.output
    assert len(client.search_model_versions("name = 'weekly-panel'")) == 1


def test_register_without_a_store_is_refused_before_the_fit(tmp_path, elsewhere):
    result = CliRunner().invoke(cli, ["fit", "--data", str(tmp_path / "none"), "--mlflow-register", "p"])
    assert result.exit_code == 2 and "--mlflow-register: needs --mlflow URI" in result.output
    assert list(elsewhere.iterdir()) == []
