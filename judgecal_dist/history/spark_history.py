"""The history tables read through Spark, for histories too large for one process (``judgecal drift --engine``).

Gives exactly the rows and types of :func:`judgecal_dist.history.store.read_history`: the latest attempt of each
run id, ``study`` and ``date`` from the Hive partition path as strings, in
:func:`~judgecal_dist.history.store.sort_history` order. The Spark job is the engine's
(:func:`judgecal_dist.engine.results.history_reader.read_latest`); this module names the tables and orders the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from judgecal_dist.engine.results.history_reader import read_latest
from judgecal_dist.history.store import HISTORY_TABLES, history_url, sort_history

__all__ = ["read_history_spark"]


def read_history_spark(
    spark: Any,
    output: str,
    table: str,
    *,
    study: str | None = None,
    run_ids: Sequence[str] | None = None,
    judge_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The rows of history ``table`` of ``study`` (optionally only ``run_ids`` / ``judge_ids``) as pandas, read by
    the Spark session ``spark``.

    An empty frame when there is no history yet, as :func:`~judgecal_dist.history.store.read_history` returns.
    """
    if table not in HISTORY_TABLES:
        raise ValueError(f"table: must be one of {HISTORY_TABLES}, got {table!r}")
    base = f"{history_url(output)}/{table}"
    frame = read_latest(spark, base, study=study, run_ids=run_ids, judge_ids=judge_ids)
    return pd.DataFrame() if frame.empty else sort_history(frame)
