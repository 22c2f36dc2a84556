"""``judgecal score`` with a continuous corrector: every score of the model's judge, corrected onto the human scale.

Input: the ``verdicts`` table of an ingested dataset (``io/schema.py``), one row per item x judge x sample. The
rows of the model's ``judge_id`` at ``sample`` are scored: ``score`` (float, on the model's ``input_range``;
null = no score, the item is counted and left unscored) and ``rubric`` (one of the model's rubrics; null is the
model's rubric when it has one). The optional ``labels.label_score`` (a human score on the same scale) adds the
raw and corrected mean absolute errors to the summary.

Output (beside the binary layout of :mod:`judgecal_dist.scoring.apply`, with the same ownership marker, staging
and commit: :mod:`judgecal_dist.scoring.output`)::

    <output>/items/dataset=<name>/part-*.parquet   item_id, group_id, judge_id, rubric, score (raw),
                                                    corrected, sd, lower, upper (on the model's score_range; sd and
                                                    the interval where the kind has them), label_score (mapped onto
                                                    score_range), in_calibration
    <output>/summary/rubrics.parquet               per dataset and rubric: items, scored, means, MAE raw/corrected
    <output>/summary.json, <output>/_SUCCESS

Both engines run :func:`correct_batch` on Arrow batches of the same rows: in this process on the whole table
(below ``local_max_rows``), on Spark in a ``mapInArrow`` whose tasks write their rows through fsspec, as the binary
scorer's do. A flow solves each distinct (score, rubric) pair once with per-pass dropout masks, so its results do
not depend on the batch (:mod:`judgecal_dist.models.continuous`). Every check (judges, sample, score range,
rubrics) runs before the first write. The per-rubric summary is one Spark aggregation on Spark (one row per dataset
and rubric reaches the driver) and a pandas ``groupby`` in this process, equal up to the order of their sums.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.records import json_records
from judgecal_dist.models.continuous import Corrector
from judgecal_dist.scoring.kernel import FILES_DDL, write_items
from judgecal_dist.scoring.output import MARKER, OUTPUT_FORMAT, Output, ownership_marker, replace_outputs, stage_items

__all__ = [
    "ITEM_COLUMNS",
    "items_schema",
    "correct_batch",
    "score_corrector",
    "check_rows",
    "summarise",
    "summarise_spark",
    "read_back",
]

#: The verdict columns the corrector reads.
_READ = ["dataset", "item_id", "group_id", "judge_id", "sample", "score", "rubric"]
ITEM_COLUMNS = (
    "dataset",
    "item_id",
    "group_id",
    "judge_id",
    "rubric",
    "score",
    "corrected",
    "sd",
    "lower",
    "upper",
    "label_score",
    "in_calibration",
)
_SUMMARY = "summary/rubrics.parquet"


def items_schema() -> pa.Schema:
    """The Arrow schema of the scored rows."""
    types = dict.fromkeys(ITEM_COLUMNS, pa.float64()) | {"in_calibration": pa.bool_()}
    types |= {c: pa.string() for c in ("dataset", "item_id", "group_id", "judge_id", "rubric")}
    return pa.schema([(c, types[c]) for c in ITEM_COLUMNS])


def _in_calibration(model: Corrector, dataset: pa.Array, item_id: pa.Array) -> pa.Array:
    fitted = model.fitted_item_set
    if fitted is None:
        return pa.nulls(len(item_id), pa.bool_())
    same = pc.equal(dataset, pa.scalar(model.fitted_dataset, pa.string()))
    return pc.and_(same, pc.is_in(item_id, value_set=fitted))


def correct_batch(model: Corrector, batch: pa.RecordBatch) -> pa.RecordBatch:
    """Scored rows of a batch of the model judge's verdict rows (+ ``label_score``): the kernel of both engines."""
    score = batch.column("score").to_numpy(zero_copy_only=False).astype(np.float64)
    scored = ~np.isnan(score)
    rubric = np.asarray(batch.column("rubric").to_pylist(), dtype=object)
    out = {k: np.full(len(score), np.nan) for k in ("corrected", "sd", "lower", "upper")}
    if scored.any():
        got = model.correct(score[scored], rubric[scored])
        for key, values in out.items():
            values[scored] = got[key]
    label = batch.column("label_score").to_numpy(zero_copy_only=False).astype(np.float64)
    columns = {name: batch.column(name) for name in ("dataset", "item_id", "group_id", "judge_id", "rubric", "score")}
    columns |= {k: pa.array(v, pa.float64(), mask=np.isnan(v)) for k, v in out.items()}
    mapped = model.to_scale(label)
    columns["label_score"] = pa.array(mapped, pa.float64(), mask=np.isnan(mapped))
    columns["in_calibration"] = _in_calibration(model, columns["dataset"], columns["item_id"])
    return pa.RecordBatch.from_arrays([columns[c] for c in ITEM_COLUMNS], schema=items_schema())


