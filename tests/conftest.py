"""Shared fixtures: real engines only (local Spark, local Ray, moto's S3 server on loopback)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SHARED_DATA = SHARED / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need it skip with a reason when it is absent (a user's fresh clone)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"../shared/data not found at {SHARED_DATA}: real-data tests need the shared folder beside the repo"
        )
    return SHARED_DATA


@pytest.fixture(scope="session")
def llmbar_dir(shared_data: Path) -> Path:
    path = shared_data / "llmbar"
    if not path.is_dir():
        pytest.skip(f"{path} not found")
    return path


@pytest.fixture(scope="session")
def rb2_dir(shared_data: Path) -> Path:
    path = shared_data / "rewardbench2_k8"
    if not path.is_dir():
        pytest.skip(f"{path} not found")
    return path


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession (``local[2]``) for the whole test session."""
    from judgecal_dist.engine.jobs.spark import get_session

    session = get_session(master="local[2]", app_name="judgecal-tests", conf={"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray instance with 2 CPUs, shared by the test session."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server():
    """moto's standalone S3 server on 127.0.0.1; yields its endpoint URL.

    Credentials are dummy values set in the environment, exactly as a cluster reads them (AWS chain); the endpoint
    is passed to s3fs as ``endpoint_url`` (and exported as ``AWS_ENDPOINT_URL`` for code that reads the env).
    """
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("moto S3 server did not start within 30 s")
    saved = {
        k: os.environ.get(k)
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION")
    }
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing-key-id",
        AWS_SECRET_ACCESS_KEY="testing-secret-value",
        AWS_ENDPOINT_URL=endpoint,
        AWS_DEFAULT_REGION="us-east-1",
    )
    yield endpoint
    proc.terminate()
    proc.wait(timeout=10)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture()
def s3_bucket(s3_server):
    """A fresh bucket on the loopback S3 server; yields ``s3://<bucket>``."""
    import uuid

    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server})
    name = f"judgecal-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    fs.invalidate_cache()
    return f"s3://{name}"
