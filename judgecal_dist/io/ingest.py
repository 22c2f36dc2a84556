"""``judgecal ingest``: read a source with a format adapter, validate, and write a committed dataset."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.llmbar import read_llmbar
from judgecal_dist.io.adapters.long import read_long
from judgecal_dist.io.adapters.rb2k8 import read_rb2k8
from judgecal_dist.io.adapters.report import AdapterResult
from judgecal_dist.io.dataset import read_report, write_dataset

__all__ = ["FORMATS", "ingest"]

log = logging.getLogger(__name__)

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

    Returns
    -------
    dict
        The report stored as ``_ingest.json``: ``format``, ``source``, ``datasets``, ``rows_read``, ``tables``
        (rows produced per table), ``rows_written`` and ``parts`` per table, ``missing_verdicts``,
        ``unparseable_verdicts``, ``rejected_rows``, ``rejected`` (listed), plus format-specific counts.

    Raises
    ------
    InputError
        Unknown format, or the source is rejected (nothing is written then), or ``dest`` holds a committed
        dataset and ``overwrite`` is false.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> src = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (src / "verdicts.csv").write_text("dataset,item_id,judge_id,verdict\\nd,i1,j1,A\\nd,i2,j1,\\n")
    >>> _ = (src / "labels.csv").write_text("dataset,item_id,label\\nd,i1,A\\nd,i2,B\\n")
    >>> report = ingest("long", str(src), str(src / "out"))
    >>> report["rows_written"], report["missing_verdicts"]
    ({'verdicts': 2, 'labels': 2}, 1)
    """
    if fmt not in _ADAPTERS:
        raise InputError(f"--format: {fmt!r}: unknown format, expected one of {list(FORMATS)}")
    result = _ADAPTERS[fmt](src, dataset=dataset, storage_options=storage_options)
    write_dataset(
        dest,
        result.tables,
        result.report,
        storage_options=storage_options,
        overwrite=overwrite,
        sources=result.sources,
        score_range=result.score_range,
    )
    report = read_report(dest, storage_options=storage_options)
    log.info("ingested %s (%s) into %s: %s", src, fmt, dest, report["rows_written"])
    return report
