"""The ingested dataset store: a folder of Parquet tables at any fsspec URL, committed by ``_SUCCESS``.

Layout of a dataset root (local path, ``file://`` or ``s3://``)::

    verdicts/part-00000.parquet ...   (parts of at most ``ROWS_PER_PART`` rows)
    labels/part-00000.parquet
    judges/  items/  refused/         (optional)
    _ingest.json                      (the adapter's counts report, plus rows and parts written per table)
    _SUCCESS                          (written last; readers trust a dataset only with it)

Writers validate before writing: :func:`write_dataset` checks every table first, so rejected input leaves nothing
under the destination; the streaming :class:`DatasetWriter` checks each chunk before writing it and removes what it
wrote when a later check fails or the writer is closed without :meth:`DatasetWriter.commit`.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from judgecal_dist.errors import InputError
from judgecal_dist.io.filesystem import join_path, open_fs, require_exists
from judgecal_dist.io.validate import TABLES, validate_tables
from judgecal_dist.io.writer import REPORT, ROWS_PER_PART, SUCCESS, DatasetWriter, is_committed

__all__ = [
    "ROWS_PER_PART",
    "SUCCESS",
    "REPORT",
    "open_fs",
    "DatasetWriter",
    "write_dataset",
    "dataset_tables",
    "dataset_files",
    "read_dataset_table",
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
    with writer:
        writer.write_verdicts(conformed["verdicts"])
        for name in TABLES[1:]:
            if name in conformed:
                writer.write_table(name, conformed[name])
        writer.commit(report)
    return str(dest)


def _committed_root(url: str, storage_options: dict[str, Any] | None) -> tuple[AbstractFileSystem, str]:
    fs, root = open_fs(url, storage_options)
    require_exists(fs, root, url)
    if not is_committed(fs, root):
        raise InputError(f"{url}: {SUCCESS}: not a committed dataset: run `judgecal ingest`")
    return fs, root


def dataset_tables(url: str, *, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Names of the tables a committed dataset holds, in :data:`~judgecal_dist.io.validate.TABLES` order."""
    fs, root = _committed_root(url, storage_options)
    present = {posixpath.basename(p.rstrip("/")) for p in fs.ls(root, detail=False)}
    return [name for name in TABLES if name in present]


def _table_paths(url: str, table: str, storage_options: dict[str, Any] | None) -> tuple[AbstractFileSystem, list[str]]:
    fs, root = _committed_root(url, storage_options)
    folder = join_path(root, table)
    fs.invalidate_cache(folder)
    paths = sorted(fs.glob(join_path(folder, "*.parquet")))
    if not paths:
        raise InputError(
            f"{url}: {table}: table not in dataset (present: {dataset_tables(url, storage_options=storage_options)})"
        )
    return fs, paths


def dataset_files(url: str, table: str, *, storage_options: dict[str, Any] | None = None) -> list[str]:
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


def read_dataset_table(
    url: str, table: str, *, columns: list[str] | None = None, storage_options: dict[str, Any] | None = None
) -> pa.Table:
    """Read one table of a committed dataset into memory.

    Parameters
    ----------
    url : str
        Dataset root URL.
    table : str
        ``verdicts``, ``labels``, ``judges``, ``items`` or ``refused``.
    columns : list of str, optional
        Read only these columns.
    storage_options : dict, optional
        fsspec options for ``url``.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    InputError
        ``url`` does not exist, is not committed (no ``_SUCCESS``), or has no such table or column.
    """
    fs, paths = _table_paths(url, table, storage_options)
    try:
        return pq.read_table(paths, columns=columns, filesystem=fs)
    except (pa.ArrowInvalid, KeyError) as err:
        raise InputError(f"{url}: {table}: cannot read ({err})") from err


def read_report(url: str, *, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``_ingest.json`` report of a committed dataset."""
    fs, root = _committed_root(url, storage_options)
    with fs.open(join_path(root, REPORT), "r") as fh:
        return dict(json.load(fh))
