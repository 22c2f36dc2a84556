"""``judgecal label estimate``: prediction-powered estimates of the numbers teams report, with the calibrated panel
as the proxy and the labels that came back.

Targets (:mod:`judgecal_dist.methods.labels.targets`): each model judge's accuracy, the panel's accuracy, the win
rate of A over B, and the win rate per group of every ``--by`` column (default: ``subset`` and the model ``pair``
when the items table holds them). Estimator (:class:`~judgecal_dist.methods.labels.estimators.PredictionPoweredMean`):
PPI++ for uniform labels, the inverse-probability form for labels drawn by ``label select`` (``--queue``), the
classical interval of the labels alone beside each, and the effective number of labels.

The panel's ``p`` comes from the scoring path (:func:`judgecal_dist.scoring.kernel.score_batch`) inside the one kernel
(:mod:`judgecal_dist.labels.estimate_kernel`), in this process below the engine's memory budget and on Spark above
it (:func:`judgecal_dist.engine.jobs.stats.choose_engine` decides by size, as for score); either way one pass over
the table gives each target's sums, and the same code finishes them.

Output (any fsspec URL)::

    <output>/estimates.parquet     target, estimate, lower, upper, method, n_labels, effective_labels,
                                   classical_lower, classical_upper, classical_estimate, lambda, n_items,
                                   labels_to_halve
    <output>/report.md             the estimates first, then how many more labels would halve each interval
    <output>/estimates.json        inputs, engine, design, counts, the rows
    <output>/_JUDGECAL_ESTIMATES   marker: this folder is label estimate's (the one ownership rule)
    <output>/_SUCCESS              written last
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.stats import choose_engine
from judgecal_dist.engine.results.store import SUCCESS, RunStore
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import dataset_files, dataset_tables, open_table
from judgecal_dist.io.filesystem import fingerprint_inputs, require_bucket
from judgecal_dist.io.ownership import Ownership, refuse_output_inside
from judgecal_dist.labels import estimate_report
from judgecal_dist.labels.estimate_kernel import PAIR
from judgecal_dist.labels.estimate_local import local_moments
from judgecal_dist.methods.labels.estimators import METHODS, estimates_frame
from judgecal_dist.methods.labels.moments import LabelMoments
from judgecal_dist.models.binary import BinaryPipeline
from judgecal_dist.scoring.artifact import load_calibration

__all__ = ["MARKER", "OUTPUT_FORMAT", "OWNER", "Settings", "estimate_labels", "read_queues"]

log = logging.getLogger(__name__)

OUTPUT_FORMAT = "judgecal.label-estimates/v1"
MARKER, MARKER_FORMAT = "_JUDGECAL_ESTIMATES", "judgecal.label-estimates-output/v1"
OWN_NAMES = ("estimates.parquet", "report.md", "estimates.json", SUCCESS)
OWNER = Ownership(MARKER, MARKER_FORMAT, "label estimate", "--output", OWN_NAMES)
_QUEUE_COLUMNS = ["dataset", "item_id", "inclusion_prob"]


@dataclass(frozen=True)
class Settings:
    """What ``label estimate`` estimates: checked before anything is read (:meth:`check`)."""

    alpha: float = 0.05
    method: str = "ppi++"
    by: tuple[str, ...] | None = None  # None: subset and pair when the items table holds them
    sample: int = 0

    def check(self) -> None:
        """Refuse a setting outside its range, naming the option and the fix.

        Raises
        ------
        ConfigError
        """
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"--alpha: {self.alpha:g}: must be in (0, 1) (0.05 gives 95% intervals)")
        if self.method not in METHODS:
            raise ConfigError(f"--method: {self.method!r}: must be one of {list(METHODS)}")
        if self.by is not None and len(set(self.by)) != len(self.by):
            raise ConfigError(f"--by: {list(self.by)}: a column is named twice")


def estimate_labels(
    model_url: str,
    data_url: str,
    output_url: str,
    settings: Settings | None = None,
    *,
    queues: Sequence[str] = (),
    engine: EngineConfig | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Estimate every target from the labels in ``data_url`` and commit them at ``output_url``.

    Parameters
    ----------
    model_url : str
        A ``judgecal fit`` run folder (or model ``.json``) of a binary panel: its ``p`` per item is the proxy.
    data_url : str
        The ingested dataset: its verdicts (scored) and its labels table (the labels that came back).
    output_url : str
        New, empty, or a folder an earlier ``label estimate`` wrote (same inputs: "already complete").
    settings : Settings, optional
        Confidence (``alpha``), estimator, group columns, verdict sample.
    queues : sequence of str
        ``label select`` queue folders: their labelled items use the inverse-probability form.
    engine : EngineConfig, optional
        Engine choice (auto by size), Spark settings, storage options.
    overwrite : bool, default False
        Replace a committed estimate of other inputs (only the files its marker lists).

    Returns
    -------
    dict
        ``estimates.json``'s content (plus ``skipped: True`` when the same inputs were already complete).

    Raises
    ------
    ConfigError, InputError
        A setting out of range, a model that is not a binary panel, data without labels, an unknown ``--by``
        column, a queue that is not committed or lacks a column, an output inside an input or holding files of
        others; nothing is written then.
    """
    settings, engine = settings or Settings(), engine or EngineConfig()
    settings.check()
    options = dict(engine.storage_options)
    require_bucket(output_url, options)
    for option, url in [("--data", data_url), *(("--queue", q) for q in queues)]:
        refuse_output_inside(output_url, "--output", {option: url})
    model = _binary_model(model_url, options)
    dataset_files(data_url, "verdicts", storage_options=options)
    if "labels" not in dataset_tables(data_url, storage_options=options):
        raise InputError(f"{data_url}: labels: no labels table; ingest the labels that came back, then estimate")
    by = _group_columns(data_url, settings.by, options)
    queue = read_queues(queues, options) if queues else None
    inputs = {
        "model": model.source, "model_sha256": model.digest, "data": data_url,
        "data_sha256": fingerprint_inputs(data_url, options)["sha256"],
        "queues": [{"url": q, "sha256": fingerprint_inputs(q, options)["sha256"]} for q in queues],
        "settings": asdict(settings) | {"by": by},
    }  # fmt: skip
    store = RunStore(output_url, storage_options=options)
    marker = OWNER.read(store.url, [f for f in store.list_files() if not f.startswith("_tmp/")], store.read_bytes)
    if OWNER.reuse(output_url, (marker or {}).get("inputs"), inputs, committed=store.succeeded, overwrite=overwrite):
        return dict(store.read_json("estimates.json")) | {"skipped": True}
    started = time.perf_counter()
    chosen = choose_engine(data_url, None, engine)
    moments, counts = _moments(model, data_url, engine, chosen, settings, by, queue)
    _check_labels(counts, data_url, queues)
    ordered = {name: moments[name] for name in sorted(moments, key=_order)}  # both engines: one row order
    frame = estimates_frame(ordered, alpha=settings.alpha, method=settings.method)
    record = {
        "format": OUTPUT_FORMAT, "inputs": inputs, "engine": chosen,
        "design": "inverse-probability (label select queues)" if queue is not None else "uniform labels",
        "counts": counts | {"queued_items": 0 if queue is None else queue.num_rows},
        "seconds": round(time.perf_counter() - started, 3),
        "estimates": frame.replace({np.nan: None}).to_dict(orient="records"),
    }  # fmt: skip
    _commit(store, marker, frame, record, inputs)
    log.info(
        "label estimate: %d targets from %d labels on %s -> %s", len(frame), counts["labelled"], chosen, output_url
    )
    return record


