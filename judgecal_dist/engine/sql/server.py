"""``judgecal serve``: one Spark driver serving the catalog over JDBC (Thrift) and Spark Connect, on loopback.

One process holds one SparkSession with Hive support (an embedded Derby metastore under the warehouse folder, or
an external Hive metastore), Spark Connect (``SparkConnectService.start``) and Spark's Thrift JDBC server
(``HiveThriftServer2.startWithContext``), so both endpoints share one catalog and one JVM: embedded Derby admits
one JVM only. Both endpoints start after the plan check of :mod:`.access` is in place, so no client session
exists without it. The same process answers statement checks for ``judgecal sql`` (:mod:`.guard_service`): a Spark
Connect client has no JVM, so the read-only check runs on the server's parser.

The warehouse folder is the user's one catalog: ``--warehouse``, else ``$JUDGECAL_WAREHOUSE``, else the engine
config's ``sql_warehouse``, else ``~/.judgecal/warehouse`` (:func:`warehouse_folder`), made absolute once, so
``judgecal sql``, ``catalog`` and ``serve --stop|--status`` find the server from any folder. Its layout::

    <warehouse>/server.json         state: pid, warehouse, endpoints, status (starting | ready); removed on a clean stop
    <warehouse>/server.lock         held (flock) by the running server for its whole life: one server per warehouse
    <warehouse>/logs/server.log     the driver's and Spark's log lines (one place)
    <warehouse>/metastore_db/       the embedded Derby metastore (absent with an external metastore URI)
    <warehouse>/tables/             Spark's warehouse directory (judgecal's own tables are external)

The server has no authentication: it is a trusted-network service. It binds 127.0.0.1 unless a non-loopback
address is asked for explicitly (``allow_remote``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from judgecal_dist.engine.sql.state import (
    LOCK_FILE,
    SERVER_MODULE,
    STATE_FILE,
    lock_held,
    pid_alive,
    read_state,
    remove_state,
    stale_message,
    take_lock,
    write_state,
)
from judgecal_dist.errors import InputError, RunError

__all__ = [
    "DEFAULT_WAREHOUSE",
    "WAREHOUSE_ENV",
    "LOG_FILE",
    "GUARD_PORT_KEY",
    "ServerSettings",
    "catalog_conf",
    "check_bind",
    "start_server",
    "stop_server",
    "warehouse_folder",
]

log = logging.getLogger(__name__)

#: The per-user catalog every command finds without options, and the environment variable that moves it.
DEFAULT_WAREHOUSE = "~/.judgecal/warehouse"
WAREHOUSE_ENV = "JUDGECAL_WAREHOUSE"
LOG_FILE = "logs/server.log"
#: The environment variable carrying the server process's settings (spark_conf may hold secrets: never argv).
_SETTINGS_ENV = "JUDGECAL_SERVER_SETTINGS"
#: The Spark setting through which a Spark Connect client finds the statement checker of a judgecal server.
GUARD_PORT_KEY = "spark.judgecal.guard.port"
#: Marker in the server process's command line (a pid reused by another program is not our server).


@dataclass(frozen=True)
class ServerSettings:
    """Where the server keeps its catalog and where it listens.

    Attributes
    ----------
    warehouse : str
        Local folder of the state file, the logs, the Derby metastore and Spark's warehouse directory.
    host : str
        Address both endpoints bind (127.0.0.1 by default).
    thrift_port, connect_port : int
        JDBC (HiveServer2 protocol) and Spark Connect (gRPC) ports.
    master : str
        Spark master of the server's driver.
    metastore_uri : str or None
        An external Hive metastore (``thrift://host:9083``) instead of the embedded Derby one.
    spark_conf : dict
        Further Spark settings (the engine config's ``spark_conf``).
    """

    warehouse: str
    host: str = "127.0.0.1"
    thrift_port: int = 10000
    connect_port: int = 15002
    master: str = "local[*]"
    metastore_uri: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return Path(self.warehouse).expanduser().resolve()


def warehouse_folder(given: str | None = None, configured: str | None = None) -> Path:
    """The absolute warehouse folder: ``given`` (``--warehouse``), ``$JUDGECAL_WAREHOUSE``, ``configured`` (the
    engine config's ``sql_warehouse``), else :data:`DEFAULT_WAREHOUSE`; a relative path is taken from the current
    folder, once, here."""
    raw = given or os.environ.get(WAREHOUSE_ENV) or configured or DEFAULT_WAREHOUSE
    return Path(raw).expanduser().resolve()


def catalog_conf(settings: ServerSettings) -> dict[str, str]:
    """Spark settings of a session over the persistent catalog (the server's, or a local fallback's)."""
    folder = settings.folder
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(folder / "tables"),
        # Derby writes derby.log into its system home, not into the caller's working directory.
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={folder}",
        # ${env:...} is expanded by the parser before any plan exists: off for every session of the server.
        "spark.sql.variable.substitute": "false",
    }
    if settings.metastore_uri:
        conf["spark.hadoop.hive.metastore.uris"] = settings.metastore_uri
    else:
        url = f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = url
    return conf


def _server_conf(settings: ServerSettings) -> dict[str, str]:
    return (
        dict(settings.spark_conf)
        | catalog_conf(settings)
        | {
            "spark.connect.grpc.binding.address": settings.host,
            "spark.connect.grpc.binding.port": str(settings.connect_port),
            "spark.hadoop.hive.server2.thrift.bind.host": settings.host,
            "spark.hadoop.hive.server2.thrift.port": str(settings.thrift_port),
            "spark.hadoop.hive.server2.transport.mode": "binary",
            "spark.driver.host": settings.host if _is_loopback(settings.host) else socket.gethostname(),
        }
    )


# -- accidents checked before anything starts ----------------------------------------------------------------------
def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def check_bind(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback ``host`` unless ``allow_remote``: the server has no authentication."""
    try:
        socket.gethostbyname(host)
    except OSError as err:
        raise InputError(f"--host {host}: cannot resolve it ({err})") from err
    if not _is_loopback(host) and not allow_remote:
        raise InputError(
            f"--host {host}: not a loopback address; the server has no authentication and serves every table to "
            "whoever reaches it: bind 127.0.0.1, or pass --allow-remote on a trusted network only"
        )


def _check_port_free(host: str, port: int, option: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as the servers themselves bind: a port left in TIME_WAIT by a stopped server is free, a listener is not
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((socket.gethostbyname(host), port))
        except OSError as err:
            raise InputError(
                f"{option} {port}: {host}:{port} is in use ({err.strerror}); pick another port with {option} "
                "or stop what holds it"
            ) from err


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


# -- state file and lock ------------------------------------------------------------------------------------------
# -- start and stop ------------------------------------------------------------------------------------------------
#: The server process's steps, as its state file names them, and the line `judgecal serve` prints for each.
_STEPS = {
    "python": "starting the server process (Python, pyspark)",
    "spark": "starting Spark (the JVM)",
    "metastore": "opening the Hive metastore",
    "thrift": "starting the JDBC endpoint",
}


def start_server(settings: ServerSettings, *, allow_remote: bool = False, timeout: float = 300.0) -> dict[str, Any]:
    """Start the server in the background and wait until both endpoints accept connections.

    One INFO line per step of the start (with the seconds since the command began); the state file records the
    same steps (``steps``: seconds since the server process started).

    Returns
    -------
    dict
        The state file's content (pid, ``jdbc_url``, ``connect_url``, ``log``).

    Raises
    ------
    InputError
        A non-loopback host without ``allow_remote``, a port in use, a server already running or starting for
        this warehouse (its lock is held), or a stale state file.
    RunError
        The server exited or did not become ready within ``timeout`` seconds (the last log line says why).
    """
    began = time.monotonic()
    check_bind(settings.host, allow_remote=allow_remote)
    folder = settings.folder
    settings = replace(settings, warehouse=str(folder))  # absolute once: the process starts in another folder
    if not lock_held(folder):  # refusals before the folder or its lock file is created (a held lock refuses below)
        if (state := read_state(folder)) is not None:
            raise InputError(stale_message(folder, state))
        _check_port_free(settings.host, settings.thrift_port, "--thrift-port")
        _check_port_free(settings.host, settings.connect_port, "--connect-port")
        if settings.thrift_port == settings.connect_port:
            raise InputError(f"--connect-port {settings.connect_port}: the same as --thrift-port; pick two ports")
    folder.mkdir(parents=True, exist_ok=True)
    lock = take_lock(folder)
    if lock is None:
        state = read_state(folder) or {}
        which = f"pid {state['pid']}, {state.get('jdbc_url') or 'starting'}" if "pid" in state else "starting"
        raise InputError(
            f"{folder / LOCK_FILE}: a server already runs for this warehouse ({which}); stop it first with "
            f"`judgecal serve --stop --warehouse {folder}`"
        )
    try:
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        log_path = folder / LOG_FILE
        with open(log_path, "ab") as log_file:
            proc = subprocess.Popen(
                # the warehouse on the command line marks the process as this warehouse's server; the settings
                # (spark_conf may hold secret keys) travel in the environment, readable by this user only
                [sys.executable, "-m", SERVER_MODULE, str(folder)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the starting shell does not reach the server
                cwd=folder,
                env=os.environ
                | {"PYTHONPATH": _package_path(), _SETTINGS_ENV: json.dumps(asdict(settings) | {"lock_fd": lock})},
                pass_fds=(lock,),  # the server holds the lock from here for its whole life
            )
    finally:
        os.close(lock)
    log.info("serve: %s", _STEPS["python"])
    shown = {"python"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RunError(
                f"the server exited with code {proc.returncode}: {_last_log_line(log_path)} (log: {log_path})"
            )
        state = read_state(folder)
        if state is not None:
            for step in state.get("steps", {}):
                if step in _STEPS and step not in shown:
                    shown.add(step)
                    log.info("serve: %s (%.0f s)", _STEPS[step], time.monotonic() - began)
        if (
            state is not None
            and state.get("status") == "ready"
            and _accepts(settings.host, settings.thrift_port)
            and _accepts(settings.host, settings.connect_port)
        ):
            log.info("serve: ready in %.0f s", time.monotonic() - began)
            return state
        time.sleep(0.25)
    _terminate(proc.pid, 10.0)
    remove_state(folder, proc.pid)
    raise RunError(f"the server was not ready after {timeout:.0f} s: {_last_log_line(log_path)} (log: {log_path})")


def stop_server(warehouse: str | Path, *, timeout: float = 60.0) -> str:
    """Stop the server of ``warehouse`` (SIGTERM, then SIGKILL after ``timeout``); clear a stale state file.

    Only the process holding this warehouse's lock, whose command line names this warehouse, is signalled: the
    state file of a copied warehouse names the original's server, which is left running.

    Returns
    -------
    str
        One line saying what was done.

    Raises
    ------
    InputError
        No state file: no server was started for this warehouse.
    """
    folder = Path(warehouse).expanduser().resolve()
    state = read_state(folder)
    if state is None:
        raise InputError(f"{folder / STATE_FILE}: not found: no server runs for this warehouse")
    pid = int(state.get("pid", -1))
    if not lock_held(folder) or state.get("warehouse") != str(folder) or not pid_alive(pid, folder):
        remove_state(folder, pid)
        named = state.get("warehouse")
        if named is not None and named != str(folder):
            return f"cleared the state file copied from {named} (its server, pid {pid}, was not touched)"
        return f"cleared the stale state file of pid {pid} (the server was not running)"
    _terminate(pid, timeout)
    remove_state(folder, pid)
    return f"stopped the server (pid {pid})"


def _terminate(pid: int, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # the server's session holds the driver and its JVM child (which owns the ports): wait for both
        if not _exists(pid) and not _group_exists(pid):
            return
        time.sleep(0.2)
    log.warning("server pid %d did not stop within %.0f s: killing it", pid, timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # its own session: the JVM child goes with it


def _exists(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reap our own child so it does not linger as a zombie
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _last_log_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip() and "\tat " not in ln]
    except OSError:
        return "no log"
    errors = [ln for ln in lines if "Error" in ln or "Exception" in ln]
    return (errors or lines or ["no log"])[-1].strip()


def _package_path() -> str:
    root = str(Path(__file__).resolve().parents[3])
    return os.pathsep.join(dict.fromkeys([root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))


# -- the server process --------------------------------------------------------------------------------------------
def _properties_line(key: str, value: str) -> str:
    """One line of a Java properties file, read by Spark as UTF-8 (``\\``, ``=``, ``:``, blanks and line breaks
    escaped)."""

    def escape(text: str, *, is_key: bool) -> str:
        out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        if is_key:
            out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
        elif out.startswith(" "):
            out = "\\" + out
        return out

    return f"{escape(key, is_key=True)}={escape(value, is_key=False)}"


def _start_spark(settings: ServerSettings, conf: Mapping[str, str]) -> Any:
    """The server's SparkSession, its settings read by spark-submit from a 0600 properties file, not argv.

    pyspark passes a session builder's settings to spark-submit as ``--conf key=value`` arguments, visible to
    every local user (``ps``); the engine config's ``spark_conf`` may hold an s3a secret key. The file is removed
    once the JVM has read it. The few session defaults set on the builder are the file's own values.
    """
    import shlex
    import tempfile

    from judgecal_dist.engine.jobs.spark import SESSION_DEFAULTS, get_session

    fd, path = tempfile.mkstemp(prefix="judgecal-serve-", suffix=".properties")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n".join(_properties_line(k, v) for k, v in (SESSION_DEFAULTS | dict(conf)).items()))
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {shlex.quote(path)} pyspark-shell"
        on_argv = {k: v for k, v in (SESSION_DEFAULTS | dict(conf)).items() if k in SESSION_DEFAULTS}
        return get_session(master=settings.master, app_name="judgecal-serve", conf=on_argv)
    finally:
        os.unlink(path)


def serve_forever(settings: ServerSettings) -> None:
    """Body of the server process: start Spark, both endpoints and the checker; stop cleanly on SIGTERM."""
    from judgecal_dist.engine.sql.access import install_check_rule
    from judgecal_dist.engine.sql.guard_service import GuardServer

    began = time.monotonic()
    folder = settings.folder
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    base = {"pid": os.getpid(), "host": settings.host, "warehouse": str(folder), "log": str(folder / LOG_FILE)}
    steps: dict[str, float] = {}

    def step(name: str) -> None:
        steps[name] = round(time.monotonic() - began, 1)
        write_state(folder, base | {"status": "starting", "steps": steps})
        log.info("judgecal server: %s", _STEPS[name])

    step("spark")
    guard = GuardServer(settings.host)
    spark = _start_spark(settings, _server_conf(settings) | {GUARD_PORT_KEY: str(guard.port)})
    step("metastore")
    # Spark opens the metastore (Derby: creating its schema on first use) on the first catalog call: here, not
    # in the first client's call
    spark.sql("SHOW DATABASES").collect()
    # every JDBC and Connect session opened from here on checks its plans: reads only in the registered datasets
    # (and what a token-bearing judgecal client was granted), never a write into them
    token = secrets.token_urlsafe(32)
    install_check_rule(spark, token, str(folder / "tables"))
    step("thrift")
    jvm = spark._jvm  # noqa: SLF001 - the Thrift server starts on the running context through py4j
    assert jvm is not None
    jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext()  # noqa: SLF001
    )
    # Spark Connect starts here rather than as a plugin with the context: a plugin listens before the check rule
    # exists, and a session opened in that window would never be checked
    connect_service = jvm.org.apache.spark.sql.connect.service.SparkConnectService
    connect_service.start(spark.sparkContext._jsc.sc())  # noqa: SLF001
    guard.start(spark)
    host = settings.host
    steps["ready"] = round(time.monotonic() - began, 1)
    ready = base | {
        "status": "ready",
        "steps": steps,
        "jdbc_url": f"jdbc:hive2://{host}:{settings.thrift_port}",
        "connect_url": f"sc://{host}:{settings.connect_port}",
        "thrift_port": settings.thrift_port,
        "connect_port": settings.connect_port,
        "guard_port": guard.port,
        "metastore": settings.metastore_uri or str(folder / "metastore_db"),
        "token": token,  # the state file is 0600: only this user's judgecal clients read it
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_state(folder, ready)
    log.info("judgecal server ready: %s %s", ready["jdbc_url"], ready["connect_url"])
    try:
        while not stop.wait(1.0):
            pass
    finally:
        guard.shutdown()
        none = jvm.scala.Option.empty()
        connect_service.stop(none, none)
        spark.stop()
        remove_state(folder, os.getpid())
        log.info("judgecal server stopped")


def _main() -> None:
    """The process :func:`start_server` spawns: settings from the environment, the warehouse's lock inherited."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    values = json.loads(os.environ.pop(_SETTINGS_ENV))
    values.pop("lock_fd")  # held open (never closed) for the process's life: the kernel drops it at exit
    serve_forever(ServerSettings(**values))


if __name__ == "__main__":
    _main()
