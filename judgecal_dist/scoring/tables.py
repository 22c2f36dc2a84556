"""The one scoring path of the model kinds that score a whole table (:class:`~judgecal_dist.models.interface.TableModel`).

A kind names what it reads (``model.reads``) and scores a batch of it with a pure method; this module reads that
input, in this process with pyarrow + numpy or on Spark, runs the kind's batch method (in the Spark tasks where the
input is item-level, :mod:`judgecal_dist.engine.jobs.scorer`), makes the judge checks and counts what the summary
reports. Nothing is written here: :func:`judgecal_dist.scoring.apply.score_dataset` stages and commits the rows.

Readers (:data:`READERS`), one per input, each the same rows on both engines:

``item_votes``     each item's verdict codes of the model's judges at its sample (the vote codec), scored by
                   ``model.score_packed`` per batch;
``rubric_scores``  each item's 1-5 scores at its sample, scored by ``model.score_rubric``;
``vote_counts``    A/tie/B counts per item and judge of samples ``0 .. n-1`` (the engine's vote-count job),
                   scored by ``model.score_counts``;
``collections``    the score collections of an rb2-k8 dataset, routed by ``model.route`` per collection (on
                   Spark per partition of whole examples, :func:`judgecal_dist.engine.jobs.routes.routes_spark`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import InputError
from judgecal_dist.extras import require_extra
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.models.interface import TableModel
from judgecal_dist.scoring.checks import check_coverage, check_judges

__all__ = ["READERS", "Request", "score_table", "spark_runner"]


@dataclass(frozen=True)
class Request:
    """What score asks of a table: where it is, the engine chosen, and the judge checks' settings."""

    data_url: str
    engine: EngineConfig
    engine_name: str
    unknown_judges: str
    min_judge_coverage: float

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.engine.storage_options)

    @property
    def on_spark(self) -> bool:
        return self.engine_name == "spark"


def spark_runner(name: str = "scorer") -> ModuleType:
    """A Spark runner module of the engine (``engine/jobs/<name>``), imported when a table is scored on Spark (a
    one-line error without the spark extra): in-process scoring never imports pyspark."""
    require_extra("spark", "scoring a table on Spark")
    import importlib

    return importlib.import_module(f"judgecal_dist.engine.jobs.{name}")


def score_table(
    model: TableModel,
    data_url: str,
    *,
    engine: EngineConfig,
    engine_name: str,
    unknown_judges: str,
    min_judge_coverage: float,
) -> tuple[pa.Table, dict[str, Any]]:
    """Scored rows of ``data_url`` and the counts for the summary; nothing written.

    Parameters
    ----------
    model : TableModel
    data_url : str
        An ingested dataset root.
    engine : EngineConfig
        Spark settings and storage options.
    engine_name : {"spark", "local"}
        Where the table is read and scored (the rows are the same on both).
    unknown_judges : {"error", "ignore"}
        What to do with verdicts of judges the model does not know.
    min_judge_coverage : float
        Least share of the model's judges that must have verdicts in the table.

    Raises
    ------
    InputError
        The table cannot be scored by this model (one line naming the table, column and fix).
    """
    if model.reads not in READERS:
        raise InputError(
            f"{data_url}: a {model.kind} model reads {model.reads!r}; this version reads {sorted(READERS)}"
        )
    request = Request(data_url, engine, engine_name, unknown_judges, float(min_judge_coverage))
    return READERS[model.reads](model, request)


def _judge_counts(model: Any, seen: list[str], request: Request, what: str, known: list[str]) -> dict[str, Any]:
    """The judge checks (unknown judges, coverage) over the judges ``seen`` in the table, as summary counts."""
    where = f"{request.data_url}: verdicts"
    extra = check_judges(seen, known, where=where, unknown=request.unknown_judges)
    absent = check_coverage(seen, model.judge_ids, where=where, floor=request.min_judge_coverage, what=what)
    return {
        "judge_coverage": round(1.0 - len(absent) / len(model.judge_ids), 6),
        "unknown_judges_ignored": extra,
        "model_judges_absent": absent,
    }


def _labelled(table: pa.Table, column: str) -> int:
    return int(pc.sum(pc.is_valid(table[column])).as_py() or 0)


