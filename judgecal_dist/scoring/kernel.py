"""The item-level scoring kernel that both engines call, kept apart from the summaries and the figure.

Spark's Python workers import the module of a ``mapInArrow`` function before its first batch, so this module
imports only numpy, pyarrow and the rebuilt estimators: the summaries (matplotlib, ``scipy.stats``) would add
seconds of imports per worker (measured with ``python -X importtime``).

Scored rows are written by :func:`write_items` (pyarrow's dataset writer through fsspec, Hive-partitioned by
``dataset``) on both engines: in this process, and inside the Spark tasks that scored them
(:func:`score_partition` run by :func:`judgecal_dist.engine.jobs.scorer.write_partitions`), which report the files
they wrote, so the driver promotes exactly those. An item
without a vote from any of the model's judges is not scored: its ``score``, ``p``, ``verdict`` and sets are null
(the aggregator would otherwise return the class prior as if it were a judgement).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from judgecal_dist.engine.votes.codec import block_columns, unpack
from judgecal_dist.io.filesystem import open_fs
from judgecal_dist.scoring.artifact import Calibration

__all__ = [
    "set_column",
    "items_ddl",
    "in_calibration",
    "score_batch",
    "score_partition",
    "write_items",
    "read_items_partition",
    "FILES_DDL",
]

#: What a writing task reports: one row per file it wrote (path relative to the staging folder, rows).
FILES_DDL = "file string, rows long"


def set_column(alpha: float) -> str:
    """Name of the conformal-set column of level ``alpha``: ``set_alpha_0_1`` for 0.1."""
    return "set_alpha_" + f"{alpha:g}".replace(".", "_").replace("-", "m")


def items_ddl(model: Calibration) -> str:
    """The declared schema of the scored item rows."""
    sets = ", ".join(f"{set_column(a)} array<string>" for a in model.alphas)
    base = "dataset string, item_id string, group_id string, label string, n_votes int, score double, p double, "
    return base + "verdict string, in_calibration boolean" + (f", {sets}" if sets else "")


#: Verdict strings by binary code (B 0, A 1): the scored columns are gathered from it by Arrow, not built from
#: Python strings per item.
_VERDICTS = pa.array(["B", "A"], pa.string())


def _verdict_strings(codes: np.ndarray, missing: np.ndarray) -> pa.Array:
    """``A`` / ``B`` of binary codes, null where ``missing``."""
    return _VERDICTS.take(pa.array(np.where(missing, 0, codes).astype(np.int8), mask=missing))


def _label_strings(codes: np.ndarray) -> pa.Array:
    return _verdict_strings(codes, codes < 0)  # no label: null


def _set_lists(sets: np.ndarray, unscored: np.ndarray) -> pa.Array:
    """Boolean sets (n, 2) with columns [B, A] as ``list<string>``, A listed first; null for unscored items."""
    members = sets[:, ::-1] & ~unscored[:, None]
    offsets = np.concatenate([[0], np.cumsum(members.sum(axis=1))]).astype(np.int32)
    values = _VERDICTS.take(pa.array(1 - np.nonzero(members)[1]))  # member column 0 is A
    mask = pa.array(unscored) if unscored.any() else None
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=mask)


def in_calibration(model: Any, dataset: pa.Array, item_id: pa.Array) -> pa.Array:
    """Whether each item is one the model was fitted on: the one rule of every scorer (both engines, every kind,
    the notebook).

    In-sample = the item id is among the model's recorded items and, when the model names the dataset it was fitted
    on, the item's ``dataset`` is that one (a null ``dataset``, a notebook frame without one, is not compared). Null
    for every item when the model records no items (a model saved before they were recorded).
    """
    fitted = model.fitted_item_set
    if fitted is None:
        return pa.nulls(len(item_id), pa.bool_())
    listed = pc.is_in(item_id, value_set=fitted)
    if model.fitted_dataset is None:
        return listed
    same = pc.fill_null(pc.equal(dataset, pa.scalar(model.fitted_dataset, pa.string())), True)
    return pc.and_(same, listed)


def score_batch(model: Calibration, keys: dict[str, pa.Array], votes: np.ndarray, labels: np.ndarray) -> pa.RecordBatch:
    """Scored rows of one batch of items (the kernel both engines call)."""
    out = model.score(votes)
    unscored = out["n_votes"] == 0
    verdict = _verdict_strings(out["p"] > 0.5, unscored)
    columns = [
        keys["dataset"],
        keys["item_id"],
        keys["group_id"],
        _label_strings(labels),
        pa.array(out["n_votes"]),
        pa.array(out["score"], mask=unscored),
        pa.array(out["p"], mask=unscored),
        verdict,
        in_calibration(model, keys["dataset"], keys["item_id"]),
    ] + [_set_lists(s, unscored) for s in out["sets"]]
    names = ["dataset", "item_id", "group_id", "label", "n_votes", "score", "p", "verdict", "in_calibration"]
    return pa.RecordBatch.from_arrays(columns, names=names + [set_column(a) for a in model.alphas])


def score_partition(batches: Iterator[pa.RecordBatch], model: Calibration) -> Iterator[pa.RecordBatch]:
    """Packed item votes (rows of :func:`judgecal_dist.engine.votes.spark.item_votes_spark`) in, scored rows out."""
    n_judges = len(model.judge_ids)
    for batch in batches:
        if batch.num_rows:
            votes = unpack([batch.column(c) for c in block_columns(n_judges)], n_judges)
            labels = batch.column("label").to_numpy(zero_copy_only=False)
            keys = {k: batch.column(k) for k in ("dataset", "item_id", "group_id")}
            yield score_batch(model, keys, votes, labels)


def items_schema(model: Calibration) -> pa.Schema:
    """The Arrow schema of :func:`score_batch`'s rows."""
    fields = [
        ("dataset", pa.string()),
        ("item_id", pa.string()),
        ("group_id", pa.string()),
        ("label", pa.string()),
        ("n_votes", pa.int32()),
        ("score", pa.float64()),
        ("p", pa.float64()),
        ("verdict", pa.string()),
        ("in_calibration", pa.bool_()),
    ]
    return pa.schema(fields + [(set_column(a), pa.list_(pa.string())) for a in model.alphas])


