r"""Per-judge statistics of one verdict table, the rows ``history/judges`` keeps for every run.

Counts come from the engine's per (item, judge) vote counts (:func:`judgecal_dist.engine.stats.item_vote_counts`:
Spark for large tables, pyarrow in memory for small ones, equal exactly) and are summed per judge here, on the
same engine: a Spark aggregate returns one row per judge, never item-level rows.

For judge :math:`j` with :math:`a_{ij}, b_{ij}, t_{ij}, m_{ij}` verdicts A, B, tie and null on item :math:`i`
(all samples), label :math:`y_i` and the other judges' totals :math:`A_{i,-j} = \sum_{k \ne j} a_{ik}`,
:math:`B_{i,-j}`:

* ``coverage`` = items with a non-null verdict / items in the table;
* ``parse_rate`` = non-null verdicts / verdict rows;
* ``share_A`` = :math:`\sum_i a_{ij} / \sum_i (a_{ij} + b_{ij})` (position bias when A and B are balanced);
* ``accuracy`` = verdicts equal to an A/B label / A and B verdicts on items labelled A or B;
* ``agreement`` = A/B verdicts equal to the majority of the *other* judges (label-free, so unlabelled nightly
  tables are watched too) / A and B verdicts on items where that majority is strict.

Each measure is a proportion ``numerator / denominator``; both counts are stored so that drift tests and
intervals (Wilson, via statsmodels) are computed from counts, never from rounded rates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine import stats as engine_stats
from judgecal_dist.io.dataset import read_dataset_table

__all__ = ["MEASURES", "COUNT_COLUMNS", "judge_counts", "with_rates"]

#: measure -> (numerator column, denominator column); the order is the report's order.
MEASURES: dict[str, tuple[str, str]] = {
    "accuracy": ("correct", "labelled_votes"),
    "agreement": ("agree", "consensus_votes"),
    "share_A": ("n_A", "votes"),
    "parse_rate": ("parsed", "rows"),
    "coverage": ("items", "panel_items"),
}
COUNT_COLUMNS = ["rows", "parsed", "votes", "n_A", "labelled_votes", "correct", "consensus_votes", "agree", "items"]
_KEYS = ["dataset", "item_id"]


def _pandas_counts(votes: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Per-judge counts from the in-memory vote counts (one row per item x judge)."""
    frame = votes.merge(labels[[*_KEYS, "label"]], on=_KEYS, how="left")
    totals = frame.groupby(_KEYS, sort=False)[["n_A", "n_B"]].transform("sum")
    others_a, others_b = totals["n_A"] - frame["n_A"], totals["n_B"] - frame["n_B"]
    ab = frame["n_A"] + frame["n_B"]
    parsed = ab + frame["n_tie"]
    labelled = frame["label"].isin(["A", "B"])
    rows = pd.DataFrame(
        {
            "judge_id": frame["judge_id"],
            "rows": parsed + frame["n_missing"],
            "parsed": parsed,
            "votes": ab,
            "n_A": frame["n_A"],
            "labelled_votes": ab.where(labelled, 0),
            "correct": frame["n_A"].where(frame["label"] == "A", 0) + frame["n_B"].where(frame["label"] == "B", 0),
            "consensus_votes": ab.where(others_a != others_b, 0),
            "agree": frame["n_A"].where(others_a > others_b, 0) + frame["n_B"].where(others_b > others_a, 0),
            "items": (parsed > 0).astype(np.int64),
        }
    )
    out = rows.groupby("judge_id", as_index=False, sort=True).sum()
    out["panel_items"] = int(votes[_KEYS].drop_duplicates().shape[0])
    return out


def _spark_counts(votes: Any, labels: Any) -> pd.DataFrame:
    """The same counts as :func:`_pandas_counts` by one Spark aggregate (one row per judge comes back)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    item = Window.partitionBy(*_KEYS)
    frame = votes.join(labels.select(*_KEYS, "label"), on=_KEYS, how="left")
    frame = frame.withColumn("others_a", F.sum("n_A").over(item) - F.col("n_A"))
    frame = frame.withColumn("others_b", F.sum("n_B").over(item) - F.col("n_B"))
    ab = F.col("n_A") + F.col("n_B")
    parsed = ab + F.col("n_tie")
    zero = F.lit(0).cast("long")
    a_b = F.col("label").isin("A", "B")
    others_a, others_b = F.col("others_a"), F.col("others_b")
    aggregates = {
        "rows": parsed + F.col("n_missing"),
        "parsed": parsed,
        "votes": ab,
        "n_A": F.col("n_A"),
        "labelled_votes": F.when(a_b, ab).otherwise(zero),
        "correct": F.when(F.col("label") == "A", F.col("n_A")).otherwise(zero)
        + F.when(F.col("label") == "B", F.col("n_B")).otherwise(zero),
        "consensus_votes": F.when(others_a != others_b, ab).otherwise(zero),
        "agree": F.when(others_a > others_b, F.col("n_A")).otherwise(zero)
        + F.when(others_b > others_a, F.col("n_B")).otherwise(zero),
        "items": F.when(parsed > 0, 1).otherwise(0),
    }
    per_judge = frame.groupBy("judge_id").agg(*[F.sum(e).cast("long").alias(k) for k, e in aggregates.items()])
    out = per_judge.toPandas().sort_values("judge_id", kind="stable").reset_index(drop=True)
    out["panel_items"] = int(votes.select(*_KEYS).distinct().count())
    return out


def judge_counts(url: str, *, engine: str | None = None, config: EngineConfig | None = None) -> pd.DataFrame:
    """Per-judge counts of the dataset at ``url`` (columns ``judge_id``, :data:`COUNT_COLUMNS`, ``panel_items``).

    ``engine`` is ``"auto"`` (by table size), ``"spark"`` or ``"local"``; both give equal counts.
    """
    config = config or EngineConfig()
    votes = engine_stats.item_vote_counts(url, engine=engine, config=config)
    if isinstance(votes, pd.DataFrame):
        labels = read_dataset_table(url, "labels", [*_KEYS, "label"], storage_options=config.storage_options)
        out = _pandas_counts(votes, labels.to_pandas())
    else:
        from judgecal_dist.engine import spark

        out = _spark_counts(votes, spark.read_table(votes.sparkSession, url, "labels"))
    return out[["judge_id", *COUNT_COLUMNS, "panel_items"]].astype({c: np.int64 for c in COUNT_COLUMNS})


def with_rates(counts: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """``counts`` with each measure of :data:`MEASURES` and its Wilson interval (``_ci_low``/``_ci_high``).

    A measure with a zero denominator is NaN (no interval), never 0.
    """
    out = counts.copy()
    for name, (num, den) in MEASURES.items():
        k, n = out[num].to_numpy(dtype=float), out[den].to_numpy(dtype=float)
        ok = n > 0
        rate = np.full(len(out), np.nan)
        low, high = rate.copy(), rate.copy()
        if ok.any():
            rate[ok] = k[ok] / n[ok]
            low[ok], high[ok] = proportion_confint(k[ok], n[ok], alpha=1 - level, method="wilson")
        out[name], out[f"{name}_ci_low"], out[f"{name}_ci_high"] = rate, low, high
    return out
