"""The regime map's diagnostic sections of ``report.md``: the observable diagnostics of the selected table (any
data), the risk bookkeeping and regime boundary (synthetic, known target) and the split-level proxy score.

Each section is one function returning its record and its lines; :func:`diagnostics_report` strings them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.io.rubric_panel import JUDGES as RUBRIC_JUDGES
from judgecal_dist.io.rubric_panel import score_confusion
from judgecal_dist.methods.fcps.joint_table import SCHEMA_CATEGORIES
from judgecal_dist.studies.regime_map.diagnostics import DECOMPOSED_MENUS, RISK_COLUMNS, boundary, population_of
from judgecal_dist.studies.regime_map.proxy import proxy_score
from judgecal_dist.studies.report_kit import bracket, markdown_table, number, section

if TYPE_CHECKING:
    from judgecal_dist.studies.regime_map.config import Config

__all__ = ["diagnostics_report"]

#: The paper's LLMBar figures beside a real-data run's observable diagnostics.
_PAPER_OBSERVABLE = (
    "Paper, LLMBar (test unseen rate): B = 20: mean k 2.37, S_eff/B 0.327, unseen 0.102, seen term 0.219, C "
    "0.321; B = 300: mean k 4.13, S_eff/B 0.075, unseen 0.029, seen term 0.091, C 0.120."
)


def _bookkeeping(parts: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for menu in DECOMPOSED_MENUS:
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
    law = population_of(config, data)
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


def _observable_section(config: Config, parts: pd.DataFrame, data: Any) -> tuple[dict[str, Any], list[str]]:
    base = SCHEMA_CATEGORIES[config.schema]
    symbols = "scores 1-5, error" if config.schema == "scalar" else "B, A, tie, error"
    observable = _observable(parts, base)
    categories = _observed_categories(config, data)
    header = ["B", "mean k", "nominal alphabet", "occupied", "S_eff", "S_eff/B", "unseen (val.)", "unseen (test)"]
    rows = [
        [r["budget"], number(r["mean_k"], ".2f"), r["nominal_alphabet"], number(r["occupied"], ".1f")]
        + [number(r["effective_support"], ".2f")]
        + [number(r[k]) for k in ("support_per_label", "val_unseen_rate", "unseen_rate", "seen_term", "cell_pressure")]
        for r in observable
    ]
    observed = ", ".join(f"{j} {n}" for j, n in categories.items())
    lines = section(
        "Observable diagnostics of the validation-selected table",
        f"Means over splits. Nominal alphabet = {base}^k possible vote patterns ({symbols}) of the k judges at "
        "the modal k; occupied = patterns seen in calibration; S_eff = exp(entropy of the calibration patterns); "
        "unseen = share of rows whose pattern calibration never saw, on the validation block (usable before testing) "
        "and on the test block; C = seen term + test unseen rate.",
        rows=markdown_table([*header, "seen term", "C"], rows),
        after=[
            "" if config.synthetic else _PAPER_OBSERVABLE,
            f"Observed output categories per judge (of {base}: {symbols}): {observed}." if categories else "",
        ],
    )
    return {"observable": observable, "observed_categories": categories}, lines


def _bookkeeping_section(config: Config, parts: pd.DataFrame, data: Any) -> tuple[dict[str, Any], list[str]]:
    book = _bookkeeping(parts)
    bayes = population_of(config, data).bayes_risk
    header = ["B", "menu", "modal family", "mean k", "prefix information", "approximation", "finite calibration"]
    rows = [
        [r["budget"], r["menu"], r["family"], number(r["mean_k"], ".2f")]
        + [number(r[k]) for k in ("information", "approximation", "calibration", "total", "test_mse")]
        for r in book
    ]
    lines = section(
        "Risk bookkeeping of the selected candidates (known target)",
        "Exact population risk of each selected candidate, split into the information of its prefix (the risk "
        "of the best possible function of those judges' votes), the approximation gap (the family's best member "
        f"fitted on {config.population_rows:,} rows, minus that; 0 for the table) and the finite-calibration "
        "cost (the fitted candidate minus the family's best); the three add up to the total. The family's best is "
        "its own fitting procedure on that many rows (two-stage score + isotonic fits, penalties), not the exact "
        "minimiser over the family, so a small fit can beat it and the finite-calibration cost can dip below 0. "
        f"Test MSE is the same risk estimated on the test block. Means over splits. Bayes risk with all judges: "
        f"{bayes:.4f}.",
        rows=markdown_table([*header, "total", "test MSE"], rows),
    )
    return {"bookkeeping": book, "bayes_risk": bayes}, lines


def _boundary_section(config: Config, parts: pd.DataFrame, data: Any) -> tuple[dict[str, Any], list[str]]:
    found = boundary(config, parts, data)
    agree = sum(r["agrees"] for r in found)
    header = ["B", "family", "approx. gap", "family pressure", "table pressure exact", "table as fitted", "predicted"]
    rows = [
        [r["budget"], r["family"], number(r["approximation_gap"])]
        + [f"{number(r['family_pressure'])} ± {number(r['family_pressure_se'])}"]
        + [number(r["table_pressure_exact"])]
        + [f"{number(r['table_pressure_fitted'])} ± {number(r['table_pressure_fitted_se'])}", r["predicted"]]
        + [f"{number(r['observed_delta'], '+.4f')} ± {number(r['observed_delta_se'])}"]
        + ["yes" if r["agrees"] else "no"]
        for r in found
    ]
    lines = section(
        f"Regime boundary at k = {found[0]['k']} (known target)",
        "The table is preferable iff the family's approximation gap exceeds the table's estimation pressure minus "
        "the family's (main scalar families). Table pressure: exact binomial formula (cell counts Bin(B, p_c), "
        "smoothing toward the true mean) and, beside it, Monte Carlo of the table as fitted (its own sample mean); "
        f"family pressure: Monte Carlo over {config.boundary_reps} refits on fresh B-row samples (± SE; below 0 where "
        "a small fit beats the population fit, as above). Observed = mean over splits of family minus table test MSE "
        "(> 0: the table won).",
        rows=markdown_table([*header, "observed ± SE", "agrees"], rows),
        after=[f"The boundary predicts the observed winner in {agree} of {len(found)} (budget, family) pairs."],
    )
    return {"boundary": found}, lines


def _proxy_section(config: Config, parts: pd.DataFrame) -> tuple[dict[str, Any], list[str]]:
    proxy = proxy_score(
        parts,
        config.proxy_bootstrap,
        config.proxy_permutations,
        np.random.default_rng([config.seed, 17]),
        config.ci_level,
    )
    how = "every arrangement" if proxy["permutation_exact"] else f"{proxy['permutations']} permutations"
    gain = "+ z(u) - z(g)" if proxy["uses_gain"] else "+ z(u) (no gain: the menu lacks an additive or pairwise family)"
    ranks = (
        f"AUC {number(proxy['auc'], '.3f')} {bracket(proxy['auc_ci'][0], proxy['auc_ci'][1], '.3f', level=config.ci_level)}, permutation "
        f"p = {number(proxy['permutation_p'])}; gap in mean q (scalar-win minus table-win units) "
        f"{number(proxy['gap'], '+.3f')} {bracket(proxy['gap_ci'][0], proxy['gap_ci'][1], '+.3f')}. "
        if 0 < proxy["scalar_wins"] < proxy["units"]
        else "AUC and gap undefined: every unit has the same winner. "
    )
    means = proxy["means"]
    lines = section(
        "Split-level proxy score",
        f"q = z(S_eff/B) {gain}, standardised over the {proxy['units']} (split, budget) units; S_eff/B and u "
        "(validation unseen rate) of the validation-selected table, g = best additive minus best pairwise "
        f"validation MSE. Event: the scalar menu's test MSE is below the table menu's ({proxy['scalar_wins']} of "
        f"{proxy['units']} units). Interval: cluster bootstrap over the {proxy['cells']} budget cells "
        f"({proxy['bootstrap']} resamples); p: outcomes permuted within budgets ({how}).",
        ranks + f"Unit means: S_eff/B {number(means['support'])}, u {number(means['unseen'])}, g "
        f"{number(means['gain'], '+.4f')}. Paper, 600 units over four datasets and 20 cells: AUC 0.573 "
        "[0.522, 0.624], gap +0.476 [0.221, 0.754] (its permutation p was lost).",
    )
    return {"proxy_score": proxy}, lines


def diagnostics_report(config: Config, parts: pd.DataFrame, data: Any) -> tuple[dict[str, Any], list[str]]:
    """Records and report lines: the observable diagnostics of the selected table and the proxy score (any data),
    with the risk bookkeeping and regime boundary between them on synthetic data."""
    sections = [_observable_section(config, parts, data)]
    if config.synthetic and config.decomposition and "risk_total" in parts:
        sections.append(_bookkeeping_section(config, parts, data))
    if config.synthetic and config.boundary_reps and config.schema == "pairwise":
        sections.append(_boundary_section(config, parts, data))
    sections.append(_proxy_section(config, parts))
    record: dict[str, Any] = {}
    lines: list[str] = []
    for part, text in sections:
        record |= part
        lines += text
    return record, lines
