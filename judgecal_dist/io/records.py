"""Figures as JSON: the one NaN-safe encoder every summary, manifest, report and model card goes through.

JSON has no NaN or infinity, and ``json`` does not know numpy scalars, arrays or timestamps; an undefined figure
(the accuracy of a judge that never voted, a metric over an empty slice) is written as ``null``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["plain", "json_records", "jsonable", "to_json", "json_depth"]


def plain(value: Any) -> Any:
    """``value`` as a plain Python value for JSON: numpy scalars unwrapped, a non-finite float as None.

    Examples
    --------
    >>> plain(np.float64(0.25)), plain(np.int64(3)), plain(float("nan")), plain("A")
    (0.25, 3, None, 'A')
    """
    value = value.item() if isinstance(value, np.generic) else value
    return None if isinstance(value, float) and not np.isfinite(value) else value


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of ``frame`` as JSON-ready dicts (column -> :func:`plain` value), in row order."""
    return [{k: plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def jsonable(obj: Any) -> Any:
    """``obj`` with every container made a dict or list and every leaf :func:`plain` (arrays as lists, timestamps
    and dates as ISO 8601 strings), ready for :func:`json.dumps` with ``allow_nan=False``."""
    if isinstance(obj, dict):
        return {key: jsonable(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(value) for value in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if hasattr(obj, "isoformat") and not isinstance(obj, (str, bytes)):
        return obj.isoformat()
    return plain(obj)


def to_json(obj: Any, *, indent: int | None = 2) -> str:
    """JSON text of ``obj`` (see :func:`jsonable`); a value JSON cannot hold raises instead of writing ``NaN``.

    Raises
    ------
    TypeError
        A leaf of a type JSON has no form for.

    Examples
    --------
    >>> to_json({"nll": np.float64(0.5), "ece": float("nan"), "n": np.arange(2)}, indent=None)
    '{"nll": 0.5, "ece": null, "n": [0, 1]}'
    """
    return json.dumps(jsonable(obj), indent=indent, allow_nan=False)


_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')


def json_depth(raw: bytes, *, limit: int | None = None) -> int:
    """How deeply the arrays and objects of a JSON text nest, read without parsing it (brackets inside strings
    do not count), so that a document nested past what a reader takes is refused before ``json.loads`` recurses.

    Examples
    --------
    >>> json_depth(b'{"a": [[1], "]]]"]}'), json_depth(b"3")
    (3, 0)

    With ``limit``, a text with no more than ``limit`` opening brackets in all (a long list of ids) is answered
    with that count (at least its depth, at most ``limit``) from two byte counts, without the scan.
    """
    opened = raw.count(b"[") + raw.count(b"{")
    if limit is not None and opened <= limit:
        return opened
    stripped = np.frombuffer(_JSON_STRING.sub(b'""', raw), dtype=np.uint8)
    steps = np.isin(stripped, (ord("["), ord("{"))).astype(np.int64) - np.isin(stripped, (ord("]"), ord("}")))
    return int(np.cumsum(steps).max(initial=0))
