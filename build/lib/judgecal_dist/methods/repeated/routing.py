r"""Cost-aware escalation from a cheap tier to the full tier, driven by its dispersion (spec 004 §3.6-3.10).

Every method reads, per response ``i`` of every example, the cheap tier's dispersion :math:`\sigma_i` (population
standard deviation of all its non-null samples, :func:`~judgecal_dist.methods.repeated.ensemble.dispersion`) and decides
how much of the full tier to use:

* :class:`HardVarianceRouting` (§3.7): the full mean where :math:`\sigma_i \ge \theta`, the cheap mean otherwise,
  swept over a threshold set; escalation fraction, cost and the cost-accuracy Pareto frontier.
* :class:`SoftBlend` (§3.9): :math:`w_i = 1/(1 + e^{-a(\sigma_i - m)})`,
  :math:`s_i = (1-w_i)\bar s^{c}_i + w_i \bar s^{f}_i`, the midpoint :math:`m` tuned on a training split (first
  strict improvement in ascending order).
* :class:`VarianceInformedEnsemble` (§3.10): :math:`n_i(\sigma_i)` full samples per response, piecewise linear
  between :math:`\sigma_1` and :math:`\sigma_2`, tuned on a training split under a mean-budget constraint.

Accuracy always follows the strict-winner rule of :func:`~judgecal_dist.methods.repeated.ensemble.winner_outcome`.

References
----------
.. [1] An Empirical Investigation of Practical LLM-as-a-Judge Improvement Techniques on RewardBench 2
   (seed 004), §3.4 "Adaptive model escalation", Table 7, Figure 9.
"""

from __future__ import annotations

import numbers
from typing import Self

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.methods.repeated.ensemble import check_scores, dispersion, prefix_means, winner_outcome
from judgecal_dist.stats.checks import check_param

__all__ = [
    "routing_thresholds",
    "hard_route",
    "pareto_frontier",
    "HardVarianceRouting",
    "blend_means",
    "SoftBlend",
    "samples_per_response",
    "VarianceInformedEnsemble",
    "stratified_split",
]

FloatArray = npt.NDArray[np.float64]
#: Fixed part of the hard-routing threshold set: 0.0, 0.1, ..., 2.0 generated as ``i * 0.1`` (spec 004 §3.7).
ROUTING_GRID: tuple[float, ...] = tuple(i * 0.1 for i in range(21))
#: Fixed part of the variance-informed grid (spec 004 §3.10).
VARINF_GRID: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)


def _accuracy(means: FloatArray, chosen: npt.ArrayLike | None) -> tuple[float, int]:
    out = winner_outcome(means, chosen)
    n = int(out.evaluable.sum())
    return (int(out.correct.sum()) / n if n else float("nan")), n


def _check_pair(cheap: npt.ArrayLike, full: npt.ArrayLike, where: str) -> tuple[FloatArray, FloatArray]:
    c = check_scores(cheap, where=where, name="cheap")
    f = check_scores(full, where=where, name="full")
    if c.shape[:2] != f.shape[:2]:
        raise InputError(f"{where}: cheap and full: different (examples, responses): {c.shape[:2]} vs {f.shape[:2]}")
    return c, f


def routing_thresholds(sigma: npt.ArrayLike, grid: tuple[float, ...] = ROUTING_GRID) -> FloatArray:
    """The 10th..90th percentiles (numpy linear) of the flat dispersions united with ``grid``, sorted unique.

    Examples
    --------
    >>> routing_thresholds([0.0, 0.0, 1.0, 1.0], grid=(0.0, 0.5)).round(3).tolist()
    [0.0, 0.2, 0.5, 0.8, 1.0]
    """
    flat = np.asarray(sigma, dtype=np.float64).ravel()
    deciles = np.percentile(flat, np.arange(10, 100, 10))
    return np.unique(np.concatenate([deciles, np.asarray(grid, dtype=np.float64)]))


