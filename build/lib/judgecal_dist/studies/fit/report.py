"""The model card of ``judgecal fit`` (``report.md``): the choice, its cross-fitted metrics with intervals, the
runner-up, a reliability diagram with bin counts, and the exported model's per-judge weights."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.io.figures import png, pyplot
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.stats.metrics import brier, ece_positive, nll, reliability_bins
from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import Recommendation, estimate

__all__ = ["Card", "card", "judge_weights", "WEIGHTS_FILE"]

#: The exported model's weight of every judge, next to ``report.md``.
WEIGHTS_FILE = "judge_weights.csv"


@dataclass
class Card:
    text: str
    records: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, bytes] = field(default_factory=dict)
    recommendation: Recommendation | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def _metrics(y: np.ndarray, p: np.ndarray, config: Any) -> dict[str, float]:
    return {
        "nll": nll(y, p, eps=config.eps),
        "brier": brier(y, p),
        "ece": ece_positive(y, p, n_bins=config.n_bins),
    }


def grouped_intervals(
    y: np.ndarray, p: np.ndarray, groups: np.ndarray, config: Any
) -> dict[str, tuple[float, float, float]]:
    """(estimate, low, high) of NLL, Brier and ECE: percentile bootstrap resampling groups (linked items together)."""
    rng = np.random.default_rng(config.seed)
    uniq, inverse = np.unique(groups, return_inverse=True)
    members = pd.Series(np.arange(len(y))).groupby(inverse).apply(np.asarray).to_list()
    draws = []
    for _ in range(config.resamples):
        pick = np.concatenate([members[g] for g in rng.integers(0, len(uniq), len(uniq))])
        draws.append(_metrics(y[pick], p[pick], config))
    frame, point = pd.DataFrame(draws), _metrics(y, p, config)
    tail = (1 - config.ci_level) / 2
    return {k: (v, float(frame[k].quantile(tail)), float(frame[k].quantile(1 - tail))) for k, v in point.items()}


def judge_weights(model: Any, panel: Panel, cols: np.ndarray | None = None) -> pd.DataFrame:
    """The exported aggregator's weight of each panel judge (log-odds of a vote for the log-odds models; the
    logistic coefficient for stacking; the log-likelihood ratio of an A vote for Dawid-Skene; 1 for majority) and
    the judge's votes and accuracy on the labelled items."""
    agg, index = model.aggregator, {str(j): k for k, j in enumerate(panel.judge_ids)}
    cols = np.array([index[j] for j in model.judge_ids])
    if hasattr(agg, "weights_"):
        weights = np.asarray(agg.weights_)
    elif hasattr(agg, "coef_"):
        weights = np.asarray(agg.coef_)
    elif hasattr(agg, "confusion_"):
        conf = np.clip(agg.confusion_, agg.eps, 1 - agg.eps)
        weights = np.log(conf[:, 1, 1]) - np.log(conf[:, 0, 1])
    else:
        weights = np.ones(len(cols))
    n, c = count_judge_votes(panel.votes[:, cols], panel.labels)
    return pd.DataFrame(
        {"judge_id": model.judge_ids, "weight": weights, "votes": n, "accuracy": c / np.maximum(n, 1)}
    ).sort_values("weight", ascending=False, kind="stable")


#: Judges listed in the card at each end of the weight order when the panel is larger than twice this.
SHOWN_JUDGES = 5


def _weight_lines(weights: pd.DataFrame) -> list[str]:
    """The weight table: every judge of a small panel, else the top and bottom :data:`SHOWN_JUDGES` by weight."""
    shown = weights
    head = f"All {len(weights)} judges, by weight (also in `{WEIGHTS_FILE}`)."
    if len(weights) > 2 * SHOWN_JUDGES:
        shown = pd.concat([weights.head(SHOWN_JUDGES), weights.tail(SHOWN_JUDGES)])
        head = (
            f"The {SHOWN_JUDGES} highest and {SHOWN_JUDGES} lowest of {len(weights)} judges by weight; every judge "
            f"is in `{WEIGHTS_FILE}`."
        )
    rows = [f"| {w.judge_id} | {w.weight:.4f} | {int(w.votes)} | {w.accuracy:.3f} |" for w in shown.itertuples()]
    if len(shown) < len(weights):
        rows.insert(SHOWN_JUDGES, f"| ({len(weights) - len(shown)} more) | | | |")
    return [head, "", "| judge | weight | votes | accuracy |", "| --- | --- | --- | --- |", *rows]


def _warning_lines(table: pd.DataFrame) -> list[str]:
    """Candidates whose fits raised ConvergenceWarnings during cross-fitting (counted, not printed)."""
    warned = table[table["convergence_warnings"] > 0]
    if warned.empty:
        return []
    return [
        "## Convergence warnings during cross-fitting",
        "",
        f"{len(warned)} of {len(table)} candidates had fits that stopped without converging (an optimiser or EM "
        "at its iteration limit, a temperature at its bound); their NLL is that of the fit they stopped at.",
        "",
        "| candidate | warnings (all folds) |",
        "| --- | --- |",
        *(f"| `{r.candidate}` | {int(r.convergence_warnings)} |" for r in warned.itertuples()),
        "",
    ]


