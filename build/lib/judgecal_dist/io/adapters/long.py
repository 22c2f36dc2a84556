"""Adapter for tables already in the long contract layout: ``verdicts.*``, ``labels.*``, optional ``judges.*`` and
``items.*`` in one folder (any fsspec URL).

A table is one file, or a folder of Parquet parts named ``<table>/`` or ``<table>.parquet/`` (as Spark and
pandas write them): in a folder, names starting with ``_`` or ``.`` (``_SUCCESS``, ``.crc``) are ignored and any
other non-Parquet entry is refused, by the dataset store's own rule
(:func:`~judgecal_dist.io.dataset.table_parts`). Each file is CSV (``.csv``, ``.tsv``), JSON lines (``.jsonl``, ``.ndjson``, ``.json``) or Parquet (``.parquet``,
``.pq``), optionally compressed (``.gz``, ``.bz2``, ``.xz``, ``.zst``, ... inferred from the suffix). CSV and JSON
are parsed by pyarrow's multi-threaded readers through fsspec file objects. In CSV every contract column is read
as text and cast by the validator (so ``item_id`` ``007`` stays ``007`` and a bad value is reported with its
keys); empty cells are nulls. Columns must be the contract's; there is no renaming. A header naming a column twice,
or a CSV header line repeated inside the file (files concatenated with their headers), is refused.

When ``dataset`` is given and a table has no ``dataset`` column, the column is filled with it; when the column
exists it must hold that name only. ``rows_read`` counts the rows of all files.
"""

from __future__ import annotations

import io
import posixpath
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pj
import pyarrow.parquet as pq

from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.report import AdapterResult, make_report
from judgecal_dist.io.dataset import table_parts
from judgecal_dist.io.filesystem import DECODE_ERRORS, open_fs, open_input, require_exists, strip_compression
from judgecal_dist.io.schema import SCHEMAS
from judgecal_dist.io.validate import check_repeated_header, check_unique_columns

__all__ = ["EXTENSIONS", "LONG_TABLES", "read_long", "read_table_file"]

#: File extension (after removing a compression suffix) -> reader kind.
EXTENSIONS: dict[str, str] = {
    "csv": "csv",
    "tsv": "tsv",
    "jsonl": "json",
    "ndjson": "json",
    "json": "json",
    "parquet": "parquet",
    "pq": "parquet",
}
#: Tables read from a long folder, and whether each is required.
LONG_TABLES: dict[str, bool] = {"verdicts": True, "labels": True, "judges": False, "items": False}
_TEXT_COLUMNS = {"items": ("dataset", "item_id")}


def _text_columns(table: str) -> dict[str, pa.DataType]:
    names = SCHEMAS[table].names if table in SCHEMAS else _TEXT_COLUMNS.get(table, ())
    return dict.fromkeys(names, pa.string())


def read_table_file(fs: Any, path: str, table: str, *, url: str | None = None) -> pa.Table:
    """Read one CSV / JSON-lines / Parquet file (compressed or not) holding a contract table.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem
        Filesystem of ``path``.
    path : str
        File path on ``fs``.
    table : str
        Contract table the file holds (decides which CSV columns are read as text).
    url : str, optional
        Name used in error messages (default ``path``).

    Returns
    -------
    pyarrow.Table
        As read, not yet conformed.

    Raises
    ------
    InputError
        Unknown extension, empty file, truncated or corrupt compressed stream, malformed CSV, JSON or Parquet.
    """
    url = url or path
    base, compression = strip_compression(posixpath.basename(path))
    kind = EXTENSIONS.get(base.rsplit(".", 1)[-1].lower()) if "." in base else None
    if kind is None:
        raise InputError(f"{url}: (file): unknown format, expected one of {sorted(EXTENSIONS)} (optionally compressed)")
    try:
        with open_input(fs, path) as fh:
            if kind in ("csv", "tsv"):
                parsed = pcsv.read_csv(
                    fh,
                    parse_options=pcsv.ParseOptions(delimiter="\t" if kind == "tsv" else ","),
                    convert_options=pcsv.ConvertOptions(
                        column_types=_text_columns(table), null_values=[""], strings_can_be_null=True
                    ),
                )
            elif kind == "json":
                parsed = pj.read_json(fh)
            else:  # Parquet needs random access, which a decompressing stream does not give
                parsed = pq.read_table(io.BytesIO(fh.read()) if compression else fh)
        parsed.validate(full=True)
    except (pa.ArrowInvalid, *DECODE_ERRORS) as err:
        what = "empty file" if "Empty" in str(err) else f"cannot read {kind.upper()}"
        detail = str(err).strip().splitlines()[0] if str(err).strip() else ""  # one line: Arrow appends schemas
        raise InputError(f"{url}: (file): {what} ({type(err).__name__}: {detail})") from err
    check_unique_columns(parsed, source=url)
    if kind in ("csv", "tsv"):
        check_repeated_header(parsed, source=url)
    return parsed


