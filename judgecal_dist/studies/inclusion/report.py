"""What a person reads of the inclusion study (``report.md``): one function per section, each built with the
report kit. The figures are in :mod:`~judgecal_dist.studies.inclusion.figures`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.studies.inclusion.model import DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR
from judgecal_dist.studies.inclusion.paper import PAPER, interval_reading, paper_here
from judgecal_dist.studies.inclusion.summary import METRICS
from judgecal_dist.studies.recommendation import words
from judgecal_dist.studies.report_kit import (
    bracket,
    interval,
    markdown_table,
    number,
    paper_and_here,
    percent,
    row_interval,
    section,
)

__all__ = ["PAPER", "dawid_skene_verdict", "item_bootstrap_lines", "platt_feature_lines", "report"]

#: Agreement terciles of the evaluation items, hardest first.
STRATA = ("hard", "middle", "easy")


def _curated_verdict(r: Any) -> str:
    if r.delta_nll_ci_low > 0:
        return "full panel better (interval excludes 0)"
    if r.delta_nll_ci_high < 0:
        return "curated better (interval excludes 0)"
    leader = "full panel" if r.delta_nll > 0 else "curated"
    return f"{leader} ahead on average, not significant across splits (interval includes 0)"


def dawid_skene_verdict(summary: pd.DataFrame, item_pairs: pd.DataFrame | None) -> str | None:
    """The one verdict on one-coin vs Dawid-Skene (both + beta, all judges): the paired item bootstrap when it was
    run, else whether the two intervals across splits overlap; None when either pipeline is absent.

    Where both exist the sentence says that the report relies on the paired bootstrap and why, so the Findings and
    the item bootstrap section print the same verdict.
    """
    full = summary[summary["panel"] == "all"].set_index(["aggregator", "calibrator"])
    if ("one_coin", "beta") not in full.index or ("dawid_skene", "beta") not in full.index:
        return None
    oc, ds = full.loc[("one_coin", "beta")], full.loc[("dawid_skene", "beta")]
    overlap = oc["nll_ci_low"] <= ds["nll_ci_high"] and ds["nll_ci_low"] <= oc["nll_ci_high"]
    head = f"One-coin vs Dawid-Skene after beta: NLL {number(oc['nll'])} vs {number(ds['nll'])}"
    pairs = None if item_pairs is None or item_pairs.empty else item_pairs[item_pairs["aggregator"] == "dawid_skene"]
    if pairs is None or pairs.empty:
        return f"{head} ({'intervals across splits overlap: comparable' if overlap else 'intervals across splits separate'})."
    r = pairs.iloc[0]
    return (
        f"{head}; the paired item bootstrap of their difference, "
        f"{interval(r['delta_nll'], r['ci_low'], r['ci_high'], '+.4f')}, {interval_reading(r['ci_low'], r['ci_high'])}"
        f" (the two intervals across splits {'overlap' if overlap else 'separate'}). One verdict: this report relies on "
        "the paired bootstrap, because it compares both pipelines on the same items, while overlapping intervals of "
        "two separate means are no test of their difference."
    )


def _findings(summary: pd.DataFrame, item_pairs: pd.DataFrame | None = None) -> list[str]:
    """The paper's qualitative claims, checked on this data (spec 000 §1, §6)."""
    lines = []
    full = summary[summary["panel"] == "all"].set_index(["aggregator", "calibrator"])
    curated = summary[summary["panel"] != "all"]
    for cal in ("beta", "platt"):
        rows = curated[(curated["aggregator"] == "one_coin") & (curated["calibrator"] == cal)]
        lines += [
            f"- one_coin + {cal}: {r.panel} vs all: ΔNLL = {row_interval(r, 'delta_nll', '+.4f')}, corrected t p = "
            f"{number(r.delta_nll_p, '.3g')}; per-split permutation p < 0.05 in {percent(r.perm_share_p05, 0)} of "
            f"splits → {_curated_verdict(r)}."
            for r in rows.itertuples()
        ]
    if ("one_coin", "none") in full.index:
        raw = full.loc[("one_coin", "none"), "nll"]
        cals = {
            c: full.loc[("one_coin", c), "nll"]
            for c in ("platt", "temperature", "beta", "isotonic")
            if ("one_coin", c) in full.index
        }
        if cals:
            order = ", ".join(f"{c} {number(v)}" for c, v in sorted(cals.items(), key=lambda kv: kv[1]))
            lines.append(f"- Calibrators on the full one-coin panel (raw NLL {number(raw)}): {order}.")
    verdict = dawid_skene_verdict(summary, item_pairs)
    if verdict is not None:
        lines.append(f"- {verdict}")
    return lines


