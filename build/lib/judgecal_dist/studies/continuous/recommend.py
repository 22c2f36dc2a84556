"""The continuous study's answer: which corrector to put between a judge's 1-5 scores and the human scale."""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import Recommendation, estimate

__all__ = ["recommend"]

KEYS = ("judge", "rubric", "corrector", "budget")


def _ranking(rows: pd.DataFrame) -> pd.DataFrame:
    """Per corrector: rubrics where its MAE is lowest, and its rubric-mean MAE; best first."""
    best = rows.loc[rows.groupby("rubric")["mae"].idxmin(), "corrector"].value_counts()
    out = rows.groupby("corrector").agg(mae=("mae", "mean"), rubrics=("rubric", "nunique"))
    out["wins"] = best.reindex(out.index, fill_value=0)
    return out.sort_values(["mae", "wins"], ascending=[True, False])


def _per_rubric(rows: pd.DataFrame, corrector: str) -> str:
    mine = rows[rows["corrector"] == corrector].sort_values("rubric")
    return "; ".join(f"{r['rubric']} {estimate(r, 'mae', '', '.3f')}" for _, r in mine.iterrows())


def recommend(config: Any, table: pd.DataFrame, cross: list[dict[str, Any]], exported: str = "") -> Recommendation:
    """At the largest anchor budget, for the real judge(s): the corrector with the lowest rubric-mean MAE;
    ``exported`` (what the run wrote as ``model/model.json``) is appended to the answer."""
    judges = [j for j in table["judge"].unique() if j != "synthetic"] or list(table["judge"].unique())
    rows = table[table["judge"].isin(judges) & (table["corrector"] != "ot_oracle")]  # it sees the test labels
    hi, lo = int(rows["budget"].max()), int(rows["budget"].min())
    at_hi = rows[rows["budget"] == hi]
    rank = _ranking(at_hi)
    best, second = rank.index[0], rank.index[min(1, len(rank) - 1)]
    changes = []
    if lo != hi:
        low = _ranking(rows[rows["budget"] == lo])
        if low.index[0] != best:
            changes.append(
                f"with only {lo} human-scored anchors use {low.index[0]} (rubric-mean MAE {low.iloc[0]['mae']:.3f} "
                f"against {low.loc[best, 'mae']:.3f} for {best})"
            )
    reached = [c for c in cross if c["judge"] in judges and c["budget_or_none"]]
    if reached:
        changes.append(
            "flow beats linear_hb clearly from "
            + ", ".join(f"{c['budget_or_none']} anchors on {c['rubric']}" for c in reached)
        )
    raw = rank.loc["raw", "mae"] if "raw" in rank.index else None
    judge = ", ".join(judges)
    return Recommendation(
        use=f"the {best} corrector for {judge}'s scores with {hi} human-scored anchors per rubric "
        f"(lowest MAE in {int(rank.loc[best, 'wins'])} of {int(rank.loc[best, 'rubrics'])} rubrics)"
        + (f"; {exported}" if exported else ""),
        expected=f"rubric-mean MAE {rank.loc[best, 'mae']:.3f}"
        + (f" (raw scores {raw:.3f})" if raw is not None else "")
        + f"; per rubric: {_per_rubric(at_hi, best)}",
        runner_up=f"{second}: rubric-mean MAE {rank.loc[second, 'mae']:.3f}; per rubric: {_per_rubric(at_hi, second)}",
        changes=changes,
        interval=interval_note(config.ci_level),
        support=at_hi[at_hi["corrector"].isin([best, second])],
        keys=KEYS,
        metrics=("mae", "w1"),
    )
