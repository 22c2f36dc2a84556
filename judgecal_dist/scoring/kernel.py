"""The item-level scoring kernel that both engines call, kept apart from the summaries and the figure.

Spark's Python workers import the module of a ``mapInArrow`` function before its first batch, so this module
imports only numpy, pyarrow and the rebuilt estimators: the summaries (matplotlib, ``scipy.stats``) would add
seconds of imports per worker (measured with ``python -X importtime``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from judgecal_dist.engine.item_votes import block_columns, votes_from_blocks
from judgecal_dist.scoring.artifact import Calibration

__all__ = ["set_column", "items_ddl", "score_batch", "score_partition"]


def set_column(alpha: float) -> str:
    """Name of the conformal-set column of level ``alpha``: ``set_alpha_0_1`` for 0.1."""
    return "set_alpha_" + f"{alpha:g}".replace(".", "_").replace("-", "m")


def items_ddl(model: Calibration) -> str:
    """The declared schema of the scored item rows."""
    sets = ", ".join(f"{set_column(a)} array<string>" for a in model.alphas)
    base = "dataset string, item_id string, group_id string, label string, n_votes int, score double, p double, "
    return base + "verdict string" + (f", {sets}" if sets else "")


def _label_strings(codes: np.ndarray) -> pa.Array:
    strings = np.where(codes == 1, "A", "B").astype(object)
    strings[codes < 0] = None  # no label
    return pa.array(strings, pa.string())


def _set_lists(sets: np.ndarray) -> pa.Array:
    """Boolean sets (n, 2) with columns [B, A] as ``list<string>``, A listed first."""
    members = sets[:, ::-1]
    offsets = np.concatenate([[0], np.cumsum(members.sum(axis=1))]).astype(np.int32)
    values = np.array(["A", "B"], dtype=object)[np.nonzero(members)[1]]
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, pa.string()))


def score_batch(model: Calibration, keys: dict[str, pa.Array], votes: np.ndarray, labels: np.ndarray) -> pa.RecordBatch:
    """Scored rows of one batch of items (the kernel both engines call)."""
    out = model.score(votes)
    verdict = pa.array(np.where(out["p"] > 0.5, "A", "B"), pa.string())
    columns = [keys["dataset"], keys["item_id"], keys["group_id"], _label_strings(labels), pa.array(out["n_votes"]),
               pa.array(out["score"]), pa.array(out["p"]), verdict] + [_set_lists(s) for s in out["sets"]]  # fmt: skip
    names = ["dataset", "item_id", "group_id", "label", "n_votes", "score", "p", "verdict"]
    return pa.RecordBatch.from_arrays(columns, names=names + [set_column(a) for a in model.alphas])


def score_partition(batches: Iterator[pa.RecordBatch], model: Calibration) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: packed item votes (``item_votes_spark`` rows) in, scored rows out."""
    n_judges = len(model.judge_ids)
    for batch in batches:
        if batch.num_rows:
            votes = votes_from_blocks([batch.column(c) for c in block_columns(n_judges)], n_judges)
            labels = batch.column("label").to_numpy(zero_copy_only=False)
            keys = {k: batch.column(k) for k in ("dataset", "item_id", "group_id")}
            yield score_batch(model, keys, votes, labels)
