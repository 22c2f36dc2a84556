r"""The joint table's pseudo-count x fallback sensitivity in the regime map (spec 002 §3.3, Table 18).

With ``alpha_grid`` set, every split and budget also fits the joint table on the information-first path for each
pseudo-count of the grid and each of the global and lower-prefix fallbacks, with :math:`k` chosen on validation.
Rows carry ``path = "alpha:information_first"``, ``alpha`` and ``fallback`` and are set aside by the summaries
(like the single-judge and cold-start rows). The report gives the test MSE of every cell of the grid and marks
the lowest: a test-side sensitivity, read after the fact, never a method to deploy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.methods.fcps.select import Cells, evaluate_candidates, select_candidate
from judgecal_dist.studies.report_kit import markdown_table, mean_se, number

if TYPE_CHECKING:
    from judgecal_dist.studies.regime_map.config import Config

__all__ = ["ALPHA", "GRID_FALLBACKS", "alpha_rows", "alpha_report"]

#: Path prefix of the sensitivity rows.
ALPHA = "alpha:"
#: The fallbacks the grid crosses with the pseudo-counts.
GRID_FALLBACKS = ("global", "lower_prefix")


def alpha_rows(
    path: np.ndarray, cal: Cells, val: Cells, test: Cells, config: Config, options: dict[str, Any]
) -> pd.DataFrame:
    """One validation-selected information-first table per (alpha, fallback) of ``config.alpha_grid``."""
    rows = []
    for alpha in config.alpha_grid:
        for fallback in GRID_FALLBACKS:
            frame = evaluate_candidates(
                {"information_first": path},
                cal,
                val,
                test,
                families=("table",),
                max_k=config.max_k,
                **(options | {"alpha": float(alpha), "fallback": fallback}),
            )
            row = select_candidate(frame, ("table",)).copy()
            row["path"] = f"{ALPHA}information_first"
            row["alpha"], row["fallback"] = float(alpha), fallback
            rows.append(row)
    return pd.DataFrame(rows).reset_index(drop=True)


def alpha_report(rows: pd.DataFrame) -> tuple[list[dict[str, Any]], list[str]]:
    """Mean test MSE ± SE per budget, alpha and fallback; the lowest cell per budget is marked."""
    records = []
    for (budget, alpha, fallback), g in rows.groupby(["budget", "alpha", "fallback"], sort=True):
        v = g["test_mse"].to_numpy(dtype=np.float64)
        se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
        records.append(
            {"budget": int(budget), "alpha": float(alpha), "fallback": str(fallback), "test_mse": float(v.mean())}
            | {"test_mse_se": se, "mean_k": float(g["k"].mean())}
        )
    frame = pd.DataFrame(records)
    best = frame.loc[frame.groupby("budget")["test_mse"].idxmin()]
    lines = [
        "",
        "## Joint-table pseudo-count and fallback sensitivity (information-first path, k on validation)",
        "",
        "Test MSE ± SE over splits for each pseudo-count alpha and unseen-pattern fallback; * marks the lowest per "
        "budget, a reference read on the test block after the fact, not a method.",
    ]
    rows = []
    for (budget, alpha), g in frame.groupby(["budget", "alpha"], sort=True):
        cells = []
        for fallback in GRID_FALLBACKS:
            r = g[g["fallback"] == fallback].iloc[0]
            mark = (
                "*"
                if ((best["budget"] == budget) & (best["alpha"] == alpha) & (best["fallback"] == fallback)).any()
                else ""
            )
            cells.append(f"{mean_se(r['test_mse'], r['test_mse_se'])}{mark} (k {number(r['mean_k'], '.2f')})")
        rows.append([budget, f"{alpha:g}", *cells])
    lines += ["", *markdown_table(["B", "alpha", "global", "lower prefix"], rows)]
    lines += [
        "",
        "Paper, LLMBar at B = 300 (its own seven judges): global 0.204, lower prefix 0.205, best over the grid "
        "0.203 (lower prefix); the fallback barely matters once unseen patterns are rare.",
    ]
    return records, lines
