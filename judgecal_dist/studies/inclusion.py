"""Calibrate, don't curate (spec 000), first slice: aggregators x calibrators on random grouped splits.

Each replicate splits the labelled items of a panel into a calibration part (fraction ``calib_fraction``, by
keyed hash of ``group_id``) and an evaluation part; fits every aggregator on the calibration votes and labels,
feeds its in-sample calibration scores to every calibrator (spec 000 §5.1, main protocol), and scores the
evaluation part with NLL, Brier, ECE and accuracy (spec 000 §4). ``summarise`` averages over replicates with
bootstrap intervals, draws the per-split NLL distribution, and fits the default pipeline (one-coin + Platt) on
all labelled items as the run's model.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv 2605.09702, 2026.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.panel import ORIENTATIONS, Panel, load_panel
from judgecal_dist.engine.stats import judge_cells, judge_summary
from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.aggregate import MajorityVote, OneCoin
from judgecal_dist.methods.calibrate import PlattCalibrator
from judgecal_dist.splits import calibration_mask
from judgecal_dist.stats.inference import summarise_over_splits
from judgecal_dist.stats.metrics import metric_table
from judgecal_dist.studies.base import StudyResult

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
]

NAME = "inclusion"
AGGREGATORS = ("majority", "one_coin")
CALIBRATORS = ("none", "platt")
METRICS = ("nll", "brier", "ece", "accuracy")
MODEL_FORMAT = "judgecal.calibration/v1"


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
    orientation: str = "natural"
    sample: int = 0
    eps: float = 1e-6
    alpha0: float = 1.0
    beta0: float = 1.0
    class_prior: str = "half"
    n_bins: int = 10
    ci_level: float = 0.95

    def __post_init__(self) -> None:
        if not self.data:
            raise ConfigError("data: required (an ingested dataset URL; --set data=URL)")
        if self.replicates < 1:
            raise ConfigError(f"replicates: must be >= 1, got {self.replicates}")
        if not 0.0 < self.calib_fraction < 1.0:
            raise ConfigError(f"calib_fraction: must be in (0, 1), got {self.calib_fraction}")
        for key, value, known in (
            ("aggregators", self.aggregators, AGGREGATORS),
            ("calibrators", self.calibrators, CALIBRATORS),
        ):
            bad = sorted(set(value) - set(known))
            if bad or not value:
                raise ConfigError(f"{key}: unknown or empty {bad or list(value)}; known: {list(known)}")
        if self.orientation not in ORIENTATIONS:
            raise ConfigError(f"orientation: must be one of {list(ORIENTATIONS)}, got {self.orientation!r}")
        if not 0.0 < self.eps < 0.5:
            raise ConfigError(f"eps: must be in (0, 0.5), got {self.eps}")
        if self.class_prior not in ("half", "empirical"):
            raise ConfigError(f"class_prior: must be half or empirical, got {self.class_prior!r}")


@dataclass(frozen=True)
class Replicate:
    """One split: everything ``run_replicate`` needs besides the panel (pure and seeded)."""

    seed: int
    calib_fraction: float
    aggregators: tuple[str, ...]
    calibrators: tuple[str, ...]
    eps: float
    alpha0: float
    beta0: float
    class_prior: str
    n_bins: int


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
            eps=config.eps,
            alpha0=config.alpha0,
            beta0=config.beta0,
            class_prior=config.class_prior,
            n_bins=config.n_bins,
        )
        for i in range(config.replicates)
    ]


def _aggregator(name: str, rep: Replicate | Config) -> Any:
    if name == "majority":
        return MajorityVote()
    return OneCoin(alpha0=rep.alpha0, beta0=rep.beta0, prior=rep.class_prior)


def _calibrated(name: str, s_cal: np.ndarray, y_cal: np.ndarray, s_eval: np.ndarray, eps: float) -> np.ndarray:
    if name == "none":
        return s_eval
    return PlattCalibrator(eps=eps).fit(s_cal, y_cal).predict_proba(s_eval)[:, 1]


def run_replicate(data: InclusionInput, rep: Replicate) -> pd.DataFrame:
    """Metrics of every aggregator x calibrator on the evaluation part of split ``rep.seed``."""
    panel = data.panel
    in_cal = calibration_mask(panel.group_keys, [rep.seed], rep.calib_fraction)[0]
    v_cal, y_cal = panel.votes[in_cal], panel.labels[in_cal]
    v_eval, y_eval = panel.votes[~in_cal], panel.labels[~in_cal]
    rows = []
    for agg_name in rep.aggregators:
        agg = _aggregator(agg_name, rep).fit(v_cal, y_cal)
        s_cal, s_eval = agg.predict_proba(v_cal)[:, 1], agg.predict_proba(v_eval)[:, 1]
        for cal_name in rep.calibrators:
            p = _calibrated(cal_name, s_cal, y_cal, s_eval, rep.eps)
            metrics = metric_table(y_eval, p, eps=rep.eps, n_bins=rep.n_bins)
            rows.append(
                {
                    "seed": rep.seed,
                    "aggregator": agg_name,
                    "calibrator": cal_name,
                    "panel": "all",
                    "n_cal": int(in_cal.sum()),
                    "n_eval": int((~in_cal).sum()),
                }
                | metrics
            )
    return pd.DataFrame(rows)


def summarise(config: Config, parts: pd.DataFrame, data: InclusionInput) -> StudyResult:
    """Means over splits with bootstrap CIs, a figure, the report and the default pipeline's model."""
    panel = data.panel
    by = ["aggregator", "calibrator", "panel"]
    summary = summarise_over_splits(
        parts, by=by, metrics=list(METRICS), confidence=config.ci_level, rng=np.random.default_rng(config.seed)
    )
    summary = (
        summary.rename(columns={f"{m}_mean": m for m in METRICS} | {"n_splits": "replicates"})
        .sort_values(by, kind="stable")
        .reset_index(drop=True)
    )
    records = [{k: _plain(v) for k, v in row.items()} for row in summary.to_dict("records")]
    return StudyResult(
        records=records,
        summary=summary,
        report=_report(config, summary, panel, data.judges),
        figures={"nll_by_method.png": _figure(parts)},
        model={"calibration.json": _model(config, panel)},
        extra={
            "panel": {"dataset": panel.dataset, "items": panel.n_items, "judges": panel.n_judges} | panel.info,
            "choices": _choices(config),
        },
    )


