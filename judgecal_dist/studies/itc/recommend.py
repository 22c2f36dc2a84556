"""The itc study's answer: which way to aggregate n sampled verdicts per item, and when that changes."""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import Recommendation, estimate

__all__ = ["recommend", "DEGENERATE_TIE_RATE", "starred"]

#: A method that predicts a tie for at least this share of pairs says "tie" to nearly everything: a low MAE there
#: reflects how often the labels are ties, not a judgement, so it is never starred nor recommended.
DEGENERATE_TIE_RATE = 0.95


def starred(summary: pd.DataFrame) -> pd.Series:
    """Rows in the MAE top cluster that do not predict a tie nearly always."""
    return summary["top_cluster_mae"].astype(bool) & (summary["pred_tie_rate"] < DEGENERATE_TIE_RATE)


def _ranking(summary: pd.DataFrame, n: int) -> pd.DataFrame:
    """Per method at budget ``n``: cells in the (non-degenerate) top cluster and mean MAE, best first."""
    rows = summary[summary["n"] == n].assign(star=starred(summary))
    rows = rows[rows["pred_tie_rate"] < DEGENERATE_TIE_RATE]
    out = rows.groupby("method").agg(cells=("star", "sum"), of=("star", "size"), mae=("mae", "mean"))
    return out.sort_values(["cells", "mae"], ascending=[False, True])


def _cells(summary: pd.DataFrame, method: str, n: int) -> str:
    rows = summary[(summary["method"] == method) & (summary["n"] == n)].sort_values("mae")
    degenerate = int((rows["pred_tie_rate"] >= DEGENERATE_TIE_RATE).sum())
    rows = rows[rows["pred_tie_rate"] < DEGENERATE_TIE_RATE]  # those cells are named under "when this changes"
    if rows.empty:
        return f"predicts a tie for {DEGENERATE_TIE_RATE:.0%} or more of the pairs in every cell"
    if len(rows) <= 3:
        return "; ".join(
            f"{r['dataset']} {r['judge_id']}: {estimate(r, 'mae', 'MAE', '.3f')}" for _, r in rows.iterrows()
        )
    best, worst = rows.iloc[0], rows.iloc[-1]
    return (
        f"MAE from {estimate(best, 'mae', '', '.3f')} ({best['dataset']}, {best['judge_id']}) to "
        f"{estimate(worst, 'mae', '', '.3f')} ({worst['dataset']}, {worst['judge_id']}) over {len(rows)} cells"
        + (f" ({degenerate} cells where it nearly always predicts a tie left out)" if degenerate else "")
    )


def recommend(config: Any, summary: pd.DataFrame) -> Recommendation:
    """The method most often in the MAE top cluster at the largest budget, degenerate tie-predictors excluded."""
    budgets = sorted(summary["n"].unique())
    hi, lo = int(budgets[-1]), int(budgets[0])
    rank = _ranking(summary, hi)
    best = rank.index[0]
    second = rank.index[1] if len(rank) > 1 else best
    changes = []
    if lo != hi:
        low = _ranking(summary, lo)
        if low.index[0] != best and low.iloc[0]["cells"] > (low.loc[best, "cells"] if best in low.index else 0):
            changes.append(
                f"with only {lo} samples per item use {low.index[0]} (top cluster in {int(low.iloc[0]['cells'])} of "
                f"{int(low.iloc[0]['of'])} cells; {best}: {int(low.loc[best, 'cells']) if best in low.index else 0})"
            )
    ties = summary[(summary["pred_tie_rate"] >= DEGENERATE_TIE_RATE) & (summary["method"] != "constant_tie")]
    if len(ties):
        cells = sorted({f"{r.method} on {r.dataset} ({r.judge_id})" for r in ties.itertuples()})
        changes.append(
            f"where a method predicts a tie for {DEGENERATE_TIE_RATE:.0%} or more of the pairs it is not recommended "
            f"whatever its MAE ({len(cells)} cells, e.g. {'; '.join(cells[:3])}): always answering 'tie' scores well "
            "only when ties are common in the labels"
        )
    keys = ("dataset", "judge_id", "n", "method")
    support = summary[summary["method"].isin([best, second]) & (summary["n"] == hi)]
    return Recommendation(
        use=f"{best} to aggregate {hi} sampled verdicts per item (in the MAE top cluster in "
        f"{int(rank.iloc[0]['cells'])} of {int(rank.iloc[0]['of'])} judge/dataset cells)",
        expected=_cells(summary, best, hi),
        runner_up=f"{second} (top cluster in {int(rank.loc[second, 'cells'])} of {int(rank.loc[second, 'of'])} cells): "
        + _cells(summary, second, hi),
        changes=changes,
        interval=interval_note(config.ci_level, spread_over_splits=True),
        support=support,
        keys=keys,
        metrics=("mae", "pa", "pred_tie_rate"),
    )
