"""Dense in-memory panels: the item x judge vote matrix a study's replicates work on.

A :class:`Panel` is what Ray ships to every replicate task (put in the object store once): int8 votes with
codes 1 = A (class 1), 0 = B (class 0), -1 = missing, binary labels, per-item group keys for splits, and the
item metadata a study may need. It is built from an ingested dataset with one read by the io reader, coded by the
vote codec (:mod:`judgecal_dist.engine.votes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.engine.votes.codec import (
    VERDICT_COLUMNS,
    CodedRows,
    ItemVotes,
    binary_codes,
    category_codes,
    encode,
)
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import choose_dataset, read_dataset_batches, read_dataset_table
from judgecal_dist.io.schema import MISSING_CODE, VERDICT_CODES
from judgecal_dist.io.validate import check_unique_keys
from judgecal_dist.splits import group_keys

__all__ = ["Panel", "load_panel", "load_panel_and_votes", "ORIENTATIONS"]

#: Label orientations of spec 000 §3.0: ``natural`` (default), ``randomized`` (seeded A/B swap per item) and
#: ``gold_positive`` (paper-compatible: Y = 1 always, a vote is 1 when it picks the gold side; reports using it
#: must warn that unpenalised intercept fits have no finite optimum).
ORIENTATIONS = ("natural", "randomized", "gold_positive")


@dataclass(frozen=True)
class Panel:
    """A labelled binary panel in dense form.

    Attributes
    ----------
    dataset : str
    item_ids : ndarray of str, shape (n_items,)
    group_keys : ndarray of int64, shape (n_items,)
        ``xxhash64(group_id)``; split membership is a function of these and the replicate seed.
    judge_ids : ndarray of str, shape (n_judges,)
    votes : ndarray of int8, shape (n_items, n_judges)
        1 = A, 0 = B, -1 = missing (ties are missing, spec 000 §3.0).
    labels : ndarray of int8, shape (n_items,)
        1 = A better, 0 = B better.
    families : ndarray of str, shape (n_judges,)
        Judge family (from the ``judges`` table; the judge id itself when absent).
    info : dict
        Provenance counts (items dropped for null/tie labels, tie verdicts mapped to missing, ...).
    """

    dataset: str
    item_ids: npt.NDArray[np.str_]
    group_keys: npt.NDArray[np.int64]
    judge_ids: npt.NDArray[np.str_]
    votes: npt.NDArray[np.int8]
    labels: npt.NDArray[np.int8]
    families: npt.NDArray[np.str_]
    info: dict = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return int(self.votes.shape[0])

    @property
    def n_judges(self) -> int:
        return int(self.votes.shape[1])


def load_panel(
    url: str,
    *,
    sample: int = 0,
    orientation: str = "natural",
    orientation_seed: int = 0,
    dataset: str | None = None,
    storage_options: dict | None = None,
    scan: bool = False,
) -> Panel:
    """Build the dense binary panel of an ingested dataset.

    Items come from the labels table with label A or B (null and ``tie`` labels are dropped and counted);
    verdicts of ``sample`` only (spec 000 §3.0 default); ``tie`` verdicts and absent (item, judge) pairs are
    missing. ``orientation="randomized"`` swaps A and B in the label and every verdict of an item chosen by a
    seeded coin (for data whose native order correlates with the label); ``"gold_positive"`` re-encodes every
    item so that its label is 1 and a vote is 1 exactly when it picks the gold side (spec 000 §3.0, used only to
    reproduce the paper's numbers). ``scan``: the verdicts streamed batch by batch, only the labelled items' rows
    kept (:func:`_labelled_rows`; the same panel without holding the table, for tables beyond memory).

    Raises
    ------
    InputError
        Several datasets in the table and none chosen, an item labelled twice, no labelled items, or no verdicts
        for ``sample``.
    """
    return _load(url, sample, orientation, orientation_seed, dataset, storage_options, scan)[0]


def load_panel_and_votes(
    url: str, *, sample: int = 0, dataset: str | None = None, storage_options: dict | None = None
) -> tuple[Panel, ItemVotes, bool]:
    """:func:`load_panel` (natural orientation) and, from the same read, the dense votes of every item of its
    dataset with a verdict at ``sample`` (the vote codec's :class:`ItemVotes`, judges in the panel's order): what a
    fit that also uses the unlabelled items (Dawid-Skene) needs, without reading and coding the table twice.
    The flag says whether those votes' coded rows (``ItemVotes.rows``) are every row of the table (one dataset,
    one sample), so that counts over them are counts over the table.

    Raises
    ------
    InputError
        As :func:`load_panel`, and a verdict outside the alphabet.
    """
    panel, rows, labels, whole = _load(url, sample, "natural", 0, dataset, storage_options)
    rows.reject_unknown()
    return panel, ItemVotes.from_rows(rows, labels, len(panel.judge_ids)), whole


def _load(
    url: str,
    sample: int,
    orientation: str,
    orientation_seed: int,
    dataset: str | None,
    storage_options: Any,
    scan: bool = False,
) -> tuple[Panel, CodedRows, pa.Table, bool]:
    """The panel, the coded rows of its dataset at ``sample``, the labels table, and whether the coded rows are
    every row of the table (never with ``scan``), from one read."""
    if orientation not in ORIENTATIONS:
        raise InputError(f"orientation: must be one of {ORIENTATIONS}, got {orientation!r}")
    labels = read_dataset_table(url, "labels", ["dataset", "item_id", "label"], storage_options=storage_options)
    try:  # an item labelled twice (same or another value) has no one label: refused for every study and candidate
        check_unique_keys(labels, ["dataset", "item_id"], source=f"{url.rstrip('/')}/labels")
    except InputError as err:
        raise InputError(f"{err}; an item has one label: keep one row per item and ingest the labels again") from err
    dataset = choose_dataset(pc.unique(labels["dataset"]).to_pylist(), dataset, where=url)

    item_index, y, info = _labelled_items(labels.filter(pc.equal(labels["dataset"], dataset)), url, dataset)

    whole = False
    if scan:
        rows, judges, counts = _labelled_rows(url, item_index, sample, dataset, storage_options)
    else:  # the codec's items are every item with a verdict at `sample`; judges every judge there, sorted
        table = _verdicts(url, storage_options, whole=True)[0]
        rows = encode(table, None, sample=sample, dataset=dataset)
        whole = len(rows.item) == table.num_rows
        del table
        judges = rows.judges_seen
        counts = ((rows.code == VERDICT_CODES["tie"]).sum(), (rows.code == MISSING_CODE).sum(), len(rows.item))
    if not counts[2]:
        raise InputError(f"{url}: verdicts: sample: no verdicts for dataset {dataset!r} with sample={sample}")
    judge_ids = np.array(judges, dtype=object)
    info["tie_verdicts_as_missing"], info["null_verdicts"] = int(counts[0]), int(counts[1])
    # verdicts on unlabelled items are not part of a labelled panel; labelled items without verdicts vote nothing
    ids = pa.array(item_index.to_numpy(dtype=object), pa.string())
    where = pc.fill_null(pc.index_in(ids, value_set=rows.keys["item_id"].cast(pa.string()).combine_chunks()), -1)
    where = np.asarray(where.to_numpy(zero_copy_only=False), dtype=np.int64)
    found = where >= 0
    votes = np.full((len(item_index), len(judge_ids)), MISSING_CODE, dtype=np.int8)
    votes[found] = rows.dense(len(judge_ids), binary=True)[where[found]]
    groups = item_index.to_numpy(dtype=object).copy()
    groups[found] = rows.keys["group_id"].to_numpy(zero_copy_only=False)[where[found]]

    votes, y = _oriented(votes, y, orientation, orientation_seed, info)
    panel = Panel(
        dataset=dataset,
        item_ids=item_index.to_numpy(dtype=object),
        group_keys=group_keys(groups.astype(str)),
        judge_ids=judge_ids,
        votes=votes,
        labels=y,
        families=_families(url, judge_ids, storage_options),
        info=info | {"orientation": orientation, "sample": sample},
    )
    return panel, rows, labels, whole


def _verdicts(url: str, storage_options: Any, *, whole: bool) -> list[pa.Table] | Any:
    """The verdict table's coded columns, whole (a list of one table) or as a stream of batches."""
    batches = read_dataset_batches(
        url,
        "verdicts",
        VERDICT_COLUMNS,
        storage_options=storage_options,
        dictionary_columns=["dataset", "judge_id", "verdict"] + (["item_id", "group_id"] if whole else []),
        whole=whole,
    )
    return list(batches) if whole else batches


