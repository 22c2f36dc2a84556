"""Item-level vote vectors of a verdict table, on Spark or in memory: the input of item-wise model passes.

Scoring a table with a fitted calibration (:mod:`judgecal_dist.scoring.apply`) and Dawid-Skene over all items
(:mod:`judgecal_dist.engine.ds_spark`) both need, per item, the binary votes of a fixed, ordered list of judges:
1 = A (class 1), 0 = B (class 0), -1 = missing (null, unparseable and ``tie`` verdicts, spec 000 §3.0, and judges
without a verdict). On Spark the verdict rows of one item are packed in the JVM by plain ``sum`` aggregates:
judge ``j`` owns bits ``2 (j mod 31)`` and up of the long ``v<j // 31>``, holding ``vote + 1`` (0 = missing),
which is exact because an item has at most one verdict per judge and sample, and lets Spark's hash aggregation
combine an item's rows inside a partition before the shuffle. numpy unpacks the longs into a dense int8 matrix
inside each ``mapInArrow`` batch (:func:`votes_from_blocks`); for repeated passes :func:`dense_votes_spark` stores
the dense row itself as ``binary`` (one byte per judge), so a pass only reinterprets a buffer. In memory,
:func:`item_votes_arrow` builds the same matrix with one pyarrow read. The two paths give identical votes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from judgecal_dist.engine.local import category_codes
from judgecal_dist.engine.spark import category_code
from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import MISSING_CODE, VERDICT_CODES

__all__ = [
    "ItemVotes",
    "JUDGES_PER_BLOCK",
    "block_columns",
    "votes_from_blocks",
    "binary_votes",
    "label_codes_spark",
    "item_votes_spark",
    "dense_votes_spark",
    "item_votes_arrow",
    "check_judges",
]

#: Codes of the binary votes (equal to the verdict codes of A and B, so a verdict code is a vote code).
VOTE_A, VOTE_B = VERDICT_CODES["A"], VERDICT_CODES["B"]
#: Judges packed into one signed 64-bit sum: 2 bits each, 62 bits in all.
JUDGES_PER_BLOCK = 31


@dataclass(frozen=True)
class ItemVotes:
    """Items of a verdict table in dense form (the in-memory path).

    Attributes
    ----------
    keys : pyarrow.Table
        ``dataset``, ``item_id``, ``group_id`` per item, in first-appearance order.
    votes : ndarray of int8, shape (n_items, n_judges)
        1 = A, 0 = B, -1 = missing, columns in the order of the judge list.
    labels : ndarray of int8, shape (n_items,)
        1 = A, 0 = B, -1 = no label (null, ``tie`` or no label row).
    """

    keys: pa.Table
    votes: npt.NDArray[np.int8]
    labels: npt.NDArray[np.int8]


def check_judges(data_judges: Sequence[str], model_judges: Sequence[str], *, where: str, unknown: str) -> list[str]:
    """The data's judges outside ``model_judges``; an error unless ``unknown == "ignore"``.

    Raises
    ------
    InputError
        Some judges are unknown and ``unknown == "error"``.
    """
    extra = sorted(set(data_judges) - set(model_judges))
    if extra and unknown != "ignore":
        raise InputError(
            f"{where}: judge_id: {len(extra)} judge(s) not in the model (e.g. {extra[:3]}); score only the model's "
            "judges with --ignore-unknown-judges (their verdicts are then left out)"
        )
    return extra


def block_columns(n_judges: int) -> list[str]:
    """Names of the packed vote columns of ``n_judges`` judges: ``v0``, ``v1``, ..."""
    return [f"v{b}" for b in range(-(-n_judges // JUDGES_PER_BLOCK))]


def votes_from_blocks(blocks: Sequence[pa.Array], n_judges: int) -> npt.NDArray[np.int8]:
    """Dense int8 votes from the packed ``v<b>`` columns (null = no verdict of any judge of that block).

    Examples
    --------
    >>> votes_from_blocks([pa.array([2 + 1 * 4**2, None], pa.int64())], 3)  # judge 0 votes A, judge 2 B
    array([[ 1, -1,  0],
           [-1, -1, -1]], dtype=int8)
    """
    n = len(blocks[0]) if blocks else 0
    votes = np.empty((n, n_judges), dtype=np.int8)
    for b, column in enumerate(blocks):
        start = b * JUDGES_PER_BLOCK
        width = min(JUDGES_PER_BLOCK, n_judges - start)
        packed = pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        shifts = 2 * np.arange(width, dtype=np.int64)
        votes[:, start : start + width] = ((packed[:, None] >> shifts) & 3) - 1
    return votes


def binary_votes(column: pa.Array, n_judges: int) -> npt.NDArray[np.int8]:
    """The dense vote rows of a ``binary`` column written by :func:`dense_votes_spark`, without a copy."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(column) == 0:
        return np.empty((0, n_judges), dtype=np.int8)
    offset_type = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(column.buffers()[1], dtype=offset_type)[column.offset : column.offset + len(column) + 1]
    data = np.frombuffer(column.buffers()[2], dtype=np.int8)[offsets[0] : offsets[-1]]
    return data.reshape(len(column), n_judges)


