"""The continuous report's later sections: crossover budgets, baselines, predictive intervals, saturation, latency."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from judgecal_dist.studies.continuous.summary import (
    CONVERGED,
    ORDER,
    crossover,
    flow_training,
    paper_tanh_leftover,
    saturation,
)

if TYPE_CHECKING:
    from judgecal_dist.studies.continuous.config import Config, ContinuousInput

__all__ = ["crossovers", "extra_sections", "markdown"]


def markdown(table: pd.DataFrame, cols: list[str]) -> str:
    """``table[cols]`` as a Markdown table, floats to three decimals."""
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    body = "".join(
        "| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |\n"
        for row in table[cols].itertuples(index=False)
    )
    return head + body


def crossovers(config: Config, parts: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """MAE and KL crossovers of every flow variant present against linear_hb."""
    flows = [f for f in ("flow", "flow_per_rubric") if (parts["corrector"] == f).any()]
    return {m: [c for f in flows for c in crossover(config, parts, m, f)] for m in ("mae", "kl")}


def _crossover_table(crosses: dict[str, list[dict[str, Any]]]) -> pd.DataFrame:
    keys = ["judge", "rubric", "flow"]
    frames = [
        pd.DataFrame(rows)[[*keys, "budget_or_none"]].rename(columns={"budget_or_none": f"{m}_crossover"})
        for m, rows in crosses.items()
        if rows
    ]
    if not frames:
        return pd.DataFrame(columns=keys)
    out = frames[0]
    for f in frames[1:]:
        out = out.merge(f, on=keys, how="outer")
    for col in out.columns.difference(keys):  # an outer merge turns the budgets into floats; show whole anchors
        out[col] = out[col].map(lambda b: "not reached" if pd.isna(b) else str(int(b)))
    return out.sort_values(keys).reset_index(drop=True)


def _crossover_section(config: Config, parts: pd.DataFrame) -> list[str]:
    cross_table = _crossover_table(crossovers(config, parts))
    return [
        "## Crossover budgets: MAE and KL",
        "Smallest anchor budget from which the flow's error is below the linear corrector's with the seed interval "
        "below zero at that and every larger budget (per rubric).",
        "",
        markdown(cross_table, list(cross_table.columns)) if len(cross_table) else "No flow and linear rows.",
    ]


def _baselines_section(table: pd.DataFrame) -> list[str]:
    base = table[table["corrector"].isin(["raw", "ot", "ot_oracle", "constant"])]
    base = base.groupby(["judge", "corrector", "budget"])[["mean_error", "mae", "kl", "w1"]].mean().reset_index()
    return [
        "## Baselines",
        "`ot_oracle` is the quantile map fitted on the test set's own scores and human scores (it sees the test "
        "labels: the floor of the distribution metrics, never a usable corrector); `constant` predicts the anchors' "
        "mean human score (its KL is undefined: a constant has no density).",
        "",
        markdown(base, ["judge", "corrector", "budget", "mean_error", "mae", "kl", "w1"]),
        "",
    ]


def _interval_section(config: Config, parts: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    level = int(round(config.interval_level * 100))
    iv = table[table["coverage"].notna()] if "coverage" in table else table.iloc[:0]
    iv = iv.groupby(["judge", "corrector", "budget"])[["coverage", "interval_width"]].mean().reset_index()
    lines = [
        f"## Predictive intervals ({level}% nominal)",
        "linear_hb: the posterior-predictive interval (parameter uncertainty and residual noise); flows: MC-dropout "
        f"mean +- {level}% normal quantile x MC s.d. (parameter uncertainty only, so far below nominal). Coverage = "
        "share of test items whose human score falls inside; width in score points (rubric means).",
        "",
        markdown(iv, ["judge", "corrector", "budget", "coverage", "interval_width"]) if len(iv) else "No intervals.",
    ]
    flows = parts[parts["corrector"].str.startswith("flow")]
    if len(flows) and "sd_error_spearman" in flows:
        rho = flows.groupby("corrector")["sd_error_spearman"].mean()
        lines.append(
            "Spearman correlation of the flow's MC s.d. with its absolute error (mean over rubrics and seeds): "
            + ", ".join(f"{k} {v:.3f}" for k, v in rho.items())
            + "."
        )
    return lines


def _saturation_section(config: Config, data: ContinuousInput) -> list[str]:
    sat = saturation(config, data)
    tanh = paper_tanh_leftover()
    return [
        "",
        "## Why the linear corrector saturates",
        "In-sample on all items of the first seed: MAE of the least-squares line vs the mean human score at each judge "
        "score level (quantile bins for the synthetic judge). The difference is the headroom no linear corrector can "
        "take and the most a flexible one can gain at this noise. The paper's synthetic case, the leftover of "
        f"0.4 tanh(0.9(j-3)) after its linear projection with j uniform on 1-5: range {tanh['range']:.3f}, mean "
        f"|.| {tanh['mean_abs']:.3f} (the paper's flow gain at 1500 anchors: 0.039 MAE).",
        "",
        markdown(sat, ["judge", "rubric", "items", "linear_mae", "conditional_mean_mae", "headroom_mae"]),
    ]


def _training_section(config: Config, parts: pd.DataFrame) -> list[str]:
    """How far the flows trained: epochs run, final loss and the last loss window's relative change per fit."""
    train = flow_training(config, parts)
    if train.empty:
        return []
    limit = config.flow_tol or CONVERGED
    rule = (
        f"training stops once the mean loss over {config.flow_window} epochs moves by less than {limit:g} of the "
        f"window before (cap {config.flow_epochs} epochs)"
        if config.flow_tol
        else f"a fixed {config.flow_epochs} epochs; a fit counts as trained when its last {config.flow_window}-epoch "
        f"mean loss moved by less than {limit:g}"
    )
    fits, trained = int(train["fits"].sum()), int(train["trained"].sum())
    return [
        "## Flow training",
        f"Drift MLP with {config.flow_hidden} hidden units, Adam lr {config.flow_lr:g}; {rule}. Trained: {trained} of "
        f"{fits} fits; largest final relative change {train['max_change'].max():.4f}"
        + ("" if trained == fits else " - read the flow's findings as a lower bound")
        + ". Loss = the training MSE (score points squared on the 1-5 scale) of one MC-dropout solve.",
        "",
        "![flow training loss](figures/flow_training.png)",
        "",
        markdown(train, list(train.columns)),
        "",
    ]


