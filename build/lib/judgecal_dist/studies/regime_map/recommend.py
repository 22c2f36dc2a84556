"""The regime map's answer: joint output table or scalar stacker at the largest budget, and where that flips."""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import Recommendation, estimate

__all__ = ["recommend", "verdict"]

_WHAT = {
    "table": "the joint output table (a calibrated probability per pattern of judge votes)",
    "scalar": "a scalar stacker",
    "union": "the validation selector over tables and scalar stackers (union menu)",
}


def verdict(pair: dict[str, Any]) -> str:
    """``"table"``, ``"scalar"`` or ``"no clear winner"`` from a paired delta (scalar MSE - table MSE) and its
    interval: a winner is named only when the interval excludes 0."""
    if pair["ci_high"] < 0:
        return "scalar"
    if pair["ci_low"] > 0:
        return "table"
    return "no clear winner"


def _menu(row: dict[str, Any]) -> str:
    what = _WHAT[row["menu"]]
    if row["menu"] != "table":
        what += f", family {row['selected_family']} (picked in {row['selected_family_share']:.0%} of splits)"
    return what


def recommend(config: Any, records: list[dict[str, Any]], paired: list[dict[str, Any]]) -> Recommendation:
    """The winner at the largest budget (or the union menu when there is none) and the budgets where it differs."""
    rows = pd.DataFrame(records)
    by = {(r["budget"], r["menu"]): r for r in records}
    top = paired[-1]
    b = top["budget"]
    call = verdict(top)
    delta = f"scalar − table MSE {top['delta']:+.4f} [{top['ci_low']:+.4f}, {top['ci_high']:+.4f}]"
    if call == "no clear winner":
        # The runner-up is the restricted menu the union mostly did not pick (naming the one it picked repeats it).
        use = by[(b, "union")]
        other = by[(b, "scalar" if use["selected_family"] == "table" else "table")]
        use_text = f"{_menu(use)} at {b} labels: table and scalar have no clear winner ({delta})"
    else:
        use, other = by[(b, call)], by[(b, "scalar" if call == "table" else "table")]
        use_text = f"{_menu(use)} at {b} labels ({delta})"
    changes = []
    for pair in paired[:-1]:
        here = verdict(pair)
        if here != call:
            changes.append(
                f"at {pair['budget']} labels: {here if here == 'no clear winner' else 'use ' + _WHAT[here]} "
                f"(scalar − table MSE {pair['delta']:+.4f} [{pair['ci_low']:+.4f}, {pair['ci_high']:+.4f}])"
            )
    if not changes:
        changes.append(f"the same call at every budget tried ({', '.join(str(p['budget']) for p in paired)} labels)")
    keys = ("budget", "menu", "selected_family")
    return Recommendation(
        use=use_text,
        expected=estimate(use, "test_mse", "test MSE"),
        runner_up=f"{_menu(other)}: {estimate(other, 'test_mse', 'test MSE')}",
        changes=changes,
        interval=interval_note(config.ci_level, shared_items=not config.synthetic),
        support=rows,
        keys=keys,
        metrics=("test_mse",),
    )
