"""Jobs of the repeated-sample studies, on Spark or in memory, equal exactly (spec 004 §3.1-3.2, spec 003 §3.1).

``accuracy_by_k``       per (dataset, judge): evaluable examples, correct ones and ties of the strict-winner rule
                        for every prefix length k, in one pass (the accuracy-vs-k curve of a table of any size);
``budget_vote_counts``  per-item vote counts ``(n_A, n_tie, n_B)`` of the first ``n`` samples for every budget
                        ``n``, through the engine's vote-count job (:func:`engine.spark.item_vote_counts_spark`,
                        :func:`engine.local.item_vote_counts_arrow`) on sample-filtered verdicts.

An example is a ``group_id``; its responses are its items; the chosen response is the item whose ``label_score``
is 1.0 (the rb2-k8 labels). An example is evaluable at k when it has at least two items, exactly one chosen, and
every item has a non-null score among samples ``0..k-1``; it is correct when the chosen item's mean is strictly
above every other item's, tied when two items share the maximum mean. The curve is one kernel
(:func:`curve_totals`) over rows holding whole examples: in memory over the whole table, on Spark per partition of
examples with the partials summed; means are sums over counts, so integer scores give bit-identical comparisons.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import local, spark
from judgecal_dist.engine.jobs.scorer import partition_sums
from judgecal_dist.engine.jobs.stats import choose_engine, local_row_limit
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.dataset import read_dataset_table

__all__ = ["accuracy_by_k", "curve_totals", "budget_vote_counts"]

log = logging.getLogger(__name__)

_SCORE_COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "sample", "score"]
_CURVE_COLUMNS = ["dataset", "judge_id", "k", "rows", "n", "correct", "n_tied"]
_VOTE_COLUMNS = ["dataset", "item_id", "judge_id", "n_A", "n_tie", "n_B", "n_missing"]


def _check_k(k_max: int | None) -> None:
    if k_max is not None and (not isinstance(k_max, int) or k_max < 1):
        raise ConfigError(f"k_max: must be a positive integer, got {k_max!r}")


def curve_totals(rows: pd.DataFrame, k_max: int) -> pd.DataFrame:
    """Per (dataset, judge): examples (``rows``) and, for every k, evaluable, correct and tied examples of verdict
    rows (:data:`_SCORE_COLUMNS` and ``chosen``, the item's chosen flag) holding every row of their examples.

    The kernel of both runners: over the whole table in memory, per partition of whole examples on Spark, whose
    partials are then summed. Prefix sums per item by ``cumsum``, per-example reductions by ``reduceat``; means are
    sums over counts, so integer scores give the same comparisons everywhere.
    """
    keys = ["dataset", "judge_id", "group_id", "item_id"]
    item_code = rows.groupby(keys, sort=False).ngroup().to_numpy()  # numbered in order of first appearance
    meta = rows.loc[~pd.Series(item_code).duplicated().to_numpy(), [*keys, "chosen"]].reset_index(drop=True)
    inside = rows["sample"].to_numpy() < k_max
    dense = np.full((len(meta), k_max), np.nan)
    dense[item_code[inside], rows["sample"].to_numpy()[inside]] = rows["score"].to_numpy(dtype=np.float64)[inside]
    sums = np.cumsum(np.nan_to_num(dense), axis=1)
    cnts = np.cumsum(~np.isnan(dense), axis=1)
    means = np.divide(sums, cnts, out=np.full(sums.shape, np.nan), where=cnts > 0)
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
    outcome["rows"] = np.ones(len(starts), dtype=np.int64)
    for k in range(1, k_max + 1):
        e = evaluable[:, k - 1]
        outcome[f"n_{k}"] = e.astype(np.int64)
        outcome[f"correct_{k}"] = (e & (own_mean[:, k - 1] > other[:, k - 1])).astype(np.int64)
        outcome[f"tied_{k}"] = (e & (at_top[:, k - 1] > 1)).astype(np.int64)
    return outcome.groupby(["dataset", "judge_id"], as_index=False, sort=True).sum()


def _curve_schema(k_max: int) -> pa.Schema:
    counts = ["rows", *[f"{c}_{k}" for k in range(1, k_max + 1) for c in ("n", "correct", "tied")]]
    return pa.schema([("dataset", pa.string()), ("judge_id", pa.string())] + [(c, pa.int64()) for c in counts])


def _curve_partition(batches: Iterator[pa.RecordBatch], k_max: int) -> Iterator[pa.RecordBatch]:
    table = pa.Table.from_batches(list(batches))
    if table.num_rows:
        schema = _curve_schema(k_max)
        totals = curve_totals(table.to_pandas(), k_max)[schema.names]
        yield from pa.Table.from_pandas(totals, schema=schema, preserve_index=False).to_batches()


def _curves_spark(verdicts: DataFrame, labels: DataFrame, k_max: int | None) -> pd.DataFrame:
    """:func:`curve_totals` per partition of whole examples (rows with their item's chosen flag, partitioned by
    example), the partials summed per (dataset, judge); nothing item-level reaches the driver."""
    if k_max is None:
        top = verdicts.agg(F.max("sample")).first()
        assert top is not None  # an aggregate without grouping has one row
        k_max = int(top[0]) + 1
    chosen = labels.select("dataset", "item_id", (F.col("label_score") == 1.0).alias("chosen"))
    rows = verdicts.select(*_SCORE_COLUMNS).join(chosen, on=["dataset", "item_id"], how="left")
    rows = rows.withColumn("chosen", F.coalesce(F.col("chosen"), F.lit(False)))
    parts = 2 * rows.sparkSession.sparkContext.defaultParallelism
    kernel = functools.partial(_curve_partition, k_max=k_max)
    examples = rows.repartition(parts, "dataset", "group_id")  # every row of an example in one task
    totals = partition_sums(examples, kernel, _curve_schema(k_max), ["dataset", "judge_id"])
    return _long(totals, range(1, k_max + 1))


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


def _curves_local(verdicts: pa.Table, labels: pa.Table, k_max: int | None) -> pd.DataFrame:
    """:func:`curve_totals` over the whole table in memory."""
    frame = verdicts.select(_SCORE_COLUMNS).to_pandas()
    chosen = labels.select(["dataset", "item_id", "label_score"]).to_pandas()
    chosen = chosen.assign(chosen=chosen["label_score"].eq(1.0)).drop(columns="label_score")
    frame = frame.merge(chosen, on=["dataset", "item_id"], how="left", validate="many_to_one")
    if k_max is None:
        k_max = int(frame["sample"].max()) + 1
    return _long(curve_totals(frame, k_max), range(1, k_max + 1))


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
        Default ``config.stats_engine``; ``auto`` runs tables that fit the in-memory budget in memory.
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
            return _curves_spark(source.table("verdicts"), source.table("labels"), k_max)
        session = spark.get_session(config.spark_master, conf=dict(config.spark_conf))
        return _curves_spark(
            spark.read_table(session, source, "verdicts"), spark.read_table(session, source, "labels"), k_max
        )
    assert isinstance(source, str)  # choose_engine runs a SparkSession source on Spark
    options = config.storage_options
    verdicts = read_dataset_table(source, "verdicts", _SCORE_COLUMNS, storage_options=options)
    labels = read_dataset_table(source, "labels", ["dataset", "item_id", "label_score"], storage_options=options)
    return _curves_local(verdicts, labels, k_max)


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
        score``; ``auto`` counts them in memory when they fit the in-memory budget).
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
        # In-memory verdicts (e.g. derived pairs): "auto" keeps them in memory up to the in-memory row limit.
        chosen = engine or config.stats_engine
        on_spark = chosen == "spark" or (chosen == "auto" and source.num_rows > local_row_limit(config)[0])
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
