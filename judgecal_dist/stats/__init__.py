"""Metrics and inference: pure functions over arrays and small frames (no I/O, no Spark, no Ray)."""

from judgecal_dist.stats.checks import DEFAULT_EPS
from judgecal_dist.stats.inference import BootstrapCI, bootstrap_ci, summarise_over_splits
from judgecal_dist.stats.metrics import accuracy, brier, ece, ece_positive, metric_table, nll, reliability_bins

__all__ = [
    "DEFAULT_EPS",
    "BootstrapCI",
    "accuracy",
    "bootstrap_ci",
    "brier",
    "ece",
    "ece_positive",
    "metric_table",
    "nll",
    "reliability_bins",
    "summarise_over_splits",
]
