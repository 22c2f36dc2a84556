"""Verdict tables derived from other data: response pairs of an rb2-k8 score dataset, pooled presentation orders.

One place for the itc study and for scoring a ``judgecal.davidson/v2`` model, so both read the same items,
orientations and labels:

- :func:`derived_pairs`: per example of an ingested rb2-k8 score dataset, the six unordered response pairs (three
  of the chosen response 0 against a rejected one, labelled A or B by a seeded orientation coin per
  (subset, id, a, b); three among rejected responses, labelled tie); the vote of sample m compares the two
  responses' m-th scores (A if higher, tie if equal, null if either is null).
- :func:`pool_orders`: one judge per ``<judge>/ab`` and ``<judge>/ba`` pair, the orders' samples interleaved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from judgecal_dist.errors import ConfigError
from judgecal_dist.io.dataset import dataset_tables, read_dataset_table
from judgecal_dist.io.score_collections import Collection, load_collections
from judgecal_dist.splits import group_keys, split_uniforms

__all__ = [
    "PAIRS",
    "ORDER_SUFFIXES",
    "rb2_pair_verdicts",
    "derived_pairs",
    "holds_pointwise_scores",
    "pool_orders",
]

#: The six unordered pairs of four responses: three (0, j) and three (j, k) (spec 003 §7.8 step 2).
PAIRS: tuple[tuple[int, int], ...] = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))


def _coin(keys: Sequence[str], seed: int) -> npt.NDArray[np.bool_]:
    """A fair coin per key, a pure function of (key, seed): the orientation of a pair (spec 003 §6.2)."""
    return split_uniforms(group_keys(keys), [seed])[0] < 0.5


def rb2_pair_verdicts(
    collections: Sequence[Collection], *, orientation_seed: int = 0
) -> tuple[pa.Table, pd.DataFrame, dict[str, int]]:
    """Pair verdicts (verdicts contract), their labels, and counts of skipped examples (spec 003 §7.8).

    Returns
    -------
    verdicts : pyarrow.Table
        ``dataset = rb2k8/<subset>``, ``item_id = <id>:<A>-<B>``, ``group_id = <id>``,
        ``judge_id = <tier>/<prompt_variant>``, ``sample``, ``verdict`` (``score`` null).
    labels : DataFrame
        ``dataset, item_id, group_id, label, split_key`` (one row per pair; ``split_key`` = ``<id>:<a>-<b>`` with
        a < b, independent of the orientation).
    skipped : dict
        Examples left out per ``<dataset>:<tier>`` because a response has no non-null score at all.
    """
    parts, labels, skipped = [], [], {}
    for c in collections:
        keys = np.array([f"{s}/{i}" for s, i in zip(c.subsets, c.example_ids, strict=True)], dtype=object)
        for tier, ts in sorted(c.tiers.items()):
            ok = ts.present & ~np.any(np.all(np.isnan(ts.scores), axis=2), axis=1)
            bad = int((ts.present & ~ok).sum())
            if bad:
                skipped[f"{c.dataset}:{tier}"] = bad
            for a, b in PAIRS:
                flip = _coin([f"{k}:{a}-{b}" for k in keys[ok]], orientation_seed)
                first, second = np.where(flip, b, a), np.where(flip, a, b)
                rows = np.flatnonzero(ok)
                sa, sb = ts.scores[rows, first], ts.scores[rows, second]
                null = np.array(None, dtype=object)  # a verdict of null where either score is null
                code = np.where(
                    np.isnan(sa) | np.isnan(sb), null, np.where(sa > sb, "A", np.where(sa < sb, "B", "tie"))
                )
                item_ids = np.array(
                    [f"{i}:{x}-{y}" for i, x, y in zip(c.example_ids[rows], first, second, strict=True)]
                )
                n_s = ts.n_samples
                parts.append(
                    pd.DataFrame(
                        {
                            "dataset": np.repeat(["rb2k8/" + s for s in c.subsets[rows]], n_s),
                            "item_id": np.repeat(item_ids, n_s),
                            "group_id": np.repeat(c.example_ids[rows], n_s),
                            "judge_id": f"{tier}/{c.prompt_variant}",
                            "sample": np.tile(np.arange(n_s, dtype=np.int32), len(rows)),
                            "verdict": code.ravel(),
                            "score": np.nan,
                        }
                    )
                )
                chosen = c.chosen[rows]
                label = np.where(first == chosen, "A", np.where(second == chosen, "B", "tie"))
                # The split key names the unordered pair, so splits do not depend on the orientation coin.
                labels.append(
                    pd.DataFrame(
                        {
                            "dataset": ["rb2k8/" + s for s in c.subsets[rows]],
                            "item_id": item_ids,
                            "group_id": c.example_ids[rows],
                            "label": label,
                            "split_key": [f"{i}:{a}-{b}" for i in c.example_ids[rows]],
                        }
                    )
                )
    verdicts = pa.Table.from_pandas(pd.concat(parts, ignore_index=True), preserve_index=False)
    label_frame = pd.concat(labels, ignore_index=True).drop_duplicates(["dataset", "item_id"])
    return verdicts, label_frame, skipped


def holds_pointwise_scores(url: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether ``url`` is an rb2-k8 score dataset (an ``items`` table, every verdict null): its votes are then
    response pairs derived from the scores (:func:`derived_pairs`), not the verdicts themselves."""
    verdict = read_dataset_table(url, "verdicts", columns=["verdict"], storage_options=storage_options)["verdict"]
    return "items" in dataset_tables(url, storage_options=storage_options) and verdict.null_count == len(verdict)


