"""A real Ray cluster on loopback (``ray start --head``): ``judgecal submit``, a worker killed by pid, the driver
killed with SIGKILL and resumed, and no credential value in a run's outputs or logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.studies.runner import execute, identify, prepare
from tests.cluster_support import ROOT, start_ray_head

pytestmark = pytest.mark.ray

CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml"
FULL = os.environ.get("JUDGECAL_FULL") == "1"
N_KILL = 24 if FULL else 16  # replicates of the kill tests: enough that a kill lands half-way
FAST = [
    "aggregators=[majority, one_coin]",
    "calibrators=[none, platt]",
    "panels=[all, top3]",
    "permutation_resamples=200",
    "conformal_alphas=[0.2]",
]


@pytest.fixture(scope="module")
def head():
    ray_head = start_ray_head(num_cpus=2)
    yield ray_head
    ray_head.stop()


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> str:
    from judgecal_dist.io.synthetic import generate_panel

    dest = str(tmp_path_factory.mktemp("cluster") / "panel")
    generate_panel(dest, n_items=400, n_judges=6, seed=5)
    return dest


def _args(panel: str, replicates: int) -> list[str]:
    return [f"data={panel}", f"replicates={replicates}", *FAST]


def _sets(args: list[str]) -> list[str]:
    return [x for a in args for x in ("--set", a)]


_REFERENCE: dict[tuple[str, ...], str] = {}


def _local_summary(args: list[str], out: Path) -> str:
    """summary.json of an undisturbed serial run on this machine (computed once per config)."""
    if tuple(args) not in _REFERENCE:
        url = execute(prepare(CONFIG, args, run_id="reference"), EngineConfig(), output=str(out), serial=True)
        _REFERENCE[tuple(args)] = Path(url, "summary.json").read_text()
    return _REFERENCE[tuple(args)]


def _driver(head, args: list[str], run_id: str, out: Path, env: dict | None = None, verbose: bool = False):
    """``judgecal run`` as its own process, a driver of the loopback cluster."""
    cmd = [
        sys.executable,
        "-m",
        "judgecal_dist.cli",
        *(["-v"] if verbose else []),
        "run",
        str(CONFIG),
        *_sets(args),
        "--run-id",
        run_id,
        "--output",
        str(out),
        "--ray-address",
        head.gcs,
    ]
    penv = (env or dict(os.environ)) | {"RAY_AUTH_MODE": "disabled", "RAY_ADDRESS": ""}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=penv)


def _wait_parts(folder: Path, at_least: int, proc, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if folder.is_dir() and len(list(folder.glob("part-*.parquet"))) >= at_least:
            return
        time.sleep(0.05)


def test_submit_runs_the_study_and_a_repeat_reports_the_job(head, panel, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    args = _args(panel, 4)
    run_id = identify(prepare(CONFIG, args)).run_id  # the default id `judgecal run` uses (config + inputs)
    out = tmp_path / "cluster-results"
    runner = CliRunner()
    first = runner.invoke(
        cli,
        ["submit", str(CONFIG), *_sets(args), "--ray-address", head.dashboard, "--output", str(out)],
        catch_exceptions=False,
    )
    assert first.exit_code == 0, first.output
    assert first.output.strip().splitlines()[-1] == run_id and "submitted" in first.output

    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(head.dashboard)
    deadline = time.time() + 300
    while time.time() < deadline and str(client.get_job_status(run_id).value) not in ("SUCCEEDED", "FAILED", "STOPPED"):
        time.sleep(1)
    assert str(client.get_job_status(run_id).value) == "SUCCEEDED", client.get_job_logs(run_id)[-3000:]

    again = runner.invoke(
        cli,
        ["submit", str(CONFIG), *_sets(args), "--ray-address", head.dashboard, "--output", str(out), "--follow"],
        catch_exceptions=False,
    )
    assert again.exit_code == 0, again.output
    assert "already SUCCEEDED (not submitted again)" in again.output
    assert again.output.strip().splitlines()[-1] == run_id
    assert f"job {run_id}: SUCCEEDED" in again.output  # --follow streamed the finished job's logs to its end
    assert [j.submission_id for j in client.list_jobs()].count(run_id) == 1

    url = out / "inclusion" / run_id
    assert (url / "_SUCCESS").is_file()
    assert Path(url, "summary.json").read_text() == _local_summary(args, tmp_path / "local")


def test_killed_worker_is_retried_and_results_are_identical(head, panel, tmp_path):
    args = _args(panel, N_KILL)
    out = tmp_path / "out"
    proc = _driver(head, args, "worker-killed", out)
    killed = None
    deadline = time.time() + 240
    while killed is None and time.time() < deadline and proc.poll() is None:
        pids = head.worker_pids("_replicate_chunk")
        if pids:
            os.kill(pids[0], signal.SIGKILL)
            killed = pids[0]
        time.sleep(0.02)
    stdout, stderr = proc.communicate(timeout=300)
    assert killed is not None, "no replicate task was seen running"
    assert proc.returncode == 0, stderr[-3000:]
    url = out / "inclusion" / "worker-killed"
    assert len(list((url / "replicates").glob("part-*.parquet"))) == N_KILL
    assert (url / "summary.json").read_text() == _local_summary(args, tmp_path / "local")


def test_killed_driver_resumes_without_recomputing(head, panel, tmp_path):
    args = _args(panel, N_KILL)
    out = tmp_path / "out"
    parts = out / "inclusion" / "driver-killed" / "replicates"
    proc = _driver(head, args, "driver-killed", out)
    _wait_parts(parts, N_KILL // 4, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    before = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.parquet")}
    assert N_KILL // 4 <= len(before) < N_KILL, "the kill should land half-way"
    run_dir = parts.parent
    assert not (run_dir / "_SUCCESS").exists()

    rerun = _driver(head, args, "driver-killed", out)
    _, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr[-3000:]
    after = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.parquet")}
    assert len(after) == N_KILL and all(after[name] == stamp for name, stamp in before.items())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "succeeded" and manifest["resumed_replicates"] == len(before)
    assert not (run_dir / "_LEASE.json").exists() and not (run_dir / "_tmp").exists()
    success = (run_dir / "_SUCCESS").stat().st_mtime_ns

    again = execute(prepare(CONFIG, args, run_id="driver-killed"), EngineConfig(), output=str(out), serial=True)
    assert again == str(run_dir) and (run_dir / "_SUCCESS").stat().st_mtime_ns == success  # _SUCCESS written once
    assert (run_dir / "summary.json").read_text() == _local_summary(args, tmp_path / "local")


@pytest.mark.s3
def test_no_credential_value_in_outputs_or_logs(head, panel, tmp_path, s3_bucket, s3_server):
    import s3fs

    key_id, secret = "AKIAJUDGECALLEAKTEST", "judgecal/Leak+Check/secret-value-0123456789"
    env = dict(os.environ) | {
        "AWS_ACCESS_KEY_ID": key_id,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_SESSION_TOKEN": "session-token-judgecal-leak-check",
    }
    args = _args(panel, 3)
    proc = _driver(head, args, "creds", f"{s3_bucket}/results", env=env, verbose=True)  # type: ignore[arg-type]
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    fs = s3fs.S3FileSystem(key=key_id, secret=secret, client_kwargs={"endpoint_url": s3_server})
    files = fs.find(f"{s3_bucket}/results/inclusion/creds")
    assert any(f.endswith("_SUCCESS") for f in files) and any(f.endswith("manifest.json") for f in files)
    blobs = {f: fs.cat_file(f) for f in files}
    blobs["stdout"], blobs["stderr"] = stdout.encode(), stderr.encode()
    blobs |= {str(p): p.read_bytes() for p in head.temp_dir.rglob("*") if p.is_file() and p.stat().st_size < 5e7}
    manifest = next(blob for name, blob in blobs.items() if name.endswith("manifest.json"))
    assert b'"run_id": "creds"' in manifest and b"replicates" in blobs["stderr"]  # the grep reads real content
    for value in (key_id, secret, env["AWS_SESSION_TOKEN"]):
        leaks = [name for name, blob in blobs.items() if value.encode() in blob]
        assert not leaks, f"credential value found in {leaks[:5]}"


def test_a_failed_job_is_resubmitted_as_a_new_attempt(head, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(head.dashboard)
    # The data URL exists only in the job's eyes: the job is accepted here and fails on the cluster (exit 2).
    argv = [
        "submit",
        str(CONFIG),
        "--set",
        f"data={tmp_path / 'absent'}",
        "--set",
        "replicates=2",
        "--ray-address",
        head.dashboard,
        "--run-id",
        "fails",
        "--output",
        str(tmp_path / "out"),
    ]
    first = CliRunner().invoke(cli, [*argv, "--follow"], catch_exceptions=False)
    assert first.exit_code == 1 and "job fails ended FAILED" in first.output, first.output
    assert "absent" in client.get_job_logs("fails")  # the job's own one-line rejection
    second = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert second.exit_code == 0 and second.output.strip().splitlines()[-1] == "fails-attempt2", second.output
    assert client.get_job_info("fails-attempt2").metadata["judgecal_run_id"] == "fails"


def test_a_scheduled_submit_names_the_night_and_refuses_another_config(head, panel, tmp_path, monkeypatch):
    """The CronJob's `submit --run-id nightly-{date}`: one job and run folder per UTC night, on this night's data."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    from datetime import UTC, datetime

    from ray.job_submission import JobSubmissionClient

    args, out = _args(panel, 2), tmp_path / "out"
    night = f"nightly-{datetime.now(UTC):%Y-%m-%d}"
    argv = [
        "submit",
        str(CONFIG),
        *_sets(args),
        "--ray-address",
        head.dashboard,
        "--output",
        str(out),
        "--run-id",
        "nightly-{date}",
    ]
    first = CliRunner().invoke(cli, [*argv, "--follow"], catch_exceptions=False)
    assert first.exit_code == 0 and first.output.strip().splitlines()[-1] == night, first.output
    manifest = json.loads((out / "inclusion" / night / "manifest.json").read_text())
    assert manifest["run_id"] == night and manifest["status"] == "succeeded" and manifest["inputs"][0]["files"] > 0
    meta = JobSubmissionClient(head.dashboard).get_job_info(night).metadata
    assert meta["judgecal_config_digest"] == manifest["config_digest"]  # the job ran the config submitted
    # The same night with another config: refused here, before anything reaches the cluster.
    other = CliRunner().invoke(cli, [*argv, "--set", "seed=5"])
    assert other.exit_code == 2, other.output
    assert f"job {night} holds another run: found config {manifest['config_digest']}, wanted config" in other.output
    assert [j.submission_id for j in JobSubmissionClient(head.dashboard).list_jobs()].count(night) == 1
    # The CronJob's --then drift: follows the (finished) job, then checks its judges in the history it recorded.
    checked = CliRunner().invoke(cli, [*argv, "--then", "drift"], catch_exceptions=False)
    assert checked.exit_code == 0, checked.output
    assert f"inclusion {night}: no baseline run yet, nothing compared" in checked.output
    assert checked.output.strip().splitlines()[-1] == str(out / "drift" / "inclusion" / night)
