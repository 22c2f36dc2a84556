"""Real processes on loopback for the cluster tests: a Ray head (``ray start --head``) and a fault-injecting S3
proxy in front of moto's server. Every process started here is stopped by its own process group or object."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@dataclass
class RayHead:
    """A Ray head on this machine: its GCS address (for drivers), its Jobs API URL and its session folder."""

    gcs: str
    dashboard: str
    temp_dir: Path
    pgid: int
    env: dict[str, str] = field(repr=False)

    def worker_pids(self, task_name: str | None = None) -> list[int]:
        """Pids of this head's workers (all, or those running ``task_name``: Ray's ``ray::<task>`` title)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if task_name is not None and not cmdline.startswith(f"ray::{task_name}"):
                    continue
                if os.getpgid(int(entry.name)) == self.pgid:
                    continue  # the head's own processes, stopped through their group
                # Workers get process groups of their own; their parent, the raylet, is in the head's group.
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if os.getpgid(ppid) == self.pgid:
                    found.append(int(entry.name))
            except (OSError, ProcessLookupError):
                continue
        return found

    def stop(self) -> None:
        """Stop the head's process group and its workers (each in a group of its own), remove its session folder."""
        for pid in self.worker_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.time() + wait
            while time.time() < deadline:
                try:
                    os.killpg(self.pgid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.2)
            else:
                continue
            break
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_ray_head(num_cpus: int = 2) -> RayHead:
    """``ray start --head --port 0 --include-dashboard=true`` on 127.0.0.1, in its own process group."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rh", dir="/tmp"))  # Ray's socket paths must stay short
    env = dict(os.environ)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "RAY_ADDRESS"):
        env.pop(key, None)
    # A loopback-only test cluster: Ray's token authentication is off (a real cluster keeps it on).
    env |= {
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": str(ROOT),
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    }
    cmd = [str(BIN / "ray"), "start", "--head", "--port", "0", "--num-cpus", str(num_cpus)]
    cmd += ["--include-dashboard=true", "--dashboard-host", "127.0.0.1", "--dashboard-port", "0"]
    cmd += ["--temp-dir", str(temp_dir), "--disable-usage-stats"]
    # Ray's fixed default ports (agent 52365, client 10001, ...) may be taken by another cluster on this machine.
    for flag in (
        "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port",
        "--metrics-export-port",
        "--runtime-env-agent-port",
        "--ray-client-server-port",
    ):
        cmd += [flag, str(free_port())]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True, cwd=temp_dir
    )
    pgid = proc.pid
    out, _ = proc.communicate(timeout=180)
    head = RayHead("", "", temp_dir, pgid, env)
    gcs = re.search(r"ray start --address='([^']+)'", out)
    dashboard = re.search(r"RAY_API_SERVER_ADDRESS='([^']+)'", out)
    if proc.returncode != 0 or not gcs or not dashboard:
        head.stop()
        raise RuntimeError(f"ray start failed ({proc.returncode}):\n{out[-3000:]}")
    head.gcs, head.dashboard = gcs.group(1), dashboard.group(1)
    return head


class FaultyS3Proxy:
    """An HTTP proxy on 127.0.0.1 that answers every ``every``-th request with a 500 or 503 S3 error instead of
    forwarding it to ``upstream`` (moto's server); all other requests pass through unchanged."""

    def __init__(self, upstream: str, every: int = 4) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.injected = 0
        self.forwarded = 0
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    n = proxy.injected + proxy.forwarded
                    fail = n % every == every - 1
                    if fail:
                        proxy.injected += 1
                    else:
                        proxy.forwarded += 1
                if fail:
                    status, code = (503, "SlowDown") if proxy.injected % 2 else (500, "InternalError")
                    payload = (
                        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                        f"<Message>injected</Message></Error>"
                    ).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(host, int(port), timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for key, value in resp.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