def _check_labels(counts: dict[str, Any], data_url: str, queues: Sequence[str]) -> None:
    """Refuse, before anything is written, labels that would give a biased or empty estimate."""
    if queues and counts.get("queued_without_label"):
        # A queued item without its label would count as "drawn, outcome zero": the estimate leans on the proxy.
        raise InputError(
            f"{', '.join(queues)}: {int(counts['queued_without_label']):,} queued items have no label in "
            f"{data_url}'s labels table; add the labels that came back (judgecal label add --data {data_url} "
            "--labels FILE), then estimate"
        )
    if not queues and counts["labelled"] - counts.get("labelled_in_calibration", 0) <= 0:
        raise InputError(
            f"{data_url}: labels: every label is on an item the model was fitted on (the proxy saw it); label "
            "new items (judgecal label select, then judgecal label add) and estimate with --queue"
        )


def _order(target: str) -> tuple[int, str]:
    """Each judge's accuracy, the panel's, the win rate, then the groups' win rates (by name within each)."""
    if target.startswith("judge_accuracy:"):
        return 0, target
    return {"panel_accuracy": 1, "win_rate": 2}.get(target, 3), target


def _binary_model(model_url: str, options: dict[str, Any]) -> BinaryPipeline:
    model = load_calibration(model_url, storage_options=options)
    if not isinstance(model, BinaryPipeline):
        kind = getattr(model, "kind", type(model).__name__)
        raise InputError(
            f"--model: {model_url}: a {kind} model is not a binary panel; label estimate needs the model of "
            "`judgecal fit` on A/B verdicts (its p per item is the proxy)"
        )
    return model


