"""Catalogue cases: the model format family (a model document refused by ``judgecal score``) and ``judgecal fit``."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.scoring.support import write_arena

DOCUMENT: dict[str, Any] = {
    "format": "judgecal.binary-pipeline/v1",
    "judge_ids": ["j1", "j2", "j3"],
    "aggregator": {"name": "one_coin", "weights": [1.0, 0.5, -0.25], "class_prior": 0.5},
    "calibrator": {"name": "isotonic", "x": [-1.0, 0.0, 1.0], "y": [0.1, 0.5, 0.9]},
    "eps": 1e-6,
    "conformal": [],
}


def _score(tmp: Path, *, text: str | None = None, **changes: Any) -> list[str]:
    doc = json.loads(json.dumps(DOCUMENT))
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if value is ...:
            del (doc[section] if name else doc)[name or section]
        else:
            (doc[section] if name else doc)[name or section] = value
    path = tmp / "model.json"
    path.write_text(json.dumps(doc) if text is None else text)
    data = write_arena(str(tmp / "arena"))
    return ["score", "--model", str(path), "--data", data, "--output", str(tmp / "out"), "--engine", "local"]


DAVIDSON: dict[str, Any] = {
    "format": "judgecal.davidson/v2",
    "tie": "global",
    "decision": "mae",
    "n": 4,
    "judges": [{"judge_id": "j1", "beta": 1.5, "eta0": -0.5}, {"judge_id": "j2", "beta": 0.8, "gamma": 1.0}],
}


ESCALATION: dict[str, Any] = {
    "format": "judgecal.escalation/v2",
    "cheap_tier": "mini",
    "full_tier": "full",
    "prices": {"mini": [0.75, 4.5]},
    "collections": [{"dataset": "rb2k8", "prompt_variant": "base", "theta": 1.0}],
}


FCPS: dict[str, Any] = {
    "format": "judgecal.fcps/v1",
    "path": ["j1", "j2"],
    "k": 1,
    "encoding": {"alphabet": ["B", "A", "tie", "err"], "missing": "err", "scalar": [0.0, 1.0, 0.5, 0.5]},
    "family": {
        "name": "table",
        "alpha": 1.0,
        "fallback": "global",
        "marginal": 0.5,
        "levels": [{"patterns": [[0], [1]], "n": [4.0, 6.0], "s": [1.0, 7.0]}],
    },
}


_FLOW = {
    "architecture": {"hidden": 8, "embed_dim": 2, "dropout": 0.1, "n_steps": 4},
    "weights": {"file": "flow-weights-0.safetensors", "container": "safetensors", "sha256": "0" * 64},
}
FLOWS_PER_RUBRIC: dict[str, Any] = {
    "format": "judgecal.flow-per-rubric/v1",
    "judge_id": "j1",
    "flows": [
        {"rubric": "chat", **_FLOW},
        {"rubric": "chat", **_FLOW, "weights": {**_FLOW["weights"], "file": "flow-weights-1.safetensors"}},
    ],
}


def _davidson(tmp: Path, doc: dict[str, Any] = DAVIDSON) -> list[str]:
    path = tmp / "model.json"
    path.write_text(json.dumps(doc))
    data = write_arena(str(tmp / "arena"))
    return ["score", "--model", str(path), "--data", data, "--output", str(tmp / "out"), "--engine", "local"]


def _davidson_on_other_data(tmp: Path, votes: str) -> list[str]:
    """A valid Davidson model scored on data of the other kind: verdicts for a pairs model, scores otherwise."""
    from judgecal_dist.io.ingest import ingest
    from tests.io.test_rb2k8 import _example, _write

    doc = DAVIDSON | {"votes": votes, "judges": [{"judge_id": "j1", "beta": 1.5, "eta0": -0.5}]}
    path = tmp / "model.json"
    path.write_text(json.dumps(doc))
    if votes == "score-pairs":
        data = write_arena(str(tmp / "arena"))
    else:
        (tmp / "src").mkdir()
        _write(tmp / "src" / "tiny_k8.jsonl.gz", [_example("1"), _example("2")])
        data = str(tmp / "rb2")
        ingest("rb2-k8", str(tmp / "src"), data)
    return ["score", "--model", str(path), "--data", data, "--output", str(tmp / "out"), "--engine", "local"]


def _device(tmp: Path) -> list[str]:
    """A model path that is a link to a device (reading it would never end)."""
    argv = _score(tmp)
    (tmp / "model.json").unlink()
    (tmp / "model.json").symlink_to("/dev/zero")
    return argv


def _fit(tmp: Path, *sets: str) -> list[str]:
    return ["fit", "--data", write_arena(str(tmp / "arena")), "--output", str(tmp / "out"), *sets]


CASES: dict[str, Callable[[Path], list[str]]] = {
    "models-not-finite": lambda t: _score(t, aggregator__weights=[1.0, math.nan, 0.5]),
    "models-wrong-length": lambda t: _score(t, aggregator__weights=[1.0, 0.5]),
    "models-probability": lambda t: _score(t, aggregator__class_prior=1.2),
    "models-outside-range": lambda t: _score(t, calibrator={"name": "platt", "slope": 1e308, "intercept": 0.0}),
    "models-required-field": lambda t: _score(t, eps=...),
    "models-not-a-file": _device,
    "models-too-deep": lambda t: _score(t, text="[" * 100_000 + "]" * 100_000),
    "models-unknown-aggregator": lambda t: _score(t, aggregator__name="borda"),
    "models-isotonic-order": lambda t: _score(t, calibrator__x=[1.0, 0.0, 2.0]),
    "models-unknown-key": lambda t: _score(t, weights=[1.0]),
    "models-unknown-format": lambda t: _score(t, format="judgecal.binary-pipeline/v9"),
    "models-retired-format": lambda t: _score(t, format="judgecal.escalation/v1"),
    "models-davidson-tie-parameters": _davidson,
    "models-escalation-price": lambda t: _davidson(t, ESCALATION),
    "models-davidson-pairs-on-verdicts": lambda t: _davidson_on_other_data(t, "score-pairs"),
    "models-davidson-verdicts-on-scores": lambda t: _davidson_on_other_data(t, "verdicts"),
    "models-fcps-cell-sum": lambda t: _davidson(t, FCPS),
    "models-flow-per-rubric-repeated": lambda t: _davidson(t, FLOWS_PER_RUBRIC),
    "fit-export-unknown": lambda t: _fit(t, "--set", "export=borda+none@all"),
}
