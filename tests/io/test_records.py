"""The one NaN-safe JSON encoder: what it writes is strict JSON (no NaN) that reads back to the plain values."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.io.records import json_records, plain, to_json


def strict_load(text: str):
    # Python's json accepts NaN/Infinity unless told otherwise; a strict reader must accept ours.
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))


def test_undefined_figures_become_null_and_numpy_values_plain():
    obj = {
        "nll": np.float64(0.25),
        "ece": np.float64("nan"),
        "gap": float("-inf"),
        "n": np.int64(3),
        "ok": np.bool_(True),
        "cells": np.array([[1.5, np.nan], [2.0, 3.0]]),
        "seeds": (1, 2),
        "when": dt.datetime(2026, 11, 25, 12, 0),
        "at": pd.Timestamp("2026-11-25T12:00:00Z"),
    }
    assert strict_load(to_json(obj)) == {
        "nll": 0.25,
        "ece": None,
        "gap": None,
        "n": 3,
        "ok": True,
        "cells": [[1.5, None], [2.0, 3.0]],
        "seeds": [1, 2],
        "when": "2026-11-25T12:00:00",
        "at": "2026-11-25T12:00:00+00:00",
    }


def test_a_value_json_cannot_hold_is_an_error_not_a_string():
    with pytest.raises(TypeError):
        to_json({"path": object()})


def test_frame_records_are_plain_row_dicts():
    frame = pd.DataFrame({"judge": ["a", "b"], "accuracy": [0.5, np.nan], "n": [2, 0]})
    records = json_records(frame)
    assert records == [{"judge": "a", "accuracy": 0.5, "n": 2}, {"judge": "b", "accuracy": None, "n": 0}]
    assert all(type(r["n"]) is int for r in records)  # numpy int64 unwrapped
    assert plain("A") == "A" and plain(None) is None
