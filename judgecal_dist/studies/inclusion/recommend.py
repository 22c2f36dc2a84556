"""The inclusion study's answer: the pipeline the one rule chooses (:func:`~judgecal_dist.studies.recommendation.
choose`), what it gives, the label-free fallback and what curating would cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import (
    Choice,
    Recommendation,
    choose,
    compare_words,
    estimate,
    pipeline_words,
    rule_words,
    runner_up_words,
)

__all__ = ["recommend", "choice"]

KEYS = ("aggregator", "calibrator", "panel")
#: Aggregators that need no labels (majority vote; Dawid-Skene is fitted on the verdicts alone).
LABEL_FREE = ("majority", "dawid_skene")


def choice(config: Any, summary: pd.DataFrame) -> Choice:
    """The rule's pick from the summary grid (the pipeline ``export: auto`` exports, too)."""
    return choose(summary, getattr(config, "rule", "one_se"), level=config.ci_level, judges="panel_size")


def _expected(row: pd.Series) -> str:
    return ", ".join(estimate(row, m, label) for m, label in (("nll", "NLL"), ("ece", "ECE"), ("accuracy", "accuracy")))


def recommend(
    config: Any,
    summary: pd.DataFrame,
    n_judges: int | None = None,
    n_items: int | None = None,
    others: Sequence[Mapping[str, Any]] = (),
) -> Recommendation:
    """The rule's pipeline, the runner-up, the raw (label-free) fallback and the curated panels' cost.

    ``n_judges``/``n_items`` (when known) name the panel size and the calibration labels the answer rests on; the
    ``inclusion_scale`` study, whose one-pass execution never holds the panel, leaves them out. ``others`` are the
    other studies' choices (``compare``).
    """
    picked = choice(config, summary)
    best = picked.chosen
    support = [best, picked.runner_up]
    changes = []
    # Without labels only the unsupervised aggregators can run (one-coin counts and stacking fits need labels).
    free = summary[summary["aggregator"].isin(LABEL_FREE) & (summary["calibrator"] == "none")]
    free = free[free["panel"] == "all"] if (free["panel"] == "all").any() else free
    if len(free):
        fallback = free.sort_values("nll", kind="stable").iloc[0]
        changes.append(
            f"without labels, use {fallback['aggregator']} uncalibrated on "
            f"{pipeline_words(fallback, n_judges).split(' on ', 1)[1]}: {estimate(fallback, 'nll', 'NLL')}"
        )
        support.append(fallback)
    labels = f"about {round(config.calib_fraction * n_items)}" if n_items else f"{config.calib_fraction:.0%} of the"
    changes.append(
        f"this answer uses {labels} labelled items for calibration; with fewer, the budget study "
        "(`judgecal run budget`, whose `aggregators` sweep this pipeline's aggregator) shows where its calibration "
        "and the full panel stop paying off"
    )
    curated = summary[
        (summary["panel"] != "all")
        & (summary["aggregator"] == best["aggregator"])
        & (summary["calibrator"] == best["calibrator"])
    ]
    if best["panel"] == "all" and "delta_nll" in curated and len(curated):
        changes.append(
            "curating instead changes NLL by "
            + "; ".join(f"{r.panel} {estimate(r._asdict(), 'delta_nll', '', '+.4f')}" for r in curated.itertuples())
            + " (above 0: keeping all judges is better)"
        )
        support += [r for _, r in curated.iterrows()]
    rows = pd.DataFrame(support).drop_duplicates(subset=list(KEYS))
    rule = getattr(config, "rule", "one_se")
    return Recommendation(
        use=pipeline_words(best, n_judges),
        expected=_expected(best),
        runner_up=runner_up_words(picked, n_judges),
        changes=changes,
        interval=interval_note(config.ci_level),
        support=rows,
        keys=KEYS,
        metrics=("nll", "ece", "accuracy", "delta_nll"),
        rule=rule_words(picked, rule, n_judges),
        others=compare_words(picked.record(), "inclusion", others),
        choice=picked.record(),
    )