def _full_panel_lines(full: pd.DataFrame) -> list[str]:
    rows = [[r.aggregator, r.calibrator, *(row_interval(r, m) for m in METRICS)] for r in full.itertuples()]
    best = full.loc[full["nll"].idxmin()]
    return section(
        "Full panel",
        rows=markdown_table(["aggregator", "calibrator", "NLL", "Brier", "ECE", "accuracy"], rows),
        after=[f"Lowest mean NLL on the full panel: **{best.aggregator} + {best.calibrator}** ({number(best.nll)})."],
    )


def _curated_lines(curated: pd.DataFrame) -> list[str]:
    """Each curated panel against all judges: ΔNLL across splits and the per-split permutation tests."""
    if curated.empty:
        return []
    header = ["aggregator", "calibrator", "panel", "size", "NLL", "ΔNLL [CI]", "p across splits (corrected t)"]
    rows = [
        [r.aggregator, r.calibrator, r.panel, number(r.panel_size, ".1f"), number(r.nll)]
        + [row_interval(r, "delta_nll", "+.4f"), number(r.delta_nll_p, ".3g"), number(r.perm_p, ".4g")]
        + [percent(r.perm_share_p05, 0)]
        for r in curated.itertuples()
    ]
    return section(
        "Curated panels vs all judges (same aggregator and calibrator)",
        "ΔNLL = NLL(panel) − NLL(all) on the same evaluation items (positive: inclusion better), with its "
        "corrected resampled t interval and p-value across splits. The paired permutation test is run within "
        "each split; its median p over splits describes the splits and is not a p-value across them.",
        rows=markdown_table([*header, "median per-split p", "splits with per-split p < 0.05"], rows),
    )


def _equivalence_lines(config: Any, curated: pd.DataFrame) -> list[str]:
    """Item-level TOST per split of each curated panel against the full panel (H.9, H.13)."""
    if curated.empty or "tost_p" not in curated:
        return []
    rows = [
        [r.aggregator, r.calibrator, r.panel, number(r.tost_p, ".4g"), number(r.tost_equivalent_share, ".2f")]
        for r in curated.itertuples()
    ]
    return section(
        f"Equivalence (TOST, margin ±{config.tost_margin:g} nats)",
        "Per split, two one-sided paired t tests on the item-level NLL differences ask whether the panel's NLL lies "
        f"within ±{config.tost_margin:g} of the full panel's; equivalent = both reject at 5%. Not rejecting is no "
        "evidence of a difference: see ΔNLL above for that. n/a: the panel's predictions equal the full panel's "
        "in every split (no standard error).",
        rows=markdown_table(["aggregator", "calibrator", "panel", "median TOST p", "splits equivalent"], rows),
    )


def _selective_lines(config: Any, full: pd.DataFrame) -> list[str]:
    """Positive-class ECE, AUAC and coverage at a confidence threshold on the full panel (spec §4, H.14)."""
    if full.empty or "auac" not in full:
        return []
    tau = config.selective_tau
    rows = [
        [r.aggregator, r.calibrator, *(row_interval(r, m) for m in ("ece_positive", "auac", "coverage_at_tau"))]
        + [number(r.accuracy_at_tau)]
        for r in full.itertuples()
    ]
    return section(
        "Selective prediction and positive-class ECE (full panel)",
        "ECE+ = reliability ECE on P(A) itself; AUAC = area under the accuracy-coverage curve (ties as blocks); "
        f"coverage = share of items with confidence max(p, 1 - p) >= {tau:g}, accuracy on those items (mean over "
        "the splits that keep any).",
        rows=markdown_table(
            ["aggregator", "calibrator", "ECE+", "AUAC", f"coverage @ {tau:g}", f"accuracy @ {tau:g}"], rows
        ),
    )


def _saturation_line(steps: list[dict[str, Any]] | None) -> str:
    """P2 over the nested chain top-k < ... < all (floor 0.01 nats, J_large 20, delta 0.005: spec §3.8)."""
    if not steps:
        return "- P2 saturation: needs at least two nested panels (top-k and all) in `panels`."
    hit = [f"{s['panel_from']} -> {s['panel_to']}" for s in steps if s["saturated"]]
    chain = " < ".join([steps[0]["panel_from"], *(s["panel_to"] for s in steps)])
    verdict = f"saturated at {', '.join(hit)}: filter the added judges or use Dawid-Skene" if hit else "not saturated"
    return (
        f"- P2 saturation (one_coin + beta evaluation NLL along {chain}; floor 0.01 nats, panels >= 20 judges, "
        f"change <= 0.005): {verdict}."
    )


