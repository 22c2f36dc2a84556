r"""Which items to label next: inclusion probabilities from the calibrated panel's uncertainty, and the draw.

The design (Zrnic & Candès 2024, active statistical inference). A prediction-powered estimate of a mean with
proxy :math:`f` and labels drawn independently with probabilities :math:`\pi_i` is

.. math:: \hat\theta = \frac1N \sum_{i=1}^N f_i + \frac1N \sum_{i \in S} \frac{Y_i - f_i}{\pi_i},

unbiased for any :math:`\pi_i > 0`, with variance :math:`\frac{1}{N^2}\sum_i \sigma_i^2 (1/\pi_i - 1)` where
:math:`\sigma_i^2 = \mathrm{E}[(Y_i - f_i)^2 \mid f_i]`. Minimising it under :math:`\sum_i \pi_i = n` gives
:math:`\pi_i \propto \sigma_i` (their section 3, the optimal sampling rule); for a 0/1 outcome with a calibrated
proxy :math:`p_i`, :math:`\sigma_i = \sqrt{p_i(1-p_i)}`. A confident but wrong proxy would then almost never be
checked and its weight :math:`1/\pi_i` would explode, so the rule is mixed with a uniform floor (their
"hybrid" rule):

.. math:: \pi_i = n\left[\frac{\phi}{N} + (1-\phi)\, a_i\right],\qquad \sum_i a_i = 1,

so every item has :math:`\pi_i \ge \phi n / N` and every weight is at most :math:`N / (\phi n)`. Probabilities
above 1 are set to 1 and the excess is spread over the others in proportion to their weights (repeated until
none exceeds 1), which keeps :math:`\sum_i \pi_i = n` and only raises the others, so the floor still holds.

Strata split the active share :math:`(1-\phi)n` across strata, proportionally to their sizes
(``allocation="proportional"``) or by Neyman's rule (``"neyman"``: to :math:`\sum_{i\in h}\sigma_i`, Cochran 1977,
section 5.5, with the item-level :math:`\sigma_i`), and within a stratum in proportion to :math:`\sigma_i`. The
floor stays uniform over all items. Neyman's split over strata equals the unstratified rule; proportional
allocation guarantees each stratum its share of the labels whatever the proxy says.

The draw is Poisson sampling: item :math:`i` is selected iff :math:`u_i < \pi_i`, with :math:`u_i` a keyed hash of
(seed, item key) (:func:`judgecal_dist.splits.split_uniforms`). Its inclusion probabilities are exactly
:math:`\pi_i`, draws are independent (so the variance formula above, which the estimators use, is the design's
own), and each decision depends only on the item and the seed, so Spark and this process select the same items.
The price is a random size: :math:`\mathrm{E}|S| = n`, :math:`\mathrm{Var}|S| = \sum_i \pi_i(1-\pi_i)`; the queue
says its size.

References
----------
.. [1] T. Zrnic, E. J. Candès. Active Statistical Inference. ICML 2024. arXiv:2403.03208.
.. [2] W. G. Cochran. Sampling Techniques, 3rd ed. Wiley, 1977, sections 5.5 (optimum allocation) and 5.9.
.. [3] C.-E. Särndal, B. Swensson, J. Wretman. Model Assisted Survey Sampling. Springer, 1992, section 3.6
   (Poisson sampling: exact first-order inclusion probabilities, random sample size).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.splits import group_keys, split_uniforms
from judgecal_dist.stats.checks import check_param, check_probabilities

__all__ = [
    "ALLOCATIONS",
    "DESIGN",
    "ITEM_KEY_SEPARATOR",
    "CostDesign",
    "uncertainty",
    "StratumWeights",
    "stratum_weights",
    "top_count",
    "budget_scale",
    "capped",
    "weights_total",
    "Design",
    "plan_design",
    "design_variance",
    "cost_split",
    "item_keys",
    "inclusion_probabilities",
    "cost_optimal_design",
    "draw",
    "draw_mask",
    "round_seed",
]

#: How the active share of the budget is split across strata.
ALLOCATIONS = ("neyman", "proportional")
#: The sampling design :func:`draw` implements (recorded beside every queue).
DESIGN = "poisson"
_WHERE = "inclusion_probabilities"


def uncertainty(p: npt.ArrayLike) -> npt.NDArray[np.float64]:
    r"""The proxy's conditional standard deviation of a 0/1 outcome, :math:`\sqrt{p(1-p)}`.

    Examples
    --------
    >>> uncertainty([0.5, 0.9, 1.0]).round(3)
    array([0.5, 0.3, 0. ])
    """
    q = np.asarray(p, dtype=np.float64)
    return np.sqrt(np.clip(q * (1.0 - q), 0.0, None))


@dataclass(frozen=True)
class StratumWeights:
    r"""Each item's weight :math:`w_i = \phi/N + s_h \sigma_i + k_h` from per-stratum coefficients, so an engine
    needs only per-stratum sums (item counts and :math:`\sum \sigma_i`) to weigh every item.

    ``slope[h] = (1-phi) share_h / sum_{i in h} sigma_i`` (``const[h] = 0``); a stratum whose proxy is certain
    everywhere (sum 0) spreads its share uniformly (``slope[h] = 0``, ``const[h] = (1-phi) share_h / N_h``).
    """

    base: float
    slope: npt.NDArray[np.float64]
    const: npt.NDArray[np.float64]

    def __call__(self, sigma: npt.NDArray[np.float64], codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The weights of items with uncertainty ``sigma`` in strata ``codes``."""
        return self.base + self.slope[codes] * sigma + self.const[codes]