def label_codes_spark(labels: DataFrame) -> DataFrame:
    """``dataset, item_id, label_code`` (byte: 1 = A, 0 = B, -1 = tie or null) of a labels table."""
    code = category_code("label", table="labels")
    return labels.select(
        "dataset", "item_id", F.when(code.isin(VOTE_A, VOTE_B), code).otherwise(F.lit(-1)).cast("byte").alias("label")
    )


def item_votes_spark(
    verdicts: DataFrame, labels: DataFrame | None, judge_ids: Sequence[str], *, sample: int = 0
) -> DataFrame:
    """One row per item of ``verdicts`` at ``sample``: ``dataset, item_id, group_id, label, v0, v1, ...`` (lazy).

    ``v<b>`` packs the votes of judges ``31 b ... 31 b + 30`` of ``judge_ids`` (position = index; see the module
    docstring and :func:`votes_from_blocks`); verdicts of other judges, null, unparseable and ``tie`` verdicts are
    left out. ``label`` is the label code (-1 without a label; always -1 when ``labels`` is None). A verdict
    outside the alphabet fails the job.

    Notes
    -----
    One broadcast join with the judge list, then one ``groupBy`` of the items over the verdict rows and the label
    rows together (a union, so the labels need no join of their own): ``sum`` aggregates pack the votes, with
    partial aggregation inside partitions before the shuffle. Rows of labels whose item has no verdict at
    ``sample`` are dropped.
    """
    spark = verdicts.sparkSession
    rows = [(j, i // JUDGES_PER_BLOCK, 4 ** (i % JUDGES_PER_BLOCK)) for i, j in enumerate(judge_ids)]
    index = spark.createDataFrame(rows, "judge_id string, block int, weight long")
    code = category_code("verdict", table="verdicts")
    digit = F.when(code.isin(VOTE_A, VOTE_B), (code + 1).cast("long") * F.col("weight"))
    names = block_columns(len(judge_ids))
    voted = (
        verdicts.where(F.col("sample") == sample)
        .select("dataset", "item_id", "group_id", "judge_id", "verdict")
        .join(F.broadcast(index), on="judge_id", how="left")
        .select(
            "dataset", "item_id", "group_id", "block", digit.alias("digit"), F.lit(None).cast("byte").alias("label")
        )
    )
    if labels is not None:
        coded = label_codes_spark(labels).select(
            "dataset", "item_id", F.lit(None).cast("string").alias("group_id"), F.lit(None).cast("int").alias("block"),
            F.lit(None).cast("long").alias("digit"), "label",
        )  # fmt: skip
        voted = voted.unionByName(coded)
    blocks = [F.sum(F.when(F.col("block") == b, F.col("digit"))).alias(name) for b, name in enumerate(names)]
    # Every verdict row of an item carries its one group_id (ingest checks it); label rows carry none.
    items = voted.groupBy("dataset", "item_id").agg(
        F.max("group_id").alias("group_id"), F.coalesce(F.max("label"), F.lit(-1)).cast("byte").alias("label"), *blocks
    )
    return items.where(F.col("group_id").isNotNull()).select("dataset", "item_id", "group_id", "label", *names)


def _dense_partition(batches: Iterator[pa.RecordBatch], n_judges: int) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        votes = votes_from_blocks([batch.column(c) for c in block_columns(n_judges)], n_judges)
        offsets = pa.array(np.arange(0, votes.size + 1, n_judges, dtype=np.int32))
        dense = pa.BinaryArray.from_buffers(pa.binary(), len(votes), [None, offsets.buffers()[1], pa.py_buffer(votes)])
        yield pa.RecordBatch.from_arrays(
            [batch.column("dataset"), batch.column("item_id"), batch.column("label"), dense],
            names=["dataset", "item_id", "label", "votes"],
        )


def dense_votes_spark(items: DataFrame, n_judges: int) -> DataFrame:
    """``dataset, item_id, label, votes binary`` from :func:`item_votes_spark`: one byte per judge and item.

    Meant to be persisted once and read by many passes: :func:`binary_votes` turns a batch into the int8 matrix
    without a copy or any unpacking (``n_judges`` bytes per row).
    """
    kernel = functools.partial(_dense_partition, n_judges=n_judges)
    return items.mapInArrow(kernel, "dataset string, item_id string, label byte, votes binary")


def item_votes_arrow(
    verdicts: pa.Table, labels: pa.Table | None, judge_ids: Sequence[str], *, sample: int = 0
) -> ItemVotes:
    """:func:`item_votes_spark` in memory: the dense votes of every item of ``verdicts`` at ``sample``.

    Parameters
    ----------
    verdicts : pyarrow.Table
        ``dataset, item_id, group_id, judge_id, sample, verdict``.
    labels : pyarrow.Table, optional
        ``dataset, item_id, label``.
    judge_ids : sequence of str
        The judges, in column order; verdicts of other judges are left out.
    sample : int
        The sample to read.

    Raises
    ------
    InputError
        A verdict outside the alphabet, or no verdict rows at ``sample``.
    """
    rows = verdicts.filter(pc.equal(verdicts["sample"], pa.scalar(sample, pa.int32())))
    if rows.num_rows == 0:
        raise InputError(f"verdicts: sample: no verdict rows with sample={sample}")
    codes = category_codes(rows["verdict"])
    if (codes < MISSING_CODE).any():
        bad = pc.filter(rows["verdict"], pa.array(codes < MISSING_CODE)).unique().to_pylist()[:3]
        raise InputError(f"verdicts: verdict: category outside the alphabet (e.g. {bad})")
    # Items by integer codes: dictionary indices of (dataset, item_id), then one factorize of their pair code.
    dataset = pc.dictionary_encode(rows["dataset"].combine_chunks())
    item = pc.dictionary_encode(rows["item_id"].combine_chunks())
    pair = dataset.indices.to_numpy().astype(np.int64) * len(item.dictionary) + item.indices.to_numpy()
    inverse, uniques = pd.factorize(pair)
    n_items = len(uniques)
    # factorize numbers items in order of first appearance: a row starts an item iff its code exceeds all before
    running = np.maximum.accumulate(inverse)
    first = np.flatnonzero(np.r_[True, inverse[1:] > running[:-1]])
    keys = rows.select(["dataset", "item_id", "group_id"]).take(pa.array(first))
    judge = pc.index_in(rows["judge_id"], value_set=pa.array(list(judge_ids), pa.string()))
    judge_idx = pc.fill_null(judge, -1).to_numpy(zero_copy_only=False)
    keep = (judge_idx >= 0) & ((codes == VOTE_A) | (codes == VOTE_B))
    votes = np.full((n_items, len(judge_ids)), MISSING_CODE, dtype=np.int8)
    votes[inverse[keep], judge_idx[keep]] = codes[keep]
    return ItemVotes(keys=keys, votes=votes, labels=_label_lookup(keys, labels))


def _label_lookup(keys: pa.Table, labels: pa.Table | None) -> npt.NDArray[np.int8]:
    out = np.full(keys.num_rows, MISSING_CODE, dtype=np.int8)
    if labels is None or labels.num_rows == 0:
        return out
    index = pd.MultiIndex.from_arrays([labels["dataset"].to_numpy(), labels["item_id"].to_numpy()])
    codes = category_codes(labels["label"])
    codes = np.where((codes == VOTE_A) | (codes == VOTE_B), codes, MISSING_CODE).astype(np.int8)
    where = index.get_indexer(pd.MultiIndex.from_arrays([keys["dataset"].to_numpy(), keys["item_id"].to_numpy()]))
    found = where >= 0
    out[found] = codes[where[found]]
    return out
