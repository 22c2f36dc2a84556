"""``judgecal score``: apply a study run's saved calibration to every item of a verdict table.

Each item's votes by the model's judges (at one ``sample``; ties and unparseable verdicts are missing, as when the
model was fitted) go through the rebuilt one-coin aggregator, beta calibrator and conformal sets of
:mod:`judgecal_dist.models.binary`, i.e. the very ``methods/`` code the study evaluated. Large tables run on
Spark (:func:`judgecal_dist.engine.votes.spark.item_votes_spark`: tasks read the verdict parts with pyarrow
and pack each item's votes with the vote codec, a ``groupBy`` merges items split across row groups, then one
``mapInArrow`` of :func:`judgecal_dist.scoring.kernel.score_partition` scores the items and the tasks write them
through fsspec, :func:`judgecal_dist.engine.jobs.scorer.write_partitions`); tables within the in-memory budget run in this process with pyarrow + numpy
(:func:`judgecal_dist.engine.jobs.stats.choose_engine` decides); both write the same rows. On Spark the judge, sample
and coverage checks read what the scan tasks tallied while scoring (no pre-pass over the table). The summaries are
the same kernels on both engines (:mod:`judgecal_dist.scoring.summary`): over the whole table in process, over each
partition of the written rows on Spark, the partials summed per group.

Output (any fsspec URL, ``s3://`` included)::

    <output>/_JUDGECAL_SCORE                        marker: this folder is score's (inputs' fingerprints, files)
    <output>/items/dataset=<name>/part-*.parquet   item_id, group_id, label, n_votes, score, p, verdict,
                                                    in_calibration, set_alpha_<a> (list of "A"/"B") per level
    <output>/summary/{datasets,subsets,pairs,models}.parquet   (subsets / pairs / models when the items table
                                                    has ``subset`` / ``model_a`` + ``model_b``)
    <output>/summary.json, <output>/figures/win_rates.png
    <output>/_SUCCESS                               written last

Ownership: score writes only into a new or empty folder, or one holding its marker; a folder with other files
and no marker is refused before anything is written. Model, data and output are checked before the first write.
Item rows are written into a staging folder of the output (:meth:`~judgecal_dist.engine.results.store.RunStore.stage`)
and promoted file by file only after every check passed; a refused table leaves the output as it was. A rerun
with the same inputs (model and data fingerprints, settings) returns the committed summary; other inputs are
refused unless ``overwrite`` (``--overwrite``), which replaces exactly the files the marker lists, with
``_SUCCESS`` withdrawn first and written last. An output inside ``--data`` is refused before anything is read
(the rule: :mod:`judgecal_dist.io.ownership`).

Coverage: an item without a vote from any of the model's judges gets null ``score``, ``p``, ``verdict`` and sets,
and is counted (``items_without_votes``), never given the class prior as a verdict. A table holding verdicts of
fewer than ``min_judge_coverage`` of the model's judges (default half) is refused.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import pandas as pd
import pyarrow as pa

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.stats import choose_engine
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.io.dataset import dataset_files, dataset_tables, open_table, read_dataset_table
from judgecal_dist.io.filesystem import fingerprint_inputs, require_bucket
from judgecal_dist.io.ownership import refuse_output_inside
from judgecal_dist.io.records import json_records
from judgecal_dist.models.interface import TableModel
from judgecal_dist.scoring import summary as summ
from judgecal_dist.scoring.artifact import Calibration, load_calibration
from judgecal_dist.scoring.checks import (
    MIN_JUDGE_COVERAGE,
    UNKNOWN_JUDGES,
    check_settings,
)
from judgecal_dist.scoring.continuous import score_corrector
from judgecal_dist.scoring.items import ScoredBatches, TableChecks, prepare_local
from judgecal_dist.scoring.kernel import (
    items_ddl,
    items_schema,
    read_items_partition,
    score_batch,
    score_partition,
    write_items,
)
from judgecal_dist.scoring.output import (
    MARKER,
    OUTPUT_FORMAT,
    OWNER,
    Output,
    inspect_output,
    ownership_marker,
    replace_outputs,
    stage_items,
)
from judgecal_dist.scoring.tables import score_table, spark_runner

__all__ = [
    "OUTPUT_FORMAT",
    "MARKER",
    "UNKNOWN_JUDGES",
    "MIN_JUDGE_COVERAGE",
    "score_dataset",
    "score_batch",
    "items_ddl",
]

log = logging.getLogger(__name__)

#: summary.json's note for a model without the fingerprint of its calibration items.
_NO_CALIBRATION_ITEMS = "the model records no calibration items (saved before they were): in_calibration is null"


def score_dataset(
    model_url: str,
    data_url: str,
    output_url: str,
    *,
    engine: EngineConfig | None = None,
    sample: int = 0,
    unknown_judges: str = "error",
    min_judge_coverage: float = MIN_JUDGE_COVERAGE,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Score every item of ``data_url`` with the calibration of ``model_url`` and commit it at ``output_url``.

    Parameters
    ----------
    model_url : str
        A committed run folder (its ``model/model.json``) or a model ``.json`` URL: a binary pipeline, or a
        continuous corrector (:mod:`judgecal_dist.scoring.continuous` scores its judge's ``score`` column).
    data_url : str
        An ingested dataset root.
    output_url : str
        Output folder (layout in the module docstring): new, empty, or one this command marked as its own.
    engine : EngineConfig, optional
        Engine choice (``stats_engine``: auto / spark / local; the in-memory budget), Spark settings, storage options.
    sample : int, default 0
        The verdict sample to score (the study's ``sample`` setting).
    unknown_judges : {"error", "ignore"}, default "error"
        What to do with verdicts of judges the model does not know: refuse the table, or leave them out (then
        counted in the summary).
    min_judge_coverage : float, default 0.5
        Least share of the model's judges that must have verdicts at ``sample`` in the table; 0 scores any table
        (items without a vote from a model judge are then left unscored and counted).
    overwrite : bool, default False
        Replace a committed score of other inputs (only the files its marker lists); without it such a folder is
        refused. A committed score of the same inputs is returned as it is unless ``overwrite``.

    Returns
    -------
    dict
        The summary written as ``summary.json``: inputs, engine, counts and the per-dataset / subset / pair /
        model tables as records.

    Raises
    ------
    InputError
        Missing or invalid model, data without ``_SUCCESS`` or verdicts at ``sample``, unknown judges (with
        ``"error"``), too few of the model's judges in the table, an ``s3://`` output whose bucket does not exist,
        an output folder holding files score did not write, a committed score of other inputs (without
        ``overwrite``), or an output inside ``data_url``. Nothing is written or removed then.
    """
    engine = engine or EngineConfig()
    check_settings(unknown_judges, min_judge_coverage)
    options = dict(engine.storage_options)
    # Every input is checked before the first write: the output's bucket (before anything is read, as `run`
    # does; never created), the model, the data, then the output folder.
    require_bucket(output_url, options)
    refuse_output_inside(output_url, "--output", {"--data": data_url})
    model: Any = load_calibration(model_url, storage_options=options)  # a binary pipeline or a corrector
    dataset_files(data_url, "verdicts", storage_options=options)
    inputs = {
        "model": model.source,
        "model_sha256": model.digest,
        "data": data_url,
        "data_sha256": fingerprint_inputs(data_url, options)["sha256"],
        "sample": sample,
        "unknown_judges": unknown_judges,
        "min_judge_coverage": float(min_judge_coverage),
    }
    store = RunStore(output_url, storage_options=options)
    output = inspect_output(store)
    if OWNER.reuse(
        output_url, (output.marker or {}).get("inputs"), inputs, committed=store.succeeded, overwrite=overwrite
    ):
        return store.read_json("summary.json") | {"skipped": True}
    started = time.perf_counter()
    chosen = choose_engine(data_url, None, engine)
    # The one dispatch on kinds: a panel pipeline below; a continuous corrector, or a kind that reads the table
    # itself (a ``TableModel``), here.
    if getattr(model, "family", "binary") == "continuous":  # a corrector of one judge's scores
        return score_corrector(model, data_url, store, output, inputs, chosen, engine, started)
    if isinstance(model, TableModel):
        return _score_table_kind(
            model, data_url, store, output, inputs, engine, chosen, unknown_judges, float(min_judge_coverage), started
        )
    checks = TableChecks(model, data_url, sample, unknown_judges, float(min_judge_coverage))
    prepared = prepare_local(model, data_url, engine, sample, checks) if chosen == "local" else None
    staged, written = stage_items(
        store,
        output,
        lambda staged: (
            write_items(prepared, items_schema(model), staged, storage_options=options)
            if prepared is not None
            else _stage_spark(model, data_url, staged, engine, checks)
        ),
    )

    meta = _items_meta(data_url, engine)
    names = ["datasets"] + (["subsets"] if "subset" in meta else [])
    names += ["pairs", "models"] if {"model_a", "model_b"} <= set(meta) else []
    others = [f"summary/{n}.parquet" for n in names] + ["summary.json", "figures/win_rates.png"]
    new_files = replace_outputs(store, output, staged, [f for f, _ in written], others)
    tables = _summaries(model, meta, _runner(model, data_url, store, engine, meta, prepared, written))
    counts = checks.counts(tables)
    record = {
        "format": OUTPUT_FORMAT,
        "inputs": inputs,
        "engine": chosen,
        "model": {
            "judges": len(model.judge_ids),
            "alphas": model.alphas,
            "calibrator_input": model.calibrator_input,
            "records_calibration_items": model.fitted_items is not None,
        }
        | ({} if model.fitted_items is not None else {"note": _NO_CALIBRATION_ITEMS}),
        "counts": counts,
        "items_url": store.url_of("items"),
        "seconds": round(time.perf_counter() - started, 3),
    } | {name: json_records(table) for name, table in tables.items()}
    _write_results(store, tables, record)
    store.write_json(MARKER, ownership_marker(inputs, new_files))
    store.commit_success()
    log.info(
        "score: %d items (%d without votes) of %d dataset(s) on %s -> %s",
        counts["items"],
        counts["items_without_votes"],
        len(tables["datasets"]),
        chosen,
        output_url,
    )
    return record


