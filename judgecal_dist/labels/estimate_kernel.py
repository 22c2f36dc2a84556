"""The one kernel of ``judgecal label estimate``: a batch of items in, each target's sums out (both engines).

A batch holds items as the vote codec packs them (keys, each model judge's binary vote, the label code), with the
group columns and the queue's inclusion probability when given. The panel's ``p`` comes from
:func:`judgecal_dist.scoring.kernel.score_batch` (the scoring path, no second way to score), the targets' outcomes
and proxies from :func:`judgecal_dist.methods.labels.targets.build_targets`, their sums from
:func:`~judgecal_dist.methods.labels.targets.target_moments`. In this process the kernel runs over chunks of the
table; on Spark inside ``mapInArrow`` over each partition (:func:`partition_moments`), the partials summed per target.

Which labels count:

- **uniform labels** (no queue): the labels of items the model was fitted on are left out (the proxy saw them);
- **labels drawn by** ``label select`` (a queue): a queued item's label enters with its inclusion probability; a
  label found in no queue (an earlier label, the model's calibration items) enters with probability 1: given those
  items, the queued rounds are the random part, and such an item's term is its outcome, whatever the proxy.

Counts ride along as rows ``count:<name>`` (in the ``n`` column), so the one pass also tallies the labels.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.engine.votes.codec import block_columns, unpack
from judgecal_dist.io.schema import VOTE_A, VOTE_B
from judgecal_dist.methods.labels.moments import LabelMoments
from judgecal_dist.methods.labels.targets import build_targets, target_moments
from judgecal_dist.scoring.artifact import Calibration
from judgecal_dist.scoring.kernel import score_batch

__all__ = ["COUNT", "PAIR", "SUMS_SCHEMA", "batch_moments", "group_values", "partition_moments", "rows_of"]

#: Prefix of the rows that carry counts (value in ``n``).
COUNT = "count:"
#: The derived group column of a model pair (``<model_a> vs <model_b>``), from the items' ``model_a``, ``model_b``.
PAIR = "pair"
SUMS_SCHEMA = pa.schema([("target", pa.string())] + [(name, pa.float64()) for name in LabelMoments.sum_names()])


def _floats(column: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.float64]:
    return np.asarray(pc.fill_null(column.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False))


def group_values(columns: Mapping[str, Any], by: Sequence[str]) -> dict[str, npt.NDArray[np.object_]]:
    """The group columns' values per item (``pair`` from ``model_a`` and ``model_b``; null where one is null)."""
    out: dict[str, npt.NDArray[np.object_]] = {}
    for name in by:
        if name == PAIR:
            a, b = (np.asarray(pa.array(columns[c]).to_pylist(), dtype=object) for c in ("model_a", "model_b"))
            known = np.array([x is not None and y is not None for x, y in zip(a, b, strict=True)], dtype=bool)
            pair = np.full(a.size, None, dtype=object)
            pair[known] = [f"{x} vs {y}" for x, y in zip(a[known], b[known], strict=True)]
            out[name] = pair
        else:
            out[name] = np.asarray(pa.array(columns[name]).cast(pa.string()).to_pylist(), dtype=object)
    return out


def batch_moments(
    model: Calibration,
    keys: Mapping[str, pa.Array],
    votes: npt.NDArray[np.int8],
    labels: npt.NDArray[np.int8],
    groups: Mapping[str, npt.NDArray[np.object_]],
    queued: npt.NDArray[np.float64] | None,
) -> tuple[dict[str, LabelMoments], dict[str, float]]:
    """Each target's sums over one batch of items, and the batch's label counts.

    ``queued``: each item's overall inclusion probability from the queues (NaN: in no queue); None without a queue.
    """
    scored = score_batch(model, dict(keys), votes, labels)
    p = _floats(scored.column("p"))
    fitted = np.asarray(pc.fill_null(scored.column("in_calibration"), False).to_numpy(zero_copy_only=False), bool)
    labelled = ((labels == VOTE_A) | (labels == VOTE_B)) & np.isfinite(p)
    y = np.where(labelled, (labels == VOTE_A).astype(np.float64), np.nan)
    counts = {"items": float(np.isfinite(p).sum()), "labelled": float(labelled.sum())}
    counts["labelled_in_calibration"] = float((labelled & fitted).sum())
    pi = None
    if queued is None:
        y[fitted] = np.nan
    else:
        in_queue = np.isfinite(queued)
        counts["labelled_in_queue"] = float((labelled & in_queue).sum())
        counts["queued_without_label"] = float((in_queue & ~labelled).sum())
        pi = np.where(labelled, np.where(in_queue, queued, 1.0), np.nan)
    targets = build_targets(p, y, votes, model.judge_ids, groups)
    return target_moments(targets, pi), counts


def rows_of(moments: Mapping[str, LabelMoments], counts: Mapping[str, float]) -> pa.RecordBatch:
    """The rows of :data:`SUMS_SCHEMA` of one batch's sums and counts."""
    names = LabelMoments.sum_names()
    targets = [*moments, *(COUNT + k for k in counts)]
    columns: list[pa.Array] = [pa.array(targets, pa.string())]
    for name in names:
        values = [getattr(m, name) for m in moments.values()]
        values += [counts[k] if name == "n" else 0.0 for k in counts]
        columns.append(pa.array(values, pa.float64()))
    return pa.RecordBatch.from_arrays(columns, schema=SUMS_SCHEMA)


def partition_moments(
    batches: Iterator[pa.RecordBatch], model: Calibration, by: Sequence[str], weighted: bool
) -> Iterator[pa.RecordBatch]:
    """Spark's ``mapInArrow`` kernel: packed item votes (plus group columns and ``inclusion_prob`` when
    ``weighted``) in, rows of :data:`SUMS_SCHEMA` out."""
    n_judges = len(model.judge_ids)
    for batch in batches:
        if batch.num_rows:
            votes = unpack([batch.column(c) for c in block_columns(n_judges)], n_judges)
            labels = np.asarray(batch.column("label").to_numpy(zero_copy_only=False), dtype=np.int8)
            keys = {k: batch.column(k) for k in ("dataset", "item_id", "group_id")}
            columns = {name: batch.column(name) for name in batch.schema.names}
            queued = _floats(batch.column("inclusion_prob")) if weighted else None
            moments, counts = batch_moments(model, keys, votes, labels, group_values(columns, by), queued)
            yield rows_of(moments, counts)
