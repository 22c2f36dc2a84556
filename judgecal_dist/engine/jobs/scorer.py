"""The Spark runner of ``judgecal score``: a model's batch function applied inside ``mapInArrow``.

A model kind scores a batch of coded rows with a pure function (numpy / Arrow in, an Arrow batch out); the
in-process runner (:mod:`judgecal_dist.scoring`) calls it over the table read with pyarrow, this runner inside the
Spark tasks, so both give the same rows. A statistic runs the same way: a partition kernel gives partial sums
here and over the whole table in process, and only the final combine sees more than one partial.

* :func:`map_partitions` / :func:`map_batches`: the function's rows come back to the driver as one Arrow table
  (rows a kind's summary needs whole);
* :func:`partition_sums`: a statistic's partition kernel on every partition, the partials summed per group (the
  in-process runner calls the same kernel over the whole table); :func:`read_written` and
  :func:`with_item_columns` give it the rows written earlier and the items' metadata;
* :func:`write_partitions`: each task writes its rows through the given writer into a staging folder and reports
  the files it wrote (no row reaches the driver);
* :func:`item_partition_sums`: a statistic's partition kernel over verdict rows with their item's label, every row
  of an item in one task, and the per-group sums of its partials (the in-process runner calls the same kernel
  over the whole table);
* :func:`session`, :func:`read_table`, :func:`item_votes`: the session, a stored table and the vote codec's packed
  item votes, the inputs of both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import spark as spark_engine
from judgecal_dist.engine.votes.spark import item_votes_spark
from judgecal_dist.io.dataset import count_rows

__all__ = [
    "FILES_SCHEMA",
    "session",
    "read_table",
    "arrow_ddl",
    "item_votes",
    "map_partitions",
    "map_batches",
    "write_partitions",
    "partition_sums",
    "read_written",
    "written_sums",
    "with_item_columns",
    "item_partition_sums",
    "sample_rows",
    "collect_table",
    "judge_rows",
]

#: What a writing task reports: one row per file it wrote (path relative to the staging folder, rows).
FILES_SCHEMA = pa.schema([("file", pa.string()), ("rows", pa.int64())])

PartitionFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
BatchFn = Callable[[pa.RecordBatch], pa.RecordBatch | pa.Table]
Writer = Callable[..., list[tuple[str, int]]]


def session(engine: EngineConfig) -> SparkSession:
    """The Spark session of ``engine``'s settings (the active one when there is one)."""
    return spark_engine.get_session(engine.spark_master, conf=dict(engine.spark_conf))


def read_table(spark: SparkSession, url: str, table: str) -> DataFrame:
    """A stored table of a dataset root, with its contract columns (:func:`~judgecal_dist.engine.jobs.spark.read_table`)."""
    return spark_engine.read_table(spark, url, table)


def sample_rows(engine: EngineConfig, url: str, sample: int) -> DataFrame:
    """The verdict rows of ``url`` at ``sample`` (lazy)."""
    return read_table(session(engine), url, "verdicts").where(F.col("sample") == sample)


def collect_table(
    engine: EngineConfig, url: str, table: str, columns: Sequence[str], *, sample: int | None = None
) -> pd.DataFrame:
    """``columns`` of a stored table (its rows at ``sample`` when given) collected to the driver as pandas (for a
    kind that scores the whole table at once)."""
    rows = sample_rows(engine, url, sample) if sample is not None else read_table(session(engine), url, table)
    frame: pd.DataFrame = rows.select(*columns).toPandas()
    return frame


def judge_rows(
    engine: EngineConfig, url: str, rows: DataFrame, judge_id: str, label_columns: Sequence[str]
) -> DataFrame:
    """The verdict ``rows`` of ``judge_id`` with ``label_columns`` of their items' labels (null where unlabelled)."""
    labels = read_table(session(engine), url, "labels").select("dataset", "item_id", *label_columns)
    return rows.where(F.col("judge_id") == judge_id).join(labels, on=["dataset", "item_id"], how="left")


def arrow_ddl(schema: pa.Schema) -> str:
    """Spark's DDL of an Arrow schema (the declared output of a ``mapInArrow`` function)."""
    return ", ".join(f"`{f.name}` {from_arrow_type(f.type).simpleString()}" for f in schema)


def item_votes(
    engine: EngineConfig, data_url: str, judge_ids: Sequence[str], *, sample: int, binary: bool = True
) -> tuple[DataFrame, Any]:
    """One packed row per item with a verdict at ``sample`` (``dataset, item_id, group_id, label, v0, ...``; lazy)
    and the scan's tally accumulator (:func:`~judgecal_dist.engine.votes.spark.item_votes_spark`)."""
    spark = session(engine)
    labels = read_table(spark, data_url, "labels")
    options = dict(engine.storage_options)
    return item_votes_spark(spark, data_url, labels, judge_ids, sample=sample, binary=binary, storage_options=options)


def _per_batch(batches: Iterator[pa.RecordBatch], fn: BatchFn) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if batch.num_rows:
            out = fn(batch)
            yield from out.to_batches() if isinstance(out, pa.Table) else [out]


def map_partitions(frame: DataFrame, fn: PartitionFn, schema: pa.Schema) -> pa.Table:
    """``fn`` over every partition of ``frame`` (Arrow batches in, batches of ``schema`` out), collected."""
    return frame.mapInArrow(fn, arrow_ddl(schema)).toArrow().cast(schema)