# -- item_votes: packed verdict codes per item ---------------------------------------------------------------
def _item_votes(model: Any, request: Request) -> tuple[pa.Table, dict[str, Any]]:
    model.codes_of(np.empty(0, dtype=np.int8))  # an alphabet the table cannot feed is refused before any read
    if request.on_spark:
        table, seen = _item_votes_spark(model, request)
    else:
        table, seen = _item_votes_local(model, request)
    return _item_rows(model, request, table, seen)


def _item_votes_local(model: Any, request: Request) -> tuple[pa.Table, list[str]]:
    from judgecal_dist.engine.votes.codec import VERDICT_COLUMNS, LabelIndex, encode, pack

    url, options = request.data_url, request.options
    dictionary = ["judge_id", "verdict"]
    verdicts = read_dataset_table(
        url, "verdicts", VERDICT_COLUMNS, storage_options=options, dictionary_columns=dictionary
    )
    labels = read_dataset_table(url, "labels", ["dataset", "item_id", "label"], storage_options=options)
    rows = encode(verdicts, model.judge_ids, sample=model.sample)
    rows.reject_unknown(where=f"{url}: verdicts")
    keys = rows.keys
    # The packed columns the Spark tasks get, so the one batch method scores both.
    blocks = {f"v{i}": block for i, block in enumerate(pack(rows.dense(model.k, binary=False)))}
    batch = pa.RecordBatch.from_pydict(
        {c: keys[c].combine_chunks() for c in ("dataset", "item_id", "group_id")}
        | {"label": pa.array(LabelIndex(labels)(keys), pa.int8())}
        | blocks
    )
    return pa.Table.from_batches([model.score_packed(batch)], model.rows_schema()), list(rows.judges_seen)


def _item_votes_spark(model: Any, request: Request) -> tuple[pa.Table, list[str]]:
    from judgecal_dist.io.schema import VERDICT_CATEGORIES

    scorer = spark_runner("scorer")
    items, tally = scorer.item_votes(
        request.engine, request.data_url, model.judge_ids, sample=model.sample, binary=False
    )
    table = scorer.map_batches(items, model.score_packed, model.rows_schema())
    found = tally.value
    if found.bad_rows:
        raise InputError(
            f"{request.data_url}: verdicts: verdict: {found.bad_rows} rows with a category outside "
            f"{VERDICT_CATEGORIES} (e.g. {sorted(found.bad_examples)})"
        )
    return table, sorted(found.judges) if found.rows else []


def _item_rows(model: Any, request: Request, table: pa.Table, seen: list[str]) -> tuple[pa.Table, dict[str, Any]]:
    """The checks and counts of per-item rows at ``model.sample``, the rows in key order."""
    if not seen:
        raise InputError(f"{request.data_url}: verdicts: sample: no verdict rows with sample={model.sample}")
    known = [*model.path, *model.ignored_judges]
    judges = _judge_counts(model, seen, request, f"sample={model.sample}", known)
    table = table.sort_by([("dataset", "ascending"), ("item_id", "ascending")])
    info = {
        "items": int(table.num_rows),
        "items_without_votes": int(table["p"].null_count),
        "labelled": _labelled(table, model.label_column),
    }
    return table, info | judges


# -- rubric_scores: 1-5 scores per item ------------------------------------------------------------------------
def _rubric_scores(model: Any, request: Request) -> tuple[pa.Table, dict[str, Any]]:
    """Spark or pyarrow reads the verdicts at the model's sample; the model codes each item's scores as the regime
    map does and applies its estimator (over the whole table: items are coded against each other's judges)."""
    columns = ["dataset", "item_id", "group_id", "judge_id", "sample", "score"]
    url = request.data_url
    if request.on_spark:
        scorer = spark_runner("scorer")
        verdicts = scorer.collect_table(request.engine, url, "verdicts", columns, sample=model.sample)
        labels = scorer.collect_table(request.engine, url, "labels", ["dataset", "item_id", "label_score"])
    else:
        options = request.options
        verdicts = read_dataset_table(url, "verdicts", columns, storage_options=options).to_pandas()
        verdicts = verdicts[verdicts["sample"] == model.sample]
        labels = read_dataset_table(url, "labels", ["dataset", "item_id", "label_score"], storage_options=options)
        labels = labels.to_pandas()
    if len(verdicts) and verdicts["score"].isna().all():
        raise InputError(
            f"{url}: verdicts: score: no 1-5 score at sample={model.sample}; this model reads rubric scores "
            "(a pairwise A/B table needs a model fitted on verdicts)"
        )
    return _item_rows(
        model, request, model.score_rubric(verdicts, labels), sorted(verdicts["judge_id"].astype(str).unique())
    )


