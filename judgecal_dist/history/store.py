"""The run history under an output root: ``<output>/history/{runs,results,judges}``.

Layout (Hive partitions, so Spark and the catalog read each table as one partitioned Parquet table)::

    <output>/history/<table>/study=<study>/date=<YYYY-MM-DD>/<run_id>.parquet

One file per run and table, written under a temporary name and then moved into place, so a reader never sees
half a file. ``date`` is the day the attempt ended (UTC). A resumed run rewrites its own file (same name); when
the attempts end on different days, :func:`read_history` keeps only the rows of the latest attempt of each run id
(``recorded_at``), so a run's rows appear once however often it is resumed. ``study`` and ``date`` live in the
path only (never in the file), as Hive partitioning expects.
"""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from collections.abc import Collection, Mapping
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from judgecal_dist.errors import InputError
from judgecal_dist.io.filesystem import has_directories, open_fs

__all__ = [
    "HISTORY_TABLES",
    "history_files",
    "history_url",
    "record_run",
    "read_history",
    "run_row",
    "sort_history",
    "write_bytes_atomic",
]

log = logging.getLogger(__name__)

HISTORY_TABLES: tuple[str, ...] = ("runs", "results", "judges")
_PARTITION = re.compile(r"/study=(?P<study>[^/]+)/date=(?P<date>[^/]+)/[^/]+\.parquet$")


def history_url(output: str) -> str:
    """``<output>/history``."""
    return f"{output.rstrip('/')}/history"


