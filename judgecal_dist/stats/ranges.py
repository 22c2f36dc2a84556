"""The range of every metric a study reports with an interval, declared once.

The interval service (:mod:`judgecal_dist.stats.intervals`) builds each interval on the scale its range calls for,
and the report test checks every printed interval against it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from judgecal_dist.stats.checks import DEFAULT_EPS

__all__ = ["METRIC_RANGES", "MetricRange", "metric_range"]


class MetricRange(NamedTuple):
    """The values a metric can take, ``[low, high]`` (infinite ends for unbounded sides).

    Its :attr:`kind` decides how an interval of the metric's mean is built
    (:mod:`judgecal_dist.stats.intervals`): on the logit scale of ``[low, high]`` when both ends are finite, on the
    log scale of the distance to the finite end when one is, on the metric's own scale when none is.

    Examples
    --------
    >>> MetricRange(0.0, 1.0).kind, MetricRange(0.0, math.inf).kind, MetricRange(0.0, 1.0).difference()
    ('bounded', 'positive', MetricRange(low=-1.0, high=1.0))
    """

    low: float
    high: float

    @property
    def kind(self) -> str:
        """``"bounded"`` (both ends finite), ``"positive"`` (one end finite) or ``"unbounded"``."""
        finite = math.isfinite(self.low) + math.isfinite(self.high)
        return ("unbounded", "positive", "bounded")[finite]

    def difference(self) -> MetricRange:
        """The range of a difference of two values of this metric, ``[low - high, high - low]``."""
        width = self.high - self.low
        return MetricRange(-width, width)

    def contains(self, value: float, *, tolerance: float = 1e-9) -> bool:
        """Whether ``value`` lies in the range (``tolerance`` absorbs rounding of sums of in-range values)."""
        return self.low - tolerance <= value <= self.high + tolerance


_SHARE = MetricRange(0.0, 1.0)
_POSITIVE = MetricRange(0.0, math.inf)
_UNBOUNDED = MetricRange(-math.inf, math.inf)
_CORRELATION = MetricRange(-1.0, 1.0)
#: NLL of probabilities clipped to [eps, 1 - eps] (spec 000 section 3.4): at most log(1/eps).
_NLL = MetricRange(0.0, -math.log(DEFAULT_EPS))

#: Every metric a study reports with an interval, by its column name, declared once. A study whose metric of the
#: same name means something else declares it as ``"<study>.<metric>"`` (``itc.mae``: ordinal labels -1, 0, 1).
#: Differences are ``delta_<metric>`` (the :meth:`MetricRange.difference` of the metric's range) unless named here.
METRIC_RANGES: dict[str, MetricRange] = {
    # spec 000 section 4 metrics of binary probabilities
    "nll": _NLL,
    "brier": _SHARE,
    "ece": _SHARE,
    "ece_positive": _SHARE,
    "accuracy": _SHARE,
    "auac": _SHARE,
    "auc": _SHARE,
    "coverage": _SHARE,
    "coverage_at_tau": _SHARE,
    "empty_rate": _SHARE,
    "both_rate": _SHARE,
    "set_size": MetricRange(0.0, 2.0),  # conformal sets of a binary label hold 0, 1 or 2 labels
    "stratum_items": _POSITIVE,
    "nested_nll": _NLL,
    "nested_nll_all": _NLL,
    # Differences of NLL are tested with the corrected t on their own scale, so interval and test give one verdict;
    # their range, +-log(1/eps), lies far beyond any interval.
    "delta_nll": _UNBOUNDED,
    "nested_delta": _UNBOUNDED,
    "inner_nll": _NLL,
    "delta": _UNBOUNDED,  # budget: NLL differences; regime map: MSE differences
    # regime map: squared error of a probability clipped to [0, 1] against a label in [0, 1]
    "test_mse": _SHARE,
    "mse": _SHARE,
    # itc: ordinal labels -1, 0, +1 (a reversal costs 2)
    "itc.mae": MetricRange(0.0, 2.0),
    "pa": _SHARE,
    "rev": _SHARE,
    # continuous scores (spec 001): errors in score units, correlations, divergences
    "mean_error": _UNBOUNDED,
    "mae": _POSITIVE,
    "w1": _POSITIVE,
    "kl": _POSITIVE,
    "kl_sym": _POSITIVE,
    "pearson": _CORRELATION,
    "spearman": _CORRELATION,
    # narrowband: accuracies (acc_<method>), their differences and theory terms
    "gap": _CORRELATION,
    "oracle_gap": _CORRELATION,
    "lo_vs_majority": _CORRELATION,
    "exponent_gap_theorem3": _POSITIVE,
    "exponent_gap_exact": _UNBOUNDED,
    "theorem1_bound": MetricRange(0.0, 0.5),
}


def metric_range(metric: str, *, study: str | None = None) -> MetricRange | None:
    """The declared range of ``metric`` (``study`` first looks for ``"<study>.<metric>"``); None if undeclared.

    ``acc_<method>`` is an accuracy and ``delta_<metric>`` a difference of ``<metric>``.

    Examples
    --------
    >>> metric_range("kl"), metric_range("mae", study="itc").high, metric_range("delta_accuracy")
    (MetricRange(low=0.0, high=inf), 2.0, MetricRange(low=-1.0, high=1.0))
    >>> metric_range("acc_majority").kind, metric_range("no_such_metric") is None
    ('bounded', True)
    """
    if study is not None and f"{study}.{metric}" in METRIC_RANGES:
        return METRIC_RANGES[f"{study}.{metric}"]
    if metric in METRIC_RANGES:
        return METRIC_RANGES[metric]
    if metric.startswith("acc_"):
        return _SHARE
    if metric.startswith("delta_"):
        base = metric_range(metric.removeprefix("delta_"), study=study)
        return None if base is None else base.difference()
    return None
