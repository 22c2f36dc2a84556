"""The budget study's answer: the panel and calibrator to use with all labels, and below which label count to switch."""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import Recommendation, estimate, overlap

__all__ = ["recommend"]


def _arm(row: pd.Series) -> str:
    panel = "all judges" if row["panel"] == "all" else f"the {row['panel']} panel"
    calibrator = "uncalibrated" if row["calibrator"] == "none" else f"calibrated by {row['calibrator']}"
    return f"one_coin on {panel}, {calibrator}"


def recommend(config: Any, summary: pd.DataFrame, *, x: str = "budget") -> Recommendation:
    """Lowest-NLL arm at the largest ``x`` (labels or calibration fraction), and the ``x`` below which it changes.

    The switch point is the smallest ``x`` from which the large-``x`` winner stays the lowest-NLL arm at every
    larger ``x``; below it the report names the winner at the next smaller ``x``.
    """
    order = "budget_index" if x == "budget" else "fraction"
    steps = sorted(summary[order].unique())
    winners = {s: summary[summary[order] == s].sort_values("nll", kind="stable") for s in steps}
    last = winners[steps[-1]]
    best, second = last.iloc[0], last.iloc[min(1, len(last) - 1)]
    arm = (best["panel"], best["calibrator"])
    unit = "labels" if x == "budget" else "of the labelled items for calibration"
    what = f"{best[x]:g} {unit}" if x == "budget" else f"{best[x]:.0%} {unit}"
    support = [best, second]
    held = len(steps) - 1
    while held > 0 and tuple(winners[steps[held - 1]].iloc[0][["panel", "calibrator"]]) == arm:
        held -= 1
    changes = []
    if held > 0:
        below = winners[steps[held - 1]].iloc[0]
        same = summary[
            (summary[order] == steps[held - 1])
            & (summary["panel"] == best["panel"])
            & (summary["calibrator"] == best["calibrator"])
        ]
        at = f"{winners[steps[held]].iloc[0][x]:g}" if x == "budget" else f"{winners[steps[held]].iloc[0][x]:.0%}"
        low = f"{below[x]:g} labels" if x == "budget" else f"{below[x]:.0%}"
        verdict = (
            "intervals overlap: the difference is not clear"
            if len(same) and overlap(below, same.iloc[0], "nll")
            else "intervals separate"
        )
        changes.append(
            f"with fewer than {at} {'labels' if x == 'budget' else 'for calibration'} use {_arm(below)}: at {low}, "
            f"{estimate(below, 'nll', 'NLL')} against {estimate(same.iloc[0], 'nll', '') if len(same) else 'n/a'} "
            f"for the recommendation "
            f"({verdict})"
        )
        support += [below] + ([same.iloc[0]] if len(same) else [])
    else:
        first = f"{steps[0]:g}" if x != "budget" else f"{winners[steps[0]].iloc[0][x]:g}"
        changes.append(
            f"it does not change over the range tried (down to {first} {'labels' if x == 'budget' else ''})".rstrip(
                " )"
            )
            + ")"
        )
    tie = overlap(best, second, "nll")
    keys = ("aggregator", "panel", "calibrator", x)
    return Recommendation(
        use=f"{_arm(best)} (with {what})",
        expected=", ".join(
            estimate(best, m, lab) for m, lab in (("nll", "NLL"), ("ece", "ECE"), ("accuracy", "accuracy"))
        ),
        runner_up=f"{_arm(second)}: {estimate(second, 'nll', 'NLL')}"
        + (" (intervals overlap: interchangeable here)" if tie else " (intervals separate)"),
        changes=changes,
        interval=interval_note(config.ci_level),
        support=pd.DataFrame(support).drop_duplicates(subset=list(keys)),
        keys=keys,
        metrics=("nll", "ece", "accuracy"),
    )
