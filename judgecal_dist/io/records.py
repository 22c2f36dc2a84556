"""Figures as JSON values: the one NaN-safe conversion every summary, report and model card goes through.

JSON has no NaN or infinity, and ``json`` does not know numpy scalars; an undefined figure (the accuracy of a
judge that never voted, a metric over an empty slice) is written as ``null``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["plain", "json_records"]


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
