r"""Per-judge statistics of one verdict table, the rows ``history/judges`` keeps for every run.

The counts are written once, as a kernel over coded verdict rows that hold every row of their items
(:func:`_kernel`: integer item, judge and verdict codes of the vote codec, bincounts over (item, judge) cells), and
summed per judge. In memory the kernel runs over the whole table (one read and a few numpy passes, seconds for 20M
rows); on Spark (tables above the in-memory budget) over each partition of whole items, and the
engine sums the per-judge partials (:func:`judgecal_dist.engine.jobs.scorer.item_partition_sums`), never returning
item-level rows. Both are equal exactly.

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

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from statsmodels.stats.proportion import proportion_confint

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import stats as engine_stats
from judgecal_dist.engine.jobs.local import judge_ids_of
from judgecal_dist.engine.votes.codec import ITEM_KEYS, CodedRows, LabelIndex, category_codes, encode
from judgecal_dist.engine.votes.tally import judge_tallies
from judgecal_dist.errors import InputError
from judgecal_dist.extras import require_extra
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.schema import MISSING_CODE, UNKNOWN_CODE, VERDICT_CODES

__all__ = ["MEASURES", "COUNT_COLUMNS", "coded_counts", "counts_frame", "judge_counts", "with_rates"]

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
#: Verdict rows per Spark task of the per-judge counts (about 100 MB of a task's memory).
_ROWS_PER_TASK = 500_000
#: Rows per chunk of the in-memory counts (8 MB temporaries).
_CHUNK_ROWS = 1 << 20


def _kernel(
    item: np.ndarray, judge: np.ndarray, code: np.ndarray, labels: np.ndarray, n_judges: int
) -> dict[str, np.ndarray]:
    """Per-judge counts (:data:`COUNT_COLUMNS`, arrays of ``n_judges``) of coded verdict rows holding every row of
    their items: ``item`` indexes ``labels`` (label codes per item), ``judge`` is a judge position, ``code`` a
    verdict code. Bincounts over (item, judge) cells, then per judge."""
    # One row per cell (one sample, unique keys: the usual table): every count from one small table, no sort.
    if _one_row_per_cell(item, judge, len(labels), n_judges):
        return _one_row_kernel(item, judge, code, labels, n_judges)
    key = item * n_judges + judge
    cells, cell_of_row = np.unique(key, return_inverse=True)
    cell_item, cell_judge = cells // n_judges, cells % n_judges
    a, b, tie, missing = (
        np.bincount(cell_of_row, weights=code == value, minlength=len(cells)).astype(np.int64)
        for value in (VERDICT_CODES["A"], VERDICT_CODES["B"], VERDICT_CODES["tie"], MISSING_CODE)
    )
    others_a = np.bincount(cell_item, weights=a, minlength=len(labels)).astype(np.int64)[cell_item] - a
    others_b = np.bincount(cell_item, weights=b, minlength=len(labels)).astype(np.int64)[cell_item] - b
    label = labels[cell_item]
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
    return {k: np.bincount(cell_judge, weights=v, minlength=n_judges).astype(np.int64) for k, v in counts.items()}


def _chunks(n: int) -> list[slice]:
    return [slice(start, min(start + _CHUNK_ROWS, n)) for start in range(0, n, _CHUNK_ROWS)]


def _one_row_per_cell(item: np.ndarray, judge: np.ndarray, n_items: int, n_judges: int) -> bool:
    """Whether no (item, judge) cell holds two rows: a flag per cell, set chunk by chunk, must gain one flag per
    row (a byte per cell and a chunk of keys at a time, so a cold process pays few page faults)."""
    if n_items * n_judges > 4 * len(item) + (1 << 20):  # sparse cells: the flags would outweigh the rows
        return False
    seen = np.zeros(n_items * n_judges, dtype=bool)
    marked = 0
    for rows in _chunks(len(item)):
        seen[item[rows] * n_judges + judge[rows]] = True
        now = int(np.count_nonzero(seen))
        if now != marked + (rows.stop - rows.start):
            return False
        marked = now
    return True


def _one_row_kernel(
    item: np.ndarray, judge: np.ndarray, code: np.ndarray, labels: np.ndarray, n_judges: int
) -> dict[str, np.ndarray]:
    """:func:`_kernel` when each (item, judge) cell holds one row: the rows scattered into dense verdict codes and
    counted there (:func:`~judgecal_dist.engine.votes.tally.judge_tallies`, the kernel the Spark fit uses too)."""
    codes = np.full((len(labels), n_judges), MISSING_CODE, dtype=np.int8)
    codes[item, judge] = code
    counts = judge_tallies(codes, labels)
    nulls = np.bincount(judge[code == MISSING_CODE], minlength=n_judges).astype(np.int64)
    return {"rows": counts["parsed"] + nulls, **counts, "items": counts["parsed"]}


def coded_counts(rows: CodedRows, labels: np.ndarray) -> pd.DataFrame:
    """Per-judge counts (columns as :func:`judge_counts`) of coded rows holding every row of the table: ``labels``
    is each item's label code (binary codes give the same counts: only A and B labels count).

    What a study that has coded the whole table already (``judgecal fit``) hands the run history, so the history
    does not read the table again.
    """
    counts = _kernel(rows.item, rows.judge, rows.code, labels, len(rows.judges_seen))
    return counts_frame(rows.judges_seen, {**counts, "panel_items": len(labels)})


def counts_frame(judge_ids: list[str], counts: dict[str, Any]) -> pd.DataFrame:
    """The history's per-judge frame (columns as :func:`judge_counts`) of counts made elsewhere: an array per
    :data:`COUNT_COLUMNS` name in ``judge_ids`` order and ``panel_items`` (the items of the table)."""
    out = pd.DataFrame({"judge_id": list(judge_ids)}).assign(**{c: counts[c] for c in COUNT_COLUMNS})
    out["panel_items"] = int(counts["panel_items"])
    return _typed(out)


def _typed(counts: pd.DataFrame) -> pd.DataFrame:
    return counts[["judge_id", *COUNT_COLUMNS, "panel_items"]].astype({c: np.int64 for c in COUNT_COLUMNS})


def _coded_counts(url: str, config: EngineConfig) -> pd.DataFrame:
    """Per-judge counts in memory: the codec's integer codes of the whole table, then :func:`coded_counts`."""
    options = config.storage_options
    columns = [*ITEM_KEYS, "judge_id", "verdict"]
    verdicts = read_dataset_table(url, "verdicts", columns, storage_options=options, dictionary_columns=columns)
    rows = encode(verdicts, None)
    del verdicts
    rows.reject_unknown()
    return coded_counts(
        rows, LabelIndex(read_dataset_table(url, "labels", [*_KEYS, "label"], storage_options=options))(rows.keys)
    )


