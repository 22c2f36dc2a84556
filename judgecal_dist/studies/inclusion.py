"""Calibrate, don't curate (spec 000): aggregators x calibrators x panels on random grouped splits.

Each replicate splits the labelled items of a panel into a calibration part (fraction ``calib_fraction``, by
keyed hash of ``group_id``) and an evaluation part. For every panel (all judges, top-k by posterior mean
accuracy, one per family; chosen on calibration data only) and every aggregator, the calibration scores train
every calibrator (spec 000 §5.1 main protocol); the evaluation part is scored with NLL, Brier, ECE and accuracy
(§4). Curated panels are compared with the full panel on the same items by the paired permutation test
(§5.5(a)). The default pipeline (one-coin + beta) is also wrapped in split-conformal sets on a disjoint slice
(§3.5, §5.2: 60/20/20 of the calibration part). ``summarise`` averages over replicates with bootstrap intervals,
draws the figures, and fits the default pipeline with its conformal thresholds on all labelled items as the
run's model.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv 2605.09702, 2026.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.panel import ORIENTATIONS, Panel, load_panel
from judgecal_dist.engine.stats import judge_cells, judge_summary
from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.conformal import SplitConformal
from judgecal_dist.splits import assign_blocks, calibration_mask
from judgecal_dist.stats.inference import summarise_over_splits
from judgecal_dist.stats.metrics import metric_table, pointwise_nll, reliability_bins
from judgecal_dist.stats.permutation import paired_permutation_test_many
from judgecal_dist.stats.sets import set_metrics
from judgecal_dist.studies import inclusion_report
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.inclusion_diagnostics import diagnose
from judgecal_dist.studies.inclusion_pipeline import (
    AGGREGATORS,
    CALIBRATORS,
    PANELS,
    Settings,
    aggregate,
    calibrate,
    calibrator,
    choose_panels,
)

__all__ = [
    "NAME",
    "Config",
    "Replicate",
    "InclusionInput",
    "load",
    "plan",
    "run_replicate",
    "summarise",
    "AGGREGATORS",
    "CALIBRATORS",
    "PANELS",
]

NAME = "inclusion"
METRICS = ("nll", "brier", "ece", "accuracy")
MODEL_FORMAT = "judgecal.calibration/v2"
#: The default pipeline of spec 000 §1: integrated one-coin, then beta calibration with the elastic net.
DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR = "one_coin", "beta"
#: Seed offset of the conformal sub-split inside the calibration part (independent of the outer split).
CONFORMAL_SEED_OFFSET = 1_000_003


@dataclass(frozen=True)
class Config:
    """Settings of the inclusion study (``conf/studies/inclusion.yaml``); every key can be ``--set``."""

    data: str | None = None
    dataset: str | None = None
    replicates: int = 100
    seed: int = 0
    calib_fraction: float = 0.5
    aggregators: tuple[str, ...] = AGGREGATORS
    calibrators: tuple[str, ...] = CALIBRATORS
    panels: tuple[str, ...] = PANELS
    orientation: str = "natural"
    sample: int = 0
    eps: float = 1e-6
    alpha0: float = 1.0
    beta0: float = 1.0
    class_prior: str = "half"
    beta_penalty: float = 0.01
    beta_l1_ratio: float = 0.5
    beta_penalty_scale: str = "mean"
    ds_n_iter: int = 100
    stacking_c: float = 1.0
    stacking_folds: int = 5
    conformal_alphas: tuple[float, ...] = (0.1, 0.2)
    permutation_resamples: int = 10_000
    n_bins: int = 10
    ci_level: float = 0.95

    def __post_init__(self) -> None:
        if not self.data:
            raise ConfigError("data: required (an ingested dataset URL; --set data=URL)")
        if self.replicates < 1:
            raise ConfigError(f"replicates: must be >= 1, got {self.replicates}")
        if not 0.0 < self.calib_fraction < 1.0:
            raise ConfigError(f"calib_fraction: must be in (0, 1), got {self.calib_fraction}")
        for key, value, known in (("aggregators", self.aggregators, AGGREGATORS),
                                  ("calibrators", self.calibrators, CALIBRATORS)):  # fmt: skip
            bad = sorted(set(value) - set(known))
            if bad or not value:
                raise ConfigError(f"{key}: unknown or empty {bad or list(value)}; known: {list(known)}")
        bad_panels = [p for p in self.panels if p not in PANELS and not (p.startswith("top") and p[3:].isdigit())]
        if bad_panels or "all" not in self.panels:
            raise ConfigError(f"panels: must include 'all' and only {list(PANELS)} or topK, got {list(self.panels)}")
        if self.orientation not in ORIENTATIONS:
            raise ConfigError(f"orientation: must be one of {list(ORIENTATIONS)}, got {self.orientation!r}")
        if not 0.0 < self.eps < 0.5:
            raise ConfigError(f"eps: must be in (0, 0.5), got {self.eps}")
        if self.class_prior not in ("half", "empirical"):
            raise ConfigError(f"class_prior: must be half or empirical, got {self.class_prior!r}")
        if any(not 0.0 < a < 1.0 for a in self.conformal_alphas):
            raise ConfigError(f"conformal_alphas: each must be in (0, 1), got {list(self.conformal_alphas)}")
        if self.permutation_resamples < 1:
            raise ConfigError(f"permutation_resamples: must be >= 1, got {self.permutation_resamples}")

    @property
    def settings(self) -> Settings:
        return Settings(eps=self.eps, alpha0=self.alpha0, beta0=self.beta0, class_prior=self.class_prior,
                        beta_penalty=self.beta_penalty, beta_l1_ratio=self.beta_l1_ratio,
                        beta_penalty_scale=self.beta_penalty_scale, ds_n_iter=self.ds_n_iter,
                        stacking_c=self.stacking_c, stacking_folds=self.stacking_folds)  # fmt: skip


@dataclass(frozen=True)
class Replicate:
    """One split: everything ``run_replicate`` needs besides the panel (pure and seeded)."""

    seed: int
    calib_fraction: float
    aggregators: tuple[str, ...]
    calibrators: tuple[str, ...]
    panels: tuple[str, ...]
    settings: Settings = field(default_factory=Settings)
    conformal_alphas: tuple[float, ...] = (0.1, 0.2)
    permutation_resamples: int = 10_000
    n_bins: int = 10


@dataclass(frozen=True)
class InclusionInput:
    """What every replicate task receives: the dense panel and the per-judge statistics of all splits."""

    panel: Panel
    judges: pd.DataFrame


def load(config: Config, engine: EngineConfig) -> InclusionInput:
    """The dense labelled panel of ``config.data`` and per-judge statistics of every planned split.

    The statistics come from the engine's one-pass job (Spark for large tables, pyarrow + numpy otherwise, equal
    exactly): calibration-side votes, correct votes and parse rate of every judge in every replicate, averaged
    for the report. Input is validated here, before the runner writes anything.
    """
    panel = load_panel(
        config.data,
        sample=config.sample,
        orientation=config.orientation,
        orientation_seed=config.seed,
        dataset=config.dataset,
        storage_options=dict(engine.storage_options),
    )
    if len(np.unique(panel.labels)) < 2 and config.orientation != "gold_positive":
        raise ConfigError(
            f"{config.data}: labels: label: every labelled item has the same label; calibration needs "
            "both classes (or orientation=gold_positive, with penalised calibrators only)"
        )
    seeds = [config.seed + i for i in range(config.replicates)]
    per_split = judge_summary(judge_cells(config.data, seeds, config.calib_fraction, config=engine))
    cal = per_split[per_split["side"] == "calibration"]
    judges = cal.groupby("judge_id", as_index=False)[["rows", "votes", "correct"]].mean()
    judges["parse_rate"] = cal.groupby("judge_id")["parse_rate"].mean().to_numpy()
    judges["accuracy"] = judges["correct"] / judges["votes"].where(judges["votes"] > 0)
    return InclusionInput(panel=panel, judges=judges.sort_values("accuracy", ascending=False, kind="stable"))


def plan(config: Config, data: InclusionInput) -> list[Replicate]:
    return [
        Replicate(
            seed=config.seed + i,
            calib_fraction=config.calib_fraction,
            aggregators=tuple(config.aggregators),
            calibrators=tuple(config.calibrators),
            panels=tuple(config.panels),
            settings=config.settings,
            conformal_alphas=tuple(config.conformal_alphas),
            permutation_resamples=config.permutation_resamples,
            n_bins=config.n_bins,
        )
        for i in range(config.replicates)
    ]


def run_replicate(data: InclusionInput, rep: Replicate) -> pd.DataFrame:
    """Metrics of every panel x aggregator x calibrator on the evaluation part of split ``rep.seed``.

    Returns a long table with a ``kind`` column: ``metrics`` rows (one per pipeline, with the paired test against
    the full panel), ``conformal`` rows (default pipeline, per alpha) and ``reliability`` rows (default
    aggregator before and after its default calibrator, per bin).
    """
    panel, settings = data.panel, rep.settings
    in_cal = calibration_mask(panel.group_keys, [rep.seed], rep.calib_fraction)[0]
    v_cal, y_cal = panel.votes[in_cal], panel.labels[in_cal]
    v_eval, y_eval = panel.votes[~in_cal], panel.labels[~in_cal]
    panels = choose_panels(rep.panels, v_cal, y_cal, panel.judge_ids, panel.families, settings)
    base = {"seed": rep.seed, "n_cal": int(in_cal.sum()), "n_eval": int((~in_cal).sum())}
    rows, losses = [], {}
    for agg_name in rep.aggregators:
        for panel_name, cols in panels.items():
            s_cal, s_eval, _ = aggregate(agg_name, settings, v_cal[:, cols], y_cal, v_eval[:, cols])
            for cal_name in rep.calibrators:
                p = calibrate(cal_name, settings, s_cal, y_cal, {"eval": s_eval})["eval"]
                losses[agg_name, cal_name, panel_name] = pointwise_nll(y_eval, p, eps=settings.eps)
                rows.append(base | {"kind": "metrics", "aggregator": agg_name, "calibrator": cal_name,
                                    "panel": panel_name, "panel_size": len(cols)}
                            | metric_table(y_eval, p, eps=settings.eps, n_bins=rep.n_bins))  # fmt: skip
                if agg_name == DEFAULT_AGGREGATOR and panel_name == "all" and cal_name in ("none", DEFAULT_CALIBRATOR):
                    rows += _reliability_rows(base, cal_name, y_eval, p, rep.n_bins)
    table = pd.DataFrame(rows)
    _attach_paired_tests(table, losses, rep)
    conformal = _conformal_rows(panel, in_cal, v_eval, y_eval, rep)
    return pd.concat([table, pd.DataFrame([base | row for row in conformal])], ignore_index=True)


def _reliability_rows(base: dict, cal_name: str, y: np.ndarray, p: np.ndarray, n_bins: int) -> list[dict]:
    bins = reliability_bins(y, p, n_bins=n_bins)
    return [base | {"kind": "reliability", "aggregator": DEFAULT_AGGREGATOR, "calibrator": cal_name, "panel": "all",
                    "bin": int(r.bin), "count": int(r.count), "sum_p": float(r.mean_p * r.count) if r.count else 0.0,
                    "sum_y": float(r.frac_pos * r.count) if r.count else 0.0} for r in bins.itertuples()]  # fmt: skip


def _attach_paired_tests(table: pd.DataFrame, losses: dict, rep: Replicate) -> None:
    """delta_nll = mean(loss_panel - loss_all) and the paired permutation test (spec §5.5(a)) per curated panel."""
    keys = [k for k in losses if k[2] != "all"]
    if not keys:
        return
    d = np.stack([losses[k] - losses[k[0], k[1], "all"] for k in keys])
    perm = paired_permutation_test_many(d, n_resamples=rep.permutation_resamples, rng=np.random.default_rng(rep.seed))
    index = {k: i for i, k in enumerate(keys)}
    rows = table["kind"].eq("metrics") & table["panel"].ne("all")
    order = [
        index[a, c, p] for a, c, p in table.loc[rows, ["aggregator", "calibrator", "panel"]].itertuples(index=False)
    ]
    table.loc[rows, "delta_nll"] = d.mean(axis=1)[order]
    table.loc[rows, "perm_stat"] = perm.statistic[order]
    table.loc[rows, "perm_p"] = perm.pvalue[order]


def _conformal_rows(panel: Panel, in_cal: np.ndarray, v_eval: np.ndarray, y_eval: np.ndarray,
                    rep: Replicate) -> list[dict]:  # fmt: skip
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
    _, _, model = aggregate(DEFAULT_AGGREGATOR, settings, parts[0][0], parts[0][1], parts[1][0])
    fitted = calibrator(DEFAULT_CALIBRATOR, settings).fit(model.predict_proba(parts[1][0])[:, 1], parts[1][1])
    p_slice = fitted.predict_proba(model.predict_proba(parts[2][0])[:, 1])[:, 1]
    p_eval = fitted.predict_proba(model.predict_proba(v_eval)[:, 1])[:, 1]
    rows = []
    for alpha in rep.conformal_alphas:
        sets = SplitConformal(alpha=alpha).fit(p_slice, parts[2][1]).predict_set(p_eval)
        rows.append({"kind": "conformal", "aggregator": DEFAULT_AGGREGATOR, "calibrator": DEFAULT_CALIBRATOR,
                     "panel": "all", "alpha": alpha} | set_metrics(y_eval, sets))  # fmt: skip
    return rows


def summarise(config: Config, parts: pd.DataFrame, data: InclusionInput) -> StudyResult:
    """Means over splits with bootstrap CIs, figures, the report and the default pipeline's model."""
    panel = data.panel
    rng = np.random.default_rng(config.seed)
    by = ["aggregator", "calibrator", "panel"]
    metrics = parts[parts["kind"] == "metrics"]
    summary = summarise_over_splits(metrics, by=by, metrics=[*METRICS, "panel_size"], confidence=config.ci_level,
                                    rng=rng)  # fmt: skip
    summary = summary.rename(columns={f"{m}_mean": m for m in (*METRICS, "panel_size")} | {"n_splits": "replicates"})
    summary = summary.drop(columns=["panel_size_ci_low", "panel_size_ci_high"])
    curated = metrics[metrics["panel"] != "all"]
    if not curated.empty:
        paired = summarise_over_splits(curated, by=by, metrics=["delta_nll"], confidence=config.ci_level, rng=rng)
        paired = paired.rename(columns={"delta_nll_mean": "delta_nll"}).drop(columns="n_splits")
        medians = curated.groupby(by, as_index=False)[["perm_stat", "perm_p"]].median()
        summary = summary.merge(paired, on=by, how="left").merge(medians, on=by, how="left")
    order = {name: i for i, name in enumerate((*config.aggregators, *config.calibrators, *config.panels))}
    summary = summary.sort_values(by, key=lambda col: col.map(order), kind="stable").reset_index(drop=True)
    conformal = _summarise_conformal(parts, config, rng)
    records = [{k: _plain(v) for k, v in row.items()} for row in summary.to_dict("records")]
    reliability = parts[parts["kind"] == "reliability"]
    diagnostics = diagnose(panel, seed=config.seed, calib_fraction=config.calib_fraction)
    return StudyResult(
        records=records,
        summary=summary,
        report=inclusion_report.report(config, summary, conformal, panel, data.judges, _choices(config), diagnostics),
        figures=inclusion_report.figures(metrics, summary, reliability, config),
        model={"calibration.json": _model(config, panel)},
        extra={
            "panel": {"dataset": panel.dataset, "items": panel.n_items, "judges": panel.n_judges} | panel.info,
            "choices": _choices(config),
            "diagnostics": diagnostics,
            "conformal": [{k: _plain(v) for k, v in r.items()} for r in conformal.to_dict("records")],
            "judges": [{k: _plain(v) for k, v in r.items()} for r in data.judges.to_dict("records")],
        },
    )


