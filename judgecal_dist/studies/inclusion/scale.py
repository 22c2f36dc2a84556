"""The inclusion study's default pipelines at arena scale: one-coin x {none, Platt, beta} x {all, top-k} panels.

Same protocol and metrics as :mod:`judgecal_dist.studies.inclusion.study` (keyed-hash grouped splits, panels chosen on
the calibration part, calibrators fitted on the calibration part's scores, NLL / Brier / ECE / accuracy on the
evaluation part, means over splits with corrected resampled t intervals), restricted to what scales: the one-coin aggregator
and the Platt and beta calibrators. Two executions give the same numbers (tested to 1e-9):

``dense``
    the inclusion study's way: the item x judge int8 panel is put in Ray's object store once and every replicate
    task runs :func:`~judgecal_dist.methods.pipeline.fit_pipelines` on it.
``onepass``
    :func:`judgecal_dist.engine.onepass.replicates.evaluate_replicates`: all replicates share every scan of a persisted
    Spark table of items (or of the in-memory panel with ``stats_engine: local``); no item-level row reaches the
    driver. :func:`run_shared` runs the replicates still to do in batches of ``onepass_batch`` seeds (each batch
    shares its passes) and commits each batch's parts as soon as it is done, so an interrupted run resumes from
    the last finished batch and a finished run returns without rescanning.
``auto`` (default)
    ``dense`` below ``dense_max_verdicts`` verdict rows (counted from the Parquet footers), ``onepass`` above;
    the threshold is measured by ``benchmarks/dense_vs_onepass.py``.

Curated panels are compared with the full panel by their mean metrics only; the per-item paired permutation test
and the conformal sets of the inclusion study need item-level losses and are left to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import model_validator

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.panel import Panel, load_panel
from judgecal_dist.engine.jobs.stats import choose_engine
from judgecal_dist.engine.onepass.replicates import (
    ONEPASS_CALIBRATORS,
    evaluate_replicates,
    onepass_source,
    spark_label_classes,
)
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import count_rows
from judgecal_dist.io.records import json_records
from judgecal_dist.methods.pipeline import Settings, choose_panels, fit_pipelines
from judgecal_dist.progress import Progress
from judgecal_dist.settings import (
    MAX_REPLICATES,
    Count,
    Fraction,
    PipelineFields,
    SplitFields,
    check_panels,
    integer,
    listed,
    one_of,
)
from judgecal_dist.splits import calibration_mask
from judgecal_dist.stats.inference import summarise_over_splits
from judgecal_dist.stats.metrics import metric_table
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.inclusion import scale_report as inclusion_scale_report
from judgecal_dist.studies.inclusion.recommend import recommend
from judgecal_dist.studies.preflight import check_labels, check_splits, check_votes

__all__ = [
    "NAME",
    "Config",
    "Replicate",
    "ScaleInput",
    "load",
    "preflight",
    "plan",
    "run_shared",
    "run_replicate",
    "summarise",
    "EXECUTIONS",
]

NAME = "inclusion_scale"
METRICS = ("nll", "brier", "ece", "accuracy")
EXECUTIONS = ("auto", "dense", "onepass")
AGGREGATOR = "one_coin"
#: Verdict rows below which ``execution: auto`` runs dense, measured by benchmarks/dense_vs_onepass.py (README): on
#: 2 cores dense is faster per replicate at every size measured, but its driver grows ~250 MB per million
#: verdict rows (load_panel), reaching 3 GB near 11M rows; one-pass keeps the driver flat (~340 MB).
DENSE_MAX_VERDICTS = 10_000_000


class Config(SplitFields, PipelineFields):
    """Settings of the study (``studies/configs/inclusion_scale.yaml``); every key can be ``--set``.

    The pipeline hyperparameters (``eps``, ``alpha0``, ``beta_penalty``, ``n_bins``, ...) are the shared
    :class:`~judgecal_dist.settings.PipelineFields`.
    """

    data_required: ClassVar[str] = "an ingested dataset URL"

    dataset: str | None = None
    calib_fraction: Fraction = 0.5
    calibrators: Annotated[tuple[Annotated[str, one_of(ONEPASS_CALIBRATORS)], ...], listed(min_length=1)] = (
        ONEPASS_CALIBRATORS
    )
    panels: Annotated[tuple[str, ...], listed(min_length=1)] = ("all", "top3", "top5", "top10")
    sample: Count = 0
    execution: Annotated[str, one_of(EXECUTIONS)] = "auto"
    dense_max_verdicts: Count = DENSE_MAX_VERDICTS
    onepass_batch: Annotated[int, integer(1, MAX_REPLICATES)] = 50

    @model_validator(mode="after")
    def _check(self) -> Config:
        check_panels(self.panels, ("all",))
        return self

    @property
    def settings(self) -> Settings:
        return Settings.of(self)


@dataclass(frozen=True)
class Replicate:
    """One split; ``rows`` may hold precomputed metric rows (then ``run_replicate`` only returns them)."""

    seed: int
    calib_fraction: float
    calibrators: tuple[str, ...]
    panels: tuple[str, ...]
    settings: Settings
    n_bins: int
    rows: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ScaleInput:
    """What ``plan`` and the replicate tasks receive: the execution chosen, and the dense panel when dense."""

    execution: str
    verdict_rows: int
    engine: EngineConfig
    panel: Panel | None = None
    reason: str = ""


def choose_execution(config: Config, verdict_rows: int) -> tuple[str, str]:
    """``("dense" | "onepass", reason)`` for a table of ``verdict_rows`` rows."""
    if config.execution != "auto":
        return config.execution, "requested"
    if verdict_rows < config.dense_max_verdicts:
        return "dense", f"auto: {verdict_rows} verdict rows < dense_max_verdicts {config.dense_max_verdicts}"
    return "onepass", f"auto: {verdict_rows} verdict rows >= dense_max_verdicts {config.dense_max_verdicts}"


def load(config: Config, engine: EngineConfig) -> ScaleInput:
    """Choose the execution and validate the input before anything is written.

    Dense: the panel is loaded (as the inclusion study loads it). One-pass: a Spark aggregate counts the labelled
    items per class of the chosen dataset (one row per class comes back), so bad input is still rejected here.

    Raises
    ------
    InputError
        Missing tables, no labelled items, a single label class, several datasets and none chosen.
    """
    rows = count_rows(config.data_url, "verdicts", storage_options=engine.storage_options)
    execution, reason = choose_execution(config, rows)
    panel = None
    if execution == "dense" or choose_engine(config.data_url, None, engine) == "local":
        panel = load_panel(
            config.data_url, sample=config.sample, dataset=config.dataset, storage_options=dict(engine.storage_options)
        )
        classes = np.unique(panel.labels)
    else:
        classes = spark_label_classes(config.data_url, engine, config.dataset)
    if len(classes) < 2:
        raise InputError(
            f"{config.data}: labels: label: labelled items have {len(classes)} class(es) "
            f"{classes.tolist()}; calibration needs both A and B"
        )
    return ScaleInput(execution=execution, verdict_rows=rows, engine=engine, panel=panel, reason=reason)


def preflight(config: Config, data: ScaleInput) -> None:
    """Refuse, before anything is written, a dense panel without A/B verdicts or with only one, and a
    ``calib_fraction`` whose planned splits leave a calibration part without two labelled items of each class or
    an evaluation part without two items (the splits drawn as the replicates draw them). A one-pass run on Spark
    has no dense panel on the driver; its label classes were checked by :func:`load`."""
    if data.panel is None:
        return
    source = str(config.data)
    check_votes(data.panel, source=source)
    check_labels(data.panel.labels, need=2, source=source, study=NAME, why="the calibrators fit on both classes")
    check_splits(
        data.panel.group_keys,
        data.panel.labels,
        config.seeds,
        config.calib_fraction,
        need_cal=2,
        need_eval=2,
        setting="calib_fraction",
        source=source,
        why="the calibrators fit on both classes",
    )


def plan(config: Config, data: ScaleInput) -> list[Replicate]:
    """One replicate per seed; under ``onepass`` their rows are computed by :func:`run_shared`, batch by batch."""
    base: dict[str, Any] = dict(
        calib_fraction=config.calib_fraction,
        calibrators=tuple(config.calibrators),
        panels=tuple(config.panels),
        settings=config.settings,
        n_bins=config.n_bins,
    )
    return [Replicate(seed=s, **base) for s in config.seeds]


def run_shared(
    config: Config, data: ScaleInput, todo: list[Replicate], commit: Callable[[int, pd.DataFrame], None]
) -> bool:
    """Under ``onepass``: evaluate ``todo`` in batches of ``onepass_batch`` seeds sharing passes, committing each
    batch's parts (``commit(seed, rows)``) as soon as the batch is done. False under ``dense`` (the runner fans out).
    """
    if data.execution == "dense":
        return False
    kwargs: dict[str, Any] = dict(
        panels=config.panels, calibrators=config.calibrators, settings=config.settings, n_bins=config.n_bins
    )
    seeds = [rep.seed for rep in todo]
    batches = [seeds[i : i + config.onepass_batch] for i in range(0, len(seeds), config.onepass_batch)]
    progress = Progress(len(seeds))
    source = onepass_source(
        config.data_url, data.engine, dataset=config.dataset, sample=config.sample, panel=data.panel
    )
    try:
        for batch in batches:
            table = evaluate_replicates(source, batch, config.calib_fraction, **kwargs)
            for seed, rows in table.groupby("seed", sort=True):
                commit(int(seed), rows.reset_index(drop=True))
            progress.advance(len(batch))
    finally:
        source.release()
    return True


def run_replicate(data: ScaleInput, rep: Replicate) -> pd.DataFrame:
    """Metric rows of split ``rep.seed`` on the dense panel (one-pass replicates run in :func:`run_shared`)."""
    if rep.rows:
        return pd.DataFrame(list(rep.rows))
    panel = data.panel
    if data.execution != "dense" or panel is None:
        raise ConfigError("inclusion_scale: one-pass replicates run through run_shared (studies.runner.execute)")
    settings = rep.settings
    in_cal = calibration_mask(panel.group_keys, [rep.seed], rep.calib_fraction)[0]
    v_cal, y_cal, v_eval, y_eval = (
        panel.votes[in_cal],
        panel.labels[in_cal],
        panel.votes[~in_cal],
        panel.labels[~in_cal],
    )
    panels = choose_panels(rep.panels, v_cal, y_cal, panel.judge_ids, panel.families, settings)
    rows = []
    for panel_name, cols in panels.items():
        probabilities = fit_pipelines(AGGREGATOR, rep.calibrators, settings, v_cal[:, cols], y_cal, v_eval[:, cols])
        for cal_name, p in probabilities.items():
            rows.append(
                {
                    "seed": rep.seed,
                    "kind": "metrics",
                    "aggregator": AGGREGATOR,
                    "calibrator": cal_name,
                    "panel": panel_name,
                    "panel_size": len(cols),
                    "n_cal": int(in_cal.sum()),
                    "n_eval": int((~in_cal).sum()),
                }
                | metric_table(y_eval, p, eps=settings.eps, n_bins=rep.n_bins)
            )
    return pd.DataFrame(rows)


def summarise(config: Config, parts: pd.DataFrame, data: ScaleInput) -> StudyResult:
    """Means over splits with corrected t intervals (same record keys as the inclusion study), figure and report."""
    by = ["aggregator", "calibrator", "panel"]
    metrics = parts[parts["kind"] == "metrics"]
    summary = summarise_over_splits(
        metrics,
        by=by,
        metrics=[*METRICS, "panel_size"],
        confidence=config.ci_level,
        rng=np.random.default_rng(config.seed),
        split_sizes=("n_eval", "n_cal"),  # the splits share items
    )
    summary = summary.rename(columns={f"{m}_mean": m for m in (*METRICS, "panel_size")} | {"n_splits": "replicates"})
    summary = summary.drop(columns=["panel_size_ci_low", "panel_size_ci_high"])
    order = {name: i for i, name in enumerate((AGGREGATOR, *config.calibrators, *config.panels))}
    summary = summary.sort_values(by, key=lambda col: col.map(order), kind="stable").reset_index(drop=True)
    records = json_records(summary)
    execution = {"execution": data.execution, "reason": data.reason, "verdict_rows": data.verdict_rows}
    return StudyResult(
        records=records,
        summary=summary,
        report=inclusion_scale_report.report(config, summary, execution),
        figures=inclusion_scale_report.figures(summary, config),
        extra={"execution": execution, "calibrator_input": config.calibrator_input},
        recommendation=recommend(config, summary, *((data.panel.n_judges, data.panel.n_items) if data.panel else ())),
    )
