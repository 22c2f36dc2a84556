"""Packed item votes straight from the verdict Parquet parts: Spark schedules, pyarrow reads, numpy packs.

:func:`item_votes_scan` returns the rows of :func:`judgecal_dist.engine.item_votes.item_votes_spark` (``dataset,
item_id, group_id, label, v0, v1, ...``), built another way. Spark's Parquet scan decodes every string of every
verdict row into a JVM row, and packing them there costs a hash aggregation over all verdict rows (measured in
``benchmarks/score_throughput.py``: most of a ``judgecal score`` run). Here each Spark task opens its share of
the ``verdicts`` parts with pyarrow, keeps the string columns dictionary-encoded, and packs the votes of each row
group with numpy: one partial row per item and row group leaves Python, so the only shuffle is the ``groupBy`` that
sums the partial rows of items split across row groups (exact: an item has at most one verdict per judge and
sample, so the 2-bit fields of different partial rows never overlap). Labels are joined to the packed items.

The tasks also tally, in a Spark accumulator, the rows at ``sample``, the judges seen at ``sample`` and verdicts
outside the alphabet; the caller reads it after the action that ran the tasks (:class:`ScanTally`), so checks
that used a pre-pass over the table cost nothing extra. The tasks read the parts through fsspec with the
caller's ``storage_options`` (shipped to the executors in the task closure).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from judgecal_dist.engine import local
from judgecal_dist.engine.counts import UNKNOWN_CODE
from judgecal_dist.engine.item_votes import JUDGES_PER_BLOCK, VOTE_A, VOTE_B, block_columns, label_codes_spark
from judgecal_dist.io.dataset import dataset_files
from judgecal_dist.io.filesystem import open_fs
from judgecal_dist.io.schema import MISSING_CODE

__all__ = ["ScanTally", "pack_votes", "partial_item_votes", "item_votes_scan"]

_KEYS = ["dataset", "item_id", "group_id"]
_READ = [*_KEYS, "judge_id", "sample", "verdict"]
_EXAMPLES = 3  # offending categories kept for the message


@dataclass
class ScanTally:
    """What the scan tasks saw at ``sample``: rows, judge ids, and verdicts outside the alphabet."""

    rows: int = 0
    judges: set[str] = field(default_factory=set)
    bad_rows: int = 0
    bad_examples: set[str] = field(default_factory=set)

    def merge(self, other: ScanTally) -> ScanTally:
        self.rows += other.rows
        self.judges |= other.judges
        self.bad_rows += other.bad_rows
        self.bad_examples = set(sorted(self.bad_examples | other.bad_examples)[:_EXAMPLES])
        return self


class _TallyParam(AccumulatorParam):  # type: ignore[type-arg]
    def zero(self, value: ScanTally) -> ScanTally:
        return ScanTally()

    def addInPlace(self, value1: ScanTally, value2: ScanTally) -> ScanTally:  # noqa: N802 - pyspark's name
        return value1.merge(value2)


def pack_votes(votes: npt.NDArray[np.int8]) -> list[npt.NDArray[np.int64]]:
    """The packed ``v<b>`` longs of a dense vote matrix (inverse of :func:`~.item_votes.votes_from_blocks`)."""
    blocks = []
    for start in range(0, votes.shape[1], JUDGES_PER_BLOCK):
        digits = votes[:, start : start + JUDGES_PER_BLOCK].astype(np.int64) + 1  # 0 = missing, 1 = B, 2 = A
        blocks.append((digits << (2 * np.arange(digits.shape[1], dtype=np.int64))).sum(axis=1))
    return blocks


def _codes(column: pa.DictionaryArray, codes_of_values: npt.NDArray[Any], null_code: int) -> npt.NDArray[Any]:
    """Per-row values of a per-dictionary-entry lookup (``null_code`` for a null row)."""
    lookup = np.append(codes_of_values, null_code)
    return lookup[pc.fill_null(column.indices, len(column.dictionary)).to_numpy()]


def partial_item_votes(table: pa.Table, judges: pa.Array, sample: int) -> tuple[pa.RecordBatch | None, ScanTally]:
    """One packed row per item of a verdict table (one row group), and its :class:`ScanTally`.

    ``table`` holds ``dataset, item_id, group_id, judge_id, verdict`` and optionally ``sample``, plain or
    dictionary-encoded; ``judges`` is the model's judge list (position = column of the votes). Verdicts of other
    judges, null, ``tie`` and categories outside the alphabet are no votes (the last are tallied).
    """
    if "sample" in table.column_names:
        table = table.filter(pc.equal(table["sample"], pa.scalar(sample, table.schema.field("sample").type)))
    tally = ScanTally(rows=table.num_rows)
    if table.num_rows == 0:
        return None, tally
    dataset, item, group, judge, verdict = (local._dictionary(table[c]) for c in [*_KEYS, "judge_id", "verdict"])
    judge_rows = local._indices(judge, name="judge_id")
    seen = np.bincount(judge_rows, minlength=len(judge.dictionary)) > 0  # a filter keeps unused entries
    tally.judges = set(judge.dictionary.filter(pa.array(seen)).to_pylist())
    codes = _codes(verdict, local.category_codes(verdict.dictionary.cast(pa.string())), MISSING_CODE)
    bad = codes == UNKNOWN_CODE
    if bad.any():
        tally.bad_rows = int(bad.sum())
        used = np.unique(verdict.indices.filter(pa.array(bad)).to_numpy())
        tally.bad_examples = set(sorted(verdict.dictionary.take(pa.array(used)).to_pylist())[:_EXAMPLES])
    found = pc.index_in(judge.dictionary.cast(pa.string()), value_set=judges)
    judge_of = pc.fill_null(found, -1).to_numpy()[judge_rows]
    # Items by integer codes. One dataset (the usual case): the item_id dictionary indices already are codes.
    item_rows = local._indices(item, name="item_id")
    if len(dataset.dictionary) == 1:
        inverse, n_codes = item_rows, len(item.dictionary)
    else:
        pair = local._indices(dataset, name="dataset") * len(item.dictionary) + item_rows
        inverse, uniques = pd.factorize(pair)
        n_codes = len(uniques)
    # Any row of an item gives its keys (group_id is one per item, ingest checks it); codes without a row (a
    # dictionary entry left by the sample filter) are dropped below. Two codes of one item (repeated dictionary
    # entries) would only give two partial rows, which the groupBy sums.
    row_of = np.full(n_codes, -1, dtype=np.int64)
    row_of[inverse] = np.arange(len(inverse))
    present = row_of >= 0
    rows = pa.array(row_of[present])
    keep = (judge_of >= 0) & ((codes == VOTE_A) | (codes == VOTE_B))
    votes = np.full((n_codes, len(judges)), MISSING_CODE, dtype=np.int8)
    votes[inverse[keep], judge_of[keep]] = codes[keep]
    votes = votes if present.all() else votes[present]
    keys = [pc.cast(c.take(rows).dictionary_decode(), pa.string()) for c in (dataset, item, group)]
    blocks = [pa.array(b, pa.int64()) for b in pack_votes(votes)]
    return pa.RecordBatch.from_arrays(keys + blocks, names=_KEYS + block_columns(len(judges))), tally


def _scan_partition(
    batches: Iterator[pa.RecordBatch],
    files: Sequence[str],
    columns: Sequence[str],
    judge_ids: Sequence[str],
    sample: int,
    storage_options: Mapping[str, Any],
    tally: Any,
) -> Iterator[pa.RecordBatch]:
    judges = pa.array(list(judge_ids), pa.string())
    seen = ScanTally()
    for batch in batches:
        for index in batch.column("id").to_pylist():
            fs, path = open_fs(files[index], dict(storage_options))
            with fs.open(path, "rb") as handle:
                parquet = pq.ParquetFile(handle, read_dictionary=[c for c in columns if c != "sample"])
                for group in range(parquet.num_row_groups):
                    table = parquet.read_row_group(group, columns=list(columns))
                    if "group_id" not in columns:  # the contract's default: one item per group
                        table = table.append_column("group_id", table["item_id"])
                    out, part = partial_item_votes(table, judges, sample)
                    seen.merge(part)
                    if out is not None:
                        yield out
    tally.add(seen)


def item_votes_scan(
    spark: SparkSession,
    data_url: str,
    labels: DataFrame | None,
    judge_ids: Sequence[str],
    *,
    sample: int = 0,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[DataFrame, Any]:
    """:func:`~judgecal_dist.engine.item_votes.item_votes_spark` of the ``verdicts`` of ``data_url`` (lazy).

    Returns
    -------
    (DataFrame, pyspark.Accumulator)
        The items, and an accumulator whose ``value`` (a :class:`ScanTally`) is complete once an action over
        the items has run.

    Raises
    ------
    InputError
        ``data_url`` is not a committed dataset, or its verdicts break the column contract.
    """
    options = dict(storage_options or {})
    schema = local._dataset(data_url, "verdicts", options).schema
    present, _ = local.contract_columns(data_url, "verdicts", schema.names)
    columns = [c for c in _READ if c in present]
    files = dataset_files(data_url, "verdicts", storage_options=options)
    tally = spark.sparkContext.accumulator(ScanTally(), _TallyParam())
    names = block_columns(len(judge_ids))
    kernel = functools.partial(_scan_partition, files=files, columns=columns, judge_ids=list(judge_ids),
                               sample=int(sample), storage_options=options, tally=tally)  # fmt: skip
    ddl = ", ".join([f"{k} string" for k in _KEYS] + [f"{b} long" for b in names])
    slices = max(1, min(len(files), 2 * spark.sparkContext.defaultParallelism))
    parts = spark.range(0, len(files), 1, slices).mapInArrow(kernel, ddl)
    # A null block sum (no partial row) cannot occur: every partial row carries all blocks.
    items = parts.groupBy(*_KEYS).agg(*[F.sum(b).alias(b) for b in names])
    if labels is None:
        items = items.withColumn("label", F.lit(-1).cast("byte"))
    else:
        known = label_codes_spark(labels).where(F.col("label") >= 0)
        items = items.join(known, on=["dataset", "item_id"], how="left").withColumn(
            "label", F.coalesce(F.col("label"), F.lit(-1)).cast("byte")
        )
    return items.select(*_KEYS, "label", *names), tally
