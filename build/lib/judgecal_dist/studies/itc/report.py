"""Summary of the itc study: means over splits, paired tests, top clusters, findings, report, figures.

The splits are random calibration/evaluation partitions of one dataset, so they share items: intervals over the S
splits and the test that decides the top cluster are corrected resampled t (Nadeau and Bengio 2003, with
n_eval / n_cal of the task), whose width does not shrink as splits are added. The paired sign-flip test of two
methods a, b (spec 003 §5) stays a test within one split: each of R resamples flips the sign of every evaluation
item's loss difference (the replicates store, per method, the flipped mean losses under shared flips);
p = (1 + #{|T*| >= |T|}) / (R + 1). It is reported per split (share of splits where it rejects), never pooled over
splits, which would treat the same items as new evidence in every split. Top cluster (Freitag et al. 2023):
methods sorted by mean (MAE ascending, PA descending) join rank 1 until the first that differs significantly from
a member.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import colours, plain_log_axis, png, pyplot
from judgecal_dist.io.records import json_records
from judgecal_dist.methods.repeated.davidson import DavidsonAggregator, davidson_features, mae_action
from judgecal_dist.methods.repeated.self_consistency import MISSING, majority_vote
from judgecal_dist.methods.repeated.vote_rates import position_counts, tie_vote_rate
from judgecal_dist.models.davidson import FORMAT, DavidsonModel, davidson_from_estimators
from judgecal_dist.stats.inference import corrected_resampled_t
from judgecal_dist.studies.base import StudyResult, interval_note
from judgecal_dist.studies.itc.config import DAVIDSON_METHODS, METHODS
from judgecal_dist.studies.itc.recommend import DEGENERATE_TIE_RATE, recommend, starred
from judgecal_dist.studies.recommendation import exported_model, words

if TYPE_CHECKING:
    from judgecal_dist.studies.itc.config import Config
    from judgecal_dist.studies.itc.data import ItcInput

__all__ = ["summarise", "permutation_pvalue", "paired_pvalue", "top_cluster", "vote_tables", "decision_grid"]

_KEYS = ["dataset", "judge_id", "n"]


def permutation_pvalue(loss_a: np.ndarray, loss_b: np.ndarray, flipped_a: np.ndarray, flipped_b: np.ndarray) -> float:
    """p-value of the paired sign-flip test from mean losses ``(S,)`` and flipped means ``(S, R)``.

    A valid test within one split (``S = 1``): the flips are the null over that split's evaluation items. Over
    several splits of one dataset it is not (the splits share items); use :func:`paired_pvalue` there.

    Examples
    --------
    >>> permutation_pvalue(np.array([0.5]), np.array([0.5]), np.zeros((1, 9)), np.zeros((1, 9)))
    1.0
    """
    t = float(np.mean(loss_a - loss_b))
    t_star = np.mean(flipped_a - flipped_b, axis=0)
    return float((1 + np.sum(np.abs(t_star) >= abs(t) - 1e-12)) / (len(t_star) + 1))


def paired_pvalue(
    loss_a: np.ndarray, loss_b: np.ndarray, flipped_a: np.ndarray, flipped_b: np.ndarray, test_train_ratio: float
) -> float:
    """p-value that methods a and b have the same mean loss, from their per-split losses ``(S,)`` on shared splits.

    With two or more splits: the corrected resampled t of the per-split differences (the splits share items, so
    their differences are correlated; ``test_train_ratio`` = n_eval / n_cal). With one split: the sign-flip test
    within it (:func:`permutation_pvalue`), exact for that split.

    Examples
    --------
    Ten half splits of one dataset whose differences average 0.01: the splits re-use the same items, so their
    agreement is not ten times the evidence of one split.

    >>> d = np.array([0.03, 0.01, -0.01, 0.02, 0.00, 0.02, 0.01, 0.00, 0.03, -0.01])
    >>> flips = np.zeros((10, 9))
    >>> round(paired_pvalue(d, np.zeros(10), flips, flips, test_train_ratio=1.0), 2)
    0.54
    """
    if len(loss_a) < 2:
        return permutation_pvalue(loss_a, loss_b, flipped_a, flipped_b)
    return corrected_resampled_t(np.asarray(loss_a) - np.asarray(loss_b), test_train_ratio=test_train_ratio).pvalue


def _split_rejections(la: np.ndarray, lb: np.ndarray, fa: np.ndarray, fb: np.ndarray, alpha: float) -> float:
    """Share of splits whose own sign-flip test rejects at ``alpha`` (a per-split description, not a test)."""
    p = [permutation_pvalue(la[s : s + 1], lb[s : s + 1], fa[s : s + 1], fb[s : s + 1]) for s in range(len(la))]
    return float(np.mean(np.asarray(p) < alpha))


def top_cluster(means: dict[str, float], pvalue: Any, *, lower_is_better: bool, alpha: float) -> list[str]:
    """Rank-1 cluster: walk the methods from the best, stop at the first significantly different from a member.

    Examples
    --------
    >>> top_cluster({"a": 0.3, "b": 0.31, "c": 0.5}, lambda x, y: 0.5 if "c" not in (x, y) else 0.01,
    ...             lower_is_better=True, alpha=0.05)
    ['a', 'b']
    """
    order = sorted(means, key=lambda m: means[m] if lower_is_better else -means[m])
    cluster = order[:1]
    for method in order[1:]:
        if any(pvalue(method, member) < alpha for member in cluster):
            break
        cluster.append(method)
    return cluster


def _ratio(group: pd.DataFrame) -> float:
    # n_2 / n_1 of the corrected t: the task's evaluation items over its calibration items.
    return float(group["n_eval"].mean() / max(group["n_cal"].mean(), 1.0))


def _summary(config: Config, parts: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (dataset, judge, n, method), g in parts.groupby([*_KEYS, "method"], sort=True):
        row: dict[str, Any] = {
            "dataset": dataset,
            "judge_id": judge,
            "n": int(n),
            "method": method,
            "splits": len(g),
            "n_eval": float(g["n_eval"].mean()),
            "n_cal": float(g["n_cal"].mean()),
        }
        if "n_eval_no_verdict" in g:  # evaluation items without a verdict at n (answered with a tie by every method)
            row["n_eval_no_verdict"] = float(g["n_eval_no_verdict"].mean())
        for m in ("mae", "pa", "rev", "pred_tie_rate"):
            row[m] = float(g[m].mean())
            if m in ("mae", "pa"):
                ci = (
                    corrected_resampled_t(g[m].to_numpy(), test_train_ratio=_ratio(g), confidence=config.ci_level)
                    if len(g) > 1
                    else None
                )
                row[f"{m}_ci_low"], row[f"{m}_ci_high"] = (ci.low, ci.high) if ci else (np.nan, np.nan)
        for p in ("beta", "eta0", "gamma"):
            if p in g and g[p].notna().any():
                row[p] = float(g[p].mean())
        if "at_bound" in g and g["at_bound"].notna().any():
            row["at_bound_share"] = float((g["at_bound"].fillna("") != "").mean())
        rows.append(row)
    return pd.DataFrame(rows)


def _clusters(config: Config, parts: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Top-cluster membership for MAE and PA per (dataset, judge, n), with the p-values against the best.

    ``p_vs_best_<metric>`` is the corrected resampled t across splits (:func:`paired_pvalue`), which decides the
    cluster; ``split_reject_share_<metric>`` is the share of splits whose own sign-flip test rejects against the
    best, reported as what it is.
    """
    summary = summary.copy()
    for metric, lower in (("mae", True), ("pa", False)):
        summary[f"top_cluster_{metric}"] = False
        summary[f"p_vs_best_{metric}"] = np.nan
        summary[f"split_reject_share_{metric}"] = np.nan
        for key, cell in parts.groupby(_KEYS, sort=True):
            by_method = {m: g.sort_values("seed") for m, g in cell.groupby("method")}
            if len({tuple(g["seed"]) for g in by_method.values()}) != 1:
                continue  # methods must share the splits to be compared
            ratio = _ratio(cell)

            def losses(a: str, metric: str = metric, by_method: dict = by_method) -> tuple[np.ndarray, np.ndarray]:
                value = by_method[a][metric].to_numpy()
                flipped = np.stack(by_method[a][f"perm_{metric}"].to_numpy()).astype(np.float64)
                return (value if metric == "mae" else 1 - value), flipped

            def pvalue(a: str, b: str, losses: Any = losses, ratio: float = ratio) -> float:
                (la, fa), (lb, fb) = losses(a), losses(b)
                return paired_pvalue(la, lb, fa, fb, ratio)

            means = {m: float(g[metric].mean()) for m, g in by_method.items()}
            cluster = top_cluster(means, pvalue, lower_is_better=lower, alpha=config.significance)
            sel = (summary[_KEYS] == pd.Series(dict(zip(_KEYS, key, strict=True)))).all(axis=1)
            summary.loc[sel & summary["method"].isin(cluster), f"top_cluster_{metric}"] = True
            best = cluster[0]
            for m in means:
                here = sel & (summary["method"] == m)
                summary.loc[here, f"p_vs_best_{metric}"] = 1.0 if m == best else pvalue(m, best)
                if m != best:
                    (la, fa), (lb, fb) = losses(m), losses(best)
                    summary.loc[here, f"split_reject_share_{metric}"] = _split_rejections(
                        la, lb, fa, fb, config.significance
                    )
    return summary


