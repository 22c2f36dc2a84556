r"""One-pass replicate evaluation of the one-coin pipeline: all R splits share every scan of the table.

For every replicate seed ``r`` (split by :func:`judgecal_dist.splits.calibration_mask`), every panel (all judges
and the top-k by posterior mean accuracy, chosen on the calibration part) and every calibrator (``none``,
``platt``, ``beta``), this computes the evaluation-part NLL, Brier score, ECE and accuracy that
:func:`judgecal_dist.methods.pipeline.fit_pipelines` and :func:`judgecal_dist.stats.metrics.metric_table` give
in memory, from a handful of passes over the items:

1. **Counts** (one pass): per replicate the calibration-side ``n``, positives and per-judge votes and correct
   votes; the panels and their one-coin weights follow exactly, from those counts
   (:func:`judgecal_dist.methods.pipeline.panels_from_counts` and :func:`~judgecal_dist.methods.pipeline.aggregate_counts`).
2. **Patterns and ranges** (one pass): panels of at most ``max_pattern_judges`` judges (the top-k panels) are
   counted per (side, label, vote pattern) cell (:mod:`judgecal_dist.engine.onepass.patterns`); their Platt
   and beta fits and their metrics then follow on the driver from the weighted cells, with no further pass.
   For the other panels (the full panel) the pass gives per class the min and max of the calibrator's input,
   which decide the calibrators' degenerate cases (constant labels or scores, separation) as in memory, and
   leaves each batch's calibration-side inputs cached in the process that read it.
3. **Fits** (one pass per optimiser iteration, large panels only): every Platt and beta fit runs the in-memory
   optimiser itself (``trust-exact`` for Platt, ``L-BFGS-B`` for beta, same start, options and penalty,
   :mod:`judgecal_dist.engine.onepass.fits`) in lockstep (:func:`judgecal_dist.engine.onepass.lockstep.run_lockstep`);
   each objective evaluation is a per-replicate sum of loss, gradient (and Hessian) over the cached
   calibration inputs, all requests in one pass.
4. **Metrics** (one pass, large panels only): per pipeline the evaluation-side sums of NLL, squared error,
   correctness and the per-bin ECE gaps.

The optimisers see the same objective values as in memory up to summation order, so they take the same steps
and the results agree to round-off (tested to 1e-9). The driver holds ``O(R x J x panels)`` numbers plus the
pattern cells (``R x 4 x 3^k`` per top-k panel).
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import functions as F
from scipy.special import logit
from threadpoolctl import threadpool_limits

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.engine.jobs.spark import get_session, read_table
from judgecal_dist.engine.onepass.fits import fit_beta, fit_platt
from judgecal_dist.engine.onepass.kernels import (
    BETA_STATS,
    METRIC_STATS,
    PLATT_STATS,
    Columns,
    Partial,
    PassSpec,
    counts_kernel,
    metrics_kernel,
    objective_kernel,
    ranges_kernel,
)
from judgecal_dist.engine.onepass.lockstep import run_lockstep
from judgecal_dist.engine.onepass.patterns import (
    MAX_PATTERN_PANEL_JUDGES,
    PatternColumns,
    PatternTable,
    patterns_kernel,
)
from judgecal_dist.engine.onepass.sources import Kernel, PanelSource, SparkItemsSource, spark_items_source
from judgecal_dist.engine.votes.spark import category_code
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import choose_dataset
from judgecal_dist.io.schema import VOTE_A, VOTE_B
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.pipeline import Settings, aggregate_counts, calibrator, panels_from_counts

__all__ = ["ONEPASS_CALIBRATORS", "evaluate_replicates", "panel_columns", "onepass_source", "spark_label_classes"]

log = logging.getLogger(__name__)

ONEPASS_CALIBRATORS = ("none", "platt", "beta")
AGGREGATOR = "one_coin"


@dataclass(frozen=True)
class _Column:
    seed: int
    replicate: int
    panel: str
    size: int


def panel_columns(
    panels: Sequence[str],
    n_votes: np.ndarray,
    n_correct: np.ndarray,
    n_cal: int,
    n_pos: int,
    judge_ids: np.ndarray,
    settings: Settings,
) -> dict[str, tuple[np.ndarray, OneCoin]]:
    """Columns and fitted one-coin model of every panel of one replicate, from its calibration counts: the
    pipeline's :func:`~judgecal_dist.methods.pipeline.panels_from_counts` and
    :func:`~judgecal_dist.methods.pipeline.aggregate_counts` (a top-k panel with k >= J is skipped).
    """
    unsupported = [p for p in panels if p != "all" and not (p.startswith("top") and p[3:].isdigit())]
    if unsupported:
        raise ConfigError(f"panels: the one-pass path supports 'all' and topK panels, got {unsupported[0]!r}")
    chosen = panels_from_counts(panels, n_votes, n_correct, judge_ids, None, settings)
    return {
        name: (cols, aggregate_counts(AGGREGATOR, settings, n_votes[cols], n_correct[cols], n_cal, n_pos))
        for name, cols in chosen.items()
    }


def onepass_source(
    url: str, engine: EngineConfig, *, dataset: str | None, sample: int, panel: Panel | None = None
) -> PanelSource | SparkItemsSource:
    """The labelled items the one-pass passes read: ``panel`` in memory when given (``stats_engine: local``),
    else a persisted Spark table of the dataset at ``url`` (release it with ``source.release()``)."""
    if panel is not None:
        return PanelSource(panel)
    session = get_session(engine.spark_master, conf=dict(engine.spark_conf))
    return spark_items_source(
        session, url, dataset=dataset, sample=sample, where=url, storage_options=engine.storage_options
    )


def spark_label_classes(url: str, engine: EngineConfig, dataset: str | None) -> np.ndarray:
    """The label classes (``A``, ``B``) among the labelled items of ``dataset`` at ``url``, by one Spark aggregate
    (one row per class reaches the driver): the input check of a one-pass run, before anything is written.

    Raises
    ------
    InputError
        Several datasets and none chosen, or an unknown dataset.
    """
    session = get_session(engine.spark_master, conf=dict(engine.spark_conf))
    labels = read_table(session, url, "labels")
    dataset = choose_dataset([r.dataset for r in labels.select("dataset").distinct().collect()], dataset, where=url)
    found = labels.where((F.col("dataset") == dataset) & category_code("label", table="labels").isin(VOTE_A, VOTE_B))
    return np.array([r.label for r in found.select("label").distinct().collect()])


def evaluate_replicates(
    source: PanelSource | SparkItemsSource,
    seeds: Sequence[int],
    fraction: float,
    *,
    panels: Sequence[str] = ("all",),
    calibrators: Sequence[str] = ONEPASS_CALIBRATORS,
    settings: Settings | None = None,
    n_bins: int = 10,
    max_pattern_judges: int = MAX_PATTERN_PANEL_JUDGES,
) -> pd.DataFrame:
    """Metrics of one-coin x ``calibrators`` x ``panels`` for every replicate seed (module docstring).

    Parameters
    ----------
    source : PanelSource or SparkItemsSource
        The labelled items (dense panel in memory, or a persisted Spark table).
    seeds : sequence of int
        Replicate seeds.
    fraction : float
        Calibration fraction.
    panels : sequence of str
        ``all`` and ``topK`` names.
    calibrators : sequence of str
        Subset of :data:`ONEPASS_CALIBRATORS`.
    settings : Settings, optional
        Pipeline hyperparameters (``calibrator_input`` included); default :class:`Settings`.
    n_bins : int
        ECE bins.
    max_pattern_judges : int
        Panels of at most this many judges (at most
        :data:`~judgecal_dist.engine.onepass.patterns.MAX_PATTERN_PANEL_JUDGES`)
        are fitted from vote-pattern counts; 0 fits every panel by passes.

    Returns
    -------
    DataFrame
        One row per (seed, panel, calibrator): ``seed, kind="metrics", aggregator, calibrator, panel,
        panel_size, n_cal, n_eval, nll, brier, ece, accuracy, fallback, n_iter``; ``attrs["passes"]`` counts
        the data passes.
        Rows are ordered by seed, panel (as given) and calibrator (as given).

    Raises
    ------
    ConfigError
        An unsupported panel or calibrator, or ``max_pattern_judges`` out of range.
    InputError
        A replicate whose calibration or evaluation part is empty.
    """
    settings = settings or Settings()
    bad = sorted(set(calibrators) - set(ONEPASS_CALIBRATORS))
    if bad or not calibrators:
        raise ConfigError(
            f"calibrators: the one-pass path supports {list(ONEPASS_CALIBRATORS)}, got {list(calibrators)}"
        )
    if not 0 <= max_pattern_judges <= MAX_PATTERN_PANEL_JUDGES:  # 4 x 3^k cells per panel and replicate
        raise ConfigError(f"max_pattern_judges: must be in [0, {MAX_PATTERN_PANEL_JUDGES}], got {max_pattern_judges}")
    spec = PassSpec(tuple(int(s) for s in seeds), float(fraction), settings.calibrator_input, settings.eps, n_bins)
    n_seeds, n_judges = len(spec.seeds), len(source.judge_ids)
    t0 = time.perf_counter()
    totals = source.map_reduce(functools.partial(counts_kernel, spec=spec)).sum
    n_cal, n_pos = totals[:n_seeds].astype(np.int64), totals[n_seeds : 2 * n_seeds].astype(np.int64)
    n_votes = totals[2 * n_seeds : 2 * n_seeds + n_seeds * n_judges].reshape(n_seeds, n_judges).astype(np.int64)
    n_correct = totals[2 * n_seeds + n_seeds * n_judges :].reshape(n_seeds, n_judges).astype(np.int64)
    empty = [s for s, m in zip(spec.seeds, n_cal, strict=True) if m == 0 or m == source.n_items]
    if empty:
        raise InputError(
            f"replicates: seed(s) {empty[:5]}: calibration or evaluation part is empty ({source.n_items} labelled "
            f"items, calib_fraction {fraction}); use more items or another fraction"
        )
    token = uuid.uuid4().hex  # names this evaluation's calibration-side cache entries on the workers
    columns, weights, prior_logit, pattern_panels, pattern_models = [], [], [], [], []
    for r, seed in enumerate(spec.seeds):
        chosen = panel_columns(
            panels, n_votes[r], n_correct[r], int(n_cal[r]), int(n_pos[r]), source.judge_ids, settings
        )
        for name, (judges, model) in chosen.items():
            if len(judges) <= max_pattern_judges:
                pattern_panels.append((r, judges))
                pattern_models.append((_Column(seed, r, name, len(judges)), model))
                continue
            w = np.zeros(n_judges)
            w[judges] = model.weights_
            columns.append(_Column(seed, r, name, len(judges)))
            weights.append(w)
            prior_logit.append(float(logit(model.prior_)))
    cols = Columns(
        np.column_stack(weights) if weights else np.zeros((n_judges, 0)),
        np.array(prior_logit),
        np.array([c.replicate for c in columns], dtype=np.intp),
        token=token,
    )
    pat = PatternColumns.of(pattern_panels, n_judges)
    log.info(
        "one-pass: counts of %d replicates in %.2fs; %d pattern panels, %d pass panels",
        n_seeds,
        time.perf_counter() - t0,
        len(pattern_panels),
        len(columns),
    )

    second = source.map_reduce(functools.partial(_patterns_and_ranges, spec=spec, cols=cols, pat=pat))
    with threadpool_limits(limits=1, user_api="blas"):  # L-BFGS-B's tiny BLAS calls crawl when split over threads
        rows = _pattern_rows(second.sum, pat, pattern_models, calibrators, settings, spec, n_cal, n_pos)

    lo, hi = second.min.reshape(-1, 2), second.max.reshape(-1, 2)
    jobs: list[Callable[[Any], Any]] = []
    keys: list[tuple[int, str]] = []
    for k, col in enumerate(columns):
        m, pos = int(n_cal[col.replicate]), int(n_pos[col.replicate])
        for name in calibrators:
            if name != "none":
                fit = fit_platt if name == "platt" else fit_beta
                jobs.append(functools.partial(fit, calibrator(name, settings), k, m, pos, lo[k], hi[k]))
                keys.append((k, name))
    n_passes = 2
    if jobs:
        with threadpool_limits(limits=1, user_api="blas"):
            fitted, n_fit = run_lockstep(
                jobs, functools.partial(_objective_pass, source, spec, cols), label="one-pass fit"
            )
        n_passes += n_fit
    params = dict(zip(keys, fitted, strict=True)) if jobs else {}
    pipelines = [(k, name) for k in range(len(columns)) for name in calibrators]
    if pipelines:
        requests = [(k, name, *(params[k, name][0] if name != "none" else (0.0, 0.0, 0.0))) for k, name in pipelines]
        sums = source.map_reduce(functools.partial(metrics_kernel, spec=spec, cols=cols, fitted=requests)).sum
        rows += _metric_rows(sums.reshape(len(pipelines), -1), pipelines, columns, n_cal, params)
        n_passes += 1
    order = {name: i for i, name in enumerate(panels)} | {name: i for i, name in enumerate(calibrators)}
    table = pd.DataFrame(rows)
    table = table.sort_values(
        ["seed", "panel", "calibrator"], key=lambda c: c.map(order) if c.name != "seed" else c, kind="stable"
    ).reset_index(drop=True)
    table.attrs["passes"] = n_passes
    log.info(
        "one-pass: %d pipelines x %d replicates, %d passes, %.2fs",
        len(table) // max(n_seeds, 1),
        n_seeds,
        n_passes,
        time.perf_counter() - t0,
    )
    return table


def _patterns_and_ranges(
    votes: np.ndarray, labels: np.ndarray, keys: np.ndarray, spec: PassSpec, cols: Columns, pat: PatternColumns
) -> Partial:
    """The second pass: pattern counts of the small panels, class ranges (and the cache) of the others."""
    ranges = ranges_kernel(votes, labels, keys, spec, cols)
    return Partial(patterns_kernel(votes, labels, keys, spec, pat).sum, ranges.min, ranges.max)


def _pattern_rows(
    sums: np.ndarray,
    pat: PatternColumns,
    models: list[tuple[_Column, Any]],
    calibrators: Sequence[str],
    settings: Settings,
    spec: PassSpec,
    n_cal: np.ndarray,
    n_pos: np.ndarray,
) -> list[dict[str, Any]]:
    """Fits and metric rows of every pattern panel, on the driver from its cell counts (no further pass)."""
    rows: list[dict[str, Any]] = []
    offsets = pat.offsets
    for p, (col, model) in enumerate(models):
        cells = sums[offsets[p] : offsets[p + 1]].reshape(2, 2, -1)
        table = PatternTable.of(cells, model.weights_, float(logit(model.prior_)))
        m, pos = int(n_cal[col.replicate]), int(n_pos[col.replicate])
        lo, hi = table.ranges(spec)
        params: dict[tuple[int, str], Any] = {}
        for name in calibrators:
            if name != "none":
                fit = fit_platt if name == "platt" else fit_beta
                params[0, name] = fit(calibrator(name, settings), p, m, pos, lo, hi, table.evaluator(spec))
        fitted = [params[0, name][0] if name != "none" else (0.0, 0.0, 0.0) for name in calibrators]
        metric = table.metrics(list(calibrators), np.array(fitted), spec)
        rows += _metric_rows(metric, [(0, name) for name in calibrators], [col], n_cal, params)
    return rows


def _metric_rows(
    sums: np.ndarray,
    pipelines: list[tuple[int, str]],
    columns: list[_Column],
    n_cal: np.ndarray,
    params: Mapping[tuple[int, str], Any],
) -> list[dict[str, Any]]:
    rows = []
    for (k, name), s in zip(pipelines, sums, strict=True):
        col, n = columns[k], s[0]
        fallback, n_iter = params[k, name][1:] if name != "none" else (None, 0)
        rows.append(
            {
                "seed": col.seed,
                "kind": "metrics",
                "aggregator": AGGREGATOR,
                "calibrator": name,
                "panel": col.panel,
                "panel_size": col.size,
                "n_cal": int(n_cal[col.replicate]),
                "n_eval": int(n),
                "nll": s[1] / n,
                "brier": s[2] / n,
                "ece": float(np.abs(s[METRIC_STATS:]).sum() / n),
                "accuracy": s[3] / n,
                "fallback": fallback,
                "n_iter": n_iter,
            }
        )
    return rows


def _objective_pass(
    source: PanelSource | SparkItemsSource, spec: PassSpec, cols: Columns, batch: Mapping[int, Any]
) -> dict[int, Any]:
    """Answer every pending optimiser request with one pass: ``(kind, column, weight, params)`` each."""
    platt = [(i, r) for i, r in batch.items() if r[0] == "platt"]
    beta = [(i, r) for i, r in batch.items() if r[0] == "beta"]
    kernel: Kernel = functools.partial(
        objective_kernel,
        spec=spec,
        cols=cols,
        platt=[(r[1], r[2], *r[3]) for _, r in platt],
        beta=[(r[1], r[2], *r[3]) for _, r in beta],
    )
    out = source.map_reduce(kernel).sum
    answers = {i: out[PLATT_STATS * n : PLATT_STATS * (n + 1)] for n, (i, _) in enumerate(platt)}
    base = PLATT_STATS * len(platt)
    answers |= {i: out[base + BETA_STATS * n : base + BETA_STATS * (n + 1)] for n, (i, _) in enumerate(beta)}
    return answers
