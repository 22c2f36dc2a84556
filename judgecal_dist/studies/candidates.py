"""The candidate pipelines a panel study compares, and how its recommendation is chosen and compared.

:class:`CandidateFields` is one declaration for ``judgecal fit`` and the inclusion study; :class:`RecommendFields`
(the rule and the other studies' runs to name) is shared by every study that recommends a pipeline (inclusion,
budget, fit), whose choice is :func:`judgecal_dist.studies.recommendation.choose`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from judgecal_dist.methods.pipeline import AGGREGATORS, CALIBRATORS, PANELS
from judgecal_dist.settings import Fraction, TypedSettings, listed, one_of
from judgecal_dist.studies.recommendation import RULES

__all__ = ["CandidateFields", "RecommendFields"]


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


class RecommendFields(TypedSettings):
    """How a pipeline study recommends: the rule, and finished runs of the other studies to name beside it."""

    rule: Annotated[str, one_of(RULES)] = Field(
        default="one_se",
        description="one_se: the lowest NLL, then within one SE of it the fewest judges, the simplest calibrator, "
        "the simplest aggregator | lowest: the lowest NLL (deployable panels only, either way)",
    )
    compare: Annotated[tuple[str, ...], listed()] = Field(
        default=(),
        description="result folders of finished inclusion, budget or fit runs on the same dataset: the "
        "recommendation names each one's choice and whether its NLL interval overlaps this run's",
    )
