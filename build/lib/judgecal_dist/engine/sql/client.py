"""Where ``judgecal sql`` and ``judgecal catalog`` run: a running server over Spark Connect, else a local session.

A client of a running server starts no JVM: it opens a Spark Connect session (``sc://host:port``) and sends its
statements to the server's checker (:mod:`.guard_service`) before running them. Only when no server runs for the
warehouse does it start a local Spark session, with Hive support over the same catalog when it needs one.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from judgecal_dist.errors import InputError

__all__ = ["SqlSession", "open_session", "connect"]

log = logging.getLogger(__name__)


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
    """

    spark: Any
    guard_address: tuple[str, int] | None
    where: str

    def close(self) -> None:
        """Stop a Spark Connect session (a local session is the process's shared one and stays).

        An unstopped Connect client cleans up at interpreter exit by calling its server, and retries for minutes
        when that server has gone: the process would hang on exit.
        """
        if self.guard_address is not None:
            self.spark.stop()

    def __enter__(self) -> SqlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(url: str) -> SqlSession:
    """A Spark Connect session of the judgecal server at ``url`` (``sc://host:port``).

    Raises
    ------
    InputError
        Nothing answers at ``url``, or the server there is not a judgecal server (no statement checker).
    """
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
    spark = ConnectSession.builder.remote(url).create()
    guard_port = spark.conf.get(GUARD_PORT_KEY, None)
    if not guard_port:
        spark.stop()
        raise InputError(
            f"--connect {url}: not a judgecal server (no {GUARD_PORT_KEY}); judgecal sql checks every statement "
            "on the server's parser and cannot here: use `judgecal serve`"
        )
    # The parser expands ${env:...} before any plan exists: off in this session too (the server sets the default).
    spark.conf.set("spark.sql.variable.substitute", "false")
    return SqlSession(spark, (parts.hostname, int(guard_port)), url)


def open_session(engine: Any, *, connect_url: str | None = None, catalog: bool = True) -> SqlSession:
    """The server's session when one runs for the engine config's warehouse (or at ``connect_url``), else local.

    Parameters
    ----------
    engine : EngineConfig
    connect_url : str, optional
        ``sc://host:port`` of a server (its warehouse's state file is then not read).
    catalog : bool, default True
        A local session needs the persistent catalog (Hive support over the warehouse's metastore).
    """
    from judgecal_dist.engine.jobs.spark import get_session
    from judgecal_dist.engine.sql.server import ServerSettings, catalog_conf, running_server

    if connect_url is not None:
        return connect(connect_url)
    state = running_server(engine.sql_warehouse)
    if state is not None:
        return connect(str(state["connect_url"]))
    conf = dict(engine.spark_conf)
    from pyspark.sql import SparkSession

    if catalog and SparkSession.getActiveSession() is None:  # an active session keeps its (static) catalog
        settings = ServerSettings(warehouse=engine.sql_warehouse, metastore_uri=engine.sql_metastore_uri)
        conf |= catalog_conf(settings)
        settings.folder.mkdir(parents=True, exist_ok=True)
    log.debug("no judgecal server runs for %s: starting a local Spark session", engine.sql_warehouse)
    return SqlSession(get_session(master=engine.spark_master, conf=conf), None, "local")