def _findings(summary: pd.DataFrame) -> dict[str, Any]:
    """The spec's expected findings (spec 003 §7.8), each with the cells it was checked on and whether it holds."""
    table = summary.set_index([*_KEYS, "method"])
    have = set(summary["method"])
    out: dict[str, Any] = {}
    if not {"davidson", "sc"} <= have:
        return {"note": "davidson and sc are both needed"}
    mae = table["mae"].unstack("method")
    gap = mae["sc"] - mae["davidson"]
    budgets = sorted(summary["n"].unique())
    per_n = {
        int(n): {
            "cells": int((gap.xs(n, level="n") > -np.inf).sum()),
            "davidson_below_sc": int((gap.xs(n, level="n") > 0).sum()),
        }
        for n in budgets
    }
    big = [n for n in per_n if n >= 4]
    out["davidson_below_sc_for_n_ge_4"] = {
        "per_n": per_n,
        "holds": bool(big) and all(per_n[n]["davidson_below_sc"] == per_n[n]["cells"] for n in big),
    }
    lo, hi = min(budgets), max(budgets)
    sc_lo, sc_hi = mae["sc"].xs(lo, level="n"), mae["sc"].xs(hi, level="n")
    d_lo, d_hi = mae["davidson"].xs(lo, level="n"), mae["davidson"].xs(hi, level="n")
    out["sc_flat_or_worse_as_n_grows"] = {
        "n": [int(lo), int(hi)],
        "sc_change": {f"{d}|{j}": float(v) for (d, j), v in (sc_hi - sc_lo).items()},
        "cells_sc_not_better_by_0.01": int((sc_hi - sc_lo >= -0.01).sum()),
        "cells": len(sc_lo),
        "davidson_within_0.01_or_better": int((d_hi - d_lo <= 0.01).sum()),
        "holds": bool((sc_hi - sc_lo >= -0.01).all() and (d_hi - d_lo <= 0.01).all()),
    }
    gap_hi = gap.xs(hi, level="n")
    by_judge = gap_hi.groupby(level="judge_id").agg(["mean", "min", "max"])
    weakest = mae["sc"].xs(hi, level="n").groupby(level="judge_id").mean().idxmax()
    out["weakest_judge_gains_most"] = {
        "n": int(hi),
        "weakest_judge (highest SC MAE)": weakest,
        "gap_sc_minus_davidson": {j: {k: float(v) for k, v in r.items()} for j, r in by_judge.iterrows()},
        "holds": bool(by_judge["mean"].idxmax() == weakest),
    }
    pif = [d for d in summary["dataset"].unique() if "Precise IF" in d]
    if pif:
        # "Predicts 0 for (almost) every pair, MAE ~ PA ~ 0.50" (spec 003 §7.8), read as: mean predicted-tie rate
        # >= 0.9 and MAE and PA within 0.02 of 0.5, for every judge at the largest budget.
        cells = summary[(summary["dataset"].isin(pif)) & (summary["method"] == "davidson") & (summary["n"] == hi)]
        out["tie_collapse_precise_if"] = {
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
    if "beta" in summary:
        beta = table.xs("davidson", level="method")["beta"].unstack("n")
        out["beta_decreases_with_n"] = {
            "cells": len(beta),
            "decreasing": int((beta[hi] < beta[lo]).sum()),
            "eta0_positive_share": float((table.xs("davidson", level="method")["eta0"] > 0).mean()),
        }
    return out


def exported_method(config: Config, summary: pd.DataFrame) -> str:
    """The Davidson variant the run exports: ``export`` when set, else the lowest mean MAE at the largest budget
    among the variants the run compared (``davidson`` when it compared none)."""
    if config.export != "auto":
        return str(config.export)
    hi = summary[(summary["n"] == summary["n"].max()) & summary["method"].isin(list(DAVIDSON_METHODS))]
    return str(hi.groupby("method")["mae"].mean().idxmin()) if len(hi) else "davidson"


def export_model(config: Config, data: ItcInput, method: str) -> DavidsonModel:
    """The Davidson variant ``method`` fitted per judge on every labelled item at the largest budget (the items
    of every dataset of that judge pooled), as a ``judgecal.davidson/v2`` model."""
    from judgecal_dist.studies.itc.data import PAIRS_SOURCE

    tie, decision = DAVIDSON_METHODS[method]
    n = max(max(task.budgets) for task in data.tasks)
    counts: dict[str, list[np.ndarray]] = {}
    labels: dict[str, list[np.ndarray]] = {}
    for task in data.tasks:
        b = list(task.budgets).index(max(task.budgets))
        counts.setdefault(task.judge_id, []).append(task.counts[b])
        labels.setdefault(task.judge_id, []).append(task.labels)
    fits = {
        judge: DavidsonAggregator(tie=tie, decision=decision, n_starts=config.n_starts, random_state=config.seed).fit(
            np.concatenate(counts[judge]), np.concatenate(labels[judge])
        )
        for judge in sorted(counts)
    }
    datasets = sorted({task.dataset for task in data.tasks})
    return davidson_from_estimators(
        fits,
        n=n,
        method=method,
        pool_orders=config.pool_orders,
        votes="score-pairs" if data.source == PAIRS_SOURCE else "verdicts",
        orientation_seed=config.orientation_seed,
        items={j: int(sum(len(y) for y in labels[j])) for j in fits},
        fitted_on={"dataset": datasets[0] if len(datasets) == 1 else None, "study": "itc"},
    )


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
        "intervals": interval_note(config.ci_level),
        "top_cluster_test": f"corrected resampled t of the paired per-split differences, alpha {config.significance}",
        "permutation_test": f"{config.permutations} sign-flip resamples within each split (reported per split)",
        "orientation": f"seeded coin per (subset, id, a, b), seed {config.orientation_seed}",
    }


