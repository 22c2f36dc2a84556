r"""``judgecal.escalation/v2``: the ensemble study's hard variance routing (cheap tier -> full tier) as data.

Per collection (``dataset``, ``prompt_variant`` of an ingested ``rb2-k8`` score dataset): the tier order
(``cheap_tier`` first, escalating to ``full_tier``), the threshold :math:`\theta` on the cheap tier's dispersion
chosen on the study's cost-accuracy frontier, and the tiers' prices ($ per million input/output tokens). A
response uses the full tier's mean where the cheap tier's dispersion is at least :math:`\theta` (and a full mean
exists), else the cheap mean; the example's verdict is the strict winner of the response means
(:func:`~judgecal_dist.methods.repeated.routing.hard_route`,
:func:`~judgecal_dist.methods.repeated.ensemble.winner_outcome`), and its cost is the study's:
:math:`C = \bar C_{\mathrm{cheap}} + p_{\mathrm{esc}}\,\bar C_{\mathrm{full}}`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import InputError
from judgecal_dist.methods.repeated import ensemble as ens
from judgecal_dist.methods.repeated.routing import hard_route
from judgecal_dist.models.documents import EscalationDoc

__all__ = ["FORMAT", "KIND", "EscalationPolicy", "from_document", "policy_from_frontier"]

FORMAT = "judgecal.escalation/v2"
KIND = "escalation"
#: The order of scored rows on both engines (the in-process reader keeps file order, which Spark does not know).
_ORDER = ("dataset", "prompt_variant", "subset", "example_id")


@dataclass(frozen=True)
class EscalationPolicy:
    """Hard variance routing per collection, ready to score an ingested score dataset.

    Attributes
    ----------
    cheap_tier, full_tier : str
    prices : dict of str to (float, float)
        $ per million (input, output) tokens of each tier.
    thresholds : dict of (str, str) to float
        :math:`\\theta` per (dataset, prompt_variant).
    score_range : (float, float)
    """

    cheap_tier: str
    full_tier: str
    prices: dict[str, tuple[float, float]]
    thresholds: dict[tuple[str, str], float]
    score_range: tuple[float, float] = (1.0, 10.0)
    source: str = ""
    digest: str = ""
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    kind = KIND

    @property
    def name(self) -> str:
        return str(self.document.get("name") or f"hard variance routing {self.cheap_tier} -> {self.full_tier}")

    @property
    def judge_ids(self) -> list[str]:
        return [self.cheap_tier, self.full_tier]

    def tier_cost(self, name: str, input_tokens: float, output_tokens: float, examples: int, samples: int) -> float:
        """Mean cost per example of tier ``name`` over a collection of ``examples`` from its token totals (sums of
        integer token counts: exact in any order, so both engines give the same number)."""
        p_in, p_out = self.prices[name]
        total = ens.example_cost(
            input_tokens, output_tokens, k=samples, n_collected=samples, price_in=p_in, price_out=p_out
        )
        return float(total) / examples if examples else float("nan")

    def _costs(self, collection: Any) -> tuple[float, float]:
        cheap, full = collection.tiers[self.cheap_tier], collection.tiers[self.full_tier]
        n = collection.n_examples
        return (
            self.tier_cost(
                self.cheap_tier, float(cheap.input_tokens.sum()), float(cheap.output_tokens.sum()), n, cheap.n_samples
            ),
            self.tier_cost(
                self.full_tier, float(full.input_tokens.sum()), float(full.output_tokens.sum()), n, full.n_samples
            ),
        )

    def route(self, collection: Any, theta: float, costs: tuple[float, float] | None = None) -> pa.Table:
        """Every example of ``collection`` that both tiers scored: escalated responses, routed winner (null when
        the means tie or one is undefined), and the collection's mean cost per example of each tier (``costs``:
        given when ``collection`` holds only some of the examples, as on Spark)."""
        cheap_t, full_t = collection.tiers[self.cheap_tier], collection.tiers[self.full_tier]
        both = cheap_t.present & full_t.present
        cheap, full, chosen = cheap_t.scores[both], full_t.scores[both], collection.chosen[both]
        sigma = ens.dispersion(cheap)
        c_mean, f_mean = ens.prefix_means(cheap, cheap.shape[2]), ens.prefix_means(full, full.shape[2])
        means, escalated = hard_route(c_mean, f_mean, sigma, theta)
        out = ens.winner_outcome(means, chosen)
        best = np.argmax(np.where(np.isnan(means), -np.inf, means), axis=1)
        n = len(chosen)
        cost_cheap, cost_full = costs if costs is not None else self._costs(collection)
        return pa.table(
            {
                "dataset": pa.array([collection.dataset] * n, pa.string()),
                "prompt_variant": pa.array([collection.prompt_variant] * n, pa.string()),
                "subset": pa.array(collection.subsets[both].astype(str), pa.string()),
                "example_id": pa.array(collection.example_ids[both].astype(str), pa.string()),
                "theta": pa.array(np.full(n, theta)),
                "responses": pa.array(np.full(n, means.shape[1], dtype=np.int64)),
                "escalated": pa.array(escalated.sum(axis=1).astype(np.int64)),
                "winner": pa.array(best.astype(np.int64), mask=~out.evaluable | out.tied),
                "chosen": pa.array(chosen.astype(np.int64)),
                "evaluable": pa.array(out.evaluable),
                "correct": pa.array(out.correct),
                "cost_cheap": pa.array(np.full(n, cost_cheap)),
                "cost_full": pa.array(np.full(n, cost_full)),
            }
        )

    # -- score's table interface (judgecal_dist.models.interface.TableModel) -----------------------------------
    def score_table(
        self,
        data_url: str,
        *,
        engine: EngineConfig,
        engine_name: str,
        unknown_judges: str,
        min_judge_coverage: float,
    ) -> tuple[pa.Table, dict[str, Any]]:
        """Routed examples of every collection of ``data_url`` that the policy names, sorted by (dataset,
        prompt_variant, subset, example_id), and the counts for the summary (nothing written).

        In process the collections are read into dense tensors (:func:`~judgecal_dist.io.score_collections.
        load_collections`) and routed; on Spark (``engine_name="spark"``) the examples are reduced where the data
        lies and only one row per example reaches the driver (:func:`_routes_spark`). Both run the same routing
        code and give the same rows. The tiers are the policy's judges: ``unknown_judges`` and
        ``min_judge_coverage`` do not apply (a collection without one of its tiers is refused).
        """
        from judgecal_dist.io.score_collections import load_collections

        if engine_name == "spark":
            table, tiers, bad = _routes_spark(self, data_url, engine)
        else:
            collections, bad = load_collections(
                data_url, score_range=self.score_range, storage_options=dict(engine.storage_options)
            )
            tiers = {(c.dataset, c.prompt_variant): sorted(c.tiers) for c in collections}
            matched = self.matched(data_url, tiers)
            keys = [(c.dataset, c.prompt_variant) for c in collections]
            table = pa.concat_tables(
                [
                    self.route(c, self.thresholds[key])
                    for c, key in zip(collections, keys, strict=True)
                    if key in matched
                ]
            )
        table = table.sort_by([(c, "ascending") for c in _ORDER])
        matched = self.matched(data_url, tiers)
        info = {
            "items": int(table.num_rows),
            "collections": len(matched),
            "collections_without_policy": sorted(f"{d}/{p}" for d, p in tiers if (d, p) not in matched),
            "bad_input": bad.as_dict(),
        }
        return table, info

    def matched(self, data_url: str, tiers: Mapping[tuple[str, str], Sequence[str]]) -> list[tuple[str, str]]:
        """The collections (keys of ``tiers``: their tiers) that the policy names; refuses a table without any, or
        a named collection without one of the routed tiers."""
        matched = sorted(key for key in tiers if key in self.thresholds)
        if not matched:
            have = sorted(f"{d}/{p}" for d, p in tiers)
            raise InputError(
                f"{data_url}: items: no collection the policy names ({sorted(f'{d}/{p}' for d, p in self.thresholds)}; "
                f"the data has {have[:4]}): score the dataset the ensemble study ran on, or export a policy from a "
                "run on this one"
            )
        for dataset, variant in matched:
            missing = [t for t in (self.cheap_tier, self.full_tier) if t not in tiers[(dataset, variant)]]
            if missing:
                raise InputError(
                    f"{data_url}: verdicts: judge_id: collection {dataset}/{variant} has no {missing[0]!r} tier "
                    f"(tiers: {sorted(tiers[(dataset, variant)])}); the policy routes {self.cheap_tier} -> "
                    f"{self.full_tier}"
                )
        return matched

    def summaries(self, table: pa.Table) -> dict[str, pd.DataFrame]:
        """Per collection: threshold, evaluable examples, accuracy, escalation fraction and cost per example (the
        study's sweep formula: mean cheap cost + escalation fraction x mean full cost)."""
        frame = table.drop(["winner"]).to_pandas()
        out = frame.groupby(["dataset", "prompt_variant"], sort=True).agg(
            theta=("theta", "first"),
            n=("evaluable", "sum"),
            correct=("correct", "sum"),
            escalated=("escalated", "sum"),
            responses=("responses", "sum"),
            cost_cheap=("cost_cheap", "first"),
            cost_full=("cost_full", "first"),
        )
        out["accuracy"] = out["correct"] / out["n"].where(out["n"] > 0)
        out["p_escalate"] = out["escalated"] / out["responses"]
        out["cost"] = out["cost_cheap"] + out["p_escalate"] * out["cost_full"]
        out["cost_ratio"] = out["cost"] / (out["cost_cheap"] + out["cost_full"])
        return {"collections": out.drop(columns=["correct", "escalated", "responses"]).reset_index()}


def policy_from_frontier(
    frontiers: Sequence[Mapping[str, Any]],
    *,
    cheap_tier: str,
    full_tier: str,
    prices: Mapping[str, Sequence[float]],
    rule: str = "auto",
    score_range: Sequence[float] = (1.0, 10.0),
    fitted_on: dict[str, Any] | None = None,
) -> EscalationPolicy:
    """The policy that takes, on each collection's frontier (``dataset, prompt_variant, frontier`` records of
    ``theta, accuracy, cost, ...``), the threshold of ``rule``: ``auto`` the cheapest point within one accuracy
    point of the frontier's best, ``most_accurate`` the best (cheapest among equals), ``cheapest`` the cheapest."""
    entries = []
    for f in frontiers:
        points = pd.DataFrame(f["frontier"]).sort_values("cost", kind="stable")
        if points.empty:
            continue
        top = points["accuracy"].max()
        pick = {
            "auto": points[points["accuracy"] >= top - 0.01].iloc[0],
            "most_accurate": points[points["accuracy"] == top].iloc[0],
            "cheapest": points.iloc[0],
        }[rule]
        entries.append(
            {
                "dataset": str(f["dataset"]),
                "prompt_variant": str(f["prompt_variant"]),
                "theta": float(pick["theta"]),
                "accuracy": float(pick["accuracy"]),
                "p_escalate": float(pick["p_escalate"]),
                "cost": float(pick["cost"]),
            }
        )
    doc = {
        "format": FORMAT,
        "name": f"hard variance routing {cheap_tier} -> {full_tier} ({rule})",
        "policy": "hard_variance",
        "rule": rule,
        "cheap_tier": cheap_tier,
        "full_tier": full_tier,
        "prices": {t: [float(v) for v in prices[t]] for t in (cheap_tier, full_tier)},
        "score_range": [float(v) for v in score_range],
        "collections": entries,
        "fitted_on": dict(fitted_on or {}),
    }
    return from_document(EscalationDoc.model_validate(doc), doc)


def from_document(doc: EscalationDoc, raw: dict[str, Any], *, source: str = "", digest: str = "") -> EscalationPolicy:
    """The policy of a validated document."""
    return EscalationPolicy(
        cheap_tier=doc.cheap_tier,
        full_tier=doc.full_tier,
        prices={t: (float(p[0]), float(p[1])) for t, p in doc.prices.items()},
        thresholds={(c.dataset, c.prompt_variant): float(c.theta) for c in doc.collections},
        score_range=(float(doc.score_range[0]), float(doc.score_range[1])),
        source=source,
        digest=digest,
        document=raw,
    )


if TYPE_CHECKING:  # mypy checks that the kind implements score's table interface
    from judgecal_dist.models.interface import TableModel

    _IMPLEMENTS: type[TableModel] = EscalationPolicy


# -- Spark -------------------------------------------------------------------------------------------------------
#: The routed rows' schema (:meth:`EscalationPolicy.route`) plus, on one row per Spark partition, that partition's
#: bad-input counts as JSON (every other column null).
_ROUTE_SCHEMA = pa.schema(
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


def _routes_spark(
    policy: EscalationPolicy, data_url: str, engine: EngineConfig
) -> tuple[pa.Table, dict[tuple[str, str], list[str]], Any]:
    """Route every example of ``data_url`` on Spark: the routed rows, each collection's tiers, the bad input.

    Three passes, none item-level in the driver: (1) per example, its responses and whether it has a unique
    chosen one (the reader's rules: at least two responses and one at the top label score); (2) per collection
    and tier over the kept examples, the tensors' widths (responses, samples) and the token totals of the cost;
    (3) the kept examples' verdict rows, partitioned by example, go through the reader's own
    :func:`~judgecal_dist.io.score_collections.collection_of` (with the whole collection's widths) and
    :meth:`EscalationPolicy.route` (with the whole collection's costs) in each partition, so the rows equal the
    in-process ones. Bad-input counts are the reader's; their example lists may name other examples.
    """
    import json

    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    from judgecal_dist.engine.jobs.spark import get_session, read_table
    from judgecal_dist.io.score_collections import (
        ITEM_COLUMNS,
        VERDICT_COLUMNS,
        BadInput,
        ingest_counts,
        require_items,
    )

    options = dict(engine.storage_options)
    require_items(data_url, options)
    spark = get_session(engine.spark_master, conf=dict(engine.spark_conf))
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
    ddl = ", ".join(f"`{f.name}` {from_arrow_type(f.type).simpleString()}" for f in _ROUTE_SCHEMA)
    parts = max(1, 2 * spark.sparkContext.defaultParallelism)
    out = kept.repartition(parts, *example).mapInArrow(kernel, ddl).toArrow()
    for text in out.filter(pc.is_valid(out["bad_input"]))["bad_input"].to_pylist():
        part = json.loads(text)
        for kind, n in part["counts"].items():
            if kind not in ("fewer_than_two_responses", "no_unique_chosen_response"):  # counted in pass (1)
                bad.add(kind, n, part["examples"].get(kind))
    routed = out.filter(pc.is_null(out["bad_input"])).drop_columns(["bad_input"])
    return routed, tiers, bad


def _route_partition(
    batches: Iterator[pa.RecordBatch], *, policy: EscalationPolicy, shapes: dict[tuple[str, str], Any]
) -> Iterator[pa.RecordBatch]:
    """Route the whole examples of one partition (every row of an example is in one partition)."""
    import json

    from judgecal_dist.io.score_collections import BadInput, collection_of

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
    yield pa.RecordBatch.from_pylist([{"bad_input": json.dumps(counts)}], schema=_ROUTE_SCHEMA)
