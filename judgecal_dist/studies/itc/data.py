"""Inputs of the itc study: three-way vote counts per item and budget, with labels in {-1, 0, +1}.

Three sources (spec 003 §7.8-7.9):

``rb2-k8 pairs``  an ingested rb2-k8 score dataset: per example, the six unordered response pairs (three of the
                  chosen response 0 against a rejected one, labelled A or B by a seeded orientation coin per
                  (subset, id, a, b); three among rejected responses, labelled tie); the vote of sample m compares
                  the two responses' m-th scores (A if higher, tie if equal, null if either is null);
``verdicts``      any ingested dataset with A/B/tie verdicts and repeated samples (e.g. ``judgecal generate
                  --samples 8 --tie-rate 0.2 --scores``): counts from the vote-count job, labels from ``labels``,
                  per-sample confidences ``max(score, 1 - score)`` when scores exist;
``synthetic:g2``  generator G2 in memory: label-first votes with tie labels and real tie votes, one judge per
                  tie propensity; sample columns alternate the two presentation orders, so every budget holds
                  half of its samples in each order.

Vote counts of every budget come from the engine's vote-count job on sample-filtered verdicts
(:func:`judgecal_dist.engine.jobs.ensemble.budget_vote_counts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.ensemble import budget_vote_counts
from judgecal_dist.engine.votes.codec import outcome_signs
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.pairs import derived_pairs, holds_pointwise_scores, pool_orders
from judgecal_dist.methods.repeated.self_consistency import MISSING
from judgecal_dist.methods.repeated.vote_simulation import simulate_label_first, vote_counts
from judgecal_dist.splits import group_keys

__all__ = [
    "Task",
    "ItcInput",
    "load_tasks",
    "PAIRS_SOURCE",
    "items_without_verdict",
    "interleaved_orders",
]

#: ``ItcInput.source`` of an rb2-k8 score dataset, whose votes are response pairs derived from the scores.
PAIRS_SOURCE = "rb2-k8 pairs"


@dataclass(frozen=True)
class Task:
    """One (dataset, judge): items with labels and the vote counts of every budget.

    Attributes
    ----------
    counts : ndarray of int64, shape (n_budgets, n_items, 3)
        ``(c+, c0, c-)`` of the first ``budgets[b]`` samples.
    item_keys, group_keys : ndarray of int64
        Split keys of the pair-level (default) and the grouped split.
    votes : ndarray of int64, shape (n_items, n_samples)
        Per-sample votes (-1/0/+1/MISSING) in sample order: GD's rounded median, random budgets, vote tables.
    confidence : ndarray, shape (n_items, n_samples), optional
        Per-sample confidences, for Soft-SC and CI-SC.
    shown_first : ndarray of int64, shape (n_samples,), optional
        +1 where a sample column showed A first, -1 where it showed B first; None when the data do not say
        (pointwise scores of rb2-k8 show no response first).
    present : ndarray of bool, shape (n_items, n_samples), optional
        Where the item has a sample (a null verdict is a sample; a column past the item's own samples is not);
        None when every item has every sample.
    """

    dataset: str
    judge_id: str
    item_ids: npt.NDArray[np.object_]
    item_keys: npt.NDArray[np.int64]
    group_keys: npt.NDArray[np.int64]
    labels: npt.NDArray[np.int64]
    budgets: tuple[int, ...]
    counts: npt.NDArray[np.int64]
    votes: npt.NDArray[np.int64]
    confidence: npt.NDArray[np.float64] | None = None
    shown_first: npt.NDArray[np.int64] | None = None
    present: npt.NDArray[np.bool_] | None = None

    @property
    def n_items(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class ItcInput:
    tasks: tuple[Task, ...]
    source: str
    info: dict[str, Any] = field(default_factory=dict)


def _tasks_from_counts(
    counts: pd.DataFrame,
    labels: pd.DataFrame,
    budgets: tuple[int, ...],
    votes: pd.DataFrame,
    shown_first: npt.NDArray[np.int64] | None = None,
) -> list[Task]:
    """Assemble one Task per (dataset, judge) from the vote-count job's rows, the per-sample votes and the labels.

    ``votes`` has ``dataset, judge_id, item_id, sample, code`` and, when the data carry confidences, ``conf``.
    """
    tasks = []
    merged = counts.merge(labels, on=["dataset", "item_id"], how="inner", validate="many_to_one")
    by_task = dict(iter(votes.groupby(["dataset", "judge_id"], sort=False)))
    width = int(votes["sample"].max()) + 1 if len(votes) else 1
    for (dataset, judge), rows in merged.groupby(["dataset", "judge_id"], sort=True):
        rows = rows.sort_values(["item_id", "budget"], kind="stable")
        items = rows.drop_duplicates("item_id")
        wide = rows.pivot(index="item_id", columns="budget", values=["n_A", "n_tie", "n_B"])
        # The vote-count job has no row for an item with no sample below n: no verdict at that budget, the same as
        # n null votes, so (0, 0, 0), which every method answers with a tie (the spec's all-missing rule).
        # items_without_verdict reports both cases; without this fill the gap became a negative count.
        columns = pd.MultiIndex.from_product([("n_A", "n_tie", "n_B"), budgets])
        wide = wide.reindex(index=items["item_id"], columns=columns).fillna(0)
        tensor = np.stack([wide[[(c, b) for c in ("n_A", "n_tie", "n_B")]].to_numpy(np.int64) for b in budgets])
        own = by_task[(dataset, judge)]
        samples = pd.RangeIndex(width)
        code = own.pivot(index="item_id", columns="sample", values="code").reindex(items["item_id"], columns=samples)
        rows = own.assign(row=True).pivot(index="item_id", columns="sample", values="row")
        present = rows.reindex(items["item_id"], columns=samples).notna().to_numpy()
        w = None
        if "conf" in own:
            conf = own.pivot(index="item_id", columns="sample", values="conf")
            w = conf.reindex(items["item_id"], columns=samples).fillna(0.0).to_numpy(np.float64)
        item_ids = items["item_id"].to_numpy(dtype=object)
        tasks.append(
            Task(
                dataset=str(dataset),
                judge_id=str(judge),
                item_ids=item_ids,
                item_keys=group_keys([f"{dataset}/{i}" for i in items.get("split_key", items["item_id"])]),
                group_keys=group_keys([f"{dataset}/{g}" for g in items["group_id"]]),
                labels=pd.Series(outcome_signs(items["label"])).to_numpy(np.int64),
                budgets=budgets,
                counts=tensor,
                votes=code.fillna(MISSING).to_numpy(np.int64),
                confidence=w,
                shown_first=shown_first,
                present=None if present.all() else present,
            )
        )
    return tasks


def items_without_verdict(tasks: Sequence[Task]) -> dict[str, dict[str, int]]:
    """Items with no verdict among their first n samples, per ``dataset|judge`` and budget (only nonzero counts).

    Such an item keeps counts (0, 0, 0) and stays in its split; every method answers it with a tie.

    Examples
    --------
    >>> keys = np.zeros(2, np.int64)
    >>> counts = np.array([[[0, 0, 0], [1, 0, 0]], [[1, 0, 1], [1, 0, 0]]])  # budgets 1 and 2, items a and b
    >>> task = Task("d", "j", np.array(["a", "b"]), keys, keys, np.ones(2, np.int64), (1, 2), counts, counts[1])
    >>> items_without_verdict([task])
    {'d|j': {'n=1': 1}}
    """
    out: dict[str, dict[str, int]] = {}
    for task in tasks:
        none = (task.counts.sum(axis=2) == 0).sum(axis=1)
        cells = {f"n={n}": int(k) for n, k in zip(task.budgets, none, strict=True) if k}
        if cells:
            out[f"{task.dataset}|{task.judge_id}"] = cells
    return out


def _vote_codes(verdicts: pd.DataFrame) -> pd.DataFrame:
    """``dataset, judge_id, item_id, sample, code`` of verdict rows (code NaN where the verdict is null)."""
    return verdicts[["dataset", "judge_id", "item_id", "sample"]].assign(code=outcome_signs(verdicts["verdict"]))


def _rb2_tasks(url: str, budgets: tuple[int, ...], orientation_seed: int, engine: EngineConfig) -> ItcInput:
    options = dict(engine.storage_options)
    verdicts, labels, bad = derived_pairs(url, orientation_seed=orientation_seed, storage_options=options)
    counts = budget_vote_counts(verdicts, budgets, config=engine)
    votes = _vote_codes(verdicts.select(["dataset", "judge_id", "item_id", "sample", "verdict"]).to_pandas())
    info = {
        "bad_input": bad | {"budgets_above_samples": _short_budgets(counts)},
        "pairs": int(len(labels)),
        "label_shares": _label_shares(labels),
    }
    return ItcInput(tasks=tuple(_tasks_from_counts(counts, labels, budgets, votes)), source=PAIRS_SOURCE, info=info)


def _short_budgets(counts: pd.DataFrame) -> dict[str, list[int]]:
    """Budgets larger than a judge's samples (they repeat the judge's full counts), per ``dataset|judge``."""
    top = counts[counts["budget"] == counts["budget"].max()]
    votes = top[["n_A", "n_tie", "n_B", "n_missing"]].sum(axis=1)
    samples = votes.groupby([top["dataset"], top["judge_id"]]).max()
    budgets = sorted(counts["budget"].unique())
    return {f"{d}|{j}": [int(b) for b in budgets if b > n] for (d, j), n in samples.items() if budgets[-1] > n}


def _label_shares(labels: pd.DataFrame) -> dict[str, dict[str, float]]:
    shares = labels.groupby("dataset")["label"].value_counts(normalize=True).unstack(fill_value=0.0)
    return {d: {k: float(v) for k, v in row.items()} for d, row in shares.iterrows()}


def _verdict_tasks(url: str, budgets: tuple[int, ...], engine: EngineConfig, pool: bool = False) -> ItcInput:
    options = dict(engine.storage_options)
    labels = read_dataset_table(
        url, "labels", columns=["dataset", "item_id", "label"], storage_options=options
    ).to_pandas()
    unlabelled = int(labels["label"].isna().sum())
    labels = labels.dropna(subset=["label"])
    verdicts = read_dataset_table(
        url,
        "verdicts",
        columns=["dataset", "item_id", "group_id", "judge_id", "sample", "verdict", "score"],
        storage_options=options,
    ).to_pandas()
    groups = verdicts.drop_duplicates(["dataset", "item_id"])[["dataset", "item_id", "group_id"]]
    labels = labels.merge(groups, on=["dataset", "item_id"], how="inner", validate="one_to_one")
    shown_first = None
    if pool:
        verdicts, shown_first = pool_orders(verdicts, url)
        source: str | pa.Table = pa.Table.from_pandas(verdicts, preserve_index=False)
    else:
        source = url
    counts = budget_vote_counts(source, budgets, config=engine)
    votes = _vote_codes(verdicts)
    scored = bool(verdicts["score"].notna().any())
    if scored:
        votes = votes.assign(conf=np.maximum(verdicts["score"], 1 - verdicts["score"]).to_numpy())
    info = {
        "bad_input": {
            "counts": {"items_without_label": unlabelled, "null_verdicts": int(verdicts["verdict"].isna().sum())},
            "budgets_above_samples": _short_budgets(counts),
        },
        "label_shares": _label_shares(labels),
        "confidence": "max(score, 1 - score) of each sample" if scored else None,
        "orders": "pooled: <judge>/ab and <judge>/ba are one judge, samples alternate ab, ba" if pool else None,
    }
    tasks = _tasks_from_counts(counts, labels, budgets, votes, shown_first)
    return ItcInput(tasks=tuple(tasks), source="verdicts", info=info)


def interleaved_orders(n_samples: int) -> npt.NDArray[np.intp]:
    """Column order that alternates G2's presentation orders: A-first sample 0, B-first sample 0, A-first 1, ...

    G2 draws its first ``ceil(n/2)`` samples with A shown first and the rest with B first. A budget takes an item's
    first ``n`` columns, so in this order it holds the first ``n/2`` samples of each order (nested budgets, one
    pool), as the spec's budget rule asks; in the generator's own order a budget up to half the pool would be
    A-first only.

    Examples
    --------
    >>> interleaved_orders(6).tolist(), interleaved_orders(3).tolist()
    ([0, 3, 1, 4, 2, 5], [0, 2, 1])
    """
    first = np.flatnonzero(np.arange(n_samples) < n_samples / 2)  # the generator's A-first columns
    second = np.flatnonzero(np.arange(n_samples) >= n_samples / 2)
    out = np.empty(n_samples, dtype=np.intp)
    out[0 : 2 * second.size : 2], out[1 : 2 * second.size : 2] = first[: second.size], second
    out[2 * second.size :] = first[second.size :]
    return out


def _synthetic_tasks(
    budgets: tuple[int, ...], *, n_items: int, propensities: Sequence[float], prior: Sequence[float], seed: int
) -> ItcInput:
    tasks = []
    n_max = max(budgets)
    order = interleaved_orders(n_max)
    shown_first = np.where(np.arange(n_max) < n_max / 2, 1, -1).astype(np.int64)[order]
    for j, eta in enumerate(propensities):
        sim = simulate_label_first(n_items, n_max, prior=tuple(prior), tie_propensity=float(eta), random_state=seed + j)
        votes, confidence = sim.votes[:, order], sim.confidence[:, order]
        ids = np.array([f"item-{i:07d}" for i in range(n_items)], dtype=object)
        keys = group_keys([f"g2/{i}" for i in ids])
        tasks.append(
            Task(
                dataset="synthetic/g2",
                judge_id=f"eta={float(eta):+.2f}",
                item_ids=ids,
                item_keys=keys,
                group_keys=keys,
                labels=sim.labels,
                budgets=budgets,
                counts=np.stack([vote_counts(votes, b) for b in budgets]),
                votes=votes,
                confidence=confidence,
                shown_first=shown_first,
            )
        )
    info = {
        "generator": "G2 (the paper's synthetic generator)",
        "items": n_items,
        "tie_propensities": list(propensities),
        "prior": list(prior),
        "seed": seed,
        "bad_input": {"counts": {}},
    }
    return ItcInput(tasks=tuple(tasks), source="synthetic:g2", info=info)


def load_tasks(
    data: str,
    budgets: Sequence[int],
    *,
    engine: EngineConfig,
    orientation_seed: int = 0,
    synthetic_items: int = 4000,
    synthetic_propensities: Sequence[float] = (-1.0, 0.0, 1.0),
    synthetic_prior: Sequence[float] = (0.25, 0.5, 0.25),
    synthetic_seed: int = 0,
    pool: bool = False,
) -> ItcInput:
    """The itc tasks of ``data``: ``synthetic:g2``, an rb2-k8 score dataset, or a verdict dataset (module docstring).

    Raises
    ------
    InputError
        Unknown ``synthetic:`` generator, or no task with labelled items.
    ConfigError
        ``pool`` on data without two presentation orders.
    """
    budgets = tuple(int(b) for b in budgets)
    result = _load(
        data,
        budgets,
        engine,
        orientation_seed,
        synthetic_items,
        synthetic_propensities,
        synthetic_prior,
        synthetic_seed,
        pool,
    )
    if not result.tasks:
        raise InputError(f"{data}: labels: no labelled item has verdicts")
    missing = items_without_verdict(result.tasks)
    bad = result.info.setdefault("bad_input", {})
    bad["items_without_verdict"] = missing
    for n in budgets:
        total = sum(cells.get(f"n={n}", 0) for cells in missing.values())
        if total:
            bad.setdefault("counts", {})[f"items_without_verdict_at_n={n}"] = total
    return result


def _load(
    data: str,
    budgets: tuple[int, ...],
    engine: EngineConfig,
    orientation_seed: int,
    synthetic_items: int,
    synthetic_propensities: Sequence[float],
    synthetic_prior: Sequence[float],
    synthetic_seed: int,
    pool: bool,
) -> ItcInput:
    if data.startswith("synthetic:"):
        if data != "synthetic:g2":
            raise InputError(f"data: unknown generator {data!r}; known: synthetic:g2")
        return _synthetic_tasks(
            budgets,
            n_items=synthetic_items,
            propensities=synthetic_propensities,
            prior=synthetic_prior,
            seed=synthetic_seed,
        )
    scored = holds_pointwise_scores(data, dict(engine.storage_options))
    if scored and pool:
        raise ConfigError(
            f"pool_orders=true: {data} holds pointwise scores (rb2-k8), which show no response first; "
            "set pool_orders: false"
        )
    return (
        _rb2_tasks(data, budgets, orientation_seed, engine) if scored else _verdict_tasks(data, budgets, engine, pool)
    )
