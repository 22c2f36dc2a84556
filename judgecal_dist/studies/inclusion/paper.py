"""The inclusion study's paper-and-here rows: the paper's headline claims beside this run's numbers."""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.report_kit import (
    Claim,
    Here,
    PaperClaims,
    interval,
    number,
    row_interval,
)

__all__ = ["PAPER", "paper_here", "interval_reading"]


#: The inclusion study's headline claims of its paper.
PAPER = PaperClaims(
    "Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges",
    (
        Claim(
            "After beta calibration all judges beat the top 3 and the top 5 (one-coin, ΔNLL = top k minus all)",
            "all judges better, p < 0.001 on all four datasets",
            "top3_top5",
            "procedure: the paper's p-values are per-split permutation tests over items (median over 100 splits), "
            "which take one split's items as independent; across splits that share the items (corrected resampled "
            "t, used here) the same mean difference is not significant",
        ),
        Claim(
            "After beta the top 10 is level with all judges (LLMBar: slightly ahead, not significantly)",
            "ΔNLL slightly below 0, interval contains 0",
            "top10",
            "pool: this panel is not the paper's (on LLMBar, the shared release has its native evaluators only, no "
            "API or GPU judges)",
        ),
        Claim(
            "One-coin + beta beats majority vote + beta (item bootstrap of the paired difference)",
            "one-coin better on all four datasets (interval below 0)",
            "vs_majority",
            "pool: this panel is not the paper's (on LLMBar: native evaluators only)",
        ),
        Claim(
            "One-coin + beta and Dawid-Skene + beta are level (item bootstrap of the paired difference)",
            "level on all four datasets (interval contains 0)",
            "vs_dawid_skene",
            "pool: Dawid-Skene learns its classes without labels, and on this panel they can follow the majority "
            "rather than the label (see its accuracy in the item bootstrap section)",
        ),
        Claim(
            "2PL IRT: the judge share of the logit variance dominates the item share",
            "judge share dominant on all four datasets (values lost)",
            "irt",
            "pool: the shared LLMBar evaluators are a few backbones under many prompting strategies on adversarial "
            "items, so which item it is explains more than which judge",
        ),
        Claim(
            "RewardBench 2, beta-calibrated one-coin: all judges NLL 0.006 against 0.013 for the top 5",
            "0.006 vs 0.013",
            None,
            "the paper's RewardBench 2 reward-model panel is not in the shared data",
        ),
        Claim(
            "Family de-duplication on JudgeBench (38 judges in 9 families): all judges better than one per family",
            "significant (numbers lost)",
            None,
            "the JudgeBench panel is not in the shared data",
        ),
        Claim(
            "Null results on six preference datasets (exogenous signals add nothing, equivalence tests)",
            "equivalent to 0 on four, worse on two",
            None,
            "those datasets and their judges are not in the shared data",
        ),
    ),
)


def paper_here(summary: pd.DataFrame, item_pairs: pd.DataFrame | None, diagnostics: dict[str, Any]) -> dict[str, Here]:
    """Our measurements for :data:`PAPER` (absent arms are left out: the section says they were not measured)."""
    out: dict[str, Here] = {}
    beta = summary[(summary["aggregator"] == "one_coin") & (summary["calibrator"] == "beta")].set_index("panel")
    if "delta_nll" in beta:
        shown = [k for k in ("top3", "top5") if k in beta.index]
        if shown:
            out["top3_top5"] = Here(
                "; ".join(f"{k} {row_interval(beta.loc[k], 'delta_nll', '+.4f')}" for k in shown),
                agrees=bool(all(beta.loc[k, "delta_nll_ci_low"] > 0 for k in shown)),
            )
        if "top10" in beta.index:
            r = beta.loc["top10"]
            out["top10"] = Here(
                f"top10 {row_interval(r, 'delta_nll', '+.4f')}",
                agrees=bool(r["delta_nll_ci_low"] <= 0 <= r["delta_nll_ci_high"]),
            )
    pairs = pd.DataFrame() if item_pairs is None or item_pairs.empty else item_pairs.set_index("aggregator")
    for agg, key, wanted in (("majority", "vs_majority", "below"), ("dawid_skene", "vs_dawid_skene", "contains")):
        if agg in pairs.index:
            r = pairs.loc[agg]
            reading = interval_reading(r["ci_low"], r["ci_high"])
            agrees = r["ci_high"] < 0 if wanted == "below" else r["ci_low"] <= 0 <= r["ci_high"]
            out[key] = Here(
                f"{interval(r['delta_nll'], r['ci_low'], r['ci_high'], '+.4f')}: {reading}", agrees=bool(agrees)
            )
    by_config = diagnostics.get("irt_configuration")
    shares = by_config["variance_shares"] if by_config else diagnostics.get("irt_variance_shares") or {}
    if {"judge", "item"} <= set(shares):
        grain = "configurations" if by_config else "judges"
        out["irt"] = Here(
            f"judge share {number(shares['judge'], '.3f')}, item share {number(shares['item'], '.3f')} (over {grain})",
            agrees=bool(shares["judge"] > shares["item"]),
        )
    return out


def interval_reading(low: float, high: float) -> str:
    """How an interval of a difference against one-coin reads: below 0 favours one-coin."""
    if high < 0:
        return "excludes 0 in favour of one-coin"
    return "contains 0" if low <= 0 <= high else "excludes 0 against one-coin"
