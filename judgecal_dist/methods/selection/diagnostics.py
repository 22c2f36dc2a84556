r"""Calibration-set scope diagnostics P1-P3 and the below-chance flag (spec 000 §3.8).

Each function returns a tidy frame with one row per judge (or per step) and boolean flag columns,
computed on the calibration split only (spec §7 pitfall 5). Thresholds default to the spec's recommended values
(the paper's are lost): P1 review below 0.80 and filter at or below 0.60; P2 floor 0.01 nats, large panels from
20 judges, changes within 0.005; P3 near-complete base panel at most 1% missing, partial missingness 1-20%,
Fisher p < 0.01.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   §4.5 and H.8.
.. [2] R. A. Fisher. On the interpretation of chi-squared from contingency tables, and the calculation of P.
   JRSS 85(1), 1922, doi:10.2307/2340521.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import beta as beta_dist
from scipy.stats import fisher_exact

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.aggregation.votes import MISSING, check_judge_counts, check_votes
from judgecal_dist.methods.selection.curate import check_judge_ids
from judgecal_dist.stats.checks import check_binary_labels, check_param, check_same_length

__all__ = ["flag_parse_rate", "flag_below_chance", "flag_saturation", "flag_missingness"]


def _rate(value: float, name: str, where: str) -> float:
    return float(check_param(value, where=where, name=name, target_type=numbers.Real, min_val=0.0, max_val=1.0))


def flag_parse_rate(
    n_votes: npt.ArrayLike,
    n_items: int,
    judge_ids: npt.ArrayLike | None = None,
    *,
    review_below: float = 0.80,
    filter_at_or_below: float = 0.60,
) -> pd.DataFrame:
    r"""P1 parseability: :math:`\rho_j = n_j / n_{\mathrm{cal}}`, review if :math:`\rho_j < 0.80`, filter if
    :math:`\rho_j \le 0.60`.

    The denominator is every calibration item, including items where the judge has no row at all (spec §3.8,
    §7 pitfall 3), so pass the number of calibration items, not the judge's row count.

    Parameters
    ----------
    n_votes : array-like of shape (n_judges,)
        Non-missing calibration verdicts per judge, :math:`n_j`.
    n_items : int
        Calibration items :math:`n_{\mathrm{cal}}`.
    judge_ids : sequence of str, optional
        Labels of the rows (positions when omitted).
    review_below, filter_at_or_below : float
        Thresholds :math:`\tau_{\mathrm{rev}}` and :math:`\tau_{\mathrm{filt}}` in [0, 1].

    Returns
    -------
    pandas.DataFrame
        ``judge_id``, ``n_votes``, ``parse_rate``, ``review``, ``filter``.

    Raises
    ------
    InputError
        If a count is negative, not an integer, or exceeds ``n_items``, or ``judge_ids`` is invalid.
    ConfigError
        If ``n_items`` is not a positive integer or a threshold is outside [0, 1] or above the other.

    Examples
    --------
    >>> flag_parse_rate([100, 79, 54], 100, ["a", "b", "c"])
      judge_id  n_votes  parse_rate  review  filter
    0        a      100        1.00   False   False
    1        b       79        0.79    True   False
    2        c       54        0.54    True    True
    """
    where = "flag_parse_rate"
    n_items = int(check_param(n_items, where=where, name="n_items", target_type=numbers.Integral, min_val=1))
    n_j, _ = check_judge_counts(n_votes, np.zeros(np.shape(n_votes), dtype=np.int64), where=where)
    over = n_j > n_items
    if over.any():
        raise InputError(
            f"{where}: n_votes: exceeds n_items={n_items} ({int(over.sum())} judges, e.g. {np.flatnonzero(over)[:3]})"
        )
    review, filt = _rate(review_below, "review_below", where), _rate(filter_at_or_below, "filter_at_or_below", where)
    if filt > review:
        raise ConfigError(f"{where}: filter_at_or_below={filt} must not exceed review_below={review}")
    rate = n_j / n_items
    ids = check_judge_ids(judge_ids, n_judges=n_j.size, where=where)
    return pd.DataFrame(
        {"judge_id": ids, "n_votes": n_j, "parse_rate": rate, "review": rate < review, "filter": rate <= filt}
    )


def flag_below_chance(
    n_votes: npt.ArrayLike,
    n_correct: npt.ArrayLike,
    judge_ids: npt.ArrayLike | None = None,
    *,
    method: str = "wald",
    z: float = 1.96,
    level: float = 0.975,
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> pd.DataFrame:
    r"""Judges reliably below chance: Wald :math:`\hat\theta_j + z\,\mathrm{SE}_j < 1/2`, or Bayesian
    :math:`P(\theta_j < 1/2 \mid \mathcal C) > 0.975` under :math:`\mathrm{Beta}(a_j, b_j)` (spec §3.8).

    .. math::

        \hat\theta_j = c_j/n_j,\quad \mathrm{SE}_j = \sqrt{\hat\theta_j(1-\hat\theta_j)/n_j},\qquad
        a_j = c_j + \alpha_0,\ b_j = n_j - c_j + \beta_0 .

    Both columns are always reported; ``below_chance`` follows ``method``. The flag is a report plus an optional
    action: a stable below-chance judge is informative once flipped (Theorem 1), and the one-coin weight already
    flips it, so spec §3.8 keeps the filter off in the inclusion experiments.

    Parameters
    ----------
    n_votes, n_correct : array-like of shape (n_judges,)
        Calibration counts :math:`n_j`, :math:`c_j`.
    judge_ids : sequence of str, optional
        Row labels.
    method : {"wald", "bayes"}, default "wald"
        Rule behind ``below_chance``.
    z : float, default 1.96
        Wald multiplier.
    level : float, default 0.975
        Posterior probability threshold of the Bayesian rule.
    alpha0, beta0 : float, default 1.0
        Beta prior of the Bayesian rule.

    Returns
    -------
    pandas.DataFrame
        ``judge_id``, ``n_votes``, ``n_correct``, ``accuracy`` (:math:`\hat\theta_j`, NaN if :math:`n_j = 0`),
        ``se``, ``wald_upper`` (:math:`\hat\theta_j + z\,\mathrm{SE}_j`), ``prob_below_half``, ``below_chance``.
        A judge without votes is never flagged.

    Raises
    ------
    InputError
        If the counts are invalid or ``judge_ids`` is invalid.
    ConfigError
        If ``method`` is unknown or a numeric parameter is out of range.

    Notes
    -----
    The Wald interval is degenerate at :math:`\hat\theta_j = 0` (SE = 0, flagged whatever :math:`n_j`); the
    Bayesian rule is the safer choice for judges with few votes.

    Examples
    --------
    >>> flag_below_chance([100, 100, 10], [30, 45, 2])[["wald_upper", "below_chance"]].round(3)
       wald_upper  below_chance
    0       0.390          True
    1       0.548         False
    2       0.448          True
    """
    where = "flag_below_chance"
    n_j, c_j = check_judge_counts(n_votes, n_correct, where=where)
    ids = check_judge_ids(judge_ids, n_judges=n_j.size, where=where)
    if method not in ("wald", "bayes"):
        raise ConfigError(f"{where}: method: must be 'wald' or 'bayes', got {method!r}")
    z = float(check_param(z, where=where, name="z", target_type=numbers.Real, min_val=0.0))
    level = float(check_param(level, where=where, name="level", target_type=numbers.Real, min_val=0.5, max_val=1.0))
    for name, value in (("alpha0", alpha0), ("beta0", beta0)):
        check_param(value, where=where, name=name, target_type=numbers.Real, min_val=0.0, include_boundaries="neither")
    voted = n_j > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(voted, c_j / n_j, np.nan)
        se = np.sqrt(acc * (1.0 - acc) / n_j)
    upper = acc + z * se
    prob_below = beta_dist.cdf(0.5, c_j + alpha0, n_j - c_j + beta0)  # P(theta_j < 1/2 | C)
    flag = (upper < 0.5) if method == "wald" else (prob_below > level)
    return pd.DataFrame(
        {
            "judge_id": ids,
            "n_votes": n_j,
            "n_correct": c_j,
            "accuracy": acc,
            "se": se,
            "wald_upper": upper,
            "prob_below_half": prob_below,
            "below_chance": flag & voted,
        }
    )


def flag_saturation(
    panel_sizes: npt.ArrayLike,
    nlls: npt.ArrayLike,
    *,
    floor: float = 0.01,
    j_large: int = 20,
    delta: float = 0.005,
) -> pd.DataFrame:
    r"""P2 saturation along a chain of nested panels: adding judges to a large panel whose calibrated NLL sits at the
    sharpness floor moves it by at most :math:`\pm\delta`.

    For consecutive panels :math:`A_t \subset A_{t+1}` (sizes :math:`J_t < J_{t+1}`), step :math:`t` is saturated
    when :math:`J_t \ge J_{\mathrm{large}}`, :math:`\mathrm{NLL}(A_{t+1}) \le f` and
    :math:`|\mathrm{NLL}(A_{t+1}) - \mathrm{NLL}(A_t)| \le \delta` (spec §3.8, operationalised). Use cross-fitted
    calibrated NLLs (§5.2), never in-sample ones. A saturated pool calls for filtering the added judges or
    switching from one-coin to Dawid-Skene.

    Parameters
    ----------
    panel_sizes : array-like of int, shape (n_panels,)
        Strictly increasing panel sizes of the nested chain.
    nlls : array-like of float, shape (n_panels,)
        Calibrated NLL of each panel.
    floor, j_large, delta
        :math:`f` (nats), :math:`J_{\mathrm{large}}`, :math:`\delta` (nats).

    Returns
    -------
    pandas.DataFrame
        One row per step: ``size_from``, ``size_to``, ``nll_from``, ``nll_to``, ``change``, ``large_panel``,
        ``at_floor``, ``saturated``.

    Raises
    ------
    InputError
        If the arrays differ in length, have fewer than 2 panels, sizes are not strictly increasing positive
        integers, or an NLL is negative or not finite.
    ConfigError
        If a threshold is negative or ``j_large`` is not a positive integer.

    Examples
    --------
    >>> flag_saturation([10, 20, 30], [0.020, 0.007, 0.006])["saturated"].tolist()
    [False, True]
    """
    where = "flag_saturation"
    sizes = np.asarray(panel_sizes)
    values = np.asarray(nlls, dtype=np.float64)
    if sizes.ndim != 1 or values.shape != sizes.shape or sizes.size < 2:
        raise InputError(
            f"{where}: panel_sizes, nlls: expected two 1-D arrays of equal length >= 2, got {sizes.shape}, {values.shape}"
        )
    if not np.issubdtype(sizes.dtype, np.integer) or (sizes < 1).any() or (np.diff(sizes) <= 0).any():
        raise InputError(f"{where}: panel_sizes: must be strictly increasing positive integers, got {sizes.tolist()}")
    if not (np.isfinite(values) & (values >= 0)).all():
        raise InputError(f"{where}: nlls: must be finite and >= 0, got {values.tolist()}")
    floor = float(check_param(floor, where=where, name="floor", target_type=numbers.Real, min_val=0.0))
    delta = float(check_param(delta, where=where, name="delta", target_type=numbers.Real, min_val=0.0))
    j_large = int(check_param(j_large, where=where, name="j_large", target_type=numbers.Integral, min_val=1))
    change = np.diff(values)
    large = sizes[:-1] >= j_large
    at_floor = values[1:] <= floor
    return pd.DataFrame(
        {
            "size_from": sizes[:-1],
            "size_to": sizes[1:],
            "nll_from": values[:-1],
            "nll_to": values[1:],
            "change": change,
            "large_panel": large,
            "at_floor": at_floor,
            "saturated": large & at_floor & (np.abs(change) <= delta),
        }
    )


def flag_missingness(
    V: npt.ArrayLike,
    y: npt.ArrayLike,
    judge_ids: npt.ArrayLike | None = None,
    *,
    added: Sequence[int] | None = None,
    complete_max: float = 0.01,
    partial_max: float = 0.20,
    alpha: float = 0.01,
) -> pd.DataFrame:
    r"""P3 aggregator compatibility: partial missingness added to a complete panel, or label-dependent missingness.

    Per judge, the missing rate :math:`m_j` and a two-sided Fisher exact test of :math:`\mathbb 1[V_{ij} = \bot]`
    against :math:`Y_i` on the 2x2 table (missing, observed) x (Y = 1, Y = 0). Flags (spec §3.8):

    * ``label_dependent``: Fisher :math:`p < \alpha`;
    * ``partial_added``: the judge is an added judge with :math:`\text{complete\_max} < m_j \le \text{partial\_max}`
      while every base judge has :math:`m_j \le \text{complete\_max}` (a (near-)complete base panel).

    Flagged judges call for comparing cross-fitted NLL of one-coin against Dawid-Skene with and without them.

    Parameters
    ----------
    V : array-like of shape (n_items, n_judges)
        Calibration vote codes (-1 missing, including items where the judge has no row).
    y : array-like of shape (n_items,)
        Calibration labels.
    judge_ids : sequence of str, optional
        Row labels.
    added : sequence of int, optional
        Column indices of the judges added to the base panel (the rest form the base). By default the base is
        the judges with :math:`m_j \le \text{complete\_max}` and every other judge counts as added.
    complete_max, partial_max : float, default 0.01, 0.20
        Missing-rate bounds of a near-complete judge and of partial missingness.
    alpha : float, default 0.01
        Level of the Fisher test.

    Returns
    -------
    pandas.DataFrame
        ``judge_id``, ``n_missing``, ``missing_rate``, ``missing_pos`` / ``missing_neg`` (missing verdicts on
        items with Y = 1 / Y = 0), ``fisher_p``, ``label_dependent``, ``added``, ``partial_added``, ``p3_flag``.

    Raises
    ------
    InputError
        If ``V`` or ``y`` is invalid, their lengths differ, or ``added`` holds an index outside the panel.
    ConfigError
        If a rate is outside [0, 1], ``complete_max > partial_max``, or ``alpha`` is outside (0, 1).

    Notes
    -----
    One :func:`scipy.stats.fisher_exact` per judge; a judge with no missing verdicts gets :math:`p = 1`.

    Examples
    --------
    >>> y = np.array([1] * 50 + [0] * 50)
    >>> V = np.column_stack([y, y, np.where(np.arange(100) < 12, -1, y)])  # judge 2 misses 12 positives
    >>> flag_missingness(V, y)[["missing_rate", "label_dependent", "partial_added"]]
       missing_rate  label_dependent  partial_added
    0          0.00            False          False
    1          0.00            False          False
    2          0.12             True           True
    """
    where = "flag_missingness"
    votes = check_votes(V, where=where)
    labels = check_binary_labels(y, where=where)
    check_same_length(("V", votes), ("y", labels), where=where)
    complete_max, partial_max = _rate(complete_max, "complete_max", where), _rate(partial_max, "partial_max", where)
    if complete_max > partial_max:
        raise ConfigError(f"{where}: complete_max={complete_max} must not exceed partial_max={partial_max}")
    alpha = float(
        check_param(
            alpha,
            where=where,
            name="alpha",
            target_type=numbers.Real,
            min_val=0,
            max_val=1,
            include_boundaries="neither",
        )
    )
    J = votes.shape[1]
    ids = check_judge_ids(judge_ids, n_judges=J, where=where)
    missing = votes == MISSING
    rate = missing.mean(axis=0)
    miss_pos, miss_neg, p = _missing_by_label(missing, labels)
    is_added = rate > complete_max if added is None else _added_mask(added, J, where)
    base_complete = bool((~is_added).any() and (rate[~is_added] <= complete_max).all())
    partial = is_added & (rate > complete_max) & (rate <= partial_max) & base_complete
    dependent = p < alpha
    return pd.DataFrame(
        {
            "judge_id": ids,
            "n_missing": missing.sum(axis=0),
            "missing_rate": rate,
            "missing_pos": miss_pos,
            "missing_neg": miss_neg,
            "fisher_p": p,
            "label_dependent": dependent,
            "added": is_added,
            "partial_added": partial,
            "p3_flag": dependent | partial,
        }
    )


def _missing_by_label(
    missing: npt.NDArray[np.bool_], labels: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Per judge: missing verdicts on positives, on negatives, and Fisher's exact two-sided p of the 2x2 table."""
    miss_pos = (missing & (labels[:, None] == 1)).sum(axis=0)
    miss_neg = (missing & (labels[:, None] == 0)).sum(axis=0)
    n_pos, n_neg = int(labels.sum()), int(labels.size - labels.sum())
    p = np.array(
        [
            fisher_exact([[a, b], [n_pos - a, n_neg - b]], alternative="two-sided").pvalue
            for a, b in zip(miss_pos, miss_neg, strict=True)
        ]
    )
    return miss_pos, miss_neg, p


def _added_mask(added: npt.ArrayLike, n_judges: int, where: str) -> npt.NDArray[np.bool_]:
    idx = np.asarray(added, dtype=np.int64).ravel()
    if ((idx < 0) | (idx >= n_judges)).any():
        raise InputError(f"{where}: added: indices must lie in [0, {n_judges}), got {idx.tolist()}")
    is_added = np.zeros(n_judges, dtype=bool)
    is_added[idx] = True
    return is_added
