"""Summary and report of the itc study: the means, clusters and findings a run reports, and ``report.md``.

The inference (means over splits, paired tests, top clusters) is in :mod:`~judgecal_dist.studies.itc.inference`,
the vote tables in :mod:`~judgecal_dist.studies.itc.votes`, the figures in
:mod:`~judgecal_dist.studies.itc.figures` and the exported model in :mod:`~judgecal_dist.studies.itc.model`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.io.records import json_records
from judgecal_dist.models.davidson import FORMAT
from judgecal_dist.studies.base import StudyResult, interval_note
from judgecal_dist.studies.itc.config import DAVIDSON_METHODS
from judgecal_dist.studies.itc.figures import decision_figure, figures
from judgecal_dist.studies.itc.inference import KEYS, method_summary, top_clusters
from judgecal_dist.studies.itc.model import export_model, exported_method
from judgecal_dist.studies.itc.recommend import DEGENERATE_TIE_RATE, recommend, starred
from judgecal_dist.studies.itc.votes import vote_section, vote_tables
from judgecal_dist.studies.recommendation import exported_model, words
from judgecal_dist.studies.report_kit import Claim, Here, PaperClaims, markdown_table, number, paper_and_here, section

if TYPE_CHECKING:
    from judgecal_dist.studies.itc.config import Config
    from judgecal_dist.studies.itc.data import ItcInput

__all__ = ["PAPER", "summarise"]

_POOL = (
    "pool: the paper's judge is a thinking model giving pairwise verdicts; here votes come from comparing two "
    "independently scored responses, sample by sample"
)
#: The itc study's headline claims of its paper.
PAPER = PaperClaims(
    "Distribution-Calibrated Inference Time Compute for Thinking LLM-as-a-Judge",
    (
        Claim(
            "The calibrated Davidson rule has lower MAE than self-consistency once there are 4 or more votes",
            "lower on every RewardBench 2 task at 4 and 12 votes (e.g. Focus 0.332 vs 0.394 at 4)",
            "below_sc",
            _POOL,
        ),
        Claim(
            "More votes do not help self-consistency, while the Davidson rule holds or improves",
            "self-consistency 0.394 -> 0.403, Davidson 0.332 -> 0.303 (Focus, 4 -> 12 votes)",
            "sc_flat",
            _POOL,
        ),
        Claim(
            "Results on the WMT23 translation pairs and the leave-one-out comparison with human raters",
            "Davidson best among the aggregators; calibrated judge level with single raters",
            None,
            "the WMT23 human ratings and the paper's thinking-model votes are not in the shared data",
        ),
        Claim(
            "Tie-vote rates by model and prompt",
            "12.4-37.6%",
            None,
            "the paper's votes are not in the shared data (the rates of the judges here are in the vote table)",
        ),
    ),
)


def _paper_here(findings: dict[str, Any]) -> dict[str, Here]:
    out = {}
    below = findings.get("davidson_below_sc_for_n_ge_4")
    if below:
        per = "; ".join(f"{n} votes: {v['davidson_below_sc']} of {v['cells']} cells" for n, v in below["per_n"].items())
        out["below_sc"] = Here(f"Davidson lower in {per}", agrees=bool(below["holds"]))
    flat = findings.get("sc_flat_or_worse_as_n_grows")
    if flat:
        lo, hi = flat["n"]
        out["sc_flat"] = Here(
            f"{lo} -> {hi} votes: self-consistency no better by 0.01 in {flat['cells_sc_not_better_by_0.01']} of "
            f"{flat['cells']} cells, Davidson within 0.01 or better in {flat['davidson_within_0.01_or_better']}",
            agrees=bool(flat["holds"]),
        )
    return out


def _davidson_below_sc(mae: pd.DataFrame, budgets: list[Any]) -> dict[str, Any]:
    gap = mae["sc"] - mae["davidson"]
    per_n = {
        int(n): {
            "cells": int((gap.xs(n, level="n") > -np.inf).sum()),
            "davidson_below_sc": int((gap.xs(n, level="n") > 0).sum()),
        }
        for n in budgets
    }
    big = [n for n in per_n if n >= 4]
    return {
        "per_n": per_n,
        "holds": bool(big) and all(per_n[n]["davidson_below_sc"] == per_n[n]["cells"] for n in big),
    }


def _sc_flat(mae: pd.DataFrame, lo: Any, hi: Any) -> dict[str, Any]:
    sc_lo, sc_hi = mae["sc"].xs(lo, level="n"), mae["sc"].xs(hi, level="n")
    d_lo, d_hi = mae["davidson"].xs(lo, level="n"), mae["davidson"].xs(hi, level="n")
    return {
        "n": [int(lo), int(hi)],
        "sc_change": {f"{d}|{j}": float(v) for (d, j), v in (sc_hi - sc_lo).items()},
        "cells_sc_not_better_by_0.01": int((sc_hi - sc_lo >= -0.01).sum()),
        "cells": len(sc_lo),
        "davidson_within_0.01_or_better": int((d_hi - d_lo <= 0.01).sum()),
        "holds": bool((sc_hi - sc_lo >= -0.01).all() and (d_hi - d_lo <= 0.01).all()),
    }


def _weakest_gains(mae: pd.DataFrame, hi: Any) -> dict[str, Any]:
    gap_hi = (mae["sc"] - mae["davidson"]).xs(hi, level="n")
    by_judge = gap_hi.groupby(level="judge_id").agg(["mean", "min", "max"])
    weakest = mae["sc"].xs(hi, level="n").groupby(level="judge_id").mean().idxmax()
    return {
        "n": int(hi),
        "weakest_judge (highest SC MAE)": weakest,
        "gap_sc_minus_davidson": {j: {k: float(v) for k, v in r.items()} for j, r in by_judge.iterrows()},
        "holds": bool(by_judge["mean"].idxmax() == weakest),
    }


def _tie_collapse(summary: pd.DataFrame, pif: list[str], hi: Any) -> dict[str, Any]:
    # "Predicts 0 for (almost) every pair, MAE ~ PA ~ 0.50" (spec 003 §7.8), read as: mean predicted-tie rate
    # >= 0.9 and MAE and PA within 0.02 of 0.5, for every judge at the largest budget.
    cells = summary[(summary["dataset"].isin(pif)) & (summary["method"] == "davidson") & (summary["n"] == hi)]
    return {
        "n": int(hi),
        "pred_tie_rate": dict(zip(cells["judge_id"], cells["pred_tie_rate"].round(4), strict=True)),
        "mae": dict(zip(cells["judge_id"], cells["mae"].round(4), strict=True)),
        "pa": dict(zip(cells["judge_id"], cells["pa"].round(4), strict=True)),
        "holds": bool(
            (cells["pred_tie_rate"] >= 0.9).all()
            and ((cells["mae"] - 0.5).abs() <= 0.02).all()
            and ((cells["pa"] - 0.5).abs() <= 0.02).all()
        ),
    }


def _findings(summary: pd.DataFrame) -> dict[str, Any]:
    """The spec's expected findings (spec 003 §7.8), each with the cells it was checked on and whether it holds."""
    by_cell = summary.set_index([*KEYS, "method"])
    if not {"davidson", "sc"} <= set(summary["method"]):
        return {"note": "davidson and sc are both needed"}
    mae = by_cell["mae"].unstack("method")
    budgets = sorted(summary["n"].unique())
    lo, hi = min(budgets), max(budgets)
    out: dict[str, Any] = {
        "davidson_below_sc_for_n_ge_4": _davidson_below_sc(mae, budgets),
        "sc_flat_or_worse_as_n_grows": _sc_flat(mae, lo, hi),
        "weakest_judge_gains_most": _weakest_gains(mae, hi),
    }
    pif = [d for d in summary["dataset"].unique() if "Precise IF" in d]
    if pif:
        out["tie_collapse_precise_if"] = _tie_collapse(summary, pif, hi)
    if "beta" in summary:
        davidson = by_cell.xs("davidson", level="method")
        beta = davidson["beta"].unstack("n")
        out["beta_decreases_with_n"] = {
            "cells": len(beta),
            "decreasing": int((beta[hi] < beta[lo]).sum()),
            "eta0_positive_share": float((davidson["eta0"] > 0).mean()),
        }
    return out


