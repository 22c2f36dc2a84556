"""Catalogue cases: judgecal serve, catalog, and sql over the catalog (no server is started by these cases)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from judgecal_dist.cli import cli
from tests.cluster_support import free_port

ROOT = Path(__file__).resolve().parents[2]

#: Sockets held open while a case's command runs (a port in use); closed when the test process ends.
_HELD: list[socket.socket] = []


def _port_in_use(tmp: Path) -> list[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    _HELD.append(sock)
    port = sock.getsockname()[1]
    return ["serve", "--warehouse", str(tmp / "wh"), "--thrift-port", str(port), "--connect-port", str(free_port())]


def _stale_state(tmp: Path) -> list[str]:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp / "wh").mkdir()
    (tmp / "wh" / "server.json").write_text(json.dumps({"pid": int(gone.stdout), "status": "ready"}))
    return ["serve", "--warehouse", str(tmp / "wh")]


#: A warehouse holding a catalog and no server, made once (``judgecal catalog add`` in its own process).
_CATALOG: list[Path] = []


def _catalog() -> Path:
    """A warehouse whose catalog holds ``panel`` and where no server runs: ``judgecal sql`` reads it locally."""
    if not _CATALOG:
        root = Path(tempfile.mkdtemp(prefix="judgecal-catalog-"))
        atexit.register(shutil.rmtree, root, True)
        data = str(root / "panel")
        assert CliRunner().invoke(cli, ["generate", "--items", "40", "--judges", "3", data]).exit_code == 0
        added = subprocess.run(
            [sys.executable, "-m", "judgecal_dist.cli", "catalog", "add", data, "--warehouse", str(root / "wh")],
            capture_output=True,
            text=True,
            timeout=600,
            env=os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        )
        assert added.returncode == 0, added.stderr
        _CATALOG.append(root / "wh")
    return _CATALOG[0]


def _catalog_sql(query: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["sql", query, "--warehouse", str(_catalog())]


def _backtick(tmp: Path) -> list[str]:
    odd = tmp / "odd`name"
    assert CliRunner().invoke(cli, ["generate", "--items", "20", "--judges", "2", str(odd)]).exit_code == 0
    return ["catalog", "add", str(odd), "--warehouse", str(tmp / "wh")]


CASES: dict[str, Callable[[Path], list[str]]] = {
    "serve-non-loopback": lambda t: ["serve", "--warehouse", str(t / "wh"), "--host", "0.0.0.0"],
    "serve-port-in-use": _port_in_use,
    "serve-stale-state": _stale_state,
    "serve-stop-none": lambda t: ["serve", "--stop", "--warehouse", str(t / "wh")],
    "serve-connect-unreachable": lambda t: ["sql", "SELECT 1", "--connect", f"sc://127.0.0.1:{free_port()}"],
    "serve-catalog-write": _catalog_sql("DROP TABLE panel.verdicts"),
    "serve-catalog-path-read": _catalog_sql("SELECT * FROM text.`/etc/passwd`"),
    "serve-catalog-java-call": _catalog_sql("SELECT java_method('java.lang.System', 'getenv', 'PATH')"),
    "serve-no-server": lambda t: ["sql", "SELECT 1", "--warehouse", str(t / "wh")],
    "serve-catalog-out": lambda t: ["sql", "SELECT 1", "--warehouse", str(t / "wh"), "--out", str(t / "o")],
    "catalog-not-a-dataset": lambda t: ["catalog", "add", str(t), "--name", "x"],
    "catalog-bad-name": lambda t: ["catalog", "add", str(t), "--name", "Bad-Name"],
    "catalog-backtick": _backtick,
    "catalog-unknown-name": lambda t: ["catalog", "drop", "nope", "--warehouse", str(t / "wh")],
}
