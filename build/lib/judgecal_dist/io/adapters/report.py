"""What every adapter returns: the contract tables plus the counts report that ``judgecal ingest`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

__all__ = ["MAX_LISTED", "AdapterResult", "IngestWarning", "make_report"]

#: At most this many rejected rows are listed in a report (all of them are counted).
MAX_LISTED = 100


@dataclass(frozen=True)
class IngestWarning:
    """An accident in accepted input: ``judgecal ingest`` logs it and lists it in the report; ``--strict`` refuses.

    Attributes
    ----------
    message : str
        One line, ``<file or URL>: <what>: <what is wrong>`` (the warning, and the start of the refusal).
    fix : str
        What to do about it, appended to the refusal.
    note : str
        Where the report lists the details, appended to the warning.
    """

    message: str
    fix: str
    note: str = ""

    def warning(self) -> str:
        """The one-line warning logged and listed in the report."""
        return f"{self.message}; {self.note}" if self.note else self.message

    def refusal(self) -> str:
        """The one-line error ``--strict`` raises."""
        return f"{self.message}; {self.fix} (refused by --strict)"


@dataclass
class AdapterResult:
    """Tables read by an adapter, with its report.

    Attributes
    ----------
    tables : dict of str to pyarrow.Table
        ``verdicts`` and ``labels``, optionally ``judges``, ``items``, ``refused`` (not yet validated).
    report : dict
        See :func:`make_report`.
    sources : dict of str to str
        The file each table came from, for error messages.
    score_range : (float, float) or None
        Declared range of ``verdicts.score``.
    warnings : list of IngestWarning
        Accidents found while reading (e.g. a judge's file absent from some subsets).
    """

    tables: dict[str, pa.Table]
    report: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    score_range: tuple[float, float] | None = None
    warnings: list[IngestWarning] = field(default_factory=list)


def make_report(
    fmt: str,
    src: str,
    *,
    datasets: list[str],
    rows_read: int,
    tables: dict[str, pa.Table],
    missing_verdicts: int,
    unparseable_verdicts: int,
    rejected: list[dict[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    """The counts report every adapter returns (``rows_written`` is added by the writer).

    Parameters
    ----------
    fmt, src : str
        Format name and source URL.
    datasets : list of str
        Dataset names produced.
    rows_read : int
        Input records read (what a record is depends on the format; each adapter documents it).
    tables : dict of str to pyarrow.Table
        The tables produced; their row counts go to ``tables``.
    missing_verdicts : int
        Verdict rows with neither a verdict nor a score because the judge gave none (or the file had none).
    unparseable_verdicts : int
        Verdict rows with neither a verdict nor a score because the judge's reply could not be parsed.
    rejected : list of dict
        Input records left out, each with the file, its key and the reason (only the first ``MAX_LISTED`` are
        listed; ``rejected_rows`` counts all).
    **extra
        Format-specific counts.
    """
    return {
        "format": fmt,
        "source": str(src),
        "datasets": sorted(datasets),
        "rows_read": int(rows_read),
        "tables": {name: table.num_rows for name, table in tables.items()},
        "missing_verdicts": int(missing_verdicts),
        "unparseable_verdicts": int(unparseable_verdicts),
        "rejected_rows": len(rejected),
        "rejected": rejected[:MAX_LISTED],
        **extra,
    }
