r"""Estimation-cost bookkeeping and observable diagnostics of the regime map (spec 002 §5.1-§5.6).

Synthetic data (the target :math:`\eta` is known, so the population is exact):

* :func:`decompose`: the selected candidate's risk split into the information of its prefix
  :math:`R(\eta_{\pi,k}) = \mathbb E[\eta_k(1-\eta_k)]`, the approximation gap
  :math:`\Delta_F = R(f^*_F) - R(\eta_k) = \mathbb E[(f^*_F - \eta_k)^2]` (:math:`f^*_F` = the family fitted on
  the population cells with ``population_rows`` rows; the table family contains :math:`\eta_k`, so its gap is 0)
  and the finite calibration :math:`R(\hat f) - R(f^*_F)`. They add up to :math:`R(\hat f)` exactly.
* :func:`table_pressure`: the smoothed table's estimation pressure :math:`E_{\mathrm{tab}}(B)` by the binomial
  formula (:math:`n_c \sim \mathrm{Bin}(B, p_c)`, smoothing toward :math:`\mathbb E Y`),
  :func:`estimation_pressure`: the Monte Carlo :math:`E_F(B)` of any family (refits on fresh :math:`B`-samples),
  and :func:`boundary`: the regime boundary "table preferable iff :math:`\Delta_F > E_{\mathrm{tab}} - E_F`"
  beside the study's observed paired outcome.

Any data (the split-level proxy score): per (split, budget) unit :math:`q = z(S_{\mathrm{eff}}/B) + z(\hat u) -
z(\hat g)` from the validation-selected table's effective support per label, its validation unseen rate and the
interaction gain :math:`\hat g` (best additive - best pairwise validation MSE), :func:`auc` for the event "the
scalar menu's test MSE is below the table menu's", a cluster bootstrap over the budget cells and
:func:`within_cell_permutation_p`.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), Eq. 1, Eqs. 7-10, Table 17.
.. [2] L. Györfi, M. Kohler, A. Krzyżak, H. Walk. A Distribution-Free Theory of Nonparametric Regression.
   Springer, 2002 (partitioning estimates). doi:10.1007/b97848.
.. [3] P. L. Bartlett, S. Mendelson. Rademacher and Gaussian complexities: risk bounds and structural results.
   JMLR 3:463-482, 2002.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps
from scipy.special import comb

from judgecal_dist.errors import InputError
from judgecal_dist.io.growth import N_JUDGES, growth_eta
from judgecal_dist.io.rubric_panel import JUDGES as RUBRIC_JUDGES
from judgecal_dist.io.rubric_panel import score_confusion
from judgecal_dist.methods.fcps.joint_table import SCHEMA_CATEGORIES, pattern_keys
from judgecal_dist.methods.fcps.select import fit_family, prefix_cells

if TYPE_CHECKING:
    from judgecal_dist.studies.regime_map.config import Config

__all__ = [
    "RISK_COLUMNS",
    "Population",
    "decomposition_columns",
    "growth_population",
    "decompose",
    "table_pressure",
    "estimation_pressure",
    "auc",
    "within_cell_permutation_p",
    "proxy_score",
    "balanced_support_bound",
    "parametric_bound",
]

_ADDITIVE = ("ridge_iso", "logistic")
_PAIRWISE = ("ridge_pair_iso", "logistic_pair")
_HERMITE_NODES = 96  # Gauss-Hermite nodes of the equicorrelated generator's pattern law (exact to ~1e-12)


@dataclass(frozen=True)
class Population:
    """An exact pattern law: distinct ``codes`` (P x m), probabilities ``p`` (sum 1) and targets ``eta``."""

    codes: npt.NDArray[np.int64]
    p: npt.NDArray[np.float64]
    eta: npt.NDArray[np.float64]

    def prefix(self, prefix: Sequence[int] | npt.NDArray[np.int64]) -> Population:
        """The law of the prefix pattern :math:`Z^{(k)}` with :math:`\\eta_k(c) = E[\\eta \\mid Z^{(k)} = c]`."""
        cols = np.asarray(prefix, dtype=np.int64)
        keys = pattern_keys(self.codes[:, cols], 4)
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        p = np.bincount(inverse.ravel(), weights=self.p, minlength=len(uniq)).astype(np.float64)
        mass = np.bincount(inverse.ravel(), weights=self.p * self.eta, minlength=len(uniq))
        return Population(self.codes[first][:, cols], p, mass / p)

    @property
    def bayes_risk(self) -> float:
        """:math:`R(\\eta) = E[\\eta(1-\\eta)]`, the squared-loss risk of the law's own Bayes rule."""
        return float((self.p * self.eta * (1.0 - self.eta)).sum())

    def excess(self, predictions: npt.ArrayLike) -> float:
        """:math:`E[(f - \\eta)^2]` of per-pattern predictions (clipped to [0, 1] as the study scores them)."""
        f = np.clip(np.asarray(predictions, dtype=np.float64), 0.0, 1.0)
        return float((self.p * (f - self.eta) ** 2).sum())


