"""What the SQL-server test modules share: the real ``beeline``, the CLI in process, and one ``judgecal serve``
started on free ports over a warehouse and stopped (``serve --stop``) whatever the tests did."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from judgecal_dist.cli import cli
from tests.cluster_support import free_port


def beeline() -> str:
    """The ``beeline`` script that ships with pyspark (the JDBC client users run)."""
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "beeline")


def invoke(*argv: str) -> str:
    """``judgecal ARGV`` in process; asserts exit 0 and returns stdout (log lines go to stderr)."""
    result = CliRunner().invoke(cli, list(argv))
    assert result.exit_code == 0, result.output
    return result.stdout


def start(server: dict[str, Any]) -> None:
    """``judgecal serve`` on the server's warehouse and ports; it prints its JDBC URL once ready."""
    output = invoke(
        "serve",
        "--warehouse",
        server["warehouse"],
        "--thrift-port",
        str(server["thrift"]),
        "--connect-port",
        str(server["connect"]),
    )
    assert f"ready: jdbc:hive2://127.0.0.1:{server['thrift']}" in output


@contextlib.contextmanager
def serving(warehouse: Path, **extra: Any) -> Iterator[dict[str, Any]]:
    """A started server (warehouse, thrift and connect ports, plus ``extra``), stopped on exit."""
    server = {"warehouse": str(warehouse), "thrift": free_port(), "connect": free_port(), **extra}
    start(server)
    try:
        yield server
    finally:
        CliRunner().invoke(cli, ["serve", "--stop", "--warehouse", server["warehouse"]])
