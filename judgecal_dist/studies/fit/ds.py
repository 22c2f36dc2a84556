"""``judgecal fit``'s Dawid-Skene fits: the table's votes scanned and coded once per fit, every fold and the export
fitted from them.

In memory (the table fits the engine's memory budget), the verdicts are read and coded once, with the labelled
panel (:func:`~judgecal_dist.engine.jobs.panel.load_panel_and_votes`); on Spark one job counts every item's vote
pattern and label state (:func:`~judgecal_dist.engine.jobs.ds_cells.vote_cells_spark`), and only the cells and
the labelled items reach the driver. Either way each panel's vote patterns are keyed once
(:class:`~judgecal_dist.engine.jobs.dawid_skene.VotePatterns`), and a fold only sets its held-out items' labels
to "none" before EM runs over the cells on the driver. Panels of more than 39 judges on Spark (patterns beyond a
long) fit each fold with :func:`~judgecal_dist.engine.jobs.dawid_skene.fit_dawid_skene` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.dawid_skene import VotePatterns, dawid_skene_model, fit_dawid_skene
from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.engine.votes.codec import ItemVotes
from judgecal_dist.io.schema import MISSING_CODE
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene

__all__ = ["TableVotes", "fit_fold"]


@dataclass
class TableVotes:
    """Every item of the table coded once, as rows of votes (an item each in memory, or cells counted on Spark),
    and the panel's labelled items among them.

    Attributes
    ----------
    votes : ndarray of shape (n_rows, n_judges)
        Columns in the panel's judge order; every item of the panel's dataset with a verdict row at the sample.
    labels : ndarray of shape (n_rows,)
        Label codes (-1: none).
    counts : ndarray of shape (n_rows,) or None
        Items per row (Spark's cells); None: one item per row.
    panel_row : ndarray of shape (n_labelled,)
        For each labelled row (``labelled``; one item each), its item's row in the panel (-1: not in the panel).
    labelled : ndarray of shape (n_labelled,)
    patterns : dict
        Each panel's :class:`VotePatterns` (key: its column positions), keyed on first use.
    judge_counts : dict or None
        The run history's per-judge counts the Spark job made on the way (every row coded); None in memory (the
        fit counts its coded rows itself) or when the job saw part of the table.
    """

    votes: npt.NDArray[np.int8]
    labels: npt.NDArray[np.int8]
    counts: npt.NDArray[np.float64] | None
    panel_row: npt.NDArray[np.intp]
    labelled: npt.NDArray[np.intp]
    patterns: dict[tuple[int, ...], VotePatterns] = field(default_factory=dict)
    judge_counts: dict[str, Any] | None = None

    @classmethod
    def of(cls, votes: ItemVotes, panel: Panel) -> TableVotes:
        """In memory: the items' votes read with the panel (:func:`~judgecal_dist.engine.jobs.panel.load_panel_and_votes`)."""
        labelled = np.flatnonzero(votes.labels != MISSING_CODE)
        ids = votes.keys.column("item_id").take(labelled).to_pylist()
        return cls._of(votes.votes, votes.labels, None, ids, labelled, panel)

    @classmethod
    def read(cls, url: str, panel: Panel, engine: EngineConfig, sample: int) -> TableVotes | None:
        """On Spark: the cells of one job; None where they cannot be keyed (more than 39 judges)."""
        judges = [str(j) for j in panel.judge_ids]
        if len(judges) > 39:
            return None
        from judgecal_dist.engine.jobs.ds_cells import vote_cells_spark

        cells = vote_cells_spark(url, engine=engine, sample=sample, judge_ids=judges, dataset=panel.dataset)
        labelled = np.flatnonzero(cells.labels != MISSING_CODE)
        ids = [cells.item_ids[i] for i in labelled]
        table = cls._of(cells.votes, cells.labels, cells.counts, ids, labelled, panel)
        table.judge_counts = cells.judge_counts
        return table

    @classmethod
    def _of(cls, votes: Any, labels: Any, counts: Any, ids: list[Any], labelled: Any, panel: Panel) -> TableVotes:
        panel_row = pd.Index(panel.item_ids.astype(str)).get_indexer([str(i) for i in ids])
        return cls(votes, labels, counts, panel_row, labelled)

    def latent(self, held: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """One flag per row of ``votes``: the labelled items whose panel row is ``held``."""
        out = np.zeros(len(self.labels), dtype=bool)
        in_panel = self.panel_row >= 0
        out[self.labelled[in_panel][held[self.panel_row[in_panel]]]] = True
        return out

    def fit(self, model: DawidSkene, cols: npt.NDArray[np.intp], held: npt.NDArray[np.bool_]) -> DawidSkene:
        """``model`` fitted over every item, the judges ``cols`` only, the labels of the panel rows ``held``
        latent."""
        key = tuple(int(c) for c in cols)
        if key not in self.patterns:
            self.patterns[key] = VotePatterns.of(self.votes, self.labels, cols, self.counts)
        return self.patterns[key].fit(model, self.latent(held))


def fit_fold(
    url: str,
    panel: Panel,
    settings: Any,
    engine: EngineConfig,
    ds_engine: str,
    sample: int,
    cols: npt.NDArray[np.intp],
    held: npt.NDArray[np.bool_],
    table: TableVotes | None,
) -> DawidSkene:
    """Semi-supervised Dawid-Skene over every item voted by the judges ``cols``, the labels of the panel rows
    ``held`` left out; its columns are ``cols`` in order. From ``table`` when the votes were coded once."""
    if table is not None:
        return table.fit(dawid_skene_model(n_iter=settings.ds_n_iter, eps=settings.eps), cols, held)
    fit = fit_dawid_skene(
        url,
        n_iter=settings.ds_n_iter,
        eps=settings.eps,
        engine=ds_engine,
        config=engine,
        sample=sample,
        judge_ids=[str(j) for j in panel.judge_ids[cols]],
        dataset=panel.dataset,
        latent_items=set(map(str, panel.item_ids[held])),
    )
    return fit.model
