"""Metrics and inference: pure functions over arrays and small frames (no I/O, no Spark, no Ray)."""

from typing import TYPE_CHECKING

from judgecal_dist.extras import lazy_exports

if TYPE_CHECKING:
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

# Imported on first use: one metric does not import every test (scipy.stats, sklearn).
_HOMES = {
    "DEFAULT_EPS": "judgecal_dist.stats.checks",
    "TOSTResult": "judgecal_dist.stats.equivalence",
    "tost": "judgecal_dist.stats.equivalence",
    "tost_paired": "judgecal_dist.stats.equivalence",
    "BootstrapCI": "judgecal_dist.stats.inference",
    "CorrectedT": "judgecal_dist.stats.inference",
    "bootstrap_ci": "judgecal_dist.stats.inference",
    "corrected_resampled_t": "judgecal_dist.stats.inference",
    "summarise_over_splits": "judgecal_dist.stats.inference",
    "accuracy": "judgecal_dist.stats.metrics",
    "brier": "judgecal_dist.stats.metrics",
    "ece": "judgecal_dist.stats.metrics",
    "ece_positive": "judgecal_dist.stats.metrics",
    "metric_table": "judgecal_dist.stats.metrics",
    "nll": "judgecal_dist.stats.metrics",
    "reliability_bins": "judgecal_dist.stats.metrics",
    "PermutationResult": "judgecal_dist.stats.permutation",
    "PermutationSummary": "judgecal_dist.stats.permutation",
    "paired_permutation_test": "judgecal_dist.stats.permutation",
    "paired_permutation_test_many": "judgecal_dist.stats.permutation",
    "MaxTResult": "judgecal_dist.stats.resampling",
    "PairedBootstrapCI": "judgecal_dist.stats.resampling",
    "multiplier_max_t": "judgecal_dist.stats.resampling",
    "paired_bootstrap_ci": "judgecal_dist.stats.resampling",
    "SelectiveResult": "judgecal_dist.stats.selective",
    "accuracy_at_confidence": "judgecal_dist.stats.selective",
    "auac": "judgecal_dist.stats.selective",
    "set_metrics": "judgecal_dist.stats.sets",
    "nll_by_agreement_tercile": "judgecal_dist.stats.strata",
}
__getattr__ = lazy_exports(__name__, _HOMES)

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
