"""The one place a report, card or recommendation formats its numbers, intervals, tables and sections.

Reports are Markdown. Every study builds its tables with :func:`markdown_table`, its numbers with :func:`number`,
:func:`percent` and :func:`p_value`, its ``value [low, high]`` cells with :func:`interval` and
:func:`bracket` (or :func:`row_interval` from a row's ``<metric>_ci_low``/``<metric>_ci_high`` columns) and its headed blocks with
:func:`section`, so a report says what its study found and none of them re-decides how a number looks.
Undefined numbers (None, NaN, infinities, text that is not a number) print as ``n/a``.

tabulate (behind ``DataFrame.to_markdown``) is not a dependency of the package, so the pipe table is built here,
once.

Examples
--------
>>> print("\\n".join(markdown_table(["judge", "NLL"], [["a", number(0.31234)], ["b", number(None)]])))
| judge | NLL |
| --- | --- |
| a | 0.3123 |
| b | n/a |
>>> interval(0.5, 0.41, 0.59, level=0.95)
'0.5000 [95%: 0.4100, 0.5900]'
>>> percent(0.1234), p_value(0.00001), p_value(0.0312)
('12.34%', 'p < 0.0001', 'p = 0.0312')
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judgecal_dist.stats.intervals import method_sentence

__all__ = [
    "MISSING",
    "Claim",
    "Here",
    "PaperClaims",
    "bracket",
    "interval",
    "interval_note",
    "level_text",
    "markdown_table",
    "mean_se",
    "number",
    "p_value",
    "paper_and_here",
    "percent",
    "row_interval",
    "section",
]

#: What an undefined number prints as.
MISSING = "n/a"


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or None (None, NaN, infinities and non-numbers are undefined)."""
    if isinstance(value, bool):
        return float(value)
    try:
        number_ = float(value)
    except (TypeError, ValueError):
        return None
    return number_ if math.isfinite(number_) else None


def number(value: Any, spec: str = ".4f", *, missing: str = MISSING) -> str:
    """``value`` formatted with a format ``spec`` (``".4f"``, ``"+.3f"``, ``".3g"``, ``","``); ``missing`` where undefined.

    Examples
    --------
    >>> number(0.123456), number(-0.02, "+.3f"), number(float("nan")), number(12345, ",")
    ('0.1235', '-0.020', 'n/a', '12,345')
    """
    x = _finite(value)
    if x is None:
        return missing
    if spec.endswith("d") or spec == ",":  # integer specs: counts stored as floats
        return format(round(x), spec)
    return format(x, spec)


def percent(value: Any, digits: int = 2, *, sign: bool = False, symbol: bool = True, missing: str = MISSING) -> str:
    """A share (0.1234) as a percentage (``"12.34%"``; ``symbol=False``: ``"12.34"``, for a column headed in %).

    Examples
    --------
    >>> percent(0.5), percent(0.0312, 1, sign=True), percent(0.25, symbol=False), percent(None, missing="—")
    ('50.00%', '+3.1%', '25.00', '—')
    """
    x = _finite(value)
    if x is None:
        return missing
    return format(100 * x, f"{'+' if sign else ''}.{digits}f") + ("%" if symbol else "")


def p_value(p: Any, *, floor: float = 1e-4, prefix: bool = True, missing: str = MISSING) -> str:
    """A p-value as ``"p = 0.0312"``; below ``floor`` as ``"p < 0.0001"`` (never ``p = 0``).

    Examples
    --------
    >>> p_value(0.5), p_value(0.0), p_value(0.2, prefix=False)
    ('p = 0.5000', 'p < 0.0001', '0.2000')
    """
    x = _finite(p)
    if x is None:
        return missing
    digits = max(0, -math.floor(math.log10(floor)))
    text = f"< {floor:.{digits}f}" if x < floor else f"= {x:.{digits}f}"
    return f"p {text}" if prefix else text.removeprefix("= ")


