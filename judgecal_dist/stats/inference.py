r"""Inference over replicates: bootstrap confidence intervals of split-level means (spec 000 §5.5(b)).

Studies produce one row of metrics per (arm, split); :func:`summarise_over_splits` turns those rows into the
per-arm means and 95% percentile-bootstrap intervals that go into ``summary.json``. The splits of one study share
items, so these intervals treat correlated replicates as i.i.d. and are summaries, not exact tests (spec §7,
pitfall 12).

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   §5.5(b) and Appendix F.
.. [2] B. Efron, R. J. Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993, ch. 13.
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
from judgecal_dist.stats.checks import check_param, check_rng

__all__ = ["BootstrapCI", "bootstrap_ci", "summarise_over_splits"]


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
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InputError(f"bootstrap_ci: values: expected numbers ({err})") from err
    if arr.ndim != 1:
        raise InputError(f"bootstrap_ci: values: expected a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise InputError("bootstrap_ci: values: no values (0 splits)")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(
            f"bootstrap_ci: values: must be finite ({int(bad.sum())} values, e.g. positions "
            f"{np.flatnonzero(bad)[:3].tolist()})"
        )
    confidence = float(
        check_param(
            confidence,
            where="bootstrap_ci",
            name="confidence",
            target_type=numbers.Real,
            min_val=0.0,
            max_val=1.0,
            include_boundaries="neither",
        )
    )
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
) -> pd.DataFrame:
    """Mean and percentile-bootstrap CI of each metric over the splits of each group (spec §5.5(b)).

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
        As in :func:`bootstrap_ci`.

    Returns
    -------
    pandas.DataFrame
        One row per group, sorted by ``by``: the ``by`` columns, ``n_splits`` (rows in the group) and, for each
        metric ``m``, ``m_mean``, ``m_ci_low`` and ``m_ci_high``.

    Raises
    ------
    InputError
        If ``results`` is empty, a named column is missing or a metric column is not numeric or holds NaN or
        infinity (the message names the group).
    ConfigError
        If ``by`` and ``metrics`` overlap, ``metrics`` is empty, or a bootstrap parameter is invalid.

    Notes
    -----
    One seed is drawn from ``rng`` and every (group, metric) is resampled with a generator seeded by it (common
    random numbers): a group's interval does not depend on which other groups are present, and arms evaluated on
    the same splits, listed in the same split order, get paired resamples.

    Examples
    --------
    >>> results = pd.DataFrame({"arm": ["all", "all", "top5", "top5"], "seed": [0, 1, 0, 1],
    ...                         "nll": [0.40, 0.42, 0.50, 0.50]})
    >>> summarise_over_splits(results, by=["arm"], metrics=["nll"], rng=np.random.default_rng(0))
        arm  n_splits  nll_mean  nll_ci_low  nll_ci_high
    0   all         2      0.41         0.4         0.42
    1  top5         2      0.50         0.5         0.50
    """
    where = "summarise_over_splits"
    by, metrics = list(by), list(metrics)
    if not metrics:
        raise ConfigError(f"{where}: metrics: name at least one metric column")
    if set(by) & set(metrics):
        raise ConfigError(f"{where}: columns both in by and metrics: {sorted(set(by) & set(metrics))}")
    missing = [c for c in [*by, *metrics] if c not in results.columns]
    if missing:
        raise InputError(f"{where}: results: missing columns {missing}; found {list(results.columns)}")
    if results.empty:
        raise InputError(f"{where}: results: no rows (0 splits)")
    not_numeric = [m for m in metrics if not pd.api.types.is_numeric_dtype(results[m])]
    if not_numeric:
        raise InputError(f"{where}: results: metric columns must be numeric: {not_numeric}")
    rng = check_rng(rng, where=where)
    seed = int(rng.integers(2**63))
    groups = results.groupby(by, sort=True, dropna=False) if by else [((), results)]
    rows = []
    for key, group in groups:
        key_tuple = key if isinstance(key, tuple) else (key,)
        group_key = dict(zip(by, key_tuple, strict=True))
        row: dict[str, object] = dict(group_key)
        row["n_splits"] = len(group)
        for m in metrics:
            try:
                low, high = bootstrap_ci(
                    group[m].to_numpy(dtype=np.float64),
                    confidence=confidence,
                    n_resamples=n_resamples,
                    rng=np.random.default_rng(seed),
                )
            except InputError as err:
                raise InputError(f"{where}: {m}: group {group_key or 'all rows'}: {err}") from err
            row[f"{m}_mean"] = float(group[m].mean())
            row[f"{m}_ci_low"], row[f"{m}_ci_high"] = low, high
        rows.append(row)
    return pd.DataFrame(rows)
