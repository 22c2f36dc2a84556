"""The model card of ``judgecal fit`` (``report.md``): the choice, its cross-fitted metrics with intervals, the
runner-up, a reliability diagram with bin counts, and the exported model's per-judge weights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.io.figures import png, pyplot
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.stats.metrics import bin_index, brier, ece_positive, nll, pointwise_nll, reliability_bins
from judgecal_dist.stats.resampling import group_resample_totals
from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.recommendation import PROTOCOL, RULE_TEXT, Recommendation, compare_words, estimate
from judgecal_dist.studies.report_kit import level_text, markdown_table, number, row_interval, section

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
    """(estimate, low, high) of NLL, Brier and ECE: percentile bootstrap resampling groups (linked items together).

    Each metric is a function of per-item sums (items, losses, squared errors, the per-bin gaps ``y - p`` of
    :func:`~judgecal_dist.stats.metrics.ece_positive`), so a resample's metrics come from its group counts times
    the per-group sums (:func:`~judgecal_dist.stats.resampling.group_resample_totals`), not from its items."""
    point = _metrics(y, p, config)
    _, inverse = np.unique(groups, return_inverse=True)
    y = np.asarray(y, dtype=np.float64)
    per_item = [np.ones(len(y)), pointwise_nll(y, p, eps=config.eps), (p - y) ** 2]
    bins = bin_index(p, config.n_bins)
    per_item += [np.where(bins == b, y - p, 0.0) for b in range(config.n_bins)]
    n_groups = int(inverse.max()) + 1
    sums = np.column_stack([np.bincount(inverse, weights=w, minlength=n_groups) for w in per_item]).astype(np.float64)
    totals = group_resample_totals(sums, config.resamples, np.random.default_rng(config.seed))
    n = totals[:, 0]
    draws = {"nll": totals[:, 1] / n, "brier": totals[:, 2] / n, "ece": np.abs(totals[:, 3:]).sum(axis=1) / n}
    tail = (1 - config.ci_level) / 2
    bounds = {k: np.quantile(d, [tail, 1 - tail]) for k, d in draws.items()}
    return {k: (v, float(bounds[k][0]), float(bounds[k][1])) for k, v in point.items()}


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
    rows = [[w.judge_id, number(w.weight), number(w.votes, "d"), number(w.accuracy, ".3f")] for w in shown.itertuples()]
    if len(shown) < len(weights):
        rows.insert(SHOWN_JUDGES, [f"({len(weights) - len(shown)} more)", "", "", ""])
    return section(
        "Per-judge weights of the exported model (fitted on all labelled items)",
        head,
        rows=markdown_table(["judge", "weight", "votes", "accuracy"], rows),
    )


def _warning_lines(candidates: pd.DataFrame) -> list[str]:
    """Candidates whose fits raised ConvergenceWarnings during cross-fitting (counted, not printed)."""
    warned = candidates[candidates["convergence_warnings"] > 0]
    if warned.empty:
        return []
    return section(
        "Convergence warnings during cross-fitting",
        f"{len(warned)} of {len(candidates)} candidates had fits that stopped without converging (an optimiser or EM "
        "at its iteration limit, a temperature at its bound); their NLL is that of the fit they stopped at.",
        rows=markdown_table(
            ["candidate", "warnings (all folds)"],
            [[f"`{r.candidate}`", number(r.convergence_warnings, "d")] for r in warned.itertuples()],
        ),
    )


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


def _metric_records(
    config: Any, candidates: pd.DataFrame, names: list[tuple[str, str]], crossfit: dict[str, np.ndarray], panel: Panel
) -> list[dict[str, Any]]:
    """Per shown candidate (role, name): cross-fitted NLL, Brier and ECE with their grouped bootstrap intervals."""
    rows = candidates.set_index("candidate")
    records = []
    for name, role in names:
        ci = grouped_intervals(panel.labels, crossfit[name], panel.group_keys, config)
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
    return records


def _choice_lines(config: Any, candidates: pd.DataFrame, exported: str, panel: Panel, model: Any) -> list[str]:
    best = candidates.iloc[0]
    rule = (
        "the one-standard-error rule then takes, among the candidates within one SE of it, the fewest judges, "
        "then the simplest calibrator, then the simplest aggregator."
        if config.rule == "one_se"
        else "rule `lowest` takes it."
    )
    return section(
        "Choice",
        f"Exported `{exported}` ({model.name}): `model/model.json` ({model.document['format']}), applied with "
        "`judgecal score --model <this run> --data URL --output URL`.\n"
        f"Chosen by rule `{config.rule}` among {len(candidates)} candidates ({len(config.aggregators)} aggregators x "
        f"{len(config.calibrators)} calibrators x panels {list(config.panels)}), compared by {config.folds}-fold "
        f"cross-fitted NLL on all {len(panel.labels)} labelled items of `{panel.dataset}` (folds grouped by group_id).\n"
        f"Lowest NLL: `{best['candidate']}` {number(best['nll'])} (SE {number(best['se'])}); {rule}",
    )


def _body_lines(
    config: Any, candidates: pd.DataFrame, records: list[dict[str, Any]], bins: pd.DataFrame, weights: pd.DataFrame
) -> list[str]:
    """The card after its choice: metrics, reliability, weights, warnings, every candidate, the predictions file."""
    metrics = [
        [r["role"], f"`{r['candidate']}`", r["n_judges"], *(row_interval(r, m) for m in ("nll", "brier", "ece"))]
        for r in records
    ]
    reliability = [
        [f"({b.lower:.1f}, {b.upper:.1f}]", number(b.count, "d"), number(b.mean_p, ".3f"), number(b.frac_pos, ".3f")]
        for b in bins.itertuples()
        if b.count > 0
    ]
    every = [[f"`{r.candidate}`", r.n_judges, number(r.nll), number(r.se)] for r in candidates.itertuples()]
    return [
        *section(
            f"Cross-fitted metrics ({level_text(config.ci_level)} intervals: percentile bootstrap over groups, "
            f"{config.resamples} resamples)",
            rows=markdown_table(["role", "candidate", "judges", "NLL", "Brier", "ECE"], metrics),
        ),
        *section(
            "Reliability of the exported pipeline (cross-fitted, `figures/reliability.png`)",
            rows=markdown_table(["bin", "items", "mean P(A)", "fraction A"], reliability),
        ),
        *_weight_lines(weights),
        *_warning_lines(candidates),
        *section(
            "Every candidate (cross-fitted NLL, lowest first)",
            rows=markdown_table(["candidate", "judges", "NLL", "SE"], every),
            after=[
                "`predictions.parquet` holds the exported model's P(A) of every labelled item (`p`, refitted on all "
                "of them) beside its cross-fitted probability (`crossfit_p`); `judgecal score` with this model gives "
                "`p` exactly."
            ],
        ),
        "",
    ]


def _choice_record(support: pd.DataFrame) -> dict[str, Any]:
    """The chosen candidate as other studies read it: its name, parts and cross-fitted NLL with its interval."""
    row = support.iloc[0]
    agg, _, rest = str(row["candidate"]).partition("+")
    cal, _, panel = rest.partition("@")
    return {"candidate": row["candidate"], "aggregator": agg, "calibrator": cal, "panel": panel} | {
        k: float(row[k]) for k in ("nll", "nll_ci_low", "nll_ci_high")
    }


def _others(config: Any, choice: dict[str, Any], others: Sequence[Mapping[str, Any]]) -> list[str]:
    """The other studies' choices (``compare``), or, without them, why they may choose differently."""
    if others:
        return compare_words(choice, "fit", others)
    return [
        "the inclusion and budget studies choose by the same rule among the same deployable panels, on "
        f"{PROTOCOL['inclusion']} (inclusion) and {PROTOCOL['budget']} (budget) instead of {PROTOCOL['fit']}; "
        "where they name another pipeline, it is one whose NLL interval overlaps this one or the data differ "
        "(`--set compare=[<their run folders>]` names their choices here)"
    ]


