"""Probes of run identity, resume, storage and secrets: what a user or a scheduler does by accident.

Each probe drives the real command (click's runner in-process, or a real process where it must be killed) on a
small generated panel, with ``--serial`` and a handful of replicates so the suite stays fast; S3 is moto's server
on loopback. References are independent of the code under test: a fresh run of the same config, the bytes on
disk, the bucket listing.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.results.manifest import REDACTED, credential_paths, is_credential_key, redact, redact_text
from judgecal_dist.studies.runner import execute, prepare
from tests.faults import fail_figures

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority, one_coin]", "calibrators=[none, platt]", "panels=[all]", "permutation_resamples=100"]


def _sets(items: list[str]) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def _generate(dest: Path, seed: int, *, overwrite: bool = False) -> None:
    argv = ["generate", "--items", "160", "--judges", "5", "--seed", str(seed), str(dest)]
    result = CliRunner().invoke(cli, argv + (["--overwrite"] if overwrite else []))
    assert result.exit_code == 0, result.output


def _run(data: Path | str, out: Path | str, *extra: str, replicates: int = 3):
    argv = ["run", CONFIG, *_sets([f"data={data}", f"replicates={replicates}", *TINY]), "--output", str(out)]
    return CliRunner().invoke(cli, [*argv, "--serial", *extra])


def _ok(result) -> Path:
    assert result.exit_code == 0, result.output
    return Path(result.output.strip().splitlines()[-1])


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def _tree(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


@pytest.fixture()
def data(tmp_path) -> Path:
    dest = tmp_path / "D"
    _generate(dest, 1)
    return dest


@pytest.fixture()
def finished(data, tmp_path) -> Path:
    """A complete run ``r`` (4 replicates) whose ``_SUCCESS`` was lost: the next run of ``r`` resumes it."""
    run_dir = _ok(_run(data, tmp_path / "out", "--run-id", "r", replicates=4))
    (run_dir / "_SUCCESS").unlink()
    return run_dir


# -- run identity --------------------------------------------------------------------------------------------------
def test_changed_data_at_the_same_url_is_a_new_run_with_new_results(data, tmp_path):
    first = _ok(_run(data, tmp_path / "out"))
    _generate(data, 3, overwrite=True)
    second = _ok(_run(data, tmp_path / "out"))
    assert second != first and second.parent == first.parent
    m1, m2 = _manifest(first), _manifest(second)
    assert m1["config_digest"] == m2["config_digest"] and m1["input_digest"] != m2["input_digest"]
    assert m2["resumed_replicates"] == 0  # computed, not the old results returned
    assert (first / "summary.json").read_text() != (second / "summary.json").read_text()
    # The recorded fingerprint is of the regenerated files (their total size, read from disk here).
    assert m2["inputs"][0]["bytes"] == sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    # Unchanged data and config: the same run, returned as is.
    assert _ok(_run(data, tmp_path / "out")) == second


def test_a_reused_run_id_with_another_config_or_other_inputs_is_refused(data, tmp_path):
    run_dir = _ok(_run(data, tmp_path / "out", "--run-id", "nightly"))
    found, before = _manifest(run_dir), _tree(run_dir)
    other_config = _run(data, tmp_path / "out", "--run-id", "nightly", "--set", "seed=5")
    _generate(data, 3, overwrite=True)
    other_inputs = _run(data, tmp_path / "out", "--run-id", "nightly")
    for result in (other_config, other_inputs):
        assert result.exit_code == 2, result.output
        line = result.output.strip().splitlines()[-1]
        assert line.startswith("Error: ") and "Traceback" not in result.output
        assert f"found config {found['config_digest']} inputs {found['input_digest']}, wanted config " in line
        assert "choose another --run-id" in line
    wanted = re.search(r"wanted config (\w+) inputs (\w+)", other_config.output).groups()
    assert wanted[0] != found["config_digest"] and wanted[1] == found["input_digest"]
    wanted = re.search(r"wanted config (\w+) inputs (\w+)", other_inputs.output).groups()
    assert wanted[0] == found["config_digest"] and wanted[1] != found["input_digest"]
    assert _tree(run_dir) == before  # nothing returned, written or mixed


@pytest.mark.parametrize("run_id", ["../x", "../../x", "a/b", "x..y", ".hidden", "_tmp", "-x", "n-{day}", "n {date}"])
def test_an_unsafe_run_id_is_refused_before_anything_is_written(data, tmp_path, run_id):
    result = _run(data, tmp_path / "out", "--run-id", run_id)
    assert result.exit_code == 2 and f"--run-id {run_id!r}: not a valid run id" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"]  # no output folder, nothing outside it


def test_the_scheduled_sequence_names_one_run_per_night(data, tmp_path):
    """generate, run nightly-{date}, regenerate, run the next night: two runs; the same night twice resumes."""
    args = [f"data={data}", "replicates=3", *TINY]
    engine, out = EngineConfig(), str(tmp_path / "out")
    night1, night2 = datetime(2026, 11, 24, 2, 30, tzinfo=UTC), datetime(2026, 11, 25, 2, 30, tzinfo=UTC)

    def nightly(now: datetime) -> Path:
        return Path(execute(prepare(CONFIG, args, run_id="nightly-{date}"), engine, output=out, serial=True, now=now))

    first = nightly(night1)
    sizes1 = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    _generate(data, 3, overwrite=True)
    second = nightly(night2)
    assert (first.name, second.name) == ("nightly-2026-11-24", "nightly-2026-11-25")
    m1, m2 = _manifest(first), _manifest(second)
    assert m1["inputs"][0]["sha256"] != m2["inputs"][0]["sha256"] and m1["inputs"][0]["bytes"] == sizes1
    assert (first / "summary.json").read_text() != (second / "summary.json").read_text()
    before = _tree(second)
    assert nightly(night2.replace(hour=23)) == second and _tree(second) == before  # same night: the same run
    # A night whose run was interrupted resumes it: its committed replicates are kept, not recomputed.
    (second / "_SUCCESS").unlink()
    parts = {n: t for n, t in before.items() if n.startswith("replicates/")}
    assert nightly(night2) == second
    assert {n: t for n, t in _tree(second).items() if n.startswith("replicates/")} == parts
    assert _manifest(second)["resumed_replicates"] == 3


# -- killed and failed runs ----------------------------------------------------------------------------------------
def test_a_killed_run_is_reported_stopped_and_a_rerun_resumes_it(data, tmp_path):
    out, n = tmp_path / "out", 200
    argv = ["run", CONFIG, *_sets([f"data={data}", f"replicates={n}", *TINY]), "--output", str(out), "--serial"]
    command = [sys.executable, "-m", "judgecal_dist.cli", *argv, "--run-id", "killed"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = out / "inclusion" / "killed" / "replicates"
    deadline = time.time() + 120
    while time.time() < deadline and (not parts.is_dir() or len(list(parts.glob("part-*.parquet"))) < 10):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.parquet")}
    assert 10 <= len(before) < n, "the kill should land half-way"
    status = CliRunner().invoke(cli, ["status", str(parts.parent)])
    assert status.exit_code == 0 and "killed: stopped" in status.output, status.output

    run_dir = _ok(CliRunner().invoke(cli, [*argv, "--run-id", "killed"]))
    after = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.parquet")}
    assert len(after) == n and all(after[name] == stamp for name, stamp in before.items())
    assert _manifest(run_dir)["resumed_replicates"] == len(before)
    fresh = _ok(CliRunner().invoke(cli, [*argv, "--run-id", "fresh"]))
    assert (run_dir / "summary.json").read_text() == (fresh / "summary.json").read_text()


def test_a_failed_run_is_recorded_as_failed_and_a_rerun_resumes_it(data, tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_dir = out / "inclusion" / "fails"
    fail_figures(monkeypatch)  # the run fails at its figures
    failed = _run(data, out, "--run-id", "fails")
    assert failed.exit_code == 1 and "figures" in failed.output, failed.output
    manifest = _manifest(run_dir)
    assert manifest["status"] == "failed" and "figures" in manifest["error"] and "\n" not in manifest["error"]
    assert manifest["ended"] and not (run_dir / "_SUCCESS").exists()
    status = CliRunner().invoke(cli, ["status", str(run_dir)])
    assert status.exit_code == 0 and "fails: failed (" in status.output and "running" not in status.output
    parts = _tree(run_dir / "replicates")
    assert len(parts) == 3

    monkeypatch.undo()  # the disk has room again: the same run id resumes
    assert _ok(_run(data, out, "--run-id", "fails")) == run_dir
    assert _manifest(run_dir)["status"] == "succeeded" and _manifest(run_dir)["resumed_replicates"] == 3
    assert _tree(run_dir / "replicates") == parts
    fresh = _ok(_run(data, out, "--run-id", "fresh"))
    assert (run_dir / "summary.json").read_text() == (fresh / "summary.json").read_text()


# -- parts verified on resume --------------------------------------------------------------------------------------
def _resume(finished: Path, data: Path, seed: int | None) -> tuple[str, list[Path]]:
    """Resume run ``r``; check the results equal the uninterrupted run's and ``seed`` (if any) was recomputed."""
    summary = (finished / "summary.json").read_text()
    result = _run(data, finished.parent.parent, "--run-id", "r", replicates=4)
    _ok(result)
    assert (finished / "summary.json").read_text() == summary  # recomputed part, same results
    assert _manifest(finished)["resumed_replicates"] == (4 if seed is None else 3)
    if seed is None:
        return result.output, []
    assert pq.read_schema(finished / f"replicates/part-{seed}.parquet").metadata[b"judgecal.seed"] == str(seed).encode()
    return result.output, sorted((finished / "replicates" / "_rejected").glob(f"part-{seed}.*.parquet"))