def _plain(value: Any) -> Any:
    # JSON has no NaN: an undefined figure (e.g. accuracy of a judge that never voted) is null.
    value = value.item() if isinstance(value, np.generic) else value
    return None if isinstance(value, float) and not np.isfinite(value) else value


def _choices(config: Config) -> dict[str, Any]:
    # Every ambiguous choice of spec 000 this run made, so a report can be read without the code.
    return {
        "split": f"keyed hash of group_id, calibration fraction {config.calib_fraction} (spec: first floor(n/2) of a "
        "permutation; the hash gives halves of binomial size but lets every engine recompute membership)",
        "protocol": "main (aggregator and calibrator both fitted on the calibration part, spec 000 §5.1)",
        "eps": config.eps,
        "one_coin_prior": {"alpha0": config.alpha0, "beta0": config.beta0},
        "class_prior": config.class_prior,
        "orientation": config.orientation,
        "sample": config.sample,
        "tie_verdicts": "missing",
        "accuracy_at_half": "half credit",
        "ece": f"top-label, {config.n_bins} bins",
        "platt": "unpenalised logistic fit on logit(clipped score)",
    }


def _report(config: Config, summary: pd.DataFrame, panel: Panel, judges: pd.DataFrame) -> str:
    lines = [
        f"# Inclusion study (first slice) on `{panel.dataset}`",
        "",
        f"{panel.n_items} labelled items x {panel.n_judges} judges; {config.replicates} random grouped splits "
        f"(calibration fraction {config.calib_fraction}); metrics on the evaluation part, mean over splits with "
        f"{int(config.ci_level * 100)}% bootstrap intervals.",
        "",
        "| aggregator | calibrator | NLL | Brier | ECE | accuracy |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary.itertuples():
        cells = [
            f"{getattr(row, m):.4f} [{getattr(row, m + '_ci_low'):.4f}, {getattr(row, m + '_ci_high'):.4f}]"
            for m in METRICS
        ]
        lines.append(f"| {row.aggregator} | {row.calibrator} | " + " | ".join(cells) + " |")
    best = summary.loc[summary["nll"].idxmin()]
    lines += [
        "",
        f"Lowest mean NLL: **{best.aggregator} + {best.calibrator}** ({best.nll:.4f}).",
        "",
        "Choices made where the spec leaves them open:",
        "",
    ]
    lines += [f"- {k}: {v}" for k, v in _choices(config).items()]
    below = judges[judges["accuracy"] < 0.5]
    lines += [
        "",
        "## Judges (calibration halves, mean over splits)",
        "",
        f"{len(judges)} judges; {len(below)} below chance (their one-coin weight is negative: votes flipped).",
        "",
        "| judge | votes | accuracy | parse rate |",
        "| --- | --- | --- | --- |",
    ]
    shown = judges if len(judges) <= 12 else pd.concat([judges.head(6), judges.tail(6)])
    lines += [f"| {r.judge_id} | {r.votes:.1f} | {r.accuracy:.3f} | {r.parse_rate:.3f} |" for r in shown.itertuples()]
    if len(judges) > 12:
        lines.append(f"| ... {len(judges) - 12} more in summary.json `judges` | | | |")
    lines += ["", "Figure: `figures/nll_by_method.png` (per-split evaluation NLL).", ""]
    return "\n".join(lines)


def _figure(parts: pd.DataFrame) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = parts.groupby(["aggregator", "calibrator"], sort=True)["nll"]
    labels = [f"{a}\n+{c}" for (a, c), _ in groups]
    fig, ax = plt.subplots(figsize=(1.8 + 1.4 * len(labels), 3.6), dpi=110)
    ax.boxplot([g.to_numpy() for _, g in groups], showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1), labels)
    ax.set_ylabel("evaluation NLL (per split)")
    ax.set_yscale("log")
    ax.set_title(f"NLL over {parts['seed'].nunique()} splits")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _model(config: Config, panel: Panel) -> dict[str, Any]:
    """The default pipeline (one-coin + Platt) fitted on every labelled item, as data (spec 000 §3.1-3.2)."""
    agg = _aggregator("one_coin", config).fit(panel.votes, panel.labels)
    scores = agg.predict_proba(panel.votes)[:, 1]
    platt = PlattCalibrator(eps=config.eps).fit(scores, panel.labels)
    return {
        "format": MODEL_FORMAT,
        "aggregator": {
            "name": "one_coin",
            "judge_ids": panel.judge_ids.tolist(),
            "weights": agg.weights_.tolist(),
            "class_prior": float(agg.prior_),
            "alpha0": config.alpha0,
            "beta0": config.beta0,
        },
        "calibrator": {"name": "platt", "slope": float(platt.slope_), "intercept": float(platt.intercept_)},
        "eps": config.eps,
        "vote_codes": {"A": 1, "B": 0, "missing": -1, "tie": "missing"},
        "fitted_on": {"dataset": panel.dataset, "items": panel.n_items},
    }