def _recommendation(
    config: Any, support: pd.DataFrame, exported_first: bool, model: Any, others: Sequence[Mapping[str, Any]]
) -> Recommendation:
    first, second = support.iloc[-1 if exported_first else 0], support.iloc[1] if len(support) > 1 else None
    choice = _choice_record(support)
    rule = RULE_TEXT[config.rule] + " (SE: the SD of the items' cross-fitted losses over sqrt(n))"
    return Recommendation(
        rule=rule,
        others=_others(config, choice, others),
        choice=choice,
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


def card(
    config: Any,
    candidates: pd.DataFrame,
    chosen: str,
    runner_up: str,
    exported: str,
    crossfit: dict[str, np.ndarray],
    panel: Panel,
    model: Any,
    others: Sequence[Mapping[str, Any]] = (),
) -> Card:
    """The model card of the exported candidate, from the cross-fitted ``candidates`` (lowest NLL first)."""
    names = [(chosen, "chosen")] + [(runner_up, "runner-up")] * bool(runner_up)
    names += [(exported, "exported (export setting)")] * (exported != chosen)
    records = _metric_records(config, candidates, names, crossfit, panel)
    bins = reliability_bins(panel.labels, crossfit[exported], n_bins=config.n_bins)
    weights = judge_weights(model, panel)
    lines = [
        f"# Model card: `{exported}`",
        *_choice_lines(config, candidates, exported, panel, model),
        *_body_lines(config, candidates, records, bins, weights),
    ]
    title = f"{exported}: cross-fitted reliability, {len(panel.labels)} items"
    return Card(
        text="\n".join(lines),
        records=records,
        figures={"reliability.png": _reliability_png(bins, title)},
        recommendation=_recommendation(config, pd.DataFrame(records), exported != chosen, model, others),
        tables={WEIGHTS_FILE: weights},
    )
