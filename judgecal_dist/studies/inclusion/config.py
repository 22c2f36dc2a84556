"""Settings of the inclusion study and its replicate: what its modules share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from judgecal_dist.engine.jobs.panel import ORIENTATIONS
from judgecal_dist.methods.pipeline import PANELS, PROTOCOLS, Settings
from judgecal_dist.settings import (
    AggregationFields,
    Count,
    Fraction,
    PipelineFields,
    Resamples,
    SplitFields,
    check_export,
    check_panels,
    integer,
    listed,
    number,
    one_of,
)
from judgecal_dist.studies.candidates import CandidateFields, RecommendFields
from judgecal_dist.studies.inclusion.controls import CONTROLS
from judgecal_dist.studies.inclusion.grain import GRAINS
from judgecal_dist.studies.inclusion.search import SEARCHES, SearchSettings, is_search

#: Diagnostic panels (spec §3.6): ``oracleK`` = top-K by evaluation accuracy (a ceiling, not deployable),
#: ``randomK`` = K random judges (a floor, seeded per split), ``l1`` = support of the L1 logistic fit at ``l1_c``;
#: the scope arms of §3.8: ``operating`` = all judges less those P1 filters (parse rate <= 0.60) or that are reliably
#: below chance, ``no_p3`` = all judges less those P3 flags (partial or label-dependent missingness), both judged on
#: the calibration half.
DIAGNOSTIC_PANEL = re.compile(r"(oracle|random)[1-9][0-9]*|l1|operating|no_p3")


#: Item features Platt scaling can add to the aggregator's score (spec 000 eq. (3)), computed from the votes.
ITEM_FEATURES = ("agreement", "coverage")


class Config(SplitFields, CandidateFields, RecommendFields, PipelineFields, AggregationFields):
    """Settings of the inclusion study (``studies/configs/inclusion.yaml``); every key can be ``--set``.

    The candidates (``aggregators``, ``calibrators``, ``panels``, ``calibrator_input``, ``conformal_alphas``,
    ``export``) are the shared :class:`~judgecal_dist.studies.candidates.CandidateFields`, as in ``judgecal fit``;
    the pipeline hyperparameters (``eps``, ``alpha0``, ..., ``ds_n_iter``, ``stacking_folds``) are the shared
    :class:`~judgecal_dist.settings.PipelineFields` and :class:`~judgecal_dist.settings.AggregationFields`.
    """

    data_required: ClassVar[str] = "an ingested dataset URL"

    dataset: str | None = None
    calib_fraction: Fraction = 0.5
    orientation: Annotated[str, one_of(ORIENTATIONS)] = "natural"
    sample: Count = 0
    calib_scores: Annotated[str, one_of(PROTOCOLS)] = "insample"
    nested_fraction: Fraction = 0.7
    crossfit_folds: Annotated[int, integer(2, 100)] = 5
    search_beam_width: Annotated[int, integer(1, 1_000)] = 3
    search_max_additions: Annotated[int, integer(1, 1_000)] = 10
    search_inner_fraction: Fraction = 0.7
    search_folds: Annotated[int, integer(2, 100)] = 5
    permutation_resamples: Resamples = 10_000
    l1_c: Annotated[float, number(gt=0.0)] = Field(
        default=0.1, description="inverse L1 strength of the l1 panel (the paper's grid)"
    )
    selective_tau: Annotated[float, number(ge=0.5, le=1.0)] = Field(
        default=0.9, description="confidence threshold of Cov @ conf"
    )
    tost_margin: Annotated[float, number(gt=0.0)] = Field(
        default=0.01, description="TOST equivalence margin on NLL (nats)"
    )
    item_bootstrap_resamples: Annotated[int, integer(0, 100_000)] = Field(
        default=1000,
        description="item-level paired bootstrap (resamples; each draw of item groups shared by every split) of the "
        "default pipeline against every other aggregator with the same calibrator on all judges, with TOST on its "
        "SE; 0 = off",
    )
    judge_grain: Annotated[str, one_of(GRAINS)] = Field(
        default="judge",
        description="judges in two presentation orders (ids X/ab, X/ba; LLMBar): judge = each order a judge (130), "
        "one_order = the ab verdict per configuration, both_orders = a verdict only where both orders agree (65)",
    )
    controls: Annotated[tuple[Annotated[str, one_of(CONTROLS)], ...], listed()] = Field(
        default=CONTROLS,
        description="sanity controls on one-coin over all judges: random labels, difficulty transfer between "
        "agreement terciles, score distortions, and the Step 2 -> Step 3 chain; empty = none",
    )
    platt_item_features: Annotated[tuple[Annotated[str, one_of(ITEM_FEATURES)], ...], listed()] = Field(
        default=(),
        description="item features of Platt scaling with features (agreement: |2 p_MV - 1| of the item's votes; "
        "coverage: share of the panel's judges that voted); empty = off, as in the main protocol",
    )

    @model_validator(mode="after")
    def _check(self) -> Config:
        named = [p for p in self.panels if not DIAGNOSTIC_PANEL.fullmatch(p) and not is_search(p)]
        check_panels(named, (*PANELS, *SEARCHES))
        check_export(self.export, self.aggregators, self.calibrators, self.panels)
        return self

    @property
    def settings(self) -> Settings:
        return Settings.of(self)

    @property
    def search(self) -> SearchSettings:
        return SearchSettings(
            beam_width=self.search_beam_width,
            max_additions=self.search_max_additions,
            inner_fraction=self.search_inner_fraction,
            folds=self.search_folds,
        )


@dataclass(frozen=True)
class Replicate:
    """One split: everything ``run_replicate`` needs besides the panel (pure and seeded), copied from the
    :class:`Config` by ``plan`` (the defaults are the config's, declared there only)."""

    seed: int
    calib_fraction: float
    aggregators: tuple[str, ...]
    calibrators: tuple[str, ...]
    panels: tuple[str, ...]
    settings: Settings
    conformal_alphas: tuple[float, ...]
    permutation_resamples: int
    n_bins: int
    calib_scores: str
    nested_fraction: float
    crossfit_folds: int
    search: SearchSettings
    l1_c: float
    selective_tau: float
    tost_margin: float
    platt_item_features: tuple[str, ...]
    controls: tuple[str, ...]
    item_bootstrap_resamples: int
