r"""The numbers teams report, as prediction-powered targets: outcomes :math:`Y` and proxies :math:`f` per item.

From the items of a scored panel (the panel's :math:`p = P(\mathrm{label} = A)`, the labels, each judge's verdict
and any group columns):

===============================  ==========================================  =======================================
target                           outcome :math:`Y` (labelled items)           proxy :math:`f` (every item)
===============================  ==========================================  =======================================
``judge_accuracy:<judge>``       1[judge's verdict == label]                 :math:`P_{panel}(\mathrm{label} =
                                                                             \mathrm{verdict})`, items the judge voted
``panel_accuracy``               1[panel's verdict == label]                 :math:`\max(p, 1 - p)`
``win_rate``                     1[label == A]                               :math:`p`
``win_rate:<column>=<value>``    the same on the group's items               :math:`p`
===============================  ==========================================  =======================================

The panel's verdict is A when :math:`p > 0.5` (the scorer's rule). Items without a panel ``p`` (no vote from the
model's judges) belong to no target. :func:`target_moments` turns the targets into the sums of
:class:`~judgecal_dist.methods.labels.estimators.LabelMoments` (they add over batches: the commands' one pass on
either engine), :func:`~judgecal_dist.methods.labels.estimators.estimates_frame` into the rows of ``estimates.parquet``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from judgecal_dist.errors import InputError
from judgecal_dist.methods.labels.moments import LabelMoments, label_moments

__all__ = ["Target", "build_targets", "target_moments"]


@dataclass(frozen=True)
class Target:
    """One target: its items' positions in the input arrays, the proxy on each and the outcome (NaN: no label)."""

    name: str
    rows: npt.NDArray[np.int64]
    proxy: npt.NDArray[np.float64]
    outcome: npt.NDArray[np.float64]


def _binary(values: npt.ArrayLike, name: str, n: int) -> npt.NDArray[np.float64]:
    """1.0 (A), 0.0 (B) or NaN (anything else: no label, no vote, a tie) of codes 1 = A, 0 = B."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape[0] != n:
        raise InputError(f"build_targets: {name}: {arr.shape[0]} rows for {n} items; one row per item")
    return np.where((arr == 1.0) | (arr == 0.0), arr, np.nan)


def build_targets(
    p: npt.ArrayLike,
    label: npt.ArrayLike,
    votes: npt.ArrayLike | None = None,
    judge_ids: Sequence[str] = (),
    groups: Mapping[str, npt.ArrayLike] | None = None,
) -> Iterator[Target]:
    """The targets of one table of items (see the module), lazily.

    Parameters
    ----------
    p : array-like of shape (N,)
        The panel's probability that the label is A (NaN: the item was not scored).
    label : array-like of shape (N,)
        1 (A), 0 (B); anything else (NaN, -1) is no label. Labels that must not count (the model's calibration
        items) are passed as no label.
    votes : array-like of shape (N, J), optional
        Each judge's verdict: 1 (A), 0 (B), anything else no vote (the vote codec's dense codes).
    judge_ids : sequence of str
        The judges of ``votes``' columns.
    groups : mapping of str to array-like of shape (N,), optional
        Group columns: one ``win_rate:<column>=<value>`` per value (null values form no group).

    Examples
    --------
    >>> ts = {t.name: t for t in build_targets([0.9, 0.2, 0.6], [1, 0, -1], [[1], [1], [0]], ["j1"])}
    >>> sorted(ts)
    ['judge_accuracy:j1', 'panel_accuracy', 'win_rate']
    >>> ts["judge_accuracy:j1"].proxy.round(2).tolist(), ts["judge_accuracy:j1"].outcome.tolist()
    ([0.9, 0.2, 0.4], [1.0, 0.0, nan])
    """
    pv = np.asarray(p, dtype=np.float64)
    if pv.ndim != 1:
        raise InputError(f"build_targets: p: expected a 1-D array, got shape {pv.shape}")
    n = pv.size
    y = _binary(label, "label", n)
    scored = np.flatnonzero(np.isfinite(pv))
    if votes is not None:
        dense = np.asarray(votes, dtype=np.float64).reshape(n, -1)
        if dense.shape[1] != len(judge_ids):
            raise InputError(f"build_targets: votes: {dense.shape[1]} columns for {len(judge_ids)} judge_ids")
        for j, judge in enumerate(judge_ids):
            v = _binary(dense[:, j], f"votes[:, {j}]", n)
            rows = scored[np.isfinite(v[scored])]
            agree = np.where(v[rows] == 1.0, pv[rows], 1.0 - pv[rows])
            yield Target(
                f"judge_accuracy:{judge}", rows, agree, np.where(np.isnan(y[rows]), np.nan, v[rows] == y[rows])
            )
    ps, ys = pv[scored], y[scored]
    yield Target("panel_accuracy", scored, np.maximum(ps, 1.0 - ps), np.where(np.isnan(ys), np.nan, (ps > 0.5) == ys))
    yield Target("win_rate", scored, ps, ys)
    for column, values in (groups or {}).items():
        column_values = np.asarray(values, dtype=object)
        if column_values.shape != (n,):
            raise InputError(f"build_targets: groups[{column!r}]: {column_values.shape} values for {n} items")
        codes, uniques = pd.factorize(pd.Series(column_values[scored]), sort=True)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
        for k, value in enumerate(uniques):
            rows = scored[order[bounds[k] : bounds[k + 1]]]
            yield Target(f"win_rate:{column}={value}", rows, pv[rows], y[rows])


def target_moments(
    targets: Iterator[Target] | Sequence[Target], inclusion_prob: npt.ArrayLike | None = None
) -> dict[str, LabelMoments]:
    """The sums of each target (``inclusion_prob``: every item's probability of having been labelled, needed on
    the labelled ones; None: uniform labels).

    Examples
    --------
    >>> m = target_moments(build_targets([0.9, 0.2, 0.6], [1, 0, -1]))
    >>> m["win_rate"].n, m["win_rate"].n_all, m["win_rate"].sum_y
    (2.0, 3.0, 1.0)
    """
    pi = None if inclusion_prob is None else np.asarray(inclusion_prob, dtype=np.float64)
    out: dict[str, LabelMoments] = {}
    for t in targets:
        lab = np.isfinite(t.outcome)
        weights = None if pi is None else pi[t.rows[lab]]
        if weights is not None and not np.all(np.isfinite(weights)):
            raise InputError(
                f"{t.name}: inclusion_prob: missing on {int(np.sum(~np.isfinite(weights)))} labelled items"
            )
        out[t.name] = label_moments(t.outcome[lab], t.proxy[lab], t.proxy, weights)
        if pi is not None and not out[t.name].weighted:  # no labelled item in this batch: still the weighted form
            out[t.name] = LabelMoments(**{k: getattr(out[t.name], k) for k in LabelMoments.sum_names()}, weighted=True)
    return out
