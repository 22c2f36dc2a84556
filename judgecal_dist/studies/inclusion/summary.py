"""Means over splits of the inclusion study's replicate rows, with corrected resampled t intervals.

:func:`summary_table` is the headline grid (aggregator x calibrator x panel) with each curated panel's paired
ΔNLL beside it; :func:`side_tables` the further tables a run reports (conformal sets, agreement terciles,
searched panels, Platt with item features, the item-level bootstrap, controls, scope arms); :func:`saturation`
the P2 chain. Every split is a random half of the same items, so intervals over splits are Nadeau-Bengio corrected.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.io.records import json_records
from judgecal_dist.methods.selection.diagnostics import flag_saturation
from judgecal_dist.stats.inference import summarise_over_splits
from judgecal_dist.studies.inclusion.config import Config
from judgecal_dist.studies.inclusion.model import DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR, summarise_conformal
from judgecal_dist.studies.inclusion.paired import item_bootstrap

__all__ = ["METRICS", "SELECTIVE", "saturation", "side_tables", "summarise_kind", "summary_table"]

METRICS = ("nll", "brier", "ece", "accuracy")
#: Spec §4's further metrics, summarised with intervals beside the headline ones.
SELECTIVE = ("ece_positive", "auac", "coverage_at_tau")
#: Every split is a random half of the same items: intervals over splits are Nadeau-Bengio corrected t intervals.
SPLIT_SIZES = ("n_eval", "n_cal")
_BY = ["aggregator", "calibrator", "panel"]


def _grid(config: Config, metrics: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Every metric's mean and interval per pipeline and panel; accuracy at tau over the splits that keep items."""
    names = (*METRICS, *SELECTIVE, "panel_size")
    summary = summarise_over_splits(
        metrics, by=_BY, metrics=list(names), confidence=config.ci_level, rng=rng, split_sizes=SPLIT_SIZES
    )
    summary = summary.rename(columns={f"{m}_mean": m for m in names} | {"n_splits": "replicates"})
    # Accuracy at tau is undefined in a split that keeps no item: mean over the splits that keep some.
    kept = metrics.groupby(_BY, as_index=False)["accuracy_at_tau"].mean()
    summary = summary.merge(kept, on=_BY, how="left")
    return summary.drop(columns=["panel_size_ci_low", "panel_size_ci_high"])


def _with_paired(
    summary: pd.DataFrame, curated: pd.DataFrame, config: Config, rng: np.random.Generator
) -> pd.DataFrame:
    """``summary`` with each curated panel's ΔNLL against all judges and its per-split tests described."""
    paired = summarise_over_splits(
        curated,
        by=_BY,
        metrics=["delta_nll"],
        confidence=config.ci_level,
        rng=rng,
        split_sizes=SPLIT_SIZES,
        tested=["delta_nll"],
    )
    paired = paired.rename(columns={"delta_nll_mean": "delta_nll"}).drop(columns="n_splits")
    # The per-split permutation test is right within a split; its median p over splits is no p-value across
    # splits, so the report gives it as a description (median, and the share of splits with p < 0.05).
    per_split = curated.assign(perm_share_p05=(curated["perm_p"] < 0.05).astype(np.float64))
    medians = per_split.groupby(_BY, as_index=False)[["perm_stat", "perm_p", "tost_p"]].median()
    medians = medians.merge(
        curated.groupby(_BY, as_index=False)["tost_equivalent"]
        .mean()
        .rename(columns={"tost_equivalent": "tost_equivalent_share"}),
        on=_BY,
    )
    shares = per_split.groupby(_BY, as_index=False)["perm_share_p05"].mean()
    summary = summary.merge(paired, on=_BY, how="left").merge(medians, on=_BY, how="left")
    return summary.merge(shares, on=_BY, how="left")


