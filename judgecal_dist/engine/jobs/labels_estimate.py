"""The Spark job of ``judgecal label estimate``: one pass over the packed item votes, each target's sums.

The items are the vote codec's packed rows (:func:`judgecal_dist.engine.jobs.scorer.item_votes`: the verdict parts
scanned in the tasks, one row per item with its label), joined with the group columns of the ``items`` table and
the queue's inclusion probabilities (broadcast: a queue holds the labels bought, thousands of rows). The caller's
kernel (:func:`judgecal_dist.labels.estimate_kernel.partition_moments`: the scoring kernel, then the targets' sums)
runs in ``mapInArrow`` on every partition and the partials are summed per target
(:func:`~judgecal_dist.engine.jobs.scorer.partition_sums`); the in-process runner calls the same kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import scorer

__all__ = ["estimate_sums"]

_KEYS = ["dataset", "item_id"]


def estimate_sums(
    engine: EngineConfig,
    data_url: str,
    judge_ids: Sequence[str],
    *,
    sample: int,
    columns: Sequence[str],
    queue: pa.Table | None,
    kernel: scorer.PartitionFn,
    schema: pa.Schema,
) -> tuple[pd.DataFrame, Any]:
    """Per-target sums of ``kernel`` over every item of ``data_url`` (rows of ``schema`` keyed by ``target``) and
    the scan's tally accumulator (the judge and verdict checks read it after the job).

    Items keep their row when the ``items`` table has no row for them (null group columns) and when no queue lists
    them (null ``inclusion_prob``): every scored item is in the population.
    """
    spark = scorer.session(engine)
    items, tally = scorer.item_votes(engine, data_url, judge_ids, sample=sample)
    if columns:
        meta = scorer.read_table(spark, data_url, "items").select(*_KEYS, *columns)
        items = items.join(meta, on=_KEYS, how="left")
    if queue is not None:
        probs = spark.createDataFrame(queue.select([*_KEYS, "inclusion_prob"]).to_pandas())
        items = items.join(F.broadcast(probs), on=_KEYS, how="left")
    return scorer.partition_sums(items, kernel, schema, ["target"]), tally
