"""Probes: accidents a user or a scheduler makes with ``judgecal score``, each run through the command line.

A foreign output folder, a rejected ``--data`` after an output was chosen, an ``s3://`` output, a table that
shares no judge with the model, and hand-edited or truncated model files. Each probe states what must hold.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from tests.scoring.support import ITEMS, model_json, write_arena, write_run


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> str:
    return write_arena(str(tmp_path_factory.mktemp("arena") / "data"))


def _score(model: str, data: str, out: str, *extra: str):
    return CliRunner().invoke(cli, ["score", "--model", model, "--data", data, "--output", out, *extra])


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _user_folder(folder: Path) -> dict[str, bytes]:
    """A folder of a user's own work that happens to use score's names."""
    for name in ("items/mine.parquet", "summary/notes.md", "figures/plot.png", "summary.json"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(f"user's {name}".encode())
    return _snapshot(folder)


def test_probe_foreign_output_folder_is_left_untouched(arena, tmp_path):
    out = tmp_path / "work"
    before = _user_folder(out)
    result = _score(write_run(tmp_path / "run", model_json()), arena, str(out))
    assert result.exit_code == 2 and "did not write" in result.output and "--output" in result.output
    assert _snapshot(out) == before


@pytest.mark.parametrize("owned", [False, True], ids=["user-folder", "score-folder"])
def test_probe_rejected_data_deletes_nothing(owned, arena, tmp_path):
    out = tmp_path / "out"
    run = write_run(tmp_path / "run", model_json())
    if owned:  # a committed score, then a rerun with a mistyped --data
        assert _score(run, arena, str(out)).exit_code == 0
        before = _snapshot(out)
    else:
        before = _user_folder(out)
    result = _score(run, str(tmp_path / "mistyped"), str(out))
    assert result.exit_code == 2 and "mistyped" in result.output
    assert _snapshot(out) == before


@pytest.mark.s3
def test_probe_s3_output_works(arena, tmp_path, s3_server, s3_bucket):
    import pyarrow.parquet as pq
    import s3fs

    out = f"{s3_bucket}/weekly/scores"
    result = _score(write_run(tmp_path / "run", model_json()), arena, out, "--engine", "local")
    assert result.exit_code == 0, result.output
    fs = s3fs.S3FileSystem(skip_instance_cache=True)  # the endpoint and credentials from the environment
    assert fs.exists(f"{out}/_SUCCESS") and not fs.exists(f"{out}/_tmp")
    assert pq.read_table(f"{out.removeprefix('s3://')}/items", filesystem=fs).num_rows == len(ITEMS)


def test_probe_table_sharing_no_judge_writes_no_confident_verdicts(arena, tmp_path):
    strangers = write_run(tmp_path / "run", model_json({"k1": 1.0, "k2": 0.5, "k3": -0.2}))
    out = tmp_path / "out"
    result = _score(strangers, arena, str(out), "--ignore-unknown-judges")
    assert result.exit_code == 2 and "3 of the model's 3 judges have no verdicts" in result.output
    assert "--min-judge-coverage 0" in result.output and not out.exists()
    forced = _score(strangers, arena, str(out), "--ignore-unknown-judges", "--min-judge-coverage", "0")
    assert forced.exit_code == 0, forced.output
    items = pd.read_parquet(out / "items")
    assert items["p"].isna().all() and items["verdict"].isna().all()
    (row,) = json.loads((out / "summary.json").read_text())["datasets"]
    assert row["win_rate"] is None and row["items_without_votes"] == len(ITEMS)


TAMPERED = {
    "nan-weight": (lambda m: m["aggregator"]["weights"].__setitem__(0, math.nan), "aggregator: weights"),
    "negative-probability": (lambda m: m["aggregator"].__setitem__("class_prior", -0.5), "aggregator: class_prior"),
    "duplicated-judge": (lambda m: m["aggregator"].__setitem__("judge_ids", ["j1", "j1", "j3"]), "judge_ids"),
}


@pytest.mark.parametrize("case", [*TAMPERED, "truncated-json"])
def test_probe_tampered_model_is_refused_before_anything_is_written(case, arena, tmp_path):
    model = model_json()
    if case in TAMPERED:
        TAMPERED[case][0](model)
    run = Path(write_run(tmp_path / "run", model))
    if case == "truncated-json":
        text = (run / "model" / "calibration.json").read_text()
        (run / "model" / "calibration.json").write_text(text[: len(text) * 2 // 3])
    key = TAMPERED[case][1] if case in TAMPERED else "not valid JSON"
    out = tmp_path / "out"
    result = _score(str(run), arena, str(out))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith(f"Error: {run}/model/calibration.json: ") and key in result.output
    assert not out.exists()
