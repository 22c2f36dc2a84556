"""Adapter for long tables: ``verdicts.*``, optional ``labels.*``, ``judges.*`` and ``items.*`` in one folder, or
one verdicts file (any fsspec URL), in the contract's layout or crowd-kit's; labels may come from a separate file.

**Layouts.** A verdicts table has the contract's columns (``dataset``, ``item_id``, ``judge_id``, ``verdict``, ...;
see ``docs/tables.md``) or crowd-kit's ``task``, ``worker``, ``label`` (:data:`CROWDKIT_COLUMNS`), and a labels
table ``item_id, label`` or ``task, label``; :func:`long_columns` maps them, the one mapping the notebook API
(:mod:`judgecal_dist.api`) also uses. Verdicts and labels are ``A``/``B``/``tie`` or ``1``/``0`` (1 = A, the
positive class; :func:`category`). A table without a ``dataset`` column takes the ``dataset`` given, else the one
dataset of the verdicts, else the source's name.

**Unlabelled batches.** Without a labels file (or with one holding no rows, or no ``label`` column) every item of
the verdicts is unlabelled: the labels table stored is one row per item with a null label, made here.

**Files.** A table is one file, or a folder of Parquet parts named ``<table>/`` or ``<table>.parquet/`` (as Spark
and pandas write them): in a folder, names starting with ``_`` or ``.`` (``_SUCCESS``, ``.crc``) are ignored and
any other non-Parquet entry is refused, by the dataset store's own rule
(:func:`~judgecal_dist.io.dataset.table_parts`). Each file is CSV (``.csv``, ``.tsv``), JSON lines (``.jsonl``,
``.ndjson``, ``.json``) or Parquet (``.parquet``, ``.pq``), optionally compressed (``.gz``, ``.bz2``, ``.xz``,
``.zst``, ... inferred from the suffix). CSV and JSON are parsed by pyarrow's multi-threaded readers through fsspec
file objects. In CSV every contract column is read as text and cast by the validator (so ``item_id`` ``007`` stays
``007``, integers are parsed exactly as int64 and range-checked, and a bad value is reported with the file, its
first row and its keys); empty cells are nulls. A header naming a column twice, or a CSV header line repeated
inside the file (files concatenated with their headers), is refused.

When ``dataset`` is given and a table has a ``dataset`` column, it must hold that name only. ``rows_read`` counts
the rows of all files read.
"""

from __future__ import annotations

import io
import numbers
import posixpath
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
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

__all__ = [
    "CROWDKIT_COLUMNS",
    "EXTENSIONS",
    "LONG_TABLES",
    "category",
    "long_columns",
    "read_labels_file",
    "read_long",
    "read_table_file",
]

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
#: Tables read from a long folder, and whether each is required (no labels: every item unlabelled).
LONG_TABLES: dict[str, bool] = {"verdicts": True, "labels": False, "judges": False, "items": False}
_TEXT_COLUMNS = {"items": ("dataset", "item_id")}
#: crowd-kit's long layout, per table: its column -> ours (``label`` of a verdicts row is the worker's answer).
CROWDKIT_COLUMNS: dict[str, dict[str, str]] = {
    "verdicts": {"task": "item_id", "worker": "judge_id", "label": "verdict"},
    "labels": {"task": "item_id", "label": "label"},
}
#: The columns holding a verdict alphabet value, per table (recoded by :func:`category`).
_CATEGORY_COLUMNS = {"verdicts": "verdict", "labels": "label"}
#: Binary codes and their category: 1 = A (the positive class, the first output better), 0 = B.
_BINARY = {1: "A", 0: "B"}


def category(value: Any) -> str | None:
    """The verdict alphabet's category of one verdict or label value, ours or crowd-kit's.

    ``A``, ``B``, ``tie`` are themselves; 1 and 0 (integers, 1.0/0.0, or the text "1"/"0") are A and B; null and NaN
    are None (missing); anything else is returned as text (True/False too), for the caller to refuse by name.
    """
    if isinstance(value, str):
        return _BINARY[int(value.strip())] if value.strip() in ("0", "1") else value
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real) or value not in (0, 1):
        return str(value)  # True/False is no verdict: say 1/0
    return _BINARY[1 if value == 1 else 0]


