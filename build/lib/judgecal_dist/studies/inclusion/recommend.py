"""The inclusion study's answer: the pipeline with the lowest evaluation NLL, and what curating would cost."""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import Recommendation, estimate, overlap

__all__ = ["recommend"]

KEYS = ("aggregator", "calibrator", "panel")
#: Aggregators that need no labels (majority vote; Dawid-Skene is fitted on the verdicts alone).
LABEL_FREE = ("majority", "dawid_skene")


def _panel(row: pd.Series, n_judges: int | None) -> str:
    if row["panel"] != "all":
        return f"the {row['panel']} panel"
    return f"all {n_judges} judges" if n_judges else "all judges"


def _name(row: pd.Series, n_judges: int | None) -> str:
    return f"{row['aggregator']} + {row['calibrator']} on {_panel(row, n_judges)}"


def _expected(row: pd.Series) -> str:
    return ", ".join(estimate(row, m, label) for m, label in (("nll", "NLL"), ("ece", "ECE"), ("accuracy", "accuracy")))


def recommend(
    config: Any, summary: pd.DataFrame, n_judges: int | None = None, n_items: int | None = None
) -> Recommendation:
    """The lowest-NLL pipeline, the runner-up, the raw (label-free) fallback and the curated panels' cost.

    ``n_judges``/``n_items`` (when known) name the panel size and the calibration labels the answer rests on; the
    ``inclusion_scale`` study, whose one-pass execution never holds the panel, leaves them out.
    """
    ranked = summary.sort_values("nll", kind="stable")
    best, second = ranked.iloc[0], ranked.iloc[1] if len(ranked) > 1 else ranked.iloc[0]
    tie = overlap(best, second, "nll")
    runner = f"{_name(second, n_judges)}: {estimate(second, 'nll', 'NLL')}" + (
        " (intervals overlap: interchangeable on this data)" if tie else " (intervals separate)"
    )
    support = [best, second]
    changes = []
    # Without labels only the unsupervised aggregators can run (one-coin counts and stacking fits need labels).
    free = summary[summary["aggregator"].isin(LABEL_FREE) & (summary["calibrator"] == "none")]
    free = free[free["panel"] == "all"] if (free["panel"] == "all").any() else free
    if len(free):
        fallback = free.sort_values("nll", kind="stable").iloc[0]
        changes.append(
            f"without labels, use {fallback['aggregator']} uncalibrated on {_panel(fallback, n_judges)}: "
            f"{estimate(fallback, 'nll', 'NLL')}"
        )
        support.append(fallback)
    labels = f"about {round(config.calib_fraction * n_items)}" if n_items else f"{config.calib_fraction:.0%} of the"
    changes.append(
        f"this answer uses {labels} labelled items for calibration; with fewer, run the budget study "
        "(`judgecal run budget`) to see where calibration and the full panel stop paying off"
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
    return Recommendation(
        use=_name(best, n_judges),
        expected=_expected(best),
        runner_up=runner,
        changes=changes,
        interval=interval_note(config.ci_level),
        support=rows,
        keys=KEYS,
        metrics=("nll", "ece", "accuracy", "delta_nll"),
    )
