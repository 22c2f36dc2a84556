"""Log a finished run to MLflow (``judgecal run --mlflow URI``): params, metrics, figures and the model.

MLflow is optional (``pip install 'judgecal-dist[tracking]'``, the ``mlflow-skinny`` client). One MLflow run per
judgecal run, in the experiment named after the study: the run's config as params (dotted keys), each summary
row's figures as metrics (``<metric>.<key values>``), ``figures/`` and ``model/`` as artifacts with
``report.md``, ``summary.json`` and ``manifest.json``. Tags carry the run id and its config and input digests, so
logging the same run again (a rerun that finds it complete) finds the MLflow run instead of adding another.
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from judgecal_dist.engine.results.manifest import redact_text
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.errors import ConfigError
from judgecal_dist.extras import require_extra
from judgecal_dist.io.filesystem import open_fs

__all__ = ["check_tracking_uri", "log_run_to_mlflow"]

_ARTIFACT_FILES = ("report.md", "summary.json", "manifest.json")
_ARTIFACT_DIRS = ("figures", "model")
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_\-. /]")
_PARAM_CHARS = 6000  # MLflow's limit on a param value
_BATCH = 100  # MLflow's limit on params per log_batch call
_LOCAL_SCHEMES = ("", "file", "sqlite")


def _client(uri: str) -> Any:
    require_extra("tracking", "--mlflow")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def check_tracking_uri(uri: str) -> None:
    """Refuse ``uri`` before a run starts when MLflow cannot use it (not installed, unknown scheme, a local store
    MLflow refuses); a server URI is contacted only after the run (an unreachable server retries for minutes)."""
    require_extra("tracking", "--mlflow")
    from mlflow.exceptions import MlflowException

    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    try:
        client = _client(uri)  # an unknown scheme fails here
        if scheme in _LOCAL_SCHEMES:
            client.search_experiments(max_results=1)
    except MlflowException as err:
        first = str(err).strip().splitlines()[0].strip()
        raise ConfigError(f"--mlflow {redact_text(uri)}: {first}") from err


def _flat(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flat(value, f"{name}.")
        else:
            yield name, str(value)[:_PARAM_CHARS]


def _metrics(summary: Any) -> dict[str, float]:
    """``<metric>.<key values>`` -> value for every finite number of every summary row."""
    keys = [c for c in summary.columns if summary[c].dtype == object and c not in ("run_id", "study", "dataset")]
    numbers = [c for c in summary.columns if summary[c].dtype.kind in "fiu"]
    out = {}
    for row in summary.to_dict("records"):
        label = ".".join(str(row[k]) for k in keys)
        for column in numbers:
            value = float(row[column])
            if math.isfinite(value):
                out[_NOT_IN_NAME.sub("_", f"{column}.{label}" if label else column)] = value
    return out


def log_run_to_mlflow(run_url: str, uri: str, *, storage_options: Mapping[str, Any] | None = None) -> str:
    """Log the finished run at ``run_url`` to the MLflow tracking server or store at ``uri``; return its run id.

    A run already logged there (same run id, config and input digests) is not logged again: its id is returned.

    Raises
    ------
    ConfigError
        MLflow is not installed.
    JudgecalError
        ``run_url`` is not a finished run.
    """
    from mlflow.entities import Metric, Param, RunTag

    options = dict(storage_options or {})
    store = RunStore(run_url, storage_options=options)
    manifest = store.read_json("manifest.json")
    study, run_id = str(manifest["study"]), str(manifest["run_id"])
    tags = {
        "judgecal.run_id": run_id,
        "judgecal.config_digest": str(manifest.get("config_digest")),
        "judgecal.input_digest": str(manifest.get("input_digest")),
        "judgecal.version": str(manifest.get("version")),
        "judgecal.git_sha": str(manifest.get("git_sha")),
        "judgecal.results": redact_text(run_url),
    }
    client = _client(uri)
    experiment = client.get_experiment_by_name(study)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(study)
    query = " and ".join(f"tags.`{k}` = '{tags[k]}'" for k in ("judgecal.run_id", "judgecal.config_digest"))
    for found in client.search_runs([experiment_id], query, max_results=10):
        if found.data.tags.get("judgecal.input_digest") == tags["judgecal.input_digest"]:
            return str(found.info.run_id)
    tracked = client.create_run(experiment_id, run_name=run_id, tags=tags).info.run_id
    now = int(time.time() * 1000)
    params = [Param(k, v) for k, v in _flat(manifest.get("config") or {})]
    metrics = [Metric(k, v, now, 0) for k, v in _metrics(store.read_table("summary.parquet")).items()]
    if manifest.get("wall_seconds") is not None:
        metrics.append(Metric("wall_seconds", float(manifest["wall_seconds"]), now, 0))
    for start in range(0, max(len(params), len(metrics), 1), _BATCH):
        client.log_batch(tracked, metrics=metrics[start : start + _BATCH], params=params[start : start + _BATCH])
    client.log_batch(tracked, tags=[RunTag("judgecal.status", str(manifest.get("status")))])
    fs, root = open_fs(run_url, options)
    with tempfile.TemporaryDirectory(prefix="judgecal-mlflow-") as tmp:
        for name in _ARTIFACT_FILES:
            if fs.exists(f"{root}/{name}"):
                fs.get(f"{root}/{name}", f"{tmp}/{name}")
                client.log_artifact(tracked, f"{tmp}/{name}")
        for folder in _ARTIFACT_DIRS:
            if fs.isdir(f"{root}/{folder}"):
                fs.get(f"{root}/{folder}/", f"{tmp}/{folder}/", recursive=True)
                client.log_artifacts(tracked, str(Path(tmp) / folder), artifact_path=folder)
    client.set_terminated(tracked)
    return str(tracked)
