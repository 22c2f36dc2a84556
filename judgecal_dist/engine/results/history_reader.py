"""Run-history tables read through Spark, for histories too large for one process (``judgecal drift --engine``).

:func:`read_latest` gives the rows of one history table folder (Hive-partitioned by ``study`` and ``date``): the
latest attempt of each run id, ``study`` and ``date`` from the partition path as strings. Spark scans,
deduplicates and filters; only the rows asked for come back (through Arrow, so the column types are those a
pandas read of the same Parquet files gives). The history's own order and names are
:mod:`judgecal_dist.history.store`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from judgecal_dist.engine.jobs.spark import spark_url

__all__ = ["latest_attempts", "read_latest"]


def latest_attempts(spark: SparkSession, base_url: str, *, study: str | None = None) -> DataFrame | None:
    """The table at ``base_url`` (latest attempt per study and run id) as a DataFrame, or None when it holds no file."""
    base = spark_url(base_url)
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


def read_latest(
    spark: SparkSession,
    base_url: str,
    *,
    study: str | None = None,
    run_ids: Sequence[str] | None = None,
    judge_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The rows of :func:`latest_attempts` (optionally only ``run_ids`` / ``judge_ids``) as pandas; an empty
    frame when there are none."""
    rows = latest_attempts(spark, base_url, study=study)
    if rows is None:
        return pd.DataFrame()
    if run_ids is not None:
        rows = rows.where(F.col("run_id").isin(list(run_ids)))
    if judge_ids is not None:
        rows = rows.where(F.col("judge_id").isin(list(judge_ids)))
    frame: pd.DataFrame = rows.toArrow().to_pandas()
    return frame