def summarise(config: Config, parts: pd.DataFrame, data: ItcInput) -> StudyResult:
    summary = _clusters(config, parts, _summary(config, parts))
    exported = export_model(config, data, exported_method(config, summary))
    skipped = sorted(set(config.methods) - set(summary["method"]))
    records = json_records(summary)
    findings = _findings(summary)
    votes = vote_tables(data, int(summary["n"].max()))
    extra = {
        "findings": findings,
        "vote_tables": json_records(votes),
        "skipped_methods": {m: "no per-sample confidences in the data" for m in skipped},
        "data": data.info,
        "choices": _choices(config, data),
    }
    return StudyResult(
        records=records,
        summary=summary,
        report=_report(config, summary, extra),
        figures=_figures(summary) | {"decision_regions.png": _decision_figure(config, summary)},
        model={"model.json": exported.document},
        extra=extra,
        recommendation=replace(
            recommend(config, summary),
            exported=exported_model(
                exported.name, FORMAT, "<davidson variant> (one of " + ", ".join(DAVIDSON_METHODS) + ")"
            ),
        ),
    )


def _report(config: Config, summary: pd.DataFrame, extra: dict[str, Any]) -> str:
    hi = int(summary["n"].max())
    lines = [
        "# Davidson aggregation vs self-consistency",
        "",
        f"Data: `{config.data}` ({extra['choices']['source']}); {config.replicates} splits, calibration fraction "
        f"{config.calib_fraction}. Each cell: MAE (pairwise accuracy) on the evaluation part; n = sampled verdicts "
        "per item. MAE is the mean absolute error of the predicted preference in {-1, 0, +1} (0 = tie); pairwise "
        "accuracy (PA) the share of pairs predicted exactly. * = in the top cluster (no method significantly "
        f"better: corrected resampled t of the paired differences over splits); † = predicts a tie for {DEGENERATE_TIE_RATE:.0%} or more of the pairs, "
        "so its MAE reflects how often the labels are ties and it is never starred.",
        "",
    ]
    star = starred(summary)
    methods = [m for m in config.methods if m in set(summary["method"])]
    for judge, rows in summary.groupby("judge_id", sort=True):
        lines += [
            f"## {judge}",
            "",
            "| dataset | n | " + " | ".join(methods) + " |",
            "| --- | --- | " + " | ".join("---" for _ in methods) + " |",
        ]
        for (dataset, n), cell in rows.groupby(["dataset", "n"], sort=True):
            by = cell.assign(star=star[cell.index]).set_index("method")
            cells = [
                f"{by.at[m, 'mae']:.3f}{_mark(by.loc[m])} ({by.at[m, 'pa']:.3f})" if m in by.index else "—"
                for m in methods
            ]
            lines.append(f"| {dataset} | {n} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Findings the paper expects, checked on this data", ""]
    for name, value in extra["findings"].items():
        holds = value.get("holds") if isinstance(value, dict) else None
        verdict = "holds" if holds else "does not hold" if holds is False else "(information)"
        lines.append(f"- {_finding(name, value)}: **{verdict}**")
    lines += _vote_section(extra["vote_tables"])
    if extra["skipped_methods"]:
        lines += ["", "Skipped methods: " + "; ".join(f"{m} ({why})" for m, why in extra["skipped_methods"].items())]
    bad = extra["data"].get("bad_input", {}).get("counts", {})
    shares = extra["data"].get("label_shares", {})
    lines += [
        "",
        "## Input",
        "",
        "- label shares: " + (_pairs(shares) or "not recorded"),
        "- bad input: " + (_pairs(bad) or "none"),
        "",
        "## Protocol",
        "",
    ] + [f"- {k}: {words(v)}" for k, v in extra["choices"].items()]
    lines += [
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


#: The paper's own numbers for the two vote tables (WMT23 ZH->EN and its prompts; data the project does not have).
PAPER_VOTE_TABLES = (
    "The paper's tie-vote rates (12.4-37.6% by model and prompt on WMT23) and its positional bias (336 "
    "human-tie pairs of WMT23 ZH->EN in both orders: gemini-2.5-flash 14.5% forced choice, 3.1% with ties allowed; "
    "qwen3-next-80b -8.0% and 0.6%) come from WMT23 ratings and thinking-model votes the project does not have, so "
    "they cannot be reproduced here; the formulas are checked against the paper's own counts in the tests."
)


def vote_tables(data: ItcInput, n: int) -> pd.DataFrame:
    """Per (dataset, judge): tie-vote rates (all pairs, tie-labelled pairs, decisive pairs) and positional bias.

    Over each item's first ``n`` samples. Positional bias needs to know which response each sample showed first
    (pooled orders, synthetic:g2); elsewhere its columns are empty. ``bias`` is (First - Second) / (First +
    Second), ``bias_with_ties`` divides by every judgement (how the paper's tie-allowed column was computed).
    """
    rows = []
    for task in data.tasks:
        votes = task.votes[:, :n]
        row: dict[str, Any] = {
            "dataset": task.dataset,
            "judge_id": task.judge_id,
            "samples": votes.shape[1],
            "votes": int((votes != MISSING).sum()),
            "tie_vote_rate": tie_vote_rate(votes),
            "tie_vote_rate_tie_pairs": tie_vote_rate(votes[task.labels == 0]),
            "tie_vote_rate_decisive_pairs": tie_vote_rate(votes[task.labels != 0]),
        }
        if task.shown_first is not None:
            pos = position_counts(votes, task.shown_first[: votes.shape[1]])
            row |= {
                "first": pos.first,
                "second": pos.second,
                "tie": pos.tie,
                "bias": pos.bias,
                "bias_with_ties": pos.bias_with_ties,
            }
        rows.append(row)
    return pd.DataFrame(rows)


def _vote_section(records: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Tie votes and presentation order",
        "",
        "Share of tie votes among a judge's parsed votes (all pairs; pairs labelled tie; pairs with a better "
        "response) and positional bias: (First - Second) / (First + Second), where First counts votes for "
        "whichever response the judge saw first; 'with ties' divides by every vote.",
        "",
        "| dataset | judge | votes | tie votes | on tie pairs | on decisive pairs | first | second | tie | bias | "
        "bias with ties |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order_known = False
    for r in records:
        pct = [f"{r[k]:.1%}" if r.get(k) is not None and np.isfinite(r[k]) else "—" for k in _RATES]
        if r.get("first") is not None:
            order_known = True
            pos = [str(r[k]) for k in ("first", "second", "tie")] + [
                f"{r[k]:+.1%}" if r[k] is not None and np.isfinite(r[k]) else "—" for k in ("bias", "bias_with_ties")
            ]
        else:
            pos = ["—"] * 5
        lines.append(f"| {r['dataset']} | {r['judge_id']} | {r['votes']} | " + " | ".join(pct + pos) + " |")
    lines.append("")
    if not order_known:
        lines.append(
            "Positional bias: not measurable on this data, which does not record which response each sample showed "
            "first (rb2-k8 scores each response on its own; datasets with <judge>/ab and <judge>/ba judges such as "
            "LLMBar give it with `pool_orders: true`)."
        )
    lines.append(PAPER_VOTE_TABLES)
    return lines


_RATES = ("tie_vote_rate", "tie_vote_rate_tie_pairs", "tie_vote_rate_decisive_pairs")


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


def _decision_figure(config: Config, summary: pd.DataFrame) -> bytes:
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


def _figures(summary: pd.DataFrame) -> dict[str, bytes]:
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
