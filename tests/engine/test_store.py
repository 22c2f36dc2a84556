"""Results store on a local folder and on a real S3 API (moto's server on loopback, through s3fs)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from judgecal_dist.engine.results.manifest import REDACTED, build_manifest, redact
from judgecal_dist.engine.results.store import SUCCESS, RunStore
from judgecal_dist.errors import InputError
from judgecal_dist.io.filesystem import fingerprint_inputs


def _exercise(store: RunStore) -> None:
    assert store.finished_seeds() == set()
    assert not store.succeeded
    for seed in (3, 1, 12):
        store.commit_part(seed, pd.DataFrame({"seed": [seed], "nll": [seed / 10]}))
    assert store.finished_seeds() == {1, 3, 12}
    parts = store.read_parts()
    assert parts["seed"].tolist() == [1, 3, 12]
    store.write_json("summary.json", {"results": [{"nll": 0.5}]})
    assert store.read_json("summary.json") == {"results": [{"nll": 0.5}]}
    with pytest.raises(InputError, match="no _SUCCESS"):
        store.require_success()
    store.commit_success()
    assert store.succeeded
    store.require_success()
    assert not store.exists("_tmp")  # temporary objects are gone after the commit


def test_local_store(tmp_path):
    store = RunStore(str(tmp_path / "study" / "run"))
    _exercise(store)
    assert (tmp_path / "study" / "run" / SUCCESS).is_file()
    assert sorted(p.name for p in (tmp_path / "study" / "run" / "replicates").iterdir()) == [
        "part-1.parquet",
        "part-12.parquet",
        "part-3.parquet",
    ]


def test_file_url_store(tmp_path):
    _exercise(RunStore(f"file://{tmp_path}/study/run"))


@pytest.mark.s3
def test_s3_store(s3_bucket):
    store = RunStore(f"{s3_bucket}/study/run")
    _exercise(store)
    fresh = RunStore(f"{s3_bucket}/study/run")  # a new client sees the committed state
    assert fresh.succeeded and fresh.finished_seeds() == {1, 3, 12}


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="summary.json: not found"):
        RunStore(str(tmp_path)).read_json("summary.json")


def test_manifest_never_holds_credentials(tmp_path, monkeypatch):
    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "tok-123456789")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.parquet").write_bytes(b"1234")
    manifest = build_manifest(
        study="s",
        run_id="r",
        config={"data": f"s3://bucket/{secret}/x", "nested": {"aws_secret_access_key": "v"}},
        engine={"storage_options": {"key": "AKIA", "secret": secret}, "spark_master": "local[*]"},
        inputs=[fingerprint_inputs(str(tmp_path / "data"))],
        started="t0",
    )
    text = json.dumps(manifest)
    assert secret not in text and "tok-123456789" not in text
    assert "storage_options" not in manifest["engine"]
    assert manifest["config"]["nested"]["aws_secret_access_key"] == REDACTED
    assert manifest["inputs"][0]["files"] == 1 and manifest["inputs"][0]["bytes"] == 4
    assert manifest["versions"]["numpy"]


def test_redact_leaves_ordinary_values():
    assert redact({"a": [1, "x"], "n": None}, set()) == {"a": [1, "x"], "n": None}
    assert os.environ.get("NOT_SET_FOR_SURE") is None
