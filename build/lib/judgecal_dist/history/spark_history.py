"""The history tables read through Spark, for histories too large for one process (``judgecal drift --engine``).

Gives exactly the rows and types of :func:`judgecal_dist.history.store.read_history`: the latest attempt of each
run id, ``study`` and ``date`` from the Hive partition path as strings, in
:func:`~judgecal_dist.history.store.sort_history` order.
Spark scans, deduplicates and filters; only the rows asked for come back (through Arrow, so the column types are
those a pandas read of the same Parquet files gives).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from judgecal_dist.engine.jobs.spark import spark_url
from judgecal_dist.history.store import HISTORY_TABLES, history_url, sort_history

__all__ = ["history_frame", "read_history_spark"]


def history_frame(spark: SparkSession, output: str, table: str, *, study: str | None = None) -> DataFrame | None:
    """History ``table`` as a DataFrame (latest attempt per run id), or None when it holds no file yet."""
    if table not in HISTORY_TABLES:
        raise ValueError(f"table: must be one of {HISTORY_TABLES}, got {table!r}")
    base = spark_url(f"{history_url(output)}/{table}")
    path = f"{base}/study={study}" if study else base
    try:
        # mergeSchema: runs of different studies or models record different optional columns (weight, ...).
        rows = spark.read.option("basePath", base).option("mergeSchema", "true").parquet(path)
    except AnalysisException as err:
        if "PATH_NOT_FOUND" in str(err) or "UNABLE_TO_INFER_SCHEMA" in str(err):
            return None
        raise
    # Partition values stay text, as in the path (Spark would infer a date type for date=YYYY-MM-DD).
    rows = rows.withColumn("study", F.col("study").cast("string")).withColumn("date", F.col("date").cast("string"))
    latest = F.max("recorded_at").over(Window.partitionBy("study", "run_id"))
    return rows.withColumn("_latest", latest).where(F.col("recorded_at") == F.col("_latest")).drop("_latest")


def read_history_spark(
    spark: SparkSession,
    output: str,
    table: str,
    *,
    study: str | None = None,
    run_ids: Sequence[str] | None = None,
    judge_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The rows of history ``table`` of ``study`` (optionally only ``run_ids`` / ``judge_ids``) as pandas.

    An empty frame when there is no history yet, as :func:`~judgecal_dist.history.store.read_history` returns.
    """
    rows = history_frame(spark, output, table, study=study)
    if rows is None:
        return pd.DataFrame()
    if run_ids is not None:
        rows = rows.where(F.col("run_id").isin(list(run_ids)))
    if judge_ids is not None:
        rows = rows.where(F.col("judge_id").isin(list(judge_ids)))
    frame = rows.toArrow().to_pandas()
    if frame.empty:
        return pd.DataFrame()
    return sort_history(frame)