def _choices(config: Config, data: ItcInput) -> dict[str, Any]:
    return {
        "source": data.source,
        "split": (
            "pair-level: the round-half-up(rho N) items with the smallest keyed-hash uniforms of split seed"
            if config.split == "item"
            else "grouped by group_id: groups with keyed-hash uniform below rho"
        ),
        "calib_fraction": config.calib_fraction,
        "budgets": (
            "first n sample indices (nested budgets, common random numbers)"
            if config.budget_samples == "first"
            else "a random n of each item's samples, drawn anew per split (nested within a split)"
        ),
        "orders": (
            "pooled: <judge>/ab and <judge>/ba form one judge; samples alternate the orders, so n takes n/2 of each"
            if config.pool_orders
            else "as stored (each judge id on its own)"
        ),
        "rounded_median": "greedy decoding's rule, sign(r1 + r2), on each item's first two samples at every n"
        + (" (the two orders)" if config.pool_orders else "; here sampled votes, not the paper's temperature-0 calls"),
        "davidson": f"alpha = kappa = 1, beta in [0, 50], eta0 in [-20, 20], gamma in [-50, 50], {config.n_starts} "
        "starts (1 deterministic + random), L-BFGS-B ftol 1e-10 gtol 1e-8, MAE action (median), ties toward 0",
        "sc_tie_break": config.sc_tie_break,
        "soft_sc": "mean is the default column; min and product are variants; ties toward 0",
        "not_reproducible": "GD/FS/USC/GSA need new LLM calls (temperature-0 two-order votes, aggregation calls)",
        "intervals": interval_note(config.ci_level, spread_over_splits=True),
        "top_cluster_test": f"sign-flip test of the paired differences over all splits (joint flips), alpha "
        f"{config.significance}",
        "permutation_test": f"{config.permutations} joint sign-flip resamples (every split flipped at once); each "
        "split's own test is reported as the share of splits where it rejects",
        "orientation": f"seeded coin per (subset, id, a, b), seed {config.orientation_seed}",
    }


