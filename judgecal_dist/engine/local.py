"""The in-memory engine: stored tables read with pyarrow, statistics computed by the shared numpy kernels.

For tables that fit in memory (below ``EngineConfig.local_max_rows``, 5M rows by default) this path avoids
starting a JVM; its results equal the Spark path's exactly, because both feed the same integer codes to the
kernels of :mod:`judgecal_dist.engine.counts`. Tables are read directly from a dataset root written by the io
layer (Parquet folders plus ``_SUCCESS``); :func:`contract_columns` is the column contract both engines apply.
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
import pyarrow.dataset as pads

from judgecal_dist.engine import counts
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import SUCCESS
from judgecal_dist.io.filesystem import open_fs
from judgecal_dist.io.schema import (
    ITEMS_KEY,
    MISSING_CODE,
    REQUIRED_COLUMNS,
    SCHEMAS,
    VERDICT_CATEGORIES,
    VERDICT_CODES,
)
from judgecal_dist.splits import group_keys

__all__ = [
    "TABLES",
    "contract_columns",
    "dataset_root",
    "read_arrow_table",
    "count_rows",
    "category_codes",
    "judge_cells_arrow",
    "judge_cells_url",
    "item_vote_counts_arrow",
    "pattern_items_arrow",
    "pattern_cells_arrow",
]

log = logging.getLogger(__name__)

#: Tables of a dataset root; the last two are optional.
TABLES: tuple[str, ...] = ("verdicts", "labels", "judges", "items")
#: Values of optional columns that a stored table lacks (others are null): ``group_id`` defaults to ``item_id``.
COLUMN_DEFAULTS: dict[str, str | int] = {"group_id": "item_id", "sample": 0}
#: Columns the per-judge cell counts read, and the record batch size of the in-memory scans.
_CELL_COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "verdict"]
_BATCH_ROWS = 1 << 20
_CATEGORIES = pa.array(sorted(VERDICT_CODES, key=VERDICT_CODES.__getitem__))  # index in this array = code


def contract_columns(url: str, table: str, found: Sequence[str]) -> tuple[list[str], list[str]]:
    """Check a stored table's columns against its contract: ``(present, absent_optional)`` contract columns.

    ``items`` has free columns besides its key; the other tables must hold their required columns and no
    column outside their schema (:mod:`judgecal_dist.io.schema`).

    Raises
    ------
    InputError
        A required column is missing or an unknown column is present.
    """
    if table not in TABLES:
        raise InputError(f"{url}: {table}: not a table of a dataset root (expected one of {TABLES})")
    if table == "items":
        required: Sequence[str] = ITEMS_KEY
        schema_names = list(found)
    else:
        required = REQUIRED_COLUMNS[table]
        schema_names = SCHEMAS[table].names
    missing = [c for c in required if c not in found]
    if missing:
        raise InputError(f"{url}: {table}: missing required column(s) {missing} (found {list(found)})")
    unknown = [c for c in found if c not in schema_names]
    if unknown:
        raise InputError(f"{url}: {table}: unknown column(s) {unknown} (the contract has {schema_names})")
    return [c for c in schema_names if c in found], [c for c in schema_names if c not in found]


def dataset_root(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """Filesystem and path of a complete dataset root (one with ``_SUCCESS``).

    Raises
    ------
    InputError
        The root has no ``_SUCCESS`` (missing, or an ingest that did not finish).
    """
    fs, path = open_fs(url.rstrip("/"), dict(storage_options or {}))
    path = path.rstrip("/")
    if not fs.exists(f"{path}/{SUCCESS}"):
        raise InputError(f"{url}: no {SUCCESS} marker: not a complete dataset root (ingest it first)")
    return fs, path


def _dataset(
    url: str, table: str, storage_options: Mapping[str, Any] | None, *, dictionary_columns: Sequence[str] = ()
) -> pads.Dataset:
    fs, root = dataset_root(url, storage_options)
    if not fs.exists(f"{root}/{table}"):
        raise InputError(f"{url}: {table}: table not found")
    options = pads.ParquetReadOptions(dictionary_columns=set(dictionary_columns))
    return pads.dataset(f"{root}/{table}", filesystem=fs, format=pads.ParquetFileFormat(read_options=options))


def read_arrow_table(
    url: str,
    table: str,
    columns: Sequence[str] | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> pa.Table:
    """Read a stored table with pyarrow, as its contract's columns (absent optional ones filled).

    Parameters
    ----------
    url : str
        Dataset root (local path, ``file://`` or ``s3://``).
    table : str
        One of :data:`TABLES`.
    columns : sequence of str, optional
        Contract columns to read (all by default).
    storage_options : mapping, optional
        fsspec options (never logged).

    Raises
    ------
    InputError
        No ``_SUCCESS``, table absent, or a column contract violation.
    """
    dataset = _dataset(url, table, storage_options)
    present, absent = contract_columns(url, table, dataset.schema.names)
    schema_order = SCHEMAS[table].names if table in SCHEMAS else present
    wanted = list(columns) if columns is not None else schema_order
    outside = [c for c in wanted if c not in present + absent]
    if outside:
        raise InputError(f"{url}: {table}: no column(s) {outside} in the contract")
    read = [c for c in wanted if c in present]
    defaults = [COLUMN_DEFAULTS[c] for c in wanted if c in absent and c in COLUMN_DEFAULTS]
    extra = [c for c in defaults if isinstance(c, str) and c not in read]
    data = dataset.to_table(columns=read + extra)
    out = {}
    for name in wanted:
        field = SCHEMAS[table].field(name) if table in SCHEMAS else dataset.schema.field(name)
        if name in present:
            out[name] = data[name].cast(field.type)
        elif isinstance(COLUMN_DEFAULTS.get(name), str):
            out[name] = data[COLUMN_DEFAULTS[name]].cast(field.type)
        else:
            out[name] = pa.array(np.full(data.num_rows, COLUMN_DEFAULTS.get(name)), field.type)
    return pa.table(out)


def count_rows(url: str, table: str = "verdicts", storage_options: Mapping[str, Any] | None = None) -> int:
    """Rows of a stored table, from the Parquet footers only (no data is read)."""
    return int(_dataset(url, table, storage_options).count_rows())


def category_codes(values: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.int8]:
    """Codes of a category column: ``VERDICT_CODES``, -1 for null, -2 for a category outside the alphabet."""
    index = pc.index_in(values, value_set=_CATEGORIES)
    codes = pc.if_else(pc.is_null(values), MISSING_CODE, pc.fill_null(index, counts.UNKNOWN_CODE))
    return pc.cast(codes, pa.int8()).to_numpy()


def _reject_unknown(verdicts: pa.ChunkedArray, unknown: npt.NDArray[np.bool_]) -> None:
    if unknown.any():
        examples = pc.filter(verdicts, pa.array(unknown)).unique().to_pylist()[:3]
        raise InputError(
            f"verdicts: verdict: {int(unknown.sum())} rows with a category outside {VERDICT_CATEGORIES} (e.g. {examples})"
        )


def _group_keys_of(values: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    # xxhash64 of each distinct group id once, then gathered: the table has far fewer groups than rows.
    encoded = pc.dictionary_encode(values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values)
    keys = group_keys(encoded.dictionary.to_pylist())
    return keys[encoded.indices.to_numpy()]


def _dictionary(column: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    return column


def _indices(column: pa.DictionaryArray, *, name: str) -> npt.NDArray[np.int64]:
    if column.null_count:
        raise InputError(f"verdicts: {name}: {column.null_count} null values in a key column")
    return column.indices.to_numpy(zero_copy_only=False).astype(np.int64)


class _LabelLookup:
    """Label codes of (dataset, item_id) pairs; a batch looks up its distinct pairs only, not its rows."""

    def __init__(self, labels: pa.Table) -> None:
        self.index = pd.MultiIndex.from_arrays(
            [labels["dataset"].to_numpy(zero_copy_only=False), labels["item_id"].to_numpy(zero_copy_only=False)]
        )
        if not self.index.is_unique:
            raise InputError(
                "labels: dataset+item_id: duplicate keys (ingest validates them; was this table written by hand?)"
            )
        # Null labels keep code -1, so their rows drop out exactly like rows of items without a label row.
        self.codes = np.append(category_codes(labels["label"]), MISSING_CODE).astype(np.int64)

    def __call__(self, dataset: pa.DictionaryArray, item_id: pa.DictionaryArray) -> npt.NDArray[np.int64]:
        n_items = len(item_id.dictionary)
        pair = _indices(dataset, name="dataset") * n_items + _indices(item_id, name="item_id")
        inverse, pairs = pd.factorize(pair)
        names = pd.MultiIndex.from_arrays(
            [
                dataset.dictionary.take(pa.array(pairs // n_items)).to_numpy(zero_copy_only=False),
                item_id.dictionary.take(pa.array(pairs % n_items)).to_numpy(zero_copy_only=False),
            ]
        )
        return self.codes[self.index.get_indexer(names)][inverse]


def _batch_cells(
    batch: pa.RecordBatch, labels: _LabelLookup, judge_ids: pa.Array
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(cell, group_key)`` of a batch's labelled rows; strings are mapped once per dictionary entry, not per row."""
    columns = {name: _dictionary(batch.column(name)) for name in _CELL_COLUMNS}
    label = labels(columns["dataset"], columns["item_id"])
    group = columns["group_id"]
    key = group_keys(group.dictionary.to_pylist())[_indices(group, name="group_id")]
    judge = columns["judge_id"]
    judge_idx = pc.index_in(judge.dictionary, value_set=judge_ids).to_numpy(zero_copy_only=False)
    judge_idx = np.nan_to_num(judge_idx, nan=-1).astype(np.int64)[_indices(judge, name="judge_id")]
    verdict = columns["verdict"]
    code = np.append(category_codes(verdict.dictionary), MISSING_CODE)  # the last entry serves null indices
    code = code[pc.fill_null(verdict.indices, len(verdict.dictionary)).to_numpy()]
    keep = label != MISSING_CODE
    cell = counts.cell_codes(judge_idx[keep], label[keep], code[keep], n_judges=len(judge_ids))
    return cell, key[keep]


def _judge_cells_of_batches(
    batches: Iterable[pa.RecordBatch], labels: pa.Table, judge_ids: list[str], seeds: Sequence[int], fraction: float
) -> pd.DataFrame:
    lookup = _LabelLookup(labels)
    judges = pa.array(judge_ids, pa.string())
    tensor = np.zeros(
        (len(seeds), len(counts.SIDES), len(judge_ids), counts.N_LABELS, counts.N_VERDICT_SLOTS), np.int64
    )
    for batch in batches:
        cell, key = _batch_cells(batch, lookup, judges)
        tensor += counts.cell_tensor(cell, key, seeds=seeds, fraction=fraction, n_judges=len(judge_ids))
    return counts.decode_judge_cells(counts.judge_cell_batch(tensor, seeds).to_pandas(), judge_ids)


def judge_cells_arrow(verdicts: pa.Table, labels: pa.Table, seeds: Sequence[int], fraction: float) -> pd.DataFrame:
    """:func:`judgecal_dist.engine.stats.judge_cells` on in-memory tables.

    ``verdicts`` needs ``dataset, item_id, group_id, judge_id, verdict``; ``labels`` ``dataset, item_id, label``.
    """
    judge_ids = sorted(pc.unique(verdicts["judge_id"]).to_pylist())
    batches = verdicts.select(_CELL_COLUMNS).to_batches(max_chunksize=_BATCH_ROWS)
    return _judge_cells_of_batches(batches, labels, judge_ids, seeds, fraction)


def judge_cells_url(
    url: str, seeds: Sequence[int], fraction: float, *, storage_options: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """:func:`judgecal_dist.engine.stats.judge_cells` streamed from a dataset root, one record batch at a time.

    Notes
    -----
    Memory holds the labels, one batch (about 1M rows) and the count tensor. String columns are read
    dictionary-encoded, so labels, group keys, judge indices and verdict codes are computed once per
    dictionary entry of a batch and gathered by integer indices.
    """
    verdicts = _dataset(url, "verdicts", storage_options, dictionary_columns=_CELL_COLUMNS)
    present, _ = contract_columns(url, "verdicts", verdicts.schema.names)
    # A table without group_id uses item_id as the group (COLUMN_DEFAULTS).
    columns = {c: pc.field(c if c in present else str(COLUMN_DEFAULTS[c])) for c in _CELL_COLUMNS}
    judge_ids: set[str] = set()
    for batch in verdicts.to_batches(columns=["judge_id"], batch_size=_BATCH_ROWS):
        judge_ids.update(_dictionary(batch.column("judge_id")).dictionary.to_pylist())
    labels = read_arrow_table(url, "labels", ["dataset", "item_id", "label"], storage_options=storage_options)
    batches = verdicts.to_batches(columns=columns, batch_size=_BATCH_ROWS)
    return _judge_cells_of_batches(batches, labels, sorted(judge_ids), seeds, fraction)


def item_vote_counts_arrow(verdicts: pa.Table) -> pd.DataFrame:
    """:func:`judgecal_dist.engine.stats.item_vote_counts` on an in-memory table (pyarrow hash aggregation).

    Returns
    -------
    DataFrame
        ``dataset, item_id, judge_id, n_A, n_B, n_tie, n_missing, n_score, score_mean, score_var`` sorted by key.
    """
    codes = category_codes(verdicts["verdict"])
    _reject_unknown(verdicts["verdict"], codes == counts.UNKNOWN_CODE)
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

    ``pattern`` is base 4 with digit ``p`` = verdict slot of ``judges[p]`` (3 = missing or no row); it is built as
    ``4**K - 1 + sum((slot - 3) * 4**p)`` over the item's rows, the same sum the Spark path aggregates.
    """
    rows = verdicts.filter(pc.equal(verdicts["sample"], pa.scalar(sample, pa.int32())))
    position = pc.index_in(rows["judge_id"], value_set=pa.array(list(judges), pa.string()))
    in_panel = pc.is_valid(position).to_numpy(zero_copy_only=False)
    code = category_codes(rows["verdict"]).astype(np.int64)
    _reject_unknown(rows["verdict"], (code == counts.UNKNOWN_CODE) & in_panel)
    slot = np.where(code == MISSING_CODE, counts.N_LABELS, code)
    shift = 2 * pc.fill_null(position, 0).to_numpy().astype(np.int64)
    delta = np.where(in_panel, (slot - counts.N_LABELS) << shift, 0)
    items = (
        rows.select(["dataset", "item_id", "group_id"])
        .append_column("delta", pa.array(delta, pa.int64()))
        .group_by(["dataset", "item_id", "group_id"], use_threads=False)
        .aggregate([("delta", "sum")])
        .join(labels.select(["dataset", "item_id", "label"]), keys=["dataset", "item_id"], join_type="left outer")
    )
    pattern = items["delta_sum"].to_numpy() + (4 ** len(judges) - 1)
    return pattern, category_codes(items["label"]), _group_keys_of(items["group_id"])


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
    """:func:`judgecal_dist.engine.stats.pattern_cells` on in-memory tables."""
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
