"""Sufficient statistics of a verdict table, on Spark or in memory, chosen by the table's size.

Each job has two implementations that are equal exactly (:mod:`judgecal_dist.engine.jobs.spark`,
:mod:`judgecal_dist.engine.jobs.local`, sharing the kernels of :mod:`judgecal_dist.engine.jobs.counts`). A job's
``source`` is a dataset root URL, or a SparkSession whose temp views ``verdicts`` and ``labels`` hold the tables
(:func:`judgecal_dist.engine.jobs.spark.register_views`). With a URL and ``engine="auto"`` (the default of
:class:`judgecal_dist.config.EngineConfig`), tables whose verdict rows fit the in-memory budget (:func:`local_row_limit`:
``local_memory_gb``, by default a quarter of the RAM) run in memory and larger ones on Spark; the choice and its
reason are logged once.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, TypeGuard

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import counts, local
from judgecal_dist.engine.votes.codec import binary_codes, codes_of
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.extras import require_extra
from judgecal_dist.io.dataset import count_rows, read_dataset_table
from judgecal_dist.io.schema import MISSING_CODE, VERDICT_CODES
from judgecal_dist.splits import group_keys

if TYPE_CHECKING:  # pyspark is the spark extra: the in-memory path never imports it
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ENGINES",
    "choose_engine",
    "local_row_limit",
    "LOCAL_BYTES_PER_ROW",
    "judge_cells",
    "judge_summary",
    "item_vote_counts",
    "pattern_cells",
    "group_sizes",
]

log = logging.getLogger(__name__)

ENGINES: tuple[str, ...] = ("auto", "spark", "local")
_VERDICT_COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "sample", "verdict"]
_LABEL_COLUMNS = ["dataset", "item_id", "label"]


def _is_session(source: object) -> TypeGuard[SparkSession]:
    """Whether ``source`` is a SparkSession (none can exist where pyspark was never imported)."""
    sql = sys.modules.get("pyspark.sql")
    return sql is not None and isinstance(source, sql.SparkSession)


def _spark() -> ModuleType:
    """The Spark implementations, imported when a job runs on Spark (a one-line error without the extra)."""
    require_extra("spark", "a verdict table on Spark")
    from judgecal_dist.engine.jobs import spark

    return spark


#: Peak memory of the in-memory jobs per verdict row, in bytes: per-judge counts 220, a Dawid-Skene fit and
#: ``score`` 130 (peak RSS less the imports, 10M verdict rows of 200k items x 50 judges), with a margin.
LOCAL_BYTES_PER_ROW = 256


def local_row_limit(config: EngineConfig) -> tuple[int, str]:
    """The verdict rows up to which ``auto`` runs in memory, and why (for the log line).

    ``config.local_max_rows`` when set; else the rows whose in-memory peak (:data:`LOCAL_BYTES_PER_ROW` each) fits
    ``config.local_memory_gb``, by default a quarter of this machine's RAM (the driver's, on a cluster).
    """
    if config.local_max_rows is not None:
        return config.local_max_rows, f"local_max_rows {config.local_max_rows}"
    if config.local_memory_gb is not None:
        budget, source = config.local_memory_gb * 1e9, "local_memory_gb"
    else:
        budget, source = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 4, "a quarter of the RAM"
    rows = int(budget // LOCAL_BYTES_PER_ROW)
    return rows, f"{budget / 1e9:.1f} GB ({source}) at {LOCAL_BYTES_PER_ROW} B/row"


def choose_engine(source: str | SparkSession, engine: str | None = None, config: EngineConfig | None = None) -> str:
    """``"spark"`` or ``"local"`` for a job on ``source``; logs the choice and why, once per source and process.

    A SparkSession source always runs on Spark. ``engine`` (default ``config.stats_engine``) forces a choice;
    ``"auto"`` counts the verdict rows from the Parquet footers and runs in memory up to :func:`local_row_limit`.

    Raises
    ------
    ConfigError
        An engine name outside :data:`ENGINES`, or ``"local"`` with a SparkSession source.
    """
    config = config or EngineConfig()
    engine = engine or config.stats_engine
    if engine not in ENGINES:
        raise ConfigError(f"engine: must be one of {ENGINES}, got {engine!r}")
    if _is_session(source):
        if engine == "local":
            raise ConfigError("engine: 'local' needs a dataset URL, not a SparkSession")
        log.info("stats engine: spark (tables are the session's views)")
        return "spark"
    if engine != "auto":
        log.debug("stats engine: %s (requested)", engine)  # asked for by the caller: per-candidate chatter
        if engine == "spark":
            require_extra("spark", f"{source}: stats_engine spark")
        return engine
    assert isinstance(source, str)  # a SparkSession returned above
    rows = count_rows(source, "verdicts", storage_options=config.storage_options)
    limit, why = local_row_limit(config)
    chosen = "local" if rows <= limit else "spark"
    if chosen == "spark":
        require_extra("spark", f"{source}: {rows} verdict rows (in memory up to {limit}: {why})")
    said = (source, chosen, limit)
    if said not in _SAID:  # a command asks once per job; the reader needs the choice once
        _SAID.add(said)
        log.info("engine: %s (auto: %d verdict rows; in memory up to %d = %s)", chosen, rows, limit, why)
    return chosen


_SAID: set[tuple[str, str, int]] = set()


def _spark_tables(source: str | SparkSession, config: EngineConfig) -> tuple[DataFrame, DataFrame]:
    if _is_session(source):
        missing = [v for v in ("verdicts", "labels") if not source.catalog.tableExists(v)]
        if missing:
            raise InputError(f"spark session: no view(s) {missing}: call register_views(spark, url) first")
        return source.table("verdicts"), source.table("labels")
    session = _spark().get_session(config.spark_master, conf=dict(config.spark_conf))
    return _spark().read_table(session, source, "verdicts"), _spark().read_table(session, source, "labels")


def _spark_source(source: str | SparkSession, config: EngineConfig) -> tuple[SparkSession, str | DataFrame, DataFrame]:
    """Session, verdicts (the URL itself: the codec's tasks scan its parts) and labels of a Spark job."""
    if _is_session(source):
        verdicts, labels = _spark_tables(source, config)
        return source, verdicts, labels
    assert isinstance(source, str)
    session = _spark().get_session(config.spark_master, conf=dict(config.spark_conf))
    return session, source, _spark().read_table(session, source, "labels")


def _arrow_tables(source: str, config: EngineConfig, verdict_columns: list[str]) -> tuple[pa.Table, pa.Table]:
    options = config.storage_options
    verdicts = read_dataset_table(source, "verdicts", verdict_columns, storage_options=options)
    return verdicts, read_dataset_table(source, "labels", _LABEL_COLUMNS, storage_options=options)


def judge_cells(
    source: str | SparkSession,
    seeds: Sequence[int],
    fraction: float,
    *,
    engine: str | None = None,
    config: EngineConfig | None = None,
) -> pd.DataFrame:
    r"""Per-judge cell counts of every replicate split, in one pass over the labelled verdicts.

    .. math:: n_{r,s,j}[y, v] = \#\{(i, \text{sample}) : \mathrm{side}_r(g_i) = s,\ Y_i = y,\ V_{ij} = v\}

    over rows whose item has a non-null label (inner join with ``labels`` on ``dataset, item_id``), all samples;
    ``side_r`` is :func:`judgecal_dist.splits.calibration_mask` of the row's ``group_id`` for seed ``r``.

    Parameters
    ----------
    source : str or SparkSession
        Dataset root URL, or a session with the views ``verdicts`` and ``labels``.
    seeds : sequence of int
        Replicate seeds (distinct, non-negative); one replicate per seed.
    fraction : float
        Calibration fraction in (0, 1).
    engine : {"auto", "spark", "local"}, optional
        Default ``config.stats_engine``.
    config : EngineConfig, optional
        Threshold, Spark master and settings, storage options.

    Returns
    -------
    DataFrame
        ``replicate`` (the seed), ``side`` ("calibration"/"evaluation"), ``judge_id``, ``label`` ("A"/"B"/"tie"),
        ``verdict`` ("A"/"B"/"tie"/None for missing), ``n`` (int64 > 0; empty cells are absent), sorted by the keys.
        At most ``R * 2 * J * 12`` rows.

    Raises
    ------
    ConfigError
        Bad seeds, fraction or engine.
    InputError
        Unreadable tables or a category outside the alphabet.

    Notes
    -----
    Both engines sum rows per (group key, cell) and multiply by the ``R x groups`` membership matrix, so the
    cost is one scan plus ``rows x R`` multiply-adds, never one job or one copy of the table per replicate.

    Examples
    --------
    >>> cells = judge_cells(url, seeds=range(100), fraction=0.5)  # doctest: +SKIP
    >>> judge_summary(cells).query("side == 'calibration'")  # doctest: +SKIP
    """
    config = config or EngineConfig()
    values = counts.check_replicates(seeds, fraction)
    if choose_engine(source, engine, config) == "spark":
        if _is_session(source):
            return _spark().judge_cells_spark(source, _spark_tables(source, config), values, fraction)
        session = _spark().get_session(config.spark_master, conf=dict(config.spark_conf))
        return _spark().judge_cells_spark(session, source, values, fraction, storage_options=config.storage_options)
    assert isinstance(source, str)  # choose_engine runs a SparkSession source on Spark
    return local.judge_cells_url(source, values, fraction, storage_options=config.storage_options)


def judge_summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (replicate, side, judge_id): ``rows``, ``votes``, ``correct`` and ``parse_rate`` from :func:`judge_cells`.

    ``rows`` counts the judge's labelled rows, ``votes`` those with an A or B verdict, ``correct`` those whose
    verdict equals an A or B label, and ``parse_rate`` = non-null verdicts / rows (absent rows are not in the
    denominator: a judge with no row on an item does not lower its parse rate here).

    Examples
    --------
    >>> cells = pd.DataFrame({"replicate": 0, "side": "calibration", "judge_id": "j",
    ...                       "label": ["A", "A", "B", "tie"], "verdict": ["A", None, "A", "tie"], "n": [3, 1, 2, 1]})
    >>> summary = judge_summary(cells)
    >>> summary[["rows", "votes", "correct"]].to_numpy().tolist(), round(float(summary["parse_rate"].iloc[0]), 4)
    ([[7, 5, 3]], 0.8571)
    """
    n = cells["n"].to_numpy(dtype=np.int64)
    verdict, label = binary_codes(codes_of(cells["verdict"])), binary_codes(codes_of(cells["label"]))
    vote = verdict != MISSING_CODE
    correct = (label != MISSING_CODE) & (verdict == label)
    frame = cells[["replicate", "side", "judge_id"]].assign(
        rows=n,
        votes=np.where(vote, n, 0),
        correct=np.where(correct, n, 0),
        parsed=np.where(cells["verdict"].notna(), n, 0),
    )
    out = frame.groupby(["replicate", "side", "judge_id"], as_index=False, sort=True).sum()
    out["parse_rate"] = out.pop("parsed") / out["rows"]
    return out


def item_vote_counts(
    source: str | SparkSession, *, engine: str | None = None, config: EngineConfig | None = None
) -> pd.DataFrame | DataFrame:
    """Per (dataset, item_id, judge_id) over all samples: vote counts and score moments.

    Columns ``n_A, n_B, n_tie`` (verdicts per category), ``n_missing`` (null verdicts, which includes every row
    of a scalar-score schema), ``n_score`` (non-null scores), ``score_mean`` and ``score_var`` (population
    variance, ddof = 0; both null when ``n_score`` is 0).

    Returns
    -------
    pyspark DataFrame or pandas DataFrame
        A lazy Spark DataFrame on the Spark path (item-level: the engine never collects it), a pandas frame
        sorted by key on the local path. Counts are equal exactly; the moments agree to rounding (Spark and
        pyarrow sum in different orders).
    """
    config = config or EngineConfig()
    if choose_engine(source, engine, config) == "spark":
        return _spark().item_vote_counts_spark(_spark_tables(source, config)[0])
    assert isinstance(source, str)  # choose_engine runs a SparkSession source on Spark
    columns = ["dataset", "item_id", "judge_id", "verdict", "score"]
    verdicts = read_dataset_table(source, "verdicts", columns, storage_options=config.storage_options)
    return local.item_vote_counts_arrow(verdicts)


def pattern_cells(
    source: str | SparkSession,
    judges: Sequence[str],
    seeds: Sequence[int] | None = None,
    fraction: float | None = None,
    sample: int = 0,
    *,
    blocks: pd.DataFrame | None = None,
    full_patterns: bool = False,
    engine: str | None = None,
    config: EngineConfig | None = None,
) -> pd.DataFrame:
    """Joint verdict-pattern cells of every prefix of an ordered judge list, in one pass.

    Items are those with at least one verdict row at ``sample`` (any judge). The pattern of prefix ``k`` is the
    verdicts of ``judges[:k]`` joined by ``|`` (``A``, ``B``, ``tie``, ``-`` for null or no row), e.g. ``"A|B|-"``.

    Parameters
    ----------
    source : str or SparkSession
    judges : sequence of str
        Ordered judge ids (1 to 31, distinct).
    seeds, fraction : optional
        With replicate seeds and a calibration fraction, cells are split per replicate and side.
    sample : int
        The verdict sample to use.
    blocks : DataFrame, optional
        ``replicate, group_key, block`` (int64; :data:`judgecal_dist.engine.jobs.counts.BLOCK_COLUMNS`): cells are
        split per replicate and block instead of per calibration side (multi-block protocols such as FCPS's
        selection / calibration / validation / test); items of groups absent from a replicate are not counted
        in it. Not combined with ``seeds``/``fraction``.
    full_patterns : bool
        Return the K-judge patterns only, as base-4 integers (digit ``p`` = slot of ``judges[p]``: 0 = B, 1 = A,
        2 = tie, 3 = missing), without ``k``: callers project them onto any judge order (e.g. FCPS paths).

    Returns
    -------
    DataFrame
        ``[replicate, side | block,] k, pattern, n, label_sum, n_labelled``: items in the cell, those labelled A,
        those with a non-null label (with ``blocks`` and ``full_patterns`` also ``label_ties``, those labelled tie). Cells with
        ``n = 0`` are absent; sorted by the keys.

    Notes
    -----
    One pivot: each item's full K-judge pattern is a base-4 integer summed in one ``groupBy``; the k-prefix cells
    are sums over full patterns (``pattern mod 4**k``), so prefixes cost nothing more than the pivot.
    """
    config = config or EngineConfig()
    judges = counts.check_pattern_judges(judges)
    values = counts.check_replicates(seeds, fraction, required=False)
    if blocks is not None and values is not None:
        raise ConfigError("blocks: give either blocks or seeds/fraction, not both")
    if choose_engine(source, engine, config) == "spark":
        session, verdicts, labels = _spark_source(source, config)
        return _spark().pattern_cells_spark(
            session,
            verdicts,
            labels,
            judges,
            values,
            fraction,
            sample,
            blocks=blocks,
            full_patterns=full_patterns,
            storage_options=config.storage_options,
        )
    assert isinstance(source, str)  # choose_engine runs a SparkSession source on Spark
    verdicts, labels = _arrow_tables(source, config, _VERDICT_COLUMNS)
    return local.pattern_cells_arrow(
        verdicts, labels, judges, values, fraction, sample, blocks=blocks, full_patterns=full_patterns
    )


def group_sizes(
    source: str | SparkSession,
    sample: int = 0,
    *,
    engine: str | None = None,
    config: EngineConfig | None = None,
) -> pd.DataFrame:
    """Labelled items per group, the input of row-sized block plans (e.g. FCPS's grouped blocks).

    Items are those of :func:`pattern_cells`: at least one verdict row at ``sample``; only items with a
    non-null label count.

    Returns
    -------
    DataFrame
        ``group_id`` (str), ``group_key`` (``xxhash64(group_id)``), ``n_items``, ``n_tie_labels`` (int64), sorted
        by ``group_id``.
    """
    config = config or EngineConfig()
    if choose_engine(source, engine, config) == "spark":
        verdicts, labels = _spark_tables(source, config)
        items = verdicts.where(verdicts["sample"] == sample).select("dataset", "item_id", "group_id").distinct()
        labelled = labels.where(labels["label"].isNotNull()).select("dataset", "item_id", "label")
        frame = _spark().group_sizes_spark(items.join(labelled, on=["dataset", "item_id"], how="inner"))
    else:
        assert isinstance(source, str)  # choose_engine runs a SparkSession source on Spark
        verdicts, labels = _arrow_tables(source, config, _VERDICT_COLUMNS)
        items = verdicts.filter(pc.equal(verdicts["sample"], pa.scalar(sample, pa.int32())))
        items = items.select(["dataset", "item_id", "group_id"]).to_pandas().drop_duplicates()
        lab = labels.to_pandas().dropna(subset=["label"])
        joined = items.merge(lab, on=["dataset", "item_id"], how="inner")
        joined["tie"] = (codes_of(joined["label"]) == VERDICT_CODES["tie"]).astype(np.int64)
        frame = joined.groupby("group_id", as_index=False, sort=True).agg(
            n_items=("item_id", "size"), n_tie_labels=("tie", "sum")
        )
    frame = frame.sort_values("group_id", kind="stable").reset_index(drop=True)
    frame["group_key"] = group_keys(frame["group_id"].astype(str))
    return frame.astype({"n_items": np.int64, "n_tie_labels": np.int64})[
        ["group_id", "group_key", "n_items", "n_tie_labels"]
    ]