def hard_route(
    cheap_means: npt.ArrayLike, full_means: npt.ArrayLike, sigma: npt.ArrayLike, theta: float
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    r"""Effective means of hard routing at threshold ``theta`` and the escalated responses (spec 004 §3.7).

    .. math::

        s_i = \bar s^{f}_i \text{ if } \sigma_i \ge \theta \text{ and } \bar s^{f}_i \text{ exists,
        else } \bar s^{c}_i

    Examples
    --------
    >>> means, esc = hard_route([[5.0, 6.0]], [[7.0, np.nan]], [[0.5, 0.9]], 0.5)
    >>> means.tolist(), esc.tolist()
    ([[7.0, 6.0]], [[True, False]])
    """
    c, f = np.asarray(cheap_means, np.float64), np.asarray(full_means, np.float64)
    escalate = (np.asarray(sigma, np.float64) >= theta) & ~np.isnan(f)
    return np.where(escalate, f, c), escalate


def pareto_frontier(points: pd.DataFrame, *, cost: str = "cost", accuracy: str = "accuracy") -> pd.DataFrame:
    """Points sorted by cost (stable), keeping each one whose accuracy beats every cheaper kept point strictly.

    Examples
    --------
    >>> pts = pd.DataFrame({"theta": [0, 1, 2], "cost": [3.0, 2.0, 1.0], "accuracy": [0.9, 0.7, 0.8]})
    >>> pareto_frontier(pts)["theta"].tolist()
    [2, 0]
    """
    ordered = points.sort_values(cost, kind="stable")
    best, keep = -np.inf, []
    for idx, acc in zip(ordered.index, ordered[accuracy].to_numpy(), strict=True):
        if acc > best:
            keep.append(idx)
            best = acc
    return ordered.loc[keep].reset_index(drop=True)


class HardVarianceRouting(BaseEstimator):
    r"""Hard variance routing swept over thresholds: accuracy, escalation fraction and cost (spec 004 §3.7).

    Each response uses the full tier's mean (all samples) when the cheap tier's dispersion is at least
    :math:`\theta` and a full mean exists, else the cheap mean. The escalation fraction counts escalated
    responses over all responses of all rows; the cost per example is

    .. math:: C(\theta) = C_{\mathrm{cheap}} + p_{\mathrm{esc}}(\theta)\, C_{\mathrm{full}}.

    Parameters
    ----------
    thresholds : sequence of float, optional
        Default: :func:`routing_thresholds` of the dispersions seen in :meth:`fit`.

    Attributes
    ----------
    sweep_ : DataFrame
        ``theta, n, accuracy, p_escalate, cost, cost_ratio`` per threshold, ascending.
    frontier_ : DataFrame
        :func:`pareto_frontier` of ``sweep_``.

    Examples
    --------
    >>> cheap = np.array([[[6, 6], [6, 6]], [[5, 7], [6, 6]]], dtype=float)
    >>> full = np.array([[[8, 8], [2, 2]], [[8, 8], [2, 2]]], dtype=float)
    >>> r = HardVarianceRouting(thresholds=[0.0, 0.5, 2.0]).fit(cheap, full, cost_cheap=1.0, cost_full=4.0)
    >>> r.sweep_[["theta", "accuracy", "p_escalate", "cost"]].to_dict("list")
    {'theta': [0.0, 0.5, 2.0], 'accuracy': [1.0, 0.5, 0.0], 'p_escalate': [1.0, 0.25, 0.0], 'cost': [5.0, 2.0, 1.0]}
    """

    def __init__(self, *, thresholds: npt.ArrayLike | None = None) -> None:
        self.thresholds = thresholds

    def fit(
        self,
        cheap: npt.ArrayLike,
        full: npt.ArrayLike,
        chosen: npt.ArrayLike | None = None,
        *,
        cost_cheap: float,
        cost_full: float,
    ) -> Self:
        """Sweep the thresholds on ``(cheap, full)`` score tensors; costs are mean $/example of each tier."""
        c, f = _check_pair(cheap, full, "HardVarianceRouting.fit")
        sigma = dispersion(c)
        c_mean, f_mean = prefix_means(c, c.shape[2]), prefix_means(f, f.shape[2])
        thetas = routing_thresholds(sigma) if self.thresholds is None else np.asarray(self.thresholds, np.float64)
        rows = []
        for theta in thetas.tolist():
            means, esc = hard_route(c_mean, f_mean, sigma, theta)
            acc, n = _accuracy(means, chosen)
            p_esc = float(esc.sum()) / esc.size
            cost = cost_cheap + p_esc * cost_full
            rows.append(
                {
                    "theta": theta,
                    "n": n,
                    "accuracy": acc,
                    "p_escalate": p_esc,
                    "cost": cost,
                    "cost_ratio": cost / (cost_cheap + cost_full),
                }
            )
        self.sweep_ = pd.DataFrame(rows)
        self.frontier_ = pareto_frontier(self.sweep_)
        return self


def blend_means(
    cheap_means: npt.ArrayLike, full_means: npt.ArrayLike, sigma: npt.ArrayLike, midpoint: float, steepness: float
) -> tuple[FloatArray, FloatArray]:
    r"""Sigmoid blend of cheap and full means, and the weights (spec 004 §3.9).

    ``w = 1 / (1 + exp(-a (sigma - m)))`` and ``(1 - w) * cheap + w * full`` are evaluated literally as in the
    paper, so that ties between responses break (or not) exactly as in its published figures; where only one
    mean exists it is used, where none exists the result is NaN.

    Examples
    --------
    >>> means, w = blend_means([[4.0, 6.0]], [[8.0, np.nan]], [[0.5, 0.5]], 0.5, 10.0)
    >>> means.tolist(), w.tolist()
    ([[6.0, 6.0]], [[0.5, 0.5]])
    """
    c, f = np.asarray(cheap_means, np.float64), np.asarray(full_means, np.float64)
    w = 1.0 / (1.0 + np.exp(-steepness * (np.asarray(sigma, np.float64) - midpoint)))
    mixed = (1 - w) * c + w * f
    return np.where(np.isnan(f), c, np.where(np.isnan(c), f, mixed)), w


class SoftBlend(BaseEstimator):
    r"""Sigmoid blending of cheap and full means by the cheap tier's dispersion (spec 004 §3.9).

    .. math:: w_i = \frac{1}{1 + e^{-a(\sigma_i - m)}},\qquad s_i = (1 - w_i)\,\bar s^{c}_i + w_i\,\bar s^{f}_i

    with the steepness :math:`a` fixed and the midpoint :math:`m` chosen on the training examples: candidates are
    the sorted unique training dispersions, scanned in ascending order, and a candidate replaces the current
    midpoint only when its training accuracy is strictly greater (start: accuracy 0 at :math:`m = 0`).

    Parameters
    ----------
    steepness : float, default 10.0

    Attributes
    ----------
    midpoint_ : float
    train_accuracy_ : float
    n_train_ : int
        Evaluable training examples at ``midpoint_``.

    Examples
    --------
    >>> cheap = np.array([[[5, 5], [6, 6]], [[6, 6], [5, 5]]], dtype=float)
    >>> full = np.array([[[9, 9], [1, 1]], [[9, 9], [1, 1]]], dtype=float)
    >>> SoftBlend().fit(cheap, full).midpoint_
    0.0
    """

    def __init__(self, *, steepness: float = 10.0) -> None:
        self.steepness = steepness

    def _means(self, cheap: FloatArray, full: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        return prefix_means(cheap, cheap.shape[2]), prefix_means(full, full.shape[2]), dispersion(cheap)

    def fit(self, cheap: npt.ArrayLike, full: npt.ArrayLike, chosen: npt.ArrayLike | None = None) -> Self:
        """Choose the midpoint on training score tensors ``cheap`` and ``full``."""
        check_param(self.steepness, where="SoftBlend", name="steepness", target_type=numbers.Real, min_val=0.0)
        c, f = _check_pair(cheap, full, "SoftBlend.fit")
        c_mean, f_mean, sigma = self._means(c, f)
        best, midpoint, n_best = 0.0, 0.0, 0
        for m in np.unique(sigma).tolist():
            acc, n = _accuracy(blend_means(c_mean, f_mean, sigma, m, self.steepness)[0], chosen)
            if acc > best:  # first strict improvement: ties go to the smallest midpoint
                best, midpoint, n_best = acc, m, n
        self.midpoint_, self.train_accuracy_, self.n_train_ = float(midpoint), float(best), n_best
        return self

    def transform(self, cheap: npt.ArrayLike, full: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Blended means and weights at the fitted midpoint."""
        check_is_fitted(self)
        c, f = _check_pair(cheap, full, "SoftBlend.transform")
        c_mean, f_mean, sigma = self._means(c, f)
        return blend_means(c_mean, f_mean, sigma, self.midpoint_, self.steepness)

    def score(self, cheap: npt.ArrayLike, full: npt.ArrayLike, chosen: npt.ArrayLike | None = None) -> float:
        """Strict-winner accuracy of the blended means."""
        return _accuracy(self.transform(cheap, full)[0], chosen)[0]


def samples_per_response(sigma: npt.ArrayLike, sigma1: float, sigma2: float, n_max: int) -> npt.NDArray[np.int64]:
    r"""Full-tier samples per response of variance-informed ensembling (spec 004 §3.10).

    .. math::

        n_i = 1 \ (\sigma_i \le \sigma_1),\quad
        \operatorname{clip}\Big(\operatorname{round}\big(1 + \tfrac{(\sigma_i - \sigma_1)(n_{\max} - 1)}
        {\sigma_2 - \sigma_1}\big), 1, n_{\max}\Big)
        \ (\sigma_1 < \sigma_i < \sigma_2),\quad n_{\max} \ (\sigma_i \ge \sigma_2)

    with round half to even (Python's ``round``, numpy's ``rint``).

    Examples
    --------
    >>> samples_per_response([0.0, 0.5, 0.75, 1.0], 0.5, 1.0, 8).tolist()
    [1, 1, 4, 8]
    """
    s = np.asarray(sigma, dtype=np.float64)
    ramp = np.clip(np.rint(1 + (s - sigma1) * (n_max - 1) / (sigma2 - sigma1)), 1, n_max)
    return np.where(s <= sigma1, 1, np.where(s >= sigma2, n_max, ramp)).astype(np.int64)


class VarianceInformedEnsemble(BaseEstimator):
    r"""Variance-informed ensembling: more full samples where the cheap tier disagrees with itself (spec 004 §3.10).

    Response ``i`` is scored with the mean of the non-null values among its first :math:`n_i(\sigma_i)` full
    samples (:func:`samples_per_response`). The pair :math:`(\sigma_1, \sigma_2)` is chosen on the training
    examples from a grid (the training dispersions' percentiles at ``percentiles`` united with ``grid``, sorted
    unique), over all pairs :math:`\sigma_2 > \sigma_1` in ascending order, keeping the first strict improvement
    of training accuracy among pairs whose mean budget :math:`\sum_i n_i / (\text{responses} \times \text{rows})`
    is at most ``budget``. The unconstrained optimum is kept too.

    Parameters
    ----------
    n_max : int, default 8
    budget : float, default 2.0
        Largest mean full samples per response.
    percentiles : sequence of float, default ``linspace(0, 95, 15)``
    grid : sequence of float, default (0, 0.1, ..., 0.6, 0.8, 1.0)

    Attributes
    ----------
    sigma1_, sigma2_ : float
        Constrained optimum (NaN when no pair meets the budget).
    train_accuracy_, train_budget_ : float
    unconstrained_ : dict
        ``sigma1, sigma2, train_accuracy, train_budget`` of the unconstrained optimum.
    grid_ : ndarray
        The candidate values.

    Examples
    --------
    >>> cheap = np.array([[[5, 5], [5, 7]]], dtype=float)
    >>> full = np.array([[[6, 9], [7, 1]]], dtype=float)
    >>> v = VarianceInformedEnsemble(n_max=2, budget=2.0, percentiles=[], grid=[0.0, 0.5]).fit(cheap, full)
    >>> (v.sigma1_, v.sigma2_, v.train_accuracy_)
    (0.0, 0.5, 1.0)
    """

    def __init__(
        self,
        *,
        n_max: int = 8,
        budget: float = 2.0,
        percentiles: npt.ArrayLike | None = None,
        grid: npt.ArrayLike = VARINF_GRID,
    ) -> None:
        self.n_max = n_max
        self.budget = budget
        self.percentiles = percentiles
        self.grid = grid

    def _evaluate(
        self, full: FloatArray, sigma: FloatArray, s1: float, s2: float, chosen: npt.ArrayLike | None
    ) -> tuple[float, int, float]:
        n = samples_per_response(sigma, s1, s2, self.n_max)
        acc, n_eval = _accuracy(prefix_means(full, n), chosen)
        return acc, n_eval, float(n.sum()) / n.size

    def fit(self, cheap: npt.ArrayLike, full: npt.ArrayLike, chosen: npt.ArrayLike | None = None) -> Self:
        """Choose ``(sigma1, sigma2)`` on training score tensors."""
        c, f = _check_pair(cheap, full, "VarianceInformedEnsemble.fit")
        check_param(
            self.n_max,
            where="VarianceInformedEnsemble",
            name="n_max",
            target_type=numbers.Integral,
            min_val=1,
            max_val=f.shape[2],
        )
        sigma = dispersion(c)
        pct = np.linspace(0, 95, 15) if self.percentiles is None else np.asarray(self.percentiles, np.float64)
        points = np.percentile(sigma.ravel(), pct) if len(pct) else np.empty(0)
        self.grid_ = np.unique(np.concatenate([points, np.asarray(self.grid, np.float64)]))
        best = {"constrained": (0.0, np.nan, np.nan, np.nan), "unconstrained": (0.0, np.nan, np.nan, np.nan)}
        for i, s1 in enumerate(self.grid_.tolist()):
            for s2 in self.grid_[i + 1 :].tolist():
                acc, _, spent = self._evaluate(f, sigma, s1, s2, chosen)
                if acc > best["unconstrained"][0]:
                    best["unconstrained"] = (acc, s1, s2, spent)
                if spent <= self.budget and acc > best["constrained"][0]:
                    best["constrained"] = (acc, s1, s2, spent)
        acc, self.sigma1_, self.sigma2_, self.train_budget_ = best["constrained"]
        self.train_accuracy_ = acc if np.isfinite(self.sigma1_) else float("nan")
        u = best["unconstrained"]
        self.unconstrained_ = {"sigma1": u[1], "sigma2": u[2], "train_accuracy": u[0], "train_budget": u[3]}
        return self

    def evaluate(
        self,
        cheap: npt.ArrayLike,
        full: npt.ArrayLike,
        chosen: npt.ArrayLike | None = None,
        *,
        unconstrained: bool = False,
    ) -> dict[str, float]:
        """``accuracy``, ``n`` (evaluable) and ``budget`` (mean samples per response) at the fitted pair."""
        check_is_fitted(self)
        c, f = _check_pair(cheap, full, "VarianceInformedEnsemble.evaluate")
        s1, s2 = (
            (self.unconstrained_["sigma1"], self.unconstrained_["sigma2"])
            if unconstrained
            else (self.sigma1_, self.sigma2_)
        )
        acc, n, spent = self._evaluate(f, dispersion(c), s1, s2, chosen)
        return {"accuracy": acc, "n": n, "budget": spent}


def stratified_split(
    strata: npt.ArrayLike, *, test_fraction: float = 0.2, random_state: int = 42
) -> npt.NDArray[np.bool_]:
    """Test mask of the paper's stratified split (spec 004 §3.8).

    One ``numpy.random.RandomState(random_state)``; for each stratum in sorted order, that stratum's row positions
    in their original order are shuffled in place with the shared generator, and the first
    ``max(1, floor(test_fraction * n))`` of them form the test set.

    Examples
    --------
    >>> stratified_split(["a"] * 10 + ["b"] * 5).sum()
    np.int64(3)
    """
    labels = np.asarray(strata, dtype=object)
    rng = np.random.RandomState(random_state)
    test = np.zeros(len(labels), dtype=bool)
    for name in sorted(set(labels.tolist())):
        rows = np.flatnonzero(labels == name)
        rng.shuffle(rows)
        test[rows[: max(1, int(np.floor(test_fraction * len(rows))))]] = True
    return test
