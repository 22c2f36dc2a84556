"""Jobs of the repeated-sample studies, on Spark or in memory, equal exactly (spec 004 §3.1-3.2, spec 003 §3.1).

``accuracy_by_k``       per (dataset, judge): evaluable examples, correct ones and ties of the strict-winner rule
                        for every prefix length k, in one pass (the accuracy-vs-k curve of a table of any size);
``budget_vote_counts``  per-item vote counts ``(n_A, n_tie, n_B)`` of the first ``n`` samples for every budget
                        ``n``, through the engine's vote-count job (:func:`engine.spark.item_vote_counts_spark`,
                        :func:`engine.local.item_vote_counts_arrow`) on sample-filtered verdicts.

An example is a ``group_id``; its responses are its items; the chosen response is the item whose ``label_score``
is 1.0 (the rb2-k8 labels). An example is evaluable at k when it has at least two items, exactly one chosen, and
every item has a non-null score among samples ``0..k-1``; it is correct when the chosen item's mean is strictly
above every other item's, tied when two items share the maximum mean. Means are sums over counts on both engines,
so integer scores give bit-identical comparisons.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import local, spark
from judgecal_dist.engine.jobs.stats import choose_engine
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.dataset import read_dataset_table

__all__ = ["accuracy_by_k", "accuracy_by_k_spark", "accuracy_by_k_arrow", "budget_vote_counts"]

log = logging.getLogger(__name__)

_SCORE_COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "sample", "score"]
_CURVE_COLUMNS = ["dataset", "judge_id", "k", "rows", "n", "correct", "n_tied"]
_VOTE_COLUMNS = ["dataset", "item_id", "judge_id", "n_A", "n_tie", "n_B", "n_missing"]


def _check_k(k_max: int | None) -> None:
    if k_max is not None and (not isinstance(k_max, int) or k_max < 1):
        raise ConfigError(f"k_max: must be a positive integer, got {k_max!r}")


def accuracy_by_k_spark(verdicts: DataFrame, labels: DataFrame, k_max: int | None = None) -> pd.DataFrame:
    """:func:`accuracy_by_k` in Spark: two ``groupBy`` shuffles, one small row per (dataset, judge) collected.

    Notes
    -----
    Stage 1 sums each item's scores and non-null counts over every prefix (2K conditional aggregates, one shuffle
    keyed by item); stage 2 joins the chosen flag and reduces each example to its per-k outcome (one shuffle
    keyed by example; the top two means come from a sorted list of at most ``responses`` values); stage 3 sums
    outcomes per (dataset, judge). Nothing item-level reaches the driver.
    """
    if k_max is None:
        top = verdicts.agg(F.max("sample")).first()
        assert top is not None  # an aggregate without grouping has one row
        k_max = int(top[0]) + 1
    ks = range(1, k_max + 1)
    inside = {k: F.col("sample") < k for k in ks}
    per_item = (
        verdicts.select(*_SCORE_COLUMNS)
        .groupBy("dataset", "judge_id", "group_id", "item_id")
        .agg(
            *[F.sum(F.when(inside[k], F.col("score"))).alias(f"sum_{k}") for k in ks],
            *[F.count(F.when(inside[k], F.col("score"))).alias(f"cnt_{k}") for k in ks],
        )
    )
    chosen = labels.select("dataset", "item_id", F.coalesce(F.col("label_score") == 1.0, F.lit(False)).alias("chosen"))
    means = per_item.join(chosen, on=["dataset", "item_id"], how="left").select(
        "dataset",
        "judge_id",
        "group_id",
        F.coalesce(F.col("chosen"), F.lit(False)).alias("chosen"),
        *[F.when(F.col(f"cnt_{k}") > 0, F.col(f"sum_{k}") / F.col(f"cnt_{k}")).alias(f"m_{k}") for k in ks],
    )
    per_example = means.groupBy("dataset", "judge_id", "group_id").agg(
        F.count(F.lit(1)).alias("items"),
        F.sum(F.col("chosen").cast("int")).alias("n_chosen"),
        *[F.count(F.col(f"m_{k}")).alias(f"def_{k}") for k in ks],
        *[F.max(F.when(F.col("chosen"), F.col(f"m_{k}"))).alias(f"own_{k}") for k in ks],
        *[F.max(F.when(~F.col("chosen"), F.col(f"m_{k}"))).alias(f"other_{k}") for k in ks],
        *[F.sort_array(F.collect_list(f"m_{k}"), asc=False).alias(f"top_{k}") for k in ks],
    )
    ok = (F.col("items") >= 2) & (F.col("n_chosen") == 1)
    outcome = []
    for k in ks:
        evaluable = ok & (F.col(f"def_{k}") == F.col("items"))
        outcome += [
            evaluable.cast("long").alias(f"n_{k}"),
            (evaluable & (F.col(f"own_{k}") > F.col(f"other_{k}"))).cast("long").alias(f"correct_{k}"),
            (evaluable & (F.element_at(f"top_{k}", 1) == F.element_at(f"top_{k}", 2))).cast("long").alias(f"tied_{k}"),
        ]
    totals = (
        per_example.select("dataset", "judge_id", *outcome)
        .groupBy("dataset", "judge_id")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            *[F.sum(c).alias(c) for k in ks for c in (f"n_{k}", f"correct_{k}", f"tied_{k}")],
        )
        .toPandas()  # one row per (dataset, judge)
    )
    return _long(totals, ks)


def _long(totals: pd.DataFrame, ks: Sequence[int]) -> pd.DataFrame:
    rows = [
        {
            "dataset": r["dataset"],
            "judge_id": r["judge_id"],
            "k": k,
            "rows": int(r["rows"]),
            "n": int(r[f"n_{k}"]),
            "correct": int(r[f"correct_{k}"]),
            "n_tied": int(r[f"tied_{k}"]),
        }
        for r in totals.to_dict("records")
        for k in ks
    ]
    frame = pd.DataFrame(rows, columns=_CURVE_COLUMNS)
    return frame.sort_values(["dataset", "judge_id", "k"], kind="stable").reset_index(drop=True)


def accuracy_by_k_arrow(verdicts: pa.Table, labels: pa.Table, k_max: int | None = None) -> pd.DataFrame:
    """:func:`accuracy_by_k` in memory: prefix sums per item by ``cumsum``, per-example reductions by ``reduceat``."""
    frame = verdicts.select(_SCORE_COLUMNS).to_pandas()
    chosen = labels.select(["dataset", "item_id", "label_score"]).to_pandas()
    chosen = chosen.assign(chosen=chosen["label_score"].eq(1.0)).drop(columns="label_score")
    if k_max is None:
        k_max = int(frame["sample"].max()) + 1
    keys = ["dataset", "judge_id", "group_id", "item_id"]
    item_code = frame.groupby(keys, sort=False).ngroup().to_numpy()  # numbered in order of first appearance
    items = frame.loc[~pd.Series(item_code).duplicated().to_numpy(), keys]
    inside = frame["sample"].to_numpy() < k_max
    dense = np.full((len(items), k_max), np.nan)
    dense[item_code[inside], frame["sample"].to_numpy()[inside]] = frame["score"].to_numpy()[inside]
    sums = np.cumsum(np.nan_to_num(dense), axis=1)
    cnts = np.cumsum(~np.isnan(dense), axis=1)
    means = np.divide(sums, cnts, out=np.full(sums.shape, np.nan), where=cnts > 0)
    meta = items.merge(chosen, on=["dataset", "item_id"], how="left", validate="many_to_one")
    own = meta["chosen"].fillna(False).to_numpy(dtype=bool)
    order = np.lexsort((meta["group_id"], meta["judge_id"], meta["dataset"]))
    meta, means, own = meta.iloc[order].reset_index(drop=True), means[order], own[order]
    key = meta[["dataset", "judge_id", "group_id"]]
    starts = np.flatnonzero(np.r_[True, (key.iloc[1:].to_numpy() != key.iloc[:-1].to_numpy()).any(axis=1)])
    n_items = np.diff(np.r_[starts, len(meta)])
    n_chosen = np.add.reduceat(own.astype(np.int64), starts)
    filled = np.where(np.isnan(means), -np.inf, means)
    top = np.maximum.reduceat(filled, starts, axis=0)
    at_top = np.add.reduceat((filled == np.repeat(top, n_items, axis=0)).astype(np.int64), starts, axis=0)
    defined = np.add.reduceat((~np.isnan(means)).astype(np.int64), starts, axis=0)
    own_mean = np.maximum.reduceat(np.where(own[:, None], filled, -np.inf), starts, axis=0)
    other = np.maximum.reduceat(np.where(own[:, None], -np.inf, filled), starts, axis=0)
    evaluable = ((n_items >= 2) & (n_chosen == 1))[:, None] & (defined == n_items[:, None])
    outcome = pd.DataFrame(
        {"dataset": meta["dataset"].to_numpy()[starts], "judge_id": meta["judge_id"].to_numpy()[starts]}
    )
    for k in range(1, k_max + 1):
        e = evaluable[:, k - 1]
        outcome[f"n_{k}"] = e.astype(np.int64)
        outcome[f"correct_{k}"] = (e & (own_mean[:, k - 1] > other[:, k - 1])).astype(np.int64)
        outcome[f"tied_{k}"] = (e & (at_top[:, k - 1] > 1)).astype(np.int64)
    totals = (
        outcome.groupby(["dataset", "judge_id"], as_index=False)
        .sum()
        .assign(rows=outcome.groupby(["dataset", "judge_id"]).size().to_numpy())
    )
    return _long(totals, range(1, k_max + 1))


def accuracy_by_k(
    source: str | SparkSession,
    *,
    k_max: int | None = None,
    engine: str | None = None,
    config: EngineConfig | None = None,
) -> pd.DataFrame:
    """Strict-winner accuracy counts for every prefix length k, per (dataset, judge) (module docstring).

    Parameters
    ----------
    source : str or SparkSession
        Dataset root URL, or a session whose views ``verdicts`` and ``labels`` hold the tables.
    k_max : int, optional
        Largest prefix (default: the largest sample index + 1).
    engine : {"auto", "spark", "local"}, optional
        Default ``config.stats_engine``; ``auto`` runs tables below ``config.local_max_rows`` rows in memory.
    config : EngineConfig, optional

    Returns
    -------
    DataFrame
        ``dataset, judge_id, k, rows, n, correct, n_tied``; accuracy is ``correct / n``.

    Examples
    --------
    >>> accuracy_by_k(url, k_max=8, engine="spark")  # doctest: +SKIP
    """
    _check_k(k_max)
    config = config or EngineConfig()
    if choose_engine(source, engine, config) == "spark":
        if isinstance(source, SparkSession):
            return accuracy_by_k_spark(source.table("verdicts"), source.table("labels"), k_max)
        session = spark.get_session(config.spark_master, conf=dict(config.spark_conf))
        return accuracy_by_k_spark(
            spark.read_table(session, source, "verdicts"), spark.read_table(session, source, "labels"), k_max
        )
    assert isinstance(source, str)  # choose_engine runs a SparkSession source on Spark
    options = config.storage_options
    verdicts = read_dataset_table(source, "verdicts", _SCORE_COLUMNS, storage_options=options)
    labels = read_dataset_table(source, "labels", ["dataset", "item_id", "label_score"], storage_options=options)
    return accuracy_by_k_arrow(verdicts, labels, k_max)


def budget_vote_counts(
    source: str | pa.Table,
    budgets: Sequence[int],
    *,
    engine: str | None = None,
    config: EngineConfig | None = None,
) -> pd.DataFrame:
    """Per-item vote counts of the first ``n`` samples, for every budget ``n`` (spec 003 §3.1).

    Parameters
    ----------
    source : str or pyarrow.Table
        Dataset root URL, or verdict rows in memory (columns ``dataset, item_id, judge_id, sample, verdict,
        score``; ``auto`` counts them in memory below ``config.local_max_rows`` rows).
    budgets : sequence of int
        Sample budgets (positive).
    engine : {"auto", "spark", "local"}, optional
        Default ``config.stats_engine``.
    config : EngineConfig, optional

    Returns
    -------
    DataFrame
        ``budget, dataset, item_id, judge_id, n_A, n_tie, n_B, n_missing``, sorted by key. These are the inputs
        of per-item splits, so they are collected (one row per item, judge and budget).
    """
    if not budgets or any(not isinstance(b, int) or b < 1 for b in budgets):
        raise ConfigError(f"budgets: positive integers needed, got {list(budgets)}")
    config = config or EngineConfig()
    columns = ["dataset", "item_id", "judge_id", "sample", "verdict", "score"]
    frames = []
    if isinstance(source, pa.Table):
        table = source
        # In-memory verdicts (e.g. derived pairs): "auto" keeps them in memory below local_max_rows rows.
        chosen = engine or config.stats_engine
        on_spark = chosen == "spark" or (chosen == "auto" and source.num_rows >= config.local_max_rows)
        log.info("vote counts of %d in-memory rows on %s", source.num_rows, "spark" if on_spark else "local")
        if on_spark:
            session = spark.get_session(config.spark_master, conf=dict(config.spark_conf))
            verdicts = session.createDataFrame(source.select(columns).to_pandas())
    elif choose_engine(source, engine, config) == "spark":
        session = spark.get_session(config.spark_master, conf=dict(config.spark_conf))
        verdicts = spark.read_table(session, source, "verdicts").select(*columns)
        on_spark = True
    else:
        table = read_dataset_table(source, "verdicts", columns, storage_options=config.storage_options)
        on_spark = False
    for n in budgets:
        if on_spark:
            counts = spark.item_vote_counts_spark(verdicts.where(F.col("sample") < n)).select(*_VOTE_COLUMNS)
            counted: pd.DataFrame = counts.toPandas()
            frames.append(counted.assign(budget=n))
        else:
            part = table.filter(pc.less(table["sample"], n))
            frames.append(local.item_vote_counts_arrow(part)[_VOTE_COLUMNS].assign(budget=n))
    out = pd.concat(frames, ignore_index=True)[["budget", *_VOTE_COLUMNS]]
    return out.sort_values(["budget", "dataset", "item_id", "judge_id"], kind="stable").reset_index(drop=True)
