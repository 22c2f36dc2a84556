"""Figures of the continuous study: judge against reference, calibration per arm and metric against budget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import colours, plain_log_axis, png, pyplot
from judgecal_dist.io.synthetic_judge import generator_mean
from judgecal_dist.stats.continuous_metrics import kde_on_grid
from judgecal_dist.studies.continuous.data import SYNTHETIC, arm_scores
from judgecal_dist.studies.continuous.summary import BUDGET_FREE, ORDER

if TYPE_CHECKING:
    from judgecal_dist.studies.continuous.config import Config, ContinuousInput

__all__ = ["figure_one", "figures", "training_figure"]

_METRIC_NAMES = {"mae": "MAE", "kl": "KL divergence"}


def figure_one(config: Config, data: ContinuousInput) -> bytes:
    """Judge score against the human reference per arm (first seed) with marginal histograms; the synthetic arm
    also shows the generator's mean curve (the paper's Figure 1)."""
    plt = pyplot()
    arms = list(data.arms)
    fig = plt.figure(figsize=(4.6 * len(arms), 5.0))
    outer = fig.add_gridspec(1, len(arms), wspace=0.3, left=0.06, right=0.98, bottom=0.1, top=0.86)
    fig.suptitle(f"Judge score against the human reference score, all rubrics (seed {config.seed})")
    bins = np.linspace(1.0, 5.0, 33)
    for c, arm in enumerate(arms):
        rows = arm_scores(data.scores, arm, config.seed)
        y, j = rows["y"].to_numpy(), rows["j"].to_numpy()
        grid = outer[c].subgridspec(2, 2, width_ratios=[4, 1], height_ratios=[1, 4], wspace=0.05, hspace=0.05)
        ax = fig.add_subplot(grid[1, 0])
        top = fig.add_subplot(grid[0, 0], sharex=ax)
        side = fig.add_subplot(grid[1, 1], sharey=ax)
        ax.scatter(y, j, s=4, alpha=0.3, color="C0", label=f"items ({len(rows)})")
        ax.plot([1, 5], [1, 5], "k:", lw=1, label="judge = reference")
        if arm == SYNTHETIC:
            curve = np.linspace(1.0, 5.0, 200)
            ax.plot(curve, generator_mean(curve), color="C3", lw=2, label="generator mean (before clipping)")
        gap = float(y.mean() - j.mean())
        ax.set(
            xlabel="human reference score (1-5)",
            ylabel="judge score (1-5)",
            xlim=(0.9, 5.1),
            ylim=(0.9, 5.1),
        )
        ax.legend(fontsize=7, loc="upper left")
        top.hist(y, bins=bins, color="0.5")
        top.set_title(f"{arm}: {len(rows)} items, reference - judge mean {gap:+.2f}", fontsize=9)
        top.set_ylabel("items", fontsize=8)
        top.set_xlabel("human score", fontsize=7)
        top.xaxis.set_label_position("top")
        side.hist(j, bins=bins, color="C0", orientation="horizontal")
        side.set_xlabel("items", fontsize=8)
        side.set_ylabel("judge score", fontsize=7)
        side.yaxis.set_label_position("right")
        for a in (top, side):
            a.tick_params(labelsize=7)
        plt.setp(top.get_xticklabels(), visible=False)
        plt.setp(side.get_yticklabels(), visible=False)
    return png(fig, dpi=90)


def _item_rows(parts: pd.DataFrame, budget: int) -> pd.DataFrame:
    items = parts[parts["y_items"].notna()]
    items = items[(items["budget"] == budget) | items["corrector"].isin(BUDGET_FREE)]
    return items


def _calibration(config: Config, arm: str, arm_items: pd.DataFrame, budget: int, colors: dict[str, Any]) -> bytes:
    """Corrected against human score per corrector, and the score densities against the reference's, for ``arm``."""
    plt = pyplot()
    grid = np.linspace(1.0, 5.0, 500)
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
    return png(fig, dpi=90, tight_layout=True)


