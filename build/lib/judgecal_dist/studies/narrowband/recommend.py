"""The narrow-band ablation's answer: weight by estimated log-odds, prune never, and plain majority vote when the
judges' accuracies are nearly equal."""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import Recommendation, estimate

__all__ = ["recommend"]


def recommend(config: Any, summary: pd.DataFrame) -> Recommendation:
    """Weighting against pruning and against plain majority vote, spread by spread (``lo_vs_majority``)."""
    rows = summary.sort_values("spread").reset_index(drop=True)
    better = rows["lo_vs_majority_ci_low"] > 0  # weighting clearly beats majority vote here
    # The smallest spread from which weighting is clearly better than majority vote at every larger spread.
    start = len(rows)
    while start > 0 and better.iloc[start - 1]:
        start -= 1
    top = rows.iloc[-1]
    gain = ", ".join(
        [
            estimate(top, "acc_log_odds", "accuracy"),
            estimate(top, "lo_vs_majority", "gain over majority vote", "+.4f"),
            estimate(top, "gap", "gain over the best pruned panel", "+.4f"),
        ]
    )
    changes = []
    if start == len(rows):
        use = "majority vote of all judges: estimated log-odds weighting never clearly beats it on these spreads"
    else:
        s = rows.iloc[start]["spread"]
        use = (
            f"log-odds weighting with accuracies estimated on the labels, when the judges' accuracies differ by a "
            f"standard deviation of {s:.2f} or more"
        )
    for _, r in rows.iloc[:start].iterrows():
        changes.append(
            f"spread {r['spread']:.2f}: weighting vs majority vote of all judges "
            f"{estimate(r, 'lo_vs_majority', '', '+.4f')} accuracy"
            + (" (majority vote better)" if r["lo_vs_majority_ci_high"] < 0 else " (no clear difference)")
        )
    if changes:
        changes = [f"with nearly equal accuracies use plain majority vote of all judges ({'; '.join(changes)})"]
    pruned_loses = bool((rows["gap_ci_low"] > 0).all())
    changes.append(
        "pruning to the top half or third is never better here: weighting beats the best pruned panel at every spread"
        if pruned_loses
        else "pruning is not always worse: see the gap column below"
    )
    pruned = max(("acc_top_half", "acc_top_third"), key=lambda m: top[m])
    return Recommendation(
        use=use,
        expected=f"at spread {top['spread']:.2f}: {gain}",
        runner_up=(
            f"{'the top-half' if pruned == 'acc_top_half' else 'the top-third'} panel by majority vote: "
            f"{estimate(top, pruned, 'accuracy')}"
        ),
        changes=changes,
        interval=interval_note(config.ci_level, shared_items=False),
        support=rows,
        keys=("spread",),
        metrics=("acc_log_odds", "acc_majority", "lo_vs_majority", "gap"),
    )