def run_row(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The ``history/runs`` row of a run, from its manifest (never credentials: the manifest is redacted)."""
    inputs = manifest.get("inputs") or []
    config = manifest.get("config") or {}
    return {
        "run_id": manifest.get("run_id"),
        "status": manifest.get("status"),
        "dataset_url": (inputs[0].get("url") if inputs else None) or config.get("data"),
        "input_digest": manifest.get("input_digest"),
        "config_digest": manifest.get("config_digest"),
        "started": manifest.get("started"),
        "finished": manifest.get("ended"),
        "judgecal_version": manifest.get("version"),
        "git_sha": manifest.get("git_sha"),
        "versions": json.dumps(manifest.get("versions") or {}, sort_keys=True),
        "error": manifest.get("error"),
        "wall_seconds": manifest.get("wall_seconds"),
    }


def write_bytes_atomic(fs: Any, path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary name in the same folder, then a move."""
    folder, name = path.rsplit("/", 1)
    if has_directories(fs):
        fs.makedirs(folder, exist_ok=True)
    tmp = f"{folder}/_tmp-{uuid.uuid4().hex}-{name}"
    with fs.open(tmp, "wb") as fh:
        fh.write(data)
    fs.mv(tmp, path)


def _write_once(fs: Any, path: str, frame: pd.DataFrame) -> None:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    # A column that is null in this run (error, calibrator, ...) would be stored with Parquet's null type, which
    # Spark and the catalog cannot merge with the string the same column holds in other runs: store it as string.
    for i, field in enumerate(table.schema):
        if pa.types.is_null(field.type):
            table = table.set_column(i, pa.field(field.name, pa.string()), table.column(i).cast(pa.string()))
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    write_bytes_atomic(fs, path, buffer.getvalue())


def record_run(
    output: str,
    manifest: Mapping[str, Any],
    *,
    summary: pd.DataFrame | None = None,
    judges: pd.DataFrame | None = None,
    extra: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Append a finished or failed run's rows to the history under ``output``; return the files written.

    Parameters
    ----------
    output : str
        Results root URL (the history lives in ``<output>/history``).
    manifest : mapping
        The run's final manifest (``status`` succeeded or failed, ``ended`` set).
    summary : DataFrame, optional
        The run's summary rows (``history/results``); absent for a failed run.
    judges : DataFrame, optional
        Per-judge statistics (:func:`judgecal_dist.history.judges.with_rates`, plus model parameters).
    extra : mapping, optional
        More columns of the ``runs`` row (e.g. the fitted calibrator's parameters as JSON).
    storage_options : mapping, optional
        fsspec options for ``output``.
    """
    row = run_row(manifest) | dict(extra or {})
    study, run_id = str(manifest["study"]), str(row["run_id"])
    recorded_at = row["finished"] or row["started"]
    date = str(recorded_at)[:10]
    key = {"run_id": run_id, "recorded_at": recorded_at}
    # wall_seconds is absent from a failed run's manifest: typed, so every run's file has one schema.
    frames = {"runs": pd.DataFrame([row | {"recorded_at": recorded_at}]).astype({"wall_seconds": "float64"})}
    if summary is not None and not summary.empty:
        frames["results"] = summary.drop(columns=["study", "run_id"], errors="ignore").assign(**key)
    if judges is not None and not judges.empty:
        frames["judges"] = judges.assign(**key)
    fs, root = open_fs(history_url(output), dict(storage_options or {}))
    written = {}
    # The runs row last: it commits the entry, so a crash before it leaves an entry that is_recorded says is missing.
    for table in sorted(frames, key=lambda t: t == "runs"):
        path = _part(root, table, study, date, run_id)
        _write_once(fs, path, frames[table].drop(columns=["study", "date"], errors="ignore"))
        written[table] = path
    log.info("history: %s %s (%s) recorded in %s", study, run_id, row["status"], history_url(output))
    return written


def _part(root: str, table: str, study: str, date: str, run_id: str) -> str:
    return f"{root}/{table}/study={study}/date={date}/{run_id}.parquet"


def is_recorded(output: str, manifest: Mapping[str, Any], *, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether the history holds the entry :func:`record_run` writes for this final ``manifest`` (its runs row)."""
    row = run_row(manifest)
    date = str(row["finished"] or row["started"])[:10]
    fs, root = open_fs(history_url(output), dict(storage_options or {}))
    return bool(fs.exists(_part(root, "runs", str(manifest["study"]), date, str(row["run_id"]))))


def history_files(
    output: str, table: str, *, study: str | None = None, storage_options: Mapping[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    """``(path, study, date)`` of every committed file of history ``table`` (no temporary file), sorted by path."""
    if table not in HISTORY_TABLES:
        raise ValueError(f"table: must be one of {HISTORY_TABLES}, got {table!r}")
    fs, root = open_fs(history_url(output), dict(storage_options or {}))
    found = []
    for path in sorted(fs.glob(f"{root}/{table}/study={study or '*'}/date=*/*.parquet")):
        match = _PARTITION.search(path)
        if match is not None and not path.rsplit("/", 1)[-1].startswith("_tmp-"):
            found.append((path, match["study"], match["date"]))
    return found


def read_history(
    output: str,
    table: str,
    *,
    study: str | None = None,
    run_ids: Collection[str] | None = None,
    judge_ids: Collection[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Rows of history ``table`` (one of :data:`HISTORY_TABLES`), latest attempt per run id, with ``study``, ``date``.

    ``run_ids`` reads only those runs' files (a run's files are named after it, so every attempt is still seen);
    ``judge_ids`` keeps only those judges' rows. Returns an empty frame when nothing matches. In
    :func:`sort_history` order.
    """
    fs, _ = open_fs(history_url(output), dict(storage_options or {}))
    wanted = None if run_ids is None else {f"{run_id}.parquet" for run_id in run_ids}
    parts = []
    for path, study_value, date in history_files(output, table, study=study, storage_options=storage_options):
        if wanted is not None and path.rsplit("/", 1)[-1] not in wanted:
            continue
        try:
            with fs.open(path, "rb") as fh:
                part = pq.read_table(fh)
        except (pa.ArrowInvalid, OSError) as err:  # truncated or not Parquet: name the file, not Arrow's words
            raise InputError(
                f"{path}: not a readable history file ({err}); move it out of the history (or restore it) and rerun"
            ) from err
        n = part.num_rows
        parts.append(
            part.append_column("study", pa.array([study_value] * n)).append_column("date", pa.array([date] * n))
        )
    if not parts:
        return pd.DataFrame()
    # One Arrow concatenation (columns a run lacks become null) and one conversion, not one frame per file.
    rows = pa.concat_tables(parts, promote_options="permissive").to_pandas()
    rows = rows[rows["recorded_at"] == rows.groupby(["study", "run_id"])["recorded_at"].transform("max")]
    if judge_ids is not None:
        rows = rows[rows["judge_id"].isin(list(judge_ids))]
    return sort_history(rows) if not rows.empty else pd.DataFrame()


def sort_history(rows: pd.DataFrame) -> pd.DataFrame:
    """History rows oldest run first (``recorded_at``, ``run_id``), then by ``judge_id`` where the table has it.

    The one order of both readers (pandas here, Spark in :mod:`judgecal_dist.history.spark_history`).
    """
    keys = ["recorded_at", "run_id", *(["judge_id"] if "judge_id" in rows.columns else [])]
    return rows.sort_values(keys, kind="stable").reset_index(drop=True)
