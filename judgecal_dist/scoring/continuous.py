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
(within the in-memory budget), on Spark in a ``mapInArrow`` whose tasks write their rows through fsspec, as the binary
scorer's do. A flow solves each distinct (score, rubric) pair once with per-pass dropout masks, so its results do
not depend on the batch (:mod:`judgecal_dist.models.continuous`). Every check (judges, sample, score range,
rubrics) runs before the first write, from one tally kernel (:func:`tally_rows`) over the whole table in process
and per partition on Spark. The per-rubric summary is one kernel too (:func:`rubric_sums`): over the whole table in
this process, per partition of the written rows on Spark with the partials summed per group (one row per dataset
and rubric reaches the driver); equal up to the order of their sums.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.records import json_records
from judgecal_dist.scoring.kernel import in_calibration, read_items_partition, write_items
from judgecal_dist.scoring.output import MARKER, OUTPUT_FORMAT, Output, ownership_marker, replace_outputs, stage_items
from judgecal_dist.scoring.tables import spark_runner

if TYPE_CHECKING:  # the corrector's module is imported by the model loader when a corrector is read
    from judgecal_dist.models.continuous import Corrector

__all__ = [
    "ITEM_COLUMNS",
    "items_schema",
    "correct_batch",
    "score_corrector",
    "check_rows",
    "tally_rows",
    "combine_tally",
    "rubric_sums",
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
    columns["in_calibration"] = in_calibration(model, columns["dataset"], columns["item_id"])
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


#: The rows of :func:`tally_rows`, by ``kind``: ``judge`` (a judge and its rows), ``rubric`` (a distinct rubric of
#: the model judge's scored rows; null: scores without one) and ``bad`` (one of its first scores outside the input
#: range).
TALLY_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("judge_id", pa.string()),
        ("n", pa.int64()),
        ("rubric", pa.string()),
        ("bad", pa.float64()),
    ]
)


def tally_rows(model: Corrector, rows: pd.DataFrame) -> pa.Table:
    """What the checks need of verdict rows (``judge_id, score, rubric``) at the sample: the kernel of both
    runners (over the whole table in process, per partition on Spark), combined by :func:`combine_tally`."""
    judges = rows["judge_id"].value_counts()
    mine = rows[rows["judge_id"] == model.judge_id]
    score = mine["score"].dropna()  # NaN is no score, as null
    low, high = model.input_range
    bad = score[(score < low) | (score > high)].head(3).tolist()
    rubrics = [None if r is None or r != r else str(r) for r in mine.loc[score.index, "rubric"].unique()]
    out = {
        "kind": ["judge"] * len(judges) + ["rubric"] * len(rubrics) + ["bad"] * len(bad),
        "judge_id": [str(j) for j in judges.index] + [None] * (len(rubrics) + len(bad)),
        "n": [int(n) for n in judges.to_numpy()] + [0] * (len(rubrics) + len(bad)),
        "rubric": [None] * len(judges) + rubrics + [None] * len(bad),
        "bad": [None] * (len(judges) + len(rubrics)) + [float(v) for v in bad],
    }
    return pa.table(out, schema=TALLY_SCHEMA)


def _tally_partition(batches: Iterator[pa.RecordBatch], model: Corrector) -> Iterator[pa.RecordBatch]:
    table = pa.Table.from_batches(list(batches))
    if table.num_rows:
        yield from tally_rows(model, table.to_pandas()).to_batches()


def combine_tally(parts: pa.Table) -> Tally:
    """The :class:`Tally` of the kernel's rows of every partition."""
    frame = parts.to_pandas()
    judges = frame[frame["kind"] == "judge"].groupby("judge_id", sort=True)["n"].sum()
    rubrics = frame.loc[frame["kind"] == "rubric", "rubric"]
    return Tally(
        judges={str(j): int(n) for j, n in judges.items()},
        out_of_range=[float(v) for v in frame.loc[frame["kind"] == "bad", "bad"].head(3)],
        rubrics={None if r is None or r != r else r for r in rubrics},
    )


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
    extra = check_rows(model, combine_tally(tally_rows(model, frame)), data_url, sample, unknown)
    mine = verdicts.filter(pc.equal(verdicts["judge_id"], model.judge_id)).drop_columns(["sample"])
    labels = read_dataset_table(data_url, "labels", ["dataset", "item_id", "label_score"], storage_options=options)
    joined = mine.join(labels, ["dataset", "item_id"], join_type="left outer")
    return Prepared(joined.sort_by([("dataset", "ascending"), ("item_id", "ascending")]), extra)


def _local_batches(model: Corrector, table: pa.Table) -> Iterator[pa.RecordBatch]:
    for batch in table.to_batches(max_chunksize=200_000):
        if batch.num_rows:
            yield correct_batch(model, batch)


# -- Spark -----------------------------------------------------------------------------------------------------
def _correct_partition(batches: Iterator[pa.RecordBatch], model: Corrector) -> Iterator[pa.RecordBatch]:
    """The Spark tasks' batch loop: :func:`correct_batch` on each batch (the rows the in-process runner gives)."""
    try:  # one thread per Spark task: the tasks already use the cores
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    return (correct_batch(model, b) for b in batches if b.num_rows)


