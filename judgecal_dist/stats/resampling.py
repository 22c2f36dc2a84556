r"""Bootstraps beyond the split-level CI: the item-level paired bootstrap within splits (spec 000 §5.5(c)) and the
Gaussian multiplier bootstrap of the max-:math:`t` statistic across label budgets (spec §5.5(d)).

The split-level percentile bootstrap of spec §5.5(b) is :func:`judgecal_dist.stats.inference.bootstrap_ci`.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   Appendix G and H.9.
.. [2] V. Chernozhukov, D. Chetverikov, K. Kato. Gaussian approximations and multiplier bootstrap for maxima of
   sums of high-dimensional random vectors. Ann. Statist. 41(6), 2013, doi:10.1214/13-AOS1161.
.. [3] B. Efron, R. J. Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993, §13.3.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.stats import bootstrap, norm

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.checks import check_confidence, check_param, check_rng

__all__ = ["PairedBootstrapCI", "MaxTResult", "paired_bootstrap_ci", "multiplier_max_t", "group_resample_totals"]


class PairedBootstrapCI(NamedTuple):
    """Mean paired difference over splits, its percentile interval and the bootstrap standard error."""

    estimate: float
    low: float
    high: float
    standard_error: float


@dataclass(frozen=True)
class MaxTResult:
    """Outcome of :func:`multiplier_max_t` (the figures spec §5.5(d) asks a report to show)."""

    #: Per-budget statistics :math:`T_k`, shape (K,).
    statistics: npt.NDArray[np.float64]
    #: :math:`T_{\mathrm{obs}} = \max_k T_k` (or :math:`\max_k |T_k|` two-sided).
    statistic: float
    #: Multiplier-bootstrap critical value :math:`c_{1-\alpha}`.
    critical_value: float
    #: :math:`T_{\mathrm{obs}} - c_{1-\alpha}`; positive means the joint null is rejected.
    margin: float
    #: Bonferroni threshold :math:`z_{1-\alpha/K}` (two-sided: :math:`z_{1-\alpha/(2K)}`).
    bonferroni: float
    pvalue: float
    reject: bool
    n_budgets: int
    n_splits: int
    alternative: str


def _as_splits(d: npt.NDArray[np.float64] | Sequence[npt.ArrayLike], where: str) -> list[npt.NDArray[np.float64]]:
    if isinstance(d, np.ndarray) and d.ndim != 2:
        raise InputError(f"{where}: d: expected a 2-D array (n_splits, n) or a list of 1-D arrays, got {d.shape}")
    splits = []
    for s, split in enumerate(d):
        arr = np.asarray(split, dtype=np.float64)
        if arr.ndim != 1 or arr.size < 2:
            raise InputError(f"{where}: d: split {s}: expected a 1-D array of >= 2 differences, got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise InputError(f"{where}: d: split {s}: must be finite ({int((~np.isfinite(arr)).sum())} items)")
        splits.append(arr)
    if not splits:
        raise InputError(f"{where}: d: no splits (0 rows)")
    return splits


def _mean_of_split_means(*samples: npt.NDArray[np.float64], axis: int = -1) -> Any:
    return np.mean([sample.mean(axis=axis) for sample in samples], axis=0)


def paired_bootstrap_ci(
    d: npt.NDArray[np.float64] | Sequence[npt.ArrayLike],
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    rng: np.random.Generator,
    units: Sequence[npt.ArrayLike] | None = None,
) -> PairedBootstrapCI:
    r"""Item-level paired bootstrap of a mean loss difference, resampling items within each fixed split.

    With :math:`d_{s,i} = \ell_A(i) - \ell_B(i)` on the evaluation items of split :math:`s` (both methods scored on
    the same items, so resampling :math:`d` is resampling the pairs), each replicate :math:`b` resamples every
    split's items with replacement, independently across splits, and averages the split means:

    .. math::

        \bar\Delta^{*(b)} = \frac{1}{S}\sum_{s=1}^{S}\frac{1}{n_s}\sum_{i=1}^{n_s} d_{s, I^{(b)}_{s,i}},\qquad
        \mathrm{CI} = \big[q_{a/2}(\bar\Delta^{*}),\ q_{1-a/2}(\bar\Delta^{*})\big],

    the percentile interval of spec §5.5(c) (H.9 of [1]_). The splits are held fixed: this interval reflects item
    sampling only, not the choice of splits.

    When the splits are drawn from one set of items (random halves of the same data), resampling each split on its
    own treats their items as independent draws and the interval narrows about as :math:`1/\sqrt S` whatever the
    data. ``units`` gives, per split, the sampling unit of each item (e.g. its group, an integer shared across
    splits); each replicate then draws the units once, with replacement, and every split's mean is the mean of
    its items weighted by how often their unit was drawn (a unit not drawn drops out; a split left empty keeps
    its own mean). The interval then has the width of one data set's item sampling.

    Parameters
    ----------
    d : array-like of shape (n_splits, n) or sequence of 1-D arrays
        Paired differences per split (>= 2 items each; splits may differ in size).
    confidence : float, default 0.95
        Confidence level in (0, 1).
    n_resamples : int, default 1000
        Bootstrap replicates :math:`B` (spec: 1,000 per split).
    rng : numpy.random.Generator
        Source of the resampling.
    units : sequence of 1-D integer arrays, optional
        Per split, the unit of each item (same length as that split's ``d``); units shared across splits are
        resampled jointly. None: every split resampled on its own.

    Returns
    -------
    PairedBootstrapCI
        ``(estimate, low, high, standard_error)``: the mean of the split means, the interval and the standard
        deviation of :math:`\bar\Delta^{*}` (the SE to feed :func:`~judgecal_dist.stats.equivalence.tost`).

    Raises
    ------
    InputError
        If there are no splits, or a split is not 1-D, has fewer than 2 items or holds NaN or infinity.
    ConfigError
        If ``confidence``, ``n_resamples`` or ``rng`` is invalid.

    Notes
    -----
    Runs :func:`scipy.stats.bootstrap` with one sample per split and ``paired=False`` (each sample resampled on its
    own: a stratified bootstrap). Cost :math:`O(B\sum_s n_s)`; 100 splits of 210 items with :math:`B = 1000` take
    about 0.15 s. If every split is constant the interval is the point ``(estimate, estimate)``.

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §5.5(c) and H.9.
    .. [2] B. Efron, R. J. Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993, §13.3.

    Examples
    --------
    >>> d = np.random.default_rng(0).normal(0.02, 0.1, size=(20, 200))
    >>> res = paired_bootstrap_ci(d, rng=np.random.default_rng(1))
    >>> bool(res.low < res.estimate < res.high), bool(res.low > 0)
    (True, True)
    """
    where = "paired_bootstrap_ci"
    splits = _as_splits(d, where)
    confidence = check_confidence(confidence, where=where)
    n_resamples = int(
        check_param(n_resamples, where=where, name="n_resamples", target_type=numbers.Integral, min_val=1)
    )
    rng = check_rng(rng, where=where)
    estimate = float(np.mean([split.mean() for split in splits]))
    if all(np.ptp(split) == 0.0 for split in splits):
        return PairedBootstrapCI(estimate, estimate, estimate, 0.0)
    if units is not None:
        return _shared_unit_bootstrap(splits, units, confidence, n_resamples, rng, estimate, where)
    res = bootstrap(
        tuple(splits),
        _mean_of_split_means,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        paired=False,
        batch=max(1, 2_000_000 // sum(split.size for split in splits)),  # bounds memory at ~16 MB per batch
        rng=rng,
    )
    ci = res.confidence_interval
    return PairedBootstrapCI(estimate, float(ci.low), float(ci.high), float(res.standard_error))


def _shared_unit_bootstrap(
    splits: list[npt.NDArray[np.float64]],
    units: Sequence[npt.ArrayLike],
    confidence: float,
    n_resamples: int,
    rng: np.random.Generator,
    estimate: float,
    where: str,
) -> PairedBootstrapCI:
    """:func:`paired_bootstrap_ci` with units drawn once per replicate and shared by every split."""
    if len(units) != len(splits):
        raise InputError(f"{where}: units: one array per split expected ({len(splits)}), got {len(units)}")
    codes = [np.asarray(u) for u in units]
    if any(c.ndim != 1 or c.shape != d.shape for c, d in zip(codes, splits, strict=True)):
        raise InputError(f"{where}: units: each split needs one unit per item (1-D, the length of its d)")
    labels, index = np.unique(np.concatenate(codes), return_inverse=True)
    index = np.split(index, np.cumsum([c.size for c in codes])[:-1])
    draws = np.empty(n_resamples)
    batch = max(1, 2_000_000 // labels.size)  # bounds the weight matrix at ~16 MB
    for start in range(0, n_resamples, batch):
        b = min(batch, n_resamples - start)
        weights = rng.multinomial(labels.size, np.full(labels.size, 1.0 / labels.size), size=b).astype(np.float64)
        total = np.zeros(b)
        for d, idx in zip(splits, index, strict=True):
            w = weights[:, idx]
            n = w.sum(axis=1)
            total += np.divide(w @ d, n, out=np.full(b, d.mean()), where=n > 0)
        draws[start : start + b] = total / len(splits)
    a = 1.0 - confidence
    low, high = np.quantile(draws, [a / 2, 1 - a / 2])
    return PairedBootstrapCI(estimate, float(low), float(high), float(draws.std(ddof=1)))


def group_resample_totals(
    group_sums: npt.NDArray[np.float64], n_resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    r"""Column totals of ``group_sums`` over bootstrap resamples of its rows (groups), drawn with replacement.

    Every statistic that is a ratio or function of per-item sums (a mean loss, a binned gap) resamples this way:
    resample :math:`b` draws :math:`G` groups, counts :math:`c_{bg}` how often each was drawn, and its totals are
    :math:`\sum_g c_{bg} S_{g\cdot}` (``counts @ group_sums``), without gathering the items of any resample.

    Parameters
    ----------
    group_sums : ndarray of shape (G, k)
        Per group, the sums of ``k`` per-item quantities over its items.
    n_resamples : int
        Bootstrap replicates :math:`B`.
    rng : numpy.random.Generator
        Source of the resampling: one ``rng.integers(0, G, G)`` per replicate, in order, so the draws equal a loop
        that indexes the groups of each replicate.

    Returns
    -------
    ndarray of shape (B, k)
        The totals of each replicate.

    Examples
    --------
    >>> sums = np.array([[1.0, 2.0], [1.0, 4.0]])
    >>> group_resample_totals(sums, 3, np.random.default_rng(0))[:, 0].tolist()  # items drawn per replicate
    [2.0, 2.0, 2.0]
    """
    n_groups = group_sums.shape[0]
    totals = np.empty((n_resamples, group_sums.shape[1]))
    batch = max(1, 2_000_000 // max(n_groups, 1))  # bounds the count matrix at ~16 MB
    for start in range(0, n_resamples, batch):
        b = min(batch, n_resamples - start)
        drawn = np.stack([rng.integers(0, n_groups, n_groups) for _ in range(b)])
        drawn += n_groups * np.arange(b)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=b * n_groups).reshape(b, n_groups)
        totals[start : start + b] = counts @ group_sums
    return totals


def multiplier_max_t(
    delta: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    n_resamples: int = 10_000,
    alternative: str = "greater",
    rng: np.random.Generator,
) -> MaxTResult:
    r"""Joint test across :math:`K` label budgets: max-:math:`t` with a Gaussian multiplier bootstrap critical value.

    With :math:`\Delta_{s,k}` = NLL(top-:math:`k'`) - NLL(all) in split :math:`s` at budget :math:`n_k`
    (spec §5.5(d), Appendix G of [1]_):

    .. math::

        T_k = \frac{\sqrt S\,\bar\Delta_k}{\hat\sigma_k},\qquad T_{\mathrm{obs}} = \max_k T_k,\qquad
        G^{(b)}_k = \frac{1}{\sqrt{S-1}}\sum_{s=1}^{S}\xi^{(b)}_s\,\frac{\Delta_{s,k} - \bar\Delta_k}{\hat\sigma_k},
        \quad \xi^{(b)}_s \overset{iid}{\sim} N(0, 1),

    so that :math:`G^{(b)} \sim N(0, \hat R)` exactly, :math:`\hat R` the sample correlation matrix of the budgets
    (:math:`\hat\sigma_k` with the :math:`S-1` denominator). :math:`c_{1-\alpha}` is the :math:`1-\alpha` quantile of
    :math:`M^{(b)} = \max_k G^{(b)}_k`; reject the joint null (no difference at any budget) if
    :math:`T_{\mathrm{obs}} > c_{1-\alpha}`; :math:`p = (1 + \#\{b : M^{(b)} \ge T_{\mathrm{obs}}\})/(B+1)`.

    Parameters
    ----------
    delta : array-like of shape (n_splits, n_budgets)
        :math:`\Delta_{s,k}`; positive values favour inclusion. Needs >= 2 splits.
    alpha : float, default 0.05
        Level of the joint test, in (0, 1).
    n_resamples : int, default 10000
        Multiplier draws :math:`B`.
    alternative : {"greater", "two-sided"}, default "greater"
        ``"greater"`` uses :math:`\max_k T_k` (the claim "inclusion is better at every budget"); ``"two-sided"``
        uses :math:`\max_k |T_k|` and :math:`\max_k |G_k|`.
    rng : numpy.random.Generator
        Source of the multipliers.

    Returns
    -------
    MaxTResult
        ``statistics`` (:math:`T_k`), ``statistic`` (:math:`T_{\mathrm{obs}}`), ``critical_value``, ``margin``,
        ``bonferroni`` (:math:`z_{1-\alpha/K}`, or :math:`z_{1-\alpha/(2K)}` two-sided), ``pvalue``, ``reject``,
        ``n_budgets``, ``n_splits``, ``alternative``.

    Raises
    ------
    InputError
        If ``delta`` is not 2-D, has fewer than 2 splits or no budget, or holds NaN or infinity.
    ConfigError
        If ``alpha``, ``n_resamples``, ``alternative`` or ``rng`` is invalid.

    Notes
    -----
    A budget whose :math:`\Delta_{s,k}` is constant over splits (e.g. top-:math:`k` equals inclusion when
    :math:`k \ge J`) has :math:`\hat\sigma_k = 0`: its :math:`T_k` is 0 if the constant is 0 and
    :math:`\pm\infty` otherwise, and its :math:`G_k` is 0. The splits share items, so treating the rows as i.i.d.
    is optimistic (Appendix F of [1]_; spec §7 pitfall 12): state this caveat with the result.
    Cost :math:`O(BSK)` time and :math:`O(B(S + K))` memory.

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, Appendix G.
    .. [2] V. Chernozhukov, D. Chetverikov, K. Kato. Gaussian approximations and multiplier bootstrap for maxima
       of sums of high-dimensional random vectors. Ann. Statist. 41(6), 2013, doi:10.1214/13-AOS1161, §2.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> delta = 0.02 + 0.01 * rng.standard_normal((100, 8))
    >>> res = multiplier_max_t(delta, rng=np.random.default_rng(1))
    >>> res.reject, round(res.bonferroni, 2), res.pvalue < 0.001
    (True, 2.5, True)
    """
    where = "multiplier_max_t"
    try:
        arr = np.asarray(delta, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InputError(f"{where}: delta: expected numbers ({err})") from err
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 1:
        raise InputError(f"{where}: delta: expected shape (n_splits >= 2, n_budgets >= 1), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise InputError(f"{where}: delta: must be finite ({int((~np.isfinite(arr)).sum())} cells)")
    alpha = check_confidence(alpha, where=where, name="alpha")
    n_resamples = int(
        check_param(n_resamples, where=where, name="n_resamples", target_type=numbers.Integral, min_val=1)
    )
    if alternative not in ("greater", "two-sided"):
        raise ConfigError(f"{where}: alternative: must be 'greater' or 'two-sided', got {alternative!r}")
    rng = check_rng(rng, where=where)

    n_splits, n_budgets = arr.shape
    mean = arr.mean(axis=0)
    sd = arr.std(axis=0, ddof=1)
    safe_sd = np.where(sd > 0, sd, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, np.sqrt(n_splits) * mean / safe_sd, np.sign(mean) * np.inf)
    t = np.where((sd == 0) & (mean == 0), 0.0, t)
    standardised = np.where(sd > 0, (arr - mean) / safe_sd, 0.0) / np.sqrt(n_splits - 1.0)
    two_sided = alternative == "two-sided"
    null_max = np.empty(n_resamples)
    block = max(1, 4_000_000 // max(n_splits, n_budgets))
    for start in range(0, n_resamples, block):
        xi = rng.standard_normal((min(block, n_resamples - start), n_splits))
        g = xi @ standardised
        null_max[start : start + len(xi)] = (np.abs(g) if two_sided else g).max(axis=1)
    t_obs = float(np.abs(t).max() if two_sided else t.max())
    critical = float(np.quantile(null_max, 1.0 - alpha))
    pvalue = (1.0 + np.count_nonzero(null_max >= t_obs)) / (n_resamples + 1.0)
    bonferroni = float(norm.isf(alpha / (2 * n_budgets if two_sided else n_budgets)))
    return MaxTResult(
        statistics=t,
        statistic=t_obs,
        critical_value=critical,
        margin=t_obs - critical,
        bonferroni=bonferroni,
        pvalue=float(pvalue),
        reject=bool(t_obs > critical),
        n_budgets=n_budgets,
        n_splits=n_splits,
        alternative=alternative,
    )
