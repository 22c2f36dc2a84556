"""The SQL commands of ``judgecal``: ``sql``, ``serve`` and ``catalog`` (registered on the group in :mod:`.cli`).

Each command parses, calls one function of :mod:`judgecal_dist.engine` and prints; errors map to exit codes
through :func:`judgecal_dist.cli_common.guarded` like every other command.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from judgecal_dist.cli_common import Rejected, conf_option, guarded
from judgecal_dist.errors import InputError

TABLES_DOC = "docs/tables.md"

warehouse_option = click.option(
    "--warehouse",
    default=None,
    help="The catalog's folder: server state file, logs, Derby metastore (default: $JUDGECAL_WAREHOUSE, else "
    "sql_warehouse of the engine config, else ~/.judgecal/warehouse: one per user, found from any folder).",
)
connect_option = click.option(
    "--connect",
    "connect_url",
    default=None,
    help="A judgecal server's Spark Connect URL, sc://host:port (default: the server of --warehouse when one "
    "runs, else a local session).",
)
format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="Output: an aligned table, CSV with a header, or one JSON array of records per statement.",
)


def _engine(conf_path: Path | None) -> Any:
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.extras import require_extra

    require_extra("spark", "judgecal sql, serve and catalog")

    return load_engine_config(conf_path)


def _folder(engine: Any, warehouse: str | None) -> Path:
    from judgecal_dist.engine.sql.server import warehouse_folder

    return warehouse_folder(warehouse, engine.sql_warehouse)


def format_rows(rows: Any, fmt: str) -> str:
    """A result as an aligned table, CSV with a header, or a JSON array of records."""
    if fmt == "json":
        return str(rows.to_json(orient="records", date_format="iso"))
    if fmt == "csv":
        return str(rows.to_csv(index=False)).rstrip("\n")
    if rows.empty:
        return " ".join(map(str, rows.columns)) + ("\n" if len(rows.columns) else "") + "(0 rows)"
    return str(rows.to_string(index=False))


@click.command()
@click.argument("query", required=False)
@click.option("--data", default=None, help="An ingested dataset URL: its tables become the views (see above).")
@connect_option
@warehouse_option
@click.option("--out", default=None, help="Write the last statement's full result as Parquet at this URL.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Rows to print per statement.")
@format_option
@click.option("--allow-writes", is_flag=True, help="With --data: let DDL/DML run (never into the dataset's folder).")
@conf_option
@guarded
def sql(
    query: str | None,
    data: str | None,
    connect_url: str | None,
    warehouse: str | None,
    out: str | None,
    limit: int,
    fmt: str,
    allow_writes: bool,
    conf_path: Path | None,
) -> None:
    """Run Spark SQL QUERY (statements separated by ';'); without QUERY, an interactive prompt.

    \b
    Where: the running `judgecal serve` of the warehouse (--warehouse, else the per-user one, so from any
    folder; or --connect sc://host:port) over Spark Connect, with no JVM in this process. With no server: --data
    runs on a local Spark session, the catalog too when the warehouse holds one; otherwise exit 2 saying how to
    start a server.
    Tables: the catalog's databases (judgecal catalog add URL --name NAME: NAME.verdicts, NAME.labels,
    NAME.judges, NAME.items, NAME.refused; a results root: NAME.runs and one table per study), or with --data
    the views verdicts, labels and, when the dataset has them, judges, items and refused.
    Every table and column (type, nullability, meaning) is in docs/tables.md.
    Read-only: only queries (joins, CTEs, window functions, subqueries), plus EXPLAIN, DESCRIBE, SHOW TABLES,
    SHOW DATABASES, SHOW COLUMNS, USE and SET of a tuning setting (spark.sql.shuffle.partitions, ...).
    Refused (exit 2, nothing runs): DDL and DML (INSERT, CREATE, DROP, ALTER, CACHE, ADD JAR, ...), reflect,
    java_method and try_reflect, TRANSFORM ... USING, file reads (text.`/path`, read_files) outside --data.
    Every statement is checked on Spark's parsed plan (the server's, through Connect) before the first one runs,
    and on its analyzed plan (globs expanded, relative paths resolved, views followed): files are read only
    inside --data (or the registered datasets), and a registered dataset or --data is never written.
    --allow-writes (with --data) lets commands run, but never writes into the dataset's folder. A result longer
    than --limit is cut, with a notice on stderr.
    """
    from judgecal_dist.engine.sql.client import open_session

    if data is None and (allow_writes or out is not None):
        raise Rejected(f"{'--allow-writes' if allow_writes else '--out'}: only with --data (the catalog is read-only)")
    if out is not None and "://" not in out:
        out = os.path.abspath(out)  # a server writes it from its own folder: relative to the user's, here
    if data is not None and "://" not in data:
        data = os.path.abspath(data)
    engine = _engine(conf_path)
    with open_session(engine, warehouse=warehouse, connect_url=connect_url, catalog=data is None) as session:
        session.grant(data=data, out=out, writes=allow_writes)
        if query is None:
            _prompt(session, data, limit, fmt)
            return
        _run_and_print(session, query, data, out, limit, fmt, allow_writes)
    if out:
        click.echo(out)


def _run_and_print(
    session: Any, query: str, data: str | None, out: str | None, limit: int, fmt: str, allow_writes: bool
) -> None:
    from judgecal_dist.engine.sql.client import server_failures
    from judgecal_dist.engine.sql.query import run_sql

    with server_failures(session):
        results = run_sql(
            session.spark,
            query,
            data,
            out=out,
            limit=limit,
            allow_writes=allow_writes,
            guard_address=session.guard_address,
        )
    for number, result in enumerate(results, start=1):
        if number > 1 and fmt != "json":
            click.echo("")
        click.echo(format_rows(result.rows, fmt))
        if result.truncated:
            where = f"statement {number}: " if len(results) > 1 else ""
            click.echo(f"note: {where}showing the first {limit} rows; raise --limit or write all with --out", err=True)


def _prompt(session: Any, data: str | None, limit: int, fmt: str) -> None:
    """Read statements ending in ';' until EOF, ``exit`` or ``quit``; a refused statement prints its line."""
    click.echo(f"judgecal sql on {session.where}; end statements with ';', quit with exit or Ctrl-D", err=True)
    buffer: list[str] = []
    while True:
        try:
            line = input("judgecal> " if not buffer else "       -> ")
        except EOFError:
            break
        if not buffer and line.strip().lower().rstrip(";") in ("exit", "quit"):
            break
        buffer.append(line)
        if not line.rstrip().endswith(";"):
            continue
        text, buffer = "\n".join(buffer), []
        try:
            _run_and_print(session, text, data, None, limit, fmt, False)
        except InputError as err:
            click.echo(f"Error: {err}", err=True)


@click.command()
@warehouse_option
@click.option("--host", default=None, help="Address to bind (default: sql_host of the engine config, 127.0.0.1).")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Let --host be a non-loopback address. The server has no authentication: trusted networks only.",
)
@click.option("--thrift-port", type=click.IntRange(1, 65535), default=None, help="JDBC port (default 10000).")
@click.option("--connect-port", type=click.IntRange(1, 65535), default=None, help="Spark Connect port (default 15002).")
@click.option("--metastore-uri", default=None, help="An external Hive metastore, thrift://host:9083 (default: Derby).")
@click.option("--stop", is_flag=True, help="Stop the server of --warehouse (or clear its stale state file).")
@click.option("--status", "show_status", is_flag=True, help="Print the state of the server of --warehouse.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait for readiness.")
@conf_option
@guarded
def serve(
    warehouse: str | None,
    host: str | None,
    allow_remote: bool,
    thrift_port: int | None,
    connect_port: int | None,
    metastore_uri: str | None,
    stop: bool,
    show_status: bool,
    timeout: float,
    conf_path: Path | None,
) -> None:
    """Start a Spark SQL server over the catalog: JDBC (Thrift, for beeline and BI tools) and Spark Connect.

    \b
    It runs in the background; this command returns once both endpoints accept connections and prints them:
      beeline -u jdbc:hive2://127.0.0.1:10000
      SparkSession.builder.remote("sc://127.0.0.1:15002").getOrCreate()
      judgecal sql "SELECT ..."
    Ports, master and warehouse come from the engine config (sql_* settings, spark_master, spark_conf; the
    spark_conf reaches Spark through a 0600 file, never the command line). The warehouse is --warehouse, else
    $JUDGECAL_WAREHOUSE, else sql_warehouse, else ~/.judgecal/warehouse; one server per warehouse (a lock).
    The catalog persists in the warehouse folder (an embedded Derby metastore), or in --metastore-uri.
    The state file (WAREHOUSE/server.json) and the logs (WAREHOUSE/logs/server.log) sit in the warehouse.
    The server has no authentication: it binds 127.0.0.1 and refuses another address without --allow-remote.
    Every client (JDBC, Spark Connect) reads files only inside the registered datasets and the warehouse, writes
    only into the warehouse, and never changes a registered database: each plan is checked before it runs.
    """
    from judgecal_dist.engine.sql.server import ServerSettings, start_server, stop_server
    from judgecal_dist.engine.sql.state import read_state

    engine = _engine(conf_path)
    folder = _folder(engine, warehouse)
    if stop:
        click.echo(stop_server(folder))
        return
    if show_status:
        state = read_state(folder)
        if state is None:
            raise Rejected(f"{folder}: no server runs for this warehouse (no server.json)")
        click.echo(" ".join(f"{k}={state[k]}" for k in sorted(state) if k != "token"))  # the token stays private
        return
    settings = ServerSettings(
        warehouse=str(folder),
        host=host or engine.sql_host,
        thrift_port=thrift_port or engine.sql_thrift_port,
        connect_port=connect_port or engine.sql_connect_port,
        master=engine.spark_master,
        metastore_uri=metastore_uri or engine.sql_metastore_uri,
        spark_conf=dict(engine.spark_conf),
    )
    state = start_server(settings, allow_remote=allow_remote, timeout=timeout)
    if allow_remote:
        click.echo(f"warning: serving {settings.host} without authentication: trusted networks only", err=True)
    click.echo(f"ready: {state['jdbc_url']} (JDBC: beeline -u {state['jdbc_url']})")
    click.echo(f"ready: {state['connect_url']} (Spark Connect: judgecal sql, SparkSession.builder.remote)")
    click.echo(f"pid {state['pid']}; logs {state['log']}; stop with: judgecal serve --stop{_where(warehouse, folder)}")


def _where(warehouse: str | None, folder: Path) -> str:
    """`` --warehouse FOLDER`` when the folder was named, else nothing: the default is found from anywhere."""
    return f" --warehouse {folder}" if warehouse else ""


@click.group()
def catalog() -> None:
    """The persistent catalog of `judgecal serve`: datasets and results roots as databases of tables.

    Through the running server of the warehouse (--warehouse, else the per-user one) when one runs, else on a
    local session over the same metastore.
    Tables and columns: docs/tables.md.
    """


@catalog.command("add")
@click.argument("url")
@click.option("--name", default=None, help="Database name (default: the URL's last folder, lower case).")
@connect_option
@warehouse_option
@conf_option
@guarded
def catalog_add(
    url: str, name: str | None, connect_url: str | None, warehouse: str | None, conf_path: Path | None
) -> None:
    """Register the dataset (verdicts, labels, judges, items, refused) or results root at URL as database NAME.

    A results root (one with history/) gives NAME.runs and one table per study with every run's summary rows.
    Adding the same URL again refreshes the tables (a dataset re-ingested there shows its new rows).
    """
    click.echo(register(url, name, _engine(conf_path), connect_url, warehouse))


def register(
    url: str, name: str | None, engine: Any, connect_url: str | None = None, warehouse: str | None = None
) -> str:
    """Add ``url`` to the catalog; one line saying what was registered (progress lines on stderr)."""
    import logging
    import time

    from judgecal_dist.engine.sql.catalog import add_to_catalog, check_entry
    from judgecal_dist.engine.sql.client import open_session

    log = logging.getLogger("judgecal_dist.engine.sql.catalog")
    url, name, _ = check_entry(url, name)  # a wrong URL or name is refused before any session starts
    began = time.monotonic()
    log.info("catalog add: opening the catalog's session")
    with open_session(engine, warehouse=warehouse, connect_url=connect_url, create=True, door="catalog") as session:
        log.info("catalog add: session open on %s (%.0f s)", session.where, time.monotonic() - began)
        session.grant(admin=True)
        entry = add_to_catalog(session.spark, url, name)
    return f"{entry.name}: {entry.kind} {entry.url}: tables {', '.join(entry.tables)}"


@catalog.command("list")
@format_option
@connect_option
@warehouse_option
@conf_option
@guarded
def catalog_list(fmt: str, connect_url: str | None, warehouse: str | None, conf_path: Path | None) -> None:
    """List the registered databases: name, kind, URL, tables."""
    from judgecal_dist.engine.sql.catalog import catalog_entries, entries_frame
    from judgecal_dist.engine.sql.client import NoCatalog, open_session

    try:
        with open_session(_engine(conf_path), warehouse=warehouse, connect_url=connect_url, door="catalog") as session:
            rows = entries_frame(catalog_entries(session.spark))
    except NoCatalog:
        rows = entries_frame([])  # no server and no catalog: nothing is registered, and no JVM is needed to say so
    click.echo(format_rows(rows, fmt))


@catalog.command("drop")
@click.argument("name")
@connect_option
@warehouse_option
@conf_option
@guarded
def catalog_drop(name: str, connect_url: str | None, warehouse: str | None, conf_path: Path | None) -> None:
    """Drop database NAME and its tables (only one judgecal registered; the data files stay)."""
    from judgecal_dist.engine.sql.catalog import drop_from_catalog, not_registered
    from judgecal_dist.engine.sql.client import NoCatalog, open_session

    try:
        with open_session(_engine(conf_path), warehouse=warehouse, connect_url=connect_url, door="catalog") as session:
            session.grant(admin=True)
            entry = drop_from_catalog(session.spark, name)
    except NoCatalog as err:
        raise InputError(not_registered(name, [])) from err
    click.echo(f"dropped {entry.name} ({entry.kind} {entry.url}; its files stay)")
