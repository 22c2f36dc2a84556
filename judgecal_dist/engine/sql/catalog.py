"""The persistent catalog of ``judgecal serve``: datasets and study results as databases of tables.

``add`` makes one database per URL, remembered in its properties (``judgecal.source``, ``judgecal.kind``):

* a **dataset** root: its ``verdicts``, ``labels`` and, when stored, ``judges``, ``items`` and ``refused`` become
  external Parquet tables over the table folders, with the column comments of :mod:`judgecal_dist.io.column_docs`.
  Registering the same URL again refreshes them, so a dataset re-ingested at that URL shows its new rows.
* a **results** root (one holding ``history/``): a ``runs`` view over every run's manifest row and one view per
  study holding every run's summary rows with ``run_id``, ``study``, ``dataset_url``, ``input_digest`` and
  ``finished``. The views read the history's folders when queried, so a new run shows without registering again.

Every function takes a SparkSession over the catalog: a Spark Connect session of a running server, or a local
session with Hive support (:func:`judgecal_dist.engine.sql.server.catalog_conf`). Databases without ``judgecal.source``
were not made here and are never dropped.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from judgecal_dist.errors import InputError
from judgecal_dist.io.column_docs import TABLE_DOCS, column_comment
from judgecal_dist.io.dataset import dataset_root, open_table
from judgecal_dist.io.filesystem import open_fs
from judgecal_dist.io.schema import TABLES

__all__ = [
    "CatalogEntry",
    "check_entry",
    "add_to_catalog",
    "catalog_entries",
    "drop_from_catalog",
    "default_name",
    "check_name",
]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")
# Not "url": Spark redacts property values whose key matches spark.redaction.regex (which covers url).
URL_KEY, KIND_KEY = "judgecal.source", "judgecal.kind"


@dataclass(frozen=True)
class CatalogEntry:
    """One registered database: its name, kind (``dataset`` or ``results``), URL and tables."""

    name: str
    kind: str
    url: str
    tables: tuple[str, ...]


def default_name(url: str) -> str:
    """A database name from the URL's last path element: lower case, other characters as ``_``.

    Examples
    --------
    >>> default_name("/data/LLMBar-2024/"), default_name("s3://b/rb2.k8")
    ('llmbar_2024', 'rb2_k8')
    """
    last = url.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"[^a-z0-9_]", "_", last.lower())
    return name if name and not name[0].isdigit() else f"d_{name}"


def _literal(text: str) -> str:
    """A Spark SQL string literal (backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def check_name(name: str, option: str = "--name") -> None:
    """Refuse a database name Spark SQL cannot take unquoted (``option`` names where it came from)."""
    if not _NAME.match(name):
        raise InputError(
            f"{option} {name!r}: a database name is lower-case letters, digits and '_', not starting with a digit"
        )


def _properties(spark: Any, name: str) -> dict[str, str]:
    rows = spark.sql(f"DESCRIBE DATABASE EXTENDED {_quoted(name)}").collect()
    info = {str(row[0]): str(row[1]) for row in rows}
    found = dict(re.findall(r"\(([^,()]+),([^()]*)\)", info.get("Properties", "")))
    return {k.strip(): v.strip() for k, v in found.items()}


def _databases(spark: Any) -> list[str]:
    return sorted(str(row[0]) for row in spark.sql("SHOW DATABASES").collect())


def _tables(spark: Any, name: str) -> tuple[str, ...]:
    return tuple(sorted(str(row["tableName"]) for row in spark.sql(f"SHOW TABLES IN {_quoted(name)}").collect()))


def catalog_entries(spark: Any) -> list[CatalogEntry]:
    """Every database registered by :func:`add_to_catalog`, by name."""
    entries = []
    for name in _databases(spark):
        props = _properties(spark, name)
        if URL_KEY in props:
            entries.append(CatalogEntry(name, props.get(KIND_KEY, "?"), props[URL_KEY], _tables(spark, name)))
    return entries


def check_entry(url: str, name: str | None) -> tuple[str, str, str]:
    """``(url, name, kind)`` of a URL to register, checked before any session starts.

    Raises
    ------
    InputError
        A malformed name, or a URL that is neither a committed dataset nor a results root with ``history/``.
    """
    if "://" not in url:
        url = os.path.abspath(url)  # the server may run in another folder
    url = url.rstrip("/")
    if "`" in url:
        raise InputError(
            f"catalog add {url}: a path with a backtick cannot be registered (Spark SQL quotes paths with "
            "backticks); rename or link the folder without one"
        )
    name = name or default_name(url)
    check_name(name)
    fs, root = open_fs(url, {})
    kind = "results" if fs.exists(f"{root.rstrip('/')}/history/runs") else "dataset"
    if kind == "dataset":
        dataset_root(url)  # refuses a folder that is neither a committed dataset nor a results root
    return url, name, kind


def add_to_catalog(spark: Any, url: str, name: str | None = None) -> CatalogEntry:
    """Register the dataset or results root at ``url`` as database ``name`` (default: :func:`default_name`).

    Raises
    ------
    InputError
        ``url`` is neither a committed dataset nor a results root with history, the name is malformed, or the
        database exists and holds another URL or was not made by judgecal.
    """
    url, name, kind = check_entry(url, name)
    began = time.monotonic()
    if kind == "dataset":
        statements = _dataset_statements(url, name)  # every table's footers read before the first statement
    created = name not in _databases(spark)
    if not created:
        props = _properties(spark, name)
        if props.get(URL_KEY) is None:
            raise InputError(f"catalog: database {name!r} was not made by judgecal; pick another --name")
        if props[URL_KEY] != url:
            raise InputError(
                f"catalog: database {name!r} holds {props[URL_KEY]}; drop it first (judgecal catalog drop {name}) "
                "or pick another --name"
            )
    else:
        comment = f"judgecal {kind} at {url}"
        spark.sql(
            f"CREATE DATABASE {_quoted(name)} COMMENT {_literal(comment)} "
            f"WITH DBPROPERTIES ({_literal(URL_KEY)} = {_literal(url)}, {_literal(KIND_KEY)} = {_literal(kind)})"
        )
    try:
        if kind == "dataset":
            for number, (table, table_statements) in enumerate(statements, start=1):
                log.info("catalog add: %s.%s (%d/%d, %.0f s)", name, table, number, len(statements), _since(began))
                for statement in table_statements:
                    spark.sql(statement)
        else:
            _register_results(spark, url, name)
    except Exception:
        if created:  # all or nothing: a database this call created goes again
            spark.sql(f"DROP DATABASE IF EXISTS {_quoted(name)} CASCADE")
        raise
    entry = CatalogEntry(name, kind, url, _tables(spark, name))
    log.info("catalog add: %s registered in %.0f s", name, _since(began))
    return entry


def _since(began: float) -> float:
    return time.monotonic() - began


def _dataset_statements(url: str, name: str) -> list[tuple[str, list[str]]]:
    """The statements registering the dataset at ``url``, per table; nothing runs here.

    Raises
    ------
    InputError
        Not a committed dataset, or a table whose parts the io reader refuses.
    """
    from pyspark.sql.pandas.types import from_arrow_type

    from judgecal_dist.engine.jobs.spark import spark_url

    fs, root = dataset_root(url)  # raises InputError unless committed (_SUCCESS)
    statements = []
    for table in TABLES:
        target = f"{_quoted(name)}.{_quoted(table)}"
        if not fs.exists(f"{root}/{table}"):
            statements.append((table, [f"DROP TABLE IF EXISTS {target}"]))
            continue
        dataset, _, _ = open_table(url, table)  # every part's footer checked by the io reader
        columns = []
        for fld in dataset.schema:
            comment = column_comment(table, fld.name)
            ddl = f"{_quoted(fld.name)} {from_arrow_type(fld.type).simpleString()}"
            columns.append(ddl + (f" COMMENT {_literal(comment)}" if comment else ""))
        location = spark_url(f"{url}/{table}")
        # Dropping an external table leaves its files: re-creating it picks up a re-ingested folder's schema.
        create = (
            f"CREATE TABLE {target} ({', '.join(columns)}) USING parquet LOCATION {_literal(location)} "
            f"COMMENT {_literal(TABLE_DOCS[table])}"
        )
        statements.append((table, [f"DROP TABLE IF EXISTS {target}", create]))
    return statements


def _register_results(spark: Any, url: str, name: str) -> None:
    from judgecal_dist.engine.jobs.spark import spark_url

    fs, root = open_fs(url, {})
    history = f"{url}/history"
    runs_path = spark_url(f"{history}/runs")
    latest = f"SELECT *, max(recorded_at) OVER (PARTITION BY study, run_id) AS latest FROM parquet.`{runs_path}`"
    spark.sql(
        f"CREATE OR REPLACE VIEW {_quoted(name)}.runs COMMENT {_literal('one row per study run (latest attempt)')} "
        f"AS SELECT * EXCEPT (latest) FROM ({latest}) WHERE recorded_at = latest"
    )
    studies = sorted(p.rsplit("study=", 1)[-1] for p in fs.glob(f"{root.rstrip('/')}/history/results/study=*"))
    for study in studies:
        if not re.match(r"^[a-z_][a-z0-9_]*$", study):
            continue
        results_path = spark_url(f"{history}/results/study={study}")
        spark.sql(
            f"CREATE OR REPLACE VIEW {_quoted(name)}.{_quoted(study)} "
            f"COMMENT {_literal(f'every run of study {study}: summary rows with the run')} AS "
            f"SELECT r.run_id, {_literal(study)} AS study, runs.dataset_url, runs.input_digest, runs.finished, "
            f"r.* EXCEPT (run_id, recorded_at, date) "
            f"FROM parquet.`{results_path}` AS r "
            f"JOIN {_quoted(name)}.runs AS runs ON runs.study = {_literal(study)} AND runs.run_id = r.run_id "
            "AND runs.recorded_at = r.recorded_at"
        )


def drop_from_catalog(spark: Any, name: str) -> CatalogEntry:
    """Drop database ``name`` and its tables and views (the files they read stay).

    Raises
    ------
    InputError
        No such database, or one judgecal did not make.
    """
    entries = {entry.name: entry for entry in catalog_entries(spark)}
    if name not in entries:
        raise InputError(not_registered(name, list(entries)))
    spark.sql(f"DROP DATABASE {_quoted(name)} CASCADE")
    return entries[name]


def not_registered(name: str, registered: list[str]) -> str:
    """The refusal of a name no judgecal database has."""
    return f"catalog: no database {name!r} registered by judgecal (registered: {', '.join(registered) or 'none'})"


def entries_frame(entries: list[CatalogEntry]) -> pd.DataFrame:
    """The entries as rows for printing."""
    return pd.DataFrame(
        [{"name": e.name, "kind": e.kind, "url": e.url, "tables": ",".join(e.tables)} for e in entries],
        columns=["name", "kind", "url", "tables"],
    )
