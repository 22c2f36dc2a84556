"""The model file is checked when it is read: a tampered or truncated file is refused with the file and the key."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.scoring.artifact import load_calibration
from tests.scoring.support import WEIGHTS, model_json


def _write(folder: Path, text: str) -> str:
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "calibration.json").write_text(text)
    (folder / "_SUCCESS").write_text("")
    return str(folder)


def _tampered(edit) -> dict:
    model = copy.deepcopy(model_json())
    edit(model)
    return model


TAMPERED = {
    "nan-weight": (
        lambda m: m["aggregator"]["weights"].__setitem__(1, math.nan),
        r"aggregator: weights: expected 3 finite numbers",
    ),
    "infinite-weight": (
        lambda m: m["aggregator"]["weights"].__setitem__(0, math.inf),
        r"aggregator: weights: expected 3 finite",
    ),
    "string-weight": (
        lambda m: m["aggregator"]["weights"].__setitem__(0, "1.0"),
        r"aggregator: weights: expected 3 finite",
    ),
    "short-weights": (
        lambda m: m["aggregator"]["weights"].pop(),
        r"aggregator: weights: expected 3 finite numbers .*got 2",
    ),
    "negative-prior": (
        lambda m: m["aggregator"].__setitem__("class_prior", -0.2),
        r"aggregator: class_prior: must be in \(0, 1\), got -0\.2",
    ),
    "prior-one": (
        lambda m: m["aggregator"].__setitem__("class_prior", 1.0),
        r"aggregator: class_prior: must be in \(0, 1\)",
    ),
    "duplicated-judge": (
        lambda m: m["aggregator"].__setitem__("judge_ids", ["j1", "j2", "j1"]),
        r"judge_ids: 1 judge\(s\) listed twice \(e\.g\. \['j1'\]\)",
    ),
    "no-judges": (
        lambda m: m["aggregator"].update(judge_ids=[], weights=[]),
        r"judge_ids: expected a non-empty list of strings",
    ),
    "numeric-judge": (
        lambda m: m["aggregator"].__setitem__("judge_ids", ["j1", 2, "j3"]),
        r"judge_ids: expected a non-empty list of strings",
    ),
    "nan-calibrator": (
        lambda m: m["calibrator"].__setitem__("a", math.nan),
        r"calibrator: a: expected a finite number",
    ),
    "missing-calibrator-key": (lambda m: m["calibrator"].pop("c"), r"calibrator: missing key 'c'"),
    "negative-penalty": (
        lambda m: m["calibrator"].__setitem__("penalty", -1.0),
        r"calibrator: penalty: must be in \(0, inf\)",
    ),
    "eps-too-large": (lambda m: m.__setitem__("eps", 0.7), r"eps: must be in \(0, 0\.5\)"),
    "threshold-out-of-range": (
        lambda m: m["conformal"][1].__setitem__("threshold", 1.5),
        r"conformal\[1\]: threshold: expected None, 'inf' or a number in \[0, 1\]",
    ),
    "negative-threshold": (lambda m: m["conformal"][0].__setitem__("threshold", -0.1), r"conformal\[0\]: threshold"),
    "alpha-zero": (
        lambda m: m["conformal"][0].__setitem__("alpha", 0.0),
        r"conformal\[0\]: alpha: must be in \(0, 1\)",
    ),
    "aggregator-not-object": (
        lambda m: m.__setitem__("aggregator", [1, 2]),
        r"aggregator: expected an object, got list",
    ),
    "conformal-not-list": (lambda m: m.__setitem__("conformal", {"alpha": 0.1}), r"conformal: expected a list"),
    "item-ids-not-strings": (
        lambda m: m.__setitem__("fitted_on", {"dataset": "d", "item_ids": [1, 2]}),
        r"fitted_on: item_ids: expected a list of item id strings",
    ),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_tampered_model_is_refused_naming_file_and_key(case, tmp_path):
    edit, message = TAMPERED[case]
    run = _write(tmp_path, json.dumps(_tampered(edit)))  # json.dumps writes NaN / Infinity as Python reads them
    with pytest.raises(InputError, match=message) as err:
        load_calibration(run)
    assert str(err.value).startswith(f"{run}/model/calibration.json: ")


def test_truncated_model_is_refused(tmp_path):
    text = json.dumps(model_json())
    run = _write(tmp_path, text[: len(text) // 2])
    with pytest.raises(InputError, match=r"calibration\.json: not valid JSON .*truncated or not a model"):
        load_calibration(run)


def test_valid_model_loads_with_its_fingerprint_and_calibration_items(tmp_path):
    import hashlib

    model = model_json() | {"fitted_on": {"dataset": "arena", "item_ids": ["i1", "i2"], "orientation": "natural"}}
    text = json.dumps(model)
    cal = load_calibration(_write(tmp_path, text))
    assert cal.judge_ids == list(WEIGHTS) and cal.alphas == [0.1, 0.2]
    np.testing.assert_array_equal(cal.aggregator.weights_, list(WEIGHTS.values()))
    assert cal.digest == hashlib.sha256(text.encode()).hexdigest()
    assert (cal.fitted_dataset, cal.fitted_items) == ("arena", ("i1", "i2"))
