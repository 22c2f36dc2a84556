"""The vote codec on Spark: packed item votes built by :func:`~.codec.encode` inside Spark tasks.

:func:`item_votes_spark` returns one row per item (``dataset, item_id, group_id, label, v0, v1, ...``, the packed
form of :mod:`judgecal_dist.engine.votes.codec`). Given a dataset URL, each Spark task opens its share of the
``verdicts`` parts with the io reader (:func:`judgecal_dist.io.dataset.read_part`: pyarrow, string columns kept
dictionary-encoded) and codes each row group with numpy, so no verdict row becomes a JVM row; given a DataFrame
(e.g. a session's views), its Arrow batches go through the same kernel. Either way one partial row per item and
row group (or batch) leaves Python, and the only shuffle is the ``groupBy`` that sums the partial rows of items
split across them (exact: the 2-bit fields of different partial rows never overlap). Labels are joined to the
packed items.

The tasks also tally, in a Spark accumulator, the rows at ``sample``, the judges seen there and verdicts outside
the alphabet; the caller reads it after the action that ran the tasks (:class:`ScanTally`), so the checks cost
no pre-pass over the table. The tasks read the parts through fsspec with the caller's ``storage_options``
(shipped to the executors in the task closure). :func:`category_code` is the same coding as a Spark column
expression, for the labels and for jobs that stay in the JVM.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import AccumulatorParam
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from judgecal_dist.engine.votes.codec import (
    ITEM_KEYS,
    VERDICT_COLUMNS,
    block_columns,
    encode,
    pack,
    to_binary_column,
    unpack,
)
from judgecal_dist.io.dataset import dataset_files, open_table, read_part
from judgecal_dist.io.schema import MISSING_CODE, VERDICT_CATEGORIES, VERDICT_CODES, VOTE_A, VOTE_B

__all__ = ["ScanTally", "category_code", "partial_items", "label_codes_spark", "item_votes_spark", "dense_votes_spark"]

_EXAMPLES = 3  # offending categories kept for the message
#: String columns the scan tasks read dictionary-encoded.
_DICTIONARY_COLUMNS = ("dataset", "item_id", "group_id", "judge_id", "verdict")


@dataclass
class ScanTally:
    """What the codec's tasks saw at ``sample``: rows, judge ids, and verdicts outside the alphabet."""

    rows: int = 0
    judges: set[str] = field(default_factory=set)
    bad_rows: int = 0
    bad_examples: set[str] = field(default_factory=set)
    #: null verdict rows per listed judge (the run history's ``rows`` are its parsed verdicts plus these)
    nulls: dict[str, int] = field(default_factory=dict)

    def merge(self, other: ScanTally) -> ScanTally:
        self.rows += other.rows
        for judge, n in other.nulls.items():
            self.nulls[judge] = self.nulls.get(judge, 0) + n
        self.judges |= other.judges
        self.bad_rows += other.bad_rows
        self.bad_examples = set(sorted(self.bad_examples | other.bad_examples)[:_EXAMPLES])
        return self


class _TallyParam(AccumulatorParam):
    def zero(self, value: ScanTally) -> ScanTally:
        return ScanTally()

    def addInPlace(self, value1: ScanTally, value2: ScanTally) -> ScanTally:  # noqa: N802 - pyspark's name
        return value1.merge(value2)


def partial_items(
    table: pa.Table | pa.RecordBatch, judges: pa.Array, *, sample: int | None, dataset: str | None, binary: bool
) -> tuple[pa.RecordBatch | None, ScanTally]:
    """One packed row per item of a batch of verdict rows (a row group, an Arrow batch), and its tally.

    Verdicts of judges outside ``judges``, null (and ``tie`` with ``binary``) and categories outside the alphabet
    are no votes (the last are tallied).
    """
    rows = encode(table, judges, sample=sample, dataset=dataset)
    nulls = np.bincount(rows.judge[(rows.code == MISSING_CODE) & (rows.judge >= 0)], minlength=len(judges))
    tally = ScanTally(
        rows=len(rows.item),
        judges=set(rows.judges_seen),
        bad_rows=rows.n_unknown,
        bad_examples=set(rows.unknown_examples),
        nulls={str(j): int(n) for j, n in zip(judges.to_pylist(), nulls, strict=True) if n},
    )
    if not len(rows.item):
        return None, tally
    blocks = [pa.array(b, pa.int64()) for b in pack(rows.dense(len(judges), binary=binary))]
    keys = [column.combine_chunks() for column in rows.keys.columns]
    return pa.RecordBatch.from_arrays(keys + blocks, names=[*ITEM_KEYS, *block_columns(len(judges))]), tally


def _coded_partitions(
    tables: Iterable[pa.Table | pa.RecordBatch],
    judge_ids: Sequence[str],
    sample: int | None,
    dataset: str | None,
    binary: bool,
    tally: Any,
) -> Iterator[pa.RecordBatch]:
    judges = pa.array(list(judge_ids), pa.string())
    seen = ScanTally()
    for table in tables:
        out, part = partial_items(table, judges, sample=sample, dataset=dataset, binary=binary)
        seen.merge(part)
        if out is not None:
            yield out
    tally.add(seen)


def _scan_partition(
    batches: Iterator[pa.RecordBatch],
    files: Sequence[str],
    present: Sequence[str],
    storage_options: Mapping[str, Any],
    **codec: Any,
) -> Iterator[pa.RecordBatch]:
    columns = list(VERDICT_COLUMNS)

    def row_groups() -> Iterator[pa.Table]:
        for batch in batches:
            for index in batch.column("id").to_pylist():
                yield from read_part(
                    files[index],
                    "verdicts",
                    columns,
                    present=present,
                    storage_options=storage_options,
                    dictionary_columns=_DICTIONARY_COLUMNS,
                )

    yield from _coded_partitions(row_groups(), **codec)


