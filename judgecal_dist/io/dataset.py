"""The ingested dataset store: a folder of Parquet tables at any fsspec URL, committed by ``_SUCCESS``.

Layout of a dataset root (local path, ``file://`` or ``s3://``)::

    verdicts/part-00000.parquet ...   (parts of at most ``ROWS_PER_PART`` rows)
    labels/part-00000.parquet
    judges/  items/  refused/         (optional)
    _ingest.json                      (the adapter's counts report, plus rows and parts written per table)
    _SUCCESS                          (written last; readers trust a dataset only with it)

A table is the ``*.parquet`` files of its folder. As in Spark and Hadoop, names starting with ``_`` or ``.``
(``_SUCCESS``, ``.part-00000.parquet.crc``, ``.DS_Store``) are hidden and ignored; any other entry (a
``README.md``, a CSV, a subfolder) is refused with an error naming it, since it is either a misplaced file or a
part in a format no reader takes. Spark and pyarrow read the parts listed by :func:`table_parts`, so both see
exactly the same rows and refuse the same folders (one exception: on a local disk Hadoop checks a part against a
``.<part>.crc`` beside it, so a stale checksum file fails Spark's scan of that part). This module is the one
reader of the
contract: the in-memory engine, Spark (:func:`judgecal_dist.engine.jobs.spark.read_table` reads the parts listed here)
and the scans inside Spark tasks (:func:`read_part`) all take their columns and defaults from it.

Writers validate before writing: :func:`write_dataset` checks every table first, so rejected input leaves nothing
under the destination; the streaming :class:`DatasetWriter` checks each chunk before writing it and removes what it
wrote when a later check fails or the writer is closed without :meth:`DatasetWriter.commit`.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from judgecal_dist.errors import InputError
from judgecal_dist.io.filesystem import join_path, open_fs, require_exists
from judgecal_dist.io.schema import COLUMN_DEFAULTS, FREE_TABLES, REQUIRED_COLUMNS, SCHEMAS, SUCCESS, TABLES
from judgecal_dist.io.validate import validate_tables
from judgecal_dist.io.writer import REPORT, ROWS_PER_PART, DatasetWriter, is_committed

#: Entries of a table folder whose names start with these are hidden and ignored (Spark's and Hadoop's rule).
HIDDEN_PREFIXES = ("_", ".")
#: Listing fields that change when a file is rewritten (local mtime, S3 LastModified / ETag, GCS updated).
_STAMP_KEYS = ("mtime", "LastModified", "ETag", "etag", "last_modified", "updated")
#: Unified schemas of part listings whose every footer was read, by (protocol, parts, dictionary columns).
_VERIFIED: dict[tuple[Any, ...], pa.Schema] = {}
_MAX_VERIFIED = 64

__all__ = [
    "read_dataset_batches",
    "ROWS_PER_PART",
    "SUCCESS",
    "REPORT",
    "open_fs",
    "DatasetWriter",
    "write_dataset",
    "dataset_root",
    "dataset_tables",
    "dataset_files",
    "table_parts",
    "HIDDEN_PREFIXES",
    "contract_columns",
    "with_defaults",
    "open_table",
    "read_dataset_table",
    "read_part",
    "count_rows",
    "choose_dataset",
    "read_report",
]


def write_dataset(
    dest: str,
    tables: Mapping[str, pa.Table],
    report: Mapping[str, Any],
    *,
    storage_options: dict[str, Any] | None = None,
    overwrite: bool = False,
    sources: Mapping[str, str] | None = None,
    score_range: tuple[float, float] | None = None,
    rows_per_part: int = ROWS_PER_PART,
    review: Callable[[Mapping[str, pa.Table]], Mapping[str, Any]] | None = None,
) -> str:
    """Validate whole tables, then write them as a committed dataset at ``dest``.

    Parameters
    ----------
    dest : str
        Dataset root URL (local path, ``file://``, ``s3://``).
    tables : mapping of str to pyarrow.Table
        ``verdicts`` and ``labels`` (required), ``judges``, ``items``, ``refused`` (optional).
    report : mapping
        The adapter's counts report, stored as ``_ingest.json`` with ``rows_written`` and ``parts`` added.
    storage_options : dict, optional
        fsspec options for ``dest``.
    overwrite : bool, default False
        Replace a committed dataset at ``dest``.
    sources : mapping of str to str, optional
        File name per table, used in error messages.
    score_range : (float, float), optional
        Declared range of ``verdicts.score``.
    rows_per_part : int, default ``ROWS_PER_PART``
        Largest Parquet part.
    review : callable, optional
        Called with the conformed tables before anything is written; what it returns is added to the report. It
        may raise :class:`InputError` to refuse the input (``judgecal ingest --strict`` does).

    Returns
    -------
    str
        ``dest``.

    Raises
    ------
    InputError
        A table violates its contract (see :func:`~judgecal_dist.io.validate.validate_tables`), or ``dest``
        holds a committed dataset and ``overwrite`` is false, or ``dest`` is a non-empty folder that is not a
        dataset. Nothing is written in these cases.
    """
    writer = DatasetWriter(
        dest,
        overwrite=overwrite,
        storage_options=storage_options,
        rows_per_part=rows_per_part,
        score_range=score_range,
        validate=False,
    )
    conformed = validate_tables(tables, sources=sources, score_range=score_range)
    if review is not None:
        report = {**report, **review(conformed)}
    with writer:
        writer.write_verdicts(conformed["verdicts"])
        for name in TABLES[1:]:
            if name in conformed:
                writer.write_table(name, conformed[name])
        writer.commit(report)
    return str(dest)


def dataset_root(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[AbstractFileSystem, str]:
    """Filesystem and path of a committed dataset root (one with ``_SUCCESS``).

    Raises
    ------
    InputError
        ``url`` does not exist, or holds no ``_SUCCESS`` (not a dataset, or an ingest that did not finish).
    """
    fs, root = open_fs(str(url).rstrip("/"), dict(storage_options or {}))
    root = root.rstrip("/")
    try:
        require_exists(fs, root, url)
    except InputError as err:  # a missing root is no dataset either: say both
        raise InputError(f"{err}: not a committed dataset (no {SUCCESS}): run `judgecal ingest`") from err
    if not is_committed(fs, root):
        raise InputError(f"{url}: {SUCCESS}: not a committed dataset: run `judgecal ingest`")
    return fs, root


def dataset_tables(url: str, *, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Names of the tables a committed dataset holds, in :data:`~judgecal_dist.io.schema.TABLES` order."""
    fs, root = dataset_root(url, storage_options)
    present = {posixpath.basename(p.rstrip("/")) for p in fs.ls(root, detail=False)}
    return [name for name in TABLES if name in present]


def table_parts(fs: AbstractFileSystem, folder: str, *, url: str, table: str) -> list[str]:
    """Sorted Parquet parts of a table folder (see :func:`_part_entries`, which documents the rule)."""
    return [str(entry["name"]) for entry in _part_entries(fs, folder, url=url, table=table)]


def _part_entries(fs: AbstractFileSystem, folder: str, *, url: str, table: str) -> list[dict[str, Any]]:
    """Sorted Parquet parts of a table folder: ``*.parquet`` files, names starting with ``_`` or ``.`` ignored.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem
        Filesystem of ``folder``.
    folder : str
        The table folder (an absent folder has no parts).
    url, table : str
        Dataset (or source) URL and table name, for the error message.

    Returns
    -------
    list of dict
        The listing entries of the parts, sorted by path (empty when the folder is absent or holds only hidden
        entries).

    Raises
    ------
    InputError
        ``<url>: <table>: <name>: a file (or folder) that is not a Parquet part ...`` for the first other entry:
        a table folder holds nothing a reader would skip silently.
    """
    fs.invalidate_cache(folder)
    try:
        entries = fs.ls(folder, detail=True)
    except FileNotFoundError:
        return []
    parts: list[tuple[str, dict[str, Any]]] = []
    foreign: list[tuple[str, dict[str, Any]]] = []
    for entry in entries:
        name = posixpath.basename(str(entry["name"]).rstrip("/"))
        if name.startswith(HIDDEN_PREFIXES) or posixpath.normpath(str(entry["name"])) == posixpath.normpath(folder):
            continue
        (parts if entry["type"] == "file" and name.endswith(".parquet") else foreign).append((name, entry))
    if foreign:
        name, entry = sorted(foreign, key=lambda item: item[0])[0]
        what = "a folder" if entry["type"] == "directory" else "a file"
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise InputError(
            f"{url}: {table}: {name}: {what} that is not a Parquet part{more}; a table folder holds only *.parquet "
            f"parts (names starting with '_' or '.' are ignored): move it out of {table}/"
        )
    return [entry for _, entry in sorted(parts, key=lambda item: str(item[1]["name"]))]


def _table_entries(
    url: str, table: str, storage_options: Mapping[str, Any] | None
) -> tuple[AbstractFileSystem, list[dict[str, Any]]]:
    if table not in TABLES:
        raise InputError(f"{url}: {table}: not a table of a dataset (expected one of {list(TABLES)})")
    fs, root = dataset_root(url, storage_options)
    entries = _part_entries(fs, join_path(root, table), url=url, table=table)
    if not entries:
        raise InputError(
            f"{url}: {table}: table not in dataset (present: {dataset_tables(url, storage_options=storage_options)})"
        )
    return fs, entries


def _table_paths(
    url: str, table: str, storage_options: Mapping[str, Any] | None
) -> tuple[AbstractFileSystem, list[str]]:
    fs, entries = _table_entries(url, table, storage_options)
    return fs, [str(entry["name"]) for entry in entries]


def dataset_files(url: str, table: str, *, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Sorted Parquet part URLs of one table of a committed dataset (same protocol style as ``url``).

    Raises
    ------
    InputError
        ``url`` does not exist, is not committed, or has no such table.
    """
    fs, paths = _table_paths(url, table, storage_options)
    if "://" in str(url):
        return [fs.unstrip_protocol(p) for p in paths]
    return paths


def contract_columns(url: str, table: str, found: Sequence[str]) -> tuple[list[str], list[str]]:
    """Check a stored table's columns against its contract: ``(present, absent_optional)`` contract columns.

    ``items`` and ``refused`` have free columns besides their required ones; the other tables must hold their
    required columns and no column outside their schema (:mod:`judgecal_dist.io.schema`).

    Raises
    ------
    InputError
        A required column is missing or an unknown column is present.
    """
    if table in FREE_TABLES:
        required: Sequence[str] = FREE_TABLES[table]
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


def with_defaults(data: pa.Table, table: str, wanted: Sequence[str]) -> pa.Table:
    """``data`` (read from a stored ``table``) as the contract columns ``wanted``, absent ones filled.

    An absent column takes its :data:`~judgecal_dist.io.schema.COLUMN_DEFAULTS` value (``group_id`` a copy of
    ``item_id``, ``sample`` 0) or nulls; present columns are cast to the schema's type unless they are
    dictionary-encoded strings (kept encoded: the vote codec reads them that way).
    """
    schema = SCHEMAS.get(table)
    out = {}
    for name in wanted:
        field = schema.field(name) if schema is not None else data.schema.field(name)
        default = COLUMN_DEFAULTS.get(name)
        if name in data.column_names:
            column = data[name]
            out[name] = column if pa.types.is_dictionary(column.type) else column.cast(field.type)
        elif isinstance(default, str):
            out[name] = data[default]
        elif default is not None:
            out[name] = pa.array(np.full(data.num_rows, default), field.type)
        else:
            out[name] = pa.nulls(data.num_rows, field.type)
    return pa.table(out)


def _bad_part(fs: AbstractFileSystem, paths: Sequence[str], url: str, table: str, err: Exception) -> InputError:
    """The one-line error naming the first part that is not readable Parquet (or the table, when each is)."""
    for path in paths:
        try:
            pq.read_metadata(path, filesystem=fs)  # fs: fsspec's, or the pyarrow one of a dataset
        except (pa.ArrowInvalid, OSError) as part_err:
            detail = str(part_err).strip().splitlines()[0] if str(part_err).strip() else type(part_err).__name__
            return InputError(f"{url}: {table}: {posixpath.basename(path)}: not a readable Parquet file ({detail})")
    detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return InputError(f"{url}: {table}: cannot read ({detail})")


def open_table(
    url: str,
    table: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    dictionary_columns: Sequence[str] = (),
) -> tuple[pads.Dataset, list[str], list[str]]:
    """A stored table as a lazy pyarrow dataset over its parts, with its ``(present, absent)`` contract columns.

    Raises
    ------
    InputError
        As :func:`read_dataset_table`.
    """
    fs, entries = _table_entries(url, table, storage_options)
    paths = [str(entry["name"]) for entry in entries]
    options = pads.ParquetReadOptions(dictionary_columns=set(dictionary_columns))
    parquet = pads.ParquetFileFormat(read_options=options)
    stamps = tuple(
        (str(e["name"]), e.get("size"), next((str(e[k]) for k in _STAMP_KEYS if k in e), None)) for e in entries
    )
    key = (str(fs.protocol), stamps, tuple(sorted(dictionary_columns)))
    try:
        dataset = pads.dataset(paths, filesystem=fs, format=parquet, schema=_VERIFIED.get(key))
        if key not in _VERIFIED:
            # Every part's footer, not only the first: a truncated or foreign part is named here, before a scan
            # (in this process or in a Spark task) fails on it with an error that names no file. Once per
            # listing (paths, sizes, change stamps): a run opens its verdicts several times.
            factory = pads.FileSystemDatasetFactory(dataset.filesystem, paths, parquet, pads.FileSystemFactoryOptions())
            dataset = factory.finish(factory.inspect(fragments=None))
            _VERIFIED[key] = dataset.schema
            while len(_VERIFIED) > _MAX_VERIFIED:
                _VERIFIED.pop(next(iter(_VERIFIED)))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as err:
        raise _bad_part(fs, paths, url, table, err) from err
    present, absent = contract_columns(url, table, dataset.schema.names)
    return dataset, present, absent


def read_dataset_table(
    url: str,
    table: str,
    columns: Sequence[str] | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    dictionary_columns: Sequence[str] = (),
) -> pa.Table:
    """Read one table of a committed dataset into memory, as its contract's columns (absent optional ones filled).

    Parameters
    ----------
    url : str
        Dataset root URL.
    table : str
        ``verdicts``, ``labels``, ``judges``, ``items`` or ``refused``.
    columns : sequence of str, optional
        Contract columns to read (all by default, in schema order).
    storage_options : mapping, optional
        fsspec options for ``url`` (never logged).
    dictionary_columns : sequence of str
        String columns to read dictionary-encoded (the vote codec maps each distinct string once).

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    InputError
        ``url`` does not exist, is not committed (no ``_SUCCESS``), has no such table, a part that is not
        Parquet (named), or a column contract violation.
    """
    batches = read_dataset_batches(
        url, table, columns, storage_options=storage_options, dictionary_columns=dictionary_columns, whole=True
    )
    return next(iter(batches))


def read_dataset_batches(
    url: str,
    table: str,
    columns: Sequence[str] | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    dictionary_columns: Sequence[str] = (),
    whole: bool = False,
) -> Iterator[pa.Table]:
    """:func:`read_dataset_table` streamed: the table's record batches one by one (``whole``: one table), so a
    caller that keeps a few rows never holds the table."""
    dataset, present, absent = open_table(
        url, table, storage_options=storage_options, dictionary_columns=dictionary_columns
    )
    schema_order = SCHEMAS[table].names if table in SCHEMAS else present
    wanted = list(columns) if columns is not None else schema_order
    outside = [c for c in wanted if c not in present + absent]
    if outside:
        raise InputError(f"{url}: {table}: no column(s) {outside} in the contract")
    copied = [str(COLUMN_DEFAULTS[c]) for c in wanted if c in absent and isinstance(COLUMN_DEFAULTS.get(c), str)]
    read = list(dict.fromkeys([c for c in wanted if c in present] + copied))
    try:
        if whole:
            yield with_defaults(dataset.to_table(columns=read), table, wanted)
            return
        for batch in dataset.to_batches(columns=read):
            yield with_defaults(pa.Table.from_batches([batch]), table, wanted)
    except (pa.ArrowInvalid, OSError) as err:
        raise _bad_part(dataset.filesystem, dataset.files, url, table, err) from err


def read_part(
    part_url: str,
    table: str,
    columns: Sequence[str],
    *,
    present: Sequence[str],
    storage_options: Mapping[str, Any] | None = None,
    dictionary_columns: Sequence[str] = (),
) -> Iterator[pa.Table]:
    """The row groups of one Parquet part of ``table`` as contract columns (the reader of Spark scan tasks).

    ``present`` is the contract columns the table stores (from :func:`open_table` on the driver): the others of
    ``columns`` are filled as :func:`with_defaults` fills them.
    """
    fs, path = open_fs(part_url, dict(storage_options or {}))
    read = [c for c in columns if c in present]
    read += [str(COLUMN_DEFAULTS[c]) for c in columns if c not in present and isinstance(COLUMN_DEFAULTS.get(c), str)]
    read = list(dict.fromkeys(read))
    with fs.open(path, "rb") as handle:
        parquet = pq.ParquetFile(handle, read_dictionary=[c for c in dictionary_columns if c in read])
        for group in range(parquet.num_row_groups):
            yield with_defaults(parquet.read_row_group(group, columns=read), table, columns)


def count_rows(url: str, table: str = "verdicts", *, storage_options: Mapping[str, Any] | None = None) -> int:
    """Rows of a stored table, from the Parquet footers only (no data is read)."""
    dataset, _, _ = open_table(url, table, storage_options=storage_options)
    return int(dataset.count_rows())


def choose_dataset(names: Sequence[str], dataset: str | None, *, where: str) -> str:
    """The one dataset a job works on: ``dataset``, or the only name of ``names`` (a table's ``dataset`` values).

    Raises
    ------
    InputError
        Several datasets and none chosen, or ``dataset`` not among them.
    """
    names = sorted(set(names))
    if dataset is None:
        if len(names) != 1:
            raise InputError(f"{where}: labels: dataset: {len(names)} datasets {names[:5]}; choose one with dataset=")
        return names[0]
    if dataset not in names:
        raise InputError(f"{where}: labels: dataset: {dataset!r} not found (have {names[:5]})")
    return dataset


def committed_inputs(
    dest: str, key: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any] | None, bool]:
    """What the committed dataset at ``dest`` records it was written from (its report's ``key``: ``inputs`` for
    ingest, ``generated_from`` for generate; None when absent or unreadable) and whether one is committed there."""
    fs, root = open_fs(dest, dict(storage_options or {}))
    if not is_committed(fs, root.rstrip("/")):
        return None, False
    try:
        found = read_report(dest, storage_options=storage_options).get(key)
    except (OSError, ValueError):  # an unreadable report records nothing: the writer's own rule decides
        return None, True
    return (found if isinstance(found, dict) else None), True


def read_report(url: str, *, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``_ingest.json`` report of a committed dataset."""
    fs, root = dataset_root(url, storage_options)
    with fs.open(join_path(root, REPORT), "r") as fh:
        return dict(json.load(fh))
