"""Paired comparisons of the inclusion study on the same evaluation items (spec 000 §5.5).

Per split (:func:`attach_paired_tests`): each curated panel's item-level NLL differences against the full panel,
with the paired permutation test and TOST. Across splits (:func:`item_bootstrap`): the item-level paired bootstrap
of the default pipeline against each other aggregator, its item groups redrawn once per resample and shared by all
splits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.splits import calibration_mask
from judgecal_dist.stats.equivalence import TOSTResult, tost, tost_paired
from judgecal_dist.stats.permutation import paired_permutation_test_many
from judgecal_dist.stats.resampling import paired_bootstrap_ci
from judgecal_dist.studies.inclusion.config import Config, Replicate
from judgecal_dist.studies.inclusion.model import DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR

__all__ = ["attach_paired_tests", "item_bootstrap", "item_pair_rows"]


def attach_paired_tests(table: pd.DataFrame, losses: dict, rep: Replicate) -> None:
    """delta_nll = mean(loss_panel - loss_all) and the paired permutation test (spec §5.5(a)) per curated panel."""
    keys = [k for k in losses if k[2] != "all"]
    if not keys:
        return
    d = np.stack([losses[k] - losses[k[0], k[1], "all"] for k in keys])
    perm = paired_permutation_test_many(d, n_resamples=rep.permutation_resamples, rng=np.random.default_rng(rep.seed))
    index = {k: i for i, k in enumerate(keys)}
    rows = table["kind"].eq("metrics") & table["panel"].ne("all")
    order = [
        index[a, c, p] for a, c, p in table.loc[rows, ["aggregator", "calibrator", "panel"]].itertuples(index=False)
    ]
    table.loc[rows, "delta_nll"] = d.mean(axis=1)[order]
    # Item-level TOST (H.9, H.13): is the panel's NLL within +-margin of the full panel's on these items?
    tests = [tost_or_none(row, rep.tost_margin) for row in d]
    table.loc[rows, "tost_p"] = np.array([np.nan if r is None else r.pvalue for r in tests])[order]
    table.loc[rows, "tost_equivalent"] = np.array([r is not None and r.equivalent for r in tests], dtype=float)[order]
    table.loc[rows, "perm_stat"] = perm.statistic[order]
    table.loc[rows, "perm_p"] = perm.pvalue[order]


def item_pair_rows(losses: dict, rep: Replicate) -> list[dict]:
    """Per-item loss differences, default pipeline minus each other aggregator with the default calibrator on all
    judges, for the item-level paired bootstrap of spec §5.5(c) (H.9) in ``summarise``."""
    ref = (DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR, "all")
    if not rep.item_bootstrap_resamples or ref not in losses:
        return []
    return [
        {
            "kind": "item_pairs",
            "aggregator": agg,
            "calibrator": DEFAULT_CALIBRATOR,
            "panel": "all",
            "d": losses[ref] - loss,
        }
        for (agg, cal, panel_name), loss in losses.items()
        if panel_name == "all" and cal == DEFAULT_CALIBRATOR and agg != DEFAULT_AGGREGATOR
    ]


def item_bootstrap(parts: pd.DataFrame, config: Config, panel: Panel) -> pd.DataFrame:
    """Item-level paired bootstrap CI (splits held fixed) and TOST on its SE, per compared aggregator.

    Every split is a random half of the same items, so the groups of ``panel`` (the split unit) are resampled once
    per bootstrap draw and shared by all splits; resampling each split on its own would narrow the interval about
    as one over the square root of the number of splits (on LLMBar's 100 splits, 5-8 times), whatever the data.
    """
    rows = parts[parts["kind"] == "item_pairs"] if "kind" in parts else parts.iloc[:0]
    out = []
    for agg, group in rows.groupby("aggregator", sort=False):
        group = group.sort_values("seed")
        ds = [np.asarray(d, dtype=np.float64) for d in group["d"]]
        in_cal = calibration_mask(panel.group_keys, [int(s) for s in group["seed"]], config.calib_fraction)
        ci = paired_bootstrap_ci(
            ds,
            confidence=config.ci_level,
            n_resamples=config.item_bootstrap_resamples,
            rng=np.random.default_rng(config.seed),
            units=[panel.group_keys[~m] for m in in_cal],
        )
        test = tost(ci.estimate, ci.standard_error, margin=config.tost_margin) if ci.standard_error > 0 else None
        out.append(
            {
                "aggregator": agg,
                "calibrator": DEFAULT_CALIBRATOR,
                "delta_nll": ci.estimate,
                "ci_low": ci.low,
                "ci_high": ci.high,
                "se": ci.standard_error,
                "tost_p": np.nan if test is None else test.pvalue,
                "tost_equivalent": test is not None and test.equivalent,
                "splits": len(ds),
            }
        )
    return pd.DataFrame(out)


def tost_or_none(d: np.ndarray, margin: float) -> TOSTResult | None:
    """TOST of one split's item differences; None when they are all equal (identical predictions: no SE)."""
    return None if np.ptp(d) == 0.0 else tost_paired(d, margin=margin)
