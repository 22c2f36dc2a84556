"""Probes: model documents and fit inputs at the edges, each through the command line (click's runner, in process).

Extreme but finite numbers and missing fields in a model document, a model or weights file that is a link to a
device, a document nested past any model's depth, an item labelled twice for ``fit``. Each probe asserts exit 2,
one line naming the file (and the field), and nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from tests.faults import set_dotted
from tests.scoring.support import model_json, write_arena

PIPELINE = {
    "format": "judgecal.binary-pipeline/v1",
    "judge_ids": ["j1", "j2", "j3"],
    "aggregator": {"name": "one_coin", "weights": [1.0, 0.5, -0.25], "class_prior": 0.5},
    "calibrator": {"name": "platt", "slope": 1.0, "intercept": 0.0},
    "eps": 1e-6,
    "conformal": [{"alpha": 0.1, "threshold": 0.4, "rank": 9, "n_calibration": 9}],
}


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> str:
    return write_arena(str(tmp_path_factory.mktemp("arena") / "data"))


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(argv: list[str]) -> str:
    """The one error line of a command that must exit 2 (no traceback)."""
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def _score(model: Path, data: str, out: Path) -> list[str]:
    return ["score", "--model", str(model), "--data", data, "--output", str(out), "--engine", "local"]


def _edit(doc: dict, dotted: str, value: object) -> dict:
    doc = json.loads(json.dumps(doc))
    set_dotted(doc, dotted, value)
    return doc


EXTREMES = {
    "slope-1e308": ("calibrator.slope", 1e308, "calibrator.slope = 1e+308 is outside [-1000, 1000]"),
    "weights-1e305": ("aggregator.weights.1", 1e305, "aggregator.weights.1 = 1e+305 is outside [-1000, 1000]"),
    "prior-1e-300": ("aggregator.class_prior", 1e-300, "aggregator.class_prior = 1e-300 is outside [1e-12, "),
    "missing-eps": ("eps", ..., "eps: required, and missing"),
    "missing-thresholds": ("conformal", ..., "conformal: required, and missing"),
}


@pytest.mark.parametrize("case", list(EXTREMES))
def test_probe_extreme_or_incomplete_model_document_is_refused_naming_the_field(case, arena, tmp_path):
    field, value, message = EXTREMES[case]
    model = tmp_path / "model.json"
    model.write_text(json.dumps(_edit(PIPELINE, field, value)))
    out = tmp_path / "out"
    error = _refused(_score(model, arena, out))
    assert error.startswith(f"Error: {model}: {message}"), error
    assert not out.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [("aggregator.weights.0", 1e305), ("aggregator.class_prior", 1e-300), ("conformal", ...)],
    ids=["weights-1e305", "prior-1e-300", "missing-thresholds"],
)
def test_probe_earlier_calibration_file_with_extremes_is_refused_naming_the_field(field, value, arena, tmp_path):
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "model" / "calibration.json").write_text(json.dumps(_edit(model_json(), field, value)))
    (run / "_SUCCESS").write_text("")
    out = tmp_path / "out"
    error = _refused(_score(run, arena, out))
    assert error.startswith(f"Error: {run}/model/calibration.json: ") and field.split(".")[-1] in error, error
    assert not out.exists()


def test_probe_implausible_model_is_applied_with_a_warning_naming_the_field(arena, tmp_path):
    model = tmp_path / "model.json"
    model.write_text(json.dumps(_edit(PIPELINE, "calibrator.slope", 250.0)))
    result = CliRunner().invoke(cli, _score(model, arena, tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert f"{model}: calibrator.slope = 250 is outside the plausible range [-100, 100]" in result.output


@pytest.mark.parametrize("target", ["/dev/zero", "folder"])
def test_probe_model_file_that_is_a_device_or_a_folder_is_refused_unread(target, arena, tmp_path):
    model = tmp_path / "model.json"
    if target == "folder":
        model.mkdir()
    else:
        model.symlink_to(target)
    out = tmp_path / "out"
    error = _refused(_score(model, arena, out))
    assert error.startswith(f"Error: {model}: not a regular file"), error
    assert not out.exists()


def test_probe_flow_weights_linked_to_a_device_are_refused_unread(arena, tmp_path):
    """The weights file a flow document names beside it: refused by its own name before a byte is read."""
    doc = {
        "format": "judgecal.flow-corrector/v1",
        "judge_id": "j1",
        "rubrics": ["chat"],
        "architecture": {"hidden": 8, "embed_dim": 2, "dropout": 0.1, "n_steps": 4},
        "n_passes": 0,
        "weights": {"file": "flow-weights.safetensors", "container": "safetensors", "sha256": "0" * 64},
    }
    (tmp_path / "model.json").write_text(json.dumps(doc))
    (tmp_path / "flow-weights.safetensors").symlink_to("/dev/zero")
    out = tmp_path / "out"
    error = _refused(_score(tmp_path / "model.json", arena, out))
    assert error.startswith(f"Error: {tmp_path}/flow-weights.safetensors: not a regular file"), error
    assert not out.exists()


def test_probe_deeply_nested_model_document_is_refused_naming_the_file(arena, tmp_path):
    model = tmp_path / "model.json"
    model.write_text("[" * 200_000 + "]" * 200_000)
    out = tmp_path / "out"
    error = _refused(_score(model, arena, out))
    assert error.startswith(f"Error: {model}: nested deeper than the 32 levels"), error
    assert not out.exists()


# -- fit: an item labelled twice ------------------------------------------------------------------------------------
def _labelled_twice(tmp_path: Path, same: bool) -> Path:
    data = tmp_path / "data"
    result = CliRunner().invoke(cli, ["generate", "--items", "60", "--judges", "3", "--seed", "4", str(data)])
    assert result.exit_code == 0, result.output
    labels = pq.read_table(data / "labels" / "part-00000.parquet")
    row = labels.slice(0, 1).to_pylist()[0]
    if not same:
        row["label"] = "B" if row["label"] == "A" else "A"
    pq.write_table(pa.Table.from_pylist([row], schema=labels.schema), data / "labels" / "part-00001.parquet")
    return data


CANDIDATES = {
    "majority": ["aggregators=[majority]", "calibrators=[none]"],
    "one-coin+platt": ["aggregators=[one_coin]", "calibrators=[platt]"],
    "dawid-skene": ["aggregators=[dawid_skene]", "calibrators=[none]"],
    "stacking+isotonic": ["aggregators=[stacking, log_odds]", "calibrators=[isotonic, beta]"],
}


@pytest.mark.parametrize("same", [True, False], ids=["same-label", "other-label"])
@pytest.mark.parametrize("candidates", list(CANDIDATES))
def test_probe_fit_refuses_an_item_labelled_twice_for_every_candidate_set(candidates, same, tmp_path):
    data = _labelled_twice(tmp_path, same)
    before = _tree(data)
    out = tmp_path / "out"
    sets = [arg for s in CANDIDATES[candidates] for arg in ("--set", s)]
    error = _refused(["fit", "--data", str(data), "--output", str(out), "--serial", *sets])
    assert error.startswith(f"Error: {data}/labels: dataset+item_id: duplicate keys (2 rows"), error
    assert "one label" in error
    assert not out.exists() and _tree(data) == before
