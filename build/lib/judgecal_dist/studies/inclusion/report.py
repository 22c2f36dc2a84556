"""Report and figures of the inclusion study: what a person reads (``report.md``) and looks at (``figures/``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.io.figures import colours, heatmap, plain_log_axis, png, pyplot
from judgecal_dist.methods.pipeline import CALIBRATORS
from judgecal_dist.studies.recommendation import words

__all__ = ["report", "figures"]

METRICS = ("nll", "brier", "ece", "accuracy")


def _num(value: float, spec: str) -> str:
    """A number for the report; "n/a" where it is undefined (e.g. the accuracy of a judge that never voted)."""
    return "n/a" if value is None or not np.isfinite(value) else format(value, spec)


def _cell(row: Any, metric: str) -> str:
    return (
        f"{getattr(row, metric):.4f} [{getattr(row, metric + '_ci_low'):.4f}, {getattr(row, metric + '_ci_high'):.4f}]"
    )


def _findings(summary: pd.DataFrame) -> list[str]:
    """The paper's qualitative claims, checked on this data (spec 000 §1, §6)."""
    lines = []
    full = summary[summary["panel"] == "all"].set_index(["aggregator", "calibrator"])
    curated = summary[summary["panel"] != "all"]
    for cal in ("beta", "platt"):
        rows = curated[(curated["aggregator"] == "one_coin") & (curated["calibrator"] == cal)]
        for r in rows.itertuples():
            if r.delta_nll_ci_low > 0:
                verdict = "full panel better (interval excludes 0)"
            elif r.delta_nll_ci_high < 0:
                verdict = "curated better (interval excludes 0)"
            else:
                leader = "full panel" if r.delta_nll > 0 else "curated"
                verdict = f"{leader} ahead on average, not significant across splits (interval includes 0)"
            lines.append(
                f"- one_coin + {cal}: {r.panel} vs all: ΔNLL = {r.delta_nll:+.4f} "
                f"[{r.delta_nll_ci_low:+.4f}, {r.delta_nll_ci_high:+.4f}], corrected t p = {r.delta_nll_p:.3g}; "
                f"per-split permutation p < 0.05 in {_num(r.perm_share_p05 * 100, '.0f')}% of splits "
                f"→ {verdict}."
            )
    if ("one_coin", "none") in full.index:
        raw = full.loc[("one_coin", "none"), "nll"]
        cals = {
            c: full.loc[("one_coin", c), "nll"]
            for c in ("platt", "temperature", "beta", "isotonic")
            if ("one_coin", c) in full.index
        }
        if cals:
            order = ", ".join(f"{c} {v:.4f}" for c, v in sorted(cals.items(), key=lambda kv: kv[1]))
            lines.append(f"- Calibrators on the full one-coin panel (raw NLL {raw:.4f}): {order}.")
    if ("one_coin", "beta") in full.index and ("dawid_skene", "beta") in full.index:
        oc, ds = full.loc[("one_coin", "beta")], full.loc[("dawid_skene", "beta")]
        overlap = oc["nll_ci_low"] <= ds["nll_ci_high"] and ds["nll_ci_low"] <= oc["nll_ci_high"]
        lines.append(
            f"- One-coin vs Dawid-Skene after beta: {oc['nll']:.4f} vs {ds['nll']:.4f} "
            f"({'intervals overlap: comparable' if overlap else 'intervals separate'})."
        )
    return lines