def _reliability_png(bins: pd.DataFrame, title: str) -> bytes:
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    full = bins[bins["count"] > 0]
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="perfect calibration")
    ax.plot(full["mean_p"], full["frac_pos"], marker="o", label="cross-fitted")
    ax.set_ylabel("fraction of items with label A")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    centres = (bins["lower"] + bins["upper"]) / 2
    bx.bar(centres, bins["count"], width=(bins["upper"] - bins["lower"]) * 0.9)
    for x, n in zip(centres, bins["count"], strict=True):
        bx.text(x, n, str(int(n)), ha="center", va="bottom", fontsize=7)
    bx.set_xlabel("predicted P(A)")
    bx.set_ylabel("items")
    return png(fig, tight_layout=True)


def card(
    config: Any,
    table: pd.DataFrame,
    chosen: str,
    runner_up: str,
    exported: str,
    crossfit: dict[str, np.ndarray],
    panel: Panel,
    model: Any,
) -> Card:
    y, groups = panel.labels, panel.group_keys
    level = f"{100 * config.ci_level:g}%"
    rows = table.set_index("candidate")
    records, lines = [], []
    names = [(chosen, "chosen")] + [(runner_up, "runner-up")] * bool(runner_up)
    names += [(exported, "exported (export setting)")] * (exported != chosen)
    metric_lines = ["| role | candidate | judges | NLL | Brier | ECE |", "| --- | --- | --- | --- | --- | --- |"]
    for name, role in names:
        ci = grouped_intervals(y, crossfit[name], groups, config)
        records.append(
            {
                "role": role,
                "candidate": name,
                "n_judges": int(rows.loc[name, "n_judges"]),
                "se_nll": rows.loc[name, "se"],
            }
            | {k: v[0] for k, v in ci.items()}
            | {f"{k}_ci_low": v[1] for k, v in ci.items()}
            | {f"{k}_ci_high": v[2] for k, v in ci.items()}
        )
        cells = " | ".join(f"{v[0]:.4f} [{v[1]:.4f}, {v[2]:.4f}]" for v in ci.values())
        metric_lines.append(f"| {role} | `{name}` | {int(rows.loc[name, 'n_judges'])} | {cells} |")
    best = table.iloc[0]
    bins = reliability_bins(y, crossfit[exported], n_bins=config.n_bins)
    weights = judge_weights(model, panel)
    lines += [
        f"# Model card: `{exported}`",
        "",
        "## Choice",
        "",
        f"Exported `{exported}` ({model.name}): `model/model.json` ({model.document['format']}), applied with "
        "`judgecal score --model <this run> --data URL --output URL`.",
        f"Chosen by rule `{config.rule}` among {len(table)} candidates ({len(config.aggregators)} aggregators x "
        f"{len(config.calibrators)} calibrators x panels {list(config.panels)}), compared by {config.folds}-fold "
        f"cross-fitted NLL on all {len(y)} labelled items of `{panel.dataset}` (folds grouped by group_id).",
        f"Lowest NLL: `{best['candidate']}` {best['nll']:.4f} (SE {best['se']:.4f}); "
        + (
            "the one-standard-error rule then takes, among the candidates within one SE of it, the fewest judges, "
            "then the simplest calibrator, then the simplest aggregator."
            if config.rule == "one_se"
            else "rule `lowest` takes it."
        ),
        "",
        f"## Cross-fitted metrics ({level} intervals: percentile bootstrap over groups, {config.resamples} resamples)",
        "",
        *metric_lines,
        "",
        "## Reliability of the exported pipeline (cross-fitted, `figures/reliability.png`)",
        "",
        "| bin | items | mean P(A) | fraction A |",
        "| --- | --- | --- | --- |",
        *(
            f"| ({b.lower:.1f}, {b.upper:.1f}] | {int(b.count)} | {b.mean_p:.3f} | {b.frac_pos:.3f} |"
            for b in bins.itertuples()
            if b.count > 0
        ),
        "",
        "## Per-judge weights of the exported model (fitted on all labelled items)",
        "",
        *_weight_lines(weights),
        "",
        *_warning_lines(table),
        "## Every candidate (cross-fitted NLL, lowest first)",
        "",
        "| candidate | judges | NLL | SE |",
        "| --- | --- | --- | --- |",
        *(f"| `{r.candidate}` | {r.n_judges} | {r.nll:.4f} | {r.se:.4f} |" for r in table.itertuples()),
        "",
        "`predictions.parquet` holds the exported model's P(A) of every labelled item (`p`, refitted on all of "
        "them) beside its cross-fitted probability (`crossfit_p`); `judgecal score` with this model gives `p` exactly.",
        "",
    ]
    title = f"{exported}: cross-fitted reliability, {len(y)} items"
    support = pd.DataFrame(records)
    first, second = support.iloc[-1 if exported != chosen else 0], support.iloc[1] if len(support) > 1 else None
    recommendation = Recommendation(
        use=f"{model.name} ({len(model.judge_ids)} judges), exported as model/model.json: "
        "judgecal score --model <this run> applies it",
        expected=", ".join(estimate(first, m, m.upper() if m != "brier" else "Brier") for m in ("nll", "brier", "ece"))
        + " (cross-fitted)",
        runner_up="none" if second is None else f"{second['candidate']}: {estimate(second, 'nll', 'NLL')}",
        changes=[f"--set export=aggregator+calibrator@panel exports another candidate (rule: {config.rule})"],
        interval=interval_note(config.ci_level, bootstrap_over="groups of linked items", resamples=config.resamples),
        support=support,
        keys=["role", "candidate", "n_judges"],
        metrics=["nll", "brier", "ece"],
    )
    figures = {"reliability.png": _reliability_png(bins, title)}
    return Card(
        text="\n".join(lines),
        records=records,
        figures=figures,
        recommendation=recommendation,
        tables={WEIGHTS_FILE: weights},
    )
