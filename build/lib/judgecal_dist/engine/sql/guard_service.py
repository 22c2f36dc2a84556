"""The read-only check of ``judgecal sql`` for Spark Connect clients, answered by the server's own parser.

A Spark Connect client has no JVM, and a command sent over Connect runs as soon as the server parses it, so the
client cannot ask Spark to parse a statement without running it. The server process (:mod:`.server`) therefore
answers check requests on a small TCP endpoint beside its two Spark endpoints: the request carries the query
text and the client's views; the server splits it with Spark's lexer and checks each statement with
:class:`~judgecal_dist.engine.sql.guard.SqlGuard` on Spark's parsed plan, and answers with the statements or the
refusal. The endpoint only parses: it runs nothing, reads no table and writes nothing. Requests and answers are
one JSON object per line (never pickle: anyone who reaches the port may send one).
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Sequence
from typing import Any

from judgecal_dist.errors import InputError

__all__ = ["GuardServer", "check_remote"]

#: The largest request accepted (a query text; bigger ones are refused, not read into memory).
MAX_REQUEST_BYTES = 1 << 20
_TIMEOUT_S = 60.0


class _Handler(socketserver.StreamRequestHandler):
    timeout = _TIMEOUT_S
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
        try:
            if len(line) > MAX_REQUEST_BYTES:
                raise InputError(f"sql: the query text is longer than {MAX_REQUEST_BYTES} bytes")
            request = json.loads(line)
            answer: dict[str, Any] = {"statements": self.server.check(request)}
        except InputError as err:
            answer = {"error": str(err)}
        except Exception as err:  # noqa: BLE001 - any other failure is reported to the client, never a hang
            answer = {"failure": f"{type(err).__name__}: {err}"}
        self.wfile.write(json.dumps(answer).encode() + b"\n")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    spark: Any = None

    def check(self, request: dict[str, Any]) -> list[str]:
        from judgecal_dist.engine.sql.guard import SqlGuard, split_statements

        views = request.get("views")
        data_url = request.get("data_url")
        guard = SqlGuard(
            self.spark,
            views=None if views is None else [str(v) for v in views],
            data_url=None if data_url is None else str(data_url),
            allow_writes=bool(request.get("allow_writes", False)),
        )
        if request.get("out") is not None:
            guard.check_output(str(request["out"]))
        statements = split_statements(self.spark, str(request.get("query", "")))
        if not statements:
            raise InputError("sql: no statement in the query text")
        numbers: Sequence[int | None] = range(1, len(statements) + 1) if len(statements) > 1 else [None]
        first = request.get("number")
        for number, statement in zip(numbers, statements, strict=True):
            guard.check(statement, first if first is not None else number)
        return statements


class GuardServer:
    """The check endpoint of a server process: bound at construction (its port is known), serving after start."""

    def __init__(self, host: str) -> None:
        self._server = _Server((host, 0), _Handler, bind_and_activate=True)
        self.port = int(self._server.server_address[1])
        self._thread: threading.Thread | None = None

    def start(self, spark: Any) -> None:
        self._server.spark = spark
        self._thread = threading.Thread(target=self._server.serve_forever, name="judgecal-guard", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()


def check_remote(
    host: str,
    port: int,
    query: str,
    *,
    views: Sequence[str] | None,
    data_url: str | None,
    allow_writes: bool = False,
    out: str | None = None,
    number: int | None = None,
) -> list[str]:
    """Ask the server at ``host:port`` to split and check ``query``; return its statements.

    Raises
    ------
    InputError
        A statement is refused (the server's message, as :meth:`SqlGuard.check` words it) or the text holds none.
    """
    request = {
        "query": query,
        "views": None if views is None else list(views),
        "data_url": data_url,
        "allow_writes": allow_writes,
        "out": out,
        "number": number,
    }
    try:
        with socket.create_connection((host, port), timeout=_TIMEOUT_S) as sock:
            sock.sendall(json.dumps(request).encode() + b"\n")
            with sock.makefile("rb") as answer_file:
                answer = json.loads(answer_file.readline())
    except (OSError, ValueError) as err:
        raise InputError(f"sql: the server's statement check at {host}:{port} did not answer ({err})") from err
    if "error" in answer:
        raise InputError(str(answer["error"]))
    if "failure" in answer:
        raise InputError(f"sql: the server could not check the statements ({answer['failure']})")
    return [str(s) for s in answer["statements"]]
