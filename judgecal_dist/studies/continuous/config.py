"""Settings of the continuous study and the input every replicate receives: what its modules share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

import pandas as pd
from pydantic import model_validator

from judgecal_dist.methods.continuous.score_flow import MASK_POLICIES
from judgecal_dist.settings import (
    CiLevel,
    Count,
    NonNegative,
    Positive,
    Probability,
    Replicates,
    SplitFields,
    integer,
    listed,
    one_of,
    refuse,
)

#: Flow variants: one shared flow with a learned rubric embedding, or one plain flow per rubric (the paper's fit).
FLOW_RUBRICS = ("shared", "per_rubric")

#: Correctors that export as a model (``raw`` is the judge's own score).
EXPORTABLE = ("linear_hb", "ot", "flow", "flow_per_rubric")


class Config(SplitFields):
    """Settings of the continuous study (``studies/configs/continuous.yaml``); every key can be ``--set``."""

    data_required: ClassVar[str] = "the RewardBench 2 k=8 folder or an ingested dataset URL"

    judges: Annotated[tuple[str, ...], listed()] = ("nano", "mini")
    synthetic: bool = True
    variant: str = "base"
    budgets: Annotated[tuple[Annotated[int, integer(2)], ...], listed(min_length=1)] = (
        25,
        50,
        100,
        200,
        400,
        800,
        1500,
    )
    replicates: Replicates = 50
    test_groups: Annotated[int, integer(1)] = 50
    nuts_seeds: Count = 5
    nuts_warmup: Annotated[int, integer(1, 1_000_000)] = 500
    nuts_samples: Annotated[int, integer(1, 1_000_000)] = 1000
    nuts_chains: Annotated[int, integer(1, 64)] = 2
    flow_epochs: Annotated[int, integer(1, 1_000_000)] = 1500
    flow_lr: Positive = 0.003
    flow_passes: Annotated[int, integer(2, 10_000, description="MC-dropout passes (>= 2 for an MC s.d.)")] = 40
    flow_embed_dim: Annotated[int, integer(1, 4_096)] = 8
    flow_hidden: Annotated[int, integer(1, 4_096, description="hidden units of the drift MLP (spec: 64)")] = 64
    #: Early stop: training ends once every flow's mean loss over ``flow_window`` epochs moves by less than this
    #: fraction from the window before (``flow_epochs`` is then the cap); 0 trains all ``flow_epochs`` steps.
    flow_tol: NonNegative = 0.0
    flow_window: Annotated[int, integer(1, 100_000)] = 50
    flow_batch: Annotated[int, integer(1, 1_000)] = 5
    linear_batch: Annotated[int, integer(1, 10_000, description="conjugate (non-NUTS) seeds per linear task")] = 25
    flow_rubrics: Annotated[tuple[Annotated[str, one_of(FLOW_RUBRICS)], ...], listed(min_length=1)] = ("shared",)
    flow_threads: Annotated[int, integer(1, 1_024)] = 1
    flow_mask_policy: Annotated[str, one_of(MASK_POLICIES)] = "evaluation"
    flow_solver: Annotated[str, one_of(("rk4", "torchdiffeq"))] = "rk4"
    review_budget: Probability = 0.05
    interval_level: CiLevel = 0.95
    item_seed_figures: bool = True
    #: ``auto`` (the recommended corrector) or ``<corrector>@<judge>``: what ``model/model.json`` holds.
    export: str = "auto"

    @model_validator(mode="after")
    def _check(self) -> Config:
        if not self.judges and not self.synthetic:
            raise refuse("judges", [], "must name a judge when synthetic is false (no arm to run)")
        corrector, _, judge = self.export.partition("@")
        if self.export != "auto" and (corrector not in EXPORTABLE or judge not in self.judges):
            raise refuse(
                "export",
                self.export,
                f"must be auto or <corrector>@<judge> with a corrector of {list(EXPORTABLE)} and a judge of "
                f"{list(self.judges)}",
            )
        return self


@dataclass(frozen=True)
class ContinuousInput:
    """Paired scores of every arm (``judge_id`` = arm) and the rubric list."""

    scores: pd.DataFrame
    rubrics: tuple[str, ...]
    arms: tuple[str, ...]