# -- vote_counts: A/tie/B counts per item and judge --------------------------------------------------------------
def _vote_counts(model: Any, request: Request) -> tuple[pa.Table, dict[str, Any]]:
    """The counts come from the engine's vote-count job on the chosen engine (Spark or in memory; the same
    counts), then the model's estimators apply to them."""
    from judgecal_dist.engine.jobs.ensemble import budget_vote_counts
    from judgecal_dist.io.pairs import derived_pairs, holds_pointwise_scores, pool_orders

    url, options = request.data_url, request.options
    model.check_data(url, holds_pointwise_scores(url, options))
    source: str | pa.Table = url
    labels: pd.DataFrame | None = None
    if model.votes == "score-pairs":
        source, pairs, _ = derived_pairs(url, orientation_seed=model.orientation_seed, storage_options=options)
        labels = pairs[["dataset", "item_id", "label"]]
    elif model.pool_orders:
        columns = ["dataset", "item_id", "judge_id", "sample", "verdict", "score"]
        raw = read_dataset_table(url, "verdicts", columns, storage_options=options).to_pandas()
        source = pa.Table.from_pandas(pool_orders(raw, url)[0], preserve_index=False)
    counts = budget_vote_counts(source, [model.n], engine=request.engine_name, config=request.engine)
    seen = sorted(counts["judge_id"].astype(str).unique())
    judges = _judge_counts(model, seen, request, "any sample", list(model.judge_ids))
    counts = counts[counts["judge_id"].isin(model.judge_ids)]
    if labels is None:
        labels = read_dataset_table(url, "labels", ["dataset", "item_id", "label"], storage_options=options).to_pandas()
    table = model.score_counts(counts, labels)
    return table, {"items": int(table.num_rows), "labelled": _labelled(table, "label")} | judges


# -- collections: score collections of an rb2-k8 dataset ---------------------------------------------------------
def _collections(model: Any, request: Request) -> tuple[pa.Table, dict[str, Any]]:
    """Routed examples of every collection the policy names, sorted by (dataset, prompt_variant, subset,
    example_id). In process the collections are read into dense tensors and routed; on Spark the examples are
    reduced where the data lies and only one row per example reaches the driver. The tiers are the policy's
    judges: ``unknown_judges`` and ``min_judge_coverage`` do not apply (a collection without one of its tiers is
    refused)."""
    from judgecal_dist.io.score_collections import load_collections

    url = request.data_url
    if request.on_spark:
        table, tiers, bad = spark_runner("routes").routes_spark(model, url, request.engine)
    else:
        collections, bad = load_collections(url, score_range=model.score_range, storage_options=request.options)
        tiers = {(c.dataset, c.prompt_variant): sorted(c.tiers) for c in collections}
        matched = set(model.matched(url, tiers))
        routed = [
            model.route(c, model.thresholds[(c.dataset, c.prompt_variant)])
            for c in collections
            if (c.dataset, c.prompt_variant) in matched
        ]
        table = pa.concat_tables(routed)
    table = table.sort_by([(c, "ascending") for c in model.order])
    matched_keys = model.matched(url, tiers)
    info = {
        "items": int(table.num_rows),
        "collections": len(matched_keys),
        "collections_without_policy": sorted(f"{d}/{p}" for d, p in tiers if (d, p) not in matched_keys),
        "bad_input": bad.as_dict(),
    }
    return table, info


#: Input name -> its reader (the ``reads`` of a :class:`~judgecal_dist.models.interface.TableModel`).
READERS: dict[str, Callable[[Any, Request], tuple[pa.Table, dict[str, Any]]]] = {
    "item_votes": _item_votes,
    "rubric_scores": _rubric_scores,
    "vote_counts": _vote_counts,
    "collections": _collections,
}
