"""Where the one-pass replicate evaluation reads its items: a dense panel in memory, or a persisted Spark table.

Both sources expose ``map_reduce(kernel) -> Partial``: ``kernel(votes, labels, group_keys)`` runs on every batch
of labelled items and the per-batch :class:`~judgecal_dist.engine.onepass.kernels.Partial` results are
combined. On Spark each partition's combined partial crosses to the driver as one ``binary`` row, so a pass
returns one row per partition, never one per item.

The Spark table holds one row per labelled item (label A or B) of the chosen dataset: ``group_key`` (Spark's
``xxhash64(group_id)``, :func:`judgecal_dist.splits.group_keys`), ``label`` and the item's dense votes at the
chosen sample as ``binary`` (one byte per judge, judges sorted as :func:`judgecal_dist.engine.panel.load_panel`
sorts them). It is built with one ``groupBy`` of the verdicts and persisted, so later passes only read bytes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from judgecal_dist.engine.item_votes import (
    binary_votes,
    block_columns,
    item_votes_spark,
    label_codes_spark,
    votes_from_blocks,
)
from judgecal_dist.engine.onepass.kernels import Partial
from judgecal_dist.engine.panel import Panel
from judgecal_dist.errors import InputError

__all__ = ["Kernel", "PanelSource", "SparkItemsSource", "spark_items_source"]

log = logging.getLogger(__name__)

Kernel = Callable[[npt.NDArray[np.int8], npt.NDArray[np.int8], npt.NDArray[np.int64]], Partial]
#: Items per batch of the in-memory source (the Spark source uses Arrow's ``maxRecordsPerBatch``).
LOCAL_BATCH_ITEMS = 20_000
#: At least 1 in this many label rows labelled: build the items by one groupBy of verdicts and labels (no joins).
DENSE_LABEL_SHARE = 10


@dataclass(frozen=True)
class PanelSource:
    """Batches of a dense :class:`~judgecal_dist.engine.panel.Panel` (the local engine)."""

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


def _pack_partition(batches: Iterator[pa.RecordBatch], n_judges: int) -> Iterator[pa.RecordBatch]:
    # packed vote blocks -> one binary row of n_judges bytes per item, read later without a copy
    for batch in batches:
        votes = votes_from_blocks([batch.column(c) for c in block_columns(n_judges)], n_judges)
        offsets = pa.array(np.arange(0, votes.size + 1, n_judges, dtype=np.int32))
        dense = pa.BinaryArray.from_buffers(pa.binary(), len(votes), [None, offsets.buffers()[1], pa.py_buffer(votes)])
        yield pa.RecordBatch.from_arrays(
            [batch.column("group_key"), batch.column("label"), dense], names=["group_key", "label", "votes"]
        )


def _run_partition(batches: Iterator[pa.RecordBatch], kernel: Kernel, n_judges: int) -> Iterator[pa.RecordBatch]:
    # The partition's batches are combined here: one partial per partition crosses to the driver.
    total: Partial | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        votes = binary_votes(batch.column("votes"), n_judges)
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


def _persist(rows: DataFrame, n_judges: int) -> DataFrame:
    n_partitions = max(1, rows.sparkSession.sparkContext.defaultParallelism)
    packed = functools.partial(_pack_partition, n_judges=n_judges)
    # coalesce, not repartition: the items are already grouped by the shuffle; no second shuffle
    items = rows.mapInArrow(packed, "group_key long, label byte, votes binary").coalesce(n_partitions)
    return items.persist(StorageLevel.MEMORY_AND_DISK)


def spark_items_source(
    verdicts: DataFrame, labels: DataFrame, *, dataset: str | None, sample: int, where: str
) -> SparkItemsSource:
    """Build and persist the labelled-items table of ``dataset`` at ``sample`` (module docstring).

    Raises
    ------
    InputError
        Several datasets and none chosen, an unknown dataset, no labelled item, or no verdict at ``sample``.
    """
    names = sorted(r.dataset for r in labels.select("dataset").distinct().collect())
    if dataset is None:
        if len(names) != 1:
            raise InputError(f"{where}: labels: dataset: {len(names)} datasets {names[:5]}; choose one with dataset=")
        dataset = names[0]
    elif dataset not in names:
        raise InputError(f"{where}: labels: dataset: {dataset!r} not found (have {names[:5]})")
    verdicts = verdicts.where((F.col("dataset") == dataset) & (F.col("sample") == sample))
    judge_ids = np.array(sorted(r.judge_id for r in verdicts.select("judge_id").distinct().collect()), dtype=object)
    if not len(judge_ids):
        raise InputError(f"{where}: verdicts: sample: no verdicts for dataset {dataset!r} with sample={sample}")
    labels = labels.where(F.col("dataset") == dataset)
    labelled = label_codes_spark(labels).where(F.col("label") >= 0)
    n_labelled, n_label_rows = labelled.count(), labels.count()
    if n_labelled == 0:
        raise InputError(f"{where}: labels: label: no item of dataset {dataset!r} has label A or B")
    blocks = block_columns(len(judge_ids))
    items = None
    if n_labelled * DENSE_LABEL_SHARE >= n_label_rows:
        # Mostly labelled: one groupBy of verdicts and labels together (item_votes_spark's union), no join.
        votes = item_votes_spark(verdicts, labels, judge_ids.tolist(), sample=sample).where(F.col("label") >= 0)
        items = _persist(votes.select(F.xxhash64("group_id").alias("group_key"), "label", *blocks), len(judge_ids))
        if items.count() != n_labelled:  # a labelled item without verdicts at `sample`: the join below keeps it
            items.unpersist()
            items = None
    if items is None:
        # Only labelled items are grouped: with 1% of the items labelled the groupBy shuffles 1% of the rows.
        verdicts = verdicts.join(labelled.select("item_id"), on="item_id", how="left_semi")
        votes = item_votes_spark(verdicts, None, judge_ids.tolist(), sample=sample).select(
            "item_id", "group_id", *blocks
        )
        # Labelled items without a verdict stay, with every vote missing, as in the dense panel.
        rows = labelled.join(votes, on="item_id", how="left").select(
            F.xxhash64(F.coalesce("group_id", "item_id")).alias("group_key"),
            "label",
            *blocks,  # null blocks (an item without verdicts) are all-missing votes
        )
        items = _persist(rows, len(judge_ids))
    n_items = items.count()  # materialised once (already counted on the first plan: then read from the cache)
    n_partitions = items.rdd.getNumPartitions()
    log.info("one-pass items: %d labelled items x %d judges persisted in %d partitions", n_items, len(judge_ids),
             n_partitions)  # fmt: skip
    return SparkItemsSource(items=items, judge_ids=judge_ids, n_items=n_items)
