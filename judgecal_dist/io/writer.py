"""Streaming writer of the dataset store (layout and commit rules in :mod:`judgecal_dist.io.dataset`)."""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from judgecal_dist.errors import InputError
from judgecal_dist.io.filesystem import join_path, open_fs
from judgecal_dist.io.records import to_json
from judgecal_dist.io.schema import SUCCESS, TABLE_KEYS, TABLES
from judgecal_dist.io.validate import (
    check_known_items,
    check_known_judges,
    check_unique_keys,
    conform_table,
    distinct_items,
)

__all__ = ["ROWS_PER_PART", "SUCCESS", "REPORT", "DatasetWriter", "is_committed"]

log = logging.getLogger(__name__)

ROWS_PER_PART = 1_000_000
REPORT = "_ingest.json"
_OWN_ENTRIES = {*TABLES, REPORT, SUCCESS}


def is_committed(fs: AbstractFileSystem, root: str) -> bool:
    """Whether the dataset root ``root`` holds ``_SUCCESS`` (listing caches are refreshed first)."""
    fs.invalidate_cache(root)
    return bool(fs.exists(join_path(root, SUCCESS)))


class DatasetWriter:
    """Write a dataset chunk by chunk: verdict parts first, then the other tables, the report, and ``_SUCCESS``.

    Parameters
    ----------
    dest : str
        Dataset root URL.
    overwrite : bool, default False
        Replace a committed dataset at ``dest``. The old dataset is removed (``_SUCCESS`` first) when the first
        part is written, so a failure after that point leaves no dataset at ``dest``.
    storage_options : dict, optional
        fsspec options for ``dest``.
    rows_per_part : int, default ``ROWS_PER_PART``
        Largest Parquet part; a bigger chunk is cut into several parts.
    score_range : (float, float), optional
        Declared range of ``verdicts.score``.
    validate : bool, default True
        Conform and check each chunk (:func:`~judgecal_dist.io.validate.conform_table`). Only a caller that has
        validated the whole tables already (:func:`write_dataset`) turns it off.

    Notes
    -----
    Duplicate verdict keys are checked within each chunk; across chunks the writer checks that no item appears in
    two chunks, so **all verdicts of an item must come in one chunk**. Memory holds one chunk plus the distinct
    (dataset, item_id, group_id) of the verdicts, needed to check labels and item metadata at :meth:`commit`.

    Examples
    --------
    >>> import tempfile, pyarrow as pa
    >>> dest = tempfile.mkdtemp() + "/panel"
    >>> with DatasetWriter(dest) as writer:
    ...     writer.write_verdicts(pa.table({"dataset": ["d"], "item_id": ["i"], "judge_id": ["j"], "verdict": ["A"]}))
    ...     writer.write_table("labels", pa.table({"dataset": ["d"], "item_id": ["i"], "label": ["A"]}))
    ...     report = writer.commit({"format": "example"})
    >>> report["rows_written"]
    {'verdicts': 1, 'labels': 1}
    """

    def __init__(
        self,
        dest: str,
        *,
        overwrite: bool = False,
        storage_options: dict[str, Any] | None = None,
        rows_per_part: int = ROWS_PER_PART,
        score_range: tuple[float, float] | None = None,
        validate: bool = True,
    ) -> None:
        self.url = str(dest)
        self.fs, self.root = open_fs(self.url, storage_options)
        self.overwrite = overwrite
        self.rows_per_part = int(rows_per_part)
        self.score_range = score_range
        self.validate = validate
        self._prepared = False
        self._created_root = False
        self._committed = False
        self._written: list[str] = []
        self._rows: dict[str, int] = {}
        self._parts: dict[str, int] = {}
        self._items: list[pa.Table] = []
        self._judge_ids: list[pa.Array] = []
        self._check_destination()

    def _check_destination(self) -> None:
        if not self.fs.exists(self.root):
            return
        if is_committed(self.fs, self.root):
            if not self.overwrite:
                raise InputError(
                    f"{self.url}: {SUCCESS}: already holds a committed dataset; pass overwrite=True (--overwrite)"
                )
            return
        foreign = [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(self.root, detail=False)]
        foreign = [name for name in foreign if name not in _OWN_ENTRIES]
        if foreign:
            raise InputError(f"{self.url}: (folder): not empty and not a dataset (holds {sorted(foreign)[:5]})")

    def _prepare(self) -> None:
        """Clear an old (committed and overwritten, or half-written) dataset just before the first write."""
        if self._prepared:
            return
        self._check_destination()
        if self.fs.exists(self.root):
            if is_committed(self.fs, self.root):
                self.fs.rm(join_path(self.root, SUCCESS))  # readers stop trusting the old dataset first
            for name in _OWN_ENTRIES:
                path = join_path(self.root, name)
                if self.fs.exists(path):
                    self.fs.rm(path, recursive=True)
            self.fs.invalidate_cache(self.root)
        else:
            self._created_root = True
        self.fs.makedirs(self.root, exist_ok=True)
        self._prepared = True

    def _write_parts(self, name: str, table: pa.Table) -> None:
        self._prepare()
        folder = join_path(self.root, name)
        self.fs.makedirs(folder, exist_ok=True)
        for start in range(0, max(table.num_rows, 1), self.rows_per_part):
            part = self._parts.get(name, 0)
            path = join_path(folder, f"part-{part:05d}.parquet")
            self._written.append(path)
            pq.write_table(table.slice(start, self.rows_per_part), path, filesystem=self.fs)
            self._parts[name] = part + 1
        self._rows[name] = self._rows.get(name, 0) + table.num_rows

    def write_verdicts(self, chunk: pa.Table) -> None:
        """Check one chunk of verdicts and write it at once as one or more Parquet parts.

        Raises
        ------
        InputError
            The chunk violates the verdicts contract, or one of its items was in an earlier chunk; what the
            writer wrote so far is removed.
        """
        try:
            if self.validate:
                chunk = conform_table(
                    chunk, "verdicts", source=f"verdicts chunk {len(self._items)}", score_range=self.score_range
                )
                self._items.append(distinct_items(chunk, source=f"verdicts chunk {len(self._items)}"))
                self._judge_ids.append(pc.unique(chunk.column("judge_id")))
            self._write_parts("verdicts", chunk)
        except BaseException:
            self.abort()
            raise

    def write_table(self, name: str, table: pa.Table) -> None:
        """Check and write a whole table other than verdicts (labels, judges, items, refused)."""
        try:
            if name == "verdicts" or name not in TABLES:
                raise InputError(f"{name}: (table): write_table takes {list(TABLES[1:])}; use write_verdicts")
            if name in self._rows:
                raise InputError(f"{name}: (table): written twice")
            if self.validate:
                table = conform_table(table, name, source=name)
                if name in ("labels", "items"):
                    check_known_items(
                        table, self._item_keys(), source=name, what=f"{name} rows for items not in verdicts"
                    )
                if name == "judges":
                    judge_ids = pa.chunked_array(self._judge_ids, type=pa.string())
                    check_known_judges(judge_ids, table, source="verdicts")
            self._write_parts(name, table)
        except BaseException:
            self.abort()
            raise

    def _item_keys(self) -> pa.Table:
        if not self._items:
            raise InputError("verdicts: (table): write verdicts before labels or item metadata")
        items = pa.concat_tables(self._items)
        if len(self._items) > 1:  # every item's verdicts must come in one chunk (see Notes)
            check_unique_keys(items, TABLE_KEYS["items"], source="verdicts (items across chunks)")
        self._items = [items]
        return items

    def commit(self, report: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Write ``_ingest.json`` then ``_SUCCESS``; return the report with ``rows_written`` and ``parts`` added."""
        try:
            for required in ("verdicts", "labels"):
                if required not in self._rows:
                    raise InputError(f"{self.url}: {required}: missing required table")
            if self.validate:
                self._item_keys()
            full = dict(report or {})
            full["rows_written"] = dict(self._rows)
            full["parts"] = dict(self._parts)
            path = join_path(self.root, REPORT)
            self._written.append(path)
            with self.fs.open(path, "w") as fh:
                fh.write(to_json(full))
            with self.fs.open(join_path(self.root, SUCCESS), "wb") as fh:
                fh.write(b"")
        except BaseException:
            self.abort()
            raise
        self._committed = True
        log.debug("committed dataset %s (%s)", self.url, full["rows_written"])  # ingest and generate say it
        return full

    def abort(self) -> None:
        """Remove every file this writer wrote (no-op after :meth:`commit`)."""
        if self._committed:
            return
        for path in reversed(self._written):
            if self.fs.exists(path):
                self.fs.rm(path)
        for name in _OWN_ENTRIES:
            path = join_path(self.root, name)
            if self._prepared and self.fs.exists(path):
                self.fs.rm(path, recursive=True)
        self._written.clear()
        if self._created_root and self.fs.exists(self.root) and not self.fs.ls(self.root, detail=False):
            self.fs.rm(self.root, recursive=True)

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._committed:
            self.abort()
