r"""FCPS validation selection over (path, prefix size, family) from pattern-cell statistics (spec 002 §4.4).

Per split and budget: paths are built on the selection block, every candidate :math:`(\pi, k, F)` is fitted on
the calibration block, and the candidate with the smallest validation MSE is selected,

.. math:: (\hat\pi, \hat k, \hat F) = \arg\min_{(\pi, k, F) \in \mathcal M} \hat R_{D_{\mathrm{val}}}(\hat f_{\pi,k,F,B}),

with deterministic ties (smaller :math:`k`, then the simpler family in :data:`FAMILY_LADDER`, then the path in
:data:`~judgecal_dist.methods.fcps.paths.PATH_RULES` order). Every block enters as :class:`Cells`: distinct full
pool patterns with their row count :math:`n`, label sum :math:`S` and :math:`Q = \sum Y^2` (the output of the
engine's pattern job), and the MSE of any pattern predictor :math:`p` on a block is
:math:`\sum_c (Q_c - 2 p_c S_c + p_c^2 n_c) / \sum_c n_c`.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), Eqs. 2, 11, Theorem 1, Tables 2, 3, 10, 11.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.fcps.joint_table import SCHEMA_CATEGORIES, JointTableCalibrator, pattern_keys
from judgecal_dist.methods.fcps.paths import PATH_RULES, JudgePath
from judgecal_dist.methods.fcps.scalar_families import SCALAR_FAMILIES, make_family
from judgecal_dist.stats.support import cell_pressure, effective_support

__all__ = [
    "FAMILY_LADDER",
    "EXTRA_FAMILIES",
    "CANDIDATE_LADDER",
    "NLL_EPS",
    "MENUS",
    "Cells",
    "menu_families",
    "agreement",
    "agreement_rows",
    "evaluate_candidates",
    "fit_family",
    "prefix_cells",
    "prefix_squares",
    "select_candidate",
    "selection_penalty",
    "FCPSSelector",
]

#: Families in the "simpler first" order that breaks validation ties (spec 002 §4.4).
FAMILY_LADDER = (*SCALAR_FAMILIES, "table")
#: Study-only candidate families: the table with the lower-prefix and hierarchical fallbacks (Tables 15, 18), the
#: hybrid residual shrinkage over each scalar base and tau (Eq. 13, Table 19; from ``hybrid_taus``) and the
#: unsupervised Dawid-Skene jury (labels unused, Table 13).
EXTRA_FAMILIES = ("table_lower_prefix", "table_hierarchical", "hybrid", "jury")
#: Tie-break order over every candidate family.
CANDIDATE_LADDER = (*FAMILY_LADDER, *EXTRA_FAMILIES)
#: Clipping of the predicted probability inside the NLL (spec 002 §6.6: isotonic maps emit exact 0 and 1).
NLL_EPS = 1e-3
#: Restricted menus of Eq. 2: table-only, scalar-only (all configured scalar families), and their union.
MENUS = ("table", "scalar", "union")
_RANK_DECIMALS = 12


@dataclass(frozen=True)
class Cells:
    """One block as distinct full-pool patterns: ``codes`` (P x m, engine codes), ``n``, ``s`` and ``q``.

    ``levels`` and ``hist`` (P x L) give the rows of each pattern per distinct target value (needed by accuracy
    and Spearman when ``Y`` is not binary: tie labels, rubric targets); None means binary ``Y`` (``q = s``,
    histogram ``[n - s, s]`` over levels 0 and 1). ``schema`` names the codes' alphabet (pairwise or scalar).
    """

    codes: npt.NDArray[np.int64]
    n: npt.NDArray[np.float64]
    s: npt.NDArray[np.float64]
    q: npt.NDArray[np.float64]
    levels: npt.NDArray[np.float64] | None = None
    hist: npt.NDArray[np.float64] | None = None
    schema: str = "pairwise"

    @property
    def n_categories(self) -> int:
        """Alphabet size per judge of the codes (the pattern-key base)."""
        return SCHEMA_CATEGORIES[self.schema]

    def histogram(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Target levels and the P x L row counts per pattern and level."""
        if self.hist is None or self.levels is None:
            return np.array([0.0, 1.0]), np.stack([self.n - self.s, self.s], axis=1)
        return self.levels, self.hist

    @classmethod
    def from_rows(cls, codes: npt.ArrayLike, y: npt.ArrayLike, schema: str = "pairwise") -> Cells:
        """Aggregate row-level codes and targets into distinct patterns (with the target histogram)."""
        arr, target = np.asarray(codes, dtype=np.int64), np.asarray(y, dtype=np.float64)
        if arr.ndim != 2 or len(arr) != len(target) or not len(arr):
            raise InputError(
                f"Cells.from_rows: need matching non-empty codes (2-D) and y, got {arr.shape}, {target.shape}"
            )
        uniq, inverse = np.unique(arr, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        sums = [
            np.bincount(inverse, weights=v, minlength=len(uniq)).astype(np.float64, copy=False)
            for v in (np.ones(len(target)), target, target**2)
        ]
        levels, level = np.unique(target, return_inverse=True)
        hist = np.zeros((len(uniq), len(levels)))
        np.add.at(hist, (inverse, level.ravel()), 1.0)
        return cls(uniq, sums[0], sums[1], sums[2], levels=levels, hist=hist, schema=schema)

    @property
    def rows(self) -> float:
        return float(self.n.sum())

    def mse(self, p: npt.NDArray[np.float64]) -> float:
        """MSE of per-pattern predictions ``p`` (clipped to [0, 1]) on this block."""
        return float(self.mse_rows(np.asarray(p)[None, :])[0])

    def nll(self, p: npt.NDArray[np.float64], eps: float = NLL_EPS) -> float:
        """Mean cross-entropy :math:`-\\frac1n\\sum_c [S_c \\log\\tilde p_c + (n_c - S_c)\\log(1-\\tilde p_c)]`,
        :math:`\\tilde p = \\mathrm{clip}(p, \\varepsilon, 1-\\varepsilon)` (soft labels allowed)."""
        return float(self.nll_rows(np.asarray(p)[None, :], eps)[0])

    def mse_rows(self, p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """:meth:`mse` of each row of ``p`` (predictors x patterns): many candidates scored in one pass."""
        p = np.clip(p, 0.0, 1.0)
        return np.maximum((self.q - 2.0 * p * self.s + p * p * self.n).sum(axis=1), 0.0) / self.rows

    def nll_rows(self, p: npt.NDArray[np.float64], eps: float = NLL_EPS) -> npt.NDArray[np.float64]:
        """:meth:`nll` of each row of ``p`` (predictors x patterns)."""
        p = np.clip(p, eps, 1.0 - eps)
        return -(self.s * np.log(p) + (self.n - self.s) * np.log1p(-p)).sum(axis=1) / self.rows


def agreement(cells: Cells, p: npt.NDArray[np.float64]) -> tuple[float, float, float]:
    """Accuracy, Pearson and Spearman of per-pattern predictions ``p`` with the targets (spec 002 §6.6).

    Accuracy scores :math:`1[(p > 1/2) = (Y > 1/2)]` with :math:`p = 1/2` scored 1/2 (a target of exactly 1/2,
    a tie label or a rubric midpoint, counts as not above 1/2); Spearman uses average ranks for ties over rows (a
    cell's rows share its prediction, a level's rows its target). NaN where a side is constant.
    """
    accuracy, pearson, spearman = agreement_rows(cells, np.asarray(p, dtype=np.float64)[None, :])
    return float(accuracy[0]), float(pearson[0]), float(spearman[0])


def agreement_rows(
    cells: Cells, p: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """:func:`agreement` of each row of ``p`` (predictors x patterns), in one vectorised pass."""
    levels, hist = cells.histogram()
    n, per_level = cells.n, hist.sum(axis=0)
    total = n.sum()
    above = hist[:, levels > 0.5].sum(axis=1)
    correct = np.where(p > 0.5, above, np.where(p < 0.5, n - above, 0.5 * n)).sum(axis=1) / total

    def pearson(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        # x per cell (one row per predictor), y per level; the rows of (cell c, level l) number hist[c, l].
        ex, ey = x @ n / total, float(per_level @ y) / total
        cov = x @ (hist @ y) / total - ex * ey
        vx = (x * x) @ n / total - ex * ex
        vy = float(per_level @ (y * y)) / total - ey * ey
        ok = (vx > 1e-15) & (vy > 1e-15)
        return np.where(ok, cov / np.sqrt(np.where(ok, vx * vy, 1.0)), math.nan)

    # Predictions equal to 12 decimals tie: a stacker's matrix product rounds the same pattern's score differently
    # with the number of rows it is given, and a last-bit difference must not reorder Spearman's ranks.
    ranks = _average_ranks(np.round(p, _RANK_DECIMALS), n)
    return correct, pearson(p, levels), pearson(ranks, _average_ranks(levels[None, :], per_level)[0])


def _average_ranks(values: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Average ranks over rows of each row of ``values`` whose entry ``j`` stands for ``weights[j]`` tied rows."""
    order = np.argsort(values, axis=1, kind="stable")
    ranked = np.take_along_axis(values, order, axis=1)
    w = weights[order]
    after = np.cumsum(w, axis=1)  # rows up to and including each entry
    cols = np.arange(values.shape[1])
    starts = np.ones(ranked.shape, dtype=bool)
    starts[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    ends = np.ones(ranked.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    # Each entry's tie run: rows before its first member and rows through its last member.
    first = np.maximum.accumulate(np.where(starts, cols, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, cols, cols[-1])[:, ::-1], axis=1)[:, ::-1]
    before = np.take_along_axis(after - w, first, axis=1)
    through = np.take_along_axis(after, last, axis=1)
    out = np.empty_like(ranked)
    np.put_along_axis(out, order, before + (through - before + 1.0) / 2.0, axis=1)
    return out


def menu_families(menu: str, scalar: Sequence[str]) -> tuple[str, ...]:
    """Families of ``menu`` (one of :data:`MENUS`) given the configured scalar families."""
    if menu == "table":
        return ("table",)
    if menu == "scalar":
        return tuple(scalar)
    if menu == "union":
        return ("table", *scalar)
    raise ConfigError(f"menu: must be one of {MENUS}, got {menu!r}")


def prefix_cells(cells: Cells, prefix: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
    """Distinct prefix patterns of a block: their codes, ``n``, ``s`` and sorted integer keys (:func:`pattern_keys`)."""
    keys = pattern_keys(cells.codes[:, prefix], cells.n_categories)
    uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    n = np.bincount(inverse, weights=cells.n, minlength=len(uniq))
    s = np.bincount(inverse, weights=cells.s, minlength=len(uniq))
    return cells.codes[first][:, prefix], n, s, uniq


def prefix_squares(cells: Cells, prefix: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    r""":math:`Q = \sum Y^2` of each distinct prefix pattern, in the order of :func:`prefix_cells`."""
    _, inverse = np.unique(pattern_keys(cells.codes[:, prefix], cells.n_categories), return_inverse=True)
    return np.bincount(inverse.ravel(), weights=cells.q).astype(np.float64, copy=False)


def fit_family(
    family: str, codes: npt.NDArray[np.int64], n: Any, s: Any, options: dict[str, Any], q: Any = None
) -> Any:
    """Fit candidate ``family`` on prefix cells (``n`` rows, label sum ``s``); ``options`` as in
    :func:`evaluate_candidates` (``schema``: the codes' alphabet). Returns a fitted model with ``predict(codes)``.
    ``q`` (:func:`prefix_squares`) makes the scalar-schema reliability's residual variances the row-level ones.

    Raises
    ------
    ConfigError
        The jury on scalar-schema codes (Dawid-Skene here models A/B votes only).
    """
    y = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
    schema = options.get("schema", "pairwise")
    if family == "jury":
        if schema != "pairwise":
            raise ConfigError("families: the jury needs pairwise A/B verdicts; remove it for scalar-schema data")
        return _fit_jury(codes, n)
    if family.startswith("table"):
        fallback = family.removeprefix("table_") if family != "table" else options.get("fallback", "global")
        model = JointTableCalibrator(
            alpha=options.get("alpha", 1.0), fallback=fallback, n_categories=SCHEMA_CATEGORIES[schema]
        )
    else:
        model = make_family(family, lam=options.get("ridge_lam", 1.0), C=options.get("C", 1.0), schema=schema)
        if family == "one_coin_iso" and schema == "scalar" and q is not None:
            return model.fit(codes, y, sample_weight=n, y_sq=np.divide(q, n, out=np.zeros_like(q), where=n > 0))
    return model.fit(codes, y, sample_weight=n)


class _Jury:
    """Unsupervised Dawid-Skene jury on prefix codes: A = 1, B = 0, tie/err missing; predicts P(Y = 1 | votes)."""

    def __init__(self, model: DawidSkene) -> None:
        self.model = model

    def predict(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self.model.predict_proba(_jury_votes(codes))[:, 1]


def _jury_votes(codes: npt.NDArray[np.int64]) -> npt.NDArray[np.int8]:
    return np.where(codes == 1, 1, np.where(codes == 0, 0, -1)).astype(np.int8)


def _fit_jury(codes: npt.NDArray[np.int64], n: npt.NDArray[np.float64]) -> _Jury:
    # The calibration rows' votes only (labels unused, spec 002 §3.6): each pattern repeated by its row count.
    rows = np.repeat(codes, np.rint(n).astype(np.int64), axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a few EM steps short of tolerance changes nothing here
        return _Jury(DawidSkene().fit(_jury_votes(rows)))


def _scores(blocks: dict[str, Cells], p: dict[str, npt.NDArray[np.float64]]) -> list[dict[str, float]]:
    """Per row of each block's predictions ``p[name]`` (predictors x patterns): its MSE and NLL on every block, and
    on the test block accuracy, Pearson and Spearman (computed for every candidate, reported for the selected)."""
    columns: dict[str, npt.NDArray[np.float64]] = {}
    for name, block in blocks.items():
        columns |= {f"{name}_mse": block.mse_rows(p[name]), f"{name}_nll": block.nll_rows(p[name])}
        if name == "test":
            agree = agreement_rows(block, np.clip(p[name], 0.0, 1.0))
            columns |= dict(zip(("test_accuracy", "test_pearson", "test_spearman"), agree, strict=True))
    return [{key: float(v[i]) for key, v in columns.items()} for i in range(len(next(iter(p.values()))))]


def _hybrid_predictions(
    base: npt.NDArray[np.float64], cal_n: npt.NDArray[np.float64], cal_s: npt.NDArray[np.float64], taus: Sequence[float]
) -> npt.NDArray[np.float64]:
    """Eq. 13 at each tau (rows) from a block's base predictions: :math:`f_s + (S_c - n_c f_s)/(n_c + \\tau)`, with
    the calibration :math:`S_c, n_c` of each of the block's patterns (0 where unseen)."""
    tau = np.asarray(taus, dtype=np.float64)[:, None]
    return np.clip(base + (cal_s - cal_n * base) / (cal_n + tau), 0.0, 1.0)


def _lookup_cells(keys: npt.NDArray[np.int64], query: npt.NDArray[np.int64], *values: Any) -> list[Any]:
    pos = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    found = keys[pos] == query
    return [np.where(found, v[pos], 0.0) for v in values]


def evaluate_candidates(
    paths: dict[str, npt.NDArray[np.int64]],
    cal: Cells,
    val: Cells,
    test: Cells | None = None,
    *,
    families: Sequence[str] = FAMILY_LADDER,
    max_k: int | None = None,
    min_k: int = 1,
    **options: Any,
) -> pd.DataFrame:
    r"""Validation (and test) MSE and support diagnostics of every candidate :math:`(\pi, k, F)`.

    Parameters
    ----------
    paths : dict
        Path rule -> pool indices in path order (:class:`~judgecal_dist.methods.fcps.paths.JudgePath` ``path_``).
    cal, val, test : Cells
        Calibration (fitting), validation (selection) and test (reporting only) blocks.
    families : sequence of str
        ``table`` and/or scalar family ids.
    max_k : int, optional
        Largest prefix (default: the panel size).
    min_k : int, default 1
        Smallest prefix (a judge subset scored only as a whole passes its size as both).
    **options
        ``alpha``, ``fallback`` (table), ``ridge_lam``, ``C`` (stackers), ``hybrid_taus`` (a sequence of
        :math:`\tau`; with ``hybrid`` in ``families`` one hybrid row per scalar family in ``families`` and tau).
        The codes' schema is ``cal.schema`` (every block must share it).

    Returns
    -------
    DataFrame
        One row per candidate: ``path, k, family, val_mse, test_mse, val_nll, test_nll`` (``base`` and ``tau``
        name a hybrid's scalar base and shrinkage; empty and NaN otherwise) and, for the candidate's prefix,
        ``effective_support`` (calibration :math:`S_{\mathrm{eff}}`), ``occupied`` (:math:`|\mathcal S|`),
        ``seen_term``, ``unseen_rate`` and ``cell_pressure`` (test-block frequencies; NaN-free: without a test
        block the validation block is used) and ``val_unseen_rate`` (the validation block's unseen rate).

    Raises
    ------
    ConfigError
        ``max_k`` outside 1..m, ``min_k`` outside 1..``max_k``, or an unknown family.
    """
    m = cal.codes.shape[1]
    if {val.schema, cal.schema, (test if test is not None else cal).schema} != {cal.schema}:
        raise InputError("evaluate_candidates: the calibration, validation and test blocks mix verdict schemas")
    options = {**options, "schema": cal.schema}
    max_k = m if max_k is None else int(max_k)
    if not 1 <= max_k <= m:
        raise ConfigError(f"max_k: a prefix of {max_k} judges is longer than the panel ({m} judges)")
    if not 1 <= min_k <= max_k:
        raise ConfigError(f"min_k: must be in 1..{max_k} (max_k), got {min_k}")
    unknown = sorted(set(families) - set(CANDIDATE_LADDER))
    if unknown:
        raise ConfigError(f"families: unknown {unknown}; known: {CANDIDATE_LADDER}")
    taus = tuple(options.get("hybrid_taus", ())) if "hybrid" in families else ()
    fitted = [f for f in families if f != "hybrid"]
    blocks = {"val": val} | ({"test": test} if test is not None else {})
    done: dict[tuple[int, ...], list[dict[str, Any]]] = {}  # paths often share a prefix: fitted once, same rows
    rows = []
    for rule, path in paths.items():
        for k in range(min_k, max_k + 1):
            prefix = np.asarray(path[:k], dtype=np.int64)
            if tuple(prefix) not in done:
                done[tuple(prefix)] = _prefix_rows(prefix, cal, blocks, fitted, taus, options)
            rows += [{"path": rule, "k": k} | row for row in done[tuple(prefix)]]
    return pd.DataFrame(rows)


def _prefix_rows(
    prefix: npt.NDArray[np.int64],
    cal: Cells,
    blocks: dict[str, Cells],
    fitted: Sequence[str],
    taus: Sequence[float],
    options: dict[str, Any],
) -> list[dict[str, Any]]:
    """The candidate rows (without path and k) of one prefix: each family, then its hybrids, with the diagnostics."""
    codes, n, s, keys = prefix_cells(cal, prefix)
    # Calibration rows n and label sum s of each block pattern's prefix (0 where calibration never saw it): the
    # diagnostics and every hybrid read them.
    cal_at = {
        name: _lookup_cells(keys, pattern_keys(block.codes[:, prefix], cal.n_categories), n, s)
        for name, block in blocks.items()
    }
    report = "test" if "test" in blocks else "val"
    seen_term, unseen, pressure = cell_pressure(cal_at[report][0], blocks[report].n)
    diag = {"effective_support": effective_support(n), "occupied": int((n > 0).sum())}
    diag |= {"seen_term": seen_term, "unseen_rate": unseen, "cell_pressure": pressure}
    # The validation block's unseen rate: the deployable diagnostic (the test one is for reporting).
    val = blocks["val"]
    diag["val_unseen_rate"] = float(val.n[cal_at["val"][0] == 0].sum() / val.rows)
    q = prefix_squares(cal, prefix) if cal.schema == "scalar" else None
    # Every block's patterns in one predict call per candidate (the estimators' input checks cost per call), and
    # every candidate of the prefix (families and their hybrids) scored in one vectorised pass.
    stacked = np.vstack([block.codes[:, prefix] for block in blocks.values()])
    bounds = np.cumsum([len(block.codes) for block in blocks.values()])[:-1]
    unset = {"family": "", "base": "", "tau": math.nan, "test_mse": math.nan, "test_nll": math.nan}
    heads: list[dict[str, Any]] = []
    predictions: dict[str, list[npt.NDArray[np.float64]]] = {name: [] for name in blocks}
    for family in fitted:
        model = fit_family(family, codes, n, s, options, q)
        heads.append(unset | {"family": family})
        for name, p in zip(blocks, np.split(model.predict(stacked), bounds), strict=True):
            predictions[name].append(p[None, :])
            if taus and family in SCALAR_FAMILIES:
                cal_n, cal_s = cal_at[name]
                predictions[name].append(_hybrid_predictions(p, cal_n, cal_s, taus))
        if taus and family in SCALAR_FAMILIES:
            heads += [unset | {"family": "hybrid", "base": family, "tau": float(tau)} for tau in taus]
    scores = _scores(blocks, {name: np.vstack(p) for name, p in predictions.items()})
    return [head | score | diag for head, score in zip(heads, scores, strict=True)]


def select_candidate(candidates: pd.DataFrame, families: Sequence[str], metric: str = "val_mse") -> pd.Series:
    """The validation-selected row among ``families`` with FCPS's deterministic tie-breaking.

    ``metric`` is the validation criterion: ``val_mse`` (Eq. 2) or ``val_nll`` (the Table 14 ablation).

    Raises
    ------
    InputError
        No candidate of those families.
    """
    pool = np.flatnonzero(candidates["family"].isin(list(families)).to_numpy())
    if not len(pool):
        raise InputError(f"select_candidate: no candidate of families {list(families)}")
    rows = candidates.iloc[pool]
    # Rungs of families and paths outside the ladders (frontier subsets, single judges) sort last, as NaN would.
    family = rows["family"].map({f: i for i, f in enumerate(CANDIDATE_LADDER)}).fillna(np.inf).to_numpy(np.float64)
    path = rows["path"].map({p: i for i, p in enumerate(PATH_RULES)}).fillna(np.inf).to_numpy(np.float64)
    keys = (path, family, rows["k"].to_numpy(np.float64), rows[metric].to_numpy(np.float64))
    return candidates.iloc[pool[np.lexsort(keys)[0]]]


def selection_penalty(n_candidates: int, n_val: int, delta: float = 0.05) -> float:
    r"""Theorem 1's :math:`2\sqrt{\log(2|\mathcal M|/\delta) / (2 n_{\mathrm{val}})}` (reported with a selection).

    Examples
    --------
    >>> round(selection_penalty(147, 100), 2)
    0.42
    """
    return 2.0 * math.sqrt(math.log(2.0 * n_candidates / delta) / (2.0 * n_val))


class FCPSSelector(BaseEstimator):
    r"""FCPS end to end on one split: paths on selection, fits on calibration, choice on validation.

    Parameters
    ----------
    paths : tuple of str, default ("information_first", "complexity_penalised", "random")
    families : tuple of str, default :data:`FAMILY_LADDER`
    max_k : int or None
    budget : int or None
        Planned budget of the complexity-penalised path (default: the calibration rows).
    alpha, fallback, lam, ridge_lam, C : hyperparameters (spec 002 recommended defaults)
    random_state : int or None
        Seed of the random path.

    Attributes
    ----------
    paths_ : dict of str to ndarray
    candidates_ : DataFrame
        :func:`evaluate_candidates` output (validation only).
    selected_ : pandas.Series
        The selected ``path, k, family`` row.
    estimator_ : estimator
        The selected candidate fitted on the calibration block (predicts from the selected prefix).
    prefix_ : ndarray of int64
    """

    def __init__(
        self,
        *,
        paths: tuple[str, ...] = ("information_first", "complexity_penalised", "random"),
        families: tuple[str, ...] = FAMILY_LADDER,
        max_k: int | None = None,
        budget: int | None = None,
        alpha: float = 1.0,
        fallback: str = "global",
        lam: float = 0.25,
        ridge_lam: float = 1.0,
        C: float = 1.0,
        random_state: int | None = None,
    ) -> None:
        self.paths = paths
        self.families = families
        self.max_k = max_k
        self.budget = budget
        self.alpha = alpha
        self.fallback = fallback
        self.lam = lam
        self.ridge_lam = ridge_lam
        self.C = C
        self.random_state = random_state

    def fit(self, sel: Cells, cal: Cells, val: Cells) -> Self:
        """Build paths on ``sel``, evaluate every candidate on ``val``, refit the selected one on ``cal``."""
        budget = self.budget or int(round(cal.rows))
        self.paths_ = {
            rule: JudgePath(
                rule, lam=self.lam, budget=budget, random_state=self.random_state, n_categories=sel.n_categories
            )
            .fit(sel.codes, np.divide(sel.s, sel.n), sample_weight=sel.n)
            .path_
            for rule in self.paths
        }
        options: dict[str, Any] = {
            "alpha": self.alpha,
            "fallback": self.fallback,
            "ridge_lam": self.ridge_lam,
            "C": self.C,
            "schema": cal.schema,
        }
        self.candidates_ = evaluate_candidates(
            self.paths_, cal, val, families=self.families, max_k=self.max_k, **options
        )
        self.selected_ = select_candidate(self.candidates_, self.families)
        self.prefix_ = self.paths_[self.selected_["path"]][: int(self.selected_["k"])]
        codes, n, s, _ = prefix_cells(cal, self.prefix_)
        q = prefix_squares(cal, self.prefix_)
        self.estimator_ = fit_family(str(self.selected_["family"]), codes, n, s, options, q)
        return self

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Predictions for full-pool codes ``X`` (the selected prefix is taken from them)."""
        check_is_fitted(self)
        return self.estimator_.predict(np.asarray(X, dtype=np.int64)[:, self.prefix_])