def _search_winner(r: Any) -> str:
    if r.nested_nll_ci_low > r.nested_nll_all_ci_high:
        return "inclusion"
    return "search" if r.nested_nll_ci_high < r.nested_nll_all_ci_low else "tie"


def _search_lines(search: pd.DataFrame | None) -> list[str]:
    """Spec Table 3: searched subset vs all judges through the identical nested fit, winner by CI overlap."""
    if search is None or search.empty:
        return []
    header = ["search", "retained size", "inner CV NLL", "test NLL (search)", "test NLL (all)", "Δ (search − all)"]
    rows = [
        [r.panel, number(r.panel_size, ".1f"), number(r.inner_nll), row_interval(r, "nested_nll")]
        + [row_interval(r, "nested_nll_all"), row_interval(r, "nested_delta", "+.4f")]
        + [_search_winner(r), number(r.evaluations, ".0f")]
        for r in search.itertuples()
    ]
    return section(
        "Same-pipeline subset search (one-coin + beta, nested fit)",
        "Inner protocol: the calibration half cut 70/30 (one-coin counts / inner calibration); a candidate's "
        "score is the 5-fold CV NLL of beta on the inner part. Test NLL: one-coin on the 70%, beta refitted "
        "on the 30%, on the evaluation half; the all-judges arm uses the identical fit. Winner: 'inclusion' "
        "if the 95% CIs do not overlap and favour all judges, 'search' if they favour the subset, else 'tie'.",
        rows=markdown_table([*header, "winner", "subsets scored"], rows),
    )


def _tercile_lines(terciles: pd.DataFrame | None) -> list[str]:
    """NLL per agreement tercile (spec §3.10), each aggregator raw and after beta, hard / middle / easy."""
    if terciles is None or terciles.empty:
        return []
    t = terciles[terciles["calibrator"].isin(["none", "beta"])]
    rows = []
    for (agg, cal), group in t.groupby(["aggregator", "calibrator"], sort=False):
        by = group.set_index("stratum")
        rows.append([agg, cal, *(row_interval(by.loc[k], "nll") if k in by.index else "n/a" for k in STRATA)])
    return section(
        "NLL by difficulty (full panel, agreement terciles of the evaluation items)",
        "Agreement |2 p_MV − 1| of all judges; hard = bottom tercile, easy = top.",
        rows=markdown_table(["aggregator", "calibrator", *STRATA], rows),
    )


def _conformal_lines(conformal: pd.DataFrame) -> list[str]:
    if conformal.empty:
        return []
    rows = [
        [number(1 - r.alpha, ".2f"), row_interval(r, "coverage"), number(r.set_size, ".3f")]
        + [number(r.empty_rate, ".3f"), number(r.both_rate, ".3f")]
        for r in conformal.itertuples()
    ]
    header = ["target coverage", "coverage", "set size", "empty sets", "both labels"]
    return section("Split-conformal sets (one_coin + beta, full panel)", rows=markdown_table(header, rows))


def _judge_lines(judges: pd.DataFrame) -> list[str]:
    below = judges[judges["accuracy"] < 0.5]
    shown = judges if len(judges) <= 12 else pd.concat([judges.head(6), judges.tail(6)])
    rows = [
        [r.judge_id, number(r.votes, ".1f"), number(r.accuracy, ".3f"), number(r.parse_rate, ".3f")]
        for r in shown.itertuples()
    ]
    if len(judges) > 12:
        rows.append([f"... {len(judges) - 12} more in summary.json `judges`", "", "", ""])
    return section(
        "Judges (calibration halves, mean over splits)",
        f"{len(judges)} judges; {len(below)} below chance (their one-coin weight is negative: votes flipped).",
        rows=markdown_table(["judge", "votes", "accuracy", "parse rate"], rows),
    )


