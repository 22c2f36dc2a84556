"""Figures of the ensemble study (PNG, matplotlib's Agg backend): accuracy vs k, cost-accuracy frontier,
dispersion vs error."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import colours, png, pyplot
from judgecal_dist.methods.repeated import ensemble as ens
from judgecal_dist.methods.repeated import routing as ens_routing

if TYPE_CHECKING:
    from judgecal_dist.studies.ensemble.config import Config, EnsembleInput

__all__ = ["figures"]


def _conditions(overall: pd.DataFrame) -> dict[str, Any]:
    """One colour per judge tier and prompt (``"mini / criteria"``), the same in every figure of the study."""
    keys = overall[["tier", "prompt_variant"]].drop_duplicates().sort_values(["tier", "prompt_variant"])
    return colours(f"{t} / {v}" for t, v in keys.itertuples(index=False))


def _accuracy_vs_k(overall: pd.DataFrame) -> bytes:
    plt = pyplot()
    colour = _conditions(overall)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for (tier, variant, dataset), rows in overall.groupby(["tier", "prompt_variant", "dataset"], sort=True):
        rows = rows.sort_values("k")
        c = colour[f"{tier} / {variant}"]
        ax.plot(rows["k"], 100 * rows["accuracy"], marker="o", ms=3, color=c, label=f"{tier} / {variant} ({dataset})")
        ax.fill_between(rows["k"], 100 * rows["accuracy_ci_low"], 100 * rows["accuracy_ci_high"], color=c, alpha=0.15)
    ax.set_xlabel("samples per response k (prefix of the collection)")
    ax.set_ylabel("accuracy % (95% bootstrap interval)")
    ax.set_title("Ensemble accuracy vs k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


def _pareto(config: Config, overall: pd.DataFrame, parts: pd.DataFrame) -> bytes:
    """Every routing threshold and every single-tier ensemble, and the Pareto frontier of all of them."""
    plt = pyplot()
    sweep = parts[parts["section"] == "escalation"]
    variants = sorted(sweep["prompt_variant"].unique())
    colour = colours(variants)
    fig, ax = plt.subplots(figsize=(6.8, 4.4), dpi=110)
    for (dataset, variant), rows in sweep.groupby(["dataset", "prompt_variant"], sort=True):
        c = colour[variant]
        denom = float(rows["cost_cheap"].iloc[0] + rows["cost_full"].iloc[0])
        points = [pd.DataFrame({"cost": rows["cost_ratio"], "accuracy": rows["accuracy"]})]
        ax.scatter(rows["cost_ratio"], 100 * rows["accuracy"], s=10, alpha=0.5, color=c, label=f"routing θ ({variant})")
        for tier, style in ((config.cheap_tier, "x--"), (config.reference_tier, "+:")):
            ref = overall[
                (overall["dataset"] == dataset) & (overall["tier"] == tier) & (overall["prompt_variant"] == variant)
            ]
            cost = ref["cost_per_example"] / denom
            points.append(pd.DataFrame({"cost": cost, "accuracy": ref["accuracy"]}))
            ax.plot(cost, 100 * ref["accuracy"], style, color=c, ms=5, lw=0.8, label=f"{tier}, k=1..K ({variant})")
        front = ens_routing.pareto_frontier(pd.concat(points, ignore_index=True).dropna())
        ax.step(
            front["cost"],
            100 * front["accuracy"],
            where="post",
            color=c,
            lw=2,
            alpha=0.8,
            label=f"Pareto frontier of all points ({variant})",
        )
    ax.set_xlabel("cost per example, relative to cheap k=K + full k=K")
    ax.set_ylabel("accuracy %")
    ax.set_title("Cost and accuracy: variance routing vs plain ensembles")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6.5)
    fig.tight_layout()
    return png(fig)


def _variance_vs_error(data: EnsembleInput, colour: dict[str, Any], n_bins: int = 8) -> bytes:
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
            key = f"{tier} / {c.prompt_variant}"
            ax.plot(x, y, marker="o", ms=3, color=colour.get(key), label=f"{key} ({c.dataset})")
    ax.set_xlabel("example dispersion: mean over responses of the sample std (k=K)")
    ax.set_ylabel("error rate % at k=K")
    ax.set_title("Dispersion vs error (quantile bins)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


def figures(config: Config, overall: pd.DataFrame, parts: pd.DataFrame, data: EnsembleInput) -> dict[str, bytes]:
    out = {
        "accuracy_vs_k.png": _accuracy_vs_k(overall),
        "variance_vs_error.png": _variance_vs_error(data, _conditions(overall)),
    }
    if "section" in parts and (parts["section"] == "escalation").any():
        out["pareto_frontier.png"] = _pareto(config, overall, parts)
    return out
