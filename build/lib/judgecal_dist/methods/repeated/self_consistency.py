r"""Baselines for repeated three-way votes: self-consistency and its confidence-weighted variants (spec 003 §4).

Votes are coded +1 (A better), 0 (tie), -1 (B better) and missing; every rule returns a label in {-1, 0, +1} and
breaks ties toward 0 unless told otherwise. Counts are ``(c+, c0, c-)`` per item, as for
:class:`~judgecal_dist.methods.repeated.davidson.DavidsonAggregator`; per-sample rules take the vote matrix ``R`` of shape
(items, samples) with :data:`MISSING` for missing votes and a confidence matrix ``W`` in [0, 1] of the same shape.

References
----------
.. [1] X. Wang et al. Self-Consistency Improves Chain of Thought Reasoning in Language Models. ICLR 2023,
   arXiv:2203.11171.
.. [2] H. Wang et al. Soft Self-Consistency Improves Language Model Agents. ACL 2024, arXiv:2402.13212.
.. [3] A. Taubenfeld et al. Confidence Improves Self-Consistency in LLMs. Findings of ACL 2025, arXiv:2502.06233.
.. [4] Seed 003 (ICLR 2026 submission), §4 and Tables 3-4.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.repeated.davidson import CLASSES, check_counts

__all__ = [
    "MISSING",
    "SC_TIE_BREAKS",
    "SOFT_AGGREGATES",
    "majority_vote",
    "decisive_majority",
    "constant_tie",
    "soft_self_consistency",
    "confidence_self_consistency",
    "rounded_median",
]

MISSING = -9
SC_TIE_BREAKS = ("zero", "median", "random")
SOFT_AGGREGATES = ("min", "mean", "product")
IntArray = npt.NDArray[np.int64]


def _ordinal_median(counts: npt.NDArray[np.float64]) -> IntArray:
    """Median of each item's votes on the ordinal scale; the mean of the two middle votes rounded toward 0."""
    minus, tie = counts[:, 2], counts[:, 1]
    n = counts.sum(axis=1)

    def at(rank: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:  # value of the vote at a 0-based rank
        return np.where(rank < minus, -1.0, np.where(rank < minus + tie, 0.0, 1.0))

    lo, hi = at(np.floor((n - 1) / 2)), at(np.ceil((n - 1) / 2))
    return np.trunc((lo + hi) / 2).astype(np.int64)


def majority_vote(counts: npt.ArrayLike, *, tie_break: str = "zero", random_state: int | None = 0) -> IntArray:
    """Self-consistency: the most frequent vote; a shared maximum goes to ``tie_break``; no votes -> 0.

    ``"zero"`` outputs 0 (the recommended rule, spec 003 §4.3), ``"median"`` the ordinal median of all votes,
    ``"random"`` a seeded uniform choice among the tied classes.

    Examples
    --------
    >>> majority_vote([[5, 0, 4], [3, 0, 3], [2, 2, 0], [0, 0, 0]]).tolist()
    [1, 0, 0, 0]
    >>> majority_vote([[3, 3, 1]], tie_break="median").tolist()
    [0]
    """
    if tie_break not in SC_TIE_BREAKS:
        raise ConfigError(f"majority_vote: tie_break: must be one of {list(SC_TIE_BREAKS)}, got {tie_break!r}")
    c = check_counts(counts, where="majority_vote")
    ordered = c[:, [2, 1, 0]]  # columns in label order -1, 0, +1
    top = ordered.max(axis=1, keepdims=True)
    at_top = ordered == top
    shared = at_top.sum(axis=1) > 1
    out: IntArray = np.asarray(CLASSES[ordered.argmax(axis=1)], dtype=np.int64)
    if tie_break == "zero":
        out[shared] = 0
    elif tie_break == "median":
        out[shared] = _ordinal_median(c[shared])
    else:
        rng = np.random.default_rng(random_state)
        for i in np.flatnonzero(shared):
            out[i] = rng.choice(CLASSES[at_top[i]])
    out[c.sum(axis=1) == 0] = 0
    return out


def decisive_majority(counts: npt.ArrayLike) -> IntArray:
    """``sign(c+ - c-)``, ignoring tie votes (a reference rule, spec 003 §4).

    Examples
    --------
    >>> decisive_majority([[1, 8, 0], [2, 0, 2]]).tolist()
    [1, 0]
    """
    c = check_counts(counts, where="decisive_majority")
    return np.sign(c[:, 0] - c[:, 2]).astype(np.int64)


def constant_tie(n_items: int) -> IntArray:
    """Always 0: MAE = 1 - (share of tie labels), the reference every method must beat (spec 003 §4)."""
    return np.zeros(n_items, dtype=np.int64)


def _check_votes(
    votes: npt.ArrayLike, confidence: npt.ArrayLike, where: str
) -> tuple[IntArray, npt.NDArray[np.float64]]:
    r = np.asarray(votes)
    w = np.asarray(confidence, dtype=np.float64)
    if r.ndim != 2 or r.shape != w.shape:
        raise InputError(f"{where}: votes and confidence: need equal 2-D shapes, got {r.shape} and {w.shape}")
    bad = ~np.isin(r, (-1, 0, 1, MISSING))
    if bad.any():
        raise InputError(f"{where}: votes: codes must be -1, 0, +1 or MISSING={MISSING} ({int(bad.sum())} cells)")
    present = r != MISSING
    if (present & (~np.isfinite(w) | (w < 0) | (w > 1))).any():
        raise InputError(f"{where}: confidence: must be in [0, 1] for every present vote")
    return r.astype(np.int64), w


def _argmax_toward_zero(score: npt.NDArray[np.float64]) -> IntArray:
    """Label of the largest score per row (columns -1, 0, +1; -inf = class absent); shared maxima -> 0."""
    top = score.max(axis=1, keepdims=True)
    shared = (score == top).sum(axis=1) > 1
    out: IntArray = np.asarray(CLASSES[score.argmax(axis=1)], dtype=np.int64)
    out[shared | ~np.isfinite(top[:, 0])] = 0
    return out


def soft_self_consistency(votes: npt.ArrayLike, confidence: npt.ArrayLike, *, aggregate: str = "mean") -> IntArray:
    r"""Soft-SC: per class with at least one vote, :math:`\mathrm{agg}\{w_j : r_j = y\}`; the argmax class (ties -> 0).

    Examples
    --------
    >>> R = np.array([[1, 1, -1], [0, -1, MISSING]])
    >>> W = np.array([[0.6, 0.7, 0.9], [0.8, 0.8, 0.0]])
    >>> [soft_self_consistency(R, W, aggregate=agg).tolist() for agg in ("mean", "product")]
    [[-1, 0], [-1, 0]]
    """
    if aggregate not in SOFT_AGGREGATES:
        raise ConfigError(
            f"soft_self_consistency: aggregate: must be one of {list(SOFT_AGGREGATES)}, got {aggregate!r}"
        )
    r, w = _check_votes(votes, confidence, "soft_self_consistency")
    scores = []
    for label in CLASSES:
        hit = r == label
        if aggregate == "min":
            value = np.where(hit, w, np.inf).min(axis=1)
        elif aggregate == "mean":
            value = np.where(hit, w, 0.0).sum(axis=1) / np.maximum(hit.sum(axis=1), 1)
        else:
            value = np.where(hit, w, 1.0).prod(axis=1)
        scores.append(np.where(hit.any(axis=1), value, -np.inf))
    return _argmax_toward_zero(np.column_stack(scores))


def confidence_self_consistency(votes: npt.ArrayLike, confidence: npt.ArrayLike) -> IntArray:
    r"""CI-SC: confidence-weighted vote :math:`\arg\max_y \sum_j w_j 1[r_j = y]` (ties and no votes -> 0).

    Examples
    --------
    >>> confidence_self_consistency([[1, 1, -1]], [[0.3, 0.3, 0.9]]).tolist()
    [-1]
    """
    r, w = _check_votes(votes, confidence, "confidence_self_consistency")
    score = np.column_stack([np.where(r == label, w, 0.0).sum(axis=1) for label in CLASSES])
    return np.where((r != MISSING).any(axis=1), _argmax_toward_zero(score), 0)


def rounded_median(first: npt.ArrayLike, second: npt.ArrayLike) -> IntArray:
    """Greedy two-order baseline: the rounded median of two votes with (0, 1) -> 1, i.e. ``sign(r1 + r2)``.

    A missing vote (:data:`MISSING`) leaves the other; both missing give 0 (spec 003 §4.1). Python's banker's
    rounding (0.5 -> 0) is not used.

    Examples
    --------
    >>> rounded_median([1, 0, 0, 1, MISSING], [-1, -1, 0, 1, MISSING]).tolist()
    [0, -1, 0, 1, 0]
    """
    a, b = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    a0, b0 = np.where(a == MISSING, 0, a), np.where(b == MISSING, 0, b)
    return np.asarray(np.sign(a0 + b0), dtype=np.int64)