def _scope_diagnostic_lines(diagnostics: dict[str, Any]) -> list[str]:
    shares = diagnostics["irt_variance_shares"]
    bullets = [
        f"- parse rate: review {len(diagnostics['p1_review'])} judges, filter {len(diagnostics['p1_filter'])} "
        f"({', '.join(diagnostics['p1_filter'][:5]) or 'none'})."
        if not diagnostics.get("p1_skipped")
        else f"- parse rate: not checked ({diagnostics['p1_skipped']}).",
        f"- Reliably below chance (P(theta < 1/2) > 0.975): {len(diagnostics['below_chance_bayes'])} judges "
        "(kept: the one-coin weight flips them).",
        f"- missingness flags: {len(diagnostics['p3_flagged'])} judges.",
        "- 2PL IRT variance shares: "
        + (", ".join(f"{k} {number(v, '.3f')}" for k, v in shares.items()) or diagnostics.get("irt_skipped") or "-")
        + f"; Spearman(ability, accuracy) = {number(diagnostics['irt_ability_accuracy_spearman'], '.3f')}.",
        _saturation_line(diagnostics.get("p2_saturation")),
    ]
    return section(f"Scope diagnostics (calibration half of split {diagnostics['split_seed']})", "\n".join(bullets))


def report(
    config: Any,
    summary: pd.DataFrame,
    conformal: pd.DataFrame,
    panel: Panel,
    judges: pd.DataFrame,
    choices: dict[str, Any],
    diagnostics: dict[str, Any],
    *,
    terciles: pd.DataFrame | None = None,
    search: pd.DataFrame | None = None,
    item_pairs: pd.DataFrame | None = None,
) -> str:
    """``report.md``: full-panel grid, curated and searched panels vs all, difficulty terciles, conformal sets,
    judges, and the choices made."""
    full, curated = summary[summary["panel"] == "all"], summary[summary["panel"] != "all"]
    lines = [
        f"# Calibrate, don't curate: inclusion study on `{panel.dataset}`",
        "",
        f"{panel.n_items} labelled items x {panel.n_judges} judges; {config.replicates} random grouped splits "
        f"(calibration fraction {config.calib_fraction}); metrics on the evaluation part, mean over splits with "
        f"{int(config.ci_level * 100)}% corrected resampled t intervals (why: see Intervals above). Calibrators "
        f"trained on `{config.calib_scores}` scores; "
        f"calibrator input: `{config.calibrator_input}` (see the choices below).",
        *section(None, f"> **Warning:** {choices['warning']}" if "warning" in choices else ""),
        *section("Findings", "\n".join(_findings(summary, item_pairs))),
        *paper_and_here(PAPER, paper_here(summary, item_pairs, diagnostics)),
        *_full_panel_lines(full),
        *_curated_lines(curated),
        *_equivalence_lines(config, curated),
        *_selective_lines(config, full),
        *_search_lines(search),
        *_tercile_lines(terciles),
        *_conformal_lines(conformal),
        *_judge_lines(judges),
        *_scope_diagnostic_lines(diagnostics),
        *section(
            "Choices this run made (defaults the paper leaves open)",
            "\n".join(f"- {k}: {words(v)}" for k, v in choices.items()),
        ),
        "",
        "Figures: `figures/nll_grid.png` (full-panel NLL by aggregator x calibrator), "
        "`figures/nll_vs_panel_size.png`, `figures/reliability.png` (one-coin before/after beta).",
        "",
    ]
    return "\n".join(lines)


def platt_feature_lines(featured: pd.DataFrame, config: Any) -> str:
    """Report section: Platt scaling without and with item features, full panel, evaluation NLL."""
    if featured.empty:
        return ""
    rows = []
    for agg, group in featured.groupby("aggregator", sort=False):
        by = group.set_index("calibrator")
        plain, with_x = by.loc["platt"], by.drop(index="platt").iloc[0]
        coef = ", ".join(f"{f} {number(with_x[f'gamma_{f}'], '+.3f')}" for f in config.platt_item_features)
        rows.append([agg, row_interval(plain, "nll"), row_interval(with_x, "nll"), coef])
    lines = section(
        "Platt scaling with item features",
        f"Platt scaling of each aggregator's score, alone and with the item features "
        f"{', '.join(config.platt_item_features)} (agreement: |2 p_MV - 1| of the item's votes; coverage: the share "
        f"of judges that voted), on all judges; evaluation NLL, mean over splits with its {config.ci_level:.0%} "
        "interval.",
        rows=markdown_table(["aggregator", "Platt", "Platt with features", "feature coefficients"], rows),
    )
    return "\n".join(lines) + "\n"


