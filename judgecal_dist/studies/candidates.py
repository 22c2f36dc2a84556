"""The candidate pipelines a panel study compares: one declaration for ``judgecal fit`` and the inclusion study."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from judgecal_dist.methods.pipeline import AGGREGATORS, CALIBRATORS, PANELS
from judgecal_dist.settings import Fraction, TypedSettings, listed, one_of

__all__ = ["CandidateFields"]


class CandidateFields(TypedSettings):
    """Candidates (aggregators x calibrators x panels), the calibrators' input, conformal levels and the export.

    Each study checks ``panels`` (the inclusion study also takes diagnostic and search panels) and ``export``
    against the lists in its own validator.
    """

    aggregators: Annotated[tuple[Annotated[str, one_of(AGGREGATORS)], ...], listed(min_length=1)] = AGGREGATORS
    calibrators: Annotated[tuple[Annotated[str, one_of(CALIBRATORS)], ...], listed(min_length=1)] = CALIBRATORS
    panels: Annotated[tuple[str, ...], listed(min_length=1)] = PANELS
    conformal_alphas: Annotated[tuple[Fraction, ...], listed()] = (0.1, 0.2)
    export: str = Field(
        default="auto",
        description="the pipeline exported as model/model.json: auto (the run's choice) or a candidate "
        "aggregator+calibrator@panel",
    )
