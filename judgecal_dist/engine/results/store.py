"""Results through fsspec: one run folder per (study, run id), atomic commits, resume, manifest.

Layout (ARCHITECTURE.md, results contract)::

    <output>/<study>/<run_id>/
        manifest.json            config, versions, git sha, input fingerprints, config and input digests (the run's
                                 identity), status (running, succeeded, failed + error), times; never credentials
        replicates/part-<seed>.parquet   Parquet metadata: judgecal.seed and the run's digests
        replicates/_rejected/    parts that failed verification on resume, set aside (never deleted)
        summary.parquet, summary.json, report.md, figures/*.png, model/*.json
        _SUCCESS                 written last, once; a reader trusts a run only with it
        _LEASE.json              while an attempt writes: who (host, pid, attempt id) and its last heartbeat

Every file is written under ``_tmp/<attempt>/`` with a unique name and then moved into place, so no reader ever
sees half a file; only the lease holder's final commit removes ``_tmp/``. On object stores the move is a
server-side copy of a complete object; folders are never made there (s3fs's ``makedirs`` creates buckets). A
rerun of the same run id lists ``replicates/`` and skips the seeds whose parts decode and record their own seed
and this run's identity (:meth:`RunStore.verified_seeds`); any other part is set aside and recomputed.

Writers that make a whole folder themselves (Spark jobs, pyarrow datasets) write into a staging folder
(:meth:`RunStore.stage`) that is then promoted file by file (:meth:`RunStore.promote`): object stores have no
folder to rename, and a writer's leftovers never reach the results.

Two runs of the same run id cannot corrupt each other: the first write of an attempt takes the lease. A live
lease of another attempt (another host with a heartbeat younger than ``lease_ttl``, or a live process on this
host) makes the second attempt fail at once with :class:`RunConflict`; a dead holder's lease (its process is gone,
or its heartbeat expired) is taken over, so a rerun after a crash resumes. Object stores offer no portable
create-if-absent, so the lease is written, read back after a short pause and checked again before every commit of
a result file: of two attempts that raced for it, the one that lost the lease stops before ``_SUCCESS``. An attempt
that finds ``_SUCCESS`` already committed writes nothing (runs are deterministic: the committed results are its
results too). Transient object-store errors are retried (:func:`~judgecal_dist.io.filesystem.retry_transient`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import logging
import os
import platform
import re
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from judgecal_dist.errors import InputError, RunError
from judgecal_dist.io.filesystem import has_directories, open_fs, require_regular_file, retry_transient
from judgecal_dist.io.records import to_json
from judgecal_dist.io.schema import SUCCESS

__all__ = ["RunStore", "RunConflict", "SUCCESS", "LEASE", "REJECTED", "is_remote", "progress_line"]

log = logging.getLogger(__name__)

T = TypeVar("T")

LEASE = "_LEASE.json"
#: Seconds without a heartbeat after which another host's lease counts as abandoned.
LEASE_TTL_S = 600.0
#: Pause between writing the lease and reading it back (two attempts racing for it both see the winner).
LEASE_SETTLE_S = 0.2
_PART = re.compile(r"part-(\d+)\.parquet")
#: Where parts that fail verification on resume are moved (under ``replicates/``), never deleted.
REJECTED = "_rejected"
#: Parquet schema metadata of a replicate part: its seed, and ``judgecal.<key>`` for each key of the run identity.
PART_META_PREFIX = "judgecal."
PART_SEED = "judgecal.seed"


def _part_name(seed: int) -> str:
    return f"replicates/part-{int(seed)}.parquet"


class RunConflict(RunError):
    """Another live attempt is writing the same run (or took the lease over from this one)."""


def is_remote(url: str) -> bool:
    """True for URLs with a non-local protocol (``s3://``, ``gs://``, ...)."""
    return "://" in url and not url.startswith("file://")


class RunStore:
    """Reads and writes one run folder through fsspec.

    Parameters
    ----------
    url : str
        The run folder, ``<output>/<study>/<run_id>`` (local path, ``file://`` or ``s3://``).
    storage_options : dict, optional
        Passed to fsspec (e.g. ``{"client_kwargs": {"endpoint_url": ...}}``); never written anywhere.
    lease_ttl : float
        Seconds without a heartbeat after which another host's lease is taken over.
    identity : dict, optional
        The run's identity (``config_digest``, ``input_digest``), recorded in every replicate part and checked on
        resume.

    Attributes
    ----------
    attempt : str
        This writer's unique attempt id (its temporaries live under ``_tmp/<attempt>/``).
    """

    def __init__(
        self,
        url: str,
        *,
        storage_options: dict[str, Any] | None = None,
        lease_ttl: float = LEASE_TTL_S,
        identity: dict[str, str] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.fs, self.path = open_fs(self.url, storage_options)
        self.path = self.path.rstrip("/")
        self.lease_ttl = lease_ttl
        self.identity = dict(identity or {})
        self.attempt = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._lease_at: float | None = None  # monotonic time of our last lease write; None = not held
        self._complete = False  # another attempt committed _SUCCESS: this one writes nothing

    # -- paths -----------------------------------------------------------------------------------------------
    def _p(self, name: str) -> str:
        return f"{self.path}/{name}"

    def url_of(self, name: str) -> str:
        """The URL of a file in the run folder (for messages and reports)."""
        return f"{self.url}/{name}"

    # -- atomic writes ---------------------------------------------------------------------------------------
    def _retry(self, func: Callable[[], T], name: str) -> T:
        return retry_transient(func, what=self.url_of(name))

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write ``data`` to ``name`` atomically: a unique temporary object first, then a move.

        The first write takes the run's lease; result files (all but replicate parts, which are deterministic and
        idempotent) are written only while the lease is still ours; nothing is written once ``_SUCCESS`` exists.
        """
        self._ensure_lease(verify=not name.startswith("replicates/"))
        if self._complete:
            log.debug("%s: run already committed by another attempt; %s not rewritten", self.url, name)
            return
        self._put(name, data)

    def _put(self, name: str, data: bytes) -> None:
        target = self._p(name)
        tmp_dir = self._p(f"_tmp/{self.attempt}")

        def put() -> None:
            tmp = f"{tmp_dir}/{uuid.uuid4().hex}-{name.replace('/', '_')}"  # fresh on every retry
            self._makedirs(tmp_dir)
            with self.fs.open(tmp, "wb") as fh:
                fh.write(data)
            self._makedirs(target.rsplit("/", 1)[0])
            self.fs.mv(tmp, target)

        try:
            self._retry(put, name)
        except OSError as err:
            raise RunError(f"{self.url_of(name)}: could not commit ({err})") from err
        self.fs.invalidate_cache(self.path)

    def _makedirs(self, folder: str) -> None:
        # Object stores need no folders, and s3fs's makedirs would create a missing bucket: never call it there.
        if has_directories(self.fs):
            self.fs.makedirs(folder, exist_ok=True)

    # -- the lease -------------------------------------------------------------------------------------------
    def lease_info(self) -> dict[str, Any] | None:
        """The current lease (attempt, host, pid, started, heartbeat), or None when no attempt holds one."""
        self.fs.invalidate_cache(self.path)
        try:
            raw = self._retry(lambda: self.fs.cat_file(self._p(LEASE)), LEASE)
        except FileNotFoundError:
            return None
        try:
            return json.loads(raw)
        except ValueError:  # a torn or foreign file: treat as no lease (it is overwritten by the next holder)
            return None

    def lease_alive(self, lease: dict[str, Any]) -> bool:
        """Whether ``lease``'s holder may still be writing: a live process on this host, or a fresh heartbeat."""
        if lease.get("host") == platform.node():
            return _pid_alive(int(lease.get("pid", -1)))
        age = time.time() - float(lease.get("heartbeat", 0))
        return age < self.lease_ttl

    def _write_lease(self, started: float | None = None) -> None:
        now = time.time()
        doc = {
            "attempt": self.attempt,
            "host": platform.node(),
            "pid": os.getpid(),
            "started": started or now,
            "heartbeat": now,
        }
        self._put(LEASE, json.dumps(doc).encode())
        self._lease_at = time.monotonic()

    def _ensure_lease(self, *, verify: bool) -> None:
        if self._complete:
            return
        if self._lease_at is None:
            self._acquire_lease()
            return
        stale = time.monotonic() - self._lease_at > self.lease_ttl / 4
        if verify or stale:
            lease = self.lease_info()
            if lease is None or lease.get("attempt") != self.attempt:
                raise RunConflict(f"{self.url}: lost the run's lease to {_describe(lease)}; this attempt stops")
            if stale:
                self._write_lease(lease.get("started"))

    def _acquire_lease(self) -> None:
        held = self.lease_info()
        if held is not None and held.get("attempt") != self.attempt:
            # A holder in this process is an earlier run that stopped without releasing (e.g. a failed replicate).
            if held.get("pid") != os.getpid() and self.lease_alive(held):
                raise RunConflict(
                    f"{self.url}: another attempt is writing this run ({_describe(held)}); wait for it, or remove "
                    f"{self.url_of(LEASE)} if that process is gone"
                )
            log.info("%s: taking over the lease of a stopped attempt (%s)", self.url, _describe(held))
            with contextlib.suppress(Exception):  # its half-written temporaries are garbage now
                self.fs.rm(self._p(f"_tmp/{held.get('attempt')}"), recursive=True)
        self._write_lease()
        time.sleep(LEASE_SETTLE_S)
        mine = self.lease_info()
        if mine is None or mine.get("attempt") != self.attempt:
            self._lease_at = None
            raise RunConflict(f"{self.url}: another attempt took the run's lease at the same time ({_describe(mine)})")
        atexit.register(self._release_lease)
        if self.exists(SUCCESS):
            self._complete = True
            log.info("%s: already committed by another attempt; this attempt writes nothing", self.url)

    def _release_lease(self) -> None:
        if self._lease_at is None:
            return
        with contextlib.suppress(Exception):  # best effort: a dead holder's lease is taken over anyway
            lease = self.lease_info()
            if lease is not None and lease.get("attempt") == self.attempt:
                self.fs.rm(self._p(LEASE))
        self._lease_at = None
        atexit.unregister(self._release_lease)

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode("utf-8"))

    def write_json(self, name: str, obj: Any) -> None:
        self.write_text(name, to_json(obj) + "\n")

    def write_table(self, name: str, table: pd.DataFrame) -> None:
        buf = io.BytesIO()
        table.to_parquet(buf, index=False)
        self.write_bytes(name, buf.getvalue())

    # -- replicates and resume -------------------------------------------------------------------------------
    def commit_part(self, seed: int, table: pd.DataFrame) -> None:
        """Commit one finished replicate as ``replicates/part-<seed>.parquet`` (never lost once written).

        The part's Parquet schema metadata records its seed and the run's identity (:attr:`identity`), so a resume
        can tell it from another seed's or another run's rows (:meth:`verified_seeds`).
        """
        stamp = {PART_SEED: str(int(seed))} | {f"{PART_META_PREFIX}{k}": str(v) for k, v in self.identity.items()}
        arrow = pa.Table.from_pandas(table, preserve_index=False)
        arrow = arrow.replace_schema_metadata(
            (arrow.schema.metadata or {}) | {k.encode(): v.encode() for k, v in stamp.items()}
        )
        buf = pa.BufferOutputStream()
        pq.write_table(arrow, buf)
        self.write_bytes(f"replicates/part-{int(seed)}.parquet", buf.getvalue().to_pybytes())

    def finished_seeds(self) -> set[int]:
        """Seeds whose part is already committed, by name only (status reports; resume uses verified_seeds)."""
        return set(self.part_stamps())

    def part_stamps(self) -> dict[int, float]:
        """Committed seeds and their commit times (POSIX seconds), for resume and progress reports."""
        return {seed: _stamp(entry) for seed, entry in self._part_entries()[0].items()}

    def _part_entries(self) -> tuple[dict[int, dict[str, Any]], list[str]]:
        """``replicates/`` listed: part entries by seed, and the names of files that are not parts."""
        folder = self._p("replicates")

        def listing() -> list[dict[str, Any]]:
            self.fs.invalidate_cache(folder)
            return self.fs.ls(folder, detail=True) if self.fs.exists(folder) else []

        parts, foreign = {}, []
        for entry in self._retry(listing, "replicates/"):
            base = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            match = _PART.fullmatch(base)
            if match and entry.get("type") != "directory":
                parts[int(match.group(1))] = entry
            elif base != REJECTED:
                foreign.append(base)
        return parts, foreign

    def verified_seeds(self) -> set[int]:
        """Seeds whose committed part can be trusted on resume; every other part is set aside, to be recomputed.

        A part is trusted when it decodes completely and its metadata records its own seed and this run's
        :attr:`identity`. An unreadable part (truncated, corrupt) or one that records another seed or another run
        is named in a warning and moved to ``replicates/_rejected/`` (never deleted). Files in ``replicates/`` that
        are not parts are named in a warning and left alone.

        Notes
        -----
        Each part is read once in full (a footer check alone would miss a corrupt page); the cost on resume is
        measured by ``benchmarks/resume_verify.py``.
        """
        parts, foreign = self._part_entries()
        for name in foreign:
            log.warning("%s: not a replicate part; ignored and left as is", self.url_of(f"replicates/{name}"))
        trusted = set()
        for seed in sorted(parts):
            problem = self._part_problem(seed)
            if problem is None:
                trusted.add(seed)
                continue
            aside = self._set_aside(seed)
            log.warning("%s: %s; set aside as %s and recomputed", self.url_of(_part_name(seed)), problem, aside)
        return trusted

    def _part_problem(self, seed: int) -> str | None:
        """Why the committed part of ``seed`` cannot be trusted, or None."""
        try:
            parquet = pq.ParquetFile(io.BytesIO(self.read_bytes(_part_name(seed))))
            parquet.read()  # decodes every page: a corrupt page fails here, not in the summary
        except (OSError, ValueError, pa.ArrowException) as err:
            return f"unreadable ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
        meta = {k.decode(): v.decode() for k, v in (parquet.schema_arrow.metadata or {}).items()}
        found = {PART_SEED: str(seed)} | {f"{PART_META_PREFIX}{k}": str(v) for k, v in self.identity.items()}
        wrong = {key: meta.get(key) for key, value in found.items() if meta.get(key) != value}
        if wrong:
            said = ", ".join(f"{key.removeprefix(PART_META_PREFIX)}={value}" for key, value in wrong.items())
            want = ", ".join(f"{key.removeprefix(PART_META_PREFIX)}={found[key]}" for key in wrong)
            return f"records {said}, not {want}"
        return None

    def _set_aside(self, seed: int) -> str:
        """Move a rejected part to ``replicates/_rejected/`` under a unique name; return that name."""
        self._ensure_lease(verify=False)
        aside = f"replicates/{REJECTED}/part-{seed}.{self.attempt}.parquet"
        self._makedirs(self._p(f"replicates/{REJECTED}"))
        try:
            self._retry(lambda: self.fs.mv(self._p(_part_name(seed)), self._p(aside)), _part_name(seed))
        except OSError as err:
            raise RunError(f"{self.url_of(_part_name(seed))}: could not set the part aside ({err})") from err
        self.fs.invalidate_cache(self.path)
        return self.url_of(aside)

    def read_parts(self, seeds: Iterable[int] | None = None) -> pd.DataFrame:
        """All committed replicate tables, concatenated in seed order."""
        wanted = sorted(self.finished_seeds() if seeds is None else seeds)
        frames = []
        for seed in wanted:
            try:
                frames.append(pd.read_parquet(io.BytesIO(self.read_bytes(_part_name(seed)))))
            except (OSError, ValueError, pa.ArrowException) as err:
                raise RunError(
                    f"{self.url_of(_part_name(seed))}: unreadable ({type(err).__name__}); rerun the same run id: "
                    "the part is then set aside and recomputed"
                ) from err
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    # -- reading ---------------------------------------------------------------------------------------------
    def exists(self, name: str) -> bool:
        self.fs.invalidate_cache(self.path)
        return self._retry(lambda: self.fs.exists(self._p(name)), name)

    def read_bytes(self, name: str, *, max_bytes: int | None = None) -> bytes:
        url = self.url_of(name)  # a device, fifo or folder in its place is refused unread (require_regular_file)
        try:
            self._retry(lambda: require_regular_file(self.fs, self._p(name), url, max_bytes=max_bytes), name)
            return self._retry(lambda: self.fs.cat_file(self._p(name)), name)
        except FileNotFoundError as err:
            raise InputError(f"{url}: not found") from err

    def read_json(self, name: str) -> Any:
        return json.loads(self.read_bytes(name).decode("utf-8"))

    def read_table(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(self.read_bytes(name)))

    # -- completion ------------------------------------------------------------------------------------------
    @property
    def succeeded(self) -> bool:
        """True when the run committed ``_SUCCESS``."""
        return self.exists(SUCCESS)

    def commit_success(self) -> None:
        """Write ``_SUCCESS`` (last, once), remove the temporary folder and release the lease."""
        self._ensure_lease(verify=True)
        if not self._complete and self.exists(SUCCESS):
            self._complete = True  # committed by an earlier attempt that held the lease before us
        if self._complete:
            log.info("%s: %s already present; not written again", self.url, SUCCESS)
        else:
            self._put(SUCCESS, b"")
        # We hold the lease: every other attempt's temporaries are garbage (a racer that lost the lease stops).
        tmp = self._p("_tmp")
        if self.fs.exists(tmp):
            with contextlib.suppress(FileNotFoundError):  # object stores: an empty prefix vanishes by itself
                self.fs.rm(tmp, recursive=True)
        self._release_lease()

    def require_success(self) -> None:
        """Raise unless the run is complete: a reader trusts a run only with ``_SUCCESS``."""
        if not self.succeeded:
            raise InputError(f"{self.url}: no {SUCCESS}: the run is unfinished or failed (rerun the same run id)")

    # -- staging for writers of whole folders (Spark, pyarrow datasets) ------------------------------------------
    def stage(self, name: str) -> str:
        """A fresh, empty staging folder for a writer that makes a folder of files itself (Spark, pyarrow).

        The folder lies under this attempt's ``_tmp/`` (removed by :meth:`commit_success` and :meth:`abandon`);
        staging takes the run's lease, so two writers never stage into one folder's results at once.

        Parameters
        ----------
        name : str
            What will be promoted (``items``); only used to name the staging folder.

        Returns
        -------
        str
            The staging folder's URL (with the protocol; :meth:`promote` and :meth:`discard` take it back).
        """
        self._ensure_lease(verify=False)
        return self.url_of(f"_tmp/{self.attempt}/stage-{uuid.uuid4().hex[:12]}/{name.strip('/')}")

    def _staged_path(self, staged_url: str) -> str:
        if not staged_url.startswith(self.url_of(f"_tmp/{self.attempt}/")):
            raise ValueError(f"{staged_url}: not a staging folder of this attempt ({self.url})")
        return self._p(staged_url[len(self.url) + 1 :])

    def staged_files(self, staged_url: str) -> list[str]:
        """The data files of a staging folder, relative to it and sorted.

        Bookkeeping a writer leaves beside its data (names starting with ``_`` or ``.`` in any path component,
        such as Spark's ``_SUCCESS`` and ``.crc`` checksums) is not data and is left out.
        """
        root = self._staged_path(staged_url)
        self.fs.invalidate_cache(root)
        found = self._retry(lambda: self.fs.find(root) if self.fs.exists(root) else [], staged_url)
        names = [f[len(root) + 1 :] for f in found if f.startswith(root + "/")]
        return sorted(n for n in names if not any(part.startswith(("_", ".")) for part in n.split("/")))

    def promote(self, staged_url: str, name: str, files: Iterable[str] | None = None) -> list[str]:
        """Move the files of a staging folder to ``<name>/<relative path>``, object by object.

        A recursive move of a folder is not portable (s3fs has no folder to move); moving each object is a
        server-side copy of a complete object on object stores and a rename on local disks. Only the given
        ``files`` (default: :meth:`staged_files`) are moved, so a writer that reports what it committed (a Spark
        job's successful tasks) never promotes the leftovers of a failed task.

        Returns
        -------
        list of str
            The promoted names, relative to the run folder (``items/dataset=x/part-0.parquet``).
        """
        self._ensure_lease(verify=True)
        root = self._staged_path(staged_url)
        chosen = self.staged_files(staged_url) if files is None else sorted(files)
        promoted = []
        for rel in chosen:
            target = f"{name.strip('/')}/{rel}"

            def move(src: str = f"{root}/{rel}", dst: str = self._p(target)) -> None:
                self._makedirs(dst.rsplit("/", 1)[0])
                self.fs.mv(src, dst)

            try:
                self._retry(move, target)
            except OSError as err:
                raise RunError(f"{self.url_of(target)}: could not promote ({err})") from err
            promoted.append(target)
        self.fs.invalidate_cache(self.path)
        return promoted

    def discard(self, staged_url: str) -> None:
        """Remove a staging folder and everything in it (it holds only what this attempt wrote)."""
        root = self._staged_path(staged_url)
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(root, recursive=True)
        self.fs.invalidate_cache(self.path)

    def list_files(self) -> list[str]:
        """Every file under the folder, relative to it and sorted (empty when the folder does not exist)."""
        self.fs.invalidate_cache(self.path)
        found = self._retry(lambda: self.fs.find(self.path) if self.fs.exists(self.path) else [], "")
        return sorted(f[len(self.path) + 1 :] for f in found if f.startswith(self.path + "/"))

    def remove_files(self, names: Iterable[str]) -> None:
        """Remove the named files (never a folder's contents wholesale); names already gone are skipped.

        For results that are replaced: the caller names exactly what it wrote earlier, so nothing else is touched.
        """
        self._ensure_lease(verify=True)
        for name in names:
            path = self._p(name)
            with contextlib.suppress(FileNotFoundError):
                self._retry(functools.partial(self.fs.rm_file, path), name)
        self.fs.invalidate_cache(self.path)

    def reopen(self) -> None:
        """Withdraw a committed ``_SUCCESS`` so that this attempt may replace the folder's results.

        Readers trust the folder only with ``_SUCCESS``, so they stop trusting it before the first result file is
        replaced; :meth:`commit_success` writes it again last.
        """
        self._ensure_lease(verify=True)
        with contextlib.suppress(FileNotFoundError):
            self._retry(lambda: self.fs.rm_file(self._p(SUCCESS)), SUCCESS)
        self.fs.invalidate_cache(self.path)
        self._complete = False

    def abandon(self, *, remove_empty: bool = False) -> None:
        """Remove this attempt's temporaries and release the lease (a refused or failed writer leaves no trace).

        Parameters
        ----------
        remove_empty : bool
            Also remove the folder itself when nothing is left in it (the attempt created it).
        """
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(self._p(f"_tmp/{self.attempt}"), recursive=True)
        self._release_lease()
        self.fs.invalidate_cache(self.path)
        if remove_empty and self.fs.exists(self.path) and not self.list_files():
            with contextlib.suppress(FileNotFoundError, OSError):
                self.fs.rm(self.path, recursive=True)


