"""Fault tolerance of results I/O: transient S3 errors injected in front of moto's server, retries with backoff,
and two attempts writing the same run id (a lease, attempt folders, ``_SUCCESS`` once)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from botocore.exceptions import ClientError

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.results.store import LEASE, SUCCESS, RunConflict, RunStore
from judgecal_dist.io.filesystem import is_transient, retry_transient
from judgecal_dist.studies.runner import execute, prepare
from tests.cluster_support import ROOT, FaultyS3Proxy

CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml"
FAST = [
    "aggregators=[majority, one_coin]",
    "calibrators=[none, platt]",
    "panels=[all, top3]",
    "permutation_resamples=200",
    "conformal_alphas=[0.2]",
]


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> str:
    from judgecal_dist.io.synthetic import generate_panel

    dest = str(tmp_path_factory.mktemp("s3faults") / "panel")
    generate_panel(dest, n_items=400, n_judges=6, seed=5)
    return dest


def _client_error(status: int, code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(
    ("status", "code", "transient"),
    [
        (500, "InternalError", True),
        (503, "SlowDown", True),
        (400, "Throttling", True),
        (404, "NoSuchKey", False),
        (403, "AccessDenied", False),
        (400, "InvalidRequest", False),
    ],
)
def test_transient_errors_are_5xx_throttling_and_connection_errors(status, code, transient):
    err = _client_error(status, code)
    assert is_transient(err) is transient
    wrapped = OSError(5, "s3fs re-raise")
    wrapped.__cause__ = err
    assert is_transient(wrapped) is transient  # s3fs turns ClientError into OSError; the cause decides
    assert is_transient(ConnectionResetError()) and not is_transient(FileNotFoundError("x"))


def test_retry_backs_off_exponentially_then_succeeds_and_never_retries_other_errors(monkeypatch):
    delays: list[float] = []
    monkeypatch.setattr(time, "sleep", delays.append)
    calls = iter([_client_error(503, "SlowDown"), _client_error(500, "InternalError"), ConnectionResetError(), "ok"])

    def flaky():
        outcome = next(calls)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert retry_transient(flaky, what="x", base_delay=1.0) == "ok"
    assert len(delays) == 3 and all(0.5 * 2**k <= d <= 2**k for k, d in enumerate(delays))
    missing = iter([FileNotFoundError("gone")])
    with pytest.raises(FileNotFoundError):
        retry_transient(lambda: (_ for _ in ()).throw(next(missing)), what="x")
    assert len(delays) == 3  # no retry of a non-transient error


@pytest.mark.s3
def test_run_completes_with_identical_results_through_injected_s3_errors(panel, tmp_path, s3_server, s3_bucket):
    import s3fs

    args = [f"data={panel}", "replicates=4", *FAST]
    local = execute(prepare(CONFIG, args, run_id="same"), EngineConfig(), output=str(tmp_path), serial=True)
    proxy = FaultyS3Proxy(s3_server, every=5)  # every 5th request answered 500 InternalError / 503 SlowDown
    try:
        engine = EngineConfig(storage_options={"endpoint_url": proxy.endpoint})
        remote = execute(prepare(CONFIG, args, run_id="same"), engine, output=f"{s3_bucket}/results", serial=True)
    finally:
        proxy.close()
    assert proxy.injected >= 10, "the proxy should have failed a good share of the requests"
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server})
    fs.invalidate_cache()
    assert fs.exists(f"{remote}/{SUCCESS}") and not fs.exists(f"{remote}/{LEASE}")
    assert fs.cat(f"{remote}/summary.json").decode() == Path(local, "summary.json").read_text()
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{remote}/replicates")) == [f"part-{s}.parquet" for s in range(4)]


def _lease(store: RunStore, **fields) -> None:
    doc = {"attempt": "other", "host": "elsewhere", "pid": 1, "started": time.time(), "heartbeat": time.time()}
    Path(store.path, LEASE).parent.mkdir(parents=True, exist_ok=True)
    Path(store.path, LEASE).write_text(json.dumps(doc | fields))


def test_a_live_lease_of_another_attempt_refuses_a_second_writer(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    _lease(store)  # another host, fresh heartbeat
    with pytest.raises(RunConflict, match="another attempt is writing this run .*attempt other on elsewhere"):
        store.commit_part(0, pd.DataFrame({"a": [1]}))
    assert not (tmp_path / "run" / "replicates").exists()  # nothing written


@pytest.mark.parametrize(
    "holder",
    [{"heartbeat": 0.0}, {"host": platform.node(), "pid": 2**22 + 12345}],
    ids=["expired heartbeat", "dead process on this host"],
)
def test_a_stopped_attempts_lease_is_taken_over_and_success_is_written_once(tmp_path, holder):
    store = RunStore(str(tmp_path / "run"))
    _lease(store, **holder)
    (tmp_path / "run" / "_tmp" / "other").mkdir(parents=True)  # the stopped attempt's temporaries
    store.commit_part(0, pd.DataFrame({"a": [1]}))
    assert json.loads((tmp_path / "run" / LEASE).read_text())["attempt"] == store.attempt
    store.commit_success()
    assert not (tmp_path / "run" / LEASE).exists() and not (tmp_path / "run" / "_tmp").exists()
    stamp = (tmp_path / "run" / SUCCESS).stat().st_mtime_ns
    late = RunStore(str(tmp_path / "run"))  # an attempt that started before the commit and finishes after it
    late.write_json("summary.json", {"late": True})
    late.commit_success()
    assert (tmp_path / "run" / SUCCESS).stat().st_mtime_ns == stamp
    assert not (tmp_path / "run" / "summary.json").exists()  # it wrote nothing over the committed run


def test_two_concurrent_runs_of_one_run_id_leave_one_consistent_result(panel, tmp_path):
    args = [f"data={panel}", "replicates=12", *FAST]
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "judgecal_dist.cli", "run", str(CONFIG), *[x for a in args for x in ("--set", a)]]
    cmd += ["--run-id", "twice", "--output", str(out), "--serial"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ))
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes[0] == 0, results
    for code, stderr in results:
        assert code == 0 or "another attempt" in stderr or "lost the run's lease" in stderr, stderr[-2000:]
    run = out / "inclusion" / "twice"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "succeeded" and (run / SUCCESS).is_file()
    assert not (run / LEASE).exists() and len(list((run / "replicates").glob("part-*.parquet"))) == 12
    reference = execute(prepare(CONFIG, args, run_id="reference"), EngineConfig(), output=str(tmp_path), serial=True)
    assert (run / "summary.json").read_text() == Path(reference, "summary.json").read_text()


def test_status_shows_progress_and_the_writer_of_an_unfinished_run(tmp_path):
    from click.testing import CliRunner

    from judgecal_dist.cli import cli

    store = RunStore(str(tmp_path / "run"))
    store.write_json(
        "manifest.json",
        {
            "study": "inclusion",
            "run_id": "r",
            "status": "running",
            "started": "2020-01-01T00:00:00+00:00",
            "config": {"replicates": 4},
        },
    )
    for seed in (0, 1):
        store.commit_part(seed, pd.DataFrame({"a": [seed]}))
    out = CliRunner().invoke(cli, ["status", str(tmp_path / "run")]).output
    assert "inclusion r: running; replicates 2/4" in out and "progress: 2/4 (50%), last replicate" in out
    assert f"writer: attempt {store.attempt} on {platform.node()} pid {os.getpid()}" in out
    store.commit_success()
    out = CliRunner().invoke(cli, ["status", str(tmp_path / "run")]).output
    assert "succeeded; replicates 2/4" in out and "progress" not in out