def _summarise_conformal(parts: pd.DataFrame, config: Config, rng: np.random.Generator) -> pd.DataFrame:
    rows = parts[parts["kind"] == "conformal"]
    if rows.empty:
        return pd.DataFrame()
    stats = ["coverage", "set_size", "empty_rate", "both_rate"]
    out = summarise_over_splits(rows, by=["alpha"], metrics=stats, confidence=config.ci_level, rng=rng)
    return out.rename(columns={f"{m}_mean": m for m in stats} | {"n_splits": "replicates"})


def _plain(value: Any) -> Any:
    # JSON has no NaN: an undefined figure (e.g. accuracy of a judge that never voted) is null.
    value = value.item() if isinstance(value, np.generic) else value
    return None if isinstance(value, float) and not np.isfinite(value) else value


def _choices(config: Config) -> dict[str, Any]:
    # Every choice spec 000 leaves open, as this run made it, so a report can be read without the code.
    choices = {
        "split": f"keyed hash of group_id, calibration fraction {config.calib_fraction} (spec: first floor(n/2) of a "
        "permutation; the hash gives halves of binomial size but lets every engine recompute membership)",
        "protocol": "main (aggregator and calibrator both fitted on the calibration part, spec 000 §5.1); "
        "stacking trains its calibrator on 5-fold out-of-fold scores",
        "conformal_protocol": "calibration part cut 60/20/20 (aggregator / calibrator / conformal slice), spec §5.2",
        "eps": config.eps,
        "one_coin_prior": {"alpha0": config.alpha0, "beta0": config.beta0},
        "class_prior": config.class_prior,
        "orientation": config.orientation,
        "sample": config.sample,
        "tie_verdicts": "missing",
        "accuracy_at_half": "half credit",
        "ece": f"top-label, {config.n_bins} bins",
        "platt": "unpenalised logistic fit on logit(clipped score)",
        "beta": {"penalty": config.beta_penalty, "l1_ratio": config.beta_l1_ratio, "scale": config.beta_penalty_scale},
        "dawid_skene": f"unsupervised, fitted on calibration votes only, <= {config.ds_n_iter} iterations, eta 0.01",
        "top_k_ranking": "posterior mean accuracy, ties by larger n_j then judge_id",
        "permutation": f"paired t, {config.permutation_resamples} sign flips, median t and p over splits",
    }
    if config.orientation == "gold_positive":
        choices["warning"] = (
            "gold_positive orientation (paper-compatible): labels are all 1, so unpenalised "
            "intercept fits have no finite optimum; use only to reproduce the paper's numbers"
        )
    return choices


