"""``judgecal score``: apply a study run's saved calibration to every item of a verdict table.

Each item's votes by the model's judges (at one ``sample``; ties and unparseable verdicts are missing, as when the
model was fitted) go through the rebuilt one-coin aggregator, beta calibrator and conformal sets of
:mod:`judgecal_dist.scoring.artifact`, i.e. the very ``methods/`` code the study evaluated. Large tables run on
Spark (:func:`judgecal_dist.engine.item_votes_scan.item_votes_scan`: tasks read the verdict parts with pyarrow
and pack each item's votes with numpy, a ``groupBy`` merges items split across row groups, then one
``mapInArrow`` of :mod:`judgecal_dist.scoring.kernel` with a declared schema); tables below
``EngineConfig.local_max_rows`` run in this process with pyarrow + numpy
(:func:`judgecal_dist.engine.stats.choose_engine` decides); both write the same rows. On Spark the judge and
sample checks read what the scan tasks tallied while scoring (no pre-pass over the table); a refused table
leaves nothing, since item rows are only moved into place after the checks.

Output (any fsspec URL)::

    <output>/items/dataset=<name>/part-*.parquet   item_id, group_id, label, n_votes, score, p, verdict,
                                                    set_alpha_<a> (list of "A"/"B") per conformal level
    <output>/summary/{datasets,subsets,pairs,models}.parquet   (subsets / pairs / models when the items table
                                                    has ``subset`` / ``model_a`` + ``model_b``)
    <output>/summary.json, <output>/figures/win_rates.png
    <output>/_SUCCESS                               written last

Item rows are written under ``<output>/_tmp/`` and moved into ``items/`` only when complete; the summaries are
per-group sums (``groupBy().agg()``), so no item-level row reaches the driver on the Spark path. A rerun with
the same inputs returns the committed summary; an output without ``_SUCCESS`` (a failed run) is cleared and
redone.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine import local
from judgecal_dist.engine.item_votes import check_judges, item_votes_arrow
from judgecal_dist.engine.item_votes_scan import ScanTally, item_votes_scan
from judgecal_dist.engine.stats import choose_engine
from judgecal_dist.engine.store import RunStore
from judgecal_dist.errors import InputError
from judgecal_dist.io.records import json_records
from judgecal_dist.io.schema import VERDICT_CATEGORIES
from judgecal_dist.progress import Progress
from judgecal_dist.scoring import summary as summ
from judgecal_dist.scoring.artifact import Calibration, load_calibration
from judgecal_dist.scoring.kernel import items_ddl, score_batch, score_partition

__all__ = ["OUTPUT_FORMAT", "UNKNOWN_JUDGES", "score_dataset", "score_batch", "items_ddl"]

log = logging.getLogger(__name__)

OUTPUT_FORMAT = "judgecal.scores/v1"
UNKNOWN_JUDGES = ("error", "ignore")
_LOCAL_CHUNK_ITEMS = 200_000  # items scored per numpy call in memory (bounds the float64 copy of the votes)
_VERDICT_COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "sample", "verdict"]


def score_dataset(
    model_url: str,
    data_url: str,
    output_url: str,
    *,
    engine: EngineConfig | None = None,
    sample: int = 0,
    unknown_judges: str = "error",
) -> dict[str, Any]:
    """Score every item of ``data_url`` with the calibration of ``model_url`` and commit it at ``output_url``.

    Parameters
    ----------
    model_url : str
        A committed study run folder (its ``model/calibration.json``) or a ``calibration.json`` URL.
    data_url : str
        An ingested dataset root.
    output_url : str
        Output folder (layout in the module docstring).
    engine : EngineConfig, optional
        Engine choice (``stats_engine``: auto / spark / local; ``local_max_rows``), Spark settings, storage options.
    sample : int, default 0
        The verdict sample to score (the study's ``sample`` setting).
    unknown_judges : {"error", "ignore"}, default "error"
        What to do with verdicts of judges the model does not know: refuse the table, or leave them out (then
        counted in the summary). Model judges absent from the table simply have no votes.

    Returns
    -------
    dict
        The summary written as ``summary.json``: inputs, engine, counts and the per-dataset / subset / pair /
        model tables as records.

    Raises
    ------
    InputError
        Missing or invalid model, data without ``_SUCCESS`` or verdicts at ``sample``, unknown judges (with
        ``"error"``), or an output holding a committed score of other inputs. Nothing is committed then.
    """
    engine = engine or EngineConfig()
    if unknown_judges not in UNKNOWN_JUDGES:
        raise InputError(f"unknown_judges: must be one of {UNKNOWN_JUDGES}, got {unknown_judges!r}")
    options = dict(engine.storage_options)
    model = load_calibration(model_url, storage_options=options)
    store = RunStore(output_url, storage_options=options)
    inputs = {"model": model.source, "data": data_url, "sample": sample, "unknown_judges": unknown_judges}
    if store.succeeded:
        previous = store.read_json("summary.json")
        if previous.get("inputs") == inputs:
            log.info("score: %s is committed for the same inputs; nothing to do", output_url)
            return previous | {"skipped": True}
        raise InputError(f"{output_url}: holds a committed score of other inputs {previous.get('inputs')}; "
                         "choose another --output")  # fmt: skip
    _clear_stale(store)
    started = time.perf_counter()
    chosen = choose_engine(data_url, None, engine)
    runner = _score_spark if chosen == "spark" else _score_local
    tables, counts = runner(model, data_url, store, engine, sample, unknown_judges)
    record = {
        "format": OUTPUT_FORMAT,
        "inputs": inputs,
        "engine": chosen,
        "model": {"judges": len(model.judge_ids), "alphas": model.alphas, "calibrator_input": model.calibrator_input},
        "counts": counts,
        "items_url": store.url_of("items"),
        "seconds": round(time.perf_counter() - started, 3),
    } | {name: json_records(table) for name, table in tables.items()}
    for name, table in tables.items():
        store.write_table(f"summary/{name}.parquet", table)
    store.write_bytes("figures/win_rates.png", summ.figure(tables["datasets"], tables.get("models")))
    store.write_json("summary.json", record)
    store.commit_success()
    log.info("score: %d items of %d dataset(s) on %s -> %s", counts["items"], len(tables["datasets"]), chosen,
             output_url)  # fmt: skip
    return record


def _clear_stale(store: RunStore) -> None:
    # Leftovers of a run that failed before _SUCCESS; only names this command writes are removed.
    for name in ("_tmp", "items", "summary", "summary.json", "figures"):
        if store.exists(name):
            store.fs.rm(store._p(name), recursive=True)


def _counts(n_items: int, n_datasets: int, extra: list[str], absent: list[str]) -> dict[str, Any]:
    return {"items": int(n_items), "datasets": int(n_datasets), "unknown_judges_ignored": extra,
            "model_judges_absent": absent}  # fmt: skip


def _score_spark(
    model: Calibration, data_url: str, store: RunStore, engine: EngineConfig, sample: int, unknown: str
) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    from pyspark.sql import functions as F

    from judgecal_dist.engine.spark import get_session, read_table, spark_url

    spark = get_session(engine.spark_master, conf=dict(engine.spark_conf))
    labels = read_table(spark, data_url, "labels")
    items, tally = item_votes_scan(
        spark, data_url, labels, model.judge_ids, sample=sample, storage_options=engine.storage_options
    )
    scored = items.mapInArrow(functools.partial(score_partition, model=model), items_ddl(model))
    tmp = store._p(f"_tmp/items-{uuid.uuid4().hex}")
    log.info("score: scoring items on spark into %s", tmp)
    scored.write.partitionBy("dataset").parquet(spark_url(_url(store, tmp)))
    # The checks a pre-pass over the verdicts used to make, from what the scan tasks tallied; nothing is
    # committed yet, so a refused table leaves only the temporary rows, removed here.
    try:
        data_judges, extra = _check_tally(tally.value, model, data_url, sample, unknown)
    except InputError:
        store.fs.rm(tmp, recursive=True)
        raise
    store.fs.mv(tmp, store._p("items"), recursive=True)
    back = spark.read.parquet(spark_url(store.url_of("items")))
    alphas, eps = model.alphas, model.eps
    tables = {"datasets": summ.finalise(summ.sums_spark(back, ["dataset"], alphas, eps), alphas)}
    meta = _items_meta(data_url, engine)
    if "subset" in meta:
        sub = read_table(spark, data_url, "items").select("dataset", "item_id", "subset")
        joined = back.join(sub, on=["dataset", "item_id"], how="left").where(F.col("subset").isNotNull())
        tables["subsets"] = summ.finalise(summ.sums_spark(joined, ["dataset", "subset"], alphas, eps), alphas)
    if {"model_a", "model_b"} <= set(meta):
        pairs = read_table(spark, data_url, "items").select("dataset", "item_id", "model_a", "model_b")
        joined = back.join(pairs, on=["dataset", "item_id"], how="inner").where(
            F.col("model_a").isNotNull() & F.col("model_b").isNotNull()
        )
        tables["pairs"] = summ.finalise(summ.sums_spark(joined, ["dataset", "model_a", "model_b"], alphas, eps), alphas)
        tables["models"] = summ.finalise(summ.model_rows_spark(joined), [])
    n_items = int(tables["datasets"]["n_items"].sum())
    absent = sorted(set(model.judge_ids) - set(data_judges))
    return tables, _counts(n_items, len(tables["datasets"]), extra, absent)


def _check_tally(
    tally: ScanTally, model: Calibration, data_url: str, sample: int, unknown: str
) -> tuple[list[str], list[str]]:
    """The data's judges at ``sample`` and the unknown ones, with the errors of the in-memory path."""
    if tally.bad_rows:
        raise InputError(f"{data_url}: verdicts: verdict: {tally.bad_rows} rows with a category outside "
                         f"{VERDICT_CATEGORIES} (e.g. {sorted(tally.bad_examples)})")  # fmt: skip
    if tally.rows == 0:
        raise InputError(f"{data_url}: verdicts: sample: no verdict rows with sample={sample}")
    data_judges = sorted(tally.judges)
    return data_judges, check_judges(data_judges, model.judge_ids, where=f"{data_url}: verdicts", unknown=unknown)


def _url(store: RunStore, path: str) -> str:
    """The URL of a path of the store's filesystem (Spark needs the protocol back)."""
    return store.url + path[len(store.path) :]


def _items_meta(data_url: str, engine: EngineConfig) -> list[str]:
    """Columns of the optional ``items`` table (empty when it is absent)."""
    fs, root = local.dataset_root(data_url, engine.storage_options)
    if not fs.exists(f"{root}/items"):
        return []
    return list(pads.dataset(f"{root}/items", filesystem=fs, format="parquet").schema.names)


def _score_local(
    model: Calibration, data_url: str, store: RunStore, engine: EngineConfig, sample: int, unknown: str
) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    options = engine.storage_options
    verdicts = local.read_arrow_table(data_url, "verdicts", _VERDICT_COLUMNS, storage_options=options)
    labels = local.read_arrow_table(data_url, "labels", ["dataset", "item_id", "label"], storage_options=options)
    at_sample = pc.unique(verdicts.filter(pc.equal(verdicts["sample"], pa.scalar(sample, pa.int32())))["judge_id"])
    data_judges = sorted(at_sample.to_pylist())
    if not data_judges:
        raise InputError(f"{data_url}: verdicts: sample: no verdict rows with sample={sample}")
    extra = check_judges(data_judges, model.judge_ids, where=f"{data_url}: verdicts", unknown=unknown)
    items = item_votes_arrow(verdicts, labels, model.judge_ids, sample=sample)
    del verdicts
    progress = Progress(len(items.labels), label="score: items")
    batches = []
    for start in range(0, len(items.labels), _LOCAL_CHUNK_ITEMS):
        stop = min(start + _LOCAL_CHUNK_ITEMS, len(items.labels))
        keys = {
            k: items.keys[k].slice(start, stop - start).combine_chunks() for k in ("dataset", "item_id", "group_id")
        }
        batches.append(score_batch(model, keys, items.votes[start:stop], items.labels[start:stop]))
        progress.advance(stop - start)
    table = pa.Table.from_batches(batches)
    tmp = store._p(f"_tmp/items-{uuid.uuid4().hex}")
    pads.write_dataset(table, tmp, filesystem=store.fs, format="parquet", partitioning=["dataset"],
                       partitioning_flavor="hive", basename_template="part-{i}.parquet")  # fmt: skip
    store.fs.mv(tmp, store._p("items"), recursive=True)
    frame = table.to_pandas()
    alphas, eps = model.alphas, model.eps
    tables = {"datasets": summ.finalise(summ.sums_pandas(frame, ["dataset"], alphas, eps), alphas)}
    meta = _items_meta(data_url, engine)
    wanted = [c for c in ("subset", "model_a", "model_b") if c in meta]
    if wanted:
        extra_cols = local.read_arrow_table(data_url, "items", ["dataset", "item_id", *wanted], storage_options=options)
        frame = frame.merge(extra_cols.to_pandas(), on=["dataset", "item_id"], how="left")
    if "subset" in wanted:
        sub = frame[frame["subset"].notna()]
        tables["subsets"] = summ.finalise(summ.sums_pandas(sub, ["dataset", "subset"], alphas, eps), alphas)
    if {"model_a", "model_b"} <= set(wanted):
        arena = frame[frame["model_a"].notna() & frame["model_b"].notna()]
        tables["pairs"] = summ.finalise(summ.sums_pandas(arena, ["dataset", "model_a", "model_b"], alphas, eps), alphas)
        tables["models"] = summ.finalise(summ.model_rows_pandas(arena), [])
    absent = sorted(set(model.judge_ids) - set(data_judges))
    return tables, _counts(len(items.labels), len(tables["datasets"]), extra, absent)
