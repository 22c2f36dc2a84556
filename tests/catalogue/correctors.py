"""Catalogue cases: continuous corrector models (a tampered file) and ``judgecal score`` with a corrector."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from judgecal_dist.io.dataset import write_dataset

LINEAR: dict[str, Any] = {
    "format": "judgecal.linear-corrector/v1",
    "judge_id": "mini",
    "fit": "conjugate",
    "input_range": [1.0, 10.0],
    "rubrics": [
        {"rubric": "chat", "alpha": 0.5, "beta": 0.8, "sigma": 0.3, "cov": [[0.01, 0.0], [0.0, 0.001]], "sigma2": 0.1}
    ],
}
OT: dict[str, Any] = {
    "format": "judgecal.ot-corrector/v1",
    "judge_id": "mini",
    "rubrics": [{"rubric": "chat", "knots": [1.0, 3.0, 5.0], "levels": [0.0, 0.5, 1.0], "y_sorted": [1.0, 2.0, 4.0]}],
}


def _data(tmp: Path, scores: list[float], rubrics: list[str | None], judge: str = "mini") -> str:
    n = len(scores)
    verdicts = pa.table(
        {
            "dataset": ["d"] * n,
            "item_id": [f"i{k}" for k in range(n)],
            "judge_id": [judge] * n,
            "score": scores,
            "rubric": rubrics,
        }
    )
    labels = pa.table({"dataset": ["d"], "item_id": ["i0"], "label": [None]}, schema=_LABELS)
    url = str(tmp / "data")
    write_dataset(url, {"verdicts": verdicts, "labels": labels}, {"adapter": "test"})
    return url


_LABELS = pa.schema([("dataset", pa.string()), ("item_id", pa.string()), ("label", pa.string())])


def _score(tmp: Path, doc: dict[str, Any], data: str | None = None) -> list[str]:
    path = tmp / "model" / "model.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    data = data or _data(tmp, [2.0, 7.0], ["chat", "chat"])
    return ["score", "--model", str(path), "--data", data, "--output", str(tmp / "out"), "--engine", "local"]


def _edited(doc: dict[str, Any], **rubric: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    out["rubrics"][0] |= rubric
    return out


def _flow(tmp: Path, edit: Callable[[Path, dict[str, Any]], None]) -> list[str]:
    """A tiny trained flow saved under tmp/model, then ``edit(folder, document)`` tampers with it."""
    from judgecal_dist.methods.continuous.score_flow import ScoreFlow
    from judgecal_dist.models import flow_from_estimator, save_model

    est = ScoreFlow(epochs=1, hidden=4, n_passes=0).fit([1.0, 3.0, 5.0], [1.5, 3.0, 4.5])
    url = save_model(flow_from_estimator(est, judge_id="mini"), str(tmp / "model" / "model.json"))
    folder = Path(url).parent
    doc = json.loads(Path(url).read_text())
    edit(folder, doc)
    Path(url).write_text(json.dumps(doc))
    data = _data(tmp, [2.0, 4.0], [None, None])
    return ["score", "--model", url, "--data", data, "--output", str(tmp / "out"), "--engine", "local"]


def _flip_byte(folder: Path, doc: dict[str, Any]) -> None:
    weights = folder / doc["weights"]["file"]
    blob = bytearray(weights.read_bytes())
    blob[-1] ^= 0x01
    weights.write_bytes(bytes(blob))


def _remove(folder: Path, doc: dict[str, Any]) -> None:
    (folder / doc["weights"]["file"]).unlink()


def _wider(folder: Path, doc: dict[str, Any]) -> None:
    doc["architecture"]["hidden"] = 8


CASES: dict[str, Callable[[Path], list[str]]] = {
    "correctors-weights-hash": lambda t: _flow(t, _flip_byte),
    "correctors-weights-missing": lambda t: _flow(t, _remove),
    "correctors-weights-shape": lambda t: _flow(t, _wider),
    "correctors-ot-knots": lambda t: _score(t, _edited(OT, knots=[1.0, 5.0, 3.0])),
    "correctors-linear-cov": lambda t: _score(t, _edited(LINEAR, cov=[[0.01, 0.5], [0.5, 0.001]])),
    "correctors-range": lambda t: _score(t, LINEAR | {"input_range": [10.0, 1.0]}),
    "correctors-score-range": lambda t: _score(t, LINEAR, _data(t, [2.0, 12.0], ["chat", "chat"])),
    "correctors-unknown-rubric": lambda t: _score(t, LINEAR, _data(t, [2.0, 3.0], ["chat", "code"])),
    "correctors-judge-absent": lambda t: _score(t, LINEAR, _data(t, [2.0, 3.0], ["chat", "chat"], judge="nano")),
}
