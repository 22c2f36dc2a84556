"""A six-item arena table with hand-computed probabilities, and model files, shared by the scoring tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy.special import expit

from judgecal_dist.io.dataset import write_dataset

WEIGHTS = {"j1": 1.0, "j2": 0.5, "j3": -0.25}
#: item -> (model_a, model_b, label, votes of j1, j2, j3); "" = no verdict, "tie" = missing for the model
ITEMS = {
    "i1": ("m1", "m2", "A", "A", "A", "B"),
    "i2": ("m1", "m2", "B", "B", "A", ""),
    "i3": ("m2", "m3", None, "A", "tie", "A"),
    "i4": ("m3", "m1", "A", "", "B", "B"),
    "i5": ("m2", "m1", None, "B", "B", "A"),
    "i6": ("m3", "m2", "B", "tie", "", ""),
}


def model_json(judges: dict[str, float] = WEIGHTS, fmt: str = "judgecal.calibration/v2") -> dict:
    """Identity beta map; conformal thresholds 0.4 (y in the set iff p_y >= 0.6) and 0.7 (iff p_y >= 0.3)."""
    return {
        "format": fmt,
        "aggregator": {
            "name": "one_coin",
            "judge_ids": list(judges),
            "weights": list(judges.values()),
            "class_prior": 0.5,
        },
        "calibrator": {"name": "beta", "a": 1.0, "b": 1.0, "c": 0.0},
        "conformal": [
            {"alpha": 0.1, "threshold": 0.4, "rank": 9, "n_calibration": 9},
            {"alpha": 0.2, "threshold": 0.7, "rank": 8, "n_calibration": 9},
        ],
        "eps": 1e-6,
        "vote_codes": {"A": 1, "B": 0, "missing": -1, "tie": "missing"},
    }


def write_run(folder: Path, model: dict) -> str:
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "calibration.json").write_text(json.dumps(model))
    (folder / "_SUCCESS").write_text("")
    return str(folder)


def write_arena(url: str) -> str:
    """The ITEMS table as an ingested dataset (verdicts, labels, and an items table with the response models)."""
    rows = [(i, j, v) for i, spec in ITEMS.items() for j, v in zip(WEIGHTS, spec[3:], strict=True) if v]
    verdicts = pa.table(
        {
            "dataset": ["arena"] * len(rows),
            "item_id": [r[0] for r in rows],
            "judge_id": [r[1] for r in rows],
            "verdict": [r[2] for r in rows],
        }
    )
    labels = pa.table(
        {"dataset": ["arena"] * len(ITEMS), "item_id": list(ITEMS), "label": [s[2] for s in ITEMS.values()]}
    )
    items = pa.table(
        {
            "dataset": ["arena"] * len(ITEMS),
            "item_id": list(ITEMS),
            "model_a": [s[0] for s in ITEMS.values()],
            "model_b": [s[1] for s in ITEMS.values()],
        }
    )
    write_dataset(url, {"verdicts": verdicts, "labels": labels, "items": items}, {"adapter": "test"})
    return url


def expected_p(weights: dict[str, float] = WEIGHTS) -> pd.Series:
    """sigma(sum_j z_ij w_j) by hand (prior 1/2, identity beta inside [eps, 1 - eps]); NaN without a model vote."""
    p = {}
    for item, spec in ITEMS.items():
        z = [{"A": 1.0, "B": -1.0}.get(v, 0.0) if j in weights else 0.0 for v, j in zip(spec[3:], WEIGHTS, strict=True)]
        voted = any(zj != 0.0 for zj in z)
        p[item] = (
            float(expit(sum(zj * weights.get(j, 0.0) for zj, j in zip(z, WEIGHTS, strict=True)))) if voted else np.nan
        )
    return pd.Series(p)