@dataclass
class Tally:
    """What the checks need of the rows at ``sample``: rows per judge, and for the model's judge its score range,
    its rubrics and its null scores."""

    judges: dict[str, int] = field(default_factory=dict)
    low: float = np.inf
    high: float = -np.inf
    out_of_range: list[float] = field(default_factory=list)
    rubrics: set[Any] = field(default_factory=set)


def check_rows(model: Corrector, tally: Tally, data_url: str, sample: int, unknown: str) -> list[str]:
    """Refuse what the model cannot score; the unknown judges left out (``unknown == "ignore"``).

    Raises
    ------
    InputError
        No rows at ``sample``, the model's judge absent, other judges without ``--ignore-unknown-judges``, scores
        outside the model's ``input_range``, or rubrics the model was not fitted for.
    """
    from judgecal_dist.scoring.checks import check_judges

    where = f"{data_url}: verdicts"
    if not tally.judges:
        raise InputError(f"{where}: sample: no verdict rows with sample={sample}")
    if model.judge_id not in tally.judges:
        raise InputError(
            f"{where}: judge_id: no rows of the model's judge {model.judge_id!r} at sample={sample} (judges found: "
            f"{sorted(tally.judges)[:5]}); the model corrects that judge's scores only: score a table holding them"
        )
    extra = check_judges(sorted(tally.judges), [model.judge_id], where=where, unknown=unknown)
    low, high = model.input_range
    if tally.out_of_range:
        raise InputError(
            f"{where}: score: scores of judge {model.judge_id!r} outside the model's input_range [{low:g}, {high:g}] "
            f"(e.g. {tally.out_of_range[:3]}); the model corrects scores on that scale: rescale them, or fit a "
            "corrector on this one"
        )
    unknown_rubrics = sorted(str(r) for r in tally.rubrics if r is not None and r not in set(model.rubrics))
    if unknown_rubrics:
        raise InputError(
            f"{where}: rubric: {len(unknown_rubrics)} rubric(s) of judge {model.judge_id!r} the model was not fitted "
            f"for (e.g. {unknown_rubrics[:3]}; fitted: {model.rubrics[:5]}); fit a corrector with anchors of those "
            "rubrics, or score a table without them"
        )
    if None in tally.rubrics and len(model.rubrics) != 1:
        raise InputError(
            f"{where}: rubric: scores of judge {model.judge_id!r} without a rubric, for a model of "
            f"{len(model.rubrics)} rubrics; give every verdict row its rubric"
        )
    return extra


def _tally_pandas(model: Corrector, rows: pd.DataFrame) -> Tally:
    tally = Tally(judges=rows["judge_id"].value_counts().to_dict())
    mine = rows[rows["judge_id"] == model.judge_id]
    score = mine["score"].dropna()
    low, high = model.input_range
    tally.out_of_range = score[(score < low) | (score > high)].head(3).tolist()
    tally.rubrics = {None if r is None or r != r else r for r in mine.loc[score.index, "rubric"].unique()}
    return tally


@dataclass(frozen=True)
class Prepared:
    """The checked rows of the in-process path, and what the summary and the record need."""

    table: pa.Table
    extra: list[str]


