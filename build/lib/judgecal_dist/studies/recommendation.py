"""The answer a study gives, stated first: what to use, what to expect, the runner-up and when the answer changes.

Every study's ``summarise`` builds one :class:`Recommendation` from its own summary table and hands it to
:class:`~judgecal_dist.studies.base.StudyResult`, which opens ``report.md`` with :meth:`Recommendation.markdown`
and stores :meth:`Recommendation.record` as ``summary.json`` ``recommendation`` (what ``judgecal run`` prints).
Intervals are never computed here: :func:`estimate` only formats the ``<metric>_ci_low``/``<metric>_ci_high``
columns the study wrote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.io.records import json_records

__all__ = ["Recommendation", "estimate", "overlap", "preview", "words"]


def _fmt(value: Any, spec: str) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return format(number, spec) if np.isfinite(number) else "n/a"


def words(value: Any) -> str:
    """A setting's value as report text: mappings as ``key value, ...`` and sequences comma-separated, never a
    Python ``repr`` (``{'penalty': 0.01}`` reads as ``penalty 0.01``)."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {words(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(words(v) for v in value) or "none"
    return str(value)


def estimate(row: Mapping[str, Any] | pd.Series, metric: str, label: str | None = None, spec: str = ".4f") -> str:
    """``"<label> <value> [<low>, <high>]"`` from ``row``'s ``metric`` and the interval columns beside it.

    The interval is the one the study computed (``<metric>_ci_low``/``_ci_high``); without those columns only the
    value is given.
    """
    text = f"{metric if label is None else label} {_fmt(row[metric], spec)}".lstrip()
    low, high = f"{metric}_ci_low", f"{metric}_ci_high"
    if low in row and high in row:
        text += f" [{_fmt(row[low], spec)}, {_fmt(row[high], spec)}]"
    return text


def overlap(a: Mapping[str, Any] | pd.Series, b: Mapping[str, Any] | pd.Series, metric: str) -> bool:
    """Whether the study's intervals of ``metric`` for rows ``a`` and ``b`` overlap (True without intervals)."""
    low, high = f"{metric}_ci_low", f"{metric}_ci_high"
    if not all(k in r for r in (a, b) for k in (low, high)):
        return True
    return bool(a[low] <= b[high] and b[low] <= a[high])


@dataclass(frozen=True)
class Recommendation:
    """A study's answer, in the words a user acts on.

    Attributes
    ----------
    use : str
        What to use (pipeline, panel, method), e.g. ``"one_coin + beta on all 9 judges"``.
    expected : str
        What it gives on this data, with the study's interval, e.g. ``"NLL 0.3079 [0.2985, 0.3182]"``.
    runner_up : str
        The next best choice and how far behind it is.
    changes : sequence of str
        When the answer would change (``"with fewer than 30 labels use ..."``); may be empty.
    interval : str
        What the bracketed intervals are (the study's own wording).
    support : DataFrame
        The summary rows that support the answer, with every key column (printed after a run).
    keys : sequence of str
        The key columns of ``support`` (what makes each row distinct).
    metrics : sequence of str
        The metric columns of ``support`` worth printing (their interval columns travel with them).
    exported : str
        The model the run exported as ``model/model.json`` and how to export another (:func:`exported_model`).
    """

    use: str
    expected: str
    runner_up: str
    changes: Sequence[str] = ()
    interval: str = ""
    support: pd.DataFrame = field(default_factory=pd.DataFrame)
    keys: Sequence[str] = ()
    metrics: Sequence[str] = ()
    exported: str = ""

    def markdown(self) -> str:
        """The ``## Recommendation`` block that opens ``report.md``."""
        lines = [
            "## Recommendation",
            "",
            f"- **Use:** {self.use}",
            f"- **Expected:** {self.expected}",
            f"- **Runner-up:** {self.runner_up}",
        ]
        if len(self.changes) == 1:
            lines.append(f"- **When this changes:** {self.changes[0]}")
        elif self.changes:
            lines += ["- **When this changes:**", *(f"  - {text}" for text in self.changes)]
        if self.interval:
            lines.append(f"- **Intervals:** {self.interval}")
        if self.exported:
            lines.append(f"- **Exported model:** {self.exported}")
        return "\n".join(lines) + "\n"

    def columns(self) -> list[str]:
        """The support table's columns: keys, then each metric with its interval columns where present."""
        cols = [k for k in self.keys if k in self.support.columns]
        for m in self.metrics:
            cols += [c for c in (m, f"{m}_ci_low", f"{m}_ci_high") if c in self.support.columns]
        return cols

    def record(self) -> dict[str, Any]:
        """The block as JSON-able data (``summary.json`` ``recommendation``)."""
        return {
            "use": self.use,
            "expected": self.expected,
            "runner_up": self.runner_up,
            "changes": list(self.changes),
            "interval": self.interval,
            "exported": self.exported,
            "keys": [k for k in self.keys if k in self.support.columns],
            "metrics": list(self.metrics),
            "support": json_records(self.support[self.columns()]) if len(self.support) else [],
        }

    def insert_into(self, report: str) -> str:
        """``report`` with this block right after its title line (or first, when it has no ``# `` title), in place
        of a block already there (a study that amends its result, e.g. with the exported model, inserts again)."""
        head, sep, rest = report.partition("\n")
        if head.startswith("# ") and sep:
            return f"{head}\n\n{self.markdown()}\n{_without_block(rest)}"
        return f"{self.markdown()}\n{_without_block(report)}"