def write_items(
    batches: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    folder_url: str,
    *,
    basename: str = "part",
    storage_options: Mapping[str, Any] | None = None,
) -> list[tuple[str, int]]:
    """Write scored rows under ``folder_url/dataset=<name>/<basename>-<i>.parquet``; the files and their rows.

    The same names on a rerun of the same batches (a retried Spark task) overwrite rather than add files.
    """
    fs, root = open_fs(folder_url, dict(storage_options or {}))
    written: list[tuple[str, int]] = []

    def visit(file: Any) -> None:
        written.append((file.path[len(root) :].lstrip("/"), file.metadata.num_rows))

    reader = pa.RecordBatchReader.from_batches(schema, batches)
    pads.write_dataset(
        reader,
        root,
        filesystem=fs,
        format="parquet",
        partitioning=["dataset"],
        partitioning_flavor="hive",
        basename_template=f"{basename}-{{i}}.parquet",
        existing_data_behavior="overwrite_or_ignore",
        file_visitor=visit,
    )
    return written


def read_items_partition(
    batches: Iterator[pa.RecordBatch], files: Sequence[str], folder_url: str, storage_options: Mapping[str, Any]
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function that reads written item files back (their ``id`` column indexes ``files``),
    with the ``dataset`` column restored from the ``dataset=<name>`` folder."""
    fs, root = open_fs(folder_url, dict(storage_options))
    for batch in batches:
        for index in batch.column("id").to_pylist():
            rel = files[index]
            dataset = urllib.parse.unquote(rel.split("/", 1)[0].removeprefix("dataset="))
            with fs.open(f"{root}/{rel}", "rb") as handle:
                for part in pq.ParquetFile(handle).iter_batches():
                    column = pa.array([dataset] * part.num_rows, pa.string())
                    yield pa.RecordBatch.from_arrays([column, *part.columns], names=["dataset", *part.schema.names])