def _read_table_folder(fs: Any, path: str, table: str, *, src: str, url: str) -> pa.Table:
    """The Parquet parts of a table folder, concatenated (a part may lack optional columns others have)."""
    parts = table_parts(fs, path, url=src, table=posixpath.basename(path.rstrip("/")))
    if not parts:
        raise InputError(f"{url}: (folder): no *.parquet parts in the table folder")
    tables = [read_table_file(fs, part, table, url=f"{url}/{posixpath.basename(part)}") for part in parts]
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise InputError(f"{url}: (folder): parts with conflicting column types ({err})") from err


def _find_files(fs: Any, root: str, src: str) -> tuple[dict[str, str], set[str]]:
    """``(table -> file or folder path, the paths that are Parquet table folders)``."""
    found: dict[str, list[str]] = {name: [] for name in LONG_TABLES}
    folders = set()
    for entry in sorted(fs.ls(root, detail=True), key=lambda e: str(e["name"])):
        path = str(entry["name"]).rstrip("/")
        base = strip_compression(posixpath.basename(path))[0]
        stem, _, ext = base.partition(".")
        if entry["type"] == "directory" and stem in found and ext in ("", "parquet", "pq"):
            found[stem].append(path)
            folders.add(path)
        elif stem in found and ext:
            found[stem].append(path)
    for name, paths in found.items():
        if len(paths) > 1:
            raise InputError(f"{src}: {name}: several files for one table ({[posixpath.basename(p) for p in paths]})")
        if LONG_TABLES[name] and not paths:
            raise InputError(
                f"{src}: {name}: no {name}.<csv|jsonl|parquet>[.gz] file or {name}/ Parquet folder in the folder"
            )
    return {name: paths[0] for name, paths in found.items() if paths}, folders


def _with_dataset(table: pa.Table, dataset: str | None, url: str) -> pa.Table:
    if dataset is None:
        return table
    if "dataset" not in table.column_names:
        return table.append_column("dataset", pa.array([dataset] * table.num_rows, pa.string()))
    other = pc.unique(table.column("dataset").cast(pa.string())).to_pylist()
    if other != [dataset]:
        raise InputError(f"{url}: dataset: holds {other[:5]}, but the dataset name given is {dataset!r}")
    return table


def read_long(src: str, *, dataset: str | None = None, storage_options: dict[str, Any] | None = None) -> AdapterResult:
    """Read a folder of long contract tables.

    Parameters
    ----------
    src : str
        Folder URL holding ``verdicts.*`` and ``labels.*`` (plus optional ``judges.*``, ``items.*``).
    dataset : str, optional
        Dataset name filled in where a table has no ``dataset`` column.
    storage_options : dict, optional
        fsspec options for ``src``.

    Returns
    -------
    AdapterResult
        The tables as read (validated by the writer, with errors naming each file) and the report.

    Raises
    ------
    InputError
        ``src`` does not exist or lacks a required file; a file is unreadable (see :func:`read_table_file`);
        a table folder holds a foreign entry or no part; a ``dataset`` column disagrees with ``dataset``.
    """
    fs, root = open_fs(src, storage_options)
    require_exists(fs, root, src)
    if not fs.isdir(root):
        raise InputError(f"{src}: (folder): expected a folder holding verdicts.* and labels.*")
    files, folders = _find_files(fs, root, src)
    urls = {name: fs.unstrip_protocol(path) if "://" in str(src) else path for name, path in files.items()}
    tables: dict[str, pa.Table] = {}
    for name, path in files.items():
        if path in folders:
            table = _read_table_folder(fs, path, name, src=str(src), url=urls[name])
        else:
            table = read_table_file(fs, path, name, url=urls[name])
        tables[name] = table if name == "judges" else _with_dataset(table, dataset, urls[name])
    verdicts = tables["verdicts"]
    missing = 0
    if verdicts.num_rows and "verdict" in verdicts.column_names:
        no_score = pc.is_null(verdicts.column("score")) if "score" in verdicts.column_names else True
        missing = int(pc.sum(pc.and_(pc.is_null(verdicts.column("verdict")), no_score)).as_py() or 0)
    names = (
        pc.unique(verdicts.column("dataset").cast(pa.string())).to_pylist()
        if "dataset" in verdicts.column_names
        else []
    )
    report = make_report(
        "long",
        src,
        datasets=[str(n) for n in names if n is not None],
        rows_read=sum(t.num_rows for t in tables.values()),
        tables=tables,
        missing_verdicts=missing,
        unparseable_verdicts=0,
        rejected=[],
        files={name: urls[name] for name in files},
    )
    return AdapterResult(tables=tables, report=report, sources=urls)
