"""``judgecal ingest``: read a source with a format adapter, validate, and write a committed dataset."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.llmbar import read_llmbar
from judgecal_dist.io.adapters.long import read_long
from judgecal_dist.io.adapters.rb2k8 import read_rb2k8
from judgecal_dist.io.adapters.report import MAX_LISTED, AdapterResult, IngestWarning
from judgecal_dist.io.dataset import committed_inputs, read_report, write_dataset
from judgecal_dist.io.filesystem import fingerprint_inputs
from judgecal_dist.io.ownership import Ownership, refuse_output_inside
from judgecal_dist.io.validate import all_null_judges
from judgecal_dist.io.writer import REPORT

__all__ = ["FORMATS", "ingest"]

log = logging.getLogger(__name__)

#: A dataset is ingest's by its report, which records what it was ingested from (its ``inputs``).
OWNER = Ownership(REPORT, "", "ingest", "DEST", ())
#: Input formats ``judgecal ingest --format`` accepts.
FORMATS: tuple[str, ...] = ("llmbar", "rb2-k8", "long")

_ADAPTERS: dict[str, Callable[..., AdapterResult]] = {"llmbar": read_llmbar, "rb2-k8": read_rb2k8, "long": read_long}


def ingest(
    fmt: str,
    src: str,
    dest: str,
    *,
    storage_options: dict[str, Any] | None = None,
    dataset: str | None = None,
    overwrite: bool = False,
    strict: bool = False,
    labels: str | None = None,
) -> dict[str, Any]:
    """Ingest ``src`` in format ``fmt`` into a dataset at ``dest`` and return the counts report.

    Parameters
    ----------
    fmt : {"llmbar", "rb2-k8", "long"}
        Source format.
    src : str
        Source URL (file or folder, local or remote).
    dest : str
        Dataset root URL.
    storage_options : dict, optional
        fsspec options, used for both ``src`` and ``dest``.
    dataset : str, optional
        Dataset name (each adapter documents its default).
    overwrite : bool, default False
        Replace a committed dataset at ``dest``.
    strict : bool, default False
        Refuse the source on any warning (see Notes) instead of logging it and listing it in the report.
    labels : str, optional
        ``long`` only: URL of a labels file kept apart from ``src`` (see
        :func:`~judgecal_dist.io.adapters.long.read_long`).

    Returns
    -------
    dict
        The report stored as ``_ingest.json``: ``format``, ``source``, ``datasets``, ``rows_read``, ``tables``
        (rows produced per table), ``rows_written`` and ``parts`` per table, ``missing_verdicts``,
        ``unparseable_verdicts``, ``rejected_rows``, ``rejected`` (listed), ``all_null_judges`` (judge ->
        rows), ``warnings`` (one line each), plus format-specific counts (LLMBar: ``absent_judges``).

    Raises
    ------
    InputError
        Unknown format, or the source is rejected (nothing is written then), or ``dest`` holds a committed
        dataset and ``overwrite`` is false, or ``strict`` and a warning, or ``labels`` with a format other than long.

    Notes
    -----
    Warnings are accidents in input that is otherwise valid: judges whose files are absent from some subsets
    (LLMBar: their items there have no rows), and judges whose every verdict is null (no vote at all).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> src = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (src / "verdicts.csv").write_text("dataset,item_id,judge_id,verdict\\nd,i1,j1,A\\nd,i2,j1,\\n")
    >>> _ = (src / "labels.csv").write_text("dataset,item_id,label\\nd,i1,A\\nd,i2,B\\n")
    >>> report = ingest("long", str(src), str(src.parent / (src.name + "-dataset")))
    >>> report["rows_written"], report["missing_verdicts"]
    ({'verdicts': 2, 'labels': 2}, 1)
    """
    if fmt not in _ADAPTERS:
        raise InputError(f"--format: {fmt!r}: unknown format, expected one of {list(FORMATS)}")
    if labels is not None and fmt != "long":
        raise InputError(f"--labels: {labels}: a separate labels file is read with --format long only")
    # The rule of every committed result (io.ownership): DEST outside SRC, decided before reading it;
    # a dataset ingested from the same source files and settings is returned as it is.
    refuse_output_inside(dest, "DEST", {"SRC": src, "--labels": labels})
    inputs = _ingest_inputs(fmt, src, labels, dataset, strict, storage_options)
    found = committed_inputs(dest, "inputs", storage_options)
    if OWNER.reuse(dest, found[0], inputs, committed=found[1], overwrite=overwrite):
        return read_report(dest, storage_options=storage_options)
    extra = {"labels": labels} if labels is not None else {}
    result = _ADAPTERS[fmt](src, dataset=dataset, storage_options=storage_options, **extra)
    source = result.sources.get("verdicts", src)

    def review(conformed: Mapping[str, pa.Table]) -> dict[str, Any]:
        silent = all_null_judges(conformed["verdicts"])
        warnings = [*result.warnings, *_null_judge_warnings(silent, source)]
        if strict and warnings:
            raise InputError(warnings[0].refusal())
        for warning in warnings:
            log.warning("%s", warning.warning())
        listed = dict(list(silent.items())[:MAX_LISTED])
        return {"all_null_judges": listed, "warnings": [w.warning() for w in warnings]}

    write_dataset(
        dest,
        result.tables,
        {**result.report, "inputs": inputs},
        storage_options=storage_options,
        overwrite=overwrite,
        sources=result.sources,
        score_range=result.score_range,
        review=review,
    )
    report = read_report(dest, storage_options=storage_options)
    log.info("ingested %s (%s) into %s: %s", src, fmt, dest, report["rows_written"])
    return report


def _ingest_inputs(
    fmt: str, src: str, labels: str | None, dataset: str | None, strict: bool, options: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What a dataset is ingested from: the format, settings and content fingerprints of the source files (the
    fingerprints run manifests record: names, sizes, modification stamps or ETags)."""
    options = dict(options or {})
    inputs: dict[str, Any] = {"format": fmt, "source": src, "source_sha256": fingerprint_inputs(src, options)["sha256"]}
    if labels is not None:
        inputs |= {"labels": labels, "labels_sha256": fingerprint_inputs(labels, options)["sha256"]}
    return inputs | {"dataset": dataset, "strict": strict}


def _null_judge_warnings(silent: Mapping[str, int], source: str) -> list[IngestWarning]:
    if not silent:
        return []
    first = next(iter(silent))
    return [
        IngestWarning(
            message=(
                f"{source}: verdict: {len(silent)} judge(s) whose every verdict is null, with no score either "
                f"(e.g. {list(silent)[:3]}; {first}: {silent[first]} rows): they add no vote"
            ),
            fix="check the judge's parser or its column mapping, or leave it out of the source",
            note="all such judges are under all_null_judges in the report",
        )
    ]


def ingest_summary(report: dict[str, Any], dest: str) -> str:
    """Two lines for the console: what was written, and what was odd in the source (counted; listed in the report)."""
    written = ", ".join(f"{n} {table}" for table, n in report.get("rows_written", {}).items())
    if report.get("unlabelled"):
        written += " (no labels: every item unlabelled)"
    datasets = ", ".join(map(str, report.get("datasets", [])))
    odd = (
        f"{report.get('missing_verdicts', 0)} missing and {report.get('unparseable_verdicts', 0)} unparseable "
        f"verdicts, {report.get('rejected_rows', 0)} rejected rows, {len(report.get('warnings', []))} warnings"
    )
    report_url = f"{dest.rstrip('/')}/_ingest.json"
    return f"datasets {datasets} (format {report.get('format')}): {written}\n{odd}; full report: {report_url}"