def _labelled_rows(
    url: str, items: pd.Index, sample: int, dataset: str, storage_options: Any
) -> tuple[CodedRows, list[str], tuple[int, int, int]]:
    """The coded rows of the labelled ``items`` at ``sample``, streamed: each batch's other rows are dropped once
    counted, so only the labelled rows are held. Also every judge with a verdict at ``sample`` (sorted) and the
    (tie, null, all) verdict row counts of the whole dataset there, as the in-memory read takes them."""
    ids = pa.array(items.to_numpy(dtype=object), pa.string())
    kept: list[pa.Table] = []
    judges: set[str] = set()
    ties, nulls, seen = 0, 0, 0
    for batch in _verdicts(url, storage_options, whole=False):
        where = pc.and_(pc.equal(batch["sample"], sample), pc.equal(batch["dataset"].cast(pa.string()), dataset))
        batch = batch.filter(where)
        seen += batch.num_rows
        judges.update(j for j in pc.unique(batch["judge_id"]).cast(pa.string()).to_pylist() if j is not None)
        codes = category_codes(batch["verdict"])
        ties, nulls = ties + int((codes == VERDICT_CODES["tie"]).sum()), nulls + int((codes == MISSING_CODE).sum())
        kept.append(batch.filter(pc.is_in(batch["item_id"].cast(pa.string()), value_set=ids)))
    order = sorted(judges)
    table = pa.concat_tables(kept) if kept else _verdicts(url, storage_options, whole=True)[0].slice(0, 0)
    return encode(table, order, sample=sample, dataset=dataset), order, (ties, nulls, seen)


