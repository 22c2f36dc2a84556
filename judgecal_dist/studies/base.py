"""The study contract: ``plan(config, data) -> [Replicate]``, ``run_replicate(data, rep) -> table``, ``summarise``.

A study module exposes:

``NAME``                    its name (the ``study:`` key of a config, the results folder)
``Config``                  its typed settings (a frozen model of :mod:`judgecal_dist.settings`): every key, type
                            and allowed range, checked before anything runs; the shared ones (``data``,
                            ``ci_level``, ``replicates``, ``seed``, the pipeline's) from their one declaration
                            there (:class:`~judgecal_dist.settings.StudyFields` and the other bases)
``load(config, engine)``    the shared input (validated before anything is written); put in Ray's store once
``plan(config, data)``      the replicates, each a frozen object with a ``seed``
``run_replicate(data, rep)`` pure and seeded: same data and replicate give the same table on any engine
``summarise(config, parts, data)`` -> :class:`StudyResult`
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.settings import StudyFields
from judgecal_dist.studies.recommendation import Recommendation

__all__ = ["StudyResult", "StudyModule", "interval_note"]


@dataclass
class StudyResult:
    """What a study's ``summarise`` returns; the runner writes each part of it into the run folder.

    Attributes
    ----------
    records : list of dict
        Flat records for ``summary.json`` ``results`` (metric names as keys, ``<metric>_ci_low/high`` beside).
    summary : DataFrame
        The same records as a table (``summary.parquet``).
    report : str
        ``report.md`` (Markdown).
    figures : dict of str to bytes
        PNG files for ``figures/``.
    model : dict of str to dict or bytes
        JSON documents for ``model/`` (fitted models as data; never a pickle), and the files a document names
        beside it (bytes: a flow corrector's weights).
    extra : dict
        Further top-level sections of ``summary.json``.
    recommendation : Recommendation, optional
        The study's answer: it opens ``report.md`` (right after the title) and becomes ``summary.json``
        ``recommendation``, which ``judgecal run`` prints.
    """

    records: list[dict[str, Any]]
    summary: pd.DataFrame
    report: str
    figures: dict[str, bytes] = field(default_factory=dict)
    model: dict[str, dict[str, Any] | bytes] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    recommendation: Recommendation | None = None

    def __post_init__(self) -> None:
        # One place puts the answer first, so no study can bury it under its evidence.
        if self.recommendation is not None:
            self.report = self.recommendation.insert_into(self.report)
            self.extra = {"recommendation": self.recommendation.record()} | self.extra


def interval_note(
    confidence: float, *, shared_items: bool = True, bootstrap_over: str | None = None, resamples: int | None = None
) -> str:
    """The one sentence a report gives on its intervals, and why they are what they are.

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

    Examples
    --------
    >>> interval_note(0.95, shared_items=False)
    '95% intervals are t intervals over the replicates: each replicate draws fresh data, so replicates are independent.'
    >>> interval_note(0.9, bootstrap_over="examples", resamples=2000)[:74]
    '90% intervals are percentile bootstraps over the examples (2000 resamples)'
    """
    level = f"{confidence * 100:g}%"
    if bootstrap_over is not None:
        count = f" ({resamples} resamples)" if resamples else ""
        return (
            f"{level} intervals are percentile bootstraps over the {bootstrap_over}{count}: each resample redraws the "
            f"{bootstrap_over} the estimate averages over, so the width is that of the data, not of a replicate count."
        )
    if not shared_items:
        return (
            f"{level} intervals are t intervals over the replicates: each replicate draws fresh data, so replicates "
            "are independent."
        )
    return (
        f"{level} intervals are corrected resampled t intervals over the splits (Nadeau and Bengio 2003): every split "
        "re-uses the same items, so a bootstrap over split means would narrow as splits are added whatever the data; "
        "the correction widens the variance by n_eval/n_cal and the width stays that of the data."
    )


class StudyModule(Protocol):
    NAME: str
    Config: type[StudyFields]

    def load(self, config: Any, engine: EngineConfig) -> Any: ...

    def plan(self, config: Any, data: Any) -> list[Any]: ...

    def run_replicate(self, data: Any, replicate: Any) -> pd.DataFrame: ...

    def summarise(self, config: Any, parts: pd.DataFrame, data: Any) -> StudyResult: ...