def stratum_weights(
    counts: npt.ArrayLike, sigma_sums: npt.ArrayLike, *, floor: float, allocation: str
) -> StratumWeights:
    """The coefficients of :class:`StratumWeights` from each stratum's item count and sum of uncertainties."""
    n_h = np.asarray(counts, dtype=np.float64)
    s_h = np.asarray(sigma_sums, dtype=np.float64)
    n = float(n_h.sum())
    total = float(s_h.sum())
    # Neyman's split of the active share: to sum(sigma) per stratum; proportional (or a certain proxy): to sizes
    share = n_h / n if allocation == "proportional" or total <= 0.0 else s_h / total
    flat = s_h <= 0.0
    slope = np.where(flat, 0.0, (1.0 - floor) * share / np.where(flat, 1.0, s_h))
    const = np.where(flat, (1.0 - floor) * share / np.maximum(n_h, 1.0), 0.0)
    return StratumWeights(floor / n, slope, const)


def top_count(budget: float, n: int) -> int:
    """How many of the largest weights :func:`budget_scale` needs: at most ``floor(budget)`` items reach 1."""
    return min(n, int(np.floor(budget)) + 1)


def budget_scale(total_weight: float, top_weights: npt.ArrayLike, budget: float, n: int) -> float:
    r"""The scale :math:`c` with :math:`\sum_i \min(1, c\,w_i) = n_{\mathrm{budget}}`, from the weights' total and
    the :func:`top_count` largest weights only (so an engine sends one sum and a few values to the driver).

    The items at 1 are always the largest weights; with the :math:`k` largest capped,
    :math:`c_k = (n_b - k) / (W - \sum_{j \le k} t_j)`, and the right :math:`k` is the first with
    :math:`t_{k+1} c_k < 1`. ``inf`` when the budget takes every item.
    """
    top = np.sort(np.asarray(top_weights, dtype=np.float64))[::-1]
    if budget >= n:
        return float("inf")
    capped_sum = 0.0
    for k in range(len(top)):
        rest = total_weight - capped_sum
        if rest <= 0.0:
            break
        scale = (budget - k) / rest
        # the last item standing takes what is left (rounding could otherwise push it over 1)
        if top[k] * scale < 1.0 or k == n - 1:
            return float(scale)
        capped_sum += float(top[k])
    return float("inf")


def capped(weights: npt.NDArray[np.float64], scale: float) -> npt.NDArray[np.float64]:
    r""":math:`\pi_i = \min(1, c\,w_i)`."""
    with np.errstate(invalid="ignore"):
        return np.minimum(1.0, weights * scale) if np.isfinite(scale) else np.ones_like(weights)


def weights_total(coef: StratumWeights, counts: npt.ArrayLike, sigma_sums: npt.ArrayLike) -> float:
    """:math:`W = \\sum_i w_i` from the per-stratum sums (1 up to rounding, by construction)."""
    n_h = np.asarray(counts, dtype=np.float64)
    return float(n_h.sum() * coef.base + np.dot(coef.slope, sigma_sums) + np.dot(coef.const, n_h))


