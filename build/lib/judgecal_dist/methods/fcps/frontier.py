r"""Calibration-frontier panel selection, CFPS (spec 002 §4.2): judge subsets that a label budget can afford.

For every non-empty judge subset :math:`T` of the pool, from the selection block only,

.. math::

    G(T) = \hat R_{\mathrm{sel}}(\varnothing) - \hat R_{\mathrm{sel}}(T),\qquad
    \mathcal P_B(T) = \sum_c \hat p_c\Big[\sum_{n=1}^{B} \frac1n \binom Bn \hat p_c^{\,n}(1-\hat p_c)^{B-n}
    + (1-\hat p_c)^B\Big],

the in-sample risk gain of :math:`T`'s unsmoothed joint table over the constant, and the expected plug-in cell
pressure :math:`\sum_{c \in \mathcal S} p_c / n_c + p_U` when :math:`B` calibration rows are drawn from the
selection-block pattern frequencies :math:`\hat p_c` (each :math:`n_c \sim \mathrm{Bin}(B, \hat p_c)`; by
linearity the multinomial expectation is this sum of binomial ones). The kept subsets are the Pareto set of
(max :math:`G`, min :math:`\mathcal P_B`); beyond ``cap`` members, those with the largest :math:`G - \mathcal P_B`.
Each kept subset is one joint-table candidate, its judges in information-first order.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), App. C.1, Table 20.
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.fcps.joint_table import check_patterns, pattern_keys
from judgecal_dist.methods.fcps.paths import JudgePath, oracle_risk

__all__ = ["MAX_FRONTIER_JUDGES", "binomial_pressure", "calibration_frontier"]

#: Largest pool whose 2^m - 1 subsets are enumerated (4095 subsets; the paper's pool has 7 judges).
MAX_FRONTIER_JUDGES = 12
# Gains and pressures equal to this many decimals count as equal in the dominance test (rounding noise of sums).
_DECIMALS = 12


def binomial_pressure(p: npt.ArrayLike, budget: int) -> float:
    r"""Expected cell pressure :math:`\mathcal P_B` of cell probabilities ``p`` at ``budget`` rows.

    Examples
    --------
    >>> binomial_pressure([1.0], 4)  # one cell, always seen by all 4 rows
    0.25
    >>> round(binomial_pressure([0.5, 0.5], 1), 4)  # one row: one cell seen with n = 1, the other unseen
    1.0
    """
    return float(_pressure_terms(np.asarray(p, dtype=np.float64).ravel(), int(budget)).sum())


def _pressure_terms(probs: npt.NDArray[np.float64], budget: int) -> npt.NDArray[np.float64]:
    """Each cell's term of :func:`binomial_pressure`; cells of many subsets go in one call (one pmf evaluation),
    and cells of equal probability (few distinct row counts on a selection block) share it."""
    distinct, inverse = np.unique(probs, return_inverse=True)
    n = np.arange(1, budget + 1, dtype=np.float64)
    pmf = sps.binom.pmf(n[None, :], budget, distinct[:, None])
    return (distinct * ((pmf / n).sum(axis=1) + (1.0 - distinct) ** budget))[inverse.ravel()]


def calibration_frontier(
    X: npt.ArrayLike, y: npt.ArrayLike, budget: int, *, sample_weight: npt.ArrayLike | None = None, cap: int = 8
) -> pd.DataFrame:
    """Gain, pressure and the kept flag of every non-empty judge subset, from selection-block codes ``X``.

    Parameters
    ----------
    X : array-like of int, shape (n, m)
        Selection-block pattern codes of the full pool (rows or aggregated cells).
    y : array-like
        Targets in [0, 1] (cell means with ``sample_weight`` = cell counts).
    budget : int
        Planned calibration budget :math:`B` (rows).
    cap : int, default 8
        Most subsets kept (the spec's recommendation; the paper's value was lost).

    Returns
    -------
    DataFrame
        One row per subset: ``judges`` (tuple of pool indices in information-first order), ``size``, ``gain``,
        ``pressure``, ``pareto`` and ``kept``; kept rows first (largest ``gain - pressure`` first).

    Raises
    ------
    ConfigError
        A pool of more than :data:`MAX_FRONTIER_JUDGES` judges, ``budget < 1`` or ``cap < 1``.
    """
    codes, target, weights = check_patterns(X, y, sample_weight, n_categories=4, where="calibration_frontier")
    assert target is not None
    m = codes.shape[1]
    if m > MAX_FRONTIER_JUDGES:
        raise ConfigError(
            f"cfps: a pool of {m} judges has {2**m - 1} subsets; the frontier enumerates at most "
            f"{MAX_FRONTIER_JUDGES} judges; set cfps: false"
        )
    if int(budget) < 1 or int(cap) < 1:
        raise ConfigError(f"cfps: budget ({budget}) and cap ({cap}) must be positive")
    rank = JudgePath("information_first").fit(codes, target, sample_weight=weights).path_.tolist()
    total = weights.sum()
    # Same constant shift as oracle_risk's aggregated-cell Q, so the gain is exact on cells too.
    risk0 = (float((weights * target * target).sum()) - float((weights * target).sum()) ** 2 / total) / total
    rows, freqs = [], []
    for size in range(1, m + 1):
        for subset in itertools.combinations(range(m), size):
            judges = sorted(subset, key=rank.index)
            risk, _ = oracle_risk(codes, target, weights, judges)
            _, inverse = np.unique(pattern_keys(codes[:, judges], 4), return_inverse=True)
            freq = np.bincount(inverse.ravel(), weights=weights) / total
            rows.append({"judges": tuple(judges), "size": size, "gain": risk0 - risk})
            freqs.append(freq[freq > 0])
    terms = _pressure_terms(np.concatenate(freqs), int(budget))
    starts = np.cumsum([0, *map(len, freqs[:-1])])
    for row, pressure in zip(rows, np.add.reduceat(terms, starts), strict=True):
        row["pressure"] = float(pressure)
    frame = pd.DataFrame(rows)
    g, p = frame["gain"].round(_DECIMALS).to_numpy(), frame["pressure"].round(_DECIMALS).to_numpy()
    weakly = (g[None, :] >= g[:, None]) & (p[None, :] <= p[:, None])
    strictly = (g[None, :] > g[:, None]) | (p[None, :] < p[:, None])
    frame["pareto"] = ~(weakly & strictly).any(axis=1)  # no subset at least as good on both, better on one
    frame["_score"] = -(frame["gain"] - frame["pressure"])
    frame["_order"] = frame["judges"].map(lambda t: tuple(sorted(t)))
    frame = frame.sort_values(["pareto", "_score", "size", "_order"], ascending=[False, True, True, True])
    frame["kept"] = False
    frame.loc[frame.index[: min(int(cap), int(frame["pareto"].sum()))], "kept"] = True
    return frame.drop(columns=["_score", "_order"]).reset_index(drop=True)
