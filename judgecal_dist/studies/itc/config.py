"""Settings of the itc study and the methods it compares: what its modules share."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from judgecal_dist.methods.repeated.self_consistency import SC_TIE_BREAKS
from judgecal_dist.settings import (
    Fraction,
    Probability,
    Resamples,
    Seed,
    SplitFields,
    Url,
    integer,
    listed,
    number,
    one_of,
    refuse,
)

#: Methods the study can score; ``davidson_<tie>`` are the Davidson tie links, ``davidson_accuracy`` the global
#: link with the 0/1-loss action (the mode instead of the median), ``rounded_median`` greedy decoding's rule on
#: the first two samples (the two orders with ``pool_orders``); the last four need confidences.
METHODS = (
    "davidson",
    "davidson_local",
    "davidson_local_intercept",
    "davidson_accuracy",
    "sc",
    "decisive_majority",
    "constant_tie",
    "rounded_median",
    "soft_sc_mean",
    "soft_sc_min",
    "soft_sc_product",
    "ci_sc",
)
BUDGET_SAMPLES = ("first", "random")
#: Davidson methods: (tie link, decision rule); "accuracy" predicts the mode of the fitted label distribution.
DAVIDSON_METHODS = {
    "davidson": ("global", "mae"),
    "davidson_local": ("local", "mae"),
    "davidson_local_intercept": ("local_intercept", "mae"),
    "davidson_accuracy": ("global", "accuracy"),
}
CONFIDENCE_METHODS = ("soft_sc_mean", "soft_sc_min", "soft_sc_product", "ci_sc")


class Config(SplitFields):
    """Settings of the itc study (``studies/configs/itc.yaml``); every key can be ``--set``."""

    data_required: ClassVar[str] = "an ingested dataset URL, or synthetic:g2"

    data: Url = Field(default=None, examples=["synthetic:g2"], description="an ingested dataset URL, or synthetic:g2")
    calib_fraction: Fraction = 0.05
    split: Annotated[str, one_of(("item", "group"))] = "item"
    budgets: Annotated[tuple[Annotated[int, integer(1)], ...], listed(min_length=1)] = (2, 4, 6, 8)
    budget_samples: Annotated[str, one_of(BUDGET_SAMPLES)] = Field(
        default="first",
        description="first: the first n samples of every item (nested, the same in every split); random: a random "
        "n of each item's samples, drawn anew per split (nested within a split)",
    )
    pool_orders: bool = Field(
        default=False,
        description="treat <judge>/ab and <judge>/ba (LLMBar's two presentation orders) as one judge whose "
        "samples alternate the orders: gives greedy decoding's two-order rule and the positional-bias table",
    )
    methods: Annotated[tuple[Annotated[str, one_of(METHODS)], ...], listed(min_length=1)] = (
        "davidson",
        "sc",
        "decisive_majority",
        "constant_tie",
        "rounded_median",
        *CONFIDENCE_METHODS,
    )
    sc_tie_break: Annotated[str, one_of(SC_TIE_BREAKS)] = "zero"
    export: Annotated[str, one_of(("auto", *DAVIDSON_METHODS))] = Field(
        default="auto",
        description="the Davidson variant exported as model/model.json (fitted per judge on every labelled item at "
        "the largest budget); auto: the one with the lowest mean MAE there",
    )
    n_starts: Annotated[int, integer(1, 1_000)] = 5
    permutations: Resamples = 100
    significance: Fraction = 0.05
    orientation_seed: Seed = 0
    synthetic_items: Annotated[int, integer(2, 10_000_000)] = 4000
    synthetic_propensities: Annotated[tuple[Annotated[float, number()], ...], listed(min_length=1)] = (-1.0, 0.0, 1.0)
    # The G2 generator's label prior (P(B), P(tie), P(A)), the same for every judge (one per propensity).
    synthetic_prior: tuple[Probability, Probability, Probability] = (0.25, 0.5, 0.25)
    synthetic_seed: Seed = 0

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.data and self.data.startswith("synthetic:") and self.data != "synthetic:g2":
            raise refuse("data", self.data, "must be a dataset URL or synthetic:g2 (the only generator)")
        if self.pool_orders and self.data and self.data.startswith("synthetic:"):
            raise refuse("pool_orders", True, "applies to datasets with /ab and /ba judges; synthetic:g2 has none")
        if abs(sum(self.synthetic_prior) - 1.0) > 1e-9:
            allowed = "must hold P(B), P(tie), P(A), summing to 1"
            raise refuse("synthetic_prior", list(self.synthetic_prior), allowed)
        return self
