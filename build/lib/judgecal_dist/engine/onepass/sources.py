"""Where the one-pass replicate evaluation reads its items: a dense panel in memory, or a persisted Spark table.

Both sources expose ``map_reduce(kernel) -> Partial``: ``kernel(votes, labels, group_keys)`` runs on every batch
of labelled items and the per-batch :class:`~judgecal_dist.engine.onepass.kernels.Partial` results are
combined. On Spark each partition's combined partial crosses to the driver as one ``binary`` row, so a pass
returns one row per partition, never one per item.

The Spark table holds one row per labelled item (label A or B) of the chosen dataset: ``group_key`` (Spark's
``xxhash64(group_id)``, :func:`judgecal_dist.splits.group_keys`), ``label`` and the item's dense votes at the
chosen sample as ``binary`` (one byte per judge, judges sorted as :func:`judgecal_dist.engine.jobs.panel.load_panel`
sorts them). It is built by the vote codec's scan (:func:`judgecal_dist.engine.votes.spark.item_votes_spark`:
Spark tasks read the verdict parts with pyarrow and pack each item's votes), joined to the labelled items, and
persisted, so later passes only read bytes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from judgecal_dist.engine.jobs.local import judge_ids_of
from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.engine.jobs.spark import read_table
from judgecal_dist.engine.onepass.kernels import Partial
from judgecal_dist.engine.votes.codec import block_columns, from_binary_column
from judgecal_dist.engine.votes.spark import dense_votes_spark, item_votes_spark, label_codes_spark
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import choose_dataset

__all__ = ["Kernel", "PanelSource", "SparkItemsSource", "spark_items_source"]

log = logging.getLogger(__name__)

Kernel = Callable[[npt.NDArray[np.int8], npt.NDArray[np.int8], npt.NDArray[np.int64]], Partial]
#: Items per batch of the in-memory source (the Spark source uses Arrow's ``maxRecordsPerBatch``).
LOCAL_BATCH_ITEMS = 20_000


@dataclass(frozen=True)
class PanelSource:
    """Batches of a dense :class:`~judgecal_dist.engine.jobs.panel.Panel` (the local engine)."""

    panel: Panel
    batch_items: int = LOCAL_BATCH_ITEMS

    @property
    def judge_ids(self) -> npt.NDArray[np.str_]:
        return self.panel.judge_ids

    @property
    def n_items(self) -> int:
        return self.panel.n_items

    def map_reduce(self, kernel: Kernel) -> Partial:
        panel, total = self.panel, None
        for start in range(0, panel.n_items, self.batch_items):
            rows = slice(start, start + self.batch_items)
            part = kernel(panel.votes[rows], panel.labels[rows], panel.group_keys[rows])
            total = part if total is None else total.combine(part)
        assert total is not None  # a Panel has at least one item
        return total

    def release(self) -> None:
        """Nothing to free: the panel belongs to the caller."""


def _run_partition(batches: Iterator[pa.RecordBatch], kernel: Kernel, n_judges: int) -> Iterator[pa.RecordBatch]:
    # The partition's batches are combined here: one partial per partition crosses to the driver.
    total: Partial | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        votes = from_binary_column(batch.column("votes"), n_judges)
        labels = batch.column("label").to_numpy(zero_copy_only=False).astype(np.int8)
        keys = batch.column("group_key").to_numpy(zero_copy_only=False).astype(np.int64)
        part = kernel(votes, labels, keys)
        total = part if total is None else total.combine(part)
    if total is not None:
        yield pa.RecordBatch.from_arrays([pa.array([total.to_bytes()], pa.binary())], names=["partial"])


@dataclass
class SparkItemsSource:
    """A persisted Spark table of labelled items (see the module docstring); one Spark job per pass."""

    items: DataFrame
    judge_ids: npt.NDArray[np.str_]
    n_items: int

    def map_reduce(self, kernel: Kernel) -> Partial:
        fn = functools.partial(_run_partition, kernel=kernel, n_judges=len(self.judge_ids))
        rows = self.items.mapInArrow(fn, "partial binary").collect()  # one row per partition
        partials = [Partial.from_bytes(bytes(row.partial)) for row in rows]
        total = partials[0]
        for part in partials[1:]:
            total = total.combine(part)
        return total

    def release(self) -> None:
        self.items.unpersist()


def spark_items_source(
    spark: SparkSession,
    data_url: str,
    *,
    dataset: str | None,
    sample: int,
    where: str,
    storage_options: Mapping[str, Any] | None = None,
) -> SparkItemsSource:
    """Build and persist the labelled-items table of ``dataset`` at ``sample`` (module docstring).

    Raises
    ------
    InputError
        Several datasets and none chosen, an unknown dataset, no labelled item, or no verdict at ``sample``.
    """
    labels = read_table(spark, data_url, "labels")
    names = [r.dataset for r in labels.select("dataset").distinct().collect()]
    dataset = choose_dataset(names, dataset, where=where)
    judge_ids = np.array(judge_ids_of(data_url, storage_options, sample=sample, dataset=dataset), dtype=object)
    if not len(judge_ids):
        raise InputError(f"{where}: verdicts: sample: no verdicts for dataset {dataset!r} with sample={sample}")
    labelled = label_codes_spark(labels.where(F.col("dataset") == dataset)).where(F.col("label") >= 0)
    if labelled.limit(1).count() == 0:
        raise InputError(f"{where}: labels: label: no item of dataset {dataset!r} has label A or B")
    items, _ = item_votes_spark(
        spark, data_url, None, judge_ids.tolist(), sample=sample, dataset=dataset, storage_options=storage_options
    )
    blocks = block_columns(len(judge_ids))
    # Labelled items without a verdict stay, with every vote missing (null blocks), as in the dense panel.
    rows = labelled.join(items.select("item_id", "group_id", *blocks), on="item_id", how="left").select(
        F.xxhash64(F.coalesce("group_id", "item_id")).alias("group_key"), "label", *blocks
    )
    n_partitions = max(1, spark.sparkContext.defaultParallelism)
    # coalesce, not repartition: the items are already grouped by the join's shuffle; no second shuffle
    dense = dense_votes_spark(rows, len(judge_ids), keep=("group_key", "label")).coalesce(n_partitions)
    items = dense.persist(StorageLevel.MEMORY_AND_DISK)
    n_items = items.count()  # materialised once
    log.info(
        "one-pass items: %d labelled items x %d judges persisted in %d partitions",
        n_items,
        len(judge_ids),
        items.rdd.getNumPartitions(),
    )
    return SparkItemsSource(items=items, judge_ids=judge_ids, n_items=n_items)