def summarise(config: Config, parts: pd.DataFrame, data: ItcInput) -> StudyResult:
    """Means over splits, top clusters, findings, vote tables, figures, the report and the exported model."""
    summary = top_clusters(config, parts, method_summary(config, parts))
    exported = export_model(config, data, exported_method(config, summary))
    skipped = sorted(set(config.methods) - set(summary["method"]))
    extra = {
        "findings": _findings(summary),
        "vote_tables": json_records(vote_tables(data, int(summary["n"].max()))),
        "skipped_methods": {m: "no per-sample confidences in the data" for m in skipped},
        "data": data.info,
        "choices": _choices(config, data),
    }
    return StudyResult(
        records=json_records(summary),
        summary=summary,
        report=_report(config, summary, extra),
        figures=figures(summary) | {"decision_regions.png": decision_figure(config, summary)},
        model={"model.json": exported.document},
        extra=extra,
        recommendation=replace(
            recommend(config, summary),
            exported=exported_model(
                exported.name, FORMAT, "<davidson variant> (one of " + ", ".join(DAVIDSON_METHODS) + ")"
            ),
        ),
    )


def _judge_sections(config: Config, summary: pd.DataFrame) -> list[str]:
    """Per judge, one table: MAE (pairwise accuracy) of every method per dataset and budget, marked."""
    star = starred(summary)
    methods = [m for m in config.methods if m in set(summary["method"])]
    lines = []
    for judge, rows in summary.groupby("judge_id", sort=True):
        cells = []
        for (dataset, n), cell in rows.groupby(["dataset", "n"], sort=True):
            by = cell.assign(star=star[cell.index]).set_index("method")
            cells.append(
                [dataset, n]
                + [
                    f"{number(by.at[m, 'mae'], '.3f')}{_mark(by.loc[m])} ({number(by.at[m, 'pa'], '.3f')})"
                    if m in by.index
                    else "—"
                    for m in methods
                ]
            )
        lines += section(str(judge), rows=markdown_table(["dataset", "n", *methods], cells))
    return lines


def _finding_lines(findings: dict[str, Any]) -> list[str]:
    bullets = []
    for name, value in findings.items():
        holds = value.get("holds") if isinstance(value, dict) else None
        verdict = "holds" if holds else "does not hold" if holds is False else "(information)"
        bullets.append(f"- {_finding(name, value)}: **{verdict}**")
    return section("Findings the paper expects, checked on this data", "\n".join(bullets))


