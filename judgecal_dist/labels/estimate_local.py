"""``label estimate`` in this process: the table read and checked as ``judgecal score`` reads it, then the one kernel
(:func:`~judgecal_dist.labels.estimate_kernel.batch_moments`) over chunks of items, the sums added."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal_dist.config import EngineConfig
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.labels.estimate_kernel import PAIR, batch_moments, group_values
from judgecal_dist.methods.labels.moments import LabelMoments
from judgecal_dist.progress import Progress
from judgecal_dist.scoring.artifact import Calibration
from judgecal_dist.scoring.items import TableChecks, prepare_local

__all__ = ["add_counts", "add_moments", "local_moments"]

_CHUNK_ITEMS = 200_000  # items per kernel call (bounds the float64 copies of one chunk)


def _positions(keys: pa.Table, table: pa.Table) -> np.ndarray:
    """Row of ``table`` holding each item of ``keys`` by ``(dataset, item_id)``; -1 where none does."""
    index = pd.MultiIndex.from_arrays(
        [table[c].cast(pa.string()).to_numpy(zero_copy_only=False) for c in ("dataset", "item_id")]
    )
    names = pd.MultiIndex.from_arrays(
        [keys[c].cast(pa.string()).to_numpy(zero_copy_only=False) for c in ("dataset", "item_id")]
    )
    return np.asarray(index.get_indexer(names))


def _aligned(keys: pa.Table, table: pa.Table, columns: Sequence[str]) -> dict[str, Any]:
    """``columns`` of ``table`` in the order of ``keys``' items (null where an item has no row)."""
    where = _positions(keys, table)
    taken = table.select(list(columns)).take(pa.array(np.where(where < 0, 0, where)))
    missing = pa.array(where < 0)
    return (
        {c: _null_where(taken[c], missing) for c in columns}
        if table.num_rows
        else {c: pa.nulls(keys.num_rows) for c in columns}
    )


def _null_where(column: pa.ChunkedArray, missing: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    return pc.if_else(missing, pa.scalar(None, column.type), column.combine_chunks())


def local_moments(
    model: Calibration,
    data_url: str,
    engine: EngineConfig,
    sample: int,
    by: Sequence[str],
    queue: pa.Table | None,
) -> tuple[dict[str, LabelMoments], dict[str, int]]:
    """Each target's sums and the label counts over every item of ``data_url`` (see
    :func:`judgecal_dist.labels.estimate.estimate_labels`)."""
    checks = TableChecks(model, data_url, sample, "error", 0.5)
    items = prepare_local(model, data_url, engine, sample, checks).items
    keys = items.keys
    raw = [c for c in by if c != PAIR] + (["model_a", "model_b"] if PAIR in by else [])
    columns: dict[str, Any] = {}
    if raw:
        table = read_dataset_table(
            data_url, "items", ["dataset", "item_id", *raw], storage_options=engine.storage_options
        )
        columns = _aligned(keys, table, raw)
    queued = None
    if queue is not None:
        queued = np.asarray(
            _aligned(keys, queue, ["inclusion_prob"])["inclusion_prob"].to_numpy(zero_copy_only=False), dtype=np.float64
        )
    n = keys.num_rows
    total: dict[str, LabelMoments] = {}
    counts: dict[str, float] = {}
    progress = Progress(n, label="label estimate: items")
    for start in range(0, n, _CHUNK_ITEMS):
        part = slice(start, min(start + _CHUNK_ITEMS, n))
        chunk_keys = {
            k: keys[k].slice(start, part.stop - start).combine_chunks() for k in ("dataset", "item_id", "group_id")
        }
        groups = group_values({c: v.slice(start, part.stop - start) for c, v in columns.items()}, by)
        moments, chunk_counts = batch_moments(
            model, chunk_keys, items.votes[part], items.labels[part], groups, None if queued is None else queued[part]
        )
        add_moments(total, moments)
        add_counts(counts, chunk_counts)
        progress.advance(part.stop - start)
    return total, {k: int(v) for k, v in counts.items()}


def add_moments(total: dict[str, LabelMoments], part: dict[str, LabelMoments]) -> None:
    """Add ``part``'s sums into ``total`` (target by target)."""
    for name, m in part.items():
        total[name] = total[name] + m if name in total else m


def add_counts(total: dict[str, float], part: dict[str, float]) -> None:
    """Add ``part``'s counts into ``total``."""
    for name, value in part.items():
        total[name] = total.get(name, 0.0) + value
