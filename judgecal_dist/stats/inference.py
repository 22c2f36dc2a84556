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
from scipy.stats import t as student_t

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.checks import check_confidence, check_param, check_rng

__all__ = ["BootstrapCI", "CorrectedT", "bootstrap_ci", "corrected_resampled_t", "summarise_over_splits"]


class BootstrapCI(NamedTuple):
    """Lower and upper end of a confidence interval (unpacks as ``low, high``)."""

    low: float
    high: float


class CorrectedT(NamedTuple):
    """Outcome of :func:`corrected_resampled_t`: the mean over splits, its interval and the test of mean 0."""

    estimate: float
    low: float
    high: float
    standard_error: float
    statistic: float
    pvalue: float
    df: int


def _check_values(values: npt.ArrayLike, where: str) -> npt.NDArray[np.float64]:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InputError(f"{where}: values: expected numbers ({err})") from err
    if arr.ndim != 1:
        raise InputError(f"{where}: values: expected a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise InputError(f"{where}: values: no values (0 splits)")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(
            f"{where}: values: must be finite ({int(bad.sum())} values, e.g. positions "
            f"{np.flatnonzero(bad)[:3].tolist()})"
        )
    return arr


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
    arr = _check_values(values, "bootstrap_ci")
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
    arr = _check_values(values, where)
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
) -> pd.DataFrame:
    """Mean and confidence interval of each metric over the splits of each group.

    Without ``split_sizes`` the interval is the percentile bootstrap of :func:`bootstrap_ci` (spec 000 §5.5(b)),
    right for independent replicates. With ``split_sizes`` (splits of one dataset, which share items) it is the
    corrected resampled :math:`t` of :func:`corrected_resampled_t`.

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
                low, high, t_stat, p_value = _split_interval(values, ratio, confidence, n_resamples, seed, where)
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
    where: str,
) -> tuple[float, float, float, float]:
    """Interval of a metric's mean over splits, with the corrected resampled t test where the split sizes are known
    (a bootstrap interval and no test without them; no interval below two splits)."""
    if ratio is None:
        low, high = bootstrap_ci(
            values, confidence=confidence, n_resamples=n_resamples, rng=np.random.default_rng(seed)
        )
        return low, high, np.nan, np.nan
    if values.size < 2:
        _check_values(values, where)
        return np.nan, np.nan, np.nan, np.nan
    res = corrected_resampled_t(values, test_train_ratio=ratio, confidence=confidence)
    return res.low, res.high, res.statistic, res.pvalue