def test_a_part_holding_another_seeds_rows_is_set_aside_and_recomputed(data, finished):
    own = pd.read_parquet(finished / "replicates" / "part-2.parquet")
    shutil.copyfile(finished / "replicates" / "part-1.parquet", finished / "replicates" / "part-2.parquet")
    foreign = (finished / "replicates" / "part-2.parquet").read_bytes()
    output, rejected = _resume(finished, data, 2)
    assert re.search(r"part-2\.parquet: records seed=1, not seed=2; set aside as .*_rejected/part-2\.", output)
    assert [p.read_bytes() for p in rejected] == [foreign]  # moved, never deleted
    pd.testing.assert_frame_equal(pd.read_parquet(finished / "replicates" / "part-2.parquet"), own)


def test_a_truncated_part_is_set_aside_and_recomputed(data, finished):
    part = finished / "replicates" / "part-0.parquet"
    blob = part.read_bytes()
    part.write_bytes(blob[: len(blob) // 2])
    output, rejected = _resume(finished, data, 0)
    assert re.search(r"part-0\.parquet: unreadable \(.*\); set aside", output), output
    assert [p.read_bytes() for p in rejected] == [blob[: len(blob) // 2]]
    assert part.read_bytes() == blob  # deterministic replicate: the recomputed part is byte-identical


def test_a_part_of_another_run_is_set_aside(data, finished, tmp_path):
    other = _ok(_run(data, tmp_path / "other", "--set", "calib_fraction=0.6", replicates=4))
    # The other config's part of seed 3 records the right seed, but another config digest.
    shutil.copyfile(other / "replicates" / "part-3.parquet", finished / "replicates" / "part-3.parquet")
    output, rejected = _resume(finished, data, 3)
    assert re.search(r"part-3\.parquet: records config_digest=\w+, not config_digest=\w+; set aside", output)
    assert len(rejected) == 1


def test_foreign_files_in_replicates_are_named_and_left_alone(data, finished):
    notes = finished / "replicates" / "notes.txt"
    backup = finished / "replicates" / "part-1.parquet.bak"
    notes.write_text("mine")
    shutil.copyfile(finished / "replicates" / "part-1.parquet", backup)
    stray = finished / "replicates" / "part-9.parquet"  # someone's own Parquet file under a part's name
    pd.DataFrame({"x": [1, 2]}).to_parquet(stray)
    stray_bytes = stray.read_bytes()
    output, _ = _resume(finished, data, None)
    assert "notes.txt: not a replicate part; ignored and left as is" in output
    assert "part-1.parquet.bak: not a replicate part" in output
    assert notes.read_text() == "mine" and backup.exists()
    assert re.search(r"part-9\.parquet: records seed=None.*set aside", output), output
    assert [p.read_bytes() for p in (finished / "replicates" / "_rejected").glob("part-9.*")] == [stray_bytes]


# -- S3: buckets are never created ---------------------------------------------------------------------------------
@pytest.mark.s3
def test_a_missing_bucket_is_refused_and_never_created(data, tmp_path, s3_bucket, s3_server):
    import s3fs

    from judgecal_dist.engine.results.store import RunStore
    from judgecal_dist.errors import RunError

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server})
    buckets = set(fs.ls(""))
    missing = "judgecal-bucket-that-does-not-exist"
    result = _run(data, f"s3://{missing}/results")
    assert result.exit_code == 2, result.output
    assert f"s3://{missing}/results: bucket '{missing}' does not exist" in result.output
    assert "create it first" in result.output
    # Below the runner's check, the store itself never makes a bucket either.
    with pytest.raises((RunError, OSError)):
        RunStore(f"s3://{missing}/results/x").write_json("manifest.json", {})
    fs.invalidate_cache()
    assert set(fs.ls("")) == buckets and not fs.exists(missing)
    # The same run into an existing bucket works (the refusal is about the bucket, not about S3).
    assert _run(data, f"{s3_bucket}/results").exit_code == 0


@pytest.mark.s3
def test_a_truncated_part_on_s3_is_set_aside_and_recomputed(data, s3_bucket, s3_server):
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server})
    first = _run(data, f"{s3_bucket}/results", "--run-id", "r")
    assert first.exit_code == 0, first.output
    run_url = first.output.strip().splitlines()[-1]
    summary, blob = fs.cat_file(f"{run_url}/summary.json"), fs.cat_file(f"{run_url}/replicates/part-1.parquet")
    fs.rm(f"{run_url}/_SUCCESS")
    fs.pipe(f"{run_url}/replicates/part-1.parquet", blob[: len(blob) // 3])
    result = _run(data, f"{s3_bucket}/results", "--run-id", "r")
    assert result.exit_code == 0 and "part-1.parquet: unreadable" in result.output, result.output
    fs.invalidate_cache()
    assert fs.cat_file(f"{run_url}/summary.json") == summary
    assert fs.cat_file(f"{run_url}/replicates/part-1.parquet") == blob
    rejected = fs.glob(f"{run_url}/replicates/_rejected/part-1.*.parquet")
    assert [fs.cat_file(name) for name in rejected] == [blob[: len(blob) // 3]]


# -- secrets -------------------------------------------------------------------------------------------------------
SPARK_SECRETS = {
    "spark.hadoop.fs.s3a.access.key": "AKIASPARKLEAKCHECK01",
    "spark.hadoop.fs.s3a.secret.key": "spark-secret-leak-check-0123456789",
    "spark.hadoop.fs.s3a.session.token": "spark-session-token-leak-check",
    "spark.datasource.jdbc.url": "jdbc:postgresql://ann:url-pass-leak-check@db:5432/x?password=param-pass-leak",
    "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
}


def test_credentials_in_spark_conf_and_urls_never_reach_the_manifest_or_logs(data, tmp_path):
    conf = tmp_path / "engine.yaml"
    conf.write_text(json.dumps({"spark_conf": SPARK_SECRETS, "output": str(tmp_path / "out")}))
    result = _run(data, tmp_path / "out", "--conf", str(conf), "--run-id", "creds")
    run_dir = _ok(result)
    text = (run_dir / "manifest.json").read_text()
    leaks = ("AKIASPARKLEAKCHECK01", "spark-secret-leak-check", "spark-session-token", "url-pass", "param-pass")
    for leak in leaks:
        assert leak not in text and leak not in result.output, leak
    spark_conf = json.loads(text)["engine"]["spark_conf"]
    assert spark_conf["spark.hadoop.fs.s3a.secret.key"] == REDACTED
    assert spark_conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")
    assert spark_conf["spark.datasource.jdbc.url"].startswith("jdbc:postgresql://***redacted***@db:5432/x?password=")


def test_submit_refuses_credentials_in_spark_conf_and_urls_before_contacting_the_cluster(tmp_path):
    conf = tmp_path / "engine.yaml"
    conf.write_text(json.dumps({"spark_conf": {"spark.hadoop.fs.s3a.secret.key": "x"}}))
    base = ["submit", CONFIG, "--ray-address", "http://127.0.0.1:9", "--run-id", "n"]
    result = CliRunner().invoke(cli, [*base, "--set", "data=s3://b/x", "--conf", str(conf)])
    assert result.exit_code == 2 and "spark_conf.spark.hadoop.fs.s3a.secret.key: credentials do not" in result.output
    result = CliRunner().invoke(cli, [*base, "--set", "data=s3://user:pw@b/x"])
    assert result.exit_code == 2 and "study config: data: credentials do not belong" in result.output
    assert "pw@" not in result.output


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("spark.hadoop.fs.s3a.access.key", True),
        ("spark.hadoop.fs.s3a.secret.key", True),
        ("spark.hadoop.fs.s3a.session.token", True),
        ("spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", True),
        ("spark.ssl.keyStorePassword", True),
        ("aws_secret_access_key", True),
        ("client_credential", True),
        ("key", True),
        ("spark.hadoop.fs.s3a.aws.credentials.provider", False),
        ("spark.hadoop.fs.s3a.endpoint", False),
        ("n_bins", False),
        ("max_tokens", False),
        ("spark.hadoop.fs.s3a.delegation.token.binding", False),
        ("accessToken", True),
        ("RAY_AUTH_TOKEN", True),
        ("data", False),
    ],
)
def test_credential_keys(key, secret):
    assert is_credential_key(key) is secret
    assert (redact({key: "v"}, set())[key] == REDACTED) is secret


def test_url_credentials_are_redacted_and_found():
    text = "s3://AKIA:p@ss/word@bucket/x and jdbc:sqlserver://db;user=u;password=pw and s3://bucket/a@b"
    clean = redact_text(text, set())
    assert "AKIA" not in clean and "p@ss" not in clean and "password=pw" not in clean
    assert clean.endswith("s3://bucket/a@b")  # an @ in a key, not userinfo
    assert credential_paths({"a": {"b": ["ok", "s3://u:p@b/x"]}, "c": "s3://b/x"}) == ["a.b[1]"]


def test_the_documented_schedules_name_one_run_per_night():
    import yaml

    from judgecal_dist.studies.runner import check_run_id, resolve_run_id

    job = yaml.safe_load((ROOT / "docker" / "k8s" / "cronjob.yaml").read_text())
    args = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    cron = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("30 2 * * *")]
    assert len(cron) == 1 and "--run-id 'nightly-{date}'" in cron[0]
    run_id = args[args.index("--run-id") + 1]
    assert run_id == "nightly-{date}" and check_run_id(run_id) == run_id
    assert resolve_run_id(run_id, datetime(2026, 11, 25, 2, 30, tzinfo=UTC)) == "nightly-2026-11-25"


def test_error_lines_carry_no_url_credentials(data, tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGECAL_PROBE_TOKEN", "env-token-value-leak-check")
    foreign = "mysql://admin:db-pass-leak-check@db/x?password=param-leak-check&k=env-token-value-leak-check"
    result = _run(data, tmp_path / "out", "--set", f"dataset={foreign}")  # no such dataset: the error names it
    assert result.exit_code == 2 and "mysql://***redacted***@db/x?password=***redacted***" in result.output
    for leak in ("db-pass-leak-check", "param-leak-check", "env-token-value-leak-check"):
        assert leak not in result.output, result.output
