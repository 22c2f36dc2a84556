"""Catalogue cases: run identity, run ids, resume and part checks, manifests, S3 buckets, secrets."""

from __future__ import annotations

import atexit
import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from judgecal_dist.cli import cli

ROOT = Path(__file__).resolve().parents[2]
CFG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority]", "calibrators=[none]", "panels=[all]", "permutation_resamples=100", "replicates=2"]
_MOTO: list[str] = []  # the loopback S3 endpoint, started once on first use


def _sets(items: list[str]) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def _generate(dest: Path, seed: int, *extra: str) -> str:
    argv = ["generate", "--items", "80", "--judges", "3", "--seed", str(seed), *extra, str(dest)]
    assert CliRunner().invoke(cli, argv).exit_code == 0
    return str(dest)


def _run(tmp: Path, data: str, *extra: str, output: str | None = None) -> list[str]:
    return ["run", CFG, *_sets([f"data={data}", *TINY]), "--output", output or str(tmp / "out"), "--serial", *extra]


def _reused_run_id(tmp: Path, *, change: str) -> list[str]:
    """Run ``nightly`` once; return a second run of ``nightly`` with another config or regenerated data."""
    data = _generate(tmp / "D", 1)
    assert CliRunner().invoke(cli, _run(tmp, data, "--run-id", "nightly")).exit_code == 0
    if change == "config":
        return _run(tmp, data, "--run-id", "nightly", "--set", "seed=5")
    _generate(tmp / "D", 3, "--overwrite")
    return _run(tmp, data, "--run-id", "nightly")


def _foreign_run_folder(tmp: Path) -> list[str]:
    (tmp / "out" / "inclusion" / "mine").mkdir(parents=True)
    (tmp / "out" / "inclusion" / "mine" / "notes.txt").write_text("a user's notes\n")
    return _run(tmp, _generate(tmp / "D", 1), "--run-id", "mine")


def _moto_endpoint() -> str:
    if not _MOTO:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        atexit.register(server.stop)
        host, port = server.get_host_and_port()
        _MOTO.append(f"http://{host}:{port}")
    return _MOTO[0]


def _missing_bucket(tmp: Path) -> list[str]:
    conf = tmp / "engine.yaml"
    conf.write_text(json.dumps({"storage_options": {"endpoint_url": _moto_endpoint(), "anon": True}}))
    data = _generate(tmp / "D", 1)
    return _run(tmp, data, "--conf", str(conf), output="s3://judgecal-no-such-bucket/results")


def _submit(tmp: Path, *extra: str, run_id: str = "n") -> list[str]:
    # Port 9 (discard): never contacted, since every case here is refused first.
    return ["submit", CFG, "--ray-address", "http://127.0.0.1:9", "--run-id", run_id, *extra]


def _spark_secret(tmp: Path) -> list[str]:
    conf = tmp / "engine.yaml"
    conf.write_text(json.dumps({"spark_conf": {"spark.hadoop.fs.s3a.secret.key": "not-for-shipping"}}))
    return _submit(tmp, "--set", "data=s3://bucket/panel", "--conf", str(conf))


CASES: dict[str, Callable[[Path], list[str]]] = {
    "run-id-invalid": lambda t: ["run", CFG, "--set", "data=x", "--run-id", "../x"],
    "run-id-unknown-placeholder": lambda t: ["run", CFG, "--set", "data=x", "--run-id", "nightly-{day}"],
    "run-id-other-config": lambda t: _reused_run_id(t, change="config"),
    "run-id-other-inputs": lambda t: _reused_run_id(t, change="inputs"),
    "run-missing-bucket": _missing_bucket,
    "run-output-inside-data": lambda t: _run(t, _generate(t / "D", 1), output=str(t / "D" / "results")),
    "run-folder-foreign": _foreign_run_folder,
    "run-judge-grain-no-orders": lambda t: _run(t, _generate(t / "D", 1), "--set", "judge_grain=one_order"),
    "submit-run-id-invalid": lambda t: _submit(t, "--set", "data=x", run_id="a/b"),
    "submit-credentials-in-spark-conf": _spark_secret,
    "submit-inputs-unreachable": lambda t: [
        "submit",
        CFG,
        "--ray-address",
        "http://127.0.0.1:9",
        "--set",
        f"data={t / 'absent'}",
    ],
    "submit-credentials-in-url": lambda t: _submit(t, "--set", "data=s3://user:pass@bucket/panel"),
}
