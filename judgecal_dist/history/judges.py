r"""Per-judge statistics of one verdict table, the rows ``history/judges`` keeps for every run.

In memory the verdict rows are coded once by the vote codec (:func:`judgecal_dist.engine.votes.codec.encode`:
integer item, judge and verdict codes) and every count is a ``bincount`` over (item, judge) cells: one read and
a few numpy passes, seconds for 20M rows. On Spark (tables above ``EngineConfig.local_max_rows`` rows) they
come from the engine's per (item, judge) vote counts (:func:`judgecal_dist.engine.stats.item_vote_counts`)
summed per judge in one aggregate that returns one row per judge, never item-level rows. Both are equal exactly.

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
from judgecal_dist.engine.votes.codec import ITEM_KEYS, LabelIndex, encode
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.schema import MISSING_CODE, VERDICT_CODES

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


def _coded_counts(url: str, config: EngineConfig) -> pd.DataFrame:
    """Per-judge counts in memory: the codec's integer codes, then bincounts over (item, judge) cells."""
    options = config.storage_options
    columns = [*ITEM_KEYS, "judge_id", "verdict"]
    verdicts = read_dataset_table(url, "verdicts", columns, storage_options=options, dictionary_columns=columns)
    rows = encode(verdicts, None)
    del verdicts
    rows.reject_unknown()
    labels = LabelIndex(read_dataset_table(url, "labels", [*_KEYS, "label"], storage_options=options))(rows.keys)
    n_judges = len(rows.judges_seen)
    cells, cell_of_row = np.unique(rows.item * n_judges + rows.judge, return_inverse=True)
    item, judge = cells // n_judges, cells % n_judges

    a, b, tie, missing = (
        np.bincount(cell_of_row, weights=rows.code == code, minlength=len(cells)).astype(np.int64)
        for code in (VERDICT_CODES["A"], VERDICT_CODES["B"], VERDICT_CODES["tie"], MISSING_CODE)
    )
    del cell_of_row
    others_a = np.bincount(item, weights=a, minlength=len(labels)).astype(np.int64)[item] - a
    others_b = np.bincount(item, weights=b, minlength=len(labels)).astype(np.int64)[item] - b
    label = labels[item]
    ab, parsed = a + b, a + b + tie
    counts = {
        "rows": parsed + missing,
        "parsed": parsed,
        "votes": ab,
        "n_A": a,
        "labelled_votes": np.where((label == VERDICT_CODES["A"]) | (label == VERDICT_CODES["B"]), ab, 0),
        "correct": np.where(label == VERDICT_CODES["A"], a, 0) + np.where(label == VERDICT_CODES["B"], b, 0),
        "consensus_votes": np.where(others_a != others_b, ab, 0),
        "agree": np.where(others_a > others_b, a, 0) + np.where(others_b > others_a, b, 0),
        "items": (parsed > 0).astype(np.int64),
    }
    out = pd.DataFrame({"judge_id": rows.judges_seen})
    for name, values in counts.items():
        out[name] = np.bincount(judge, weights=values, minlength=n_judges).astype(np.int64)
    out["panel_items"] = len(labels)
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
    if engine_stats.choose_engine(url, engine, config) == "local":
        out = _coded_counts(url, config)
    else:
        from judgecal_dist.engine import spark

        votes = engine_stats.item_vote_counts(url, engine="spark", config=config)
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
