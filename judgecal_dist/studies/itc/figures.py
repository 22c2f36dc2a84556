"""Figures of the itc study: MAE and pairwise accuracy against n per judge (the paper's Figure 2) and the decision
regions of self-consistency and fitted Davidson rules (its Figure 1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import colours, plain_log_axis, png, pyplot
from judgecal_dist.methods.repeated.davidson import davidson_features, mae_action
from judgecal_dist.methods.repeated.self_consistency import majority_vote
from judgecal_dist.studies.itc.config import METHODS

if TYPE_CHECKING:
    from judgecal_dist.studies.itc.config import Config

__all__ = ["decision_figure", "decision_grid", "figures"]


def decision_grid(n: int, beta: float | None = None, eta0: float = 0.0, *, sc_tie_break: str = "zero") -> np.ndarray:
    """Answer for every split of ``n`` votes: entry ``[b, a]`` for ``a`` A votes, ``b`` B votes, the rest ties.

    Davidson's MAE rule with ``(beta, eta0)``, or self-consistency when ``beta`` is None; NaN where a + b > n.
    """
    a, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1))
    ok = a + b <= n
    counts = np.column_stack([a[ok], n - a[ok] - b[ok], b[ok]])
    if beta is None:
        answer = majority_vote(counts, tie_break=sc_tie_break, random_state=0)
    else:
        answer = mae_action(beta * davidson_features(counts)[0], eta0)
    grid = np.full(a.shape, np.nan)
    grid[ok] = answer
    return grid


def decision_figure(config: Config, summary: pd.DataFrame) -> bytes:
    """The paper's Figure 1: decision regions of SC and of the two fitted Davidson rules furthest apart."""
    from matplotlib.colors import ListedColormap

    plt = pyplot()
    hi = int(summary["n"].max())
    rules: list[tuple[str, float | None, float]] = [
        (f"self-consistency (ties of counts -> {config.sc_tie_break})", None, 0.0)
    ]
    fitted = summary[(summary["method"] == "davidson") & (summary["n"] == hi)]
    if "beta" in fitted:
        fitted = fitted[fitted["beta"] > 1e-9]
        lam = np.exp(2 * np.arcsinh(0.5 * np.exp(fitted["eta0"])) / fitted["beta"])
        for pos in sorted({int(np.argmin(lam.to_numpy())), int(np.argmax(lam.to_numpy()))}) if len(fitted) else []:
            r = fitted.iloc[pos]
            rules.append(
                (
                    f"Davidson, {r['dataset']} {r['judge_id']}\nbeta {r['beta']:.2f}, eta0 {r['eta0']:.2f}, "
                    f"lambda {lam.iloc[pos]:.2f}",
                    float(r["beta"]),
                    float(r["eta0"]),
                )
            )
    cmap = ListedColormap(["#d95f02", "#bdbdbd", "#1b9e77"])  # B better, tie, A better
    fig, axes = plt.subplots(1, len(rules), figsize=(3.8 * len(rules) + 1.2, 4.2), dpi=100, squeeze=False)
    for ax, (title, beta, eta0) in zip(axes[0], rules, strict=True):
        image = ax.imshow(
            decision_grid(hi, beta, eta0, sc_tie_break=config.sc_tie_break),
            origin="lower",
            cmap=cmap,
            vmin=-1.5,
            vmax=1.5,
        )
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("A votes (count)")
        ax.set_ylabel("B votes (count)")
        ticks = range(0, hi + 1, max(1, hi // 8))  # whole votes only
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
    bar = fig.colorbar(image, ax=axes[0].tolist(), ticks=[-1, 0, 1], shrink=0.8)
    bar.ax.set_yticklabels(["B better", "tie", "A better"])
    bar.set_label("answer")
    fig.suptitle(
        f"Answer for every split of n = {hi} votes into A, B and tie votes (ties = {hi} - A - B); Davidson with its "
        "mean fitted parameters over splits",
        fontsize=9,
    )
    return png(fig)


def figures(summary: pd.DataFrame) -> dict[str, bytes]:
    """Per judge, MAE and pairwise accuracy vs n for every method (the paper's Figure 2), one file per metric."""
    plt = pyplot()

    colour = colours(METHODS)  # a method keeps its colour in every panel and every judge's figure
    budgets = sorted(summary["n"].unique())
    out = {}
    metrics = {
        "mae": ("MAE", "lower is better"),
        "pa": ("pairwise accuracy", "higher is better"),
    }
    for judge, rows in summary.groupby("judge_id", sort=True):
        datasets = sorted(rows["dataset"].unique())
        width = max(3.4 * len(datasets) + 1.8, 8.0)  # room for the two-line title above a single panel
        for metric, (name, better) in metrics.items():
            fig, axes = plt.subplots(1, len(datasets), figsize=(width, 3.6), dpi=100, squeeze=False)
            for ax, dataset in zip(axes[0], datasets, strict=True):
                for method, g in rows[rows["dataset"] == dataset].groupby("method", sort=True):
                    g = g.sort_values("n")
                    ax.errorbar(
                        g["n"],
                        g[metric],
                        yerr=[g[metric] - g[f"{metric}_ci_low"], g[f"{metric}_ci_high"] - g[metric]],
                        marker="o",
                        ms=3,
                        capsize=2,
                        color=colour.get(method),
                        ls="--" if method == "constant_tie" else "-",
                        label=method,
                    )
                ax.set_title(dataset, fontsize=9)
                ax.set_xlabel("sampled verdicts per item n")
                ax.set_ylabel(name)
                plain_log_axis(ax, "x", budgets)
                ax.grid(alpha=0.3)
            handles, labels = axes[0][0].get_legend_handles_labels()
            fig.legend(handles, labels, fontsize=7, loc="center right")
            fig.suptitle(
                f"{name} vs n: judge {judge}\n(evaluation pairs, mean and 95% interval over splits; {better}; "
                "dashed: always 'tie')",
                fontsize=9,
            )
            fig.tight_layout(rect=(0, 0, 1 - 1.6 / width, 1))
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in judge)
            out[f"{metric}_vs_n_{safe}.png"] = png(fig)
    return out