def summary_table(config: Config, metrics: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The headline table: one row per (aggregator, calibrator, panel) in the config's order."""
    summary = _grid(config, metrics, rng)
    curated = metrics[metrics["panel"] != "all"]
    if not curated.empty:
        summary = _with_paired(summary, curated, config, rng)
    order = {name: i for i, name in enumerate((*config.aggregators, *config.calibrators, *config.panels))}
    return summary.sort_values(_BY, key=lambda col: col.map(order), kind="stable").reset_index(drop=True)


def summarise_kind(
    parts: pd.DataFrame, kind: str, by: list[str], stats: list[str], config: Config, rng: np.random.Generator
) -> pd.DataFrame:
    """Means over splits with corrected t intervals of the ``kind`` rows (empty frame when there are none)."""
    rows = parts[parts["kind"] == kind] if "kind" in parts else parts.iloc[:0]
    if rows.empty:
        return pd.DataFrame()
    out = summarise_over_splits(
        rows, by=by, metrics=stats, confidence=config.ci_level, rng=rng, split_sizes=SPLIT_SIZES
    )
    return out.rename(columns={f"{m}_mean": m for m in stats} | {"n_splits": "replicates"})


def _platt_features(parts: pd.DataFrame, config: Config, rng: np.random.Generator) -> pd.DataFrame:
    """Platt alone and with item features, with the mean feature coefficients over splits."""
    featured = summarise_kind(parts, "platt_features", ["aggregator", "calibrator"], ["nll"], config, rng)
    if not featured.empty:  # the mean feature coefficients over splits (absent on the plain Platt rows)
        gammas = [f"gamma_{f}" for f in config.platt_item_features]
        mean = parts[parts["kind"] == "platt_features"].groupby(["aggregator", "calibrator"])[gammas].mean()
        featured = featured.merge(mean.reset_index(), on=["aggregator", "calibrator"], how="left")
    return featured


def side_tables(config: Config, parts: pd.DataFrame, panel: Panel, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """The further tables, by their ``summary.json`` names (``scope``: the scope arms' rows as they are)."""
    search = ["panel_size", "inner_nll", "nested_nll", "nested_nll_all", "nested_delta", "evaluations"]
    tables = {
        "conformal": summarise_conformal(parts, config, rng),
        "terciles": summarise_kind(
            parts, "tercile", ["aggregator", "calibrator", "stratum"], ["nll", "stratum_items"], config, rng
        ),
        "search": summarise_kind(parts, "search", ["panel"], search, config, rng),
        "platt_item_features": _platt_features(parts, config, rng),
        "item_bootstrap": item_bootstrap(parts, config, panel),
    }
    tables["controls"] = summarise_kind(parts, "control", ["control", "variant", "calibrator"], ["nll"], config, rng)
    tables["scope"] = parts[parts["kind"] == "scope_arm"] if "kind" in parts else parts.iloc[:0]
    return tables


def saturation(summary: pd.DataFrame) -> list[dict] | None:
    """P2 (spec §3.8): the default pipeline's evaluation NLL along the nested chain top-k1 < top-k2 < ... < all.

    Top-k panels of one split are nested (one ranking), so the chain is the one the diagnostic asks for; the NLLs
    are the evaluation-part means over splits, never in-sample. None when fewer than two panels are in the chain.
    """
    rows = summary[
        (summary["aggregator"] == DEFAULT_AGGREGATOR)
        & (summary["calibrator"] == DEFAULT_CALIBRATOR)
        & summary["panel"].map(lambda p: p == "all" or (p.startswith("top") and p[3:].isdigit()))
    ].sort_values("panel_size")
    sizes = rows["panel_size"].round().astype(np.int64).to_numpy()
    if len(rows) < 2 or (np.diff(sizes) <= 0).any():
        return None
    steps = flag_saturation(sizes, rows["nll"].to_numpy())
    return json_records(steps.assign(panel_from=rows["panel"].to_numpy()[:-1], panel_to=rows["panel"].to_numpy()[1:]))
