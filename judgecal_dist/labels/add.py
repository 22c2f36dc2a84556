"""``judgecal label add``: labels that came back merged into an ingested dataset's labels table.

**Input.** A labelling queue (``label select``'s ``queue.csv`` with a ``label`` column filled in), or any CSV /
JSON lines / Parquet file of ``item_id, label`` with optional ``dataset`` (default: the dataset's only one) and
``label_score``, is read by ingest's own labels reader (:func:`~judgecal_dist.io.adapters.long.read_labels_file`:
``A``/``B``/``tie`` or ``1``/``0``, crowd-kit's ``task`` too) and conformed to the labels contract
(:func:`~judgecal_dist.io.validate.conform_table`). Other columns (a queue's ``p``, ``inclusion_prob``, ...) are
ignored; a row with a blank label is skipped (its label is not back yet) and counted.

**Checks, all before a byte is written** (one line, exit 2, naming the file, column and row and the fix): ``--data``
is a committed dataset judgecal wrote (``_SUCCESS`` and its ``_ingest.json`` report, a labels folder of judgecal's
parts only); the file has rows and labels; no item is listed twice; every item is one of the dataset's; no label
differs from one already present (unless ``overwrite``).

**Write.** The merged table (the old rows as they were, new labels set, items the table lacked appended) is written
to a staging folder inside the dataset. Then ``_SUCCESS`` is removed (readers stop trusting the dataset), the
labels folder is swapped for the staged one, the report records the addition (in its ``labels_added`` and in the
identity that ingest or generate compare on a rerun), ``_SUCCESS`` is written last, and only then is the old labels
folder removed. Every file fingerprint of the dataset changes, so ``fit``, ``score``, ``label select`` and ``label
estimate`` see changed input. A failure during the swap puts the old folder and report back. Labels that are all
present already write nothing (the summary says so). Nothing but the labels table judgecal wrote is ever removed.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.long import read_labels_file
from judgecal_dist.io.dataset import dataset_root, read_dataset_batches, read_dataset_table, read_report
from judgecal_dist.io.filesystem import fingerprint_inputs, join_path, open_fs
from judgecal_dist.io.records import to_json
from judgecal_dist.io.schema import SUCCESS
from judgecal_dist.io.validate import conform_table
from judgecal_dist.io.writer import REPORT, ROWS_PER_PART

__all__ = ["Counts", "Merge", "add_labels", "merge_labels"]

log = logging.getLogger(__name__)

KEYS = ["dataset", "item_id"]
#: Columns of a labels file that are read; any other is ignored (a queue's p, inclusion_prob, stratum, round).
LABEL_COLUMNS = ("dataset", "item_id", "label", "label_score")
#: The staged labels table and the old one during the swap (hidden names: no reader takes them for tables).
STAGING, REPLACED = "_labels.staging", "_labels.replaced"
#: The parts judgecal writes in a table folder (the dataset writer's names).
_PART = re.compile(r"part-\d{5}\.parquet")
_EXAMPLES = 3
_FIX_VALUES = "A, B, tie or 1/0"


@dataclass(frozen=True)
class Counts:
    """What an addition does: labels new to the dataset, labels replaced (``overwrite``), labels already present,
    rows of the file with a blank label, and the dataset's labelled items afterwards."""

    added: int
    replaced: int
    unchanged: int
    blank: int
    total_labelled: int


@dataclass(frozen=True)
class Merge:
    """The merged labels table, its counts, and the file's rows for items the old table lacked (``_row``: their
    row in the file, counted from 1 without the header)."""

    table: pa.Table
    counts: Counts
    appended: pa.Table