@dataclass(frozen=True)
class Design:
    """A planned design: the weights' coefficients per stratum (strata in sorted order of their names) and the
    scale :math:`c`; an item's probability is :math:`\\min(1, c\\,w_i)`."""

    names: tuple[str, ...]
    coef: StratumWeights
    scale: float

    def probabilities(self, p: npt.NDArray[np.float64], codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """:math:`\\pi_i` of items with proxy ``p`` in strata ``codes`` (positions in :attr:`names`)."""
        return capped(self.coef(uncertainty(p), codes), self.scale)


def plan_design(
    names: Sequence[str],
    counts: npt.ArrayLike,
    sigma_sums: npt.ArrayLike,
    top_weights: Callable[[StratumWeights, int], npt.ArrayLike],
    budget: float,
    *,
    floor: float,
    allocation: str,
) -> Design:
    """The design from per-stratum sums and a callback giving the ``k`` largest weights: all an engine computes.

    Parameters
    ----------
    names, counts, sigma_sums : sequences of one entry per stratum (sorted names)
        Items and :math:`\\sum_i \\sqrt{p_i(1-p_i)}` per stratum.
    top_weights : callable ``(coef, k) -> array``
        The ``k`` largest item weights under ``coef``.
    budget, floor, allocation
        As :func:`inclusion_probabilities` (checked by the caller).
    """
    coef = stratum_weights(counts, sigma_sums, floor=floor, allocation=allocation)
    n = int(np.sum(counts))
    k = top_count(budget, n)
    scale = budget_scale(weights_total(coef, counts, sigma_sums), top_weights(coef, k), budget, n)
    return Design(tuple(names), coef, scale)


def _strata_codes(strata: npt.ArrayLike | None, n: int) -> tuple[npt.NDArray[np.int64], int]:
    if strata is None:
        return np.zeros(n, dtype=np.int64), 1
    labels = np.asarray(strata)
    if labels.shape != (n,):
        raise InputError(f"{_WHERE}: strata: expected one stratum per item ({n}), got shape {labels.shape}")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    return codes.astype(np.int64), int(codes.max()) + 1


def inclusion_probabilities(
    p: npt.ArrayLike,
    budget: float,
    *,
    floor: float = 0.2,
    strata: npt.ArrayLike | None = None,
    allocation: str = "neyman",
    label_cost: float | None = None,
    proxy_cost: float | None = None,
) -> npt.NDArray[np.float64]:
    r"""Inclusion probabilities :math:`\pi_i` of the active design with a uniform floor (module docstring).

    Parameters
    ----------
    p : array of shape (N,)
        The calibrated panel's probability of the outcome (label A) per item, in [0, 1].
    budget : float
        Expected number of labels, ``0 < budget <= N``; ``sum(pi) == budget``. With ``label_cost`` and
        ``proxy_cost`` it is money instead, split by :func:`cost_optimal_design`.
    floor : float, default 0.2
        Share :math:`\phi \in (0, 1]` of the budget spread uniformly: every :math:`\pi_i \ge \phi\,n/N`. 1 is a
        uniform sample.
    strata : array of shape (N,), optional
        A stratum per item (any values; compared as strings).
    allocation : {"neyman", "proportional"}, default "neyman"
        How the active share is split across strata.
    label_cost, proxy_cost : float, optional
        Cost of one label and of the proxy on one item (both or neither).

    Returns
    -------
    ndarray of float64, shape (N,)

    Raises
    ------
    InputError
        ``p`` not probabilities, ``strata`` of another length.
    ConfigError
        A budget outside (0, N], a floor outside (0, 1], an unknown allocation, a cost that is not positive.

    Examples
    --------
    >>> pi = inclusion_probabilities([0.5, 0.5, 0.99, 0.999], 2, floor=0.2)
    >>> pi.round(3), round(float(pi.sum()), 9)
    (array([0.807, 0.807, 0.241, 0.145]), 2.0)
    """
    q = check_probabilities(p, where=_WHERE)
    floor = float(
        check_param(
            floor,
            where=_WHERE,
            name="floor",
            target_type=numbers.Real,
            min_val=0.0,
            max_val=1.0,
            include_boundaries="right",
        )
    )
    if allocation not in ALLOCATIONS:
        raise ConfigError(f"{_WHERE}: allocation: {allocation!r} is not one of {list(ALLOCATIONS)}")
    codes, n_strata = _strata_codes(strata, len(q))
    if label_cost is not None or proxy_cost is not None:
        design = cost_optimal_design(
            q, budget, label_cost=label_cost, proxy_cost=proxy_cost, floor=floor, strata=strata, allocation=allocation
        )
        return design.inclusion_prob
    return _active(q, _check_budget(budget, len(q)), floor, codes, n_strata, allocation)


def _check_budget(budget: float, n: int) -> float:
    value = float(
        check_param(
            budget, where=_WHERE, name="budget", target_type=numbers.Real, min_val=0.0, include_boundaries="neither"
        )
    )
    if value > n:
        raise ConfigError(f"{_WHERE}: budget: {value:g} labels asked of {n} items; ask for at most {n}")
    return value


def _active(
    q: npt.NDArray[np.float64],
    budget: float,
    floor: float,
    codes: npt.NDArray[np.int64],
    n_strata: int,
    allocation: str,
) -> npt.NDArray[np.float64]:
    """The capped mixture of the floor and the stratified active rule (checked inputs), planned from the same
    global sums as the Spark job (:func:`plan_design`)."""
    sigma = uncertainty(q)
    counts = np.bincount(codes, minlength=n_strata)
    sums = np.bincount(codes, weights=sigma, minlength=n_strata)

    def top(coef: StratumWeights, k: int) -> npt.NDArray[np.float64]:
        weights = coef(sigma, codes)
        return np.partition(weights, len(weights) - k)[len(weights) - k :]

    design = plan_design(
        [str(h) for h in range(n_strata)], counts, sums, top, budget, floor=floor, allocation=allocation
    )
    return design.probabilities(q, codes)


@dataclass(frozen=True)
class CostDesign:
    """The cost-optimal split of a money budget (:func:`cost_optimal_design`)."""

    #: Expected number of labels bought.
    labels: float
    #: Whether the panel's proxy pays for itself (False: a uniform labels-only sample of ``labels`` items).
    use_proxy: bool
    #: Approximate variance of the estimated mean with the proxy and the active design (inf when unaffordable).
    variance_with_proxy: float
    #: Approximate variance of the labels-only mean of a uniform sample of the whole budget.
    variance_labels_only: float
    #: The inclusion probabilities of the chosen design.
    inclusion_prob: npt.NDArray[np.float64]


def cost_optimal_design(
    p: npt.ArrayLike,
    money: float,
    *,
    label_cost: float | None,
    proxy_cost: float | None,
    floor: float = 0.2,
    strata: npt.ArrayLike | None = None,
    allocation: str = "neyman",
) -> CostDesign:
    r"""Split a money budget :math:`B` between the proxy and labels, choosing the design of smaller variance.

    With the proxy, every one of the :math:`N` items is scored (:math:`N c_P`) and the rest buys
    :math:`n_P = (B - N c_P)/c_L` labels drawn by :func:`inclusion_probabilities`; its variance is
    :math:`V_P = N^{-2}\sum_i p_i(1-p_i)(1/\pi_i - 1)` (the design's own, module docstring). Without it,
    :math:`n_0 = B/c_L` uniform labels give the sample mean, :math:`V_0 = \bar p(1-\bar p)(1/n_0 - 1/N)` (the
    outcome's variance as the calibrated panel predicts it). The smaller wins. This is the cost-aware comparison of
    Angelopoulos et al. (2025), where the cheap rater is bought only when the variance it removes is worth its
    price; the shape of :math:`\pi` (proportional to :math:`\sigma_i`) does not depend on the prices because the
    proxy's cost is the same for every item.

    References
    ----------
    .. [1] A. N. Angelopoulos, J. Eisenstein, J. Berant, A. Agarwal, A. Fisch. Cost-Optimal Active AI Model
       Evaluation. arXiv:2506.07949, 2025.
    """
    q = check_probabilities(p, where=_WHERE)
    n = len(q)
    if label_cost is None or proxy_cost is None:
        raise ConfigError(f"{_WHERE}: label_cost/proxy_cost: give both costs or neither")
    c_l = float(
        check_param(
            label_cost,
            where=_WHERE,
            name="label_cost",
            target_type=numbers.Real,
            min_val=0.0,
            include_boundaries="neither",
        )
    )
    c_p = float(
        check_param(
            proxy_cost,
            where=_WHERE,
            name="proxy_cost",
            target_type=numbers.Real,
            min_val=0.0,
            include_boundaries="neither",
        )
    )
    money = float(
        check_param(
            money, where=_WHERE, name="budget", target_type=numbers.Real, min_val=0.0, include_boundaries="neither"
        )
    )
    codes, n_strata = _strata_codes(strata, n)

    def with_proxy(labels: float) -> tuple[float, npt.NDArray[np.float64]]:
        pi = _active(q, labels, floor, codes, n_strata, allocation)
        return design_variance(q, pi), pi

    labels, use_proxy, v_proxy, v_plain, pi = cost_split(n, money, c_l, c_p, float(q.mean()), with_proxy)
    return CostDesign(labels, use_proxy, v_proxy, v_plain, pi if use_proxy else np.full(n, labels / n))


def design_variance(p: npt.NDArray[np.float64], pi: npt.NDArray[np.float64]) -> float:
    """:math:`\\sum_i p_i(1-p_i)(1/\\pi_i - 1)`: :math:`N^2` times the proxy-assisted mean's variance (partial sums
    of it add up across batches)."""
    return float(np.sum(p * (1.0 - p) * (1.0 / pi - 1.0)))


def cost_split(
    n: int,
    money: float,
    label_cost: float,
    proxy_cost: float,
    p_bar: float,
    with_proxy: Callable[[float], tuple[float, Any]],
) -> tuple[float, bool, float, float, Any]:
    """The decision of :func:`cost_optimal_design` from global quantities: ``(labels, use_proxy, V_P, V_0, what
    with_proxy returned)``; ``with_proxy(n_P)`` gives :func:`design_variance` of the active design of ``n_P``
    labels (and whatever the caller keeps of it)."""
    n_plain = min(float(n), money / label_cost)
    n_proxy = min(float(n), (money - n * proxy_cost) / label_cost)
    v_plain = p_bar * (1.0 - p_bar) * (1.0 / n_plain - 1.0 / n)
    v_proxy, kept = float("inf"), None
    if n_proxy > 0:
        total, kept = with_proxy(n_proxy)
        v_proxy = total / n**2
    if kept is not None and v_proxy <= v_plain:
        return n_proxy, True, v_proxy, v_plain, kept
    return n_plain, False, v_proxy, v_plain, None


#: Between an item's dataset and id in its key (Spark: ``xxhash64(concat_ws(sep, dataset, item_id))``).
ITEM_KEY_SEPARATOR = "\x00"


def item_keys(datasets: npt.ArrayLike, item_ids: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Stable int64 keys of items: XXH64 (seed 42) of ``dataset + "\\x00" + item_id``, equal to Spark's
    ``xxhash64(concat_ws("\\x00", dataset, item_id))`` (:func:`judgecal_dist.splits.group_keys`)."""
    joined = (f"{d}{ITEM_KEY_SEPARATOR}{i}" for d, i in zip(np.asarray(datasets), np.asarray(item_ids), strict=True))
    return group_keys(joined)


def round_seed(seed: int, round_: int) -> int:
    """The seed of round ``round_``'s draw: a keyed hash of (seed, round), so that each round draws afresh.

    With one seed for every round, an item left out of round 1 (``u >= pi``) would stay out while its ``pi`` does.

    Examples
    --------
    >>> round_seed(0, 1) != round_seed(0, 2), round_seed(5, 1) == round_seed(5, 1)
    (True, True)
    """
    u = split_uniforms(np.array([round_], dtype=np.int64), [seed])[0, 0]
    return int(u * 2.0**53)


def draw_mask(pi: npt.ArrayLike, seed: int, *, keys: npt.ArrayLike | None = None) -> npt.NDArray[np.bool_]:
    """Poisson draw: item ``i`` is selected iff ``u_i < pi_i``, ``u_i`` a keyed hash of (seed, ``keys[i]``).

    Parameters
    ----------
    pi : array of shape (N,)
        Inclusion probabilities in [0, 1].
    seed : int
        Non-negative seed; the same seed and keys select the same items on any engine.
    keys : array of int64, optional
        Item keys (:func:`judgecal_dist.splits.group_keys` of a stable item identity); default the positions
        ``0..N-1`` (reproducible only for the same order of items).

    Returns
    -------
    ndarray of bool, shape (N,)
    """
    prob = check_probabilities(pi, where="draw", name="pi")
    seed = int(check_param(seed, where="draw", name="seed", target_type=numbers.Integral, min_val=0))
    item_keys = np.arange(len(prob), dtype=np.int64) if keys is None else np.asarray(keys, dtype=np.int64)
    if item_keys.shape != prob.shape:
        raise InputError(f"draw: keys: expected one key per item ({len(prob)}), got shape {item_keys.shape}")
    return split_uniforms(item_keys, [seed])[0] < prob


def draw(pi: npt.ArrayLike, seed: int, *, keys: npt.ArrayLike | None = None) -> npt.NDArray[np.int64]:
    """Indices of the items a Poisson draw selects (:func:`draw_mask`), ascending.

    Examples
    --------
    >>> idx = draw(np.full(10_000, 0.1), seed=3)
    >>> bool(900 < len(idx) < 1100), bool((draw(np.full(10_000, 0.1), seed=3) == idx).all())
    (True, True)
    """
    return np.flatnonzero(draw_mask(pi, seed, keys=keys)).astype(np.int64)
