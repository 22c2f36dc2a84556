"""The answer a study gives, stated first: what to use, what to expect, the runner-up and when the answer changes.

Every study's ``summarise`` builds one :class:`Recommendation` from its own summary table and hands it to
:class:`~judgecal_dist.studies.base.StudyResult`, which opens ``report.md`` with :meth:`Recommendation.markdown`
and stores :meth:`Recommendation.record` as ``summary.json`` ``recommendation`` (what ``judgecal run`` prints).
Intervals are never computed here: :func:`estimate` only formats the ``<metric>_ci_low``/``<metric>_ci_high``
columns the study wrote, through :mod:`~judgecal_dist.studies.report_kit`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from judgecal_dist.io.records import json_records
from judgecal_dist.studies.report_kit import MISSING, number, row_interval

__all__ = [
    "AGGREGATOR_ORDER",
    "CALIBRATOR_ORDER",
    "RULES",
    "Choice",
    "Recommendation",
    "candidate_name",
    "choose",
    "compare_words",
    "deployable",
    "estimate",
    "overlap",
    "pipeline_words",
    "preview",
    "read_choices",
    "rule_words",
    "runner_up_words",
    "words",
]


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
    return f"{metric if label is None else label} {row_interval(row, metric, spec)}".lstrip()


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
    rule : str
        How the answer was chosen (:func:`rule_words`, for pipeline recommendations).
    others : sequence of str
        What the other studies of this dataset chose and how it compares (:func:`compare_words`); may be empty.
    choice : mapping
        The chosen pipeline as other studies read it (:meth:`Choice.record`); empty for other kinds of answer.
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
    rule: str = ""
    others: Sequence[str] = ()
    choice: Mapping[str, Any] = field(default_factory=dict)

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
        if self.rule:
            lines.append(f"- **Rule:** {self.rule}")
        if len(self.others) == 1:
            lines.append(f"- **Other studies:** {self.others[0]}")
        elif self.others:
            lines += ["- **Other studies:**", *(f"  - {text}" for text in self.others)]
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
            "rule": self.rule,
            "others": list(self.others),
            "choice": dict(self.choice),
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
    if recommendation.get("rule"):
        lines.append(f"  rule: {recommendation['rule']}")
    lines += [f"  other studies: {text}" for text in recommendation.get("others", [])]
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
        out[metric] = ["" if number(r[metric]) == MISSING else row_interval(r, metric) for _, r in rows.iterrows()]
    return out


def exported_model(name: str, fmt: str, override: str) -> str:
    """The Recommendation's ``exported`` line: what ``model/model.json`` holds, how to apply it, how to change it."""
    return (
        f"`{name}` as `model/model.json` ({fmt}; `judgecal score --model <this run>` applies it; "
        f"`--set export={override}` exports another)"
    )


# -- the one rule every pipeline recommendation follows (inclusion, budget, fit) -------------------------------------

#: Simplest first: the one-standard-error rule moves toward these (after fewer judges).
CALIBRATOR_ORDER = ("none", "temperature", "platt", "beta", "isotonic")
AGGREGATOR_ORDER = ("majority", "accuracy_weighted", "log_odds", "one_coin", "dawid_skene", "stacking")
RULES = ("one_se", "lowest")
#: The rule in the words every report uses.
RULE_TEXT = {
    "one_se": "the lowest NLL, then, among the deployable pipelines within one standard error of it, the fewest "
    f"judges, then the simplest calibrator ({' < '.join(CALIBRATOR_ORDER)}), then the simplest aggregator "
    f"({' < '.join(AGGREGATOR_ORDER)}) (Breiman et al. 1984's one-SE rule)",
    "lowest": "the lowest NLL among the deployable pipelines",
}
#: What may be recommended (and so exported): a fixed judge list or one chosen by a rule on calibration data alone
#: that the export refits on the labelled items (``all``, ``dedup``, ``topK``). Everything else in a table
#: (oracle, random and l1 panels, scope arms, searched panels) is reported beside it, never recommended.
NOT_DEPLOYABLE = (
    "diagnostic and scope arms (oracle panels are chosen on evaluation labels; random, l1, operating and no_p3 "
    "are diagnostics) and searched panels (a search is not refitted by the export) are reported, never recommended"
)


