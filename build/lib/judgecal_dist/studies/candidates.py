"""The candidate pipelines a panel study compares: one declaration for ``judgecal fit`` and the inclusion study."""

from __future__ import annotations

from pydantic import Field

from judgecal_dist.methods.pipeline import AGGREGATORS, CALIBRATOR_INPUTS, CALIBRATORS, PANELS
from judgecal_dist.settings import Fraction, TypedSettings, listed, one_of

__all__ = ["CandidateFields"]


class CandidateFields(TypedSettings):
    """Candidates (aggregators x calibrators x panels), the calibrators' input, conformal levels and the export.

    Each study checks ``panels`` (the inclusion study also takes diagnostic and search panels) and ``export``
    against the lists in its own validator.
    """

    aggregators: listed(one_of(AGGREGATORS), min_length=1) = AGGREGATORS
    calibrators: listed(one_of(CALIBRATORS), min_length=1) = CALIBRATORS
    panels: listed(str, min_length=1) = PANELS
    calibrator_input: one_of(CALIBRATOR_INPUTS) = Field(
        default="logit", description="what the calibrators read: the aggregator's log-odds or its probability"
    )
    conformal_alphas: listed(Fraction) = (0.1, 0.2)
    export: str = Field(
        default="auto",
        description="the pipeline exported as model/model.json: auto (the run's choice) or a candidate "
        "aggregator+calibrator@panel",
    )