def long_columns(columns: Iterable[str], table: str, *, source: str) -> dict[str, str]:
    """Our name for each column of a long ``table`` (``verdicts`` or ``labels``), in our layout or crowd-kit's.

    crowd-kit's layout is recognised by its ``task`` (or, in verdicts, ``worker``) column; columns of neither layout
    keep their names (the validator names them).

    Raises
    ------
    InputError
        A table mixing both layouts (e.g. ``task`` and ``item_id``), naming the file and the column.
    """
    names = list(columns)
    theirs = CROWDKIT_COLUMNS.get(table, {})
    if not {"task", "worker"} & set(names) or not theirs:
        return {name: name for name in names}
    clash = [ours for col, ours in theirs.items() if col in names and ours != col and ours in names]
    if clash:
        raise InputError(
            f"{source}: {clash[0]}: mixes crowd-kit's layout ({', '.join(theirs)}) with ours; keep one layout"
        )
    return {name: theirs.get(name, name) for name in names}


def _to_contract(table: pa.Table, name: str, url: str) -> pa.Table:
    """``table`` with our column names and its verdicts or labels in the A/B/tie alphabet."""
    if name in CROWDKIT_COLUMNS:
        table = table.rename_columns(
            [long_columns(table.column_names, name, source=url)[c] for c in table.column_names]
        )
    column = _CATEGORY_COLUMNS.get(name)
    if column in table.column_names:
        values = table.column(column)
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        uniques = pc.unique(values)
        coded = pa.array([category(v) for v in uniques.to_pylist()], pa.string())
        recoded = pc.take(coded, pc.index_in(values, value_set=uniques))
        table = table.set_column(table.column_names.index(column), column, recoded)
    return table


def _text_columns(table: str) -> dict[str, pa.DataType]:
    names = SCHEMAS[table].names if table in SCHEMAS else _TEXT_COLUMNS.get(table, ())
    return dict.fromkeys([*names, *CROWDKIT_COLUMNS.get(table, {})], pa.string())  # "007" stays "007", "1" not True


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


def _with_dataset(table: pa.Table, dataset: str | None, url: str, *, given: bool) -> pa.Table:
    if dataset is None:
        return table
    if "dataset" not in table.column_names:
        return table.append_column("dataset", pa.array([dataset] * table.num_rows, pa.string()))
    if not given:
        return table
    other = pc.unique(table.column("dataset").cast(pa.string())).to_pylist()
    if other != [dataset]:
        raise InputError(f"{url}: dataset: holds {other[:5]}, but the dataset name given is {dataset!r}")
    return table


def _read_any(fs: Any, path: str, name: str, *, src: str, url: str) -> pa.Table:
    if fs.isdir(path):
        return _read_table_folder(fs, path, name, src=src, url=url)
    return read_table_file(fs, path, name, url=url)


def read_labels_file(url: str, storage_options: dict[str, Any] | None = None) -> pa.Table:
    """One labels file (or Parquet folder) read as ``ingest --labels`` reads it: our column names (crowd-kit's
    ``task`` mapped), labels in the A/B/tie alphabet (1/0 recoded), other columns as read; not yet conformed.

    Raises
    ------
    InputError
        ``url`` does not exist, or is unreadable (see :func:`read_table_file`).
    """
    fs, path = open_fs(url, storage_options)
    require_exists(fs, path, url)
    return _to_contract(_read_any(fs, path, "labels", src=str(url), url=str(url)), "labels", str(url))


def _dataset_name(tables: dict[str, pa.Table], dataset: str | None, src: str) -> str | None:
    """The name for tables without a ``dataset`` column: the one given, the verdicts' only one, or the source's."""
    if dataset is not None:
        return dataset
    verdicts = tables["verdicts"]
    if "dataset" in verdicts.column_names:
        names = pc.unique(verdicts.column("dataset").cast(pa.string())).to_pylist()
        return str(names[0]) if len(names) == 1 and names[0] is not None else None
    return strip_compression(posixpath.basename(str(src).rstrip("/")))[0].split(".")[0] or "long"


