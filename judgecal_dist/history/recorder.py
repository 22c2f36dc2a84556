"""Record a study run in the history of its output root (called by the runner after commit, and after failure)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.history.judges import judge_counts, with_rates
from judgecal_dist.history.store import is_recorded, record_run
from judgecal_dist.models.files import LEGACY_FILE, MODEL_FILE

__all__ = ["record_study_run", "repair_study_run", "model_parameters"]

log = logging.getLogger(__name__)
#: The exported model (``judgecal.binary-pipeline``) first, then the calibration file of runs made before it.
MODEL_FILES = (MODEL_FILE, LEGACY_FILE)


def model_parameters(store: RunStore) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(per-judge weights, calibrator parameters) of the run's exported model; empty when it has none.

    A judge's weight is what the exported aggregator multiplies its vote by (``weights``, or a stacker's
    ``coef``); an aggregator without one weight per judge (majority, Dawid-Skene) gives its judges a null weight.
    The frame always has both columns, ``weight`` as float.
    """
    for name in MODEL_FILES:
        if store.exists(name):
            doc = store.read_json(name)
            break
    else:
        return _weights([], []), {}
    aggregator = doc.get("aggregator") or {}
    ids = doc.get("judge_ids") or aggregator.get("judge_ids") or []
    weights = aggregator.get("weights") or aggregator.get("coef") or []
    per_judge = _weights(ids, weights if len(ids) == len(weights) else [np.nan] * len(ids))
    calibrator = {k: v for k, v in (doc.get("calibrator") or {}).items() if isinstance(v, int | float)}
    return per_judge, calibrator


def _weights(ids: list[Any], weights: list[Any]) -> pd.DataFrame:
    return pd.DataFrame({"judge_id": pd.Series(ids, dtype=object), "weight": pd.Series(weights, dtype=float)})


def record_study_run(
    output: str,
    manifest: Mapping[str, Any],
    *,
    run_url: str,
    data_url: str | None,
    engine: EngineConfig,
    counts: pd.DataFrame | None = None,
) -> None:
    """Append the run's rows to ``<output>/history``; a problem is logged, never raised (the run stands).

    A succeeded run records its summary rows and per-judge statistics of ``data_url`` (with fitted weights and
    calibrator parameters when its model has them); a failed run records its ``runs`` row (status and error).
    ``counts``: the per-judge counts of ``data_url`` when the study computed them from its own read
    (:func:`~judgecal_dist.history.judges.coded_counts`); None reads the table for them.
    """
    options = dict(engine.storage_options)
    try:
        summary = judges = None
        extra: dict[str, Any] = {}
        if manifest.get("status") == "succeeded":
            store = RunStore(run_url, storage_options=options)
            summary = store.read_table("summary.parquet")
            weights, calibrator = model_parameters(store)
            extra["calibrator"] = json.dumps(calibrator, sort_keys=True) if calibrator else None
            if data_url:
                # one schema whatever the model: a weight column, null where the aggregator has no weight per judge
                counts = judge_counts(data_url, config=engine) if counts is None else counts
                judges = with_rates(counts).merge(weights, on="judge_id", how="left")
        record_run(output, manifest, summary=summary, judges=judges, extra=extra, storage_options=options)
    except Exception as err:  # noqa: BLE001 - the run's results are committed; a missing history row is a warning
        log.warning("history: could not record run %s (%s: %s)", manifest.get("run_id"), type(err).__name__, err)


def repair_study_run(output: str, run_url: str, *, data_url: str | None, engine: EngineConfig) -> bool:
    """Record a committed run whose history entry is missing (a kill between ``_SUCCESS`` and the history write).

    Called when a rerun finds the run complete, so the history is repaired by the next run and a rerun of a
    recorded run writes nothing. Returns whether it recorded; a problem is logged, never raised (the run stands).
    """
    try:
        manifest = RunStore(run_url, storage_options=dict(engine.storage_options)).read_json("manifest.json")
        if is_recorded(output, manifest, storage_options=engine.storage_options):
            return False
    except Exception as err:  # noqa: BLE001 - the run's results are committed; a missing history row is a warning
        log.warning("history: could not check run %s (%s: %s)", run_url, type(err).__name__, err)
        return False
    log.info("history: run %s was committed but not recorded; recording it now", manifest.get("run_id"))
    record_study_run(output, manifest, run_url=run_url, data_url=data_url, engine=engine)
    return True