def _paper_bullets(table_: pd.DataFrame, metrics: pd.DataFrame | None, verdict: str | None = None) -> list[str]:
    """The paper's reading of each comparison beside ours; Dawid-Skene's accuracy where it falls short."""
    lines = []
    paper = {"majority": "excludes 0 in favour of one-coin", "dawid_skene": "contains 0"}
    for agg, claim in paper.items():
        row = table_[table_["aggregator"] == agg]
        if not row.empty:
            low, high = float(row["ci_low"].iloc[0]), float(row["ci_high"].iloc[0])
            lines.append(f"- vs {agg}: the paper's interval {claim}; here it {interval_reading(low, high)}.")
            if agg == "dawid_skene" and verdict is not None:
                lines.append(f"  {verdict}")
            if agg == "dawid_skene" and high < 0 and metrics is not None:
                lines += _dawid_skene_accuracy(metrics)
    stacking = table_[table_["aggregator"] == "stacking"]
    if not stacking.empty:
        r = stacking.iloc[0]
        found = (
            "stacking better (interval above 0)"
            if r["ci_low"] > 0
            else "one-coin better (interval below 0)"
            if r["ci_high"] < 0
            else "no clear difference"
        )
        lines.append(
            "- vs stacking: the paper found stacking degenerate (NLL at the clipping floor, as an encoding of every "
            f"label as the preferred response would make it); here ΔNLL is {number(r['delta_nll'], '+.4f')}: {found}."
        )
    return lines


def item_bootstrap_lines(
    table_: pd.DataFrame, config: Any, metrics: pd.DataFrame | None = None, verdict: str | None = None
) -> str:
    """Report section: the item-level paired bootstrap (H.9) and TOST (H.13) against the default pipeline; where
    Dawid-Skene falls short of the paper's tie, its per-split accuracy beside one-coin's (from ``metrics``)."""
    if table_.empty:
        return ""
    rows = [
        [r.aggregator, number(r.delta_nll, "+.4f"), bracket(r.ci_low, r.ci_high, "+.4f")]
        + [number(r.tost_p, ".4g"), "yes" if r.tost_equivalent else "no"]
        for r in table_.itertuples()
    ]
    lines = section(
        f"Item-level paired bootstrap and equivalence ({DEFAULT_AGGREGATOR} + {DEFAULT_CALIBRATOR} vs the others)",
        f"Item groups resampled with replacement ({config.item_bootstrap_resamples} resamples), each draw shared by "
        "every split (the splits are halves of the same items) and each split's evaluation items weighted by it; the "
        "splits held fixed, so the interval shows item sampling only. ΔNLL = "
        f"{DEFAULT_AGGREGATOR} minus the other aggregator, both with {DEFAULT_CALIBRATOR} on all judges (negative "
        f"favours {DEFAULT_AGGREGATOR}). TOST on the bootstrap SE, margin ±{config.tost_margin:g} nats.",
        rows=markdown_table(
            ["other aggregator", "ΔNLL", f"{config.ci_level:.0%} interval", "TOST p", "equivalent"], rows
        ),
        after=["\n".join(_paper_bullets(table_, metrics, verdict))],
    )
    return "\n".join(lines) + "\n"


def _dawid_skene_accuracy(metrics: pd.DataFrame) -> list[str]:
    """Dawid-Skene's and one-coin's evaluation accuracy over splits (both + the default calibrator, all judges)."""
    rows = metrics[(metrics["panel"] == "all") & (metrics["calibrator"] == DEFAULT_CALIBRATOR)]
    acc = {a: rows.loc[rows["aggregator"] == a, "accuracy"].to_numpy() for a in ("dawid_skene", DEFAULT_AGGREGATOR)}
    if any(v.size == 0 for v in acc.values()):
        return []
    ds, oc = acc["dawid_skene"], acc[DEFAULT_AGGREGATOR]
    majority = rows.loc[rows["aggregator"] == "majority", "accuracy"].to_numpy()
    why = (
        f" (majority vote is right on a median {np.median(majority):.3f} of the evaluation items: a class learned "
        "without labels can settle on what most judges say rather than on the label)"
        if majority.size
        else ""
    )
    return [
        f"  Dawid-Skene is fitted without labels: its evaluation accuracy has median {np.median(ds):.3f} over the "
        f"splits (range {ds.min():.3f} to {ds.max():.3f}), one-coin's {np.median(oc):.3f} ({oc.min():.3f} to "
        f"{oc.max():.3f}). Where it falls toward 0.5 its latent class is not the label{why}, and no calibrator "
        "repairs that."
    ]