def level_text(level: float) -> str:
    """A confidence level as report text: ``0.95`` -> ``"95%"``."""
    return f"{100 * level:g}%"


def bracket(low: Any, high: Any, spec: str = ".4f", *, level: float | None = None, missing: str = MISSING) -> str:
    """An interval alone, ``"[low, high]"``, with the level inside when given (``"[95%: 0.41, 0.59]"``).

    Examples
    --------
    >>> bracket(0.1, 0.2, ".2f"), bracket(-0.02, None, "+.3f")
    ('[0.10, 0.20]', '[-0.020, n/a]')
    """
    head = f"{level_text(level)}: " if level is not None else ""
    return f"[{head}{number(low, spec, missing=missing)}, {number(high, spec, missing=missing)}]"


def interval(
    value: Any, low: Any, high: Any, spec: str = ".4f", *, level: float | None = None, missing: str = MISSING
) -> str:
    """``"value [low, high]"``, with the level inside the bracket when given (``"0.50 [95%: 0.41, 0.59]"``).

    Examples
    --------
    >>> interval(0.1, -0.02, 0.2, "+.3f")
    '+0.100 [-0.020, +0.200]'
    """
    return f"{number(value, spec, missing=missing)} {bracket(low, high, spec, level=level, missing=missing)}"


def interval_note(
    confidence: float,
    *,
    shared_items: bool = True,
    bootstrap_over: str | None = None,
    resamples: int | None = None,
    spread_over_splits: bool = False,
) -> str:
    """The one sentence a report gives on its intervals: which method, why, and how it stays in the metric's range.

    Every interval a study prints comes from :mod:`judgecal_dist.stats.intervals`; this names its method.

    Parameters
    ----------
    confidence : float
        The intervals' level.
    shared_items : bool, default True
        Replicates are splits of one dataset (corrected resampled t) or, False, independent draws of fresh data
        (t over the replicates).
    bootstrap_over : str, optional
        The intervals are instead a percentile bootstrap that redraws these units (e.g. ``"examples"``, ``"groups
        of linked items"``) of one evaluation; ``resamples`` is its number of resamples.
    spread_over_splits : bool, default False
        The intervals are the mean +- 1.96 SD/sqrt(S) over the splits that a method's paper prints as error bars
        (the itc study): they describe the spread over splits, not the uncertainty of the data.

    Examples
    --------
    >>> interval_note(0.95, shared_items=False)[:104]
    '95% intervals are t intervals over the replicates: each replicate draws fresh data, so replicates are in'
    >>> interval_note(0.9, bootstrap_over="examples", resamples=2000)[:74]
    '90% intervals are percentile bootstraps over the examples (2000 resamples)'
    """
    level = f"{confidence * 100:g}%"
    if bootstrap_over is not None:
        count = f" ({resamples} resamples)" if resamples else ""
        return (
            f"{level} intervals are percentile bootstraps over the {bootstrap_over}{count}: each resample redraws the "
            f"{bootstrap_over} the estimate averages over, so the width is that of the data, not of a replicate "
            "count, and the ends, means of values in the metric's range, stay in it."
        )
    if spread_over_splits:
        return (
            f"{level} intervals are the mean ± 1.96 SD/√S over the S splits, the error bars the method's paper "
            "prints: the splits re-use the same items, so they show the spread over splits rather than the "
            f"uncertainty of the data; {method_sentence(critical='normal')}."
        )
    if not shared_items:
        return (
            f"{level} intervals are t intervals over the replicates: each replicate draws fresh data, so replicates "
            f"are independent; {method_sentence()}."
        )
    return (
        f"{level} intervals are corrected resampled t intervals over the splits (Nadeau and Bengio 2003): every split "
        "re-uses the same items, so a bootstrap over split means would narrow as splits are added whatever the data; "
        "the correction widens the variance by n_eval/n_cal and the width stays that of the data; "
        f"{method_sentence()}."
    )


