"""The server's state file and lock in its warehouse folder: which server runs there, whether it is alive, and
the refusals of a stale or copied state (:mod:`.server` starts and stops it; clients read it)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from judgecal_dist.errors import InputError

__all__ = [
    "STATE_FILE",
    "LOCK_FILE",
    "SERVER_MODULE",
    "read_state",
    "write_state",
    "take_lock",
    "lock_held",
    "pid_alive",
    "running_server",
    "stale_message",
    "remove_state",
]

STATE_FILE = "server.json"
LOCK_FILE = "server.lock"
#: The server process's module (``python -m``): how a live pid is told from a reused one.
SERVER_MODULE = "judgecal_dist.engine.sql.server"


def read_state(warehouse: str | Path) -> dict[str, Any] | None:
    """The state file's content, or None when there is none (a truncated file counts as none)."""
    path = Path(warehouse).expanduser() / STATE_FILE
    try:
        return dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, OSError):
        return None


def write_state(folder: Path, state: Mapping[str, Any]) -> None:
    """Write the state file whole (0600: it holds the clients' token), replacing the old one at once."""
    tmp = folder / f".{STATE_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(dict(state), indent=2, sort_keys=True))
    os.chmod(tmp, 0o600)
    tmp.replace(folder / STATE_FILE)  # a reader never sees half a state file


def take_lock(folder: Path) -> int | None:
    """An open descriptor holding the warehouse's lock, or None when a server (starting or running) holds it.

    The lock is ``flock`` on ``server.lock``: the kernel releases it when its last holder exits, kill -9 included,
    so it never goes stale; a copied warehouse's lock file is not locked.
    """
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def lock_held(folder: Path) -> bool:
    """True when a server process holds the lock of ``folder`` (no lock file: none ever ran there)."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return False


def pid_alive(pid: int, folder: Path) -> bool:
    """True when ``pid`` runs and is the judgecal server of ``folder`` (a reused pid, or the server of the
    warehouse this one was copied from, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: not ours
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return False
        return SERVER_MODULE in args and str(folder) in args
    return True


def running_server(warehouse: str | Path) -> dict[str, Any] | None:
    """The state of the server of ``warehouse`` when it runs and is ready; None when none runs.

    Raises
    ------
    InputError
        A state file whose process is gone or that names another warehouse (a stale file or a copied folder:
        ``judgecal serve --stop`` clears it), or a server still starting.
    """
    folder = Path(warehouse).expanduser().resolve()
    state = read_state(folder)
    if state is None:
        return None
    if state.get("warehouse") != str(folder) or not pid_alive(int(state.get("pid", -1)), folder):
        raise InputError(stale_message(folder, state))
    if state.get("status") != "ready":
        raise InputError(
            f"{folder / STATE_FILE}: the server (pid {state.get('pid')}) is still starting; wait for "
            "`judgecal serve` to report it ready"
        )
    return state


def stale_message(folder: Path, state: Mapping[str, Any]) -> str:
    """The one-line refusal of a state file whose server is gone or that names another warehouse."""
    named = state.get("warehouse")
    if named is not None and named != str(folder):
        return (
            f"{folder / STATE_FILE}: the state file names another warehouse ({named}): a copied folder; no server "
            f"runs for this one; run `judgecal serve --stop --warehouse {folder}` to clear it"
        )
    return (
        f"{folder / STATE_FILE}: stale state file: pid {state.get('pid')} is not running (the server "
        "died without a clean stop); run `judgecal serve --stop` to clear it"
    )


def remove_state(folder: Path, pid: int) -> None:
    """Remove the state file when ``pid`` wrote it."""
    state = read_state(folder)
    if state is not None and int(state.get("pid", -1)) == pid:  # only the file we (that pid) wrote
        (folder / STATE_FILE).unlink(missing_ok=True)
