"""The model an itc run exports: a Davidson variant fitted per judge on every labelled item at the largest budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from judgecal_dist.methods.repeated.davidson import DavidsonAggregator
from judgecal_dist.models.davidson import DavidsonModel, davidson_from_estimators
from judgecal_dist.studies.itc.config import DAVIDSON_METHODS

if TYPE_CHECKING:
    from judgecal_dist.studies.itc.config import Config
    from judgecal_dist.studies.itc.data import ItcInput

__all__ = ["export_model", "exported_method"]


def exported_method(config: Config, summary: pd.DataFrame) -> str:
    """The Davidson variant the run exports: ``export`` when set, else the lowest mean MAE at the largest budget
    among the variants the run compared (``davidson`` when it compared none)."""
    if config.export != "auto":
        return str(config.export)
    hi = summary[(summary["n"] == summary["n"].max()) & summary["method"].isin(list(DAVIDSON_METHODS))]
    return str(hi.groupby("method")["mae"].mean().idxmin()) if len(hi) else "davidson"


def export_model(config: Config, data: ItcInput, method: str) -> DavidsonModel:
    """The Davidson variant ``method`` fitted per judge on every labelled item at the largest budget (the items
    of every dataset of that judge pooled), as a ``judgecal.davidson/v2`` model."""
    from judgecal_dist.studies.itc.data import PAIRS_SOURCE

    tie, decision = DAVIDSON_METHODS[method]
    n = max(max(task.budgets) for task in data.tasks)
    counts: dict[str, list[np.ndarray]] = {}
    labels: dict[str, list[np.ndarray]] = {}
    for task in data.tasks:
        b = list(task.budgets).index(max(task.budgets))
        counts.setdefault(task.judge_id, []).append(task.counts[b])
        labels.setdefault(task.judge_id, []).append(task.labels)
    fits = {
        judge: DavidsonAggregator(tie=tie, decision=decision, n_starts=config.n_starts, random_state=config.seed).fit(
            np.concatenate(counts[judge]), np.concatenate(labels[judge])
        )
        for judge in sorted(counts)
    }
    datasets = sorted({task.dataset for task in data.tasks})
    return davidson_from_estimators(
        fits,
        n=n,
        method=method,
        pool_orders=config.pool_orders,
        votes="score-pairs" if data.source == PAIRS_SOURCE else "verdicts",
        orientation_seed=config.orientation_seed,
        items={j: int(sum(len(y) for y in labels[j])) for j in fits},
        fitted_on={"dataset": datasets[0] if len(datasets) == 1 else None, "study": "itc"},
    )