def mean_se(value: Any, se: Any, spec: str = ".4f", *, se_spec: str | None = None, missing: str = MISSING) -> str:
    """A mean with its standard error, ``"0.2031 ± 0.0012"`` (``se_spec`` defaults to ``spec`` without a sign).

    Examples
    --------
    >>> mean_se(0.0123, 0.004, "+.4f")
    '+0.0123 ± 0.0040'
    """
    se_spec = spec.replace("+", "") if se_spec is None else se_spec
    return f"{number(value, spec, missing=missing)} ± {number(se, se_spec, missing=missing)}"


def _get(row: Any, key: str) -> Any:
    # Mappings and Series look keys up; an itertuples row holds them as attributes (``in`` would test values).
    return row.get(key) if hasattr(row, "get") else getattr(row, key, None)


def row_interval(row: Any, metric: str, spec: str = ".4f", *, level: float | None = None) -> str:
    """:func:`interval` of ``row``'s ``metric`` and its ``<metric>_ci_low``/``<metric>_ci_high`` columns.

    ``row`` is a mapping, a pandas Series or an ``itertuples`` row. Without the interval columns only the value is
    given.

    Examples
    --------
    >>> row_interval({"nll": 0.3, "nll_ci_low": 0.28, "nll_ci_high": 0.32}, "nll")
    '0.3000 [0.2800, 0.3200]'
    >>> row_interval({"nll": 0.3}, "nll")
    '0.3000'
    """
    low, high = _get(row, f"{metric}_ci_low"), _get(row, f"{metric}_ci_high")
    has_interval = _has(row, f"{metric}_ci_low") and _has(row, f"{metric}_ci_high")
    value = _get(row, metric)
    return interval(value, low, high, spec, level=level) if has_interval else number(value, spec)


def _has(row: Any, key: str) -> bool:
    return key in row if hasattr(row, "get") else hasattr(row, key)


def _line(cells: Sequence[Any]) -> str:
    # A pipe inside a cell would split it; an empty cell is one space wide.
    text = (str(c).replace("|", "\\|") for c in cells)
    return "|" + "|".join(f" {t} " if t else " " for t in text) + "|"


def markdown_table(
    header: Sequence[Any], rows: Iterable[Sequence[Any]], *, align: Sequence[str] | None = None
) -> list[str]:
    """A Markdown pipe table as lines: header, rule and one line per row (cells as given, already formatted).

    Parameters
    ----------
    header : sequence
        Column headings.
    rows : iterable of sequences
        One sequence of cells per row, as many as ``header``.
    align : sequence of {"left", "right"}, optional
        Per column; right-aligned columns get a ``---:`` rule.

    Raises
    ------
    ValueError
        A row whose length differs from the header's.
    """
    rule = ["---:" if a == "right" else "---" for a in (align or ["left"] * len(header))]
    lines = [_line(header), _line(rule)]
    for row in rows:
        cells = list(row)
        if len(cells) != len(header):
            raise ValueError(f"table row has {len(cells)} cells, the header {len(header)}: {cells[:3]}")
        lines.append(_line(cells))
    return lines


def section(
    heading: str | None,
    *paragraphs: str,
    rows: list[str] | None = None,
    after: Sequence[str] = (),
    figure: tuple[str, str] | None = None,
    depth: int = 2,
) -> list[str]:
    """A report block as lines, each part after a blank line: heading, paragraphs, a table, closing paragraphs,
    a figure link.

    Parameters
    ----------
    heading : str or None
        Its title (``depth`` hashes); None: no heading.
    *paragraphs : str
        Text before the table (empty strings are skipped).
    rows : list of str, optional
        Table lines from :func:`markdown_table`.
    after : sequence of str
        Text after the table.
    figure : (alt text, relative path), optional
        A figure link, ``![alt](path)``.
    depth : int, default 2
        The heading level.

    Examples
    --------
    >>> section("Costs", "Per label.", rows=markdown_table(["a"], [[1]]), figure=("costs", "figures/costs.png"))
    ['', '## Costs', '', 'Per label.', '', '| a |', '| --- |', '| 1 |', '', '![costs](figures/costs.png)']
    """
    out: list[str] = []
    if heading is not None:
        out += ["", f"{'#' * depth} {heading}"]
    for text in paragraphs:
        if text:
            out += ["", text]
    if rows:
        out += ["", *rows]
    for text in after:
        if text:
            out += ["", text]
    if figure is not None:
        out += ["", f"![{figure[0]}]({figure[1]})"]
    return out


