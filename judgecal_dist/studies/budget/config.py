"""Settings of the budget study, the input every replicate receives and a replicate: what its modules share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field, model_validator

from judgecal_dist.engine.jobs.panel import ORIENTATIONS, Panel
from judgecal_dist.methods.pipeline import AGGREGATORS
from judgecal_dist.settings import (
    AggregationFields,
    Count,
    Fraction,
    NonNegative,
    PipelineFields,
    Resamples,
    SplitFields,
    check_export,
    integer,
    listed,
    one_of,
    refuse,
)
from judgecal_dist.studies.candidates import RecommendFields

MODES = ("budget", "fraction")
#: Calibrators of the H.7 matched-calibrator sweep (all-judges one-coin fixed).
CALIBRATORS = ("beta", "platt", "temperature")
#: Spec §5.4 fractions (endpoints from the paper, interior points recommended).
#: Splits budget mode needs: its max-t test compares the arms over the splits.
MIN_BUDGET_REPLICATES = 2
FRACTIONS = (0.05, 0.10, 0.15, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70)


class Config(SplitFields, RecommendFields, PipelineFields, AggregationFields):
    """Settings of the budget study (``studies/configs/budget.yaml``); every key can be ``--set``.

    The pipeline hyperparameters (``eps``, ``alpha0``, ``beta_penalty``, ``n_bins``, ...) are the shared
    :class:`~judgecal_dist.settings.PipelineFields`.
    """

    data_required: ClassVar[str] = "an ingested dataset URL"
    # The schema states the bound the validator below checks: replicates >= 2 unless mode is fraction.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"mode": {"const": "budget"}}},
            "then": {"properties": {"replicates": {"minimum": MIN_BUDGET_REPLICATES}}},
        }
    )

    dataset: str | None = None
    mode: Annotated[str, one_of(MODES)] = "budget"
    calib_fraction: Fraction = 0.5
    budgets: Annotated[
        tuple[Annotated[int, integer(2)], ...],
        listed(description="labels per budget ([] = the paper's grid by panel size)"),
    ] = ()
    fractions: Annotated[tuple[Fraction, ...], listed(min_length=1)] = FRACTIONS
    top_k: Annotated[int, integer(1)] = 5
    calibrators: Annotated[tuple[Annotated[str, one_of(CALIBRATORS)], ...], listed(min_length=1)] = CALIBRATORS
    aggregators: Annotated[tuple[Annotated[str, one_of(AGGREGATORS)], ...], listed(min_length=1)] = Field(
        default=("one_coin", "stacking"),
        description="aggregators swept on all judges at every budget, each uncalibrated and with every calibrator "
        "(one_coin, always included, also runs the top-k' arm and the max-t test); add the aggregator the "
        "inclusion study recommends to check its label needs (budget mode)",
    )
    platt_penalty: NonNegative = 0.0
    orientation: Annotated[str, one_of(ORIENTATIONS)] = "natural"
    sample: Count = 0
    max_t_alpha: Fraction = 0.05
    max_t_resamples: Resamples = 10_000
    max_t_alternative: Annotated[str, one_of(("greater", "two-sided"))] = "greater"
    export: str = Field(
        default="auto",
        description="the pipeline exported as model/model.json, fitted on every labelled item: auto (the "
        "recommended arm) or one_coin+<calibrator>@<all or topK>",
    )

    @model_validator(mode="after")
    def _check(self) -> Config:
        if "one_coin" not in self.aggregators:
            raise refuse("aggregators", list(self.aggregators), "must hold one_coin (the arms of the max-t test)")
        check_export(self.export, self.aggregators, ("none", "beta", *self.calibrators), ("all", f"top{self.top_k}"))
        if self.mode == "budget" and self.replicates < MIN_BUDGET_REPLICATES:
            allowed = f"must be an integer >= {MIN_BUDGET_REPLICATES} in budget mode (the max-t test)"
            raise refuse("replicates", self.replicates, allowed)
        return self


@dataclass(frozen=True)
class BudgetInput:
    """What every replicate receives: the dense panel and the budget grid fixed for the whole run.

    Attributes
    ----------
    panel : Panel
    budgets : tuple of int
        Grid budgets below the smallest calibration half of the planned splits; every split adds its full
        calibration half :math:`|\\mathcal C_s|` as the last budget.
    dropped : tuple of int
        Grid budgets left out because some planned split has no more calibration items than that.
    grid : str
        Where the grid came from (``config``, ``llmbar-size`` or ``large``).
    cal_sizes : ndarray of int64
        :math:`|\\mathcal C_s|` of every planned split (budget mode) or :math:`|\\mathcal C|` per split x fraction.
    others : tuple of dict
        The other studies' choices named by ``compare`` (:func:`~judgecal_dist.studies.recommendation.read_choices`).
    """

    panel: Panel
    budgets: tuple[int, ...]
    dropped: tuple[int, ...]
    grid: str
    cal_sizes: npt.NDArray[np.int64] = field(repr=False)
    others: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Replicate:
    """One split; ``budgets`` is the run's grid (without the full budget, which each split adds)."""

    seed: int
    config: Config
    budgets: tuple[int, ...]