def candidate_name(aggregator: str, calibrator: str, panel: str) -> str:
    """``aggregator+calibrator@panel``: how reports, ``export`` and other studies name a pipeline."""
    return f"{aggregator}+{calibrator}@{panel}"


def deployable(panel: str) -> bool:
    """Whether a pipeline on ``panel`` may be recommended and exported (:data:`NOT_DEPLOYABLE`)."""
    from judgecal_dist.methods.pipeline import PANELS
    from judgecal_dist.settings import TopK

    return panel in PANELS or TopK.fullmatch(panel) is not None


def standard_error(table: pd.DataFrame, level: float) -> pd.Series:
    """The NLL standard error of each row: the ``se`` column where the study has one (``judgecal fit``: SD of the
    item losses over sqrt(n)), else the half-width of the study's ``level`` NLL interval over its normal quantile
    (the interval the report prints, so the rule and the report read the same uncertainty)."""
    from scipy.stats import norm

    if "se" in table:
        return table["se"].astype(float)
    if {"nll_ci_low", "nll_ci_high"} <= set(table.columns):
        return (table["nll_ci_high"] - table["nll_ci_low"]).astype(float) / (2 * norm.ppf(0.5 + level / 2))
    return pd.Series(0.0, index=table.index)


@dataclass(frozen=True)
class Choice:
    """What the rule chose from a candidate table.

    Attributes
    ----------
    chosen, runner_up : Series
        The recommended row and the best other deployable row (the chosen row again when it is the only one).
    best : Series
        The deployable row with the lowest NLL (the chosen one under rule ``lowest``).
    reported : DataFrame
        Rows that are never recommended (:func:`deployable` false), lowest NLL first.
    """

    chosen: pd.Series
    runner_up: pd.Series
    best: pd.Series
    reported: pd.DataFrame

    @property
    def name(self) -> str:
        return candidate_name(str(self.chosen["aggregator"]), str(self.chosen["calibrator"]), str(self.chosen["panel"]))

    def record(self) -> dict[str, Any]:
        """The choice as other studies read it (``summary.json`` ``recommendation.choice``)."""
        row = self.chosen
        out: dict[str, Any] = {
            "candidate": self.name,
            **{k: str(row[k]) for k in ("aggregator", "calibrator", "panel")},
        }
        for key in ("nll", "nll_ci_low", "nll_ci_high"):
            if key in row and number(row[key]) != MISSING:
                out[key] = float(row[key])
        return out


def choose(table: pd.DataFrame, rule: str = "one_se", *, level: float = 0.95, judges: str = "n_judges") -> Choice:
    """The rule's pick from ``table`` (one row per pipeline: ``aggregator``, ``calibrator``, ``panel``, ``nll``,
    the judges column ``judges``, and ``se`` or the NLL interval columns; see :func:`standard_error`).

    Raises
    ------
    ValueError
        If no row is deployable (the study's config validators keep ``all`` in every candidate set).
    """
    ok = table["panel"].map(deployable).astype(bool)
    pool = table[ok].sort_values("nll", kind="stable")
    if pool.empty:
        raise ValueError("no deployable pipeline among the candidates (panels must hold all)")
    best = pool.iloc[0]
    chosen = best
    if rule == "one_se":
        near = pool[pool["nll"] <= best["nll"] + standard_error(pool, level).loc[best.name]]
        ranks = pd.DataFrame(
            {
                "judges": near[judges].round() if judges in near else 0,
                "cal": near["calibrator"].map(lambda c: CALIBRATOR_ORDER.index(c) if c in CALIBRATOR_ORDER else 99),
                "agg": near["aggregator"].map(lambda a: AGGREGATOR_ORDER.index(a) if a in AGGREGATOR_ORDER else 99),
                "nll": near["nll"],
            },
            index=near.index,
        )
        chosen = near.loc[ranks.sort_values(["judges", "cal", "agg", "nll"], kind="stable").index[0]]
    others = pool.drop(index=chosen.name)
    runner = others.iloc[0] if len(others) else chosen
    return Choice(chosen, runner, best, table[~ok].sort_values("nll", kind="stable"))