@dataclass(frozen=True)
class Claim:
    """One headline claim of a study's source paper, as the study declares it.

    Parameters
    ----------
    claim : str
        The claim in our words (plain: no section, table or theorem numbers a reader lacks).
    paper : str
        The paper's number or verdict, as text.
    key : str or None
        The key of our measurement in the mapping given to :func:`paper_and_here`; None: the data the claim needs
        is not ours, so it is listed as not reproducible.
    differs : str
        One line: why our number can differ from the paper's (the judge pool, absent data, the procedure).
    """

    claim: str
    paper: str
    key: str | None
    differs: str = ""


@dataclass(frozen=True)
class PaperClaims:
    """A study's declaration: the paper (by title) and its headline claims."""

    paper: str
    claims: tuple[Claim, ...]

    def keys(self) -> list[str]:
        """The measurement keys the claims read (the reproducible claims')."""
        return [c.key for c in self.claims if c.key is not None]


@dataclass(frozen=True)
class Here:
    """Our measurement for one claim: its text (a number with its interval, from :func:`interval`) and whether it
    agrees with the paper's claim (None: no verdict, e.g. the paper's number was lost).

    ``why`` replaces the claim's declared ``differs`` line where this run knows a more specific reason.
    """

    text: str
    agrees: bool | None = None
    why: str = ""


#: What a claim prints when this run did not measure it (its arm or its data was not in the run).
NOT_MEASURED = "not measured in this run"


def paper_and_here(declared: PaperClaims, measured: Mapping[str, Here], *, depth: int = 2) -> list[str]:
    """The "The paper and here" section: each headline claim of the paper, our number beside it and, where they
    differ, why in one line; the claims whose data we lack listed by name as not reproducible.

    Examples
    --------
    >>> claims = PaperClaims("A paper", (Claim("x is small", "0.10", "x", "a smaller pool"), Claim("y", "3", None, "no y")))
    >>> print("\\n".join(paper_and_here(claims, {"x": Here(interval(0.2, 0.1, 0.3, ".2f"), agrees=False)})))
    <BLANKLINE>
    ## The paper and here
    <BLANKLINE>
    Each headline claim of *A paper* that the data here can test, the paper's number and ours beside it (with its interval), and where they differ, why.
    <BLANKLINE>
    | claim | the paper | here | agrees | where they differ, why |
    | --- | --- | --- | --- | --- |
    | x is small | 0.10 | 0.20 [0.10, 0.30] | no | a smaller pool |
    <BLANKLINE>
    Not reproducible here (the data they need is absent):
    - y (the paper: 3): no y.
    """
    rows = []
    for c in declared.claims:
        if c.key is None:
            continue
        here = measured.get(c.key)
        if here is None:
            rows.append([c.claim, c.paper, NOT_MEASURED, "n/a", ""])
            continue
        agrees = {True: "yes", False: "no", None: "n/a"}[here.agrees]
        rows.append([c.claim, c.paper, here.text, agrees, "" if here.agrees else here.why or c.differs])
    absent = [f"- {c.claim} (the paper: {c.paper}): {c.differs}." for c in declared.claims if c.key is None]
    return section(
        "The paper and here",
        f"Each headline claim of *{declared.paper}* that the data here can test, the paper's number and ours beside "
        "it (with its interval), and where they differ, why.",
        rows=markdown_table(["claim", "the paper", "here", "agrees", "where they differ, why"], rows) if rows else None,
        after=["Not reproducible here (the data they need is absent):\n" + "\n".join(absent)] if absent else (),
        depth=depth,
    )