def prepare_local(model: Corrector, data_url: str, engine: EngineConfig, sample: int, unknown: str) -> Prepared:
    """Read and check the model judge's rows in memory (before anything is written)."""
    options = engine.storage_options
    verdicts = read_dataset_table(data_url, "verdicts", _READ, storage_options=options)
    verdicts = verdicts.filter(pc.equal(verdicts["sample"], pa.scalar(sample, verdicts.schema.field("sample").type)))
    frame = verdicts.select(["judge_id", "score", "rubric"]).to_pandas()
    extra = check_rows(model, _tally_pandas(model, frame), data_url, sample, unknown)
    mine = verdicts.filter(pc.equal(verdicts["judge_id"], model.judge_id)).drop_columns(["sample"])
    labels = read_dataset_table(data_url, "labels", ["dataset", "item_id", "label_score"], storage_options=options)
    joined = mine.join(labels, ["dataset", "item_id"], join_type="left outer")
    return Prepared(joined.sort_by([("dataset", "ascending"), ("item_id", "ascending")]), extra)


def _local_batches(model: Corrector, table: pa.Table) -> Iterator[pa.RecordBatch]:
    for batch in table.to_batches(max_chunksize=200_000):
        if batch.num_rows:
            yield correct_batch(model, batch)


# -- Spark -----------------------------------------------------------------------------------------------------
def correct_and_write(
    batches: Iterator[pa.RecordBatch], model: Corrector, staged_url: str, storage_options: Mapping[str, Any]
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: correct the rows, write them into the staging folder, report the files."""
    from pyspark import TaskContext

    try:  # one thread per Spark task: the tasks already use the cores
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    context = TaskContext.get()
    basename = f"part-{context.partitionId() if context else 0:05d}"
    scored = (correct_batch(model, b) for b in batches if b.num_rows)
    files = write_items(scored, items_schema(), staged_url, basename=basename, storage_options=storage_options)
    yield pa.RecordBatch.from_pydict(
        {"file": [f for f, _ in files], "rows": [n for _, n in files]},
        schema=pa.schema([("file", pa.string()), ("rows", pa.int64())]),
    )


def _stage_spark(
    model: Corrector, data_url: str, staged: str, engine: EngineConfig, sample: int, unknown: str
) -> tuple[list[tuple[str, int]], list[str]]:
    from pyspark.sql import functions as F

    from judgecal_dist.engine.jobs.spark import get_session, read_table

    spark = get_session(engine.spark_master, conf=dict(engine.spark_conf))
    rows = read_table(spark, data_url, "verdicts").where(F.col("sample") == sample)
    low, high = model.input_range
    # One pass for the checks: rows per judge, and the model judge's rubrics and out-of-range scores.
    bad = ((F.col("score") < low) | (F.col("score") > high)) & ~F.isnan("score")  # NaN is no score, as null
    per_judge = rows.groupBy("judge_id").agg(
        F.count(F.lit(1)).alias("n"),
        F.collect_set(F.when(F.col("score").isNotNull(), F.coalesce("rubric", F.lit("\0")))).alias("rubrics"),
        F.slice(F.collect_list(F.when(bad, F.col("score"))), 1, 3).alias("bad"),
    )
    tally = Tally()
    for row in per_judge.collect():
        tally.judges[row["judge_id"]] = int(row["n"])
        if row["judge_id"] == model.judge_id:
            tally.rubrics = {None if r == "\0" else r for r in row["rubrics"]}
            tally.out_of_range = [float(v) for v in row["bad"]]
    extra = check_rows(model, tally, data_url, sample, unknown)
    labels = read_table(spark, data_url, "labels").select("dataset", "item_id", "label_score")
    mine = rows.where(F.col("judge_id") == model.judge_id).drop("sample", "verdict", "input_tokens", "output_tokens")
    mine = mine.join(labels, on=["dataset", "item_id"], how="left")
    options = dict(engine.storage_options)
    kernel = functools.partial(correct_and_write, model=model, staged_url=staged, storage_options=options)
    written = mine.select(*_READ_ORDER).mapInArrow(kernel, FILES_DDL).collect()
    return [(r["file"], int(r["rows"])) for r in written], extra


_READ_ORDER = ["dataset", "item_id", "group_id", "judge_id", "score", "rubric", "label_score"]


# -- summary ---------------------------------------------------------------------------------------------------
_KEYS = ["dataset", "rubric"]


def summarise(frame: pd.DataFrame, model: Corrector) -> pd.DataFrame:
    """Per dataset and rubric: items, scored items, mean raw (on score_range) and corrected score, mean s.d., and
    with human scores the raw and corrected mean absolute errors (one function for both engines' rows)."""
    f = frame.assign(raw=model.to_scale(frame["score"].to_numpy(dtype=np.float64)))
    f["rubric"] = f["rubric"].astype(object).where(f["rubric"].notna(), None)
    lab = f["label_score"].notna() & f["corrected"].notna()
    f["err_raw"] = (f["raw"] - f["label_score"]).abs().where(lab)
    f["err_corrected"] = (f["corrected"] - f["label_score"]).abs().where(lab)
    out = f.groupby(_KEYS, dropna=False, sort=True).agg(
        n_items=("item_id", "size"),
        n_scored=("corrected", "count"),
        mean_raw=("raw", "mean"),
        mean_corrected=("corrected", "mean"),
        mean_sd=("sd", "mean"),
        n_labelled=("err_raw", "count"),
        mae_raw=("err_raw", "mean"),
        mae_corrected=("err_corrected", "mean"),
    )
    return out.reset_index()


def summarise_spark(model: Corrector, folder_url: str, files: list[str], engine: EngineConfig) -> pd.DataFrame:
    """:func:`summarise` as one Spark ``groupBy().agg()`` over the promoted item files (read back by tasks with
    pyarrow): one row per (dataset, rubric) reaches the driver. Equal to :func:`summarise` up to the order of
    floating-point sums."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    from judgecal_dist.engine.jobs.spark import get_session
    from judgecal_dist.scoring.kernel import read_items_partition

    spark = get_session(engine.spark_master, conf=dict(engine.spark_conf))
    schema = items_schema()
    # the files hold every column but the dataset (their folder), which the reader puts first
    fields = [schema.field("dataset"), *(f for f in schema if f.name != "dataset")]
    ddl = ", ".join(f"`{f.name}` {from_arrow_type(f.type).simpleString()}" for f in fields)
    reader = functools.partial(
        read_items_partition, files=files, folder_url=folder_url, storage_options=dict(engine.storage_options)
    )
    slices = max(1, min(len(files), 2 * spark.sparkContext.defaultParallelism))
    rows = spark.range(0, len(files), 1, slices).mapInArrow(reader, ddl)

    def value(name: str) -> Any:  # NaN is no value, as pandas takes it
        return F.when(~F.isnan(name), F.col(name))

    (lo, hi), (a, b) = model.input_range, model.score_range
    score = value("score")
    # Corrector.to_scale's arithmetic, in the same order
    raw = score if (lo, hi) == (a, b) else F.lit(a) + F.lit(b - a) * (score - F.lit(lo)) / F.lit(hi - lo)
    lab = value("label_score").isNotNull() & value("corrected").isNotNull()
    err_raw = F.when(lab, F.abs(raw - F.col("label_score")))
    err_corrected = F.when(lab, F.abs(F.col("corrected") - F.col("label_score")))
    sums: pd.DataFrame = (
        rows.groupBy(*_KEYS)
        .agg(
            F.count(F.lit(1)).alias("n_items"),
            F.count(value("corrected")).alias("n_scored"),
            F.avg(raw).alias("mean_raw"),
            F.avg(value("corrected")).alias("mean_corrected"),
            F.avg(value("sd")).alias("mean_sd"),
            F.count(err_raw).alias("n_labelled"),
            F.avg(err_raw).alias("mae_raw"),
            F.avg(err_corrected).alias("mae_corrected"),
        )
        .toPandas()
    )
    sums["rubric"] = sums["rubric"].astype(object).where(sums["rubric"].notna(), None)
    means = ["mean_raw", "mean_corrected", "mean_sd", "mae_raw", "mae_corrected"]
    sums[means] = sums[means].astype(np.float64)
    sums = sums.sort_values(_KEYS, kind="stable", na_position="last").reset_index(drop=True)
    return sums.astype({c: np.int64 for c in ("n_items", "n_scored", "n_labelled")})


# -- the command -----------------------------------------------------------------------------------------------
def score_corrector(
    model: Corrector,
    data_url: str,
    store: RunStore,
    output: Output,
    inputs: dict[str, Any],
    chosen: str,
    engine: EngineConfig,
    started: float,
) -> dict[str, Any]:
    """Score, stage, promote and commit (``apply.score_dataset`` has checked the model, data and output folder)."""
    sample, unknown = int(inputs["sample"]), str(inputs["unknown_judges"])
    options = dict(engine.storage_options)
    prepared = prepare_local(model, data_url, engine, sample, unknown) if chosen == "local" else None

    def write(staged: str) -> tuple[Any, Any]:
        if prepared is not None:
            batches = _local_batches(model, prepared.table)
            return write_items(batches, items_schema(), staged, storage_options=options), prepared.extra
        return _stage_spark(model, data_url, staged, engine, sample, unknown)

    staged, (written, extra) = stage_items(store, output, write)
    new_files = replace_outputs(store, output, staged, [f for f, _ in written], [_SUMMARY, "summary.json"])
    files = [f for f, _ in written]
    if prepared is not None:
        table = summarise(read_back(store.url_of("items"), files, options), model)
    else:  # one row per (dataset, rubric) reaches the driver, whatever the table's size
        table = summarise_spark(model, store.url_of("items"), files, engine)
    counts = {
        "items": int(table["n_items"].sum()),
        "items_without_score": int((table["n_items"] - table["n_scored"]).sum()),
        "datasets": int(table["dataset"].nunique()),
        "unknown_judges_ignored": extra,
    }
    record = {
        "format": OUTPUT_FORMAT,
        "inputs": inputs,
        "engine": chosen,
        "model": {
            "kind": model.kind,
            "judge_id": model.judge_id,
            "rubrics": model.rubrics,
            "input_range": list(model.input_range),
            "score_range": list(model.score_range),
        },
        "counts": counts,
        "items_url": store.url_of("items"),
        "seconds": round(time.perf_counter() - started, 3),
        "rubrics": json_records(table),
    }
    store.write_table(_SUMMARY, table)
    store.write_json("summary.json", record)
    store.write_json(MARKER, ownership_marker(inputs, new_files))
    store.commit_success()
    return record


def read_back(folder_url: str, files: list[str], options: Mapping[str, Any]) -> pd.DataFrame:
    """The scored rows (the columns the summary reads) from the promoted files, for the in-process summary.

    These columns of every row come to the driver (5 numbers a row, ~40 MB per million rows): fine below
    ``local_max_rows``; a Spark score aggregates on Spark instead (:func:`summarise_spark`)."""
    import pyarrow.parquet as pq

    from judgecal_dist.io.filesystem import open_fs

    fs, root = open_fs(folder_url, dict(options))
    parts = []
    for rel in sorted(files):
        dataset = rel.split("/", 1)[0].removeprefix("dataset=")
        with fs.open(f"{root}/{rel}", "rb") as handle:
            t = pq.read_table(handle, columns=["item_id", "rubric", "score", "corrected", "sd", "label_score"])
        parts.append(t.to_pandas().assign(dataset=_unquote(dataset)))
    if not parts:
        return pd.DataFrame(columns=["dataset", "item_id", "rubric", "score", "corrected", "sd", "label_score"])
    return pd.concat(parts, ignore_index=True)


def _unquote(text: str) -> str:
    import urllib.parse

    return urllib.parse.unquote(text)