def _partition_counts(batches: Iterator[pa.RecordBatch], judges: list[str]) -> Iterator[pa.RecordBatch]:
    """:func:`_kernel` on one Spark partition (every row of its items: the rows are partitioned by item)."""
    table = pa.Table.from_batches(list(batches))
    if table.num_rows == 0:
        return
    keys = [pc.cast(table[c], pa.string()).combine_chunks() for c in _KEYS]
    pair = pd.MultiIndex.from_arrays([k.to_numpy(zero_copy_only=False) for k in keys])
    item, uniques = pd.factorize(pair)
    judge = pc.index_in(pc.cast(table["judge_id"], pa.string()), value_set=pa.array(judges)).to_numpy(
        zero_copy_only=False
    )
    code = category_codes(table["verdict"])
    labels = np.full(len(uniques), MISSING_CODE, dtype=np.int8)
    labels[item] = category_codes(table["label"])
    counts = _kernel(np.asarray(item, dtype=np.int64), np.asarray(judge, dtype=np.int64), code, labels, len(judges))
    yield pa.RecordBatch.from_pydict(
        {
            "judge": np.arange(len(judges), dtype=np.int64),
            **counts,
            "panel_items": np.r_[len(uniques), np.zeros(len(judges) - 1, dtype=np.int64)],
            "unknown": np.r_[int((code == UNKNOWN_CODE).sum()), np.zeros(len(judges) - 1, dtype=np.int64)],
        }
    )


def _spark_counts(url: str, config: EngineConfig) -> pd.DataFrame:
    """The same counts as :func:`_coded_counts`: :func:`_kernel` per partition of whole items on Spark, the
    per-judge partials summed (:func:`judgecal_dist.engine.jobs.scorer.item_partition_sums`, one job)."""
    require_extra("spark", "per-judge statistics on Spark")
    from judgecal_dist.engine.jobs.scorer import item_partition_sums

    judges = judge_ids_of(url, config.storage_options)
    if not judges:
        raise InputError(f"{url}: verdicts: no verdict rows")
    extra = ["panel_items", "unknown"]
    sums = item_partition_sums(
        config,
        url,
        verdict_columns=[*_KEYS, "judge_id", "verdict"],
        label_columns=["label"],
        kernel=functools.partial(_partition_counts, judges=judges),
        schema=pa.schema([(c, pa.int64()) for c in ["judge", *COUNT_COLUMNS, *extra]]),
        by=["judge"],
        rows_per_task=_ROWS_PER_TASK,
    )
    per_judge = pd.DataFrame(sums).set_index("judge").reindex(range(len(judges)), fill_value=0)
    if per_judge["unknown"].sum():
        raise InputError(
            f"{url}: verdicts: verdict: {int(per_judge['unknown'].sum())} rows with a category outside the alphabet"
        )
    out = pd.DataFrame({"judge_id": judges}).assign(**{c: per_judge[c].to_numpy() for c in COUNT_COLUMNS})
    out["panel_items"] = int(per_judge["panel_items"].sum())
    return out


def judge_counts(url: str, *, engine: str | None = None, config: EngineConfig | None = None) -> pd.DataFrame:
    """Per-judge counts of the dataset at ``url`` (columns ``judge_id``, :data:`COUNT_COLUMNS`, ``panel_items``).

    ``engine`` is ``"auto"`` (by table size), ``"spark"`` or ``"local"``; both give equal counts.
    """
    config = config or EngineConfig()
    if engine_stats.choose_engine(url, engine, config) == "local":
        return _coded_counts(url, config)
    return _typed(_spark_counts(url, config))


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