def category_code(column: str, *, table: str) -> Column:
    """``VERDICT_CODES`` of a category column, -1 for null; a category outside the alphabet fails the job."""
    code = F.when(F.col(column).isNull(), F.lit(MISSING_CODE))
    for name, value in VERDICT_CODES.items():
        code = code.when(F.col(column) == name, F.lit(value))
    message = F.concat(F.lit(f"{table}: {column}: category outside {VERDICT_CATEGORIES}, e.g. "), F.col(column))
    return code.otherwise(F.raise_error(message)).cast(T.ByteType())


def label_codes_spark(labels: DataFrame, *, binary: bool = True) -> DataFrame:
    """``dataset, item_id, label`` (byte) of a labels table: verdict codes, ``tie`` missing with ``binary``."""
    code = category_code("label", table="labels")
    if binary:
        code = F.when(code.isin(VOTE_A, VOTE_B), code).otherwise(F.lit(MISSING_CODE))
    return labels.select("dataset", "item_id", code.cast("byte").alias("label"))


def item_votes_spark(
    spark: SparkSession,
    verdicts: str | DataFrame,
    labels: DataFrame | None,
    judge_ids: Sequence[str],
    *,
    sample: int = 0,
    dataset: str | None = None,
    binary: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[DataFrame, Any]:
    """One packed row per item with a verdict at ``sample``: ``dataset, item_id, group_id, label, v0, ...`` (lazy).

    Parameters
    ----------
    spark : SparkSession
    verdicts : str or DataFrame
        A dataset root URL (scanned inside the tasks) or a verdicts DataFrame (its Arrow batches are coded).
    labels : DataFrame, optional
        ``dataset, item_id, label``; ``label`` is -1 for items without one (always, when None).
    judge_ids : sequence of str
        The judges, in column order (position ``j`` is bits ``2 (j mod 31)`` of ``v<j // 31>``).
    sample : int
    dataset : str, optional
        Only this dataset's items.
    binary : bool, default True
        Binary votes and labels (``tie`` missing); False keeps ``tie`` (code 2, packed digit 3).
    storage_options : mapping, optional
        fsspec options of ``verdicts`` when it is a URL (shipped to the tasks; never logged).

    Returns
    -------
    (DataFrame, pyspark.Accumulator)
        The items, and an accumulator whose ``value`` (a :class:`ScanTally`) is complete once an action over
        the items has run.

    Raises
    ------
    InputError
        ``verdicts`` is a URL that is not a committed dataset, or its verdicts break the column contract.
    """
    tally = spark.sparkContext.accumulator(ScanTally(), _TallyParam())
    codec: dict[str, Any] = {"judge_ids": list(judge_ids), "binary": binary, "tally": tally}
    names = block_columns(len(judge_ids))
    ddl = ", ".join([f"{k} string" for k in ITEM_KEYS] + [f"{b} long" for b in names])
    if isinstance(verdicts, str):
        options = dict(storage_options or {})
        _, present, _ = open_table(verdicts, "verdicts", storage_options=options)
        files = dataset_files(verdicts, "verdicts", storage_options=options)
        kernel = functools.partial(
            _scan_partition,
            files=files,
            present=present,
            storage_options=options,
            sample=int(sample),
            dataset=dataset,
            **codec,
        )
        slices = max(1, min(len(files), 2 * spark.sparkContext.defaultParallelism))
        parts = spark.range(0, len(files), 1, slices).mapInArrow(kernel, ddl)
    else:
        rows = verdicts.where(F.col("sample") == sample).select(*ITEM_KEYS, "judge_id", "verdict")
        if dataset is not None:
            rows = rows.where(F.col("dataset") == dataset)
        # The JVM filtered sample and dataset: the kernel codes what it gets.
        parts = rows.mapInArrow(functools.partial(_coded_partitions, sample=None, dataset=None, **codec), ddl)
    # A null block sum (no partial row) cannot occur: every partial row carries all blocks.
    items = parts.groupBy(*ITEM_KEYS).agg(*[F.sum(b).alias(b) for b in names])
    if labels is None:
        items = items.withColumn("label", F.lit(MISSING_CODE).cast("byte"))
    else:
        known = label_codes_spark(labels, binary=binary).where(F.col("label") >= 0)
        items = items.join(known, on=["dataset", "item_id"], how="left").withColumn(
            "label", F.coalesce(F.col("label"), F.lit(MISSING_CODE)).cast("byte")
        )
    return items.select(*ITEM_KEYS, "label", *names), tally


def _dense_partition(batches: Iterator[pa.RecordBatch], n_judges: int, keep: Sequence[str]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        votes = unpack([batch.column(c) for c in block_columns(n_judges)], n_judges)
        yield pa.RecordBatch.from_arrays(
            [batch.column(c) for c in keep] + [to_binary_column(votes)], names=[*keep, "votes"]
        )


def dense_votes_spark(
    items: DataFrame, n_judges: int, keep: Sequence[str] = ("dataset", "item_id", "label")
) -> DataFrame:
    """``keep`` columns plus ``votes binary`` (binary votes, one byte per judge) from packed items.

    Meant to be persisted once and read by many passes:
    :func:`~judgecal_dist.engine.votes.codec.from_binary_column` turns a batch into the
    int8 matrix without a copy or any unpacking.
    """
    kernel = functools.partial(_dense_partition, n_judges=n_judges, keep=list(keep))
    types = dict(items.dtypes)
    schema = ", ".join(f"{c} {types[c]}" for c in keep) + ", votes binary"
    return items.mapInArrow(kernel, schema)
