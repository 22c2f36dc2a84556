"""``label select`` on Spark: the candidates, their global sums, the largest weights and the draw, each a small
result to the driver.

The scored items (the scoring path's ``mapInArrow`` over the packed item votes) are joined with the labelled items
and earlier queues (flags, ``how="left"``) and with the strata columns of the ``items`` table, and persisted; then

1. one ``groupBy(stratum, flags)`` gives the counts and, per stratum, the items and :math:`\\sum\\sqrt{p(1-p)}`
   (:func:`stratum_sums`);
2. the ``k`` largest weights (``k`` about the budget) under the planned coefficients (:func:`top_weights`);
3. the draw's expected size and, with costs, :math:`\\sum p(1-p)(1/\\pi - 1)` (:func:`design_sums`);
4. the draw: a ``mapInArrow`` computing each item's probability and its keyed uniform with the very numpy code of
   the in-process path (:func:`draw_partition`), returning only the selected rows (:func:`draw`).

Item keys are Spark's ``xxhash64(concat_ws("\\x00", dataset, item_id))``, equal to
:func:`judgecal_dist.methods.labels.sampling.item_keys`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import scorer
from judgecal_dist.methods.labels.sampling import ITEM_KEY_SEPARATOR, Design, StratumWeights
from judgecal_dist.splits import split_uniforms

__all__ = ["candidates", "stratum_sums", "top_weights", "design_sums", "draw", "draw_partition"]

_KEYS = ["dataset", "item_id"]


def candidates(
    engine: EngineConfig,
    data_url: str,
    items: DataFrame,
    score: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    scored_ddl: str,
    *,
    strata: Sequence[str],
    earlier: pa.Table,
    everything: str,
) -> DataFrame:
    """Scored items with ``p``, ``sigma``, ``labelled``, ``queued``, ``stratum``, ``key`` and the strata columns
    (persisted: the sums, the top weights and the draw read it)."""
    spark = scorer.session(engine)
    rows = items.mapInArrow(score, scored_ddl).select("dataset", "item_id", "p")
    labels = scorer.read_table(spark, data_url, "labels").where(F.col("label").isNotNull())
    rows = rows.join(labels.select(*_KEYS, F.lit(True).alias("labelled")), on=_KEYS, how="left")
    if earlier.num_rows:
        queued = spark.createDataFrame(earlier.select(_KEYS).to_pandas()).withColumn("queued", F.lit(True))
        rows = rows.join(F.broadcast(queued), on=_KEYS, how="left")
    else:
        rows = rows.withColumn("queued", F.lit(None).cast("boolean"))
    columns = [c for c in strata if c != "dataset"]
    if columns:
        extra = scorer.read_table(spark, data_url, "items").select(*_KEYS, *columns)
        rows = rows.join(extra, on=_KEYS, how="left")
    parts = [F.concat(F.lit(f"{c}="), F.coalesce(F.col(c).cast("string"), F.lit(""))) for c in strata]
    stratum = F.concat_ws("|", *parts) if parts else F.lit(everything)
    return rows.select(
        *_KEYS,
        "p",
        F.sqrt(F.greatest(F.col("p") * (1.0 - F.col("p")), F.lit(0.0))).alias("sigma"),
        F.coalesce("labelled", F.lit(False)).alias("labelled"),
        F.coalesce("queued", F.lit(False)).alias("queued"),
        stratum.alias("stratum"),
        F.xxhash64(F.concat_ws(ITEM_KEY_SEPARATOR, *_KEYS)).alias("key"),
        *columns,
    ).persist()


def open_rows(rows: DataFrame) -> DataFrame:
    """The candidates among the rows: scored, unlabelled, in no earlier queue."""
    return rows.where(~F.col("labelled") & ~F.col("queued") & F.col("p").isNotNull())


def stratum_sums(rows: DataFrame) -> pd.DataFrame:
    """One row per (stratum, labelled, queued, scored): items, sum of sigma and of p (one aggregation)."""
    scored = F.col("p").isNotNull().alias("scored")
    sums = rows.groupBy("stratum", "labelled", "queued", scored).agg(
        F.count(F.lit(1)).alias("n"), F.sum("sigma").alias("sigma_sum"), F.sum("p").alias("p_sum")
    )
    return sums.toPandas()


def _weight(coef: StratumWeights, names: Sequence[str]) -> Any:
    """The weight expression :math:`w_i = base + slope_h \\sigma_i + const_h`, in numpy's order of operations."""
    slope = F.create_map(*[x for h, name in enumerate(names) for x in (F.lit(name), F.lit(float(coef.slope[h])))])
    const = F.create_map(*[x for h, name in enumerate(names) for x in (F.lit(name), F.lit(float(coef.const[h])))])
    return F.lit(coef.base) + slope[F.col("stratum")] * F.col("sigma") + const[F.col("stratum")]


