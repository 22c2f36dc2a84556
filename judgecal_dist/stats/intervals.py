r"""The one interval service: an interval of a metric's mean that stays inside the metric's range, and its name.

A symmetric :math:`t` interval ignores a metric's range: NLL, ECE or an accuracy near a bound get lower ends below
0 or upper ends above 1 whenever the spread is large next to the distance to the bound. Every interval a study
prints is therefore built here, from the metric's :class:`~judgecal_dist.stats.ranges.MetricRange` (declared once
in :data:`~judgecal_dist.stats.ranges.METRIC_RANGES`):

- **over splits or replicates** (:func:`mean_interval`): the standard error of the mean is that of the corrected
  resampled :math:`t` (Nadeau and Bengio 2003; ``test_train_ratio=0`` gives the plain :math:`s/\sqrt S`), and the
  interval is built on the scale that maps the range onto the real line and mapped back (the delta method):
  the logit of :math:`(m - a)/(b - a)` for a range :math:`[a, b]`, the log of the distance to the one finite end
  for a positive metric, the metric's own scale only for an unbounded one;
- **a percentile bootstrap** (over independent replicates, or over item groups within splits,
  :func:`~judgecal_dist.stats.resampling.paired_bootstrap_ci`) needs nothing: its ends are means of resampled
  in-range values, so they are in range;
- **a proportion of counts** (:func:`proportion_interval`): Wilson's score interval; **a difference of two
  independent proportions** (:func:`proportion_difference_interval`): Newcombe's hybrid score interval.

Each returns :class:`RangeInterval`, whose ``method`` names what was done, and :func:`method_sentence` is the one
sentence a report prints about it.

References
----------
.. [1] C. Nadeau, Y. Bengio. Inference for the Generalization Error. Machine Learning 52(3):239-281, 2003.
.. [2] E. B. Wilson. Probable inference, the law of succession, and statistical inference. JASA 22, 1927.
.. [3] R. G. Newcombe. Interval estimation for the difference between independent proportions: comparison of
   eleven methods. Statistics in Medicine 17(8):873-890, 1998.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit
from scipy.stats import binomtest, norm
from scipy.stats import t as student_t
from statsmodels.stats.proportion import confint_proportions_2indep

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.checks import check_confidence, check_param, check_values
from judgecal_dist.stats.ranges import MetricRange

__all__ = [
    "CorrectedT",
    "RangeInterval",
    "corrected_resampled_t",
    "mean_interval",
    "method_sentence",
    "normal_interval",
    "proportion_difference_interval",
    "proportion_interval",
    "scale_name",
]

_UNBOUNDED = MetricRange(-math.inf, math.inf)


class CorrectedT(NamedTuple):
    """Outcome of :func:`corrected_resampled_t`: the mean over splits, its interval and the test of mean 0."""

    estimate: float
    low: float
    high: float
    standard_error: float
    statistic: float
    pvalue: float
    df: int


def corrected_resampled_t(
    values: npt.ArrayLike,
    *,
    test_train_ratio: float,
    confidence: float = 0.95,
) -> CorrectedT:
    r"""Mean over :math:`R` random splits of one dataset, with the corrected resampled :math:`t` interval and test.

    ``values`` are per-split estimates :math:`d_1,\dots,d_R` (e.g. the mean loss difference of two pipelines on
    each split's evaluation part). The splits share items, so the :math:`d_r` are positively correlated and
    :math:`s^2/R` underestimates the variance of :math:`\bar d`. Nadeau and Bengio [1]_ take the correlation
    between two splits to be :math:`\rho = n_2/(n_1 + n_2)` (:math:`n_1` training, :math:`n_2` test items per
    split), which inflates the variance to

    .. math::

        \widehat{\mathrm{Var}}(\bar d) = \Big(\frac1R + \frac{n_2}{n_1}\Big)\, s^2,\qquad
        t = \frac{\bar d}{\sqrt{\widehat{\mathrm{Var}}(\bar d)}},\qquad
        \mathrm{CI} = \bar d \pm t_{1-a/2,\,R-1}\sqrt{\widehat{\mathrm{Var}}(\bar d)},

    with :math:`s^2` the sample variance of the :math:`d_r` and :math:`p = 2\,P(T_{R-1} > |t|)`. The
    :math:`n_2/n_1` term does not vanish as :math:`R` grows, so the interval width tends to that of the data,
    not to 0. With ``test_train_ratio=0`` (independent replicates) this is the one-sample :math:`t` interval.

    Parameters
    ----------
    values : array-like of shape (R,)
        Finite per-split estimates, :math:`R \ge 2`.
    test_train_ratio : float
        :math:`n_2/n_1`, evaluation items over the other items of a split (1 for half splits), >= 0.
    confidence : float, default 0.95
        Confidence level, in (0, 1).

    Returns
    -------
    CorrectedT
        ``(estimate, low, high, standard_error, statistic, pvalue, df)``. If every :math:`d_r` is equal the
        interval is the point :math:`\bar d`, with :math:`t = 0, p = 1` when it is 0 and
        :math:`t = \pm\infty, p = 0` otherwise.

    Raises
    ------
    InputError
        If ``values`` is not 1-D, has fewer than 2 values or holds NaN or infinity.
    ConfigError
        If ``test_train_ratio`` is negative or ``confidence`` is outside (0, 1).

    Notes
    -----
    The correction is a heuristic: exact for estimates that are plain means over the evaluation items (no
    training effect; the variance of a random half's mean about the full-data mean is :math:`s^2 \approx
    \sigma^2 n_1/(n n_2)`, so :math:`(n_2/n_1) s^2 = \sigma^2/n`), and found conservative by [1]_ when the
    training part matters. :math:`R \ge 2` needed; cost :math:`O(R)`.

    References
    ----------
    .. [1] C. Nadeau, Y. Bengio. Inference for the Generalization Error. Machine Learning 52(3):239-281, 2003,
       doi:10.1023/A:1024068626366, §4.
    .. [2] R. R. Bouckaert, E. Frank. Evaluating the Replicability of Significance Tests for Comparing Learning
       Algorithms. PAKDD 2004, doi:10.1007/978-3-540-24775-3_3.

    Examples
    --------
    Ten half splits (:math:`n_2/n_1 = 1`): the interval is about :math:`\sqrt{1 + R}` times the naive one.

    >>> d = [0.04, 0.01, 0.06, 0.03, 0.02, 0.05, 0.00, 0.04, 0.03, 0.02]
    >>> res = corrected_resampled_t(d, test_train_ratio=1.0)
    >>> round(res.estimate, 3), round(res.statistic, 2), round(res.pvalue, 3), res.df
    (0.03, 1.57, 0.152, 9)
    >>> bool(res.low < 0 < res.high)
    True
    >>> round(corrected_resampled_t(d, test_train_ratio=0.0).statistic, 2)  # the one-sample t
    5.2
    """
    where = "corrected_resampled_t"
    arr = check_values(values, where)
    if arr.size < 2:
        raise InputError(f"{where}: values: need >= 2 splits for a variance across splits, got {arr.size}")
    ratio = float(
        check_param(test_train_ratio, where=where, name="test_train_ratio", target_type=numbers.Real, min_val=0.0)
    )
    confidence = check_confidence(confidence, where=where)
    n_splits = arr.size
    mean = float(arr.mean())
    se = float(np.sqrt((1.0 / n_splits + ratio) * arr.var(ddof=1)))
    df = n_splits - 1
    if se == 0.0:
        statistic = 0.0 if mean == 0.0 else float(np.copysign(np.inf, mean))
        return CorrectedT(mean, mean, mean, 0.0, statistic, 1.0 if mean == 0.0 else 0.0, df)
    statistic = mean / se
    half = float(student_t.ppf(0.5 + confidence / 2.0, df)) * se
    pvalue = float(2.0 * student_t.sf(abs(statistic), df))
    return CorrectedT(mean, mean - half, mean + half, se, statistic, pvalue, df)


class RangeInterval(NamedTuple):
    """An estimate, its interval inside the metric's range and the name of the method that built it."""

    estimate: float
    low: float
    high: float
    method: str


def scale_name(bounds: MetricRange | None) -> str:
    """The scale :func:`mean_interval` builds its interval on: ``"logit"``, ``"log"`` or ``"identity"``."""
    kind = (bounds or _UNBOUNDED).kind
    return {"bounded": "logit", "positive": "log", "unbounded": "identity"}[kind]


def _transformed(mean: float, half: float, bounds: MetricRange) -> tuple[float, float]:
    """``mean -+ half`` built on the range's scale (delta method: the half width times the scale's slope)."""
    a, b = bounds
    if bounds.kind == "bounded":
        u = (mean - a) / (b - a)
        if u <= 0.0 or u >= 1.0:  # the mean on a bound: every value is there (no spread), or rounding
            return mean, mean
        slope = 1.0 / (u * (1.0 - u))
        g = float(logit(u))
        step = half / (b - a) * slope
        return a + (b - a) * float(expit(g - step)), a + (b - a) * float(expit(g + step))
    if bounds.kind == "positive":
        finite_low = math.isfinite(a)
        gap = mean - a if finite_low else b - mean
        if gap <= 0.0:
            return mean, mean
        near, far = gap * math.exp(-half / gap), gap * math.exp(half / gap)
        return (a + near, a + far) if finite_low else (b - far, b - near)
    return mean - half, mean + half


def mean_interval(
    values: npt.ArrayLike,
    bounds: MetricRange | None,
    *,
    test_train_ratio: float,
    confidence: float = 0.95,
    critical: str = "t",
) -> RangeInterval:
    r"""Interval of the mean of per-split (or per-replicate) values of one metric, inside the metric's range.

    With :math:`m` the mean of the :math:`S` values, :math:`\widehat{se} = \sqrt{(1/S + r)\,s^2}` the corrected
    resampled :math:`t` standard error (:math:`r` = ``test_train_ratio``; 0 for independent replicates) and
    :math:`q` the critical value, the interval is :math:`g^{-1}(g(m) \pm q\,\widehat{se}\,g'(m))` with :math:`g` the
    logit of :math:`(m-a)/(b-a)` for a range :math:`[a, b]`, :math:`\log(m - a)` for :math:`[a, \infty)` and the
    identity for an unbounded metric, so its ends stay strictly inside a bounded side. Where the range allows
    (unbounded metrics, e.g. differences of NLL) it is exactly :func:`~judgecal_dist.stats.inference.
    corrected_resampled_t`.

    Parameters
    ----------
    values : array-like of shape (S,)
        Finite per-split values of the metric, :math:`S \ge 2`, inside ``bounds``.
    bounds : MetricRange or None
        The metric's range (None: unbounded).
    test_train_ratio : float
        :math:`n_2/n_1` of the splits (evaluation over calibration items); 0 for independent replicates.
    confidence : float, default 0.95
        Confidence level in (0, 1).
    critical : {"t", "normal"}, default "t"
        :math:`q` from Student's :math:`t` with :math:`S - 1` degrees of freedom, or the normal quantile (1.96 at
        95%, the "mean +- 1.96 SD/sqrt(S)" error bars some papers print).

    Returns
    -------
    RangeInterval
        ``(estimate, low, high, method)``; ``method`` names the standard error and the scale.

    Raises
    ------
    InputError
        If ``values`` has fewer than 2 values, holds NaN or infinity, or leaves ``bounds``.
    ConfigError
        If ``critical`` or ``confidence`` is invalid or ``test_train_ratio`` is negative.

    Examples
    --------
    Three splits of an ECE near 0: the symmetric corrected t interval would start below 0.

    >>> ece = MetricRange(0.0, 1.0)
    >>> res = mean_interval([0.01, 0.04, 0.07], ece, test_train_ratio=1.0)
    >>> round(res.low, 4) > 0, round(res.high, 3), res.method
    (True, 0.669, 'corrected resampled t, logit scale')
    >>> mean_interval([0.01, 0.04, 0.07], None, test_train_ratio=1.0).low < 0
    True
    """
    where = "mean_interval"
    if critical not in ("t", "normal"):
        raise ConfigError(f"{where}: critical: must be 't' or 'normal', got {critical!r}")
    confidence = check_confidence(confidence, where=where)
    bounds = bounds or _UNBOUNDED
    res = corrected_resampled_t(values, test_train_ratio=test_train_ratio, confidence=confidence)
    arr = np.asarray(values, dtype=np.float64)
    outside = [float(v) for v in arr if not bounds.contains(float(v))]
    if outside:
        raise InputError(
            f"{where}: values: {len(outside)} outside the metric's range [{bounds.low}, {bounds.high}], e.g. "
            f"{outside[:3]}; declare the metric's true range in stats.ranges.METRIC_RANGES"
        )
    mean = min(max(res.estimate, bounds.low), bounds.high)
    if critical == "t":
        q = float(student_t.ppf(0.5 + confidence / 2.0, res.df))
    else:
        q = float(norm.ppf(0.5 + confidence / 2.0))
    low, high = _transformed(mean, q * res.standard_error, bounds)
    # the scale's round trip (logit then expit) can move an end by an ulp past the estimate when the spread is 0
    low, high = min(low, res.estimate), max(high, res.estimate)
    head = "corrected resampled t" if test_train_ratio > 0 else ("t" if critical == "t" else "normal")
    return RangeInterval(res.estimate, low, high, f"{head}, {scale_name(bounds)} scale")


def normal_interval(
    estimate: float, standard_error: float, bounds: MetricRange | None, *, confidence: float = 0.95
) -> RangeInterval:
    r"""Normal interval :math:`\hat\theta \pm z\,\widehat{se}` of an estimate that may leave its metric's range,
    intersected with the range (the estimate clipped into it).

    For estimators that are not means of in-range values (a prediction-powered mean can fall below 0 or above 1),
    the range's scale of :func:`mean_interval` is undefined at such an estimate. The truth always lies in the range,
    so intersecting keeps the normal interval's coverage exactly and only drops impossible values.

    Examples
    --------
    >>> res = normal_interval(0.98, 0.02, MetricRange(0.0, 1.0))
    >>> round(res.low, 4), res.high, res.method
    (0.9408, 1.0, 'normal, clipped to the range')
    >>> normal_interval(1.01, 0.02, MetricRange(0.0, 1.0)).estimate
    1.0
    """
    where = "normal_interval"
    confidence = check_confidence(confidence, where=where)
    if not (math.isfinite(estimate) and math.isfinite(standard_error) and standard_error >= 0.0):
        raise InputError(f"{where}: need a finite estimate and standard error >= 0, got {estimate}, {standard_error}")
    bounds = bounds or _UNBOUNDED
    half = float(norm.ppf(0.5 + confidence / 2.0)) * standard_error
    low, high = max(estimate - half, bounds.low), min(estimate + half, bounds.high)
    clipped = min(max(estimate, bounds.low), bounds.high)
    return RangeInterval(clipped, min(low, clipped), max(high, clipped), "normal, clipped to the range")


def proportion_interval(successes: int, n: int, *, confidence: float = 0.95) -> RangeInterval:
    """Wilson score interval of a proportion ``successes / n`` (always inside [0, 1]).

    Examples
    --------
    >>> res = proportion_interval(19, 20)
    >>> round(res.low, 4), round(res.high, 4), res.method
    (0.7639, 0.9911, 'Wilson score')
    """
    confidence = check_confidence(confidence, where="proportion_interval")
    if n < 1 or not 0 <= successes <= n:
        raise InputError(f"proportion_interval: need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return RangeInterval(successes / n, float(ci.low), float(ci.high), "Wilson score")


def proportion_difference_interval(
    successes_a: int, n_a: int, successes_b: int, n_b: int, *, confidence: float = 0.95
) -> RangeInterval:
    """Newcombe's hybrid score interval of ``successes_a / n_a - successes_b / n_b`` (inside [-1, 1]).

    Examples
    --------
    >>> res = proportion_difference_interval(56, 70, 48, 80)
    >>> round(res.estimate, 4), round(res.low, 4), round(res.high, 4), res.method
    (0.2, 0.0524, 0.3339, 'Newcombe hybrid score')
    """
    confidence = check_confidence(confidence, where="proportion_difference_interval")
    for k, n in ((successes_a, n_a), (successes_b, n_b)):
        if n < 1 or not 0 <= k <= n:
            raise InputError(f"proportion_difference_interval: need 0 <= successes <= n, n >= 1; got {k} of {n}")
    low, high = confint_proportions_2indep(
        successes_a, n_a, successes_b, n_b, method="newcomb", compare="diff", alpha=1.0 - confidence
    )
    return RangeInterval(successes_a / n_a - successes_b / n_b, float(low), float(high), "Newcombe hybrid score")


def method_sentence(*, critical: str = "t") -> str:
    """What :func:`mean_interval` does, as the clause a report's interval sentence ends with.

    Examples
    --------
    >>> method_sentence()[:58]
    'each is built on the logit scale of a bounded metric (accu'
    """
    quantile = "1.96 (the normal quantile)" if critical == "normal" else "the t quantile"
    return (
        "each is built on the logit scale of a bounded metric (accuracy, ECE, Brier, MSE, NLL of clipped "
        "probabilities, differences of accuracies), on the log scale of a positive one (KL, errors in score units) "
        "and on the metric's own scale only where its range is unbounded or far (differences of NLL, tested on it)"
        f", with {quantile}, and mapped back, so no bound leaves the metric's range"
    )