def _labelled_items(lab: pa.Table, url: str, dataset: str) -> tuple[pd.Index, npt.NDArray[np.int8], dict[str, Any]]:
    """The items of ``dataset`` labelled A or B (sorted by id), their binary labels and the label counts."""
    codes = binary_codes(category_codes(lab["label"]))  # A and B; null and tie labels are dropped
    keep = codes != MISSING_CODE
    info: dict[str, Any] = {"items_labelled": int(keep.sum()), "items_dropped_null_or_tie_label": int((~keep).sum())}
    if not keep.any():
        raise InputError(f"{url}: labels: label: no item of dataset {dataset!r} has label A or B")
    labelled = lab["item_id"].to_numpy(zero_copy_only=False)[keep]
    order = np.argsort(labelled, kind="stable")
    return pd.Index(labelled[order]), codes[keep][order], info


def _oriented(
    votes: npt.NDArray[np.int8], y: npt.NDArray[np.int8], orientation: str, seed: int, info: dict[str, Any]
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]]:
    """Votes and labels in ``orientation`` (natural as read; randomized: a seeded half of the items' A and B
    swapped; gold_positive: a vote is 1 when it agrees with the label, every label 1)."""
    if orientation == "randomized":
        flip = np.random.default_rng(seed).random(len(y)) < 0.5
        y = np.where(flip, 1 - y, y).astype(np.int8)
        votes = np.where(flip[:, None] & (votes >= 0), 1 - votes, votes).astype(np.int8)
        info["orientation_flipped_items"] = int(flip.sum())
    elif orientation == "gold_positive":
        votes = np.where(votes >= 0, (votes == y[:, None]).astype(np.int8), votes).astype(np.int8)
        y = np.ones_like(y)
    return votes, y


def _families(url: str, judge_ids: npt.NDArray[np.str_], storage_options: Any) -> npt.NDArray[np.str_]:
    """Each judge's family from the ``judges`` table (its own id when the table or the family is absent)."""
    try:
        judges = read_dataset_table(url, "judges", columns=["judge_id", "family"], storage_options=storage_options)
    except InputError:
        return judge_ids.copy()
    if not judges.num_rows:
        return judge_ids.copy()
    fam = judges.to_pandas().set_index("judge_id")["family"]
    return np.array([fam.get(j) or j for j in judge_ids], dtype=object)