def progress_line(store: RunStore, stamps: dict[int, float], planned: int | None, started: str | None) -> str:
    """``progress: done/planned (pct), last replicate <age> ago, <rate>/s, ETA <s>; writer: <lease holder>``.

    The rate is the committed replicates over the time from the manifest's start to the last commit (a resumed
    run counts its earlier replicates too, so the ETA is a rough guide).
    """
    done, now = len(stamps), time.time()
    parts = [f"progress: {done}/{planned}" + (f" ({100 * done / planned:.0f}%)" if planned else "")]
    if stamps:
        last = max(stamps.values())
        parts.append(f"last replicate {now - last:.0f}s ago")
        t0 = _parse_time(started)
        if t0 is not None and last > t0:
            rate = done / (last - t0)
            parts.append(f"{rate:.2f}/s")
            if planned and planned > done:
                parts.append(f"ETA {(planned - done) / rate:.0f}s")
    lease = store.lease_info()
    if lease is None:
        writer = "none (stopped or finished; rerun the same run id to resume)"
    else:
        writer = _describe(lease) + ("" if store.lease_alive(lease) else " (stopped: a rerun takes over)")
    return ", ".join(parts) + f"; writer: {writer}"


def _parse_time(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _describe(lease: dict[str, Any] | None) -> str:
    if not lease:
        return "no holder"
    age = time.time() - float(lease.get("heartbeat", 0))
    return f"attempt {lease.get('attempt')} on {lease.get('host')} pid {lease.get('pid')}, heartbeat {age:.0f}s ago"


def _stamp(entry: dict[str, Any]) -> float:
    # Local files report ``mtime`` (seconds); S3 objects ``LastModified`` (a datetime).
    value = entry.get("mtime") or entry.get("LastModified") or entry.get("created") or 0.0
    return value.timestamp() if hasattr(value, "timestamp") else float(value)
