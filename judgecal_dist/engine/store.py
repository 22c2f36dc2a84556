"""Results through fsspec: one run folder per (study, run id), atomic commits, resume, manifest.

Layout (ARCHITECTURE.md, results contract)::

    <output>/<study>/<run_id>/
        manifest.json            config, versions, git sha, input fingerprints, times; never credentials
        replicates/part-<seed>.parquet
        summary.parquet, summary.json, report.md, figures/*.png, model/*.json
        _SUCCESS                 written last; a reader trusts a run only with it

Every file is written under ``_tmp/`` with a unique name and then moved into place, so no reader ever sees half
a file; on object stores the move is a server-side copy of a complete object. A rerun of the same run id lists
``replicates/`` and skips the seeds already there.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import uuid
from collections.abc import Iterable
from typing import Any

import pandas as pd

from judgecal_dist.errors import InputError, RunError
from judgecal_dist.io.filesystem import open_fs

__all__ = ["RunStore", "SUCCESS", "is_remote"]

log = logging.getLogger(__name__)

SUCCESS = "_SUCCESS"
_PART = re.compile(r"part-(\d+)\.parquet$")


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
    """

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url.rstrip("/")
        self.fs, self.path = open_fs(self.url, storage_options)
        self.path = self.path.rstrip("/")

    # -- paths -----------------------------------------------------------------------------------------------
    def _p(self, name: str) -> str:
        return f"{self.path}/{name}"

    def url_of(self, name: str) -> str:
        """The URL of a file in the run folder (for messages and reports)."""
        return f"{self.url}/{name}"

    # -- atomic writes ---------------------------------------------------------------------------------------
    def write_bytes(self, name: str, data: bytes) -> None:
        """Write ``data`` to ``name`` atomically: a unique temporary object first, then a move."""
        tmp = self._p(f"_tmp/{uuid.uuid4().hex}-{name.replace('/', '_')}")
        target = self._p(name)
        try:
            self.fs.makedirs(self._p("_tmp"), exist_ok=True)
            with self.fs.open(tmp, "wb") as fh:
                fh.write(data)
            parent = target.rsplit("/", 1)[0]
            self.fs.makedirs(parent, exist_ok=True)
            self.fs.mv(tmp, target)
        except OSError as err:
            raise RunError(f"{self.url_of(name)}: could not commit ({err})") from err
        self.fs.invalidate_cache(self.path)

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode("utf-8"))

    def write_json(self, name: str, obj: Any) -> None:
        self.write_text(name, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")

    def write_table(self, name: str, table: pd.DataFrame) -> None:
        buf = io.BytesIO()
        table.to_parquet(buf, index=False)
        self.write_bytes(name, buf.getvalue())

    # -- replicates and resume -------------------------------------------------------------------------------
    def commit_part(self, seed: int, table: pd.DataFrame) -> None:
        """Commit one finished replicate as ``replicates/part-<seed>.parquet`` (never lost once written)."""
        self.write_table(f"replicates/part-{int(seed)}.parquet", table)

    def finished_seeds(self) -> set[int]:
        """Seeds whose part is already committed (a rerun skips them)."""
        folder = self._p("replicates")
        self.fs.invalidate_cache(folder)
        if not self.fs.exists(folder):
            return set()
        seeds = set()
        for entry in self.fs.ls(folder, detail=False):
            match = _PART.search(entry)
            if match:
                seeds.add(int(match.group(1)))
        return seeds

    def read_parts(self, seeds: Iterable[int] | None = None) -> pd.DataFrame:
        """All committed replicate tables, concatenated in seed order."""
        wanted = sorted(self.finished_seeds() if seeds is None else seeds)
        frames = []
        for seed in wanted:
            with self.fs.open(self._p(f"replicates/part-{seed}.parquet"), "rb") as fh:
                frames.append(pd.read_parquet(fh))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    # -- reading ---------------------------------------------------------------------------------------------
    def exists(self, name: str) -> bool:
        self.fs.invalidate_cache(self.path)
        return self.fs.exists(self._p(name))

    def read_bytes(self, name: str) -> bytes:
        try:
            with self.fs.open(self._p(name), "rb") as fh:
                return fh.read()
        except FileNotFoundError as err:
            raise InputError(f"{self.url_of(name)}: not found") from err

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
        """Write ``_SUCCESS`` (last) and remove the temporary folder."""
        self.write_text(SUCCESS, "")
        tmp = self._p("_tmp")
        if self.fs.exists(tmp):
            with contextlib.suppress(FileNotFoundError):  # object stores: an empty prefix vanishes by itself
                self.fs.rm(tmp, recursive=True)

    def require_success(self) -> None:
        """Raise unless the run is complete: a reader trusts a run only with ``_SUCCESS``."""
        if not self.succeeded:
            raise InputError(f"{self.url}: no {SUCCESS}: the run is unfinished or failed (rerun the same run id)")


def _json_default(obj: Any) -> Any:
    # numpy scalars and arrays, pandas timestamps: JSON has no native form for them.
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 0) == 0:
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
