"""Figures of the inclusion study: the full-panel NLL grid, NLL against retained panel size and the reliability
diagram of the default aggregator before and after calibration."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import colours, heatmap, plain_log_axis, png, pyplot
from judgecal_dist.methods.pipeline import CALIBRATORS

__all__ = ["figures"]


def figures(metrics: pd.DataFrame, summary: pd.DataFrame, reliability: pd.DataFrame, config: Any) -> dict[str, bytes]:
    """Three PNGs: NLL grid of the full panel, NLL vs retained panel size, reliability before/after."""
    from matplotlib.colors import LogNorm

    plt = pyplot()
    colour = colours(CALIBRATORS)  # a calibrator has one colour in every figure (the budget study's too)

    out = {}
    full = summary[summary["panel"] == "all"].pivot(index="aggregator", columns="calibrator", values="nll")
    full = full.reindex(
        index=[a for a in config.aggregators if a in full.index],
        columns=[c for c in config.calibrators if c in full.columns],
    )
    grid = full.to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(2.4 + 1.3 * full.shape[1], 1.6 + 0.55 * full.shape[0]), dpi=110)
    finite = grid[np.isfinite(grid)]
    heatmap(
        ax,
        grid,
        list(full.index),
        list(full.columns),
        best=[tuple(np.argwhere(grid == finite.min())[0])] if finite.size else [],
        norm=LogNorm(finite.min(), finite.max()) if finite.size and 0 < finite.min() < finite.max() else None,
        cmap="viridis_r",
        colorbar="evaluation NLL (log colour scale)",
        xlabel="calibrator",
        ylabel="aggregator",
        title="Full-panel evaluation NLL (mean over splits; lower is better)",
    )
    out["nll_grid.png"] = png(fig, tight_layout=True)

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    sizes = []
    for i, (cal, style) in enumerate((("none", "--"), ("beta", "-"), ("platt", ":"))):
        rows = summary[(summary["aggregator"] == "one_coin") & (summary["calibrator"] == cal)].sort_values("panel_size")
        if not rows.empty:
            sizes += rows["panel_size"].tolist()
            ax.errorbar(
                rows["panel_size"],
                rows["nll"],
                yerr=[rows["nll"] - rows["nll_ci_low"], rows["nll_ci_high"] - rows["nll"]],
                fmt="o" + style,
                capsize=3,
                color=colour[cal],
                label=f"one_coin + {cal}",
            )
            if i == 0:  # the panel names once, not once per calibrator on top of each other
                for r in rows.itertuples():
                    ax.annotate(r.panel, (r.panel_size, r.nll), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("retained panel size (judges)")
    ax.set_ylabel("evaluation NLL (mean, 95% interval)")
    if sizes:
        plain_log_axis(ax, "x", [round(s, 1) for s in sizes])
    plain_log_axis(ax, "y")
    ax.legend()
    ax.set_title("NLL vs retained panel size (one-coin aggregator)")
    out["nll_vs_panel_size.png"] = png(fig, tight_layout=True)

    if not reliability.empty:
        out["reliability.png"] = _reliability(reliability, colour)
    return out


def _reliability(reliability: pd.DataFrame, colour: dict[str, Any]) -> bytes:
    """Reliability diagram with the items per bin beneath it: a bin with a handful of items is drawn hollow and
    its count is shown, so it cannot pass for a calibration failure."""
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(4.8, 5.6), dpi=110, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    pooled = reliability.groupby(["calibrator", "bin"], as_index=False)[["count", "sum_p", "sum_y"]].sum()
    few = max(10.0, 0.01 * float(pooled.groupby("calibrator")["count"].sum().max()))
    names = sorted(pooled["calibrator"].unique(), key=lambda c: (c != "none", c))
    width = 0.8 / (10 * len(names))
    for k, (cal, rows) in enumerate((c, pooled[pooled["calibrator"] == c]) for c in names):
        rows = rows[rows["count"] > 0]
        x, y = rows["sum_p"] / rows["count"], rows["sum_y"] / rows["count"]
        label = f"one_coin + {cal}" if cal != "none" else "one_coin (uncalibrated)"
        solid = rows["count"] >= few
        ax.plot(x[solid], y[solid], "-", color=colour[cal], lw=1, alpha=0.7)  # the line joins well-filled bins only
        ax.scatter(x[solid], y[solid], color=colour[cal], s=25, label=label, zorder=3)
        ax.scatter(x[~solid], y[~solid], facecolors="none", edgecolors=colour[cal], s=25, zorder=3)
        for xi, yi, n in zip(x[~solid], y[~solid], rows["count"][~solid], strict=True):
            ax.annotate(f"n={n:.0f}", (xi, yi), fontsize=6, xytext=(3, -8), textcoords="offset points")
        bx.bar(x + (k - (len(names) - 1) / 2) * width, rows["count"], width=width, color=colour[cal], label=label)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, label="perfect calibration")
    ax.set_xlabel("mean predicted P(A) in the bin")
    ax.set_ylabel("observed frequency of A")
    ax.scatter([], [], facecolors="none", edgecolors="grey", s=25, label=f"bin of fewer than {few:.0f} items")
    ax.set_title("Reliability, pooled over splits")
    ax.legend(fontsize=7)
    for axes in (ax, bx):
        axes.set_xlim(-0.03, 1.03)
        axes.tick_params(labelbottom=True)
    bx.set_xlabel("mean predicted P(A) in the bin")
    bx.set_ylabel("items per bin")
    bx.set_title("Items per bin", fontsize=9)
    return png(fig, tight_layout=True)
