"""``judgecal sql`` on a session: every statement checked (the text guard and the plan check, or the server's
check endpoint), then run, each result previewed and the last one optionally written as Parquet."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from pyspark import errors as spark_errors
from pyspark.sql import DataFrame, SparkSession

from judgecal_dist.engine.jobs.spark import register_views, spark_url
from judgecal_dist.engine.sql.guard import SqlGuard, split_statements
from judgecal_dist.engine.sql.guard_service import check_remote
from judgecal_dist.errors import InputError, first_line

__all__ = ["SqlResult", "run_sql"]

#: Errors of a user's query (as opposed to a broken session): reported as InputError with their first line.
_QUERY_ERRORS = (
    spark_errors.AnalysisException,
    spark_errors.ArithmeticException,
    spark_errors.DateTimeException,
    spark_errors.IllegalArgumentException,
    spark_errors.NumberFormatException,
    spark_errors.SparkRuntimeException,
)


@dataclass(frozen=True)
class SqlResult:
    """One statement's result.

    Attributes
    ----------
    statement : str
        The statement as split from the query text.
    rows : pandas.DataFrame
        At most ``limit`` rows (with ``out``: the first ``limit`` rows of what was written).
    truncated : bool
        The statement returned more rows than ``rows`` holds.
    """

    statement: str
    rows: pd.DataFrame
    truncated: bool


def run_sql(
    spark: SparkSession,
    query: str,
    data_url: str | None,
    out: str | None = None,
    *,
    limit: int = 50,
    allow_writes: bool = False,
    guard_address: tuple[str, int] | None = None,
) -> list[SqlResult]:
    """Run one or more SQL statements over the views of a dataset root (:func:`register_views`), read-only.

    Every statement is checked by :class:`~judgecal_dist.engine.sql.guard.SqlGuard` on Spark's parsed plan
    before the first one runs: only queries over the dataset's views (and ``EXPLAIN``, ``DESCRIBE``,
    ``SHOW TABLES``, ``SHOW COLUMNS``, ``SET`` of a tuning setting) unless ``allow_writes``; never a static Java
    call, a path read outside ``data_url`` or a write into the dataset's folder.

    Parameters
    ----------
    spark : SparkSession
    query : str
        Spark SQL over ``verdicts``, ``labels``, ``judges``, ``items``; statements separated by ``;``.
    data_url : str or None
        Dataset root; None: the statements read the tables of the session's catalog (``judgecal serve``).
    out : str, optional
        Folder to write the last statement's whole result to as Parquet (never inside ``data_url``).
    limit : int, default 50
        Rows kept per statement; a statement with more is marked ``truncated``.
    allow_writes : bool, default False
        Let DDL/DML commands run (still never into the dataset's folder).
    guard_address : (str, int), optional
        The statement checker of a judgecal server (:mod:`judgecal_dist.engine.sql.guard_service`): ``spark`` is then a Spark Connect
        session, which has no parser of its own to ask, and the server's parser checks every statement.

    Returns
    -------
    list of SqlResult
        One per statement, in order.

    Raises
    ------
    InputError
        A statement is refused or fails (message: ``sql: statement <n>: ...``), the text holds no statement,
        or ``out`` exists or overlaps the dataset's folder.
    """
    if limit < 1:
        raise InputError(f"--limit: must be >= 1, got {limit}")
    views = register_views(spark, data_url) if data_url is not None else None
    if guard_address is None:
        guard = SqlGuard(spark, views=views, data_url=data_url, allow_writes=allow_writes)
        statements = split_statements(spark, query)
        if not statements:
            raise InputError("sql: no statement in the query text")
        if out is not None:
            guard.check_output(out)
        numbers = range(1, len(statements) + 1) if len(statements) > 1 else [None]
        for number, statement in zip(numbers, statements, strict=True):
            guard.check(statement, number)
        for number, statement in zip(numbers, statements, strict=True):
            guard.check_plan(statement, number)  # what the plans read and write, before the first one runs

        def recheck(statement: str, number: int) -> object:
            guard.check(statement, number)
            guard.check_plan(statement, number)
            return None
    else:
        host, port = guard_address
        statements = check_remote(host, port, query, views=views, data_url=data_url, allow_writes=allow_writes, out=out)
        numbers = range(1, len(statements) + 1) if len(statements) > 1 else [None]

        def recheck(statement: str, number: int) -> object:  # the server's check rule decides on the plan
            return check_remote(
                host, port, statement, views=views, data_url=data_url, allow_writes=allow_writes, number=number
            )

    results = []
    for index, (number, statement) in enumerate(zip(numbers, statements, strict=True)):
        if allow_writes and number is not None and number > 1:
            recheck(statement, number)  # tables made by earlier statements now exist: check their locations
        try:
            frame = spark.sql(statement)
            if out is not None and index == len(statements) - 1:
                frame.write.mode("error").parquet(spark_url(out))  # Spark Connect knows "error", not its alias
                frame = spark.read.parquet(spark_url(out))
            rows = _collect_rows(frame, limit + 1)
        except _QUERY_ERRORS as err:
            prefix = f"statement {number}: " if number is not None else ""
            # the server's check rule words its refusal as this guard does ("sql: ..."): one prefix
            raise InputError(f"sql: {prefix}{first_line(err).removeprefix('sql: ')}") from err
        results.append(SqlResult(statement, rows.head(limit), truncated=len(rows) > limit))
    return results


def _collect_rows(frame: DataFrame, n: int) -> pd.DataFrame:
    """The first ``n`` rows; a frame with no columns (a command's empty result) as an empty pandas frame."""
    if not frame.columns:
        return pd.DataFrame()
    return frame.limit(n).toPandas()