def _group_columns(data_url: str, by: Sequence[str] | None, options: dict[str, Any]) -> list[str]:
    """The ``--by`` columns checked against the items table (``pair``: its ``model_a`` and ``model_b``); the
    default is ``subset`` and ``pair`` where present."""
    present = open_table(data_url, "items", storage_options=options)[1] if _has_items(data_url, options) else []
    has_pair = {"model_a", "model_b"} <= set(present)
    if by is None:
        return [c for c in ("subset",) if c in present] + ([PAIR] if has_pair else [])
    missing = [c for c in by if (c == PAIR and not has_pair) or (c != PAIR and c not in present)]
    if missing or "item_id" in by or "dataset" in by:
        known = [PAIR] * has_pair + sorted(c for c in present if c not in ("dataset", "item_id"))
        bad = missing or [c for c in by if c in ("item_id", "dataset")]
        raise InputError(f"{data_url}: items: --by: column(s) {bad} cannot group the items (known: {known})")
    return list(by)


def _has_items(data_url: str, options: dict[str, Any]) -> bool:
    return "items" in dataset_tables(data_url, storage_options=options)


def read_queues(urls: Sequence[str], options: dict[str, Any]) -> pa.Table:
    """``dataset, item_id, inclusion_prob`` of every item in the committed queues at ``urls``, its overall
    probability of having been drawn, ``1 - prod_r (1 - pi_r)`` over the rounds that list it.

    Raises
    ------
    InputError
        A queue folder without ``_SUCCESS`` or ``queue.parquet``, a missing column, an item listed twice in one
        queue, or a probability outside (0, 1] (naming the file, the column and the fix).
    """
    frames = []
    for url in urls:
        store = RunStore(url, storage_options=options)
        where = f"--queue: {store.url_of('queue.parquet')}"
        if not (store.exists("queue.parquet") and store.succeeded):
            raise InputError(f"--queue: {url}: not a committed label select queue (no queue.parquet or {SUCCESS})")
        table = pq.read_table(io.BytesIO(store.read_bytes("queue.parquet")))
        missing = [c for c in _QUEUE_COLUMNS if c not in table.column_names]
        if missing:
            raise InputError(f"{where}: no column(s) {missing}; pass the folder `judgecal label select` wrote")
        frame = table.select(_QUEUE_COLUMNS).to_pandas()
        pi = frame["inclusion_prob"].to_numpy(dtype=np.float64)
        bad = ~((pi > 0.0) & (pi <= 1.0))
        if bad.any():
            raise InputError(f"{where}: inclusion_prob: {int(bad.sum())} values outside (0, 1] (e.g. {pi[bad][:3]})")
        twice = frame.duplicated(["dataset", "item_id"])
        if twice.any():
            first = frame.loc[twice, ["dataset", "item_id"]].iloc[0].tolist()
            raise InputError(f"{where}: dataset+item_id: {int(twice.sum())} items listed twice (e.g. {first})")
        frames.append(frame)
    both = pd.concat(frames, ignore_index=True).astype({"dataset": str, "item_id": str})
    both["miss"] = 1.0 - both["inclusion_prob"].to_numpy(dtype=np.float64)
    summed = both.groupby(["dataset", "item_id"], sort=True)["miss"].prod()
    overall = 1.0 - summed.to_numpy()
    keys = summed.index.to_frame(index=False)
    return pa.table({"dataset": keys["dataset"], "item_id": keys["item_id"], "inclusion_prob": overall})


def _moments(
    model: BinaryPipeline,
    data_url: str,
    engine: EngineConfig,
    chosen: str,
    settings: Settings,
    by: list[str],
    queue: pa.Table | None,
) -> tuple[dict[str, LabelMoments], dict[str, int]]:
    """Each target's sums and the label counts, in this process or on Spark (one pass either way)."""
    if chosen == "local":
        return local_moments(model, data_url, engine, settings.sample, by, queue)
    from judgecal_dist.labels.estimate_spark import spark_moments

    return spark_moments(model, data_url, engine, settings.sample, by, queue)


def _commit(
    store: RunStore, marker: dict[str, Any] | None, frame: pd.DataFrame, record: dict[str, Any], inputs: dict[str, Any]
) -> None:
    """Write the estimates, the report and the record, the marker naming them, then ``_SUCCESS`` (last)."""
    files = sorted(OWN_NAMES[:3])
    if store.succeeded:  # an overwrite: the old result stops being committed before any file changes
        store.remove_files([SUCCESS])
    # claimed first (inputs unknown): a crash from here leaves a folder of ours that a rerun rewrites
    store.write_json(MARKER, OWNER.document(files if marker else [], inputs=None))
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer)
    store.write_bytes("estimates.parquet", buffer.getvalue())
    store.write_text("report.md", estimate_report.render(frame, record))
    store.write_json("estimates.json", record)
    store.write_json(MARKER, OWNER.document(files, inputs=inputs))
    store.commit_success()
