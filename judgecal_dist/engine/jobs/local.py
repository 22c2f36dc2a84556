"""The in-memory engine: stored tables read with pyarrow, statistics computed by the shared numpy kernels.

For tables that fit in memory (within the in-memory budget of :func:`judgecal_dist.engine.jobs.stats.local_row_limit`) this path avoids
starting a JVM; its results equal the Spark path's exactly, because both feed the same integer codes to the
kernels of :mod:`judgecal_dist.engine.jobs.counts`, coded by the one vote codec (:mod:`judgecal_dist.engine.votes`).
Tables are read by the io layer's reader (:mod:`judgecal_dist.io.dataset`), the contract both engines apply.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.engine.jobs import counts
from judgecal_dist.engine.votes.codec import LabelIndex, as_dictionary, category_codes, encode, verdict_patterns
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import open_table, read_dataset_table
from judgecal_dist.io.schema import COLUMN_DEFAULTS, MISSING_CODE, UNKNOWN_CODE, VERDICT_CATEGORIES, VERDICT_CODES
from judgecal_dist.splits import group_keys

__all__ = [
    "CELL_COLUMNS",
    "judge_ids_of",
    "batch_cells",
    "judge_cells_arrow",
    "judge_cells_url",
    "item_vote_counts_arrow",
    "pattern_items_arrow",
    "pattern_cells_arrow",
]

log = logging.getLogger(__name__)

#: Columns the per-judge cell counts read, and the record batch size of the in-memory scans.
CELL_COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "verdict"]
_BATCH_ROWS = 1 << 20


def _reject_unknown(verdicts: pa.ChunkedArray, unknown: npt.NDArray[np.bool_]) -> None:
    if unknown.any():
        examples = pc.filter(verdicts, pa.array(unknown)).unique().to_pylist()[:3]
        raise InputError(
            f"verdicts: verdict: {int(unknown.sum())} rows with a category outside {VERDICT_CATEGORIES} (e.g. {examples})"
        )


def judge_ids_of(
    url: str, storage_options: Mapping[str, Any] | None = None, *, sample: int | None = None, dataset: str | None = None
) -> list[str]:
    """The sorted judge ids of a stored verdicts table (at ``sample``, of ``dataset``), streamed in batches.

    Only ``judge_id`` (read dictionary-encoded) and the filter columns are read; memory holds one batch.
    """
    verdicts, present, _ = open_table(url, "verdicts", storage_options=storage_options, dictionary_columns=["judge_id"])
    where = None
    if sample is not None:
        # An absent sample column is all sample 0 (COLUMN_DEFAULTS): every row or none.
        if "sample" not in present and sample != COLUMN_DEFAULTS["sample"]:
            return []
        where = pc.field("sample") == sample if "sample" in present else None
    if dataset is not None:
        by_dataset = pc.field("dataset") == dataset
        where = by_dataset if where is None else where & by_dataset
    judge_ids: set[str] = set()
    for batch in verdicts.to_batches(columns=["judge_id"], filter=where, batch_size=_BATCH_ROWS):
        judge_ids.update(as_dictionary(batch.column("judge_id")).dictionary.to_pylist())
    return sorted(judge_ids)


def batch_cells(
    batch: pa.Table | pa.RecordBatch, labels: LabelIndex | None, judge_ids: pa.Array
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(cell, group_key)`` of a batch's labelled rows (all samples), coded by the vote codec.

    Labels come from ``labels`` by item, or, when it is None, from the batch's own ``label`` column (codes, one
    per row: a label joined upstream, as Spark does for a session's views). Group keys are hashed once per item.
    """
    rows = encode(batch, judge_ids)
    if labels is None:
        label = np.asarray(batch.column("label").to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        label = labels(rows.keys).astype(np.int64)[rows.item]
    keep = label != MISSING_CODE
    item = rows.item[keep]
    key = group_keys(rows.keys["group_id"].to_pylist())[item]
    return counts.cell_codes(rows.judge[keep], label[keep], rows.code[keep], n_judges=len(judge_ids)), key


def _judge_cells_of_batches(
    batches: Iterable[pa.RecordBatch], labels: pa.Table, judge_ids: list[str], seeds: Sequence[int], fraction: float
) -> pd.DataFrame:
    lookup = LabelIndex(labels)
    judges = pa.array(judge_ids, pa.string())
    tensor = np.zeros(
        (len(seeds), len(counts.SIDES), len(judge_ids), counts.N_LABELS, counts.N_VERDICT_SLOTS), np.int64
    )
    for batch in batches:
        cell, key = batch_cells(batch, lookup, judges)
        tensor += counts.cell_tensor(cell, key, seeds=seeds, fraction=fraction, n_judges=len(judge_ids))
    return counts.decode_judge_cells(counts.judge_cell_batch(tensor, seeds).to_pandas(), judge_ids)


def judge_cells_arrow(verdicts: pa.Table, labels: pa.Table, seeds: Sequence[int], fraction: float) -> pd.DataFrame:
    """:func:`judgecal_dist.engine.jobs.stats.judge_cells` on in-memory tables.

    ``verdicts`` needs ``dataset, item_id, group_id, judge_id, verdict``; ``labels`` ``dataset, item_id, label``.
    """
    judge_ids = sorted(pc.unique(verdicts["judge_id"]).to_pylist())
    batches = verdicts.select(CELL_COLUMNS).to_batches(max_chunksize=_BATCH_ROWS)
    return _judge_cells_of_batches(batches, labels, judge_ids, seeds, fraction)


def judge_cells_url(
    url: str, seeds: Sequence[int], fraction: float, *, storage_options: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """:func:`judgecal_dist.engine.jobs.stats.judge_cells` streamed from a dataset root, one record batch at a time.

    Notes
    -----
    Memory holds the labels, one batch (about 1M rows) and the count tensor. String columns are read
    dictionary-encoded, so labels, group keys, judge indices and verdict codes are computed once per
    dictionary entry of a batch and gathered by integer indices.
    """
    verdicts, present, _ = open_table(url, "verdicts", storage_options=storage_options, dictionary_columns=CELL_COLUMNS)
    # A table without group_id uses item_id as the group (COLUMN_DEFAULTS).
    columns = {c: pc.field(c if c in present else str(COLUMN_DEFAULTS[c])) for c in CELL_COLUMNS}
    labels = read_dataset_table(url, "labels", ["dataset", "item_id", "label"], storage_options=storage_options)
    batches = verdicts.to_batches(columns=columns, batch_size=_BATCH_ROWS)
    return _judge_cells_of_batches(batches, labels, judge_ids_of(url, storage_options), seeds, fraction)


def item_vote_counts_arrow(verdicts: pa.Table) -> pd.DataFrame:
    """:func:`judgecal_dist.engine.jobs.stats.item_vote_counts` on an in-memory table (pyarrow hash aggregation).

    Returns
    -------
    DataFrame
        ``dataset, item_id, judge_id, n_A, n_B, n_tie, n_missing, n_score, score_mean, score_var`` sorted by key.
    """
    codes = category_codes(verdicts["verdict"])
    _reject_unknown(verdicts["verdict"], codes == UNKNOWN_CODE)
    flags = {f"n_{name}": codes == VERDICT_CODES[name] for name in VERDICT_CATEGORIES}
    flags["n_missing"] = codes == MISSING_CODE
    table = verdicts.select(["dataset", "item_id", "judge_id", "score"])
    for name, flag in flags.items():
        table = table.append_column(name, pa.array(flag.astype(np.int64)))
    grouped = table.group_by(["dataset", "item_id", "judge_id"], use_threads=False).aggregate(
        [(name, "sum") for name in flags]
        + [("score", "count"), ("score", "mean"), ("score", "variance", pc.VarianceOptions(ddof=0))]
    )
    renames = {f"{name}_sum": name for name in flags} | {
        "score_count": "n_score",
        "score_mean": "score_mean",
        "score_variance": "score_var",
    }
    frame = grouped.rename_columns([renames.get(c, c) for c in grouped.column_names]).to_pandas()
    order = ["dataset", "item_id", "judge_id", "n_A", "n_B", "n_tie", "n_missing", "n_score", "score_mean", "score_var"]
    frame = frame[order].astype({c: np.int64 for c in order[3:8]})
    return frame.sort_values(order[:3], kind="stable").reset_index(drop=True)


def pattern_items_arrow(
    verdicts: pa.Table, labels: pa.Table, judges: Sequence[str], sample: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8], npt.NDArray[np.int64]]:
    """The K-judge pivot: ``(pattern, label_code, group_key)`` per item with a verdict row at ``sample``.

    ``pattern`` is base 4 with digit ``p`` = verdict slot of ``judges[p]`` (3 = missing or no row), the codec's
    :func:`~judgecal_dist.engine.votes.codec.verdict_patterns` of the item's dense verdict codes.
    """
    rows = encode(verdicts, judges, sample=sample)
    rows.reject_unknown(judged_only=True)
    pattern = verdict_patterns(rows.dense(len(judges), binary=False))
    label = LabelIndex(labels.select(["dataset", "item_id", "label"]))(rows.keys)
    return pattern, label, group_keys(rows.keys["group_id"].to_pylist())


def pattern_cells_arrow(
    verdicts: pa.Table,
    labels: pa.Table,
    judges: Sequence[str],
    seeds: Sequence[int] | None = None,
    fraction: float | None = None,
    sample: int = 0,
    *,
    blocks: pd.DataFrame | None = None,
    full_patterns: bool = False,
) -> pd.DataFrame:
    """:func:`judgecal_dist.engine.jobs.stats.pattern_cells` on in-memory tables."""
    pattern, label, key = pattern_items_arrow(verdicts, labels, judges, sample)
    if blocks is not None:
        frame = counts.block_pattern_cells(pattern, label, key, blocks)
    else:
        patterns, stats = counts.pattern_tensor(pattern, label, key, seeds=seeds, fraction=fraction)
        frame = counts.pattern_batch(patterns, stats, seeds).to_pandas()
    if full_patterns:
        keys = [c for c in ("replicate", "side", "block", "pattern") if c in frame.columns]
        return frame.astype(np.int64).sort_values(keys, kind="stable").reset_index(drop=True)
    return counts.expand_prefixes(frame, len(judges))
