r"""Dawid-Skene's sufficient statistics from one Spark job: every item's vote pattern and label state, counted.

With binary votes, items sharing a vote pattern and a label state are one cell of the EM
(:mod:`judgecal_dist.methods.aggregation.cells`): at most :math:`3^J` patterns, a few thousand in practice. One
job codes the items (the vote codec's packed rows, :func:`judgecal_dist.engine.jobs.ds_spark.packed_votes`),
turns each into a base-3 pattern and counts the unlabelled ones per pattern inside each task; labelled items come
back one row each with their id, so the driver can leave any fold's labels latent. EM then runs on the driver
(:meth:`~judgecal_dist.methods.aggregation.dawid_skene.DawidSkene.fit_cells`) for every fold and the export.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from pyspark.sql import SparkSession

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.ds_spark import packed_votes
from judgecal_dist.engine.votes.codec import binary_codes, block_columns, unpack
from judgecal_dist.engine.votes.tally import TALLY_COLUMNS, judge_tallies
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import count_rows
from judgecal_dist.io.schema import MISSING_CODE
from judgecal_dist.methods.aggregation.dawid_skene import UNLABELLED

__all__ = ["SparkCells", "vote_cells_spark"]


_CELL_DDL = "pattern long, label byte, n long, item_id string"
_TALLIES = len(TALLY_COLUMNS) + 1  # the judge counts and the items a task saw


def _cell_partition(batches: Iterator[pa.RecordBatch], *, n_judges: int) -> Iterator[pa.RecordBatch]:
    """One partition's items as base-3 vote patterns: unlabelled items counted per pattern (combined here, before
    anything leaves the task), labelled items one row each with their id (a fold decides which are latent).

    The items arrive with ties kept (verdict codes), so the task also counts each judge's verdicts for the run
    history (:func:`~judgecal_dist.engine.votes.tally.judge_tallies`): rows with a negative pattern, ``-(1 +
    judge * 8 + k)`` for the k-th count (k = 7: the items, on judge 0's row), so the fit needs no second job."""
    powers = 3 ** np.arange(n_judges, dtype=np.int64)
    unlabelled = []
    tallies = np.zeros((n_judges, _TALLIES), dtype=np.int64)
    for batch in batches:
        if not batch.num_rows:
            continue
        codes = unpack([batch.column(c) for c in block_columns(n_judges)], n_judges, binary=False)
        raw_label = batch.column("label").to_numpy(zero_copy_only=False).astype(np.int8)
        counted = judge_tallies(codes, raw_label)
        tallies[:, : len(TALLY_COLUMNS)] += np.column_stack([counted[c] for c in TALLY_COLUMNS])
        tallies[0, _TALLIES - 1] += batch.num_rows
        code = (binary_codes(codes).astype(np.int64) + 1) @ powers
        label = np.where(binary_codes(raw_label) == MISSING_CODE, UNLABELLED, raw_label).astype(np.int8)
        known = label != UNLABELLED
        unlabelled.append(code[~known])
        if known.any():
            ids = batch.column("item_id").filter(pa.array(known))
            ones = np.ones(int(known.sum()), dtype=np.int64)
            yield pa.RecordBatch.from_arrays(
                [pa.array(code[known]), pa.array(label[known]), pa.array(ones), ids.cast(pa.string())],
                names=["pattern", "label", "n", "item_id"],
            )
    slot = np.flatnonzero(tallies.ravel())
    if len(slot):
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(-(1 + slot)),
                pa.array(np.zeros(len(slot), dtype=np.int8)),
                pa.array(tallies.ravel()[slot]),
                pa.nulls(len(slot), pa.string()),
            ],
            names=["pattern", "label", "n", "item_id"],
        )
    if unlabelled:
        pattern, n = np.unique(np.concatenate(unlabelled), return_counts=True)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(pattern),
                pa.array(np.full(len(pattern), UNLABELLED, dtype=np.int8)),
                pa.array(n.astype(np.int64)),
                pa.nulls(len(pattern), pa.string()),
            ],
            names=["pattern", "label", "n", "item_id"],
        )


