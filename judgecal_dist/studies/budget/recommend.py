"""The budget study's answer: the pipeline the one rule chooses with all labels, and below which label count to
switch (:func:`~judgecal_dist.studies.recommendation.choose` at every budget)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import (
    Recommendation,
    choose,
    compare_words,
    estimate,
    overlap,
    pipeline_words,
    rule_words,
    runner_up_words,
)

__all__ = ["recommend"]

ARM = ["aggregator", "panel", "calibrator"]


def _at(row: pd.Series, x: str) -> str:
    return f"{row[x]:g} labels" if x == "budget" else f"{row[x]:.0%}"


def recommend(
    config: Any, summary: pd.DataFrame, *, x: str = "budget", others: Sequence[Mapping[str, Any]] = ()
) -> Recommendation:
    """The rule's pipeline at the largest ``x`` (labels or calibration fraction), and the ``x`` below which the rule
    picks another.

    The switch point is the smallest ``x`` from which the large-``x`` choice stays the rule's choice at every
    larger ``x``; below it the report names the choice at the next smaller ``x``.
    """
    order = "budget_index" if x == "budget" else "fraction"
    rule = getattr(config, "rule", "one_se")
    steps = sorted(summary[order].unique())
    picks = {s: choose(summary[summary[order] == s], rule, level=config.ci_level) for s in steps}
    last = picks[steps[-1]]
    best = last.chosen
    arm = tuple(best[ARM])
    unit = "labels" if x == "budget" else "of the labelled items for calibration"
    what = f"{best[x]:g} {unit}" if x == "budget" else f"{best[x]:.0%} {unit}"
    support = [best, last.runner_up]
    held = len(steps) - 1
    while held > 0 and tuple(picks[steps[held - 1]].chosen[ARM]) == arm:
        held -= 1
    changes = []
    if held > 0:
        below = picks[steps[held - 1]].chosen
        same = summary[(summary[order] == steps[held - 1])]
        same = same[(same[ARM] == pd.Series(arm, index=ARM)).all(axis=1)]
        at = _at(picks[steps[held]].chosen, x).split(" ")[0]
        verdict = (
            "intervals overlap: the difference is not clear"
            if len(same) and overlap(below, same.iloc[0], "nll")
            else "intervals separate"
        )
        changes.append(
            f"with fewer than {at} {'labels' if x == 'budget' else 'for calibration'} use {pipeline_words(below)}: "
            f"at {_at(below, x)}, {estimate(below, 'nll', 'NLL')} against "
            f"{estimate(same.iloc[0], 'nll', '') if len(same) else 'no fit (too few labels)'} for the "
            f"recommendation ({verdict})"
        )
        support += [below] + ([same.iloc[0]] if len(same) else [])
    else:
        first = _at(picks[steps[0]].chosen, x)
        changes.append(f"it does not change over the range tried (down to {first})")
    swept = ", ".join(sorted(set(summary["aggregator"])))
    changes.append(
        f"pipelines swept: aggregators {swept} on all judges with every calibrator, and one_coin on the "
        f"top-k' panel; add another aggregator (`--set aggregators=[...]`) to check its label needs"
    )
    keys = ("aggregator", "panel", "calibrator", x)
    return Recommendation(
        use=f"{pipeline_words(best)} (with {what})",
        expected=", ".join(
            estimate(best, m, lab) for m, lab in (("nll", "NLL"), ("ece", "ECE"), ("accuracy", "accuracy"))
        ),
        runner_up=runner_up_words(last),
        changes=changes,
        interval=interval_note(config.ci_level),
        support=pd.DataFrame(support).drop_duplicates(subset=list(keys)),
        keys=keys,
        metrics=("nll", "ece", "accuracy"),
        rule=rule_words(last, rule),
        others=compare_words(last.record(), "budget", others),
        choice=last.record(),
    )
