"""Log a finished run to MLflow (``judgecal run|fit --mlflow URI``): params, metrics, figures, the model card and
the model as an MLflow model, registered under a name when asked.

MLflow is optional (``pip install 'judgecal-dist[tracking]'``: the ``mlflow-skinny`` client, plus SQLAlchemy and
Alembic for ``sqlite:///`` stores). One MLflow run per judgecal run, in the experiment named after the study
(``fit`` for ``judgecal fit``): the run's config as params (dotted keys), each summary row's figures as metrics
(``<metric>.<key values>``), ``figures/`` as artifacts with ``report.md`` (the model card), ``summary.json`` and
``manifest.json``. Tags carry the run id and its config and input digests, so logging the same run again (a rerun
that finds it complete) finds the MLflow run instead of adding another.

The exported panel model (``model/model.json``, ``judgecal.binary-pipeline/v1``) is logged as the MLflow model
``model`` with a ``python_function`` flavour: the JSON document as its artifact and the loader by code
(:mod:`judgecal_dist.history.mlflow_model`), no pickle; ``mlflow.pyfunc.load_model`` gives a model whose
``predict`` scores a frame of verdict rows as ``judgecal score`` does. Other model kinds are logged as files
under ``model/``. ``register`` adds the model as a version of a registered model (its description: the card).

Stores: a server URI (``http(s)://``, ``databricks``), ``sqlite:///PATH`` and local file stores (``file:///PATH`` or
a plain path, made absolute here). MLflow 3 keeps its file store behind ``MLFLOW_ALLOW_FILE_STORE``; the calls
made here on a file store set it for their own duration only (:func:`_store_access`), so no environment setting is
needed (reading such a store back in another program still needs it: MLflow's rule, ``sqlite:///`` has none).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgecal_dist import __version__
from judgecal_dist.engine.results.manifest import redact_text
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.errors import ConfigError
from judgecal_dist.extras import require_extra
from judgecal_dist.io.filesystem import open_fs

__all__ = ["Tracked", "check_tracking_uri", "log_run_to_mlflow", "tracking_uri"]

_ARTIFACT_FILES = ("report.md", "summary.json", "manifest.json")
_ARTIFACT_DIRS = ("figures",)
_MODEL = "model"  # the artifact path of the logged model (an MLflow model, or the model files)
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_\-. /]")
_PARAM_CHARS = 6000  # MLflow's limit on a param value
_DESCRIPTION_CHARS = 5000  # MLflow's limit on a model version's description
_BATCH = 100  # MLflow's limit on params per log_batch call
_FILE_STORE_SWITCH = "MLFLOW_ALLOW_FILE_STORE"
_SQL_MODULES = ("mlflow", "sqlalchemy", "alembic")  # what MLflow's SQL store imports beyond the client


@dataclass(frozen=True)
class Tracked:
    """Where a run went: the MLflow run id and experiment, the logged model's URI, the registered version."""

    run_id: str
    experiment: str
    model_uri: str | None = None
    registered: str | None = None  # "NAME version N"


def tracking_uri(uri: str) -> str:
    """``uri`` as MLflow should get it: a plain path becomes an absolute ``file://`` URI (artifact locations are
    then absolute, whatever folder a later reader runs in)."""
    if "://" in uri or uri.startswith(("databricks", "file:")):
        return uri
    return Path(uri).expanduser().resolve().as_uri()


def _scheme(uri: str) -> str:
    return uri.split(":", 1)[0] if ":" in uri else ""