def _report(config: Config, summary: pd.DataFrame, extra: dict[str, Any]) -> str:
    hi = int(summary["n"].max())
    skipped = extra["skipped_methods"]
    bad = extra["data"].get("bad_input", {}).get("counts", {})
    shares = extra["data"].get("label_shares", {})
    lines = [
        "# Davidson aggregation vs self-consistency",
        "",
        f"Data: `{config.data}` ({extra['choices']['source']}); {config.replicates} splits, calibration fraction "
        f"{config.calib_fraction}. Each cell: MAE (pairwise accuracy) on the evaluation part; n = sampled verdicts "
        "per item. MAE is the mean absolute error of the predicted preference in {-1, 0, +1} (0 = tie); pairwise "
        "accuracy (PA) the share of pairs predicted exactly. * = in the top cluster (no method significantly "
        "better: sign-flip test of the paired differences over all splits); † = predicts a tie for "
        f"{DEGENERATE_TIE_RATE:.0%} or more of the pairs, so its MAE reflects how often the labels are ties and it is "
        "never starred.",
        *_judge_sections(config, summary),
        *_finding_lines(extra["findings"]),
        *paper_and_here(PAPER, _paper_here(extra["findings"])),
        *vote_section(extra["vote_tables"]),
        *section(
            None, "Skipped methods: " + "; ".join(f"{m} ({why})" for m, why in skipped.items()) if skipped else ""
        ),
        *section(
            "Input",
            f"- label shares: {_pairs(shares) or 'not recorded'}\n- bad input: {_pairs(bad) or 'none'}",
        ),
        *section("Protocol", "\n".join(f"- {k}: {words(v)}" for k, v in extra["choices"].items())),
        "",
        f"Figures: `figures/mae_vs_n_<judge>.png` and `figures/pa_vs_n_<judge>.png` (the paper's Figure 2: MAE and "
        f"pairwise accuracy vs n, largest budget {hi}); `figures/decision_regions.png` (the paper's Figure 1: the "
        f"answer of self-consistency and of two fitted Davidson rules for every split of {hi} votes into A, tie, B).",
        "",
    ]
    return "\n".join(lines)


def _mark(row: pd.Series) -> str:
    if row["pred_tie_rate"] >= DEGENERATE_TIE_RATE:
        return "†"
    return "*" if row["star"] else ""


def _pairs(mapping: dict[str, Any]) -> str:
    """``"a 0.45, b 0.10"``: a flat mapping in words (numbers rounded), never a Python dict."""
    return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in mapping.items())


def _finding(name: str, value: Any) -> str:
    """One expected finding as a sentence with its numbers (the JSON ``findings`` keeps every detail)."""
    if not isinstance(value, dict):
        return f"{name}: {value}"
    if name == "davidson_below_sc_for_n_ge_4":
        per = "; ".join(f"n={n}: {v['davidson_below_sc']} of {v['cells']} cells" for n, v in value["per_n"].items())
        return f"Davidson has lower MAE than self-consistency at n >= 4 ({per})"
    if name == "sc_flat_or_worse_as_n_grows":
        lo, hi = value["n"]
        return (
            f"self-consistency does not improve by more than 0.01 MAE from n={lo} to n={hi} "
            f"({value['cells_sc_not_better_by_0.01']} of {value['cells']} cells; change {_brief(value['sc_change'])}) "
            f"while Davidson stays within 0.01 or improves ({value['davidson_within_0.01_or_better']} cells)"
        )
    if name == "weakest_judge_gains_most":
        gaps = ", ".join(f"{j} {v['mean']:+.3f}" for j, v in value["gap_sc_minus_davidson"].items())
        return (
            f"the weakest judge ({value['weakest_judge (highest SC MAE)']}, highest self-consistency MAE) gains most "
            f"from Davidson at n={value['n']} (MAE of self-consistency minus Davidson: {gaps})"
        )
    if name == "tie_collapse_precise_if":
        rates = ", ".join(f"{j} {v:.0%}" for j, v in value["pred_tie_rate"].items())
        return f"on Precise IF Davidson predicts a tie for nearly every pair at n={value['n']} (tie rate {rates})"
    if name == "beta_decreases_with_n":
        return (
            f"Davidson's tie-width beta falls as n grows ({value['decreasing']} of {value['cells']} cells; eta0 > 0 "
            f"in {value['eta0_positive_share']:.0%})"
        )
    details = ", ".join(f"{k} {_brief(v)}" for k, v in value.items() if k != "holds")
    return f"{name.replace('_', ' ')} ({details})"


def _brief(value: Any) -> str:
    """A short rendering of a finding's detail: long mappings of numbers as their range (the JSON has them all)."""
    if isinstance(value, dict) and value and all(isinstance(v, float) for v in value.values()):
        return f"{len(value)} cells from {min(value.values()):+.4f} to {max(value.values()):+.4f}"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


PAPER_VOTE_TABLES = (
    "The paper's tie-vote rates (12.4-37.6% by model and prompt on WMT23) and its positional bias (336 "
    "human-tie pairs of WMT23 ZH->EN in both orders: gemini-2.5-flash 14.5% forced choice, 3.1% with ties allowed; "
    "qwen3-next-80b -8.0% and 0.6%) come from WMT23 ratings and thinking-model votes the project does not have, so "
    "they cannot be reproduced here; the formulas are checked against the paper's own counts in the tests."
)