def _unlabelled(verdicts: pa.Table) -> pa.Table:
    """One null-label row per item of ``verdicts``: an unlabelled batch stored as the labels contract has it."""
    keys = verdicts.select(["dataset", "item_id"]).group_by(["dataset", "item_id"], use_threads=False).aggregate([])
    return keys.append_column("label", pa.nulls(keys.num_rows, pa.string()))


def read_long(
    src: str,
    *,
    dataset: str | None = None,
    storage_options: dict[str, Any] | None = None,
    labels: str | None = None,
) -> AdapterResult:
    """Read long tables: a folder of them, or one verdicts file, plus an optional labels file.

    Parameters
    ----------
    src : str
        Folder URL holding ``verdicts.*`` (plus optional ``labels.*``, ``judges.*``, ``items.*``), or the URL of
        one verdicts file.
    dataset : str, optional
        Dataset name filled in where a table has no ``dataset`` column (default: the verdicts' only dataset, else
        the source's name without suffixes).
    storage_options : dict, optional
        fsspec options for ``src`` and ``labels``.
    labels : str, optional
        URL of a labels file (or Parquet folder) kept apart from ``src``; ``src`` must then hold no labels table.

    Returns
    -------
    AdapterResult
        The tables (our layout; validated by the writer, with errors naming each file) and the report, whose
        ``unlabelled`` says that no labels were given (every item stored with a null label).

    Raises
    ------
    InputError
        ``src`` or ``labels`` does not exist, or ``src`` lacks verdicts; a file is unreadable (see
        :func:`read_table_file`); a table folder holds a foreign entry or no part; a table mixes crowd-kit's layout
        with ours; a ``dataset`` column disagrees with ``dataset``; labels both in ``src`` and in ``labels``.
    """
    fs, root = open_fs(src, storage_options)
    require_exists(fs, root, src)
    if fs.isdir(root):
        files, _ = _find_files(fs, root, src)
    else:
        files = {"verdicts": root}
    places: dict[str, tuple[Any, str, str]] = {
        name: (fs, path, fs.unstrip_protocol(path) if "://" in str(src) else path) for name, path in files.items()
    }
    if labels is not None:
        if "labels" in places:
            raise InputError(
                f"{places['labels'][2]}: (file): labels in the source folder and from --labels {labels}; give one"
            )
        labels_fs, labels_path = open_fs(labels, storage_options)
        require_exists(labels_fs, labels_path, labels)
        places["labels"] = (labels_fs, labels_path, str(labels))
    urls = {name: url for name, (_, _, url) in places.items()}
    tables = {
        name: _to_contract(_read_any(where, path, name, src=str(src), url=url), name, url)
        for name, (where, path, url) in places.items()
    }
    rows_read = sum(t.num_rows for t in tables.values())
    name = _dataset_name(tables, dataset, src)
    for table_name, table in list(tables.items()):
        if table_name != "judges":
            tables[table_name] = _with_dataset(table, name, urls[table_name], given=dataset is not None)
    unlabelled = "labels" not in tables or tables["labels"].num_rows == 0
    if unlabelled:
        if "item_id" not in tables["verdicts"].column_names:  # the validator's words, before labels need the column
            raise InputError(
                f"{urls['verdicts']}: item_id: missing required column (found {tables['verdicts'].column_names})"
            )
        tables["labels"] = _unlabelled(tables["verdicts"])
        urls.pop("labels", None)
    elif "label" not in tables["labels"].column_names:
        tables["labels"] = tables["labels"].append_column("label", pa.nulls(tables["labels"].num_rows, pa.string()))
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
        rows_read=rows_read,
        tables=tables,
        missing_verdicts=missing,
        unparseable_verdicts=0,
        rejected=[],
        files=dict(urls),
        unlabelled=unlabelled,
    )
    sources = {**urls, **({"labels": "labels (none given: every item unlabelled)"} if unlabelled else {})}
    return AdapterResult(tables=tables, report=report, sources=sources)
