r"""Inference over replicates: intervals and tests of means over splits.

Studies produce one row of metrics per (arm, split); :func:`summarise_over_splits` turns those rows into the
per-arm means and intervals that go into ``summary.json``. When the splits are random partitions of one dataset
they share items, and the split means are correlated: a percentile bootstrap over them (:func:`bootstrap_ci`)
narrows as :math:`1/\sqrt R` with the number of splits :math:`R` whatever the data, so such studies pass
``split_sizes`` and get the corrected resampled :math:`t` of Nadeau and Bengio (:func:`corrected_resampled_t`),
whose width stays of the order of the data's own uncertainty. :func:`bootstrap_ci` remains the interval for
replicates that are independent draws (a fresh synthetic panel per replicate).

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   §5.5(b) and Appendix F.
.. [2] B. Efron, R. J. Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993, ch. 13.
.. [3] C. Nadeau, Y. Bengio. Inference for the Generalization Error. Machine Learning 52(3):239-281, 2003,
   doi:10.1023/A:1024068626366.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import bootstrap

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.checks import check_confidence, check_param, check_rng, check_values
from judgecal_dist.stats.intervals import CorrectedT, corrected_resampled_t, mean_interval
from judgecal_dist.stats.ranges import MetricRange, metric_range

__all__ = ["BootstrapCI", "CorrectedT", "bootstrap_ci", "corrected_resampled_t", "summarise_over_splits"]


class BootstrapCI(NamedTuple):
    """Lower and upper end of a confidence interval (unpacks as ``low, high``)."""

    low: float
    high: float


def bootstrap_ci(
    values: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    rng: np.random.Generator,
) -> BootstrapCI:
    r"""Percentile bootstrap confidence interval of the mean of ``values`` (e.g. one metric over splits).

    With :math:`\bar x^{*(1)},\dots,\bar x^{*(B)}` the means of :math:`B` resamples drawn with replacement,

    .. math::

        \mathrm{CI}_{1-a} = \big[\,q_{a/2}(\bar x^{*}),\; q_{1-a/2}(\bar x^{*})\,\big],\qquad a = 1 - \text{confidence},

    computed by :func:`scipy.stats.bootstrap` with ``method="percentile"``, the interval spec §5.5(b) prescribes.
    The percentile method is chosen over BCa because it is what the paper reports and because BCa's jackknife
    acceleration is undefined (NaN) for constant data and unstable for very few splits.

    Degenerate inputs never give NaN: with one value, or with all values equal, the interval is
    ``(mean, mean)`` (every resample has the same mean).

    Parameters
    ----------
    values : array-like of shape (n,)
        Finite split-level values.
    confidence : float, default 0.95
        Confidence level, in (0, 1).
    n_resamples : int, default 2000
        Number :math:`B` of bootstrap resamples (spec §5.5(b) recommends 10,000 for final reports).
    rng : numpy.random.Generator
        Source of the resampling randomness (the study derives it from the run seed).

    Returns
    -------
    BootstrapCI
        ``(low, high)``.

    Raises
    ------
    InputError
        If ``values`` is not 1-D, is empty or holds NaN or infinity.
    ConfigError
        If ``confidence``, ``n_resamples`` or ``rng`` is invalid.

    Notes
    -----
    Cost :math:`O(nB)` time and memory (scipy resamples in one vectorised batch).

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §5.5(b).
    .. [2] B. Efron, R. J. Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993, §13.3.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> low, high = bootstrap_ci([0.31, 0.29, 0.35, 0.30, 0.33], rng=rng)
    >>> bool(low < 0.316 < high)
    True
    >>> bootstrap_ci([0.5, 0.5, 0.5], rng=rng)
    BootstrapCI(low=0.5, high=0.5)
    """
    arr = check_values(values, "bootstrap_ci")
    confidence = check_confidence(confidence, where="bootstrap_ci")
    n_resamples = int(
        check_param(n_resamples, where="bootstrap_ci", name="n_resamples", target_type=numbers.Integral, min_val=1)
    )
    rng = check_rng(rng, where="bootstrap_ci")
    mean = float(arr.mean())
    if arr.size < 2 or np.ptp(arr) == 0.0:
        return BootstrapCI(mean, mean)
    res = bootstrap(
        (arr,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=rng,
    )
    return BootstrapCI(float(res.confidence_interval.low), float(res.confidence_interval.high))


def summarise_over_splits(
    results: pd.DataFrame,
    *,
    by: Sequence[str],
    metrics: Sequence[str],
    confidence: float = 0.95,
    n_resamples: int = 2000,
    rng: np.random.Generator,
    split_sizes: tuple[str, str] | float | None = None,
    tested: Sequence[str] = (),
    study: str | None = None,
) -> pd.DataFrame:
    """Mean and confidence interval of each metric over the splits of each group.

    Without ``split_sizes`` the interval is the percentile bootstrap of :func:`bootstrap_ci` (spec 000 §5.5(b)),
    right for independent replicates (its ends are means of in-range values, so in range). With ``split_sizes``
    (splits of one dataset, which share items) it is the corrected resampled :math:`t` built on the scale of each
    metric's declared range (:func:`judgecal_dist.stats.intervals.mean_interval`), so it never leaves the range.

    Parameters
    ----------
    results : pandas.DataFrame
        One row per (group, split), e.g. the concatenated replicate parts with columns ``arm``, ``seed``,
        ``nll``, ``brier``, ...
    by : sequence of str
        Grouping columns (e.g. ``["dataset", "arm"]``); an empty sequence summarises the whole frame as one group.
    metrics : sequence of str
        Numeric columns to summarise.
    confidence, n_resamples, rng
        As in :func:`bootstrap_ci` (``n_resamples`` and ``rng`` unused with ``split_sizes``).
    split_sizes : (str, str) or float, optional
        The columns holding each split's evaluation and training item counts (e.g. ``("n_eval", "n_cal")``):
        the group's :math:`n_2/n_1` is the ratio of their means. A float gives :math:`n_2/n_1` directly (0 for
        replicates that share nothing, giving the one-sample :math:`t` interval).
    tested : sequence of str
        Metrics (differences, with ``split_sizes``) that also get ``m_t`` and ``m_p``: the corrected resampled
        :math:`t` statistic and two-sided p-value of a mean of 0.
    study : str, optional
        The study, for metrics whose range it declares under its own name
        (:func:`judgecal_dist.stats.ranges.metric_range`).

    Returns
    -------
    pandas.DataFrame
        One row per group, sorted by ``by``: the ``by`` columns, ``n_splits`` (rows in the group) and, for each
        metric ``m``, ``m_mean``, ``m_ci_low`` and ``m_ci_high`` (NaN for a group of one split under
        ``split_sizes``: one split says nothing about the spread over splits), then ``m_t`` and ``m_p`` for
        the ``tested`` metrics.

    Raises
    ------
    InputError
        If ``results`` is empty, a named column is missing or a metric column is not numeric or holds NaN or
        infinity (the message names the group).
    ConfigError
        If ``by`` and ``metrics`` overlap, ``metrics`` is empty, ``tested`` names a metric not in ``metrics`` or
        is given without ``split_sizes``, or a parameter is invalid.

    Notes
    -----
    For the bootstrap, one seed is drawn from ``rng`` and every (group, metric) is resampled with a generator
    seeded by it (common random numbers): a group's interval does not depend on which other groups are present,
    and arms evaluated on the same splits, listed in the same split order, get paired resamples.

    Examples
    --------
    >>> results = pd.DataFrame({"arm": ["all", "all", "top5", "top5"], "seed": [0, 1, 0, 1],
    ...                         "nll": [0.40, 0.42, 0.50, 0.50]})
    >>> summarise_over_splits(results, by=["arm"], metrics=["nll"], rng=np.random.default_rng(0))
        arm  n_splits  nll_mean  nll_ci_low  nll_ci_high
    0   all         2      0.41         0.4         0.42
    1  top5         2      0.50         0.5         0.50
    >>> halves = pd.DataFrame({"seed": [0, 1, 2], "delta": [0.02, 0.04, 0.03], "n_eval": 50, "n_cal": 50})
    >>> summarise_over_splits(halves, by=[], metrics=["delta"], rng=np.random.default_rng(0),
    ...                       split_sizes=("n_eval", "n_cal"), tested=["delta"]).round(3)
       n_splits  delta_mean  delta_ci_low  delta_ci_high  delta_t  delta_p
    0         3        0.03         -0.02           0.08    2.598    0.122
    """
    where = "summarise_over_splits"
    by, metrics, tested = list(by), list(metrics), list(tested)
    _check_summary_inputs(results, by, metrics, tested, split_sizes, where)
    rng = check_rng(rng, where=where)
    seed = int(rng.integers(2**63))
    groups = results.groupby(by, sort=True, dropna=False) if by else [((), results)]
    rows = []
    for key, group in groups:
        key_tuple = key if isinstance(key, tuple) else (key,)
        group_key = dict(zip(by, key_tuple, strict=True))
        row: dict[str, object] = dict(group_key)
        row["n_splits"] = len(group)
        if isinstance(split_sizes, tuple):
            ratio: float | None = float(group[split_sizes[0]].mean() / group[split_sizes[1]].mean())
        else:
            ratio = None if split_sizes is None else float(split_sizes)
        for m in metrics:
            values = group[m].to_numpy(dtype=np.float64)
            try:
                low, high, t_stat, p_value = _split_interval(
                    values, ratio, confidence, n_resamples, seed, metric_range(m, study=study)
                )
            except InputError as err:
                raise InputError(f"{where}: {m}: group {group_key or 'all rows'}: {err}") from err
            row[f"{m}_mean"] = float(values.mean())
            row[f"{m}_ci_low"], row[f"{m}_ci_high"] = low, high
            if m in tested:
                row[f"{m}_t"], row[f"{m}_p"] = t_stat, p_value
        rows.append(row)
    out = pd.DataFrame(rows)
    tests = [f"{m}_{s}" for m in tested for s in "tp"]
    return out[[c for c in out.columns if c not in tests] + tests]


def _check_summary_inputs(
    results: pd.DataFrame,
    by: list[str],
    metrics: list[str],
    tested: list[str],
    split_sizes: float | tuple[str, str] | None,
    where: str,
) -> None:
    if not metrics:
        raise ConfigError(f"{where}: metrics: name at least one metric column")
    if set(by) & set(metrics):
        raise ConfigError(f"{where}: columns both in by and metrics: {sorted(set(by) & set(metrics))}")
    if set(tested) - set(metrics):
        raise ConfigError(f"{where}: tested: {sorted(set(tested) - set(metrics))} are not among the metrics")
    if tested and split_sizes is None:
        raise ConfigError(f"{where}: tested: a test across splits needs split_sizes")
    size_columns = list(split_sizes) if isinstance(split_sizes, tuple) else []
    missing = [c for c in [*by, *metrics, *size_columns] if c not in results.columns]
    if missing:
        raise InputError(f"{where}: results: missing columns {missing}; found {list(results.columns)}")
    if results.empty:
        raise InputError(f"{where}: results: no rows (0 splits)")
    not_numeric = [m for m in metrics if not pd.api.types.is_numeric_dtype(results[m])]
    if not_numeric:
        raise InputError(f"{where}: results: metric columns must be numeric: {not_numeric}")


def _split_interval(
    values: npt.NDArray[np.float64],
    ratio: float | None,
    confidence: float,
    n_resamples: int,
    seed: int,
    bounds: MetricRange | None,
) -> tuple[float, float, float, float]:
    """Interval of a metric's mean over splits, with the corrected resampled t test where the split sizes are known
    (a bootstrap interval and no test without them; no interval below two splits)."""

    if ratio is None:
        low, high = bootstrap_ci(
            values, confidence=confidence, n_resamples=n_resamples, rng=np.random.default_rng(seed)
        )
        return low, high, np.nan, np.nan
    if values.size < 2:
        check_values(values, "summarise_over_splits")
        return np.nan, np.nan, np.nan, np.nan
    res = corrected_resampled_t(values, test_train_ratio=ratio, confidence=confidence)
    ranged = mean_interval(values, bounds, test_train_ratio=ratio, confidence=confidence)
    return ranged.low, ranged.high, res.statistic, res.pvalue
