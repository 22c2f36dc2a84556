"""The study contract: ``plan(config, data) -> [Replicate]``, ``run_replicate(data, rep) -> table``, ``summarise``.

A study module exposes:

``NAME``                    its name (the ``study:`` key of a config, the results folder)
``Config``                  its typed settings (a frozen model of :mod:`judgecal_dist.settings`): every key, type
                            and allowed range, checked before anything runs; the shared ones (``data``,
                            ``ci_level``, ``replicates``, ``seed``, the pipeline's) from their one declaration
                            there (:class:`~judgecal_dist.settings.StudyFields` and the other bases)
``load(config, engine)``    the shared input (validated before anything is written); put in Ray's store once
``preflight(config, data)`` optional: the data-dependent checks (:mod:`judgecal_dist.studies.preflight`), run
                            by the runner after ``load`` and before anything is written
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
from judgecal_dist.studies.report_kit import interval_note  # re-exported: studies import it from here

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


class StudyModule(Protocol):
    NAME: str
    Config: type[StudyFields]

    def load(self, config: Any, engine: EngineConfig) -> Any: ...

    def plan(self, config: Any, data: Any) -> list[Any]: ...

    def run_replicate(self, data: Any, replicate: Any) -> pd.DataFrame: ...

    def summarise(self, config: Any, parts: pd.DataFrame, data: Any) -> StudyResult: ...
