"""The Spark passes of the escalation kind's routing (``judgecal.escalation/v2``): examples reduced where the data
lies, the policy's own routing applied in the tasks, one row per example back.

The policy is passed in (its ``route``, ``matched``, ``tier_cost``, ``thresholds``, tiers and ``score_range``);
the in-process runner (:mod:`judgecal_dist.scoring.tables`) calls the same methods on the collections the reader
builds, so both give the same rows.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.scorer import arrow_ddl, read_table, session
from judgecal_dist.io.score_collections import (
    ITEM_COLUMNS,
    VERDICT_COLUMNS,
    BadInput,
    collection_of,
    ingest_counts,
    require_items,
)

__all__ = ["ROUTE_SCHEMA", "routes_spark"]

#: The routed rows' schema (:meth:`~judgecal_dist.models.escalation.EscalationPolicy.route`) plus, on one row per Spark partition, that partition's
#: bad-input counts as JSON (every other column null).
ROUTE_SCHEMA = pa.schema(
    [
        ("dataset", pa.string()),
        ("prompt_variant", pa.string()),
        ("subset", pa.string()),
        ("example_id", pa.string()),
        ("theta", pa.float64()),
        ("responses", pa.int64()),
        ("escalated", pa.int64()),
        ("winner", pa.int64()),
        ("chosen", pa.int64()),
        ("evaluable", pa.bool_()),
        ("correct", pa.bool_()),
        ("cost_cheap", pa.float64()),
        ("cost_full", pa.float64()),
        ("bad_input", pa.string()),
    ]
)


def routes_spark(
    policy: Any, data_url: str, engine: EngineConfig
) -> tuple[pa.Table, dict[tuple[str, str], list[str]], Any]:
    """Route every example of ``data_url`` on Spark: the routed rows, each collection's tiers, the bad input.

    Three passes, none item-level in the driver: (1) per example, its responses and whether it has a unique
    chosen one (the reader's rules: at least two responses and one at the top label score); (2) per collection
    and tier over the kept examples, the tensors' widths (responses, samples) and the token totals of the cost;
    (3) the kept examples' verdict rows, partitioned by example, go through the reader's own
    :func:`~judgecal_dist.io.score_collections.collection_of` (with the whole collection's widths) and
    :meth:`~judgecal_dist.models.escalation.EscalationPolicy.route` (with the whole collection's costs) in each partition, so the rows equal the
    in-process ones. Bad-input counts are the reader's; their example lists may name other examples.
    """
    options = dict(engine.storage_options)
    require_items(data_url, options)
    spark = session(engine)
    items = read_table(spark, data_url, "items").select(*ITEM_COLUMNS)
    labels = read_table(spark, data_url, "labels").select("dataset", "item_id", "label_score")
    rows = (
        read_table(spark, data_url, "verdicts")
        .select(*VERDICT_COLUMNS)
        .join(items, on=["dataset", "item_id"], how="left")
        .join(labels, on=["dataset", "item_id"], how="left")
        # the reader groups collections with pandas (dropna=False): a null variant is the string "nan" there
        .withColumn("prompt_variant", F.coalesce(F.col("prompt_variant").cast("string"), F.lit("nan")))
    )
    example = ["dataset", "prompt_variant", "group_id"]
    # (1) per example: responses with a verdict, and how many of them sit at the top label score
    per_item = rows.where(F.col("response").isNotNull()).dropDuplicates(["dataset", "prompt_variant", "item_id"])
    examples = per_item.groupBy(*example).agg(
        F.countDistinct("response").alias("n_resp"),
        F.max("label_score").alias("top"),
        F.collect_list(F.struct("label_score", "response")).alias("pairs"),
    )
    at_top = F.filter("pairs", lambda p: p["label_score"] == F.col("top"))
    examples = examples.select(
        *example,
        "n_resp",
        F.size(F.array_distinct(F.transform(at_top, lambda p: p["response"]))).alias("n_top"),
    ).withColumn("kept", (F.col("n_resp") >= 2) & (F.col("n_top") == 1))
    per_collection: pd.DataFrame = (
        examples.groupBy("dataset", "prompt_variant")
        .agg(
            F.sum((F.col("n_resp") < 2).cast("long")).alias("few"),
            F.sum(((F.col("n_resp") >= 2) & (F.col("n_top") != 1)).cast("long")).alias("no_chosen"),
            F.sum(F.col("kept").cast("long")).alias("kept"),
        )
        .toPandas()
    )
    orphans = rows.where(F.col("response").isNull()).count()
    kept = rows.where(F.col("response").isNotNull()).join(
        examples.where("kept").select(*example), on=example, how="inner"
    )
    # (2) per collection and tier over its kept examples: widths and token totals
    per_tier: pd.DataFrame = (
        kept.groupBy("dataset", "prompt_variant", "judge_id")
        .agg(
            (F.max("sample") + 1).alias("samples"),
            (F.max("response") + 1).alias("responses"),
            F.sum("input_tokens").alias("input_tokens"),
            F.sum("output_tokens").alias("output_tokens"),
        )
        .toPandas()
    )
    bad = BadInput()
    ingest_counts(data_url, bad, options)
    if orphans:
        bad.add("verdicts_without_item_row", int(orphans))
    n_examples = {}
    for r in per_collection.sort_values(["dataset", "prompt_variant"]).itertuples():
        bad.add("fewer_than_two_responses", int(r.few))
        bad.add("no_unique_chosen_response", int(r.no_chosen))
        n_examples[(r.dataset, r.prompt_variant)] = int(r.kept)
    widths: dict[tuple[str, str], dict[str, Any]] = {}
    for r in per_tier.sort_values(["dataset", "prompt_variant", "judge_id"], kind="stable").itertuples():
        key = (str(r.dataset), str(r.prompt_variant))
        entry = widths.setdefault(key, {"responses": 0, "samples": {}, "tokens": {}})
        entry["responses"] = max(entry["responses"], int(r.responses))
        entry["samples"][str(r.judge_id)] = int(r.samples)
        entry["tokens"][str(r.judge_id)] = (float(r.input_tokens or 0.0), float(r.output_tokens or 0.0))
        bad.samples_per_tier.setdefault(key[0], {})[str(r.judge_id)] = int(r.samples)
    tiers = {key: sorted(entry["samples"]) for key, entry in sorted(widths.items())}
    matched = policy.matched(data_url, tiers)  # refused here, before the routing pass
    shapes = {}
    for key, entry in widths.items():  # every collection: the reader counts bad input in the ones without policy too
        costs = None
        if key in matched:
            costs = tuple(
                policy.tier_cost(t, entry["tokens"][t][0], entry["tokens"][t][1], n_examples[key], entry["samples"][t])
                for t in (policy.cheap_tier, policy.full_tier)
            )
        shapes[key] = (entry["responses"], entry["samples"], costs)
    # (3) the reader's tensors and the policy's routing, one partition of whole examples at a time
    kernel = functools.partial(_route_partition, policy=policy, shapes=shapes)
    parts = max(1, 2 * spark.sparkContext.defaultParallelism)
    out = kept.repartition(parts, *example).mapInArrow(kernel, arrow_ddl(ROUTE_SCHEMA)).toArrow()
    for text in out.filter(pc.is_valid(out["bad_input"]))["bad_input"].to_pylist():
        part = json.loads(text)
        for kind, n in part["counts"].items():
            if kind not in ("fewer_than_two_responses", "no_unique_chosen_response"):  # counted in pass (1)
                bad.add(kind, n, part["examples"].get(kind))
    routed = out.filter(pc.is_null(out["bad_input"])).drop_columns(["bad_input"])
    return routed, tiers, bad


def _route_partition(
    batches: Iterator[pa.RecordBatch], *, policy: Any, shapes: dict[tuple[str, str], Any]
) -> Iterator[pa.RecordBatch]:
    """Route the whole examples of one partition (every row of an example is in one partition)."""
    frame = pa.Table.from_batches(list(batches)).to_pandas()
    bad = BadInput()
    for (dataset, variant), rows in frame.groupby(["dataset", "prompt_variant"], sort=True):
        responses, samples, costs = shapes[(dataset, variant)]
        found = collection_of(
            str(dataset), str(variant), rows, bad, policy.score_range, n_responses=responses, n_samples=samples
        )
        if costs is None or found is None or not {policy.cheap_tier, policy.full_tier} <= set(found.tiers):
            continue  # a collection without policy, or no example of this partition has rows of both tiers
        table = policy.route(found, policy.thresholds[(dataset, variant)], costs)
        yield from table.append_column("bad_input", pa.nulls(table.num_rows, pa.string())).to_batches()
    counts = {"counts": bad.counts, "examples": bad.examples}
    yield pa.RecordBatch.from_pylist([{"bad_input": json.dumps(counts)}], schema=ROUTE_SCHEMA)