def add_labels(
    data_url: str,
    labels_url: str,
    *,
    overwrite_labels: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge the labels of ``labels_url`` into the labels table of the dataset at ``data_url``.

    Parameters
    ----------
    data_url : str
        A committed dataset (``judgecal ingest`` or ``judgecal generate``).
    labels_url : str
        CSV / JSON lines / Parquet file (or Parquet folder) with ``item_id`` and ``label``; ``dataset`` and
        ``label_score`` optional, other columns ignored (a filled-in ``queue.csv`` works as it is).
    overwrite_labels : bool, default False
        Replace labels that differ from the ones present instead of refusing them.
    storage_options : mapping, optional
        fsspec options for both URLs (never logged).

    Returns
    -------
    dict
        ``added``, ``replaced``, ``unchanged``, ``blank``, ``total_labelled`` and ``written`` (False: every label
        was present already; nothing was written).

    Raises
    ------
    InputError
        Any check of the module's docstring; nothing is written then.
    """
    options = dict(storage_options or {})
    fs, root, report = _open_dataset(data_url, options)
    current = read_dataset_table(data_url, "labels", storage_options=options)
    given, blank, scored = _read_given(labels_url, data_url, _datasets(report, current), options)
    merge = merge_labels(current, given, labels_url, blank=blank, scored=scored, overwrite=overwrite_labels)
    _check_known(merge.appended, data_url, labels_url, options)
    counts = asdict(merge.counts)
    if not merge.counts.added and not merge.counts.replaced:
        log.debug("%s: every label of %s is present already; nothing written", data_url, labels_url)
        return counts | {"written": False}
    record = counts | {"file": str(labels_url), "file_sha256": fingerprint_inputs(labels_url, options)["sha256"]}
    table = conform_table(merge.table, "labels", source=f"{data_url}: labels (merged)")  # the contract, once more
    _swap(fs, root, table, _updated_report(report, table, record))
    log.info("%s: labels table replaced (%s)", data_url, counts)
    return counts | {"written": True}


def _open_dataset(url: str, options: dict[str, Any]) -> tuple[AbstractFileSystem, str, dict[str, Any]]:
    """The committed dataset's filesystem, root and report, refused unless judgecal wrote it as a whole."""
    fs, root = dataset_root(url, options)
    try:
        report = read_report(url, storage_options=options)
    except (OSError, ValueError) as err:
        raise InputError(
            f"{url}: {REPORT}: not a judgecal dataset (committed, but no readable ingest report; a label select "
            "queue?): give --data the folder `judgecal ingest` or `judgecal generate` wrote"
        ) from err
    for leftover in (STAGING, REPLACED):
        if fs.exists(join_path(root, leftover)):
            raise InputError(
                f"{url}: {leftover}: left by an interrupted label add (the dataset itself is whole): remove "
                f"{leftover} from the dataset folder, then add the labels again"
            )
    folder = join_path(root, "labels")
    entries = fs.ls(folder, detail=True) if fs.isdir(folder) else []
    foreign = sorted(
        name
        for entry in entries
        if not _PART.fullmatch(name := posixpath.basename(str(entry["name"]).rstrip("/"))) or entry["type"] != "file"
    )
    if foreign:
        raise InputError(
            f"{url}: labels: {foreign[0]}: not a part judgecal wrote ({len(foreign)} such entries); label add "
            "replaces the labels folder only when it holds judgecal's part-NNNNN.parquet files: move it out"
        )
    return fs, root.rstrip("/"), report


def _datasets(report: Mapping[str, Any], current: pa.Table) -> list[str]:
    """The dataset names of ``--data``: the report's, else the labels table's."""
    names = report.get("datasets")
    if isinstance(names, list) and names:
        return sorted(str(n) for n in names)
    return sorted(str(n) for n in pc.unique(current["dataset"]).to_pylist() if n is not None)


def _read_given(
    url: str, data_url: str, datasets: Sequence[str], options: dict[str, Any]
) -> tuple[pa.Table, int, bool]:
    """The file's labelled rows conformed (plus ``_row``), its blank rows, and whether it gives ``label_score``."""
    fs, path = open_fs(url, options)
    if fs.isfile(path) and not fs.size(path):
        raise InputError(f"{url}: (file): empty file: write a header item_id,label and one row per labelled item")
    raw = read_labels_file(url, options)
    if raw.num_rows == 0:
        raise InputError(f"{url}: (file): no rows (a header only): add one item_id,label row per labelled item")
    if "label" not in raw.column_names:
        raise InputError(
            f"{url}: label: no label column (found {raw.column_names}): add a label column with {_FIX_VALUES} per "
            "item (a label select queue.csv: fill its label column)"
        )
    table = raw.select([c for c in LABEL_COLUMNS if c in raw.column_names])
    if "dataset" not in table.column_names:
        if len(datasets) != 1:
            raise InputError(
                f"{url}: dataset: no dataset column, and {data_url} holds {len(datasets)} datasets "
                f"{list(datasets)[:5]}: add a dataset column naming each row's dataset"
            )
        table = table.append_column("dataset", pa.array([datasets[0]] * table.num_rows, pa.string()))
    conformed = conform_table(table, "labels", source=url, check_keys=False)
    _check_duplicates(conformed, url)
    conformed = conformed.append_column("_row", pa.array(np.arange(1, conformed.num_rows + 1)))
    labelled = conformed.filter(pc.is_valid(conformed["label"]))
    if labelled.num_rows == 0:
        raise InputError(
            f"{url}: label: every label is blank ({conformed.num_rows} rows): fill the label column with "
            f"{_FIX_VALUES} (a blank label means not labelled yet)"
        )
    return labelled, conformed.num_rows - labelled.num_rows, "label_score" in raw.column_names


def _check_duplicates(table: pa.Table, url: str) -> None:
    """Refuse an item listed twice in the file (blank rows included: which one holds its label?)."""
    keys = table.select(KEYS).to_pandas()
    twice = keys.duplicated(keep=False).to_numpy()
    if twice.any():
        examples = keys[twice].drop_duplicates().head(_EXAMPLES).to_dict("records")
        items = int(keys[twice].drop_duplicates().shape[0])
        raise InputError(
            f"{url}: item_id: {items} items listed more than once ({int(twice.sum())} rows, e.g. {examples}; first "
            f"at row {int(np.argmax(twice)) + 1}): keep one row per item"
        )


def _equal(left: pa.ChunkedArray, right: pa.ChunkedArray) -> pa.ChunkedArray:
    """Element-wise equality with two nulls equal."""
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    return pc.or_(pc.fill_null(pc.equal(left, right), False), both_null)


def merge_labels(
    current: pa.Table, given: pa.Table, source: str, *, blank: int = 0, scored: bool = False, overwrite: bool = False
) -> Merge:
    """The labels table ``current`` with the labelled rows ``given`` merged in.

    Parameters
    ----------
    current : pyarrow.Table
        The dataset's labels table (contract columns), kept in its order.
    given : pyarrow.Table
        Conformed labels with a label each, plus ``_row`` (their rows in ``source``).
    source : str
        The file's name, in the refusal.
    blank : int
        The file's rows with a blank label (counted only).
    scored : bool
        The file gives ``label_score``: it is set (and compared) with each label. Otherwise a new or replaced
        label has no score and a present one keeps its own.
    overwrite : bool
        Replace labels that differ instead of refusing them.

    Raises
    ------
    InputError
        A label (or, when ``scored``, a score) differs from the one present and ``overwrite`` is false.
    """
    incoming = given.select([*KEYS, "label", "label_score", "_row"]).rename_columns(
        [*KEYS, "new_label", "new_score", "_row"]
    )
    order = current.append_column("_order", pa.array(np.arange(current.num_rows)))
    joined = order.join(incoming, keys=KEYS, join_type="left outer", use_threads=False).sort_by("_order")
    has_new, had = pc.is_valid(joined["new_label"]), pc.is_valid(joined["label"])
    same_label = _equal(joined["label"], joined["new_label"])
    same = pc.and_(same_label, _equal(joined["label_score"], joined["new_score"])) if scored else same_label
    present = pc.and_(has_new, had)
    differ = pc.and_(present, pc.invert(same))
    if pc.any(differ).as_py() and not overwrite:
        raise _differ_error(joined.filter(differ), source)
    kept_score = pc.if_else(same_label, joined["label_score"], pa.scalar(None, pa.float64()))
    label = pc.if_else(has_new, joined["new_label"], joined["label"])
    score = pc.if_else(has_new, joined["new_score"] if scored else kept_score, joined["label_score"])
    updated = pa.table(
        {"dataset": joined["dataset"], "item_id": joined["item_id"], "label": label, "label_score": score}
    )
    appended = incoming.join(current.select(KEYS), keys=KEYS, join_type="left anti", use_threads=False).sort_by("_row")
    new_rows = appended.select([*KEYS, "new_label", "new_score"]).rename_columns(list(LABEL_COLUMNS))
    table = pa.concat_tables([updated.cast(current.schema), new_rows.cast(current.schema)])
    counts = Counts(
        added=int(pc.sum(pc.and_(has_new, pc.invert(had))).as_py() or 0) + appended.num_rows,
        replaced=int(pc.sum(differ).as_py() or 0),
        unchanged=int(pc.sum(pc.and_(present, same)).as_py() or 0),
        blank=blank,
        total_labelled=int(pc.sum(pc.is_valid(table["label"])).as_py() or 0),
    )
    return Merge(table=table, counts=counts, appended=appended.select([*KEYS, "_row"]))


def _differ_error(rows: pa.Table, source: str) -> InputError:
    examples = [
        {"item_id": r["item_id"], "label": r["new_label"], "present": r["label"]}
        for r in rows.sort_by("_row").slice(0, _EXAMPLES).to_pylist()
    ]
    first = int(pc.min(rows["_row"]).as_py())
    return InputError(
        f"{source}: label: {rows.num_rows} labels differ from the ones in the dataset (e.g. {examples}; first at "
        f"row {first}): correct the file, or pass --overwrite-labels to replace them"
    )


def _check_known(appended: pa.Table, data_url: str, source: str, options: dict[str, Any]) -> None:
    """Refuse rows for items the dataset's verdicts do not hold (read as a stream, keeping only the file's ids)."""
    if appended.num_rows == 0:
        return
    wanted = pc.unique(appended["item_id"])
    found = [
        batch.filter(pc.is_in(batch["item_id"], value_set=wanted)).group_by(KEYS, use_threads=False).aggregate([])
        for batch in read_dataset_batches(data_url, "verdicts", KEYS, storage_options=options)
    ]
    known = pa.concat_tables(found).group_by(KEYS, use_threads=False).aggregate([]) if found else None
    unknown = appended if known is None else appended.join(known, keys=KEYS, join_type="left anti", use_threads=False)
    if unknown.num_rows:
        unknown = unknown.sort_by("_row")
        examples = unknown.select(KEYS).slice(0, _EXAMPLES).to_pylist()
        raise InputError(
            f"{source}: item_id: {unknown.num_rows} items not in {data_url} (e.g. {examples}; first at row "
            f"{unknown['_row'][0].as_py()}): label only the dataset's items (is the file of another dataset?)"
        )


def _updated_report(report: Mapping[str, Any], table: pa.Table, record: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset's report after the addition: the labels table's rows and parts, the addition appended to
    ``labels_added``, and the additions' file fingerprints in the identity ingest or generate compare on a rerun
    (the dataset is no longer what those inputs alone make)."""
    out = dict(report)
    added = [*out.get("labels_added", []), dict(record)]
    out["labels_added"] = added
    for key, value in (("rows_written", table.num_rows), ("parts", _n_parts(table))):
        if isinstance(out.get(key), dict):
            out[key] = {**out[key], "labels": value}
    if out.get("unlabelled"):
        out["unlabelled"] = False
    for key in ("inputs", "generated_from"):
        if isinstance(out.get(key), dict):
            out[key] = {**out[key], "labels_added": [entry["file_sha256"] for entry in added]}
    return out


def _n_parts(table: pa.Table) -> int:
    return max(1, -(-table.num_rows // ROWS_PER_PART))


def _write_parts(fs: AbstractFileSystem, folder: str, table: pa.Table) -> None:
    """The table as the dataset writer lays a table out: ``part-NNNNN.parquet`` of at most ``ROWS_PER_PART`` rows."""
    fs.makedirs(folder, exist_ok=True)
    for index in range(_n_parts(table)):
        part = table.slice(index * ROWS_PER_PART, ROWS_PER_PART)
        pq.write_table(part, join_path(folder, f"part-{index:05d}.parquet"), filesystem=fs)


def _swap(fs: AbstractFileSystem, root: str, table: pa.Table, report: Mapping[str, Any]) -> None:
    """Stage the table, then swap it for the labels folder between removing and rewriting ``_SUCCESS``."""
    staging, labels, replaced = (join_path(root, name) for name in (STAGING, "labels", REPLACED))
    report_path, success = join_path(root, REPORT), join_path(root, SUCCESS)
    old_report = fs.cat_file(report_path)
    try:
        _write_parts(fs, staging, table)
    except BaseException:
        if fs.exists(staging):
            fs.rm(staging, recursive=True)
        raise
    old_parts = _names(fs, labels)
    fs.rm(success)
    try:
        _move(fs, labels, replaced)
        _move(fs, staging, labels)
        fs.pipe_file(report_path, to_json(report).encode())
    except BaseException:
        _restore(fs, root, old_parts=old_parts, old_report=old_report)
        raise
    fs.pipe_file(success, b"")
    fs.rm(replaced, recursive=True)
    fs.invalidate_cache(root)


def _move(fs: AbstractFileSystem, source: str, target: str) -> None:
    """A folder moved: one rename on a local disk; on an object store each object copied, then the originals
    removed (s3fs's recursive ``mv`` also tries to copy the folder's own prefix, which is no object)."""
    if isinstance(fs, LocalFileSystem):
        fs.mv(source, target, recursive=True)
        return
    files = fs.find(source)
    fs.copy(files, [join_path(target, path[len(source) :].lstrip("/")) for path in files])
    fs.rm(files)
    fs.invalidate_cache(posixpath.dirname(source))


def _names(fs: AbstractFileSystem, folder: str) -> set[str]:
    fs.invalidate_cache(folder)
    return {posixpath.basename(path) for path in fs.find(folder)}


def _restore(fs: AbstractFileSystem, root: str, *, old_parts: set[str], old_report: bytes) -> None:
    """Put the old labels table and report back and recommit, wherever the swap stopped: when the old parts are all
    aside (moved out whole) they replace what is in the labels folder; otherwise the labels folder still holds them
    (a copy aside stopped part way) and the partial copy goes."""
    staging, labels, replaced = (join_path(root, name) for name in (STAGING, "labels", REPLACED))
    if old_parts <= _names(fs, replaced):
        if fs.exists(labels):
            fs.rm(labels, recursive=True)
        _move(fs, replaced, labels)
    for leftover in (staging, replaced):
        if fs.exists(leftover):
            fs.rm(leftover, recursive=True)
    fs.pipe_file(join_path(root, REPORT), old_report)
    fs.pipe_file(join_path(root, SUCCESS), b"")
