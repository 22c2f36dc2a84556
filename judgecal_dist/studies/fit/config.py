"""Settings of ``judgecal fit`` (``conf/studies/fit.yaml``; every key can be ``--set``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from pydantic import model_validator

from judgecal_dist.methods.pipeline import PANELS, Settings
from judgecal_dist.settings import (
    AggregationFields,
    Count,
    PipelineFields,
    Resamples,
    Seed,
    StudyFields,
    check_export,
    check_panels,
    integer,
)
from judgecal_dist.studies.candidates import CandidateFields, RecommendFields
from judgecal_dist.studies.recommendation import candidate_name

__all__ = ["Config", "Replicate", "candidate_name"]


class Config(StudyFields, CandidateFields, RecommendFields, PipelineFields, AggregationFields):
    """Settings of ``judgecal fit``: the candidates, the cross-fitting and the choice rule.

    The candidates and ``export`` are the shared :class:`~judgecal_dist.studies.candidates.CandidateFields`:
    ``export`` is ``auto`` (the rule's choice) or a candidate ``aggregator+calibrator@panel`` to export instead;
    the card still reports the rule's choice beside it.
    """

    data_required: ClassVar[str] = "an ingested dataset URL"

    dataset: str | None = None
    sample: Count = 0
    seed: Seed = 0
    folds: Annotated[int, integer(2, 50, description="cross-fitting folds (grouped by group_id)")] = 5
    resamples: Resamples = 2000

    @model_validator(mode="after")
    def _check(self) -> Config:
        check_panels(self.panels, PANELS)
        check_export(self.export, self.aggregators, self.calibrators, self.panels)
        return self

    @property
    def settings(self) -> Settings:
        return Settings.of(self)


@dataclass(frozen=True)
class Replicate:
    """One cross-fitting fold: every candidate fitted on the other folds and scored on this one."""

    seed: int
    fold: int
