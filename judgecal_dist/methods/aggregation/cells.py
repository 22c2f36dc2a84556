"""Dawid-Skene's inputs as numbers: one-hot vote indicators, and vote-pattern cells (items sharing a vote pattern and label state, one weighted row each) over which its EM runs."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from judgecal_dist.methods.aggregation.votes import VOTE_A, VOTE_B

__all__ = ["vote_indicators", "vote_cells", "label_cells"]


def vote_indicators(votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
    """Transposed one-hot verdicts ``H.T``, shape (2J, n): row ``v*J + j`` is :math:`\\mathbb 1[V_{ij} = v]`.

    Stored item-last (C-contiguous, one row per judge and verdict) because both EM products then read it as a
    wide matrix, ``W.T @ H.T`` and ``H.T @ T``, which BLAS runs several times faster than the tall ``H @ W``.
    A missing verdict is a zero in both of its judge's rows.
    """
    n_judges = votes.shape[1]
    out = np.empty((2 * n_judges, votes.shape[0]))
    np.equal(votes.T, VOTE_B, out=out[:n_judges])
    np.equal(votes.T, VOTE_A, out=out[n_judges:])
    return out


def vote_cells(
    votes: npt.NDArray[np.int8], labels: npt.NDArray[np.int64] | None = None
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int64] | None, npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Items collapsed to cells: one row per distinct (vote pattern, label code), with its item count.

    Returns
    -------
    cell_votes : ndarray of shape (n_cells, n_judges)
    cell_labels : ndarray of shape (n_cells,) or None
        None when ``labels`` is None.
    inverse : ndarray of shape (n_items,)
        The cell of each item (``cell_votes[inverse]`` is ``votes``).
    counts : ndarray of shape (n_cells,)
        Items per cell, as float64 weights.
    """
    keyed = votes if labels is None else np.column_stack([votes, labels.astype(votes.dtype)])
    n_judges = votes.shape[1]
    if keyed.shape[1] <= 39:  # codes -1, 0, 1 as base-3 digits fit an int64: a 1-D unique, far faster than rows'
        powers = 3 ** np.arange(keyed.shape[1], dtype=np.int64)
        _, first, inverse, counts = np.unique(
            (keyed.astype(np.int64) + 1) @ powers, return_index=True, return_inverse=True, return_counts=True
        )
        cells = keyed[first]
    else:
        cells, inverse, counts = np.unique(keyed, axis=0, return_inverse=True, return_counts=True)
    cell_labels = None if labels is None else cells[:, n_judges].astype(np.int64)
    return (
        np.ascontiguousarray(cells[:, :n_judges]),
        cell_labels,
        inverse.reshape(-1),
        counts.astype(np.float64),
    )


def label_cells(
    pattern: npt.NDArray[np.intp],
    n_patterns: int,
    labels: npt.NDArray[np.integer],
    weights: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Vote-pattern cells split by label state, from each item's pattern (``vote_cells``' ``inverse``).

    What lets a cross-fitting key the votes once: each fold only changes some items' label codes, and one
    ``bincount`` over ``3 * pattern + label + 1`` (linear, no sort) recounts the cells.

    Parameters
    ----------
    pattern : ndarray of shape (n_items,)
        Each item's vote pattern, in ``range(n_patterns)``.
    n_patterns : int
    labels : ndarray of shape (n_items,)
        Label codes 0, 1 or -1 (none).
    weights : ndarray of shape (n_items,), optional
        Items each row stands for (rows already counted elsewhere, e.g. by a Spark job); default 1.

    Returns
    -------
    cell_pattern : ndarray of shape (n_cells,)
        Each cell's vote pattern.
    cell_labels : ndarray of shape (n_cells,)
    inverse : ndarray of shape (n_items,)
        Each item's cell.
    counts : ndarray of shape (n_cells,)
        Items per cell, as float64 weights.
    """
    key = pattern.astype(np.int64) * 3 + (labels.astype(np.int64) + 1)
    per_key = np.bincount(key, weights=weights, minlength=3 * n_patterns)
    present = np.flatnonzero(per_key)
    rank = np.cumsum(per_key > 0) - 1  # a key's cell: its rank among the keys present
    return present // 3, present % 3 - 1, rank[key], per_key[present].astype(np.float64)