def _metric_vs_budget(config: Config, table: pd.DataFrame, data: ContinuousInput, colors: dict[str, Any]) -> bytes:
    """Rubric-mean MAE and KL against the anchor budget, per arm and corrector."""
    plt = pyplot()
    fig, axes = plt.subplots(2, len(data.arms), figsize=(4.8 * len(data.arms), 7.4), squeeze=False)
    mean = table.groupby(["judge", "corrector", "budget"])[["mae", "kl"]].mean().reset_index()
    for c, arm in enumerate(data.arms):
        for r, metric in enumerate(("mae", "kl")):
            ax = axes[r, c]
            # constant's error dwarfs the others' (it is in the baselines table); raw and ot_oracle are references.
            for corrector, g in mean[(mean["judge"] == arm) & (mean["corrector"] != "constant")].groupby("corrector"):
                ax.plot(
                    g["budget"],
                    g[metric],
                    marker="o",
                    color=colors.get(corrector),
                    label=corrector,
                    ls={"raw": "--", "ot_oracle": ":"}.get(str(corrector), "-"),
                )
            ax.set(
                xlabel="human-scored anchors per rubric",
                ylabel=f"{_METRIC_NAMES[metric]} to human scores\n(mean over rubrics)",
                title=f"{arm}: {_METRIC_NAMES[metric]} vs anchors",
            )
            plain_log_axis(ax, "x", sorted(config.budgets))
            ax.legend(fontsize=7)
    return png(fig, dpi=90, tight_layout=True)


def training_figure(config: Config, parts: pd.DataFrame) -> bytes | None:
    """Every flow fit's training loss against the epoch, one panel per arm, a colour per budget, a line style per
    flow variant, one line per seed (None without flow rows)."""
    fits = parts[parts["corrector"].str.startswith("flow")] if "loss_curve" in parts else parts.iloc[:0]
    fits = fits[fits["loss_curve"].notna()]
    if fits.empty:
        return None
    plt = pyplot()
    arms = sorted(fits["judge"].unique())
    budgets = sorted(int(b) for b in fits["budget"].unique())
    colors = colours([str(b) for b in budgets])
    fig, axes = plt.subplots(1, len(arms), figsize=(5.4 * len(arms), 4.4), squeeze=False)
    stop = (
        f"stop when the {config.flow_window}-epoch mean moves < {config.flow_tol:g}"
        if config.flow_tol
        else "no early stop"
    )
    fig.suptitle(
        f"Flow training loss by epoch (H={config.flow_hidden}, lr {config.flow_lr:g}, cap {config.flow_epochs} "
        f"epochs, {stop})",
        fontsize=10,
    )
    for ax, arm in zip(axes[0], arms, strict=True):
        for (corrector, budget), g in fits[fits["judge"] == arm].groupby(["corrector", "budget"], sort=True):
            epochs = g["epochs_run"].astype(int)
            span = f"{epochs.min()}" if epochs.min() == epochs.max() else f"{epochs.min()}-{epochs.max()}"
            label = f"{corrector}, {int(budget)} anchors/rubric: {len(g)} seeds, {span} epochs"
            for k, curve in enumerate(g["loss_curve"]):
                ax.plot(
                    np.arange(1, len(curve) + 1),
                    np.asarray(curve, dtype=float),
                    color=colors[str(int(budget))],
                    ls="-" if corrector == "flow" else "--",
                    lw=0.8,
                    alpha=0.8,
                    label=label if k == 0 else None,
                )
        ax.set(
            xlabel="epoch (one full-batch Adam step)",
            ylabel="training loss: MSE of the MC-dropout solve\n(score points squared, 1-5 scale)",
            title=f"{arm}",
        )
        ax.legend(fontsize=7)
    return png(fig, dpi=90, tight_layout=True)


def figures(config: Config, parts: pd.DataFrame, table: pd.DataFrame, data: ContinuousInput) -> dict[str, bytes]:
    """``calibration_<arm>.png`` per arm with item rows at the largest budget, and ``metric_vs_budget.png``."""
    figs: dict[str, bytes] = {}
    budget = max(config.budgets)
    items = _item_rows(parts, budget)
    items = items[items["corrector"] != "constant"]  # one horizontal line per rubric, no density: table only
    colors = {"raw": "0.6"} | colours([c for c in ORDER if c != "raw"])  # linear_hb, flow, ot: C0, C1, C2
    for arm in data.arms:
        arm_items = items[items["judge"] == arm]
        if arm_items.empty:
            continue
        figs[f"calibration_{arm}.png"] = _calibration(config, arm, arm_items, budget, colors)
    figs["metric_vs_budget.png"] = _metric_vs_budget(config, table, data, colors)
    training = training_figure(config, parts)
    if training is not None:
        figs["flow_training.png"] = training
    return figs