def _write_results(store: RunStore, tables: dict[str, pd.DataFrame], record: dict[str, Any]) -> None:
    """The summary tables and ``summary.json``, then the figure: drawing it is what imports matplotlib, so every
    number is written first."""
    for name, table in tables.items():
        store.write_table(f"summary/{name}.parquet", table)
    store.write_json("summary.json", record)
    store.write_bytes("figures/win_rates.png", summ.figure(tables["datasets"], tables.get("models")))


def _score_table_kind(
    model: TableModel,
    data_url: str,
    store: RunStore,
    output: Output,
    inputs: dict[str, Any],
    engine: EngineConfig,
    chosen: str,
    unknown_judges: str,
    min_judge_coverage: float,
    started: float,
) -> dict[str, Any]:
    """Score with a model kind that reads the data table itself (:class:`~judgecal_dist.models.interface.TableModel`:
    every check made and the rows scored before anything is written), then commit its rows and summaries like a
    panel score."""
    table, counts = score_table(
        model,
        data_url,
        engine=engine,
        engine_name=chosen,
        unknown_judges=unknown_judges,
        min_judge_coverage=min_judge_coverage,
    )
    options = dict(engine.storage_options)
    staged, written = stage_items(
        store,
        output,
        lambda staged: write_items(iter(table.to_batches()), table.schema, staged, storage_options=options),
    )
    tables = model.summaries(table)
    others = [f"summary/{n}.parquet" for n in sorted(tables)] + ["summary.json"]
    new_files = replace_outputs(store, output, staged, [f for f, _ in written], others)
    record = {
        "format": OUTPUT_FORMAT,
        "inputs": inputs,
        "engine": chosen,
        "model": {"kind": model.kind, "name": model.name, "judges": len(model.judge_ids)},
        "counts": counts,
        "items_url": store.url_of("items"),
        "seconds": round(time.perf_counter() - started, 3),
    } | {name: json_records(frame) for name, frame in tables.items()}
    for name, frame in tables.items():
        store.write_table(f"summary/{name}.parquet", frame)
    store.write_json("summary.json", record)
    store.write_json(MARKER, ownership_marker(inputs, new_files))
    store.commit_success()
    log.info("score: %d rows of a %s model on %s -> %s", table.num_rows, model.kind, chosen, store.url)
    return record


