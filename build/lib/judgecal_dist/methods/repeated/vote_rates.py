"""What a judge's repeated three-way votes say about the judge: tie-vote rate and positional bias (spec 003 §5).

Votes are the matrix ``R`` (items, samples) coded +1 (A better), 0 (tie), -1 (B better) and
:data:`~judgecal_dist.methods.repeated.self_consistency.MISSING`, in the item's canonical orientation (a sample
shown B first has its verdict mapped back). ``shown_first`` says, per sample column, which response the judge saw
first: +1 = A, -1 = B.

References
----------
.. [1] Seed 003 (ICLR 2026 submission), Table 1 (positional bias) and Table 2 (tie-vote rates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import InputError
from judgecal_dist.methods.repeated.self_consistency import MISSING

__all__ = ["PositionCounts", "tie_vote_rate", "position_counts"]


def tie_vote_rate(votes: npt.ArrayLike) -> float:
    """Share of tie votes among the non-missing votes (NaN when every vote is missing).

    Examples
    --------
    >>> tie_vote_rate([[1, 0, MISSING], [0, -1, -1]])
    0.4
    """
    r = np.asarray(votes)
    present = r != MISSING
    return float((r == 0).sum() / present.sum()) if present.any() else float("nan")


@dataclass(frozen=True)
class PositionCounts:
    """Judgements preferring the response shown first, the one shown second, and ties (paper Table 1).

    ``bias`` is the caption's formula (First - Second) / (First + Second); ``bias_with_ties`` divides by every
    judgement, ties included, which is how the paper's tie-allowed column was computed (spec 003 §5).
    """

    first: int
    second: int
    tie: int

    @property
    def bias(self) -> float:
        decisive = self.first + self.second
        return (self.first - self.second) / decisive if decisive else float("nan")

    @property
    def bias_with_ties(self) -> float:
        total = self.first + self.second + self.tie
        return (self.first - self.second) / total if total else float("nan")


def position_counts(votes: npt.ArrayLike, shown_first: npt.ArrayLike) -> PositionCounts:
    """Count the votes that prefer the first-shown response, the second-shown one, and ties.

    Parameters
    ----------
    votes : array-like of int, shape (n_items, n_samples)
        Canonical-orientation votes (+1 A, 0 tie, -1 B, MISSING).
    shown_first : array-like of int, shape (n_samples,)
        +1 where the sample showed A first, -1 where it showed B first.

    Examples
    --------
    >>> c = position_counts([[1, -1], [1, 0], [-1, 1]], [1, -1])
    >>> (c.first, c.second, c.tie, round(c.bias, 3), round(c.bias_with_ties, 3))
    (3, 2, 1, 0.2, 0.167)
    """
    r = np.asarray(votes)
    order = np.asarray(shown_first)
    if r.ndim != 2 or order.shape != (r.shape[1],) or not np.isin(order, (-1, 1)).all():
        raise InputError(
            f"position_counts: shown_first needs one +1/-1 per sample column ({r.shape[-1]}), got {order.tolist()}"
        )
    present = r != MISSING
    decisive = present & (r != 0)
    first = int((decisive & (r == order[None, :])).sum())
    return PositionCounts(first=first, second=int(decisive.sum()) - first, tie=int((present & (r == 0)).sum()))