@contextlib.contextmanager
def _store_access(uri: str) -> Iterator[None]:
    """MLflow's environment for the calls in the block, as it was afterwards: ``MLFLOW_TRACKING_URI`` is ``uri``
    (MLflow's own registry code opens a default client inside some calls, which would otherwise create
    ``./mlflow.db``), no artifact progress bars on stderr, and on a local file store ``MLFLOW_ALLOW_FILE_STORE``
    is set (MLflow 3 refuses one unless it is). MLflow's INFO lines are left out unless judgecal logs DEBUG (-v)."""
    wanted = {"MLFLOW_TRACKING_URI": uri, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    wanted |= {_FILE_STORE_SWITCH: "true"} if _scheme(uri) == "file" else {}
    before = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    chatter = logging.getLogger("mlflow")  # its table migrations and checks: shown with -v only
    level = chatter.level
    if not logging.getLogger("judgecal_dist").isEnabledFor(logging.DEBUG):
        chatter.setLevel(logging.WARNING)
    try:
        yield
    finally:
        chatter.setLevel(level)
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _artifact_root(uri: str) -> str | None:
    """Where a new experiment of a ``sqlite:///PATH`` store keeps its artifacts: ``mlartifacts/`` beside the
    database (MLflow's default, ``./mlruns``, would follow the folder each command runs in)."""
    if _scheme(uri) != "sqlite" or not uri.startswith("sqlite:///") or uri.endswith(":memory:"):
        return None
    return (Path(uri[len("sqlite:///") :]).expanduser().resolve().parent / "mlartifacts").as_uri()


def _require(uri: str) -> None:
    """The tracking extra's modules that ``uri`` needs: the client, and for ``sqlite:`` MLflow's SQL store's."""
    require_extra(
        "tracking",
        f"--mlflow {_scheme(uri) or 'URI'}",
        modules=_SQL_MODULES if _scheme(uri) == "sqlite" else ("mlflow",),
    )


def _client(uri: str) -> Any:
    _require(uri)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def check_tracking_uri(uri: str) -> None:
    """Refuse ``uri`` before a run starts when MLflow cannot use it (not installed, unknown scheme, a local store
    MLflow refuses); a server URI is contacted only after the run (an unreachable server retries for minutes)."""
    uri = tracking_uri(uri)
    _require(uri)
    from mlflow.exceptions import MlflowException

    try:
        with _store_access(uri):
            client = _client(uri)  # an unknown scheme fails here
            if _scheme(uri) in ("file", "sqlite"):
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


def log_run_to_mlflow(
    run_url: str,
    uri: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    register: str | None = None,
) -> Tracked:
    """Log the finished run at ``run_url`` to the MLflow tracking server or store at ``uri``.

    A run already logged there (same run id, config and input digests) is not logged again: it is found, and
    registered if ``register`` names a model it is not yet a version of.

    Parameters
    ----------
    run_url : str
        A committed run folder (``judgecal run`` or ``judgecal fit``).
    uri : str
        Tracking URI (see the module docstring).
    storage_options : dict, optional
        fsspec options for ``run_url``.
    register : str, optional
        Registered model name: the logged panel model becomes its next version.

    Returns
    -------
    Tracked

    Raises
    ------
    ConfigError
        MLflow is not installed; ``register`` without a panel model in the run.
    JudgecalError
        ``run_url`` is not a finished run.
    """
    from mlflow.entities import Metric, Param, RunTag

    uri = tracking_uri(uri)
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
    with _store_access(uri):
        client = _client(uri)
        experiment = client.get_experiment_by_name(study)
        experiment_id = experiment.experiment_id if experiment else client.create_experiment(study, _artifact_root(uri))
        query = " and ".join(f"tags.`{k}` = '{tags[k]}'" for k in ("judgecal.run_id", "judgecal.config_digest"))
        for found in client.search_runs([experiment_id], query, max_results=10):
            if found.data.tags.get("judgecal.input_digest") == tags["judgecal.input_digest"]:
                model_uri = found.data.tags.get("judgecal.model_uri")
                version = _register(client, register, found.info.run_id, model_uri, store) if register else None
                return Tracked(str(found.info.run_id), study, model_uri, version)
        tracked = client.create_run(experiment_id, run_name=run_id, tags=tags).info
        now = int(time.time() * 1000)
        params = [Param(k, v) for k, v in _flat(manifest.get("config") or {})]
        metrics = [Metric(k, v, now, 0) for k, v in _metrics(store.read_table("summary.parquet")).items()]
        if manifest.get("wall_seconds") is not None:
            metrics.append(Metric("wall_seconds", float(manifest["wall_seconds"]), now, 0))
        for start in range(0, max(len(params), len(metrics), 1), _BATCH):
            client.log_batch(
                tracked.run_id, metrics=metrics[start : start + _BATCH], params=params[start : start + _BATCH]
            )
        fs, root = open_fs(run_url, options)
        with tempfile.TemporaryDirectory(prefix="judgecal-mlflow-") as tmp:
            for name in _ARTIFACT_FILES:
                if fs.exists(f"{root}/{name}"):
                    fs.get(f"{root}/{name}", f"{tmp}/{name}")
                    client.log_artifact(tracked.run_id, f"{tmp}/{name}")
            for folder in _ARTIFACT_DIRS:
                if fs.isdir(f"{root}/{folder}"):
                    fs.get(f"{root}/{folder}/", f"{tmp}/{folder}/", recursive=True)
                    client.log_artifacts(tracked.run_id, str(Path(tmp) / folder), artifact_path=folder)
            model_uri = _log_model(client, tracked, fs, root, Path(tmp))
        end_tags = [RunTag("judgecal.status", str(manifest.get("status")))]
        end_tags += [RunTag("judgecal.model_uri", model_uri)] if model_uri else []
        client.log_batch(tracked.run_id, tags=end_tags)
        client.set_terminated(tracked.run_id)
        version = _register(client, register, tracked.run_id, model_uri, store) if register else None
    return Tracked(str(tracked.run_id), study, model_uri, version)


def _log_model(client: Any, run: Any, fs: Any, root: str, tmp: Path) -> str | None:
    """Log the run's exported model under ``model/``: a panel pipeline as an MLflow pyfunc model (the JSON document
    and the loader by code), another kind as its files; the URI of a pyfunc model, else None."""
    if not fs.isdir(f"{root}/{_MODEL}"):
        return None
    local = tmp / "exported"
    fs.get(f"{root}/{_MODEL}/", f"{local}/", recursive=True)
    document = local / "model.json"
    doc = json.loads(document.read_text()) if document.is_file() else {}
    if doc.get("format") != "judgecal.binary-pipeline/v1":
        client.log_artifacts(run.run_id, str(local), artifact_path=_MODEL)
        return None
    import mlflow.pyfunc

    from judgecal_dist.history.mlflow_model import ARTIFACT, ENTRY, input_example, signature

    saved = tmp / "mlflow-model"
    mlflow.pyfunc.save_model(
        path=str(saved),
        python_model=str(ENTRY),  # models from code: the loader is code, the model is the JSON artifact
        artifacts={ARTIFACT: str(document)},
        signature=signature(),
        input_example=input_example(doc["judge_ids"]),
        pip_requirements=[f"judgecal-dist[tracking]=={__version__}"],
    )
    client.log_artifacts(run.run_id, str(saved), artifact_path=_MODEL)
    return f"runs:/{run.run_id}/{_MODEL}"


def _register(client: Any, name: str, run_id: str, model_uri: str | None, store: RunStore) -> str:
    """Make the run's logged pyfunc model a version of registered model ``name`` (once per run); "NAME version N"."""
    from mlflow.exceptions import MlflowException

    if model_uri is None:
        raise ConfigError(
            f"--mlflow-register {name}: the run exported no panel model (model/model.json, "
            "judgecal.binary-pipeline/v1) to register"
        )
    for version in client.search_model_versions(f"name = '{name}'"):
        if version.run_id == run_id:
            return f"{name} version {version.version}"
    try:
        client.create_registered_model(name)
    except MlflowException as err:
        if "already exists" not in str(err).lower() and "RESOURCE_ALREADY_EXISTS" not in str(err):
            raise
    card = store.read_bytes("report.md").decode() if store.exists("report.md") else ""
    source = f"{client.get_run(run_id).info.artifact_uri}/{_MODEL}"
    version = client.create_model_version(name, source, run_id=run_id, description=card[:_DESCRIPTION_CHARS] or None)
    return f"{name} version {version.version}"
