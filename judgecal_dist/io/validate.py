"""Conform pyarrow tables to the data contracts of :mod:`judgecal_dist.io.schema`, or reject them.

Every check is vectorised (pyarrow.compute, Arrow joins and group-bys), so a table of tens of millions of rows is
checked in seconds. A rejected table raises :class:`~judgecal_dist.errors.InputError` with the message
``<file or table>: <column>: <what is wrong> (<count> rows, e.g. <first 3 keys>; first at row <n>)``, rows counted
from 1 in the table as given (a file's data rows, the header not counted); nothing is repaired silently, the
only defaults are the documented ones (``group_id`` = ``item_id`` where absent or null, ``sample`` = 0 where
absent, optional columns of the schema = null where absent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import (
    FREE_TABLES,
    REQUIRED_COLUMNS,
    SCHEMAS,
    TABLE_KEYS,
    TABLES,
    VERDICT_CATEGORIES,
)

__all__ = [
    "check_unique_columns",
    "check_repeated_header",
    "all_null_judges",
    "conform_table",
    "check_unique_keys",
    "distinct_items",
    "check_known_items",
    "check_known_judges",
    "validate_tables",
]


_N_EXAMPLES = 3
_INT64 = (int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max))


def _examples(table: pa.Table, mask: pa.ChunkedArray | pa.Array, keys: Sequence[str]) -> list[dict[str, Any]]:
    """The first few key records of the rows where ``mask`` is true (keys that are absent are skipped)."""
    cols = [k for k in keys if k in table.column_names]
    rows = table.select(cols).filter(mask)
    return rows.slice(0, _N_EXAMPLES).to_pylist()


def _fail(
    source: str, column: str, what: str, count: int, examples: list[Any], mask: pa.ChunkedArray | pa.Array | None
) -> InputError:
    where = ""
    if mask is not None and count:
        first = int(np.argmax(np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)))
        where = f"; first at row {first + 1}"
    return InputError(f"{source}: {column}: {what} ({count} rows, e.g. {examples}{where})")


def _not_int64(value: Any) -> bool:
    """Whether a non-null value is no integer that int64 holds (text is parsed exactly, never through a float)."""
    try:
        number = int(value.strip()) if isinstance(value, str) else int(value) if float(value).is_integer() else None
    except (ValueError, OverflowError, TypeError):
        return True
    return number is None or not _INT64[0] <= number <= _INT64[1]


def _cast_failures(column: pa.ChunkedArray, target: pa.DataType) -> np.ndarray:
    """Boolean mask of the values that cannot be cast to ``target`` (used only to explain a failed cast)."""
    values = column.to_pandas()
    if pa.types.is_integer(target):
        bad_values = {v for v in pd.unique(values.dropna()) if _not_int64(v)}
        return values.isin(bad_values).to_numpy()
    if pa.types.is_floating(target):
        numeric = pd.to_numeric(values, errors="coerce")
        return (numeric.isna() & values.notna()).to_numpy()
    return values.notna().to_numpy()


def _cast_column(
    table: pa.Table, name: str, target: pa.DataType, *, source: str, keys: Sequence[str]
) -> pa.ChunkedArray:
    column = table.column(name)
    if column.type == target:
        return column
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    try:
        return column.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        bad = _cast_failures(column, target)
        count = int(bad.sum())
        examples = _examples(table, pa.array(bad), keys)
        values = column.filter(pa.array(bad)).slice(0, _N_EXAMPLES).to_pylist()
        raise _fail(
            source,
            name,
            f"cannot cast {column.type} to {target}: values {values} ({err})",
            count,
            examples,
            pa.array(bad),
        ) from err


def _check_nulls(table: pa.Table, name: str, *, source: str, keys: Sequence[str]) -> None:
    column = table.column(name)
    if column.null_count:
        raise _fail(
            source,
            name,
            "null values in a required column",
            column.null_count,
            _examples(table, pc.is_null(column), keys),
            pc.is_null(column),
        )


def _check_categories(table: pa.Table, name: str, *, source: str, keys: Sequence[str]) -> None:
    column = table.column(name)
    bad = pc.and_(pc.is_valid(column), pc.invert(pc.is_in(column, value_set=pa.array(VERDICT_CATEGORIES))))
    count = int(pc.sum(bad).as_py() or 0)
    if count:
        values = pc.unique(column.filter(bad)).slice(0, 10).to_pylist()
        raise _fail(
            source,
            name,
            f"unknown categories {values}, expected one of {list(VERDICT_CATEGORIES)} or null",
            count,
            _examples(table, bad, keys),
            bad,
        )


def _check_finite(
    table: pa.Table, name: str, *, source: str, keys: Sequence[str], bounds: tuple[float, float] | None = None
) -> None:
    column = table.column(name)
    bad = pc.invert(pc.fill_null(pc.is_finite(column), True))
    what = "non-finite values"
    if bounds is not None:
        low, high = bounds
        outside = pc.fill_null(pc.or_(pc.less(column, low), pc.greater(column, high)), False)
        bad = pc.or_(bad, outside)
        what = f"values outside [{low}, {high}] or non-finite"
    count = int(pc.sum(bad).as_py() or 0)
    if count:
        values = column.filter(bad).slice(0, _N_EXAMPLES).to_pylist()
        raise _fail(source, name, f"{what}: {values}", count, _examples(table, bad, keys), bad)


def _integer_column(
    table: pa.Table, name: str, target: pa.DataType, *, source: str, keys: Sequence[str]
) -> pa.ChunkedArray:
    """An integer column parsed as int64 (exactly, whatever its width), range-checked, then narrowed to ``target``.

    Every integer of the contracts counts something (samples, tokens): it lies in ``[0, max of target]``, so a
    negative ``sample`` or one beyond int32 is a named error, not a silent row or a bare cast error.
    """
    wide = _cast_column(table, name, pa.int64(), source=source, keys=keys)
    low, high = 0, int(np.iinfo(target.to_pandas_dtype()).max)
    bad = pc.fill_null(pc.or_(pc.less(wide, low), pc.greater(wide, high)), False)
    count = int(pc.sum(bad).as_py() or 0)
    if count:
        values = wide.filter(bad).slice(0, _N_EXAMPLES).to_pylist()
        what = f"values outside [{low}, {high}] ({'negative counts' if min(values) < 0 else 'too large'}): {values}"
        raise _fail(source, name, what, count, _examples(table, bad, keys), bad)
    return wide.cast(target)


def check_unique_keys(table: pa.Table, keys: Sequence[str], *, source: str) -> None:
    """Reject duplicate key combinations.

    Parameters
    ----------
    table : pyarrow.Table
        A table holding the ``keys`` columns.
    keys : sequence of str
        The key columns (e.g. ``TABLE_KEYS["verdicts"]``).
    source : str
        File or table name used in the error message.

    Raises
    ------
    InputError
        ``<source>: <k1+k2+...>: duplicate keys (<rows> rows, e.g. [...])``.

    Notes
    -----
    One hash group-by over the key columns (Arrow's multi-threaded ``Table.group_by``); memory is proportional to
    the number of distinct keys; when one key column varies, its distinct count decides first (a quarter of that).
    """
    varying = [k for k in keys if pc.count_distinct(table[k], mode="all").as_py() > 1]
    if len(varying) == 1 and pc.count_distinct(table[varying[0]], mode="all").as_py() == table.num_rows:
        return  # one column varies (one dataset, one sample) and its values are distinct: no group-by needed
    counts = table.select(list(keys)).group_by(list(keys), use_threads=True).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dup.num_rows:
        rows = int(pc.sum(dup.column("count_all")).as_py())
        first = dup.select(list(keys)).slice(0, _N_EXAMPLES).to_pylist()
        raise InputError(f"{source}: {'+'.join(keys)}: duplicate keys ({rows} rows, e.g. {first})")


def check_unique_columns(table: pa.Table, *, source: str) -> None:
    """Reject a table whose header names a column more than once (a duplicated header cell).

    Raises
    ------
    InputError
        ``<source>: <column>: named <n> times in the header (...); keep one column of each name``.
    """
    names = table.column_names
    twice = [name for name in dict.fromkeys(names) if names.count(name) > 1]
    if twice:
        counts = ", ".join(f"{name!r} x{names.count(name)}" for name in twice)
        raise InputError(
            f"{source}: {twice[0]}: named {names.count(twice[0])} times in the header ({counts}); "
            "keep one column of each name"
        )


def check_repeated_header(table: pa.Table, *, source: str) -> None:
    """Reject a CSV table one of whose rows is its own header line again (files concatenated with their headers).

    A row repeats the header when every column holds its own name; such a row can only be read as text, so
    tables with a non-text column are skipped. Line numbers count the header as line 1.

    Raises
    ------
    InputError
        ``<source>: (header): the header line repeats as line <n> ...; keep only the first header line``.
    """
    if table.num_rows == 0 or not all(pa.types.is_string(t) or pa.types.is_large_string(t) for t in table.schema.types):
        return
    repeats = pc.equal(table.column(0), table.column_names[0])
    for index in range(1, table.num_columns):
        repeats = pc.and_(repeats, pc.equal(table.column(index), table.column_names[index]))
    rows = np.flatnonzero(pc.fill_null(repeats, False).to_numpy(zero_copy_only=False))
    if len(rows):
        raise InputError(
            f"{source}: (header): the header line repeats as line {rows[0] + 2} ({len(rows)} times in all; files "
            "concatenated with their headers?); keep only the first header line"
        )


def all_null_judges(verdicts: pa.Table) -> dict[str, int]:
    """Judges of a conformed verdicts table whose every row has neither a verdict nor a score, with their rows.

    Such a judge adds no vote anywhere: usually a parser that failed on every reply, or a column mapped wrong.
    """
    has_vote = pc.or_(pc.is_valid(verdicts.column("verdict")), pc.is_valid(verdicts.column("score")))
    counts = (
        pa.table({"judge_id": verdicts.column("judge_id"), "votes": pc.cast(has_vote, pa.int64())})
        .group_by("judge_id", use_threads=True)
        .aggregate([("votes", "sum"), ([], "count_all")])
    )
    silent = counts.filter(pc.equal(counts.column("votes_sum"), 0)).sort_by("judge_id")
    return dict(zip(silent.column("judge_id").to_pylist(), silent.column("count_all").to_pylist(), strict=True))


def conform_table(
    table: pa.Table,
    name: str,
    *,
    source: str | None = None,
    score_range: tuple[float, float] | None = None,
    check_keys: bool = True,
) -> pa.Table:
    """Check one table against its contract and return it with the contract's columns, order and types.

    Parameters
    ----------
    table : pyarrow.Table
        The table as read (any column order; types castable to the contract's).
    name : {"verdicts", "labels", "judges", "items", "refused"}
        Which contract applies.
    source : str, optional
        File or table name used in error messages; defaults to ``name``.
    score_range : (float, float), optional
        Declared range of ``verdicts.score``; values outside it are rejected. Non-finite scores are always rejected.
    check_keys : bool, default True
        Check key uniqueness (a streaming writer that checks it otherwise can skip this).

    Returns
    -------
    pyarrow.Table
        Conformed to ``SCHEMAS[name]`` (``items`` / ``refused``: key columns as strings, free columns kept).

    Raises
    ------
    InputError
        Empty table, a column named twice, missing required column, unknown column, uncastable values, nulls in a
        key column, unknown verdict or label categories, non-finite or out-of-range scores, negative token counts,
        duplicate keys.
    """
    source = source or name
    if name not in TABLES:
        raise InputError(f"{source}: unknown table {name!r}, expected one of {list(TABLES)}")
    if table.num_rows == 0:
        raise InputError(f"{source}: (all columns): empty table (0 rows)")
    check_unique_columns(table, source=source)
    if name in FREE_TABLES:
        return _conform_free(table, name, source=source, check_keys=check_keys)
    schema = SCHEMAS[name]
    keys = list(TABLE_KEYS[name])
    present = set(table.column_names)
    missing = [c for c in REQUIRED_COLUMNS[name] if c not in present]
    if missing:
        raise InputError(f"{source}: {', '.join(missing)}: missing required column (found {table.column_names})")
    unknown = [c for c in table.column_names if c not in schema.names]
    if unknown:
        raise InputError(f"{source}: {', '.join(unknown)}: unknown column (the {name} contract has {schema.names})")
    columns: dict[str, pa.ChunkedArray] = {}
    for field in schema:
        if field.name in present and pa.types.is_integer(field.type):
            columns[field.name] = _integer_column(table, field.name, field.type, source=source, keys=keys)
        elif field.name in present:
            columns[field.name] = _cast_column(table, field.name, field.type, source=source, keys=keys)
    if name == "verdicts":
        if "sample" not in columns:
            columns["sample"] = pa.chunked_array([pa.array(np.zeros(table.num_rows, dtype=np.int32))])
        if "group_id" not in columns:
            columns["group_id"] = columns["item_id"]
        else:  # a null group_id means the item has no linked copies: its own group (documented default)
            columns["group_id"] = pc.coalesce(columns["group_id"], columns["item_id"])
    loose = pa.schema([f.with_nullable(True) for f in schema])  # nulls in key columns are reported below
    out = pa.table([columns.get(f.name, pa.nulls(table.num_rows, f.type)) for f in schema], schema=loose)
    for field in schema:
        if not field.nullable:
            _check_nulls(out, field.name, source=source, keys=keys)
    _check_values(out, name, source=source, keys=keys, score_range=score_range)
    if check_keys:
        check_unique_keys(out, keys, source=source)
    return out.cast(schema)


def _check_values(
    table: pa.Table, name: str, *, source: str, keys: Sequence[str], score_range: tuple[float, float] | None
) -> None:
    if name == "verdicts":
        _check_categories(table, "verdict", source=source, keys=keys)
        _check_finite(table, "score", source=source, keys=keys, bounds=score_range)
    elif name == "labels":
        _check_categories(table, "label", source=source, keys=keys)
        _check_finite(table, "label_score", source=source, keys=keys)
    elif name == "judges":
        _check_finite(table, "cost_per_mtok_in", source=source, keys=keys, bounds=(0.0, math.inf))
        _check_finite(table, "cost_per_mtok_out", source=source, keys=keys, bounds=(0.0, math.inf))


def _conform_free(table: pa.Table, name: str, *, source: str, check_keys: bool) -> pa.Table:
    required = FREE_TABLES[name]
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise InputError(f"{source}: {', '.join(missing)}: missing required column (found {table.column_names})")
    keys = list(TABLE_KEYS.get(name, required))
    for column in required:
        casted = _cast_column(table, column, pa.string(), source=source, keys=keys)
        table = table.set_column(table.schema.get_field_index(column), column, casted)
        _check_nulls(table, column, source=source, keys=keys)
    if check_keys and name in TABLE_KEYS:
        check_unique_keys(table, keys, source=source)
    order = list(required) + [c for c in table.column_names if c not in required]
    return table.select(order)


def distinct_items(verdicts: pa.Table, *, source: str) -> pa.Table:
    """Distinct (dataset, item_id, group_id) of conformed verdicts; an item with two group ids is rejected.

    Parameters
    ----------
    verdicts : pyarrow.Table
        Conformed verdicts (or a chunk of them).
    source : str
        File or table name used in the error message.

    Returns
    -------
    pyarrow.Table
        One row per (dataset, item_id), with its ``group_id``.

    Raises
    ------
    InputError
        ``<source>: group_id: items with more than one group_id (...)``: splits group by ``group_id``, so all
        rows of an item must agree on it.
    """
    pairs = verdicts.select(["dataset", "item_id", "group_id"]).group_by(["dataset", "item_id", "group_id"])
    items = pairs.aggregate([])
    if items.num_rows == 0:
        return items
    counts = items.group_by(["dataset", "item_id"]).aggregate([([], "count_all")])
    split = counts.filter(pc.greater(counts.column("count_all"), 1))
    if split.num_rows:
        examples = split.select(["dataset", "item_id"]).slice(0, _N_EXAMPLES).to_pylist()
        raise InputError(
            f"{source}: group_id: items with more than one group_id ({split.num_rows} items, e.g. {examples})"
        )
    return items


def check_known_items(
    table: pa.Table, item_keys: pa.Table, *, source: str, what: str = "rows for items not in verdicts"
) -> None:
    """Reject rows of ``table`` whose (dataset, item_id) is not among ``item_keys``.

    Parameters
    ----------
    table : pyarrow.Table
        Labels or items, with ``dataset`` and ``item_id``.
    item_keys : pyarrow.Table
        Distinct (dataset, item_id) of the verdicts.
    source : str
        File or table name used in the error message.
    what : str
        Description of the offence.

    Raises
    ------
    InputError
        ``<source>: item_id: <what> (<count> rows, e.g. [...])``.
    """
    keys = ["dataset", "item_id"]
    orphans = table.select(keys).join(item_keys.select(keys), keys=keys, join_type="left anti", use_threads=True)
    if orphans.num_rows:
        raise InputError(
            f"{source}: item_id: {what} ({orphans.num_rows} rows, e.g. {orphans.slice(0, _N_EXAMPLES).to_pylist()})"
        )


def check_known_judges(judge_ids: pa.Array | pa.ChunkedArray, judges: pa.Table, *, source: str) -> None:
    """Reject verdict judges missing from a given judges table (``source`` names the verdicts)."""
    unknown = pc.unique(judge_ids).filter(pc.invert(pc.is_in(pc.unique(judge_ids), value_set=judges["judge_id"])))
    if len(unknown):
        raise InputError(
            f"{source}: judge_id: judges missing from the judges table ({len(unknown)} judges, "
            f"e.g. {unknown.slice(0, _N_EXAMPLES).to_pylist()})"
        )


def validate_tables(
    tables: Mapping[str, pa.Table],
    *,
    sources: Mapping[str, str] | None = None,
    score_range: tuple[float, float] | None = None,
) -> dict[str, pa.Table]:
    """Conform every table of a dataset and check them against each other.

    Parameters
    ----------
    tables : mapping of str to pyarrow.Table
        ``verdicts`` and ``labels`` are required; ``judges``, ``items`` and ``refused`` are optional.
    sources : mapping of str to str, optional
        File name per table for error messages (defaults to the table name).
    score_range : (float, float), optional
        Declared range of ``verdicts.score``.

    Returns
    -------
    dict of str to pyarrow.Table
        The conformed tables, in :data:`TABLES` order.

    Raises
    ------
    InputError
        Any check of :func:`conform_table`; an unknown or missing required table; labels or items for items that
        have no verdict; verdict judges missing from a given judges table.
    """
    sources = dict(sources or {})
    unknown = [t for t in tables if t not in TABLES]
    if unknown:
        raise InputError(f"dataset: {', '.join(unknown)}: unknown table, expected some of {list(TABLES)}")
    for required in ("verdicts", "labels"):
        if required not in tables:
            raise InputError(f"dataset: {required}: missing required table")
    out = {
        name: conform_table(tables[name], name, source=sources.get(name, name), score_range=score_range)
        for name in TABLES
        if name in tables
    }
    item_keys = distinct_items(out["verdicts"], source=sources.get("verdicts", "verdicts"))
    check_known_items(
        out["labels"], item_keys, source=sources.get("labels", "labels"), what="labels for items not in verdicts"
    )
    if "items" in out:
        check_known_items(
            out["items"],
            item_keys,
            source=sources.get("items", "items"),
            what="item metadata for items not in verdicts",
        )
    if "judges" in out:
        check_known_judges(out["verdicts"]["judge_id"], out["judges"], source=sources.get("verdicts", "verdicts"))
    return out
