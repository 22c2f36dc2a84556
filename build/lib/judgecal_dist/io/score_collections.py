"""Repeated-sample score collections (``rb2-k8``) read from an ingested dataset into dense score tensors.

A *collection* is one (dataset, prompt_variant) of the dataset: its examples in file order (the order in which
their first verdict row is stored, which the adapter keeps), each with its subset, RewardBench id, chosen response
(the item whose ``label_score`` is the example's unique maximum) and, per tier (``judge_id``), a score tensor
``(examples, responses, samples)`` with NaN for null scores plus the example's token totals.

Bad input is counted and reported, never dropped silently (:class:`BadInput`): scores outside the declared range
(set to null), responses whose samples are all null (their examples are never evaluable), tiers whose sample
count ``k`` differs, examples with fewer than two responses or without a unique chosen response (left out), and
the ingest report's refused and rejected examples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import dataset_tables, read_dataset_table, read_report

__all__ = [
    "TierScores",
    "Collection",
    "BadInput",
    "load_collections",
    "collection_of",
    "require_items",
    "ingest_counts",
    "VERDICT_COLUMNS",
    "ITEM_COLUMNS",
    "lookup_rows",
    "attach_tier",
]

VERDICT_COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "sample", "score", "input_tokens", "output_tokens"]
ITEM_COLUMNS = ["dataset", "item_id", "subset", "prompt_variant", "example_id", "response"]


@dataclass(frozen=True)
class TierScores:
    """One tier's scores on the examples of a collection.

    Attributes
    ----------
    scores : ndarray of float64, shape (n_examples, n_responses, n_samples)
        NaN for a null score and for examples the tier did not score.
    present : ndarray of bool, shape (n_examples,)
        The tier has verdict rows for the example.
    input_tokens, output_tokens : ndarray of float64, shape (n_examples,)
        Token totals of the example for this tier (0 where absent).
    """

    scores: npt.NDArray[np.float64]
    present: npt.NDArray[np.bool_]
    input_tokens: npt.NDArray[np.float64]
    output_tokens: npt.NDArray[np.float64]

    @property
    def n_samples(self) -> int:
        return int(self.scores.shape[2])


@dataclass(frozen=True)
class Collection:
    """The examples of one (dataset, prompt_variant), in file order, with every tier's scores."""

    dataset: str
    prompt_variant: str
    example_ids: npt.NDArray[np.object_]
    subsets: npt.NDArray[np.object_]
    chosen: npt.NDArray[np.intp]
    tiers: dict[str, TierScores]

    @property
    def n_examples(self) -> int:
        return len(self.example_ids)

    @property
    def keys(self) -> npt.NDArray[np.object_]:
        """``<subset>/<id>``: the unique example key (ids repeat across subsets, spec 004 §2.2)."""
        return np.array([f"{s}/{i}" for s, i in zip(self.subsets, self.example_ids, strict=True)], dtype=object)


@dataclass
class BadInput:
    """Counts of input that the rules exclude or repair, by kind; reported in ``summary.json`` and the report."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    samples_per_tier: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, kind: str, n: int, examples: list[str] | None = None) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + int(n)
        if examples:
            self.examples.setdefault(kind, []).extend(examples[: max(0, 5 - len(self.examples.get(kind, [])))])

    def as_dict(self) -> dict[str, Any]:
        ks = {d: sorted(set(t.values())) for d, t in self.samples_per_tier.items()}
        return {
            "counts": dict(sorted(self.counts.items())),
            "examples": self.examples,
            "samples_per_tier": self.samples_per_tier,
            "k_differs_across_tiers": sorted(d for d, v in ks.items() if len(v) > 1),
        }


def require_items(url: str, storage_options: dict[str, Any] | None) -> None:
    """Refuse a dataset without the ``items`` table that places every item in its example and collection."""
    tables = dataset_tables(url, storage_options=storage_options)
    if "items" not in tables:
        raise InputError(
            f"{url}: items: table not in dataset (present: {tables}); score collections need subset, prompt_variant, "
            "example_id and response per item (ingest with --format rb2-k8)"
        )


def _frames(url: str, storage_options: dict[str, Any] | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    require_items(url, storage_options)
    verdicts = read_dataset_table(url, "verdicts", columns=VERDICT_COLUMNS, storage_options=storage_options)
    items = read_dataset_table(url, "items", columns=ITEM_COLUMNS, storage_options=storage_options)
    labels = read_dataset_table(
        url, "labels", columns=["dataset", "item_id", "label_score"], storage_options=storage_options
    )
    return verdicts.to_pandas(), items.to_pandas(), labels.to_pandas()


def ingest_counts(url: str, bad: BadInput, storage_options: dict[str, Any] | None) -> None:
    """Add the ingest report's refused and rejected examples to ``bad`` (nothing when there is no report)."""
    try:
        report = read_report(url, storage_options=storage_options)
    except (InputError, OSError, ValueError):
        return
    bad.add("refused_examples", int(report.get("refused_examples", 0) or 0))
    rejected = report.get("rejected") or []
    bad.add("rejected_at_ingest", len(rejected), [str(r.get("example", r)) for r in rejected])


