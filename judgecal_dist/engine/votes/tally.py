"""Counts of coded votes: each verdict category's, named as the codec names them (for messages and checks), and
each judge's over dense verdict codes (:func:`judge_tallies`, the run history's counts of a table with one verdict
per item and judge, in memory and inside the Spark job that codes the items for Dawid-Skene)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from judgecal_dist.engine.votes.codec import codes_of, outcome_signs
from judgecal_dist.io.schema import VERDICT_CATEGORIES, VERDICT_CODES, VOTE_A, VOTE_B

__all__ = ["TALLY_COLUMNS", "category_counts", "judge_tallies"]

#: The per-judge counts of :func:`judge_tallies` (the run history adds ``rows``: these plus the null verdicts).
TALLY_COLUMNS = ("parsed", "votes", "n_A", "labelled_votes", "correct", "consensus_votes", "agree")
_CHUNK_CELLS = 1 << 22  # items x judges per chunk: small temporaries (fresh memory costs a cold process most)


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


def judge_tallies(codes: npt.NDArray[np.int8], labels: npt.ArrayLike) -> dict[str, npt.NDArray[np.int64]]:
    """Per-judge counts (:data:`TALLY_COLUMNS`) of dense verdict codes, one verdict per item and judge.

    Parameters
    ----------
    codes : ndarray of int8, shape (n_items, n_judges)
        Verdict codes (A, B, tie; anything else is no verdict), every judge's verdict on each item.
    labels : array-like of shape (n_items,)
        Label codes; only A and B count as labels.

    Notes
    -----
    ``parsed``: A, B or tie verdicts; ``votes``: A or B; ``labelled_votes`` / ``correct``: votes on items labelled A
    or B / equal to it; ``consensus_votes`` / ``agree``: votes on items where the *other* judges' A and B votes
    differ / equal to their majority. Computed over chunks of items.
    """
    n_items, n_judges = codes.shape
    out = {name: np.zeros(n_judges, dtype=np.int64) for name in TALLY_COLUMNS}
    labels = np.asarray(labels)
    step = max(1, _CHUNK_CELLS // max(n_judges, 1))
    for start in range(0, n_items, step):
        c, y = codes[start : start + step], labels[start : start + step, None]
        a, b = c == VOTE_A, c == VOTE_B
        vote = a | b
        others_a = a.sum(axis=1, keepdims=True, dtype=np.int64) - a
        others_b = b.sum(axis=1, keepdims=True, dtype=np.int64) - b
        for name, hits in (
            ("parsed", vote | (c == VERDICT_CODES["tie"])),
            ("votes", vote),
            ("n_A", a),
            ("labelled_votes", vote & ((y == VOTE_A) | (y == VOTE_B))),
            ("correct", (a & (y == VOTE_A)) | (b & (y == VOTE_B))),
            ("consensus_votes", vote & (others_a != others_b)),
            ("agree", (a & (others_a > others_b)) | (b & (others_b > others_a))),
        ):
            out[name] += hits.sum(axis=0, dtype=np.int64)
    return out
