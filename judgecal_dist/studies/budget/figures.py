"""The budget study's figures: NLL by label budget (with the max-t verdict) and by calibration fraction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import colours, plain_log_axis, png, pyplot
from judgecal_dist.methods.pipeline import CALIBRATORS

if TYPE_CHECKING:
    from judgecal_dist.studies.budget.config import Config

__all__ = ["budget_figure", "fraction_figure"]

#: One colour per calibrator in every panel (and the same as the inclusion study's figures).
COLOURS = colours(CALIBRATORS)


def _line(ax: Any, rows: pd.DataFrame, x: str, label: str, colour: Any, metric: str = "nll", style: str = "-") -> None:
    rows = rows.sort_values(x)
    ax.plot(rows[x], rows[metric], style, marker="o", ms=3, color=colour, label=label)
    ax.fill_between(rows[x], rows[f"{metric}_ci_low"], rows[f"{metric}_ci_high"], color=colour, alpha=0.12)


def budget_figure(config: Config, summary: pd.DataFrame, max_t: dict[str, Any]) -> bytes:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), dpi=110)
    topk = f"top{config.top_k}"
    budgets = sorted(summary["budget"].unique())
    for panel_name, style in (("all", "-"), (topk, "--")):  # colour = calibrator, line style = panel
        for cal in ("beta", "none"):
            rows = summary[(summary["panel"] == panel_name) & (summary["calibrator"] == cal)]
            _line(axes[0], rows, "budget", f"{panel_name} + {cal}", COLOURS[cal], style=style)
    axes[0].set_title(f"All judges (solid) vs {topk} (dashed), one-coin")
    for cal in ("none", *dict.fromkeys(("beta", *config.calibrators))):
        rows = summary[(summary["panel"] == "all") & (summary["calibrator"] == cal)]
        _line(axes[1], rows, "budget", cal, COLOURS[cal])
    axes[1].set_title("Calibrators compared, all judges")
    for ax in axes[:2]:
        ax.set_xlabel("label budget (calibration items)")
        ax.set_ylabel("evaluation NLL (mean, 95% interval)")
        plain_log_axis(ax, "x", budgets)
        plain_log_axis(ax, "y")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    x = np.asarray(max_t["budgets"], dtype=float)
    axes[2].plot(x, max_t["delta_mean"], marker="o", ms=3, color="0.2")
    axes[2].fill_between(x, max_t["delta_ci_low"], max_t["delta_ci_high"], color="0.2", alpha=0.15)
    axes[2].axhline(0.0, color="grey", lw=0.8)
    plain_log_axis(axes[2], "x", x)
    axes[2].set_xlabel("label budget (calibration items)")
    axes[2].set_ylabel(f"NLL({topk}) - NLL(all), beta (> 0: all better)")
    axes[2].set_title(f"Joint test across budgets: p = {max_t['pvalue']:.3g}")
    axes[2].grid(alpha=0.3)
    fig.tight_layout()
    return png(fig)


def fraction_figure(summary: pd.DataFrame) -> bytes:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.0), dpi=110)
    for cal in ("none", "beta"):
        rows = summary[summary["calibrator"] == cal]
        _line(axes[0], rows, "fraction", f"one-coin + {cal}", COLOURS[cal])
        _line(axes[1], rows, "fraction", f"one-coin + {cal}", COLOURS[cal], metric="accuracy")
    axes[0].set_ylabel("evaluation NLL (mean, 95% interval)")
    axes[0].set_title("NLL")
    plain_log_axis(axes[0], "y")
    axes[1].set_ylabel("evaluation accuracy (mean, 95% interval)")
    axes[1].set_title("Accuracy")
    for ax in axes:
        ax.set_xlabel("share of labelled items used for calibration")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("All judges, one-coin: uncalibrated vs beta over the calibration share")
    fig.tight_layout()
    return png(fig)
