"""Counts of each verdict category in coded votes, named as the codec names them (for messages and checks)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from judgecal_dist.engine.votes.codec import codes_of, outcome_signs
from judgecal_dist.io.schema import VERDICT_CATEGORIES

__all__ = ["category_counts"]


def category_counts(values: npt.ArrayLike, *, signs: bool = False, ties: bool = False) -> dict[str, int]:
    """How many of ``values`` are each category, ``A`` then ``B`` (then ``tie`` with ``ties``): verdict codes, or
    outcome signs (+1, -1, 0) with ``signs``.

    Examples
    --------
    >>> category_counts([1, 0, 0, 2, -1])
    {'A': 1, 'B': 2}
    >>> category_counts([1, -1, 0, 1], signs=True, ties=True)
    {'A': 2, 'B': 1, 'tie': 1}
    """
    names = [n for n in VERDICT_CATEGORIES if ties or n != "tie"]
    coded = outcome_signs(names) if signs else codes_of(names)
    values = np.asarray(values)
    return {n: int(np.count_nonzero(values == v)) for n, v in zip(names, coded, strict=True)}