def top_weights(rows: DataFrame, names: Sequence[str], coef: StratumWeights, k: int) -> np.ndarray:
    """The ``k`` largest candidate weights (``k`` is about the budget: a few values to the driver)."""
    weights = open_rows(rows).select(_weight(coef, names).alias("w"))
    return np.array([r["w"] for r in weights.orderBy(F.col("w").desc()).limit(k).collect()], dtype=np.float64)


def design_sums(rows: DataFrame, design: Design) -> dict[str, float]:
    """Over the candidates, one aggregation: :math:`\\sum\\pi_i` and :math:`\\sum\\pi_i(1-\\pi_i)` (the draw's
    expected size and its variance) and :math:`\\sum p_i(1-p_i)(1/\\pi_i - 1)` (the design's variance x N^2)."""
    w = _weight(design.coef, design.names)
    pi = F.least(F.lit(1.0), w * F.lit(design.scale)) if np.isfinite(design.scale) else F.lit(1.0)
    row = (
        open_rows(rows)
        .select(pi.alias("pi"), "p")
        .agg(
            F.sum("pi").alias("pi_sum"),
            F.sum(F.col("pi") * (1.0 - F.col("pi"))).alias("pi_var"),
            F.sum(F.col("p") * (1.0 - F.col("p")) * (1.0 / F.col("pi") - 1.0)).alias("variance"),
        )
        .collect()[0]
    )
    return {k: float(row[k] or 0.0) for k in ("pi_sum", "pi_var", "variance")}


def draw_partition(
    batches: Iterator[pa.RecordBatch], design: Design, seed: int, columns: Sequence[str]
) -> Iterator[pa.RecordBatch]:
    """The selected items of a partition: :meth:`Design.probabilities` and the keyed uniforms of
    :func:`~judgecal_dist.methods.labels.sampling.draw_mask` (the in-process path's numpy code)."""
    code_of = {name: h for h, name in enumerate(design.names)}
    for batch in batches:
        if not batch.num_rows:
            continue
        p = batch.column("p").to_numpy(zero_copy_only=False)
        codes = np.array([code_of[s] for s in batch.column("stratum").to_pylist()], dtype=np.int64)
        pi = design.probabilities(p, codes)
        mask = split_uniforms(batch.column("key").to_numpy(zero_copy_only=False), [seed])[0] < pi
        if mask.any():
            keep = pa.array(mask)
            out = {c: batch.column(c).filter(keep) for c in ("dataset", "item_id")}
            out |= {"inclusion_prob": pa.array(pi[mask]), "stratum": batch.column("stratum").filter(keep)}
            out |= {"p": batch.column("p").filter(keep)} | {c: batch.column(c).filter(keep) for c in columns}
            yield pa.RecordBatch.from_pydict(out)


def draw(rows: DataFrame, design: Design, seed: int, strata: Sequence[str]) -> pa.Table:
    """The selected candidates (``dataset, item_id, inclusion_prob, stratum, p`` and the strata columns)."""
    columns = [c for c in strata if c != "dataset"]
    picked = open_rows(rows).select(*_KEYS, "p", "stratum", "key", *columns)
    types = {f.name: f.dataType.simpleString() for f in picked.schema.fields}
    ddl = ", ".join(
        [
            "dataset string, item_id string, inclusion_prob double, stratum string, p double",
            *(f"`{c}` {types[c]}" for c in columns),
        ]
    )
    fn = functools.partial(draw_partition, design=design, seed=seed, columns=columns)
    return picked.mapInArrow(fn, ddl).toArrow()
