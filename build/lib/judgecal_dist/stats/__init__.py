"""Metrics and inference: pure functions over arrays and small frames (no I/O, no Spark, no Ray)."""

from judgecal_dist.stats.checks import DEFAULT_EPS
from judgecal_dist.stats.equivalence import TOSTResult, tost, tost_paired
from judgecal_dist.stats.inference import (
    BootstrapCI,
    CorrectedT,
    bootstrap_ci,
    corrected_resampled_t,
    summarise_over_splits,
)
from judgecal_dist.stats.metrics import accuracy, brier, ece, ece_positive, metric_table, nll, reliability_bins
from judgecal_dist.stats.permutation import (
    PermutationResult,
    PermutationSummary,
    paired_permutation_test,
    paired_permutation_test_many,
)
from judgecal_dist.stats.resampling import MaxTResult, PairedBootstrapCI, multiplier_max_t, paired_bootstrap_ci
from judgecal_dist.stats.selective import SelectiveResult, accuracy_at_confidence, auac
from judgecal_dist.stats.sets import set_metrics
from judgecal_dist.stats.strata import nll_by_agreement_tercile

__all__ = [
    "DEFAULT_EPS",
    "BootstrapCI",
    "CorrectedT",
    "MaxTResult",
    "PairedBootstrapCI",
    "PermutationResult",
    "PermutationSummary",
    "SelectiveResult",
    "TOSTResult",
    "accuracy",
    "accuracy_at_confidence",
    "auac",
    "bootstrap_ci",
    "brier",
    "corrected_resampled_t",
    "ece",
    "ece_positive",
    "metric_table",
    "multiplier_max_t",
    "nll",
    "nll_by_agreement_tercile",
    "paired_bootstrap_ci",
    "paired_permutation_test",
    "paired_permutation_test_many",
    "reliability_bins",
    "set_metrics",
    "summarise_over_splits",
    "tost",
    "tost_paired",
]