def _tercile_lines(terciles: pd.DataFrame) -> list[str]:
    """NLL per agreement tercile (spec §3.10), each aggregator raw and after beta, hard / middle / easy."""
    if terciles is None or terciles.empty:
        return []
    t = terciles[terciles["calibrator"].isin(["none", "beta"])]
    lines = [
        "## NLL by difficulty (full panel, agreement terciles of the evaluation items)",
        "",
        "Agreement |2 p_MV − 1| of all judges; hard = bottom tercile, easy = top.",
        "",
        "| aggregator | calibrator | hard | middle | easy |",
        "| --- | --- | --- | --- | --- |",
    ]
    for (agg, cal), rows in t.groupby(["aggregator", "calibrator"], sort=False):
        by = rows.set_index("stratum")
        cells = [
            f"{by.loc[k, 'nll']:.4f} [{by.loc[k, 'nll_ci_low']:.4f}, {by.loc[k, 'nll_ci_high']:.4f}]"
            if k in by.index
            else "n/a"
            for k in ("hard", "middle", "easy")
        ]
        lines.append(f"| {agg} | {cal} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _equivalence_lines(config: Any, curated: pd.DataFrame) -> list[str]:
    """Item-level TOST per split of each curated panel against the full panel (H.9, H.13)."""
    if curated.empty or "tost_p" not in curated:
        return []
    lines = [
        f"## Equivalence (TOST, margin ±{config.tost_margin:g} nats)",
        "",
        "Per split, two one-sided paired t tests on the item-level NLL differences ask whether the panel's NLL lies "
        f"within ±{config.tost_margin:g} of the full panel's; equivalent = both reject at 5%. Not rejecting is no "
        "evidence of a difference: see ΔNLL above for that. n/a: the panel's predictions equal the full panel's "
        "in every split (no standard error).",
        "",
        "| aggregator | calibrator | panel | median TOST p | splits equivalent |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r.aggregator} | {r.calibrator} | {r.panel} | {_num(r.tost_p, '.4g')} | {r.tost_equivalent_share:.2f} |"
        for r in curated.itertuples()
    ]
    return [*lines, ""]


def _selective_lines(config: Any, full: pd.DataFrame) -> list[str]:
    """Positive-class ECE, AUAC and coverage at a confidence threshold on the full panel (spec §4, H.14)."""
    if full.empty or "auac" not in full:
        return []
    tau = config.selective_tau
    lines = [
        "## Selective prediction and positive-class ECE (full panel)",
        "",
        "ECE+ = reliability ECE on P(A) itself; AUAC = area under the accuracy-coverage curve (ties as blocks); "
        f"coverage = share of items with confidence max(p, 1 - p) >= {tau:g}, accuracy on those items (mean over "
        "the splits that keep any).",
        "",
        f"| aggregator | calibrator | ECE+ | AUAC | coverage @ {tau:g} | accuracy @ {tau:g} |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r.aggregator} | {r.calibrator} | {_cell(r, 'ece_positive')} | {_cell(r, 'auac')} | "
        f"{_cell(r, 'coverage_at_tau')} | {_num(r.accuracy_at_tau, '.4f')} |"
        for r in full.itertuples()
    ]
    return [*lines, ""]


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


def _search_lines(search: pd.DataFrame) -> list[str]:
    """Spec Table 3: searched subset vs all judges through the identical nested fit, winner by CI overlap."""
    if search is None or search.empty:
        return []
    lines = [
        "## Same-pipeline subset search (one-coin + beta, nested fit)",
        "",
        "Inner protocol: the calibration half cut 70/30 (one-coin counts / inner calibration); a candidate's "
        "score is the 5-fold CV NLL of beta on the inner part. Test NLL: one-coin on the 70%, beta refitted "
        "on the 30%, on the evaluation half; the all-judges arm uses the identical fit. Winner: 'inclusion' "
        "if the 95% CIs do not overlap and favour all judges, 'search' if they favour the subset, else 'tie'.",
        "",
        "| search | retained size | inner CV NLL | test NLL (search) | test NLL (all) | Δ (search − all) | "
        "winner | subsets scored |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in search.itertuples():
        if r.nested_nll_ci_low > r.nested_nll_all_ci_high:
            winner = "inclusion"
        elif r.nested_nll_ci_high < r.nested_nll_all_ci_low:
            winner = "search"
        else:
            winner = "tie"
        lines.append(
            f"| {r.panel} | {r.panel_size:.1f} | {r.inner_nll:.4f} | {r.nested_nll:.4f} [{r.nested_nll_ci_low:.4f}, "
            f"{r.nested_nll_ci_high:.4f}] | {r.nested_nll_all:.4f} [{r.nested_nll_all_ci_low:.4f}, "
            f"{r.nested_nll_all_ci_high:.4f}] | {r.nested_delta:+.4f} [{r.nested_delta_ci_low:+.4f}, "
            f"{r.nested_delta_ci_high:+.4f}] | {winner} | {r.evaluations:.0f} |"
        )
    return [*lines, ""]


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
) -> str:
    """``report.md``: full-panel grid, curated and searched panels vs all, difficulty terciles, conformal sets,
    judges, and the choices made."""
    lines = [
        f"# Calibrate, don't curate: inclusion study on `{panel.dataset}`",
        "",
        f"{panel.n_items} labelled items x {panel.n_judges} judges; {config.replicates} random grouped splits "
        f"(calibration fraction {config.calib_fraction}); metrics on the evaluation part, mean over splits with "
        f"{int(config.ci_level * 100)}% corrected resampled t intervals (why: see Intervals above). Calibrators "
        f"trained on `{config.calib_scores}` scores; "
        f"calibrator input: `{config.calibrator_input}` (see the choices below).",
        "",
    ]
    if "warning" in choices:
        lines += [f"> **Warning:** {choices['warning']}", ""]
    lines += [
        "## Findings",
        "",
        *_findings(summary),
        "",
        "## Full panel",
        "",
        "| aggregator | calibrator | NLL | Brier | ECE | accuracy |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    full = summary[summary["panel"] == "all"]
    lines += [
        f"| {r.aggregator} | {r.calibrator} | " + " | ".join(_cell(r, m) for m in METRICS) + " |"
        for r in full.itertuples()
    ]
    best = full.loc[full["nll"].idxmin()]
    lines += ["", f"Lowest mean NLL on the full panel: **{best.aggregator} + {best.calibrator}** ({best.nll:.4f}).", ""]
    curated = summary[summary["panel"] != "all"]
    if not curated.empty:
        lines += [
            "## Curated panels vs all judges (same aggregator and calibrator)",
            "",
            "ΔNLL = NLL(panel) − NLL(all) on the same evaluation items (positive: inclusion better), with its "
            "corrected resampled t interval and p-value across splits. The paired permutation test is run within "
            "each split; its median p over splits describes the splits and is not a p-value across them.",
            "",
            "| aggregator | calibrator | panel | size | NLL | ΔNLL [CI] | p across splits (corrected t) | "
            "median per-split p | splits with per-split p < 0.05 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {r.aggregator} | {r.calibrator} | {r.panel} | {r.panel_size:.1f} | {r.nll:.4f} | "
            f"{r.delta_nll:+.4f} [{r.delta_nll_ci_low:+.4f}, {r.delta_nll_ci_high:+.4f}] | "
            f"{_num(r.delta_nll_p, '.3g')} | {r.perm_p:.4g} | {_num(r.perm_share_p05 * 100, '.0f')}% |"
            for r in curated.itertuples()
        ]
        lines.append("")
    lines += _equivalence_lines(config, curated)
    lines += _selective_lines(config, full)
    lines += _search_lines(search)
    lines += _tercile_lines(terciles)
    if not conformal.empty:
        lines += [
            "## Split-conformal sets (one_coin + beta, full panel)",
            "",
            "| target coverage | coverage | set size | empty sets | both labels |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {1 - r.alpha:.2f} | {r.coverage:.4f} [{r.coverage_ci_low:.4f}, {r.coverage_ci_high:.4f}] | "
            f"{r.set_size:.3f} | {r.empty_rate:.3f} | {r.both_rate:.3f} |"
            for r in conformal.itertuples()
        ]
        lines.append("")
    below = judges[judges["accuracy"] < 0.5]
    lines += [
        "## Judges (calibration halves, mean over splits)",
        "",
        f"{len(judges)} judges; {len(below)} below chance (their one-coin weight is negative: votes flipped).",
        "",
        "| judge | votes | accuracy | parse rate |",
        "| --- | --- | --- | --- |",
    ]
    shown = judges if len(judges) <= 12 else pd.concat([judges.head(6), judges.tail(6)])
    lines += [
        f"| {r.judge_id} | {r.votes:.1f} | {_num(r.accuracy, '.3f')} | {r.parse_rate:.3f} |" for r in shown.itertuples()
    ]
    if len(judges) > 12:
        lines.append(f"| ... {len(judges) - 12} more in summary.json `judges` | | | |")
    shares = diagnostics["irt_variance_shares"]
    lines += [
        "",
        f"## Scope diagnostics (calibration half of split {diagnostics['split_seed']})",
        "",
        f"- parse rate: review {len(diagnostics['p1_review'])} judges, filter {len(diagnostics['p1_filter'])} "
        f"({', '.join(diagnostics['p1_filter'][:5]) or 'none'})."
        if not diagnostics.get("p1_skipped")
        else f"- parse rate: not checked ({diagnostics['p1_skipped']}).",
        f"- Reliably below chance (P(theta < 1/2) > 0.975): {len(diagnostics['below_chance_bayes'])} judges "
        "(kept: the one-coin weight flips them).",
        f"- missingness flags: {len(diagnostics['p3_flagged'])} judges.",
        "- 2PL IRT variance shares: "
        + (", ".join(f"{k} {v:.3f}" for k, v in shares.items()) or "not defined for a single judge")
        + f"; Spearman(ability, accuracy) = {_num(diagnostics['irt_ability_accuracy_spearman'], '.3f')}.",
        _saturation_line(diagnostics.get("p2_saturation")),
    ]
    lines += ["", "## Choices this run made (defaults the paper leaves open)", ""]
    lines += [f"- {k}: {words(v)}" for k, v in choices.items()]
    lines += [
        "",
        "Figures: `figures/nll_grid.png` (full-panel NLL by aggregator x calibrator), "
        "`figures/nll_vs_panel_size.png`, `figures/reliability.png` (one-coin before/after beta).",
        "",
    ]
    return "\n".join(lines)


def figures(metrics: pd.DataFrame, summary: pd.DataFrame, reliability: pd.DataFrame, config: Any) -> dict[str, bytes]:
    """Three PNGs: NLL grid of the full panel, NLL vs retained panel size, reliability before/after."""
    from matplotlib.colors import LogNorm

    plt = pyplot()
    colour = colours(CALIBRATORS)  # a calibrator has one colour in every figure (the budget study's too)

    out = {}
    full = summary[summary["panel"] == "all"].pivot(index="aggregator", columns="calibrator", values="nll")
    full = full.reindex(
        index=[a for a in config.aggregators if a in full.index],
        columns=[c for c in config.calibrators if c in full.columns],
    )
    grid = full.to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(2.4 + 1.3 * full.shape[1], 1.6 + 0.55 * full.shape[0]), dpi=110)
    finite = grid[np.isfinite(grid)]
    heatmap(
        ax,
        grid,
        list(full.index),
        list(full.columns),
        best=[tuple(np.argwhere(grid == finite.min())[0])] if finite.size else [],
        norm=LogNorm(finite.min(), finite.max()) if finite.size and 0 < finite.min() < finite.max() else None,
        cmap="viridis_r",
        colorbar="evaluation NLL (log colour scale)",
        xlabel="calibrator",
        ylabel="aggregator",
        title="Full-panel evaluation NLL (mean over splits; lower is better)",
    )
    out["nll_grid.png"] = png(fig, tight_layout=True)

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    sizes = []
    for i, (cal, style) in enumerate((("none", "--"), ("beta", "-"), ("platt", ":"))):
        rows = summary[(summary["aggregator"] == "one_coin") & (summary["calibrator"] == cal)].sort_values("panel_size")
        if not rows.empty:
            sizes += rows["panel_size"].tolist()
            ax.errorbar(
                rows["panel_size"],
                rows["nll"],
                yerr=[rows["nll"] - rows["nll_ci_low"], rows["nll_ci_high"] - rows["nll"]],
                fmt="o" + style,
                capsize=3,
                color=colour[cal],
                label=f"one_coin + {cal}",
            )
            if i == 0:  # the panel names once, not once per calibrator on top of each other
                for r in rows.itertuples():
                    ax.annotate(r.panel, (r.panel_size, r.nll), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("retained panel size (judges)")
    ax.set_ylabel("evaluation NLL (mean, 95% interval)")
    if sizes:
        plain_log_axis(ax, "x", [round(s, 1) for s in sizes])
    plain_log_axis(ax, "y")
    ax.legend()
    ax.set_title("NLL vs retained panel size (one-coin aggregator)")
    out["nll_vs_panel_size.png"] = png(fig, tight_layout=True)

    if not reliability.empty:
        out["reliability.png"] = _reliability(reliability, colour)
    return out


def _reliability(reliability: pd.DataFrame, colour: dict[str, Any]) -> bytes:
    """Reliability diagram with the items per bin beneath it: a bin with a handful of items is drawn hollow and
    its count is shown, so it cannot pass for a calibration failure."""
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(4.8, 5.6), dpi=110, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    pooled = reliability.groupby(["calibrator", "bin"], as_index=False)[["count", "sum_p", "sum_y"]].sum()
    few = max(10.0, 0.01 * float(pooled.groupby("calibrator")["count"].sum().max()))
    names = sorted(pooled["calibrator"].unique(), key=lambda c: (c != "none", c))
    width = 0.8 / (10 * len(names))
    for k, (cal, rows) in enumerate((c, pooled[pooled["calibrator"] == c]) for c in names):
        rows = rows[rows["count"] > 0]
        x, y = rows["sum_p"] / rows["count"], rows["sum_y"] / rows["count"]
        label = f"one_coin + {cal}" if cal != "none" else "one_coin (uncalibrated)"
        solid = rows["count"] >= few
        ax.plot(x[solid], y[solid], "-", color=colour[cal], lw=1, alpha=0.7)  # the line joins well-filled bins only
        ax.scatter(x[solid], y[solid], color=colour[cal], s=25, label=label, zorder=3)
        ax.scatter(x[~solid], y[~solid], facecolors="none", edgecolors=colour[cal], s=25, zorder=3)
        for xi, yi, n in zip(x[~solid], y[~solid], rows["count"][~solid], strict=True):
            ax.annotate(f"n={n:.0f}", (xi, yi), fontsize=6, xytext=(3, -8), textcoords="offset points")
        bx.bar(x + (k - (len(names) - 1) / 2) * width, rows["count"], width=width, color=colour[cal], label=label)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, label="perfect calibration")
    ax.set_xlabel("mean predicted P(A) in the bin")
    ax.set_ylabel("observed frequency of A")
    ax.scatter([], [], facecolors="none", edgecolors="grey", s=25, label=f"bin of fewer than {few:.0f} items")
    ax.set_title("Reliability, pooled over splits")
    ax.legend(fontsize=7)
    for axes in (ax, bx):
        axes.set_xlim(-0.03, 1.03)
        axes.tick_params(labelbottom=True)
    bx.set_xlabel("mean predicted P(A) in the bin")
    bx.set_ylabel("items per bin")
    bx.set_title("Items per bin", fontsize=9)
    return png(fig, tight_layout=True)