def synthetic_eta(config: Config, codes: npt.ArrayLike, weight: float = 1.0, regime: str | None = None) -> np.ndarray:
    """P(Y = 1 | judges' A/B outputs) of the synthetic generator ``config`` names (``regime``: its name when the
    caller already parsed it), with the config's growth settings."""
    return growth_eta(
        np.asarray(codes),
        regime if regime is not None else str(config.data).removeprefix("synthetic:"),
        a=config.growth_a,
        w=config.growth_w,
        noise=config.growth_noise,
        b=config.growth_b,
        c=config.growth_c,
        weight=weight,
    )


def growth_population(config: Config, weight: float = 1.0, patterns: Any = None, weights: Any = None) -> Population:
    r"""The exact law of the synthetic generator of ``config`` (``patterns``/``weights``: the semi-real source).

    Independent judges (``growth_gamma = 0``): the 2^7 A/B outputs, equally likely. Equicorrelated judges:
    :math:`P(x) = E_G[\prod_j q(G)^{x_j}(1-q(G))^{1-x_j}]`, :math:`q(G) = \Phi(\sqrt{\gamma/(1-\gamma)}\,G)`, by
    Gauss-Hermite quadrature. Semi-real: the source's pattern frequencies.
    """
    if patterns is not None:
        pats = np.asarray(patterns, dtype=np.int64)
        uniq, inverse = np.unique(pats, axis=0, return_inverse=True)
        p = np.bincount(inverse.ravel(), weights=np.asarray(weights, dtype=np.float64), minlength=len(uniq))
        codes = uniq
    else:
        codes = (np.arange(2**N_JUDGES)[:, None] >> np.arange(N_JUDGES)) & 1
        gamma = config.growth_gamma
        if gamma == 0.0:
            p = np.full(len(codes), 2.0**-N_JUDGES)
        else:
            x, w = np.polynomial.hermite.hermgauss(_HERMITE_NODES)
            q = sps.norm.cdf(math.sqrt(gamma / (1.0 - gamma)) * math.sqrt(2.0) * x)
            ones = codes.sum(axis=1)[:, None]
            p = (q[None, :] ** ones * (1.0 - q[None, :]) ** (N_JUDGES - ones)) @ (w / math.sqrt(math.pi))
    return Population(codes.astype(np.int64), p / p.sum(), synthetic_eta(config, codes, weight))


def _population_fit(family: str, law: Population, rows: float, options: dict[str, Any]) -> npt.NDArray[np.float64]:
    """:math:`f^*_F` on the prefix cells: the table family is :math:`\\eta_k` itself; any other family is fitted
    on the population cells as if ``rows`` rows had been drawn (their exact counts and label sums)."""
    if family.startswith("table"):
        return law.eta
    n = law.p * rows
    return np.asarray(fit_family(family, law.codes, n, n * law.eta, options).predict(law.codes), dtype=np.float64)


