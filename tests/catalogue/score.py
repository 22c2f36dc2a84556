"""Catalogue cases: judgecal score: model, data and output checks."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from judgecal_dist.cli import cli
from tests.catalogue.run import _moto_endpoint
from tests.scoring.support import model_json, write_arena, write_run


def _arena(tmp: Path) -> str:
    return write_arena(str(tmp / "arena"))


def _model(tmp: Path, **changes) -> str:
    model = model_json()
    for key, value in changes.items():
        section, _, name = key.partition("__")
        (model[section] if name else model)[name or section] = value
    return write_run(tmp / "run", model)


def _score(tmp: Path, model: str | None = None, data: str | None = None, *extra: str) -> list[str]:
    model = model or _model(tmp)
    data = data or _arena(tmp)
    return ["score", "--model", model, "--data", data, "--output", str(tmp / "out"), "--engine", "local", *extra]


def _foreign_output(tmp: Path) -> list[str]:
    (tmp / "out").mkdir()
    (tmp / "out" / "report.csv").write_text("a user's file\n")
    return _score(tmp)


def _foreign_in_results(tmp: Path) -> list[str]:
    argv = _score(tmp)
    assert CliRunner().invoke(cli, argv).exit_code == 0  # a committed score, then a file slipped among its results
    (tmp / "out" / "items" / "extra.parquet").write_bytes(b"someone else's")
    return argv


def _bad_marker(tmp: Path) -> list[str]:
    (tmp / "out").mkdir()
    (tmp / "out" / "_JUDGECAL_SCORE").write_text("{not json")
    return _score(tmp)


def _unfinished_run(tmp: Path) -> list[str]:
    run = Path(_model(tmp))
    (run / "_SUCCESS").unlink()
    return _score(tmp, str(run))


def _truncated_model(tmp: Path) -> list[str]:
    run = Path(_model(tmp))
    text = (run / "model" / "calibration.json").read_text()
    (run / "model" / "calibration.json").write_text(text[: len(text) // 2])
    return _score(tmp, str(run))


def _missing_bucket(tmp: Path) -> list[str]:
    conf = tmp / "engine.yaml"
    conf.write_text(json.dumps({"storage_options": {"endpoint_url": _moto_endpoint(), "anon": True}}))
    # Neither model nor data exists: the bucket is checked before either is read.
    return [
        "score",
        "--model",
        str(tmp / "no-run"),
        "--data",
        str(tmp / "no-data"),
        "--output",
        "s3://judgecal-no-such-bucket/scores",
        "--conf",
        str(conf),
    ]


def _uncommitted_data(tmp: Path) -> list[str]:
    (tmp / "half").mkdir()
    return _score(tmp, None, str(tmp / "half"))


def _other_inputs(tmp: Path) -> list[str]:
    assert CliRunner().invoke(cli, _score(tmp)).exit_code == 0  # a committed score, then another model into it
    other = write_run(tmp / "other", model_json({"j1": 2.0, "j2": 0.5, "j3": -0.25}))
    return _score(tmp, other, str(tmp / "arena"))


def _inside_data(tmp: Path) -> list[str]:
    argv = _score(tmp)
    return [*argv[:6], str(tmp / "arena" / "scores"), *argv[7:]]


CASES: dict[str, Callable[[Path], list[str]]] = {
    "score-output-other-inputs": _other_inputs,
    "score-output-inside-data": _inside_data,
    "score-output-foreign": _foreign_output,
    "score-output-foreign-in-results": _foreign_in_results,
    "score-output-bad-marker": _bad_marker,
    "score-model-not-found": lambda t: _score(t, str(t / "no-run")),
    "score-model-unfinished": _unfinished_run,
    "score-model-format": lambda t: _score(t, _model(t, format="judgecal.calibration/v1")),
    "score-model-truncated": _truncated_model,
    "score-model-not-finite": lambda t: _score(t, _model(t, aggregator__weights=[1.0, math.nan, 0.5])),
    "score-model-probability": lambda t: _score(t, _model(t, aggregator__class_prior=-0.2)),
    "score-model-duplicate-judge": lambda t: _score(t, _model(t, aggregator__judge_ids=["j1", "j2", "j1"])),
    "score-model-calibrator": lambda t: _score(t, _model(t, calibrator__b=math.inf)),
    "score-model-conformal": lambda t: _score(
        t, _model(t, conformal=[{"alpha": 0.1, "threshold": 1.5, "rank": 9, "n_calibration": 9}])
    ),
    "score-model-gold-positive": lambda t: _score(t, _model(t, fitted_on={"orientation": "gold_positive"})),
    "score-data-missing": lambda t: _score(t, None, str(t / "no-data")),
    "score-data-uncommitted": _uncommitted_data,
    "score-no-sample": lambda t: _score(t, None, None, "--sample", "3"),
    "score-unknown-judges": lambda t: _score(
        t, _model(t, aggregator__judge_ids=["j1", "j2"], aggregator__weights=[1.0, 0.5])
    ),
    "score-judge-coverage": lambda t: _score(
        t, _model(t, aggregator__judge_ids=["j1", "k1", "k2"]), None, "--ignore-unknown-judges"
    ),
    "score-missing-bucket": _missing_bucket,
    "score-min-coverage-range": lambda t: _score(t, None, None, "--min-judge-coverage", "1.5"),
}