def derived_pairs(
    url: str, *, orientation_seed: int, storage_options: dict[str, Any] | None = None
) -> tuple[pa.Table, pd.DataFrame, dict[str, Any]]:
    """The pair verdicts, labels and bad-input counts of an rb2-k8 score dataset, as the itc study derives them.

    One place for the study and for scoring a ``judgecal.davidson/v2`` model fitted on such pairs, so both see the
    same items, orientations and labels (:func:`rb2_pair_verdicts` of every collection of ``url``).
    """
    collections, bad = load_collections(url, storage_options=storage_options)
    verdicts, labels, skipped = rb2_pair_verdicts(collections, orientation_seed=orientation_seed)
    return verdicts, labels, bad.as_dict() | {"examples_skipped_response_without_score": skipped}


#: Judge-id suffixes of the two presentation orders (LLMBar: ``ab`` as given, ``ba`` swapped and mapped back).
ORDER_SUFFIXES = ("/ab", "/ba")


def pool_orders(verdicts: pd.DataFrame, url: str) -> tuple[pd.DataFrame, npt.NDArray[np.int64]]:
    """One judge per ``<judge>/ab`` and ``<judge>/ba`` pair, with the two orders' samples interleaved.

    Sample ``m`` of order ``ab`` becomes sample ``2m`` and of ``ba`` sample ``2m + 1``, so a budget of n takes the
    first n/2 samples of each order (spec 003 §6.4) and samples 0 and 1 are greedy decoding's two orders (§4.1).

    Returns
    -------
    verdicts : DataFrame
        The rows with pooled ``judge_id`` and renumbered ``sample``.
    shown_first : ndarray of int64
        +1 (A shown first) for even sample columns, -1 for odd ones.

    Raises
    ------
    ConfigError
        A judge id without an order suffix: the setting does not apply to this dataset.
    """
    judges = verdicts["judge_id"].astype(str)
    suffix = judges.str[-3:]
    if not suffix.isin(ORDER_SUFFIXES).all():
        odd = sorted(judges[~suffix.isin(ORDER_SUFFIXES)].unique())
        raise ConfigError(
            f"pool_orders=true: {url}: judge_id {odd[0]!r} (and {len(odd) - 1} more) has no /ab or /ba order suffix; "
            "set pool_orders: false for data without two presentation orders"
        )
    swapped = (suffix == "/ba").to_numpy()
    pooled = verdicts.assign(judge_id=judges.str[:-3], sample=2 * verdicts["sample"].to_numpy() + swapped)
    width = int(pooled["sample"].max()) + 1
    return pooled, np.where(np.arange(width) % 2 == 0, 1, -1).astype(np.int64)
