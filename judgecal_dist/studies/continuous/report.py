"""Summary, crossover, canary, figures and report of the continuous study (spec 001 §6, §7.5-§7.6, §8.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import colours, plain_log_axis, png, pyplot
from judgecal_dist.io.records import json_records
from judgecal_dist.stats.continuous_metrics import kde_on_grid
from judgecal_dist.stats.inference import bootstrap_ci
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.continuous.recommend import recommend

if TYPE_CHECKING:
    from judgecal_dist.studies.continuous.config import Config, ContinuousInput

__all__ = ["summarise", "summary_table", "crossover", "canary", "METRICS"]

METRICS = ("mean_error", "mae", "pearson", "spearman", "kl", "kl_sym", "w1")
KEYS = ["rubric", "judge", "corrector", "budget"]
ORDER = {"raw": 0, "linear_hb": 1, "flow": 2, "ot": 3}


def _usable(parts: pd.DataFrame) -> pd.DataFrame:
    # A NUTS fit that failed its gate is reported as failed, never used (spec §3.5).
    failed = (parts["corrector"] == "linear_hb") & (parts["converged"] == False)  # noqa: E712 - NaN-safe column
    return parts[~failed]


def _expand_raw(parts: pd.DataFrame, budgets: list[int]) -> pd.DataFrame:
    raw = parts[parts["corrector"] == "raw"]
    copies = [raw.assign(budget=b) for b in budgets]  # the raw judge does not depend on the budget
    return pd.concat([parts[parts["corrector"] != "raw"], *copies], ignore_index=True)


def summary_table(config: Config, parts: pd.DataFrame) -> pd.DataFrame:
    """Mean and percentile-bootstrap CI over seeds of every metric, per (rubric, judge, corrector, budget)."""
    frame = _expand_raw(_usable(parts), sorted(config.budgets))
    rows = []
    for key, group in frame.groupby(KEYS, sort=True):
        row: dict[str, Any] = dict(zip(KEYS, key, strict=True)) | {"seeds": len(group)}
        row["n_anchors"] = float(group["n_anchors"].mean())
        for m in METRICS:
            values = group[m].to_numpy(dtype=np.float64)
            values = values[np.isfinite(values)]
            if values.size == 0:
                row[m] = row[f"{m}_ci_low"] = row[f"{m}_ci_high"] = np.nan
                continue
            ci = bootstrap_ci(values, confidence=config.ci_level, rng=np.random.default_rng(config.seed))
            row[m], row[f"{m}_ci_low"], row[f"{m}_ci_high"] = float(values.mean()), ci.low, ci.high
        rows.append(row)
    out = pd.DataFrame(rows)
    rank = out["corrector"].map(ORDER).fillna(9)
    return (
        out.assign(_r=rank).sort_values(["judge", "rubric", "_r", "budget"]).drop(columns="_r").reset_index(drop=True)
    )


def crossover(config: Config, parts: pd.DataFrame) -> list[dict[str, Any]]:
    """Smallest budget from which MAE(flow) - MAE(linear_hb) < 0 with its seed-bootstrap CI below 0 at that and
    every larger budget (spec §7.5); ``budget_or_none`` is None when not reached."""
    usable = _usable(parts)
    wide = usable[usable["corrector"].isin(["flow", "linear_hb"])].pivot_table(
        index=["judge", "rubric", "budget", "seed"], columns="corrector", values="mae"
    )
    out: list[dict[str, Any]] = []
    if not {"flow", "linear_hb"} <= set(wide.columns):
        return out
    delta = (wide["flow"] - wide["linear_hb"]).dropna()
    for (judge, rubric), cell in delta.groupby(level=["judge", "rubric"]):
        below, budgets, detail = [], [], []
        for budget, d in cell.groupby(level="budget"):
            ci = bootstrap_ci(d.to_numpy(), confidence=config.ci_level, rng=np.random.default_rng(config.seed))
            budgets.append(int(budget))
            below.append(ci.high < 0)
            detail.append({"budget": int(budget), "delta_mae": float(d.mean()), "ci_low": ci.low, "ci_high": ci.high})
        found = None
        for i in range(len(budgets)):
            if all(below[i:]):
                found = budgets[i]
                break
        out.append({"rubric": rubric, "judge": judge, "budget_or_none": found, "delta_mae_by_budget": detail})
    return out


def canary(config: Config, parts: pd.DataFrame) -> list[dict[str, Any]]:
    """Pr(beta < 0.3) of the pooled NUTS posterior per (judge, rubric, budget), mean over NUTS seeds (spec §3.7)."""
    nuts = parts[(parts["corrector"] == "linear_hb") & (parts["linear_fit"] == "nuts")]
    out = []
    for (judge, rubric, budget), g in nuts.groupby(["judge", "rubric", "budget"], sort=True):
        prob = float(g["canary_prob"].mean())
        out.append(
            {
                "judge": judge,
                "rubric": rubric,
                "budget": int(budget),
                "pr_beta_lt_0_3": prob,
                "alert": bool(prob > 0.05),
                "alert_fraction_of_seeds": float((g["canary_prob"] > 0.05).mean()),
                "beta_mean": float(g["beta"].mean()),
                "failed_fits": int((g["converged"] == False).sum()),  # noqa: E712
            }
        )
    return out


def _item_rows(parts: pd.DataFrame, budget: int) -> pd.DataFrame:
    items = parts[parts["y_items"].notna()]
    items = items[(items["budget"] == budget) | (items["corrector"] == "raw")]
    return items


_METRIC_NAMES = {"mae": "MAE", "kl": "KL divergence"}


def figures(config: Config, parts: pd.DataFrame, table: pd.DataFrame, data: ContinuousInput) -> dict[str, bytes]:
    plt = pyplot()
    figs: dict[str, bytes] = {}
    budget = max(config.budgets)
    items = _item_rows(parts, budget)
    grid = np.linspace(1.0, 5.0, 500)
    colors = {"raw": "0.6"} | colours([c for c in ORDER if c != "raw"])  # linear_hb, flow, ot: C0, C1, C2
    for arm in data.arms:
        arm_items = items[items["judge"] == arm]
        if arm_items.empty:
            continue
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
        outside = 0
        for corrector, g in arm_items.groupby("corrector"):
            y = np.concatenate(g["y_items"].map(np.asarray).to_list())
            y_hat = np.concatenate(g["y_hat_items"].map(np.asarray).to_list())
            outside += int(((y_hat < 1) | (y_hat > 5)).sum())
            ax1.scatter(
                y,
                y_hat,
                s=5,
                alpha=0.4,
                color=colors.get(corrector),
                label=corrector,
                marker="x" if corrector == "raw" else "o",
            )
            p = kde_on_grid(y_hat, grid)
            if p is not None:
                ax2.plot(grid, p, color=colors.get(corrector), label=corrector)
            if corrector == "raw":
                q = kde_on_grid(y, grid)
                if q is not None:
                    ax2.plot(grid, q, color="k", lw=2, label="reference")
        ax1.plot([1, 5], [1, 5], "k--", lw=1)
        for edge in (1, 5):  # the scale's ends: a linear correction may leave them, and that is shown, not hidden
            ax1.axhline(edge, color="0.4", lw=0.6, ls=":")
        ax1.set(
            xlabel="human reference score (1-5)",
            ylabel="corrected judge score",
            title=f"{arm}: {budget} anchors, seed {config.seed}"
            + (f"; {outside} scores outside 1-5 (dotted)" if outside else ""),
        )
        ax2.set(
            xlabel="score (1-5 scale)",
            ylabel="density (kernel estimate)",
            title=f"{arm}: score distributions vs reference (all rubrics)",
        )
        ax1.legend(fontsize=7)
        ax2.legend(fontsize=7)
        figs[f"calibration_{arm}.png"] = png(fig, dpi=90, tight_layout=True)
    fig, axes = plt.subplots(2, len(data.arms), figsize=(4.8 * len(data.arms), 7.4), squeeze=False)
    mean = table.groupby(["judge", "corrector", "budget"])[["mae", "kl"]].mean().reset_index()
    for c, arm in enumerate(data.arms):
        for r, metric in enumerate(("mae", "kl")):
            ax = axes[r, c]
            for corrector, g in mean[mean["judge"] == arm].groupby("corrector"):
                ax.plot(
                    g["budget"],
                    g[metric],
                    marker="o",
                    color=colors.get(corrector),
                    label=corrector,
                    ls="--" if corrector == "raw" else "-",
                )
            ax.set(
                xlabel="human-scored anchors per rubric",
                ylabel=f"{_METRIC_NAMES[metric]} to human scores\n(mean over rubrics)",
                title=f"{arm}: {_METRIC_NAMES[metric]} vs anchors",
            )
            plain_log_axis(ax, "x", sorted(config.budgets))
            ax.legend(fontsize=7)
    figs["metric_vs_budget.png"] = png(fig, dpi=90, tight_layout=True)
    return figs


def _findings(
    table: pd.DataFrame, cross: list[dict[str, Any]], canaries: list[dict[str, Any]], parts: pd.DataFrame
) -> list[str]:
    lines = []
    big = table[(table["budget"] >= 100) & (table["corrector"] != "raw")]
    worst = big["mean_error"].abs().max()
    lines.append(
        f"(1) Q1: max |mean error| of any corrector at n >= 100 over rubrics and arms: {worst:.3f} (target < 0.08)."
    )
    lin = parts[parts["corrector"] == "linear_hb"].merge(
        parts[parts["corrector"] == "raw"][["judge", "rubric", "seed", "pearson"]],
        on=["judge", "rubric", "seed"],
        suffixes=("", "_raw"),
    )
    gap = float(np.nanmax(np.abs(lin["pearson"] - lin["pearson_raw"]))) if len(lin) else float("nan")
    lines.append(
        f"(2) HB Pearson = raw Pearson: max |difference| over fits {gap:.2e} (an affine map with positive slope)."
    )
    for arm, g in table[table["corrector"] == "linear_hb"].groupby("judge"):
        lo, hi = g[g["budget"] == 100], g[g["budget"] == g["budget"].max()]
        if len(lo) and len(hi):
            lines.append(
                f"(3) {arm}: HB MAE at n=100 vs n={int(g['budget'].max())}: {lo['mae'].mean():.3f} vs {hi['mae'].mean():.3f} (rubric mean)."
            )
    for c in cross:
        lines.append(f"(4/5) crossover {c['judge']} / {c['rubric']}: {c['budget_or_none'] or 'not reached'}")
    alerts = [f"{c['judge']}/{c['rubric']}@{c['budget']} ({c['pr_beta_lt_0_3']:.2f})" for c in canaries if c["alert"]]
    lines.append(f"(6) canary alerts Pr(beta<0.3) > 0.05: {', '.join(alerts) or 'none'}")
    return lines


def _markdown(table: pd.DataFrame, cols: list[str]) -> str:
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    body = "".join(
        "| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |\n"
        for row in table[cols].itertuples(index=False)
    )
    return head + body


def summarise(config: Config, parts: pd.DataFrame, data: ContinuousInput) -> StudyResult:
    table = summary_table(config, parts)
    cross = crossover(config, parts)
    canaries = canary(config, parts)
    usable = _usable(parts)
    failed = int(len(parts) - len(usable))
    records = json_records(table)
    flows = parts[parts["corrector"] == "flow"]
    overall = (
        table.groupby(["judge", "corrector", "budget"])[["mean_error", "mae", "pearson", "kl", "w1"]]
        .mean()
        .reset_index()
    )
    report = [
        "# Continuous-score calibration",
        f"Arms: {', '.join(data.arms)}; rubrics: {', '.join(data.rubrics)}; budgets {list(config.budgets)}; "
        f"{config.replicates} seeds ({config.nuts_seeds} with NUTS); flow epochs {config.flow_epochs}, K={config.flow_passes}, "
        f"ODE solver {config.flow_solver}.",
        f"Failed NUTS fits (gate R-hat/ESS/divergences), excluded from linear_hb: {failed} rubric rows.",
        "",
        "## Rubric-mean metrics by judge, corrector and budget",
        "![metric vs budget](figures/metric_vs_budget.png)",
        "",
        "Columns: budget = human-scored anchors per rubric; mean_error = mean of corrected minus human score "
        "(bias); mae = mean absolute error; pearson = correlation with the human scores; kl = KL divergence between "
        "the human and the corrected score distributions; w1 = Wasserstein-1 distance between them (all means over "
        "the rubrics; per-rubric values with intervals in summary.json).",
        "",
        _markdown(overall, ["judge", "corrector", "budget", "mean_error", "mae", "pearson", "kl", "w1"]),
        "## Findings the paper expects, checked on this data",
        *[f"- {line}" for line in _findings(table, cross, canaries, parts)],
        "",
        f"Flow MC s.d. mean {flows['mc_sd_mean'].mean():.3f}; routed fraction {flows['routed_fraction'].mean():.3f}; "
        f"MAE routed {flows['routed_mae'].mean():.3f} vs kept {flows['kept_mae'].mean():.3f}; devices {sorted(flows['device'].dropna().unique())}."
        if len(flows)
        else "No flow rows.",
        "",
        *[f"![calibration {a}](figures/calibration_{a}.png)" for a in data.arms],
    ]
    extra = {"crossover": cross, "canary": canaries, "failed_nuts_fits": failed}
    return StudyResult(
        records=records,
        summary=table,
        report="\n".join(report) + "\n",
        figures=figures(config, parts, table, data),
        extra=extra,
        recommendation=recommend(config, table, cross),
    )
