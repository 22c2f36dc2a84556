"""The inclusion study's conformal sets, fitted model artifact and recorded choices (spec 000 §3.5, §5.2).

Split out of :mod:`judgecal_dist.studies.inclusion.study` by concept: everything here reads the default pipeline
(one-coin + beta) and the run's config, and writes plain data for ``summary.json`` and ``model/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.pipeline import (
    Settings,
    aggregate,
    apply_calibrator,
    calibrator,
    choose_panels,
    conformal_sets,
)
from judgecal_dist.models import pipeline_from_estimators
from judgecal_dist.splits import assign_blocks
from judgecal_dist.stats.inference import summarise_over_splits
from judgecal_dist.stats.sets import set_metrics
from judgecal_dist.studies.inclusion.search import is_search

if TYPE_CHECKING:
    from judgecal_dist.studies.inclusion.config import Config, Replicate

__all__ = [
    "DEFAULT_AGGREGATOR",
    "DEFAULT_CALIBRATOR",
    "CONFORMAL_SEED_OFFSET",
    "conformal_rows",
    "summarise_conformal",
    "choices",
    "exported_candidate",
    "export_model",
]

#: The default pipeline of spec 000 §1: integrated one-coin, then beta calibration with the elastic net.
DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR = "one_coin", "beta"
#: Seed offset of the conformal sub-split inside the calibration part (independent of the outer split).
CONFORMAL_SEED_OFFSET = 1_000_003


def conformal_rows(
    panel: Panel, in_cal: np.ndarray, v_eval: np.ndarray, y_eval: np.ndarray, rep: Replicate
) -> list[dict]:
    """Split-conformal sets of the default pipeline: calibration part cut 60/20/20 (aggregator / calibrator /
    conformal slice, spec §5.2), coverage and set size on the evaluation part."""
    if not rep.conformal_alphas:
        return []
    settings = rep.settings
    blocks = assign_blocks(panel.group_keys[in_cal], rep.seed + CONFORMAL_SEED_OFFSET, [0.6, 0.2, 0.2])
    v_cal, y_cal = panel.votes[in_cal], panel.labels[in_cal]
    parts = [(v_cal[blocks == b], y_cal[blocks == b]) for b in range(3)]
    if min(len(y) for _, y in parts) < 2 or len(np.unique(parts[1][1])) < 2:
        return []  # too few items for a disjoint slice: reported as absent, never as NaN
    sets_by_alpha = conformal_sets(
        DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR, settings, parts, v_eval, rep.conformal_alphas
    )
    rows = []
    for alpha, sets in sets_by_alpha.items():
        rows.append(
            {
                "kind": "conformal",
                "aggregator": DEFAULT_AGGREGATOR,
                "calibrator": DEFAULT_CALIBRATOR,
                "panel": "all",
                "alpha": alpha,
            }
            | set_metrics(y_eval, sets)
        )
    return rows


def summarise_conformal(parts: pd.DataFrame, config: Config, rng: np.random.Generator) -> pd.DataFrame:
    rows = parts[parts["kind"] == "conformal"]
    if rows.empty:
        return pd.DataFrame()
    stats = ["coverage", "set_size", "empty_rate", "both_rate"]
    out = summarise_over_splits(
        rows, by=["alpha"], metrics=stats, confidence=config.ci_level, rng=rng, split_sizes=("n_eval", "n_cal")
    )
    return out.rename(columns={f"{m}_mean": m for m in stats} | {"n_splits": "replicates"})


def choices(config: Config) -> dict[str, Any]:
    # Every choice spec 000 leaves open, as this run made it, so a report can be read without the code.
    choices = {
        "split": f"keyed hash of group_id, calibration fraction {config.calib_fraction} (the paper: first floor(n/2) of a "
        "permutation; the hash gives halves of binomial size but lets every engine recompute membership)",
        "protocol": {
            "insample": "main (aggregator and calibrator both fitted on the calibration part, the paper's main protocol)",
            "nested": f"nested {config.nested_fraction:g}/{1 - config.nested_fraction:g} (aggregator on the first "
            "part, calibrators on its out-of-sample scores of the second; curated panels ranked on the first)",
            "crossfit": f"{config.crossfit_folds}-fold cross-fitted aggregator scores train the calibrators; final "
            "aggregator from the whole calibration part",
        }[config.calib_scores]
        + "; stacking trains its calibrator on 5-fold out-of-fold scores",
        "calib_scores": config.calib_scores,
        "calibrator_input": {
            "logit": "the aggregator's unclipped log-odds (beta via log sigma(t)); only final probabilities are "
            "clipped at eps (project recommendation: clipping first collapses large-panel scores)",
            "probability": "the aggregator's P(Y=1) clipped at eps before any logit (as the paper writes it)",
        }[config.calibrator_input],
        "conformal_protocol": "calibration part cut 60/20/20 (aggregator / calibrator / conformal slice)",
        "eps": config.eps,
        "one_coin_prior": {"alpha0": config.alpha0, "beta0": config.beta0},
        "class_prior": config.class_prior,
        "orientation": config.orientation,
        "sample": config.sample,
        "tie_verdicts": "missing",
        "accuracy_at_half": "half credit",
        "ece": f"top-label, {config.n_bins} bins",
        "platt": "unpenalised logistic fit on the score's logit",
        "temperature_bounds": "T in [0.01, 1e4] for log-odds input, [0.01, 100] for probability input",
        "beta": {"penalty": config.beta_penalty, "l1_ratio": config.beta_l1_ratio, "scale": config.beta_penalty_scale},
        "dawid_skene": f"unsupervised, fitted on calibration votes only, <= {config.ds_n_iter} iterations, eta 0.01",
        "top_k_ranking": "posterior mean accuracy, ties by larger n_j then judge_id",
        "permutation": f"paired t within each split, {config.permutation_resamples} sign flips; reported as the "
        "median per-split p and the share of splits with p < 0.05 (a description of the splits, not a test across "
        "them)",
        "intervals": "corrected resampled t over splits (Nadeau and Bengio 2003), variance (1/R + n_eval/n_cal) s^2",
        "terciles": "judge agreement |2 p_MV - 1| of the full panel on the evaluation items",
    }
    searched = [p for p in config.panels if is_search(p)]
    if searched:
        choices["search"] = (
            f"{', '.join(searched)}: calibration half cut {config.search_inner_fraction:g}/"
            f"{1 - config.search_inner_fraction:g} (one-coin counts / inner calibration), candidate score = "
            f"{config.search_folds}-fold CV NLL of beta (batched Newton) on the inner part, beam width "
            f"{config.search_beam_width}, <= {config.search_max_additions} additions, greedy = forward with early "
            "stop, greedyK = forward to K judges, exhaustive only for J <= 12; the chosen subset then runs through every aggregator x calibrator"
        )
    if config.orientation == "gold_positive":
        choices["warning"] = (
            "gold_positive orientation (paper-compatible): labels are all 1, so unpenalised "
            "intercept fits have no finite optimum; use only to reproduce the paper's numbers"
        )
    return choices


def exported_candidate(config: Config, summary: pd.DataFrame) -> tuple[str, str, str]:
    """(aggregator, calibrator, panel) the run exports: ``export`` when set, else the recommended pipeline (the one
    rule's choice among the deployable panels, :func:`judgecal_dist.studies.inclusion.recommend.choice`)."""
    if config.export != "auto":
        agg, _, rest = config.export.partition("+")
        cal, _, panel = rest.partition("@")
        return agg, cal, panel
    from judgecal_dist.studies.inclusion.recommend import choice

    best = choice(config, summary).chosen
    return str(best["aggregator"]), str(best["calibrator"]), str(best["panel"])


def export_model(
    config: Any,
    panel: Panel,
    candidate: tuple[str, str, str],
    *,
    study: str = "inclusion",
    alphas: Sequence[float] | None = None,
) -> Any:
    """The candidate pipeline fitted on every labelled item, as a ``judgecal.binary-pipeline/v1`` model: panel
    chosen, aggregator and calibrator fitted on 80% of the groups, conformal thresholds on the other 20% (with no
    conformal levels, ``alphas=()``, everything is fitted on every labelled item). Any study whose settings are
    :class:`~judgecal_dist.settings.PipelineFields` with ``seed``, ``orientation`` and ``sample`` exports this way."""
    agg_name, cal_name, panel_name = candidate
    settings = Settings.of(config)
    alphas = tuple(config.conformal_alphas if alphas is None else alphas)
    if alphas:
        blocks = assign_blocks(panel.group_keys, config.seed + CONFORMAL_SEED_OFFSET, [0.8, 0.2])
        fit, slice_ = blocks == 0, blocks == 1
    else:
        fit, slice_ = np.ones(panel.n_items, bool), np.zeros(panel.n_items, bool)
    V, y = panel.votes, panel.labels
    cols = choose_panels((panel_name,), V[fit], y[fit], panel.judge_ids, panel.families, settings).get(
        panel_name, np.arange(panel.n_judges)
    )
    held = slice_ if alphas else fit  # the conformal part (none without levels: its scores are unused)
    s_fit, s_slice, agg = aggregate(agg_name, settings, V[fit][:, cols], y[fit], V[held][:, cols])
    fitted = calibrator(cal_name, settings)
    if fitted is not None:
        fitted.fit(s_fit, y[fit])
    p_slice = apply_calibrator(fitted, s_slice, settings)
    judges = [str(j) for j in panel.judge_ids[cols]]
    return pipeline_from_estimators(
        judge_ids=judges,
        aggregator_name=agg_name,
        aggregator=agg,
        calibrator_name=cal_name,
        calibrator=fitted,
        settings=settings,
        conformal=[SplitConformal(alpha=a).fit(p_slice, y[slice_]) for a in alphas],
        panel=panel_name,
        ignored_judges=sorted(set(map(str, panel.judge_ids)) - set(judges)),
        fitted_on={
            "dataset": panel.dataset,
            "item_ids": sorted(str(i) for i in panel.item_ids),
            "items": int(fit.sum()),
            "conformal_items": int(slice_.sum()),
            "orientation": config.orientation,
            "sample": config.sample,
            "study": study,
        },
    )