def pipeline_words(row: Mapping[str, Any] | pd.Series, n_judges: int | None = None) -> str:
    """``"<aggregator> + <calibrator> on <panel>"``: how every report names a pipeline."""
    panel = str(row["panel"])
    where = f"the {panel} panel" if panel != "all" else (f"all {n_judges} judges" if n_judges else "all judges")
    return f"{row['aggregator']} + {row['calibrator']} on {where}"


def runner_up_words(choice: Choice, n_judges: int | None = None) -> str:
    """The runner-up line: its NLL and whether its interval overlaps the recommendation's."""
    if choice.runner_up is choice.chosen:
        return "none (one deployable pipeline)"
    second = choice.runner_up
    tie = overlap(choice.chosen, second, "nll")
    return f"{pipeline_words(second, n_judges)}: {estimate(second, 'nll', 'NLL')}" + (
        " (intervals overlap: interchangeable on this data)" if tie else " (intervals separate)"
    )


def rule_words(choice: Choice, rule: str, n_judges: int | None = None) -> str:
    """The Rule line: the rule, what it moved from (when it is not the lowest NLL), what is never recommended."""
    text = RULE_TEXT[rule]
    if choice.best.name != choice.chosen.name:
        text += (
            f"; the lowest NLL is {pipeline_words(choice.best, n_judges)} ({estimate(choice.best, 'nll', 'NLL')}), "
            "within one SE of this simpler one"
        )
    if len(choice.reported):
        top = choice.reported.iloc[0]
        text += (
            f". Not recommended: {len(choice.reported)} diagnostic, scope or searched arm(s), the best of them "
            f"{pipeline_words(top, n_judges)} ({estimate(top, 'nll', 'NLL')}): {NOT_DEPLOYABLE}"
        )
    return text


# -- what the other studies chose (``compare``) -----------------------------------------------------------------------

#: How each study measures NLL: why two studies on one dataset can choose differently under the same rule.
PROTOCOL = {
    "inclusion": "mean evaluation NLL over random calibration/evaluation splits",
    "budget": "mean evaluation NLL over splits with the whole calibration half as the label budget",
    "fit": "cross-fitted NLL over folds of all labelled items",
}


def read_choices(urls: Sequence[str], storage_options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The recommendation of each finished study run in ``urls`` (``compare``): study, run folder and choice.

    Read when the study loads its data, so a wrong folder fails before anything is written.

    Raises
    ------
    ConfigError
        A folder without a finished run's ``summary.json``, or one whose recommendation names no pipeline.
    """
    from judgecal_dist.errors import ConfigError
    from judgecal_dist.io.filesystem import join_path, open_fs, read_json_file

    out = []
    for url in urls:
        fs, path = open_fs(url, dict(storage_options or {}))
        where = join_path(path, "summary.json")
        if not fs.exists(where):
            raise ConfigError(
                f"compare: {url}: no summary.json; give the folder of a finished inclusion, budget or fit run"
            )
        doc = read_json_file(fs, where, url=f"{url}/summary.json")
        choice = (doc.get("recommendation") or {}).get("choice") if isinstance(doc, dict) else None
        if not choice:
            raise ConfigError(
                f"compare: {url}: its recommendation names no pipeline; compare inclusion, budget or fit runs"
            )
        out.append({"study": str(doc.get("study", "?")), "run": url.rstrip("/").rsplit("/", 1)[-1], "choice": choice})
    return out


def compare_words(mine: Mapping[str, Any], study: str, others: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per other study's choice against this study's (``mine``, a :meth:`Choice.record`): the same
    pipeline or not, whether the NLL intervals overlap, and why they may differ (the same rule, another way of
    measuring NLL)."""
    lines = []
    for other in others:
        theirs = other["choice"]
        said = f"{other['study']} (run {other['run']}) chose {pipeline_words(theirs)}"
        if "nll" in theirs:
            said += f": {estimate(theirs, 'nll', 'NLL')}"
        if theirs["candidate"] == mine["candidate"]:
            lines.append(f"{said}: the same pipeline")
            continue
        tie = overlap(mine, theirs, "nll")
        why = f"{PROTOCOL.get(other['study'], other['study'])} there, {PROTOCOL.get(study, study)} here"
        lines.append(
            f"{said}: "
            + ("intervals overlap, so the two are interchangeable" if tie else "intervals separate")
            + f"; the rule is the same, the NLL is measured differently ({why})"
        )
    return lines