def decompose(
    model: Any, family: str, law: Population, options: dict[str, Any], population_rows: float = 1e6
) -> dict[str, float]:
    r"""Bookkeeping of a fitted candidate's risk on its prefix law ``law`` (:meth:`Population.prefix`).

    Returns ``information`` :math:`R(\eta_k)`, ``approximation`` :math:`\Delta_F`, ``calibration``
    :math:`R(\hat f) - R(f^*_F)` and ``total`` :math:`R(\hat f)` (their sum).
    """
    information = law.bayes_risk
    approximation = law.excess(_population_fit(family, law, population_rows, options))
    total = information + law.excess(model.predict(law.codes))
    return {
        "information": information,
        "approximation": approximation,
        "calibration": total - information - approximation,
        "total": total,
    }


def table_pressure(law: Population, budget: int, alpha: float) -> float:
    r"""Exact :math:`E_{\mathrm{tab}}(B)` of the smoothed table, :math:`n_c \sim \mathrm{Bin}(B, p_c)`:

    .. math::

        \sum_c p_c \sum_{n=0}^B \binom Bn p_c^n (1-p_c)^{B-n}
        \Big[\frac{n\,\sigma_c^2}{(n+\alpha)^2} + \Big(\frac{\alpha}{n+\alpha}\Big)^2(\eta_c - EY)^2\Big],

    :math:`\sigma_c^2 = \eta_c(1-\eta_c)`; an unseen cell (:math:`n = 0`) pays :math:`(\eta_c - EY)^2` (the
    global fallback), also when :math:`\alpha = 0`.

    Examples
    --------
    Two equally likely cells with :math:`\eta = 0.2, 0.8`, one label, :math:`\alpha = 1`: half the time a cell is
    unseen (0.09), else it pays :math:`0.16/4 + 0.09/4`:

    >>> law = Population(np.array([[0], [1]]), np.array([0.5, 0.5]), np.array([0.2, 0.8]))
    >>> round(table_pressure(law, 1, 1.0), 6)
    0.07625
    """
    if budget < 0 or alpha < 0:
        raise InputError(f"table_pressure: need budget >= 0 and alpha >= 0, got {budget}, {alpha}")
    n = np.arange(budget + 1, dtype=np.float64)[None, :]
    p, eta = law.p[:, None], law.eta[:, None]
    mean = float((law.p * law.eta).sum())
    pmf = sps.binom.pmf(n, budget, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        bracket = n * eta * (1.0 - eta) / (n + alpha) ** 2 + (alpha / (n + alpha)) ** 2 * (eta - mean) ** 2
    bracket[:, 0] = ((eta - mean) ** 2).ravel()
    return float((p[:, 0] * (pmf * bracket).sum(axis=1)).sum())


def estimation_pressure(
    family: str,
    law: Population,
    budget: int,
    reps: int,
    rng: np.random.Generator,
    options: dict[str, Any],
    population_rows: float = 1e6,
) -> tuple[float, float]:
    r"""Monte Carlo :math:`E_F(B) = E[R(\hat f_B)] - R(f^*_F)` (mean and its standard error over ``reps`` refits).

    Every rep draws :math:`B` rows from ``law`` (multinomial cell counts, binomial label sums), fits ``family``
    exactly as the study does (``table`` with its own :math:`\bar y` and fallback) and scores it on the law.
    """
    if reps < 2:
        raise InputError(f"estimation_pressure: need reps >= 2 for a standard error, got {reps}")
    floor = law.excess(_population_fit(family, law, population_rows, options))
    out = np.empty(reps)
    for r in range(reps):
        n = rng.multinomial(budget, law.p).astype(np.float64)
        s = rng.binomial(n.astype(np.int64), law.eta).astype(np.float64)
        seen = n > 0
        model = fit_family(family, law.codes[seen], n[seen], s[seen], options)
        out[r] = law.excess(model.predict(law.codes)) - floor
    return float(out.mean()), float(out.std(ddof=1) / math.sqrt(reps))


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


def balanced_support_bound(cells: int, kappa: float, budget: int, delta: float, alpha: float) -> float | None:
    r"""The balanced-support scale :math:`2\kappa M\log(4M/\delta)/B + 8\alpha^2\kappa^2M^2/B^2`, valid (returned)
    only when :math:`B \ge 8\kappa M\log(2M/\delta)`; None below that budget."""
    if budget < 8.0 * kappa * cells * math.log(2.0 * cells / delta):
        return None
    return 2.0 * kappa * cells * math.log(4.0 * cells / delta) / budget + 8.0 * (alpha * kappa * cells / budget) ** 2


def parametric_bound(dim: int, norm: float, budget: int, delta: float, lipschitz: float = 2.0) -> float:
    r"""The parametric stacking scale :math:`4LW\Phi/\sqrt B + 2\sqrt{\log(2/\delta)/(2B)}` with
    :math:`\Phi = \sqrt d` (features in :math:`[-1, 1]^d`) and weight norm :math:`W` = ``norm``."""
    return 4.0 * lipschitz * norm * math.sqrt(dim) / math.sqrt(budget) + 2.0 * math.sqrt(
        math.log(2.0 / delta) / (2.0 * budget)
    )


#: Risk parts of :func:`decompose`, as candidate-row columns (NaN except on the rows a main menu selected).
RISK_COLUMNS = {f"risk_{name}": name for name in ("information", "approximation", "calibration", "total")}
_DECOMPOSED_MENUS = ("table", "scalar", "union")


def decomposition_columns(
    frame: pd.DataFrame,
    paths: dict[str, npt.NDArray[np.int64]],
    cal: Any,
    law: Population,
    options: dict[str, Any],
    population_rows: float,
) -> pd.DataFrame:
    """``frame`` with :data:`RISK_COLUMNS` filled on the candidates that the table, scalar and union menus
    selected (refitted on the calibration cells ``cal`` as the study fitted them)."""
    out = frame.assign(**{c: math.nan for c in RISK_COLUMNS})
    chosen = sorted({int(i) for m in _DECOMPOSED_MENUS for i in np.flatnonzero(frame[f"selected_{m}"].to_numpy())})
    for i in chosen:
        row = frame.iloc[i]
        prefix = np.asarray(paths[row["path"]][: int(row["k"])], dtype=np.int64)
        codes, n, s, _ = prefix_cells(cal, prefix)
        model = fit_family(str(row["family"]), codes, n, s, options)
        parts = decompose(model, str(row["family"]), law.prefix(prefix), options, population_rows)
        for column, name in RISK_COLUMNS.items():
            out.iloc[i, out.columns.get_loc(column)] = parts[name]
    return out


def _law(config: Config, data: Any) -> Population:
    weight = (config.interaction_weights or (1.0,))[-1]
    return growth_population(config, weight, getattr(data, "patterns", None), getattr(data, "weights", None))


def boundary(config: Config, parts: pd.DataFrame, data: Any) -> list[dict[str, Any]]:
    r"""Per budget and main scalar family (``main_families``) at the longest prefix of the pool path: :math:`\Delta_F`, Monte Carlo
    :math:`E_F(B)`, exact :math:`E_{\mathrm{tab}}(B)` and the Monte Carlo pressure of the table as fitted (its own
    :math:`\bar y`), the predicted winner (table iff :math:`\Delta_F > E_{\mathrm{tab}} - E_F`) and the observed
    paired test-MSE difference (family - table) over splits."""
    kmax = int(parts["k"].max())
    path = str(parts["path"].iloc[0])
    law = _law(config, data).prefix(range(kmax))
    options = {
        "alpha": config.alpha,
        "fallback": config.fallback,
        "ridge_lam": config.ridge_lam,
        "C": config.logistic_c,
    }
    at = parts[(parts["k"] == kmax) & (parts["path"] == path)]
    rows = []
    for budget in sorted(parts["budget"].unique()):
        rng = np.random.default_rng([config.seed, int(budget)])
        tab = at[(at["budget"] == budget) & (at["family"] == "table")].set_index("seed")["test_mse"]
        exact = table_pressure(law, int(budget), config.alpha)
        fitted, fitted_se = estimation_pressure("table", law, int(budget), config.boundary_reps, rng, options)
        for family in [f for f in config.main_families if f in config.families]:
            gap = law.excess(_population_fit(family, law, config.population_rows, options))
            e_f, e_f_se = estimation_pressure(
                family, law, int(budget), config.boundary_reps, rng, options, config.population_rows
            )
            diff = at[(at["budget"] == budget) & (at["family"] == family)].set_index("seed")["test_mse"] - tab
            predicted = "table" if gap > exact - e_f else family
            observed = "table" if float(diff.mean()) > 0 else family
            rows.append(
                {
                    "budget": int(budget),
                    "family": family,
                    "k": kmax,
                    "approximation_gap": gap,
                    "family_pressure": e_f,
                    "family_pressure_se": e_f_se,
                    "table_pressure_exact": exact,
                    "table_pressure_fitted": fitted,
                    "table_pressure_fitted_se": fitted_se,
                    "predicted": predicted,
                    "observed_delta": float(diff.mean()),
                    "observed_delta_se": float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else 0.0,
                    "agrees": predicted == observed,
                }
            )
    return rows


def _bookkeeping(parts: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for menu in _DECOMPOSED_MENUS:
        chosen = parts[parts[f"selected_{menu}"]]
        for budget, g in chosen.groupby("budget", sort=True):
            row = {"budget": int(budget), "menu": menu, "family": str(g["family"].mode().iloc[0])}
            row |= {"mean_k": float(g["k"].mean()), "test_mse": float(g["test_mse"].mean())}
            row |= {name: float(g[column].mean()) for column, name in RISK_COLUMNS.items()}
            rows.append(row)
    return rows


def _observed_categories(config: Config, data: Any) -> dict[str, int]:
    """Distinct output codes each pool judge emits anywhere in the input (a nominal alphabet has 4, or 6 for a
    1-5 rubric with err)."""
    if isinstance(getattr(data, "splits", None), dict):
        blocks = [b for split in data.splits.values() for b in (split.sel, split.val, split.test, *split.cal.values())]
        seen = [{int(v) for b in blocks for v in np.unique(b.codes[b.n > 0, j])} for j in range(len(config.pool))]
        return {judge: len(codes) for judge, codes in zip(config.pool, seen, strict=True)}
    if not config.synthetic:
        return {}
    if config.schema == "scalar":  # the rubric panel: codes of positive probability under its confusion matrices
        emitted = (score_confusion().sum(axis=1) > 0).sum(axis=1)
        return {f"judge {j + 1}": int(emitted[j]) for j in range(len(RUBRIC_JUDGES))}
    law = _law(config, data)
    return {f"judge {j + 1}": len(np.unique(law.codes[law.p > 0, j])) for j in range(law.codes.shape[1])}


def _observable(parts: pd.DataFrame, base: int = 4) -> list[dict[str, Any]]:
    rows = []
    for budget, g in parts[parts["selected_table"]].groupby("budget", sort=True):
        rows.append(
            {
                "budget": int(budget),
                "mean_k": float(g["k"].mean()),
                "modal_k": int(g["k"].mode().min()),
                "nominal_alphabet": int(base ** int(g["k"].mode().min())),
                "occupied": float(g["occupied"].mean()),
                "effective_support": float(g["effective_support"].mean()),
                "support_per_label": float((g["effective_support"] / budget).mean()),
                "val_unseen_rate": float(g["val_unseen_rate"].mean()),
                "unseen_rate": float(g["unseen_rate"].mean()),
                "seen_term": float(g["seen_term"].mean()),
                "cell_pressure": float(g["cell_pressure"].mean()),
            }
        )
    return rows


def diagnostics_report(config: Config, parts: pd.DataFrame, data: Any) -> tuple[dict[str, Any], list[str]]:
    """Records and report lines: the risk bookkeeping and regime boundary (synthetic), the observable
    diagnostics of the selected table and the proxy score (any data)."""
    record: dict[str, Any] = {}
    lines: list[str] = []
    base = SCHEMA_CATEGORIES[config.schema]
    symbols = "scores 1-5, error" if config.schema == "scalar" else "B, A, tie, error"
    observable = _observable(parts, base)
    categories = _observed_categories(config, data)
    record |= {"observable": observable, "observed_categories": categories}
    lines += [
        "",
        "## Observable diagnostics of the validation-selected table",
        "",
        f"Means over splits. Nominal alphabet = {base}^k possible vote patterns ({symbols}) of the k judges at "
        "the modal k; "
        "occupied = patterns seen in calibration; S_eff = exp(entropy of the calibration patterns); unseen = share "
        "of rows whose pattern calibration never saw, on the validation block (usable before testing) and on the "
        "test block; C = seen term + test unseen rate.",
        "",
        "| B | mean k | nominal alphabet | occupied | S_eff | S_eff/B | unseen (val.) | unseen (test) | seen term | C |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in observable:
        lines.append(
            f"| {r['budget']} | {r['mean_k']:.2f} | {r['nominal_alphabet']} | {r['occupied']:.1f} | "
            f"{r['effective_support']:.2f} | {r['support_per_label']:.4f} | {r['val_unseen_rate']:.4f} | "
            f"{r['unseen_rate']:.4f} | {r['seen_term']:.4f} | {r['cell_pressure']:.4f} |"
        )
    if not config.synthetic:
        lines += [
            "",
            "Paper, LLMBar (test unseen rate): B = 20: mean k 2.37, S_eff/B 0.327, unseen 0.102, seen term 0.219, C "
            "0.321; B = 300: mean k 4.13, S_eff/B 0.075, unseen 0.029, seen term 0.091, C 0.120.",
        ]
    if categories:
        lines += ["", f"Observed output categories per judge (of {base}: {symbols}): "]
        lines[-1] += ", ".join(f"{j} {n}" for j, n in categories.items()) + "."
    if config.synthetic and config.decomposition and "risk_total" in parts:
        book = _bookkeeping(parts)
        bayes = _law(config, data).bayes_risk
        record["bookkeeping"] = book
        record["bayes_risk"] = bayes
        lines += [
            "",
            "## Risk bookkeeping of the selected candidates (known target)",
            "",
            "Exact population risk of each selected candidate, split into the information of its prefix (the risk "
            "of the best possible function of those judges' votes), the approximation gap (the family's best member "
            f"fitted on {config.population_rows:,} rows, minus that; 0 for the table) and the finite-calibration "
            "cost (the fitted candidate minus the family's best); the three add up to the total. The family's best is its "
            "own fitting procedure on that many rows (two-stage score + isotonic fits, penalties), not the exact "
            "minimiser over the family, so a small fit can beat it and the finite-calibration cost can dip below 0. "
            "Test MSE is the "
            f"same risk estimated on the test block. Means over splits. Bayes risk with all judges: {bayes:.4f}.",
            "",
            "| B | menu | modal family | mean k | prefix information | approximation | finite calibration | total "
            "| test MSE |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in book:
            lines.append(
                f"| {r['budget']} | {r['menu']} | {r['family']} | {r['mean_k']:.2f} | {r['information']:.4f} | "
                f"{r['approximation']:.4f} | {r['calibration']:.4f} | {r['total']:.4f} | {r['test_mse']:.4f} |"
            )
    if config.synthetic and config.boundary_reps and config.schema == "pairwise":
        rows = boundary(config, parts, data)
        record["boundary"] = rows
        agree = sum(r["agrees"] for r in rows)
        lines += [
            "",
            f"## Regime boundary at k = {rows[0]['k']} (known target)",
            "",
            "The table is preferable iff the family's approximation gap exceeds the table's estimation pressure minus "
            "the family's (main scalar families). Table pressure: exact binomial formula (cell counts Bin(B, p_c), smoothing toward the true "
            f"mean) and, beside it, Monte Carlo of the table as fitted (its own sample mean); family pressure: Monte "
            f"Carlo over {config.boundary_reps} refits on fresh B-row samples (± SE; below 0 where a small fit beats the "
            "population fit, as above). Observed = mean over splits of "
            "family minus table test MSE (> 0: the table won).",
            "",
            "| B | family | approx. gap | family pressure | table pressure exact | table as fitted | predicted "
            "| observed ± SE | agrees |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['budget']} | {r['family']} | {r['approximation_gap']:.4f} | {r['family_pressure']:.4f} ± "
                f"{r['family_pressure_se']:.4f} | {r['table_pressure_exact']:.4f} | {r['table_pressure_fitted']:.4f} "
                f"± {r['table_pressure_fitted_se']:.4f} | {r['predicted']} | {r['observed_delta']:+.4f} ± "
                f"{r['observed_delta_se']:.4f} | {'yes' if r['agrees'] else 'no'} |"
            )
        lines += ["", f"The boundary predicts the observed winner in {agree} of {len(rows)} (budget, family) pairs."]
    proxy = proxy_score(
        parts,
        config.proxy_bootstrap,
        config.proxy_permutations,
        np.random.default_rng([config.seed, 17]),
        config.ci_level,
    )
    record["proxy_score"] = proxy
    level = f"{100 * config.ci_level:g}%"
    how = "every arrangement" if proxy["permutation_exact"] else f"{proxy['permutations']} permutations"
    gain = "+ z(u) - z(g)" if proxy["uses_gain"] else "+ z(u) (no gain: the menu lacks an additive or pairwise family)"
    lines += [
        "",
        "## Split-level proxy score",
        "",
        f"q = z(S_eff/B) {gain}, standardised over the {proxy['units']} (split, budget) units; S_eff/B and u "
        "(validation unseen rate) of the validation-selected table, g = best additive minus best pairwise "
        f"validation MSE. Event: the scalar menu's test MSE is below the table menu's ({proxy['scalar_wins']} of "
        f"{proxy['units']} units). Interval: cluster bootstrap over the {proxy['cells']} budget cells "
        f"({proxy['bootstrap']} resamples); p: outcomes permuted within budgets "
        f"({how}).",
        "",
        (
            f"AUC {proxy['auc']:.3f} [{level}: {proxy['auc_ci'][0]:.3f}, {proxy['auc_ci'][1]:.3f}], permutation "
            f"p = {proxy['permutation_p']:.4f}; gap in mean q (scalar-win minus table-win units) {proxy['gap']:+.3f} "
            f"[{proxy['gap_ci'][0]:+.3f}, {proxy['gap_ci'][1]:+.3f}]. "
            if 0 < proxy["scalar_wins"] < proxy["units"]
            else "AUC and gap undefined: every unit has the same winner. "
        )
        + f"Unit means: S_eff/B {proxy['means']['support']:.4f}, u {proxy['means']['unseen']:.4f}, g "
        f"{proxy['means']['gain']:+.4f}. Paper, 600 units over four datasets and 20 cells: AUC 0.573 [0.522, 0.624], "
        "gap +0.476 [0.221, 0.754] (its permutation p was lost).",
    ]
    return record, lines