def _score_tensor(
    rows: pd.DataFrame, n_examples: int, n_responses: int, n_samples: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    tensor = np.full((n_examples, n_responses, n_samples), np.nan)
    tensor[rows["ex"].to_numpy(), rows["response"].to_numpy(), rows["sample"].to_numpy()] = rows["score"].to_numpy()
    present = np.zeros(n_examples, dtype=bool)
    present[rows["ex"].to_numpy()] = True
    return tensor, present


def collection_of(
    name: str,
    variant: str,
    frame: pd.DataFrame,
    bad: BadInput,
    score_range: tuple[float, float],
    *,
    n_responses: int | None = None,
    n_samples: Mapping[str, int] | None = None,
) -> Collection | None:
    """Dense tensors of one (dataset, prompt_variant); ``frame`` holds its verdict rows joined to items/labels.

    ``n_responses`` and ``n_samples`` (per tier) give the tensors' widths when ``frame`` holds only some of the
    collection's examples (a Spark partition): the whole collection's, so an example missing a response is not
    evaluable there either. By default they are ``frame``'s own.
    """
    codes, groups = pd.factorize(frame["group_id"], sort=False)  # first appearance = file order
    frame = frame.assign(ex=codes)
    per_example = frame.drop_duplicates("item_id").groupby("ex", sort=True)
    n_resp = per_example["response"].nunique()
    top = per_example["label_score"].max()
    at_top = frame.drop_duplicates("item_id").assign(top=lambda f: f["ex"].map(top)).query("label_score == top")
    n_top = at_top.groupby("ex")["response"].nunique().reindex(n_resp.index, fill_value=0)
    few = n_resp.index[n_resp < 2]
    no_chosen = n_resp.index[(n_resp >= 2) & (n_top != 1)]
    bad.add("fewer_than_two_responses", len(few), [f"{name}:{groups[i]}" for i in few[:5]])
    bad.add("no_unique_chosen_response", len(no_chosen), [f"{name}:{groups[i]}" for i in no_chosen[:5]])
    keep = np.setdiff1d(n_resp.index.to_numpy(), np.concatenate([few.to_numpy(), no_chosen.to_numpy()]))
    if len(keep) == 0:
        return None
    remap = np.full(len(groups), -1)
    remap[keep] = np.arange(len(keep))
    frame = frame.assign(ex=remap[frame["ex"].to_numpy()]).query("ex >= 0")
    first = frame.drop_duplicates("ex").sort_values("ex")
    chosen = at_top.assign(ex=remap[at_top["ex"].to_numpy()]).query("ex >= 0").drop_duplicates("ex")
    chosen_idx = np.zeros(len(keep), dtype=np.intp)
    chosen_idx[chosen["ex"].to_numpy()] = chosen["response"].to_numpy()
    if n_responses is None:
        n_responses = int(frame["response"].max()) + 1
    tiers = {}
    for tier, rows in frame.groupby("judge_id", sort=True):
        k = int(rows["sample"].max()) + 1 if n_samples is None else int(n_samples[str(tier)])
        bad.samples_per_tier.setdefault(name, {})[str(tier)] = k
        low, high = score_range
        outside = rows["score"].notna() & ~rows["score"].between(low, high)
        if outside.any():
            bad.add(
                f"scores_outside_{low:g}_{high:g}",
                int(outside.sum()),
                [
                    f"{name}:{tier}:{i}#{s}"
                    for i, s in zip(rows.loc[outside, "item_id"][:5], rows.loc[outside, "sample"][:5], strict=True)
                ],
            )
            rows = rows.assign(score=rows["score"].mask(outside))
        tensor, present = _score_tensor(rows, len(keep), n_responses, k)
        has_response = np.zeros((len(keep), n_responses), dtype=bool)
        has_response[rows["ex"].to_numpy(), rows["response"].to_numpy()] = True
        all_null = has_response & np.isnan(tensor).all(axis=2)
        if all_null.any():
            bad.add(
                "responses_all_samples_null",
                int(all_null.sum()),
                [f"{name}:{tier}:{groups[keep[e]]}/{r}" for e, r in np.argwhere(all_null)[:5]],
            )
        missing_rows = int(has_response.sum()) * k - len(rows)
        if missing_rows:
            bad.add("sample_rows_absent", missing_rows)
        tokens = rows.groupby("ex")[["input_tokens", "output_tokens"]].sum(min_count=1).reindex(range(len(keep)))
        tiers[str(tier)] = TierScores(
            scores=tensor,
            present=present,
            input_tokens=tokens["input_tokens"].fillna(0).to_numpy(dtype=np.float64),
            output_tokens=tokens["output_tokens"].fillna(0).to_numpy(dtype=np.float64),
        )
    return Collection(
        dataset=name,
        prompt_variant=variant,
        example_ids=first["example_id"].to_numpy(dtype=object),
        subsets=first["subset"].to_numpy(dtype=object),
        chosen=chosen_idx,
        tiers=tiers,
    )


def load_collections(
    url: str,
    *,
    datasets: tuple[str, ...] | None = None,
    score_range: tuple[float, float] = (1.0, 10.0),
    storage_options: dict[str, Any] | None = None,
) -> tuple[list[Collection], BadInput]:
    """Every (dataset, prompt_variant) collection of an ingested score dataset, and the bad-input counts.

    Parameters
    ----------
    url : str
        Dataset root (``judgecal ingest --format rb2-k8``).
    datasets : tuple of str, optional
        Only these datasets (default all).
    score_range : (float, float)
        Declared score range; scores outside it are counted and treated as null.
    storage_options : dict, optional

    Returns
    -------
    collections : list of Collection
        Sorted by (dataset, prompt_variant).
    bad : BadInput

    Raises
    ------
    InputError
        No items table, no scored verdicts, or none of ``datasets`` present.
    """
    verdicts, items, labels = _frames(url, storage_options)
    bad = BadInput()
    ingest_counts(url, bad, storage_options)
    verdicts = verdicts.merge(items, on=["dataset", "item_id"], how="left", validate="many_to_one")
    verdicts = verdicts.merge(labels, on=["dataset", "item_id"], how="left", validate="many_to_one")
    unknown = verdicts["response"].isna()
    if unknown.any():
        bad.add("verdicts_without_item_row", int(unknown.sum()), verdicts.loc[unknown, "item_id"].head(5).tolist())
        verdicts = verdicts[~unknown]
    verdicts = verdicts.astype({"response": np.int64, "sample": np.int64})
    names = sorted(verdicts["dataset"].unique())
    if datasets:
        missing = sorted(set(datasets) - set(names))
        if missing:
            raise InputError(f"{url}: verdicts: dataset: {missing} not found (have {names})")
        names = [n for n in names if n in datasets]
    if not names:
        raise InputError(f"{url}: verdicts: no scored rows")
    collections = []
    for name in names:
        rows = verdicts[verdicts["dataset"] == name]
        for variant, frame in rows.groupby("prompt_variant", sort=True, dropna=False):
            found = collection_of(name, str(variant), frame, bad, score_range)
            if found is not None:
                collections.append(found)
    return collections, bad


def lookup_rows(keys: npt.ArrayLike, table_keys: npt.ArrayLike) -> npt.NDArray[np.intp]:
    """Row of ``table_keys`` matching each of ``keys`` (-1 when absent); for repeated keys the last row wins.

    "Last row wins" is how a map built in file order behaves, which the paper's id-only joins rely on
    (spec 004 §3.11-3.12).

    Examples
    --------
    >>> lookup_rows(["a", "b", "z"], ["a", "b", "a"]).tolist()
    [2, 1, -1]
    """
    index = {key: row for row, key in enumerate(np.asarray(table_keys, dtype=object).tolist())}
    return np.array([index.get(key, -1) for key in np.asarray(keys, dtype=object).tolist()], dtype=np.intp)


def attach_tier(host: Collection, other: Collection, tier: str, *, key: str) -> TierScores:
    """``other``'s tier aligned to ``host``'s rows by ``key`` (``"id"`` or ``"subset_id"``); absent rows are NaN.

    With ``key="id"`` this is the paper's nano join (spec 004 §3.12): a map id -> row of ``other`` in file order
    (later rows overwrite earlier ones), attached to every host row whose id is in the map.
    """
    host_keys, other_keys = (host.example_ids, other.example_ids) if key == "id" else (host.keys, other.keys)
    rows = lookup_rows(host_keys, other_keys)
    src, found = other.tiers[tier], rows >= 0
    take = np.where(found, rows, 0)
    scores = np.where(found[:, None, None], src.scores[take], np.nan)
    return TierScores(
        scores=scores,
        present=found & src.present[take],
        input_tokens=np.where(found, src.input_tokens[take], 0.0),
        output_tokens=np.where(found, src.output_tokens[take], 0.0),
    )