def _stage_spark(
    model: Corrector, data_url: str, staged: str, engine: EngineConfig, sample: int, unknown: str
) -> tuple[list[tuple[str, int]], list[str]]:
    scorer = spark_runner()
    # One pass for the checks (the tally kernel per partition), then the model judge's rows, written by the tasks.
    rows = scorer.sample_rows(engine, data_url, sample)
    parts = scorer.map_partitions(
        rows.select("judge_id", "score", "rubric"),
        functools.partial(_tally_partition, model=model),
        TALLY_SCHEMA,
    )
    extra = check_rows(model, combine_tally(parts), data_url, sample, unknown)
    mine = scorer.judge_rows(engine, data_url, rows, model.judge_id, ["label_score"])
    written: list[tuple[str, int]] = scorer.write_partitions(
        mine.select(*_READ_ORDER),
        functools.partial(_correct_partition, model=model),
        items_schema(),
        writer=write_items,
        staged_url=staged,
        storage_options=dict(engine.storage_options),
    )
    return written, extra


_READ_ORDER = ["dataset", "item_id", "group_id", "judge_id", "score", "rubric", "label_score"]


# -- summary ---------------------------------------------------------------------------------------------------
_KEYS = ["dataset", "rubric"]


#: The additive columns of :func:`rubric_sums` (a mean is a sum over its count).
_SUM_COLUMNS = [
    "n_items",
    "n_scored",
    "sum_raw",
    "n_raw",
    "sum_corrected",
    "sum_sd",
    "n_sd",
    "n_labelled",
    "sum_err_raw",
    "sum_err_corrected",
    "n_err_corrected",
]
SUMS_SCHEMA = pa.schema(
    [(k, pa.string()) for k in _KEYS]
    + [(c, pa.float64() if c.startswith("sum_") else pa.int64()) for c in _SUM_COLUMNS]
)


def rubric_sums(frame: pd.DataFrame, model: Corrector) -> pd.DataFrame:
    """Per dataset and rubric, the sums and counts of the summary's means (raw score on score_range, corrected
    score, s.d., and with human scores the raw and corrected absolute errors): the kernel of both runners."""
    f = frame.assign(raw=model.to_scale(frame["score"].to_numpy(dtype=np.float64)))
    f["rubric"] = f["rubric"].astype(object).where(f["rubric"].notna(), None)
    lab = f["label_score"].notna() & f["corrected"].notna()
    f["err_raw"] = (f["raw"] - f["label_score"]).abs().where(lab)
    f["err_corrected"] = (f["corrected"] - f["label_score"]).abs().where(lab)
    out = f.groupby(_KEYS, dropna=False, sort=True).agg(
        n_items=("item_id", "size"),
        n_scored=("corrected", "count"),
        sum_raw=("raw", "sum"),
        n_raw=("raw", "count"),
        sum_corrected=("corrected", "sum"),
        sum_sd=("sd", "sum"),
        n_sd=("sd", "count"),
        n_labelled=("err_raw", "count"),
        sum_err_raw=("err_raw", "sum"),
        sum_err_corrected=("err_corrected", "sum"),
        n_err_corrected=("err_corrected", "count"),
    )
    return out.reset_index()


def _sums_partition(batches: Iterator[pa.RecordBatch], model: Corrector) -> Iterator[pa.RecordBatch]:
    table = pa.Table.from_batches(list(batches))
    if table.num_rows:
        sums = rubric_sums(table.to_pandas(), model)
        yield from pa.Table.from_pandas(sums, schema=SUMS_SCHEMA, preserve_index=False).to_batches()


def summarise(sums: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and rubric: items, scored items, mean raw and corrected score, mean s.d., and with human scores
    the raw and corrected mean absolute errors, from :func:`rubric_sums` of either runner."""
    out = sums[_KEYS].copy()
    out["rubric"] = out["rubric"].astype(object).where(out["rubric"].notna(), None)
    counts = {c: sums[c].to_numpy(dtype=np.int64) for c in ("n_items", "n_scored", "n_labelled")}

    def mean(total: str, count: str) -> np.ndarray:
        n = sums[count].to_numpy(dtype=np.float64)
        return np.divide(sums[total].to_numpy(dtype=np.float64), n, out=np.full(len(n), np.nan), where=n > 0)

    out["n_items"], out["n_scored"] = counts["n_items"], counts["n_scored"]
    out["mean_raw"] = mean("sum_raw", "n_raw")
    out["mean_corrected"] = mean("sum_corrected", "n_scored")
    out["mean_sd"] = mean("sum_sd", "n_sd")
    out["n_labelled"] = counts["n_labelled"]
    out["mae_raw"] = mean("sum_err_raw", "n_labelled")
    out["mae_corrected"] = mean("sum_err_corrected", "n_err_corrected")
    return out.reset_index(drop=True)


def summarise_spark(model: Corrector, folder_url: str, files: list[str], engine: EngineConfig) -> pd.DataFrame:
    """:func:`summarise` of the promoted item files: :func:`rubric_sums` per partition (files read back by the
    tasks with pyarrow), the partials summed per (dataset, rubric); one row per group reaches the driver."""
    scorer = spark_runner()
    schema = items_schema()
    # the files hold every column but the dataset (their folder), which the reader puts first
    fields = pa.schema([schema.field("dataset"), *(f for f in schema if f.name != "dataset")])
    reader = functools.partial(
        read_items_partition, files=files, folder_url=folder_url, storage_options=dict(engine.storage_options)
    )
    rows = scorer.read_written(engine, len(files), reader, fields)
    sums = scorer.partition_sums(rows, functools.partial(_sums_partition, model=model), SUMS_SCHEMA, _KEYS)
    return summarise(sums)


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
        table = summarise(rubric_sums(read_back(store.url_of("items"), files, options), model))
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

    These columns of every row come to the driver (5 numbers a row, ~40 MB per million rows): fine within the
    in-memory budget; a Spark score aggregates on Spark instead (:func:`summarise_spark`)."""
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