def _items_meta(data_url: str, engine: EngineConfig) -> list[str]:
    """Columns of the optional ``items`` table (empty when it is absent)."""
    if "items" not in dataset_tables(data_url, storage_options=engine.storage_options):
        return []
    return open_table(data_url, "items", storage_options=engine.storage_options)[1]


# -- Spark -----------------------------------------------------------------------------------------------------
def _stage_spark(
    model: Calibration, data_url: str, staged: str, engine: EngineConfig, checks: TableChecks
) -> list[tuple[str, int]]:
    """Score on Spark into ``staged`` (tasks write through fsspec); the files written, after the tally's checks."""
    scorer = spark_runner()
    items, tally = scorer.item_votes(engine, data_url, model.judge_ids, sample=checks.sample)
    log.info("score: scoring items on spark into %s", staged)
    # Only the files that successful tasks report are promoted: a failed task's leftovers never are.
    written: list[tuple[str, int]] = scorer.write_partitions(
        items,
        functools.partial(score_partition, model=model),
        items_schema(model),
        writer=write_items,
        staged_url=staged,
        storage_options=dict(engine.storage_options),
    )
    # The checks a pre-pass over the verdicts used to make, from what the scan tasks tallied; nothing is
    # promoted yet, so a refused table leaves only the staging folder, which the caller removes.
    checks.tally(tally.value)
    return written


