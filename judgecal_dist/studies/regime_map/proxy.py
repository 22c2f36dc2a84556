r"""The split-level proxy score of the regime map (spec 002 §5.6): does the validation-selected table's shape
predict where a scalar family beats it?

Per (split, budget) unit :math:`q = z(S_{\mathrm{eff}}/B) + z(\hat u) - z(\hat g)` from the validation-selected
table's effective support per label, its validation unseen rate and the interaction gain :math:`\hat g` (best
additive - best pairwise validation MSE); :func:`auc` for the event "the scalar menu's test MSE is below the table
menu's", a cluster bootstrap over the budget cells and :func:`within_cell_permutation_p`.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), Table 17.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps
from scipy.special import comb

__all__ = ["auc", "proxy_score", "proxy_units", "within_cell_permutation_p"]

_ADDITIVE = ("ridge_iso", "logistic")
_PAIRWISE = ("ridge_pair_iso", "logistic_pair")


def auc(score: npt.ArrayLike, event: npt.ArrayLike) -> float:
    """Area under the ROC curve of ``score`` for the binary ``event`` (Mann-Whitney; ties count 1/2).

    Examples
    --------
    >>> auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    """
    s, y = np.asarray(score, dtype=np.float64), np.asarray(event, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if not n1 or not n0:
        return math.nan
    ranks = sps.rankdata(s)
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def within_cell_permutation_p(
    score: npt.ArrayLike, event: npt.ArrayLike, cells: npt.ArrayLike, permutations: int, rng: np.random.Generator
) -> tuple[float, bool]:
    """One-sided p-value of :func:`auc` when the events are exchangeable within each cell.

    Enumerates every within-cell arrangement of the events when there are at most ``permutations`` of them
    (exact: the share with an AUC at least the observed one); otherwise draws ``permutations`` random
    arrangements, :math:`(1 + \\#\\{\\ge\\}) / (1 + \\text{permutations})`. Returns ``(p, exact)``.
    """
    s, y, c = np.asarray(score, dtype=np.float64), np.asarray(event, dtype=bool), np.asarray(cells)
    n1, n0 = int(y.sum()), int((~y).sum())
    if not n1 or not n0:
        return math.nan, True
    ranks = sps.rankdata(s)
    observed = ranks[y].sum()
    groups = [np.flatnonzero(c == g) for g in pd.unique(c)]
    arrangements = math.prod(int(comb(len(g), int(y[g].sum()), exact=True)) for g in groups)
    tol = 1e-9 * max(1.0, observed)  # rank sums are multiples of 1/2: equal ones must count as equal
    if arrangements <= permutations:
        per_cell = [
            [ranks[g][list(pos)].sum() for pos in itertools.combinations(range(len(g)), int(y[g].sum()))]
            for g in groups
        ]
        total = np.zeros(1)
        for sums in per_cell:
            total = (total[:, None] + np.asarray(sums)[None, :]).ravel()
        return float((total >= observed - tol).mean()), True
    stat = np.zeros(permutations)
    for g in groups:
        shuffled = rng.permuted(np.broadcast_to(y[g], (permutations, len(g))), axis=1)
        stat += (shuffled * ranks[g]).sum(axis=1)
    return float((1 + (stat >= observed - tol).sum()) / (1 + permutations)), False


def _z(x: pd.Series) -> pd.Series:
    sd = float(x.std(ddof=0))
    return (x - x.mean()) / sd if sd > 0 else x * 0.0


def proxy_units(parts: pd.DataFrame) -> pd.DataFrame:
    """One row per (seed, budget): the selected table's ``support`` (:math:`S_{\\mathrm{eff}}/B`), validation
    ``unseen``, interaction ``gain`` (NaN without both an additive and a pairwise family), ``scalar_wins``."""
    table = parts[parts["selected_table"]].set_index(["seed", "budget"])
    scalar = parts[parts["selected_scalar"]].set_index(["seed", "budget"])
    units = pd.DataFrame(
        {
            "support": table["effective_support"] / table.index.get_level_values("budget"),
            "unseen": table["val_unseen_rate"],
            "scalar_wins": scalar["test_mse"] < table["test_mse"],
        }
    )
    fam = parts[parts["family"].isin(_ADDITIVE + _PAIRWISE)]
    best = fam.groupby(["seed", "budget", "family"])["val_mse"].min().unstack("family")
    additive, pairwise = [f for f in _ADDITIVE if f in best], [f for f in _PAIRWISE if f in best]
    if additive and pairwise:
        units["gain"] = best[additive].min(axis=1) - best[pairwise].min(axis=1)
    else:
        units["gain"] = math.nan
    return units.reset_index()


def proxy_score(
    parts: pd.DataFrame, bootstrap: int, permutations: int, rng: np.random.Generator, level: float = 0.95
) -> dict[str, Any]:
    r"""The split-level proxy :math:`q = z(S_{\mathrm{eff}}/B) + z(\hat u) - z(\hat g)` and how well it ranks
    the units where the scalar menu beat the table menu: AUC with a cluster-bootstrap interval (budget cells
    resampled with replacement, ``q`` held fixed), the within-cell permutation p-value and the gap in mean
    ``q`` (scalar-win units minus table-win units) with its cluster-bootstrap interval."""
    units = proxy_units(parts)
    has_gain = bool(units["gain"].notna().all())
    q = _z(units["support"]) + _z(units["unseen"]) - (_z(units["gain"]) if has_gain else 0.0)
    event = units["scalar_wins"].to_numpy(dtype=bool)
    cells = units["budget"].to_numpy()

    def gap(qv: npt.NDArray[np.float64], ev: npt.NDArray[np.bool_]) -> float:
        return float(qv[ev].mean() - qv[~ev].mean()) if ev.any() and (~ev).any() else math.nan

    qv = q.to_numpy(dtype=np.float64)
    ids = pd.unique(cells)
    index = {c: np.flatnonzero(cells == c) for c in ids}
    boots = np.full((bootstrap, 2), math.nan)
    for b in range(bootstrap):
        take = np.concatenate([index[c] for c in rng.choice(ids, size=len(ids), replace=True)])
        boots[b] = auc(qv[take], event[take]), gap(qv[take], event[take])
    tail = (1.0 - level) / 2.0

    def interval(col: int) -> tuple[float, float]:
        v = boots[:, col][np.isfinite(boots[:, col])]
        return (float(np.quantile(v, tail)), float(np.quantile(v, 1.0 - tail))) if v.size else (math.nan, math.nan)

    p, exact = within_cell_permutation_p(qv, event, cells, permutations, rng) if permutations else (math.nan, True)
    return {
        "units": len(units),
        "cells": len(ids),
        "scalar_wins": int(event.sum()),
        "uses_gain": has_gain,
        "auc": auc(qv, event),
        "auc_ci": interval(0),
        "permutation_p": p,
        "permutation_exact": exact,
        "gap": gap(qv, event),
        "gap_ci": interval(1),
        "bootstrap": bootstrap,
        "permutations": permutations,
        "means": {k: float(units[k].mean()) for k in ("support", "unseen", "gain")},
    }
