"""Submit a study to a Ray cluster through the Ray Jobs API (``judgecal submit``).

The caller parses and validates the study config and identifies the run (``studies.runner.prepare`` and
``identify``: a rejected config never reaches the cluster, and the run id carries the config and input digests);
settings holding credentials are refused (:func:`check_shippable`). This module stages the project as the job's
``working_dir``: the package, the resolved study config (``_submit/study.yaml``, overrides applied) and the engine
settings (``_submit/engine.yaml``). The job's entrypoint is ``judgecal run`` on that config with the run id resolved
by the caller (``{date}`` filled at submission), so the cluster writes to the same run folder a local ``judgecal
run`` of the same config and inputs would use, and a rerun resumes it.

The run id is the job's submission id. Ray refuses a used submission id, so a repeated submit finds the job and
reports it (pending, running or succeeded) instead of starting another; only after a failed or stopped job does it
submit a new attempt, ``<run_id>-attempt<k>``, which resumes from the replicates already committed. Credentials
are never put into the runtime environment: the cluster's processes read their own (AWS chain).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from judgecal_dist.engine.results.manifest import credential_paths
from judgecal_dist.engine.results.store import is_remote
from judgecal_dist.errors import ConfigError, InputError, RunError

__all__ = ["Submission", "check_shippable", "submit_study", "follow_job", "job_client", "ACTIVE", "FAILED_STATES"]

log = logging.getLogger(__name__)

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # judgecal_dist/
ACTIVE = ("PENDING", "RUNNING", "SUCCEEDED")
FAILED_STATES = ("FAILED", "STOPPED")
_ATTEMPT = re.compile(r"-attempt(\d+)$")
#: Jobs API answers that mean "the cluster is not ready yet" (worth retrying), and how long to keep trying.
_RETRYABLE = re.compile(r"try again later|status code 50[0234]", re.IGNORECASE)
SUBMIT_WAIT_S = 90.0


@dataclasses.dataclass(frozen=True)
class Submission:
    """What ``judgecal submit`` reports: the job, whether this call created it, and where results go."""

    job_id: str
    status: str
    created: bool
    study: str
    run_id: str
    results_url: str


def job_client(address: str) -> Any:
    """A ``JobSubmissionClient`` for the Ray Jobs API at ``address`` (e.g. ``http://127.0.0.1:8265``).

    Raises
    ------
    InputError
        The address is not reachable as a Ray Jobs API (wrong URL, cluster down, authentication refused).
    """
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except (ConnectionError, ValueError, RuntimeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"--ray-address {address}: cannot reach the Ray Jobs API ({first})") from err


def check_shippable(engine: Any, values: Mapping[str, Any], source: str = "engine settings") -> None:
    """Refuse settings that would ship credentials with the job (engine settings and study config alike).

    Engine settings and the study config are uploaded to the cluster in the job's ``working_dir``: a credential
    key (``storage_options.secret``, ``spark_conf`` keys such as ``spark.hadoop.fs.s3a.secret.key``) or a URL with
    userinfo or a ``password=`` parameter is refused, not redacted (a redacted setting would fail on the cluster).

    Raises
    ------
    ConfigError
        Naming the first offending setting.
    """
    engine_values = dict(engine) if isinstance(engine, Mapping) else engine.values()
    for where, found in ((source, credential_paths(engine_values)), ("study config", credential_paths(values))):
        if found:
            raise ConfigError(
                f"{where}: {found[0]}: credentials do not belong in engine settings or study configs (they would "
                "be shipped with the job); the cluster reads them from its environment (AWS chain, Spark's "
                "credential providers)"
            )


def submit_study(
    run: Any,
    *,
    ray_address: str,
    engine: Any,
    output: str | None = None,
    client: Any = None,
) -> Submission:
    """Submit ``run`` as a Ray job whose submission id is its run id; report an existing job instead.

    Parameters
    ----------
    run : judgecal_dist.studies.runner.StudyRun
        The prepared and identified study (``identify(prepare(config, overrides, run_id=...))``): its plain values
        and resolved run id (by default ``cfg-<config digest>-in-<input digest>``, the id ``judgecal run`` uses).
    ray_address : str
        The cluster's Jobs API (dashboard) address, ``http://host:8265``.
    engine : judgecal_dist.config.EngineConfig
        Engine settings for the job, checked by :func:`check_shippable` (e.g. ``conf/cluster.yaml``).
    output : str, optional
        Results root; default the engine settings' ``output``. A local path is made absolute here, so it only
        makes sense for a cluster that shares this filesystem; clusters write to ``s3://``.

    Returns
    -------
    Submission
    """
    check_shippable(engine, run.values)
    out = (output or engine.output).rstrip("/")
    if not is_remote(out):
        out = str(Path(out.removeprefix("file://")).expanduser().resolve())
    study = run.values["study"]
    results_url = f"{out}/{study}/{run.run_id}"
    client = client or job_client(ray_address)

    latest = _latest_attempt(client, run.run_id)
    if latest is not None:
        _check_same_run(latest, study, run)
        status = str(latest.status.value if hasattr(latest.status, "value") else latest.status)
        if status not in FAILED_STATES:
            log.info("job %s already %s; not submitted again", latest.submission_id, status)
            return Submission(latest.submission_id, status, False, study, run.run_id, results_url)
        job_id = _next_attempt(latest.submission_id, run.run_id)
        log.info(
            "job %s %s; submitting %s, which resumes from the committed replicates",
            latest.submission_id,
            status,
            job_id,
        )
    else:
        job_id = run.run_id

    staged = Path(tempfile.mkdtemp(prefix="judgecal-submit-"))
    try:
        entrypoint = _stage(staged, run.values, engine, out, run.run_id)
        request = {
            "entrypoint": entrypoint,
            "submission_id": job_id,
            "runtime_env": {"working_dir": str(staged), "env_vars": {"PYTHONUNBUFFERED": "1"}},
            "metadata": {
                "judgecal_study": study,
                "judgecal_run_id": run.run_id,
                "judgecal_results": results_url,
                **_identity(run),
            },
        }
        existing = _submit_with_retries(client, request)
        if existing is not None:  # another submitter won the race for this submission id: report its job
            status = str(getattr(existing.status, "value", existing.status))
            return Submission(job_id, status, False, study, run.run_id, results_url)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    log.info("submitted %s run %s as job %s; results at %s", study, run.run_id, job_id, results_url)
    return Submission(job_id, "PENDING", True, study, run.run_id, results_url)


def _stage(folder: Path, values: dict[str, Any], engine: Any, output: str, run_id: str) -> str:
    """Copy the package and the resolved configs into ``folder``; return the job's entrypoint."""
    shutil.copytree(PACKAGE_ROOT, folder / "judgecal_dist", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (folder / "_submit").mkdir()
    plain = json.loads(json.dumps(values))  # tuples -> lists, for YAML
    (folder / "_submit" / "study.yaml").write_text(yaml.safe_dump(plain, sort_keys=False))
    engine_values = json.loads(json.dumps(engine.values(), default=dict))
    engine_values["ray_address"] = None  # the job connects to its own cluster (--ray-address auto below)
    (folder / "_submit" / "engine.yaml").write_text(yaml.safe_dump(engine_values, sort_keys=False))
    args = [
        "python",
        "-m",
        "judgecal_dist.cli",
        "run",
        "_submit/study.yaml",
        "--run-id",
        run_id,
        "--output",
        output,
        "--conf",
        "_submit/engine.yaml",
        "--ray-address",
        "auto",
    ]
    return shlex.join(args)


def _submit_with_retries(client: Any, request: dict[str, Any], *, wait_s: float = SUBMIT_WAIT_S) -> Any:
    """``submit_job(**request)``; None when submitted, the existing job when the id is taken.

    A cluster that has just started answers "No available agent to submit job, please try again later" until
    its job agent is up: such answers (and other 5xx) are retried with backoff for up to ``wait_s`` seconds.
    """
    job_id, delay, deadline = request["submission_id"], 0.5, time.monotonic() + wait_s
    while True:
        try:
            client.submit_job(**request)
            return None
        except RuntimeError as err:
            existing = _job_info(client, job_id)
            if existing is not None:
                return existing
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            if not _RETRYABLE.search(str(err)) or time.monotonic() + delay > deadline:
                raise RunError(f"job {job_id}: submission refused ({first})") from err
            log.info("job %s: Ray Jobs API not ready (%s); retrying in %.1fs", job_id, first, delay)
            time.sleep(delay)
            delay = min(delay * 2, 8.0)


def _job_info(client: Any, job_id: str) -> Any:
    try:
        return client.get_job_info(job_id)
    except RuntimeError:  # the SDK's answer for an unknown id
        return None


def _latest_attempt(client: Any, run_id: str) -> Any:
    """The newest job of this run id (``<run_id>`` or ``<run_id>-attempt<k>``), or None."""
    attempts = []
    for job in client.list_jobs():
        sid = job.submission_id or ""
        if sid == run_id:
            attempts.append((1, job))
        elif sid.startswith(run_id) and (m := _ATTEMPT.fullmatch(sid[len(run_id) :])):
            attempts.append((int(m.group(1)), job))
    return max(attempts, key=lambda a: a[0])[1] if attempts else None


def _next_attempt(previous: str, run_id: str) -> str:
    match = _ATTEMPT.search(previous)
    return f"{run_id}-attempt{int(match.group(1)) + 1 if match else 2}"


def _identity(run: Any) -> dict[str, str]:
    """The run's digests as job metadata (the input digest only when the inputs were fingerprinted here)."""
    identity = getattr(run, "identity", None)
    if identity is None:
        return {}
    found = {"judgecal_config_digest": identity.config_digest, "judgecal_input_digest": identity.input_digest}
    return {key: value for key, value in found.items() if value}


def _check_same_run(job: Any, study: str, run: Any) -> None:
    """Refuse to report or resume a job of this run id that ran another study, config or inputs."""
    meta = job.metadata or {}
    other = meta.get("judgecal_study")
    if other is not None and other != study:
        raise ConfigError(
            f"--run-id {run.run_id}: already the submission id of a {other!r} job ({job.submission_id}); "
            "choose another run id"
        )
    mine = _identity(run)
    differ = [key for key, value in mine.items() if meta.get(key) is not None and meta[key] != value]
    if differ:
        found = " ".join(f"{k.removeprefix('judgecal_').removesuffix('_digest')} {meta[k]}" for k in differ)
        wanted = " ".join(f"{k.removeprefix('judgecal_').removesuffix('_digest')} {mine[k]}" for k in differ)
        raise ConfigError(
            f"--run-id {run.run_id}: job {job.submission_id} holds another run: found {found}, wanted {wanted}; "
            "choose another --run-id (e.g. with {date} or {time} in it: one run per night)"
        )


def follow_job(client: Any, job_id: str, echo: Callable[[str], None]) -> str:
    """Stream the job's logs through ``echo`` until it ends; return its final status."""

    async def tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            echo(chunk)

    asyncio.run(tail())
    status = client.get_job_status(job_id)
    return str(getattr(status, "value", status))