class _SparkSums:
    """The Spark runner of the summary kernels over the written item rows (read back in the tasks)."""

    def __init__(self, model: Calibration, data_url: str, store: RunStore, engine: EngineConfig, files: list[str]):
        self.scorer = spark_runner()
        self.model, self.data_url, self.engine = model, data_url, engine
        reader = functools.partial(
            read_items_partition,
            files=[f.removeprefix("items/") for f in files],
            folder_url=store.url_of("items"),
            storage_options=dict(engine.storage_options),
        )
        self.reader, self.n_files = reader, len(files)
        self.items = self.scorer.read_written(engine, len(files), reader, items_schema(model))

    def __call__(self, by: list[str], needs: list[str], *, models: bool = False) -> pd.DataFrame:
        rows = self.scorer.with_item_columns(self.items, self.engine, self.data_url, needs) if needs else self.items
        if models:
            return self.scorer.partition_sums(
                rows, summ.model_rows_partition, summ.model_rows_schema(), summ.MODEL_KEYS
            )
        alphas, eps = self.model.alphas, self.model.eps
        kernel = functools.partial(summ.sums_partition, by=by, alphas=alphas, eps=eps)
        if not needs:  # the kernel runs in the tasks that read the rows back
            return self.scorer.written_sums(
                self.engine, self.n_files, self.reader, kernel, summ.sums_schema(by, alphas), by
            )
        return self.scorer.partition_sums(rows, kernel, summ.sums_schema(by, alphas), by)


# -- in process ------------------------------------------------------------------------------------------------
class _LocalSums:
    """The in-process runner of the summary kernels: over the whole scored table, with the items' metadata."""

    def __init__(self, model: Calibration, data_url: str, engine: EngineConfig, meta: list[str], table: pa.Table):
        self.model, self.frame = model, summ.frame_of(table)
        wanted = [c for c in ("subset", "model_a", "model_b") if c in meta]
        if wanted:
            extra_cols = read_dataset_table(
                data_url, "items", ["dataset", "item_id", *wanted], storage_options=engine.storage_options
            )
            self.frame = self.frame.merge(extra_cols.to_pandas(), on=["dataset", "item_id"], how="left")

    def __call__(self, by: list[str], needs: list[str], *, models: bool = False) -> pd.DataFrame:
        rows = self.frame[self.frame[needs].notna().all(axis=1)] if needs else self.frame
        if models:
            return summ.model_rows_pandas(rows)
        return summ.sums_pandas(rows, by, self.model.alphas, self.model.eps)


def _runner(
    model: Calibration,
    data_url: str,
    store: RunStore,
    engine: EngineConfig,
    meta: list[str],
    prepared: ScoredBatches | None,
    written: list[tuple[str, int]],
) -> _LocalSums | _SparkSums:
    """The summary kernels' runner: over the batches scored in this process, or on Spark over the written files."""
    if prepared is not None:
        return _LocalSums(model, data_url, engine, meta, pa.Table.from_batches(prepared.batches, items_schema(model)))
    return _SparkSums(model, data_url, store, engine, sorted(f for f, _ in written))


def _summaries(model: Calibration, meta: list[str], sums: _LocalSums | _SparkSums) -> dict[str, pd.DataFrame]:
    """The summary tables from per-group sums of one runner (in process or on Spark: the same kernels)."""
    alphas = model.alphas
    tables = {"datasets": summ.finalise(sums(["dataset"], []), alphas)}
    if "subset" in meta:
        tables["subsets"] = summ.finalise(sums(["dataset", "subset"], ["subset"]), alphas)
    if {"model_a", "model_b"} <= set(meta):
        pair = ["model_a", "model_b"]
        tables["pairs"] = summ.finalise(sums(["dataset", *pair], pair), alphas)
        tables["models"] = summ.finalise(sums(summ.MODEL_KEYS, pair, models=True), [])
    if model.fitted_items is None:  # unknown, not none: the model records no calibration items
        tables = {
            k: t.assign(items_in_calibration=None) if "items_in_calibration" in t else t for k, t in tables.items()
        }
    return tables
