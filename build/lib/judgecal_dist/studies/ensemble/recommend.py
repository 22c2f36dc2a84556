"""The ensemble study's answer: which judge tier, prompt and number of samples k to use, and the cheaper choice."""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import Recommendation, estimate, overlap

__all__ = ["recommend"]

KEYS = ("tier", "prompt_variant", "join", "k")


def _name(row: pd.Series) -> str:
    return f"the {row['tier']} judge, {row['prompt_variant']} prompt, mean of k={int(row['k'])} samples"


def _expected(row: pd.Series) -> str:
    return (
        f"{estimate(row, 'accuracy', 'accuracy', '.2%')} on {int(row['n'])} examples, "
        f"${row['cost_per_example']:.4f} per example ({row['cost_ratio']:.2f}x the single-sample baseline)"
    )


def recommend(config: Any, overall: pd.DataFrame) -> Recommendation:
    """Highest accuracy; the runner-up; the cheapest condition whose interval overlaps the best's."""
    rows = overall[overall["accuracy"].notna()]
    ranked = rows.sort_values(["accuracy", "cost_per_example"], ascending=[False, True], kind="stable")
    best, second = ranked.iloc[0], ranked.iloc[min(1, len(ranked) - 1)]
    close = ranked[ranked.apply(lambda r: overlap(r, best, "accuracy"), axis=1)]
    cheap = close.sort_values("cost_per_example", kind="stable").iloc[0]
    changes = []
    if cheap["cost_per_example"] < best["cost_per_example"]:
        changes.append(
            f"when cost matters use {_name(cheap)}: {estimate(cheap, 'accuracy', 'accuracy', '.2%')}, its interval "
            f"overlaps the best's, at {cheap['cost_per_example'] / best['cost_per_example']:.0%} of the cost"
        )
    single = rows[(rows["tier"] == best["tier"]) & (rows["prompt_variant"] == best["prompt_variant"])]
    one = single[single["k"] == single["k"].min()]
    if len(one) and int(one.iloc[0]["k"]) != int(best["k"]):
        changes.append(
            f"with a single sample the same judge gives {estimate(one.iloc[0], 'accuracy', 'accuracy', '.2%')}"
        )
    support = pd.DataFrame([best, second, cheap, *([one.iloc[0]] if len(one) else [])]).drop_duplicates(
        subset=list(KEYS)
    )
    return Recommendation(
        use=_name(best),
        expected=_expected(best),
        runner_up=f"{_name(second)}: {estimate(second, 'accuracy', 'accuracy', '.2%')}"
        + (" (intervals overlap)" if overlap(best, second, "accuracy") else " (intervals separate)"),
        changes=changes,
        interval=interval_note(config.ci_level, bootstrap_over="examples", resamples=config.replicates),
        support=support,
        keys=KEYS,
        metrics=("accuracy", "cost_per_example"),
    )