@dataclass(frozen=True)
class SparkCells:
    """The vote-pattern cells of a table, counted by one Spark job (:func:`vote_cells_spark`).

    Attributes
    ----------
    votes : ndarray of shape (n_rows, n_judges)
        Each row's vote pattern (codes -1, 0, 1).
    labels : ndarray of shape (n_rows,)
        0, 1, or -1: the unlabelled items' rows (one per pattern).
    counts : ndarray of shape (n_rows,)
        Items per row (1 for a labelled item).
    item_ids : list
        The item id of each labelled row, None for the others.
    judge_ids : list of str
    judge_counts : dict or None
        The run history's per-judge counts of the table (``rows``, :data:`TALLY_COLUMNS`, ``items``: arrays in
        ``judge_ids`` order; ``panel_items``: the item count), when the job coded every row of the table (one
        dataset, one sample); None otherwise.
    """

    votes: npt.NDArray[np.int8]
    labels: npt.NDArray[np.int8]
    counts: npt.NDArray[np.float64]
    item_ids: list[str | None]
    judge_ids: list[str]
    judge_counts: dict[str, Any] | None = None


def vote_cells_spark(
    source: str | SparkSession,
    *,
    engine: EngineConfig | None = None,
    sample: int = 0,
    judge_ids: list[str] | None = None,
    dataset: str | None = None,
) -> SparkCells:
    """Every item's vote pattern (base 3 in a long, as :func:`~judgecal_dist.methods.aggregation.cells.vote_cells`
    keys it) and label state, counted in one Spark job; only cells and labelled items reach the driver.

    Dawid-Skene's EM then runs on the driver over the cells, for any set of latent labels (a cross-fitting's
    folds), without touching the rows again. At most 39 judges (the pattern's digits in a long).

    Raises
    ------
    InputError
        No verdicts at ``sample``, more than 39 judges, a category outside the alphabet.
    """
    config = engine or EngineConfig()
    votes, judges, tally = packed_votes(source, config, sample, judge_ids, dataset, (), binary=False)
    J = len(judges)
    if J > 39:
        raise InputError(f"{source}: verdicts: judge_id: {J} judges; vote patterns in a long hold at most 39")
    kernel = functools.partial(_cell_partition, n_judges=J)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="toPandas attempted Arrow optimization", category=UserWarning)
        rows: pd.DataFrame = (
            votes.select("item_id", "label", *block_columns(J)).mapInArrow(kernel, _CELL_DDL).toPandas()
        )
    if tally.value.bad_rows:
        raise InputError(
            f"{source}: verdicts: verdict: {tally.value.bad_rows} rows with a category outside the alphabet "
            f"(e.g. {sorted(tally.value.bad_examples)})"
        )
    if rows.empty:
        raise InputError(f"{source}: verdicts: no items with sample={sample}")
    whole = isinstance(source, str) and tally.value.rows == count_rows(source, storage_options=config.storage_options)
    return _merged(rows, judges, tally.value.nulls if whole else None)


def _merged(rows: pd.DataFrame, judges: list[str], nulls: dict[str, int] | None) -> SparkCells:
    """The tasks' rows with the unlabelled counts summed per pattern (each task counted its own), decoded; with
    ``nulls`` (every row was coded), the tasks' per-judge counts summed into the run history's."""
    tallied = rows["pattern"].to_numpy() < 0
    sums = np.bincount(-1 - rows["pattern"].to_numpy()[tallied], rows["n"].to_numpy()[tallied], len(judges) * _TALLIES)
    rows = rows[~tallied]
    label, pattern, n = (rows[c].to_numpy() for c in ("label", "pattern", "n"))
    latent = label == UNLABELLED
    merged, where = np.unique(pattern[latent], return_inverse=True)
    digits = (np.r_[merged, pattern[~latent]][:, None] // 3 ** np.arange(len(judges), dtype=np.int64)) % 3 - 1
    item_ids: list[str | None] = [None] * len(merged)
    return SparkCells(
        votes=digits.astype(np.int8),
        labels=np.r_[np.full(len(merged), UNLABELLED), label[~latent]].astype(np.int8),
        counts=np.r_[np.bincount(where, weights=n[latent]), np.ones(int((~latent).sum()))],
        item_ids=item_ids + [str(i) for i in rows["item_id"].to_numpy()[~latent]],
        judge_ids=judges,
        judge_counts=None if nulls is None else _history_counts(sums.reshape(len(judges), _TALLIES), judges, nulls),
    )


def _history_counts(sums: npt.NDArray[Any], judges: list[str], nulls: dict[str, int]) -> dict[str, Any]:
    counts = {name: sums[:, k].astype(np.int64) for k, name in enumerate(TALLY_COLUMNS)}
    null_rows = np.array([nulls.get(j, 0) for j in judges], dtype=np.int64)
    return {"rows": counts["parsed"] + null_rows, **counts, "items": counts["parsed"], "panel_items": int(sums[0, -1])}
