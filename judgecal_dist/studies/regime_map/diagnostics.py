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

The split-level proxy score of any data is in :mod:`~judgecal_dist.studies.regime_map.proxy`; the report
sections in :mod:`~judgecal_dist.studies.regime_map.diagnostics_report`.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), Eq. 1, Eqs. 7-10, Table 17.
.. [2] L. Györfi, M. Kohler, A. Krzyżak, H. Walk. A Distribution-Free Theory of Nonparametric Regression.
   Springer, 2002 (partitioning estimates). doi:10.1007/b97848.
.. [3] P. L. Bartlett, S. Mendelson. Rademacher and Gaussian complexities: risk bounds and structural results.
   JMLR 3:463-482, 2002.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats as sps

from judgecal_dist.errors import InputError
from judgecal_dist.io.growth import N_JUDGES, growth_eta
from judgecal_dist.methods.fcps.joint_table import pattern_keys
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
    "boundary",
    "population_of",
    "balanced_support_bound",
    "parametric_bound",
]

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
DECOMPOSED_MENUS = ("table", "scalar", "union")


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
    chosen = sorted({int(i) for m in DECOMPOSED_MENUS for i in np.flatnonzero(frame[f"selected_{m}"].to_numpy())})
    for i in chosen:
        row = frame.iloc[i]
        prefix = np.asarray(paths[row["path"]][: int(row["k"])], dtype=np.int64)
        codes, n, s, _ = prefix_cells(cal, prefix)
        model = fit_family(str(row["family"]), codes, n, s, options)
        parts = decompose(model, str(row["family"]), law.prefix(prefix), options, population_rows)
        for column, name in RISK_COLUMNS.items():
            out.iloc[i, out.columns.get_loc(column)] = parts[name]
    return out


def population_of(config: Config, data: Any) -> Population:
    """The exact pattern law of a synthetic run (its last interaction weight)."""
    weight = (config.interaction_weights or (1.0,))[-1]
    return growth_population(config, weight, getattr(data, "patterns", None), getattr(data, "weights", None))


def boundary(config: Config, parts: pd.DataFrame, data: Any) -> list[dict[str, Any]]:
    r"""Per budget and main scalar family (``main_families``) at the longest prefix of the pool path: :math:`\Delta_F`, Monte Carlo
    :math:`E_F(B)`, exact :math:`E_{\mathrm{tab}}(B)` and the Monte Carlo pressure of the table as fitted (its own
    :math:`\bar y`), the predicted winner (table iff :math:`\Delta_F > E_{\mathrm{tab}} - E_F`) and the observed
    paired test-MSE difference (family - table) over splits."""
    kmax = int(parts["k"].max())
    path = str(parts["path"].iloc[0])
    law = population_of(config, data).prefix(range(kmax))
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
