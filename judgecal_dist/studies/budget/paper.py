"""The budget study's rows of the report's paper-and-here section: the paper's claims beside this run's numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.studies.report_kit import (
    Here,
    number,
    percent,
    row_interval,
)

if TYPE_CHECKING:
    from judgecal_dist.studies.budget.config import Config

__all__ = ["budget_here", "fraction_here", "per_budget"]


def per_budget(max_t: dict[str, Any]) -> tuple[str, bool]:
    """What the corrected per-budget intervals say, in words, and whether any of them excludes 0."""
    above = sum(1 for low in max_t["delta_ci_low"] if low is not None and low > 0)
    below = sum(1 for high in max_t["delta_ci_high"] if high is not None and high < 0)
    if above or below:
        return f"{above} of {len(max_t['budgets'])} corrected per-budget intervals lie above 0 and {below} below", True
    return f"every one of the {len(max_t['budgets'])} corrected per-budget intervals contains 0", False


def budget_here(config: Config, summary: pd.DataFrame, max_t: dict[str, Any]) -> dict[str, Here]:
    """Our measurements for :data:`PAPER`: the full budget's calibrator NLLs and the joint test."""
    one_coin = summary["aggregator"] == "one_coin"  # the paper's claims are about one-coin
    full = summary[summary["full_budget"].astype(bool) & (summary["panel"] == "all") & one_coin].set_index("calibrator")
    out: dict[str, Here] = {}
    if {"none", "beta"} <= set(full.index):
        raw, beta = full.loc["none"], full.loc["beta"]
        ratio = raw["nll"] / beta["nll"]
        out["beta_drop"] = Here(
            f"{number(ratio, '.1f')}x at the full budget: raw {row_interval(raw, 'nll')}, beta "
            f"{row_interval(beta, 'nll')}",
            agrees=bool(ratio >= 5),
        )
        others = [c for c in ("platt", "temperature") if c in full.index]
        if others:
            # On a log scale, a calibrator nearer the raw NLL than beta's did not make beta's transition.
            middle = np.sqrt(raw["nll"] * beta["nll"])
            out["only_beta"] = Here(
                "; ".join(f"{c} {row_interval(full.loc[c], 'nll')}" for c in others)
                + f" (raw {number(raw['nll'])}, beta {number(beta['nll'])})",
                agrees=bool(all(full.loc[c, "nll"] > middle for c in others)),
            )
    out["max_t"] = Here(
        f"T = {number(max_t['t_obs'], '.3f')} against c = {number(max_t['critical_value'], '.3f')}, p = "
        f"{number(max_t['pvalue'], '.4g')}: {'rejected' if max_t['reject'] else 'not rejected'}; "
        + per_budget(max_t)[0]
        + " (the report relies on these)",
        agrees=bool(max_t["reject"]),
        why="" if max_t["reject"] else "procedure and pool: see the joint test above",
    )
    out["below_bonferroni"] = Here(
        f"c = {number(max_t['critical_value'], '.3f')} vs Bonferroni {number(max_t['bonferroni_z'], '.3f')}",
        agrees=bool(max_t["critical_value"] < max_t["bonferroni_z"]),
    )
    return out


def fraction_here(summary: pd.DataFrame) -> dict[str, Here]:
    """Our measurements for :data:`PAPER_FRACTIONS`: beta's NLL reduction below 20% and from 30% on."""
    rows = summary.pivot_table(index="fraction", columns="calibrator", values=["nll", "accuracy"])
    if ("nll", "beta") not in rows or ("nll", "none") not in rows:
        return {}
    change = rows[("nll", "beta")] / rows[("nll", "none")] - 1
    beta = summary[summary["calibrator"] == "beta"].set_index("fraction")

    def at(shares: pd.Index) -> str:
        return "; ".join(
            f"{number(f, '.2f')}: {percent(change[f], 1, sign=True)}, beta {row_interval(beta.loc[f], 'nll')}"
            for f in shares
        )

    out = {}
    small, large = change.index[change.index < 0.2], change.index[change.index >= 0.3]
    if len(small):
        out["small_share"] = Here(
            f"NLL change by share: {at(small)}",
            agrees=bool(change[small].between(-0.65, -0.3).all()),
        )
    if len(large):
        out["large_share"] = Here(f"NLL change by share: {at(large)}", agrees=bool((change[large] <= -0.85).all()))
    return out
