"""Figures of the ensemble study (PNG, matplotlib's Agg backend): accuracy vs k, cost-accuracy frontier,
dispersion vs error."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import png, pyplot
from judgecal_dist.methods.repeated import ensemble as ens

if TYPE_CHECKING:
    from judgecal_dist.studies.ensemble.config import Config, EnsembleInput

__all__ = ["figures"]


def _accuracy_vs_k(overall: pd.DataFrame) -> bytes:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for (tier, variant, dataset), rows in overall.groupby(["tier", "prompt_variant", "dataset"], sort=True):
        rows = rows.sort_values("k")
        line = ax.plot(rows["k"], 100 * rows["accuracy"], marker="o", ms=3, label=f"{tier} / {variant} ({dataset})")
        ax.fill_between(
            rows["k"],
            100 * rows["accuracy_ci_low"],
            100 * rows["accuracy_ci_high"],
            color=line[0].get_color(),
            alpha=0.15,
        )
    ax.set_xlabel("samples per response k (prefix of the collection)")
    ax.set_ylabel("accuracy % (95% bootstrap CI)")
    ax.set_title("Ensemble accuracy vs k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


def _pareto(config: Config, overall: pd.DataFrame, parts: pd.DataFrame) -> bytes:
    plt = pyplot()
    sweep = parts[parts["section"] == "escalation"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for (dataset, variant), rows in sweep.groupby(["dataset", "prompt_variant"], sort=True):
        denom = float(rows["cost_cheap"].iloc[0] + rows["cost_full"].iloc[0])
        ax.scatter(rows["cost_ratio"], 100 * rows["accuracy"], s=12, alpha=0.5, label=f"routing θ ({variant})")
        front = rows[rows["on_frontier"].astype(bool)].sort_values("cost")
        ax.step(front["cost_ratio"], 100 * front["accuracy"], where="post", label=f"Pareto frontier ({variant})")
        for tier in (config.cheap_tier, config.reference_tier):
            ref = overall[
                (overall["dataset"] == dataset) & (overall["tier"] == tier) & (overall["prompt_variant"] == variant)
            ]
            ax.plot(
                ref["cost_per_example"] / denom,
                100 * ref["accuracy"],
                marker="x",
                ms=4,
                lw=0.8,
                label=f"{tier} k=1..K ({variant})",
            )
    ax.set_xlabel("cost / (cheap k=K + full k=K)")
    ax.set_ylabel("accuracy %")
    ax.set_title("Cost-accuracy: hard variance routing and ensembles")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


def _variance_vs_error(data: EnsembleInput, n_bins: int = 8) -> bytes:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for c in data.collections:
        for tier, s in sorted(c.tiers.items()):
            scores = s.scores[s.present]
            out = ens.winner_outcome(ens.prefix_means(scores, s.n_samples), c.chosen[s.present])
            sigma = ens.dispersion(scores).mean(axis=1)[out.evaluable]
            error = ~out.correct[out.evaluable]
            edges = np.unique(np.quantile(sigma, np.linspace(0, 1, n_bins + 1)))
            idx = np.clip(np.searchsorted(edges, sigma, side="right") - 1, 0, len(edges) - 2)
            x = [sigma[idx == b].mean() for b in range(len(edges) - 1) if (idx == b).any()]
            y = [100 * error[idx == b].mean() for b in range(len(edges) - 1) if (idx == b).any()]
            ax.plot(x, y, marker="o", ms=3, label=f"{tier} / {c.prompt_variant} ({c.dataset})")
    ax.set_xlabel("example dispersion: mean over responses of the sample std (k=K)")
    ax.set_ylabel("error rate % at k=K")
    ax.set_title("Dispersion vs error (quantile bins)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


def figures(config: Config, overall: pd.DataFrame, parts: pd.DataFrame, data: EnsembleInput) -> dict[str, bytes]:
    out = {"accuracy_vs_k.png": _accuracy_vs_k(overall), "variance_vs_error.png": _variance_vs_error(data)}
    if "section" in parts and (parts["section"] == "escalation").any():
        out["pareto_frontier.png"] = _pareto(config, overall, parts)
    return out