def _model(config: Config, panel: Panel) -> dict[str, Any]:
    """The default pipeline fitted on every labelled item as data: one-coin weights, beta parameters and the
    conformal thresholds (aggregator + beta on 80% of the groups, conformal slice on the other 20%)."""
    settings = config.settings
    blocks = assign_blocks(panel.group_keys, config.seed + CONFORMAL_SEED_OFFSET, [0.8, 0.2])
    fit, slice_ = blocks == 0, blocks == 1
    s_fit, s_slice, agg = aggregate(DEFAULT_AGGREGATOR, settings, panel.votes[fit], panel.labels[fit],
                                    panel.votes[slice_])  # fmt: skip
    beta = calibrator(DEFAULT_CALIBRATOR, settings).fit(s_fit, panel.labels[fit])
    p_slice = beta.predict_proba(s_slice)[:, 1]
    conformal = [SplitConformal(alpha=a).fit(p_slice, panel.labels[slice_]).to_dict() for a in config.conformal_alphas]
    return {
        "format": MODEL_FORMAT,
        "aggregator": {
            "name": DEFAULT_AGGREGATOR,
            "judge_ids": panel.judge_ids.tolist(),
            "weights": agg.weights_.tolist(),
            "class_prior": float(agg.prior_),
            "alpha0": config.alpha0,
            "beta0": config.beta0,
        },
        "calibrator": {
            "name": DEFAULT_CALIBRATOR,
            "a": float(beta.a_),
            "b": float(beta.b_),
            "c": float(beta.c_),
            "penalty": config.beta_penalty,
            "l1_ratio": config.beta_l1_ratio,
        },
        "conformal": conformal,
        "eps": config.eps,
        "vote_codes": {"A": 1, "B": 0, "missing": -1, "tie": "missing"},
        "fitted_on": {"dataset": panel.dataset, "items": int(fit.sum()), "conformal_items": int(slice_.sum())},
    }