def map_batches(frame: DataFrame, fn: BatchFn, schema: pa.Schema) -> pa.Table:
    """``fn`` over every non-empty Arrow batch of ``frame``, collected (the rows the in-process runner gives)."""
    return map_partitions(frame, functools.partial(_per_batch, fn=fn), schema)


def _write_task(
    batches: Iterator[pa.RecordBatch],
    fn: PartitionFn,
    schema: pa.Schema,
    writer: Writer,
    staged_url: str,
    storage_options: Mapping[str, Any],
) -> Iterator[pa.RecordBatch]:
    context = TaskContext.get()
    basename = f"part-{context.partitionId() if context else 0:05d}"
    # A retried task writes the same names, so it overwrites its first attempt's files instead of adding some.
    files = writer(fn(batches), schema, staged_url, basename=basename, storage_options=storage_options)
    yield pa.RecordBatch.from_pydict(
        {"file": [f for f, _ in files], "rows": [n for _, n in files]}, schema=FILES_SCHEMA
    )


def write_partitions(
    frame: DataFrame,
    fn: PartitionFn,
    schema: pa.Schema,
    *,
    writer: Writer,
    staged_url: str,
    storage_options: Mapping[str, Any],
) -> list[tuple[str, int]]:
    """``fn`` over every partition of ``frame``, each task writing its rows with ``writer(batches, schema, url,
    basename=..., storage_options=...)`` into ``staged_url``; the files the successful tasks wrote and their rows
    (a failed attempt's leftovers are never listed)."""
    task = functools.partial(
        _write_task, fn=fn, schema=schema, writer=writer, staged_url=staged_url, storage_options=storage_options
    )
    rows = frame.mapInArrow(task, arrow_ddl(FILES_SCHEMA)).collect()
    return [(row["file"], int(row["rows"])) for row in rows]


def partition_sums(frame: DataFrame, kernel: PartitionFn, schema: pa.Schema, by: Sequence[str]) -> pd.DataFrame:
    """Per-group sums (``by``) of the partials ``kernel`` gives on each partition of ``frame`` (rows of ``schema``:
    the keys, then the additive columns); pandas, one row per group, in key order."""
    partials = frame.mapInArrow(kernel, arrow_ddl(schema))
    numeric = [f.name for f in schema if f.name not in by]
    sums: pd.DataFrame = partials.groupBy(*by).agg(*[F.sum(c).alias(c) for c in numeric]).toPandas()
    return sums.sort_values(list(by), kind="stable").reset_index(drop=True)


def read_written(engine: EngineConfig, n_files: int, reader: PartitionFn, schema: pa.Schema) -> DataFrame:
    """Rows of ``schema`` that ``reader`` reads back from written files, spread over the tasks (``reader`` gets
    batches of an ``id`` column: the indexes of the files it reads)."""
    spark = session(engine)
    slices = max(1, min(n_files, 2 * spark.sparkContext.defaultParallelism))
    return spark.range(0, n_files, 1, slices).mapInArrow(reader, arrow_ddl(schema))


def _chain(batches: Iterator[pa.RecordBatch], first: PartitionFn, then: PartitionFn) -> Iterator[pa.RecordBatch]:
    return then(first(batches))


def written_sums(
    engine: EngineConfig, n_files: int, reader: PartitionFn, kernel: PartitionFn, schema: pa.Schema, by: Sequence[str]
) -> pd.DataFrame:
    """:func:`partition_sums` of ``kernel`` over the rows ``reader`` reads back (as :func:`read_written`), the kernel
    applied in the reading task itself: the rows never pass through the JVM."""
    spark = session(engine)
    slices = max(1, min(n_files, 2 * spark.sparkContext.defaultParallelism))
    ids = spark.range(0, n_files, 1, slices)
    return partition_sums(ids, functools.partial(_chain, first=reader, then=kernel), schema, by)


def with_item_columns(frame: DataFrame, engine: EngineConfig, data_url: str, columns: Sequence[str]) -> DataFrame:
    """``frame``'s rows with ``columns`` of the dataset's ``items`` table, only the items where all are known."""
    items = read_table(session(engine), data_url, "items").select("dataset", "item_id", *columns)
    known = F.lit(True)
    for name in columns:
        known = known & F.col(name).isNotNull()
    return frame.join(items, on=["dataset", "item_id"], how="inner").where(known)


def item_partition_sums(
    engine: EngineConfig,
    url: str,
    *,
    verdict_columns: Sequence[str],
    label_columns: Sequence[str],
    kernel: PartitionFn,
    schema: pa.Schema,
    by: Sequence[str],
    rows_per_task: int,
) -> pd.DataFrame:
    """Per-group sums (``by``) of ``kernel``'s partials over the verdict rows of ``url`` joined with their labels
    (``dataset, item_id`` plus ``label_columns``), partitioned by item; pandas, one row per group.

    The rows are joined first, then partitioned by item: the kernel needs every row of an item in one task (a
    join's skew handling may split a partition; an explicit repartition is never split). The partition count
    (at least ``rows_per_task`` verdict rows apart; AQE never coalesces an explicit one) bounds what a Python task
    holds.
    """
    keys = ["dataset", "item_id"]
    spark = session(engine)
    verdicts = read_table(spark, url, "verdicts").select(*verdict_columns)
    labels = read_table(spark, url, "labels").select(*keys, *label_columns)
    n_rows = count_rows(url, "verdicts", storage_options=engine.storage_options)
    parts = max(spark.sparkContext.defaultParallelism, -(-n_rows // rows_per_task))
    rows = verdicts.join(labels, on=keys, how="left").repartition(parts, *keys)
    return partition_sums(rows, kernel, schema, by)
