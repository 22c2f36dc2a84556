"""Settings of the ensemble study and the input every replicate receives: what its modules share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import pandas as pd
from pydantic import Field, model_validator

from judgecal_dist.errors import InputError
from judgecal_dist.io.score_collections import Collection
from judgecal_dist.settings import (
    Fraction,
    NonNegative,
    Positive,
    Resamples,
    Seed,
    StudyFields,
    integer,
    listed,
    number,
    one_of,
    refuse,
)

JOIN_KEYS = ("subset_id", "id")
#: $ per million tokens (input, output), spec 004 §2.3 (paper Table 2).
PRICES: dict[str, tuple[float, float]] = {"full": (2.50, 15.00), "mini": (0.75, 4.50), "nano": (0.20, 1.25)}


class Config(StudyFields):
    """Settings of the ensemble study (``studies/configs/ensemble.yaml``); every key can be ``--set``."""

    data_required: ClassVar[str] = "an ingested rb2-k8 dataset URL"

    datasets: Annotated[tuple[str, ...], listed()] = ()
    replicates: Resamples = Field(default=2000, description="bootstrap resamples per condition")
    bootstrap_seed: Seed = 42
    prices: dict[str, tuple[NonNegative, NonNegative]] = Field(
        default_factory=lambda: dict(PRICES),
        description="$ per million tokens [input, output] per tier",
    )
    reference_tier: str = "full"
    cheap_tier: str = "mini"
    baseline_variant: str = "base"
    baseline_cost: NonNegative = 0.0
    join_key: Annotated[str, one_of(JOIN_KEYS)] = "subset_id"
    score_low: Annotated[float, number()] = 1.0
    score_high: Annotated[float, number()] = 10.0
    split_seed: Seed = 42
    test_fraction: Fraction = 0.2
    blend_steepness: Positive = 10.0
    varinf_budget: Positive = 2.0
    varinf_n_max: Annotated[int, integer(1, 1_000)] = 8
    export: Annotated[str, one_of(("auto", "most_accurate", "cheapest"))] = Field(
        default="auto",
        description="the threshold each collection's exported escalation policy takes on its cost-accuracy "
        "frontier: auto the cheapest within one accuracy point of the best, most_accurate, or cheapest",
    )
    engine_curve: bool = Field(
        default=True,
        description="also count accuracy vs k with the engine's one-pass job (Spark on tables above the in-memory budget) "
        "and check it against the study's curve",
    )

    @model_validator(mode="after")
    def _check(self) -> Config:
        if not self.score_low < self.score_high:
            raise refuse("score_high", self.score_high, f"must be above score_low={self.score_low}")
        return self


@dataclass(frozen=True)
class EnsembleInput:
    """What every unit receives: the score collections and the bad-input counts."""

    collections: tuple[Collection, ...]
    bad_input: dict[str, Any]
    #: The engine's accuracy-vs-k counts (``dataset, judge_id, k, rows, n, correct, n_tied``), with engine_curve.
    engine_curve: pd.DataFrame | None = None

    def get(self, dataset: str, variant: str) -> Collection:
        for c in self.collections:
            if c.dataset == dataset and c.prompt_variant == variant:
                return c
        raise InputError(f"collection {dataset}/{variant} not found")