def _latency_section(parts: pd.DataFrame) -> list[str]:
    if "latency_ms_per_item" not in parts:
        return []
    lat = parts.groupby("corrector")["latency_ms_per_item"].median()
    fit = parts.groupby("corrector")["fit_seconds"].median() if "fit_seconds" in parts else pd.Series(dtype=float)
    flows = parts[parts["corrector"].str.startswith("flow")]
    return [
        "## Per-item latency",
        "Median wall milliseconds to correct one test item (prediction only; flows: all MC-dropout passes on "
        f"{', '.join(sorted(flows['device'].dropna().unique())) or 'cpu'}), and flows' fit seconds per seed. "
        "Measured on whatever machine ran the replicates, under its load: a guide, not a benchmark.",
        "",
        "| corrector | ms per item | fit s per seed |\n|---|---|---|",
        *[
            f"| {k} | {v:.4f} | {fit.get(k, float('nan')):.2f} |"
            for k, v in lat.sort_index(key=lambda i: i.map(ORDER)).items()
        ],
        "",
    ]


def extra_sections(config: Config, parts: pd.DataFrame, table: pd.DataFrame, data: ContinuousInput) -> list[str]:
    """Crossovers, baselines, intervals, saturation, flow training and latency sections of the report."""
    return [
        *_crossover_section(config, parts),
        *_baselines_section(table),
        *_interval_section(config, parts, table),
        *_saturation_section(config, data),
        *_training_section(config, parts),
        *_latency_section(parts),
    ]
