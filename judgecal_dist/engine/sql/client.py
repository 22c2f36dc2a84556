"""Where ``judgecal sql`` and ``judgecal catalog`` run: a running server over Spark Connect, else a local session.

A client of a running server starts no JVM: it opens a Spark Connect session (``sc://host:port``) and sends its
statements to the server's checker (:mod:`.guard_service`) before running them. Only when no server runs for the
warehouse does it start a local Spark session, with Hive support over the same catalog when it needs one.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from judgecal_dist.errors import InputError, RunError, first_line

__all__ = ["NoCatalog", "SqlSession", "open_session", "connect", "server_failures"]

log = logging.getLogger(__name__)


class NoCatalog(InputError):
    """No server runs for the warehouse and it holds no catalog."""


@dataclass(frozen=True)
class SqlSession:
    """A session to run statements on, and where its statements are checked.

    Attributes
    ----------
    spark : SparkSession
        A Spark Connect session of a server, or a local classic session.
    guard_address : (str, int) or None
        The server's statement checker; None for a local session (its own parser checks).
    where : str
        ``sc://host:port`` or ``local``, for messages.
    token : str or None
        The server's token (from its 0600 state file): :meth:`grant` asks the server for ``--data``, ``--out``,
        ``--allow-writes`` or the catalog's rights with it. None: a local session, or a server whose state file
        this user cannot read (its clients read only the registered datasets).
    """

    spark: Any
    guard_address: tuple[str, int] | None
    where: str
    token: str | None = None

    def grant(
        self, *, data: str | None = None, out: str | None = None, writes: bool = False, admin: bool = False
    ) -> None:
        """Tell the server's check rule (:mod:`.access`) what this client may read and write beyond the
        registered datasets; nothing for a local session (its guard knows) or without a token."""
        from judgecal_dist.engine.sql.access import GRANT_KEY, grant_value

        if self.guard_address is not None and self.token is not None:
            value = grant_value(self.token, data=data, out=out, writes=writes, admin=admin)
            self.spark.conf.set(GRANT_KEY, value)

    def close(self) -> None:
        """Stop a Spark Connect session (a local session is the process's shared one and stays).

        An unstopped Connect client cleans up at interpreter exit by calling its server, and retries for minutes
        when that server has gone: the process would hang on exit.
        """
        if self.guard_address is not None:
            with warnings.catch_warnings(), contextlib.suppress(Exception):  # a gone server: nothing to release
                warnings.simplefilter("ignore")
                self.spark.stop()

    def __enter__(self) -> SqlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Seconds a Spark Connect endpoint has to complete its gRPC handshake (a port that is not Spark Connect, such as the
#: JDBC port, never does).
HANDSHAKE_TIMEOUT_S = 10.0


def connect(url: str, token: str | None = None) -> SqlSession:
    """A Spark Connect session of the judgecal server at ``url`` (``sc://host:port``).

    Every call is bounded: the gRPC handshake waits :data:`HANDSHAKE_TIMEOUT_S`, and a server that has gone (kill
    -9) fails the call after a few seconds of retries instead of pyspark's default of about ten minutes.

    Raises
    ------
    InputError
        Nothing answers at ``url``, what answers is not Spark Connect, or the server there is not a judgecal
        server (no statement checker).
    """
    import grpc
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from judgecal_dist.engine.sql.server import GUARD_PORT_KEY

    parts = urlsplit(url)
    if parts.scheme != "sc" or not parts.hostname or not parts.port:
        raise InputError(f"--connect {url}: expected sc://host:port")
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=3.0):
            pass
    except OSError as err:
        raise InputError(
            f"--connect {url}: no Spark Connect server answers ({err.strerror or err}); start one with `judgecal serve`"
        ) from err
    channel = grpc.insecure_channel(f"{parts.hostname}:{parts.port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=HANDSHAKE_TIMEOUT_S)
    except grpc.FutureTimeoutError as err:
        raise InputError(
            f"--connect {url}: {parts.hostname}:{parts.port} accepts connections but does not speak Spark Connect "
            f"(no gRPC handshake in {HANDSHAKE_TIMEOUT_S:.0f} s; the JDBC port?); `judgecal serve --status` prints "
            "the connect_url"
        ) from err
    finally:
        channel.close()
    spark = ConnectSession.builder.remote(url).create()
    # pyspark retries an unavailable server for about ten minutes: a few seconds here, then one line
    spark._client.set_retry_policies([DefaultPolicy(max_retries=4, max_backoff=2000)])  # noqa: SLF001
    try:
        guard_port = spark.conf.get(GUARD_PORT_KEY, None)
    except Exception as err:  # noqa: BLE001 - any failure of the first call: the server is not usable
        spark.stop()
        raise InputError(f"--connect {url}: the server did not answer ({first_line(err)})") from err
    if not guard_port:
        spark.stop()
        raise InputError(
            f"--connect {url}: not a judgecal server (no {GUARD_PORT_KEY}); judgecal sql checks every statement "
            "on the server's parser and cannot here: use `judgecal serve`"
        )
    # The parser expands ${env:...} before any plan exists: off in this session too (the server sets the default).
    spark.conf.set("spark.sql.variable.substitute", "false")
    return SqlSession(spark, (parts.hostname, int(guard_port)), url, token)


@contextlib.contextmanager
def server_failures(session: SqlSession) -> Iterator[None]:
    """A server that stops answering during a statement (killed, stopped) is one line, not a gRPC dump.

    Raises
    ------
    RunError
        The Spark Connect call failed for want of a server (after the bounded retries of :func:`connect`).
    """
    if session.guard_address is None:
        yield
        return
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
        try:
            yield
        except SparkConnectGrpcException as err:
            found = re.search(r"StatusCode\.(\w+)", str(err))
            if found is None or found.group(1) not in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"):
                raise
            raise RunError(
                f"sql: the server at {session.where} stopped answering ({found.group(1)}); "
                "`judgecal serve --status` says whether it runs"
            ) from err


def _quiet_query_errors() -> None:
    """Silence pyspark's own log of every failed query (a JSON record with the JVM stack trace, on stderr): the
    error reaches the user as one line; ``-v`` keeps the record."""
    verbose = logging.getLogger("judgecal_dist").isEnabledFor(logging.DEBUG)
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).disabled = not verbose


def open_session(
    engine: Any,
    *,
    warehouse: str | None = None,
    connect_url: str | None = None,
    catalog: bool = True,
    create: bool = False,
    door: str = "sql",
) -> SqlSession:
    """The server's session when one runs for the warehouse (or at ``connect_url``), else local.

    Parameters
    ----------
    engine : EngineConfig
    warehouse : str, optional
        ``--warehouse``; default :func:`~judgecal_dist.engine.sql.server.warehouse_folder` of the engine config.
    connect_url : str, optional
        ``sc://host:port`` of a server (its warehouse's state file is then not read).
    catalog : bool, default True
        The statements read the persistent catalog (no ``--data``): a local session gets Hive support over the
        warehouse's metastore.
    create : bool, default False
        With ``catalog``, a local session may create the catalog (``catalog add``). Otherwise a warehouse with
        no server and no catalog is refused: a local JVM would only find an empty catalog.
    door : str
        The command, for messages.

    Raises
    ------
    InputError
        No server runs and the warehouse holds no catalog (one line saying how to start a server), a stale or
        copied state file, or an unusable ``connect_url``.
    """
    from judgecal_dist.engine.jobs.spark import get_session
    from judgecal_dist.engine.sql.server import ServerSettings, catalog_conf, warehouse_folder
    from judgecal_dist.engine.sql.state import read_state, running_server

    _quiet_query_errors()
    folder = warehouse_folder(warehouse, engine.sql_warehouse)
    if connect_url is not None:
        known = read_state(folder) or {}  # the warehouse's own server: its token lets --data through
        return connect(connect_url, known.get("token") if known.get("connect_url") == connect_url else None)
    state = running_server(folder)
    if state is not None:
        return connect(str(state["connect_url"]), state.get("token"))
    if not catalog:
        return SqlSession(get_session(master=engine.spark_master, conf=dict(engine.spark_conf)), None, "local")
    holds_catalog = engine.sql_metastore_uri is not None or (folder / "metastore_db").is_dir()
    if not holds_catalog and not create:
        raise NoCatalog(
            f"{door}: no judgecal server runs for the warehouse {folder} and it holds no catalog; start one with "
            "`judgecal serve` (then `judgecal catalog add URL`), or query a dataset with --data URL"
        )
    from pyspark.sql import SparkSession

    conf = dict(engine.spark_conf)
    if SparkSession.getActiveSession() is None:  # an active session keeps its (static) catalog
        settings = ServerSettings(warehouse=str(folder), metastore_uri=engine.sql_metastore_uri)
        conf |= catalog_conf(settings)
        folder.mkdir(parents=True, exist_ok=True)
    log.info("%s: no judgecal server runs for %s: reading its catalog in a local Spark session", door, folder)
    return SqlSession(get_session(master=engine.spark_master, conf=conf), None, "local")