def _without_block(text: str) -> str:
    """``text`` (leading blank lines dropped) less the ``## Recommendation`` block it opens with, if any."""
    body = text.lstrip("\n")
    if not body.startswith("## Recommendation\n"):
        return body
    end = body.find("\n\n", body.find("\n- **Use:**"))  # the block's bullets hold no blank line
    return body[end + 2 :] if end >= 0 else ""


def preview(recommendation: Mapping[str, Any], max_rows: int = 12) -> str:
    """The console text of a stored recommendation: the answer, then its supporting rows with every key column."""
    lines = [
        f"Recommendation: use {recommendation['use']}",
        f"  expected: {recommendation['expected']}",
        f"  runner-up: {recommendation['runner_up']}",
        *(f"  when this changes: {text}" for text in recommendation.get("changes", [])),
    ]
    if recommendation.get("interval"):
        lines.append(f"  intervals: {recommendation['interval']}")
    rows = pd.DataFrame(recommendation.get("support") or [])
    if not rows.empty:
        lines += ["", "Supporting rows:", _compact(rows, recommendation).head(max_rows).to_string(index=False)]
        if len(rows) > max_rows:
            lines.append(f"... {len(rows) - max_rows} more in summary.json `recommendation`")
    return "\n".join(lines)


def _compact(rows: pd.DataFrame, recommendation: Mapping[str, Any]) -> pd.DataFrame:
    """Every key column, then one ``value [low, high]`` column per metric (the interval beside its value)."""
    out = pd.DataFrame(index=rows.index)
    for key in recommendation.get("keys", []):
        if key in rows:
            column = rows[key]
            whole = column.dtype.kind == "f" and column.dropna().mod(1).eq(0).all()  # JSON made an int a float
            out[key] = column.astype("Int64") if whole else column
    for metric in recommendation.get("metrics", []):
        if metric not in rows:
            continue
        low, high = rows.get(f"{metric}_ci_low"), rows.get(f"{metric}_ci_high")
        out[metric] = [
            ""
            if _fmt(v, "") == "n/a"
            else _float(v) + (f" [{_float(lo)}, {_float(hi)}]" if low is not None and high is not None else "")
            for v, lo, hi in zip(
                rows[metric],
                low if low is not None else rows[metric],
                high if high is not None else rows[metric],
                strict=True,
            )
        ]
    return out


def _float(x: Any) -> str:
    return _fmt(x, ".4f")


def exported_model(name: str, fmt: str, override: str) -> str:
    """The Recommendation's ``exported`` line: what ``model/model.json`` holds, how to apply it, how to change it."""
    return (
        f"`{name}` as `model/model.json` ({fmt}; `judgecal score --model <this run>` applies it; "
        f"`--set export={override}` exports another)"
    )
