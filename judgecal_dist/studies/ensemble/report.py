"""Summary of the ensemble study: records, the sections of ``summary.json``, statistics, report and figures.

``results`` holds one record per condition (tier, prompt variant, join, k); ``by_subset`` the per-subset figures
of the same bootstrap; ``escalation``, ``blend``, ``variance_informed`` and ``agreement`` the escalation and
convergence analyses; ``statistics`` the correlations of spec 004 §3.13; ``intersection`` the robustness check;
``derived`` the deltas of Table 9; ``bad_input`` what the rules excluded or repaired; ``choices`` the protocol.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.stats import pearsonr

from judgecal_dist.io.records import json_records, plain
from judgecal_dist.io.score_collections import attach_tier
from judgecal_dist.methods.repeated import ensemble as ens
from judgecal_dist.models.escalation import FORMAT, EscalationPolicy, policy_from_frontier
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.ensemble.paper import PAPER, paper_here
from judgecal_dist.studies.ensemble.recommend import recommend
from judgecal_dist.studies.recommendation import exported_model, words
from judgecal_dist.studies.report_kit import (
    markdown_table,
    number,
    paper_and_here,
    percent,
    section,
)

if TYPE_CHECKING:
    from judgecal_dist.studies.ensemble.config import Config, EnsembleInput

__all__ = ["summarise"]

_KEYS = ["dataset", "tier", "prompt_variant", "join", "source"]
_CURVE = ["k", "rows", "n", "correct", "accuracy", "ci_low", "ci_high", "half_width", "n_tied", "cost_per_example"]


_COUNTS = (
    "k",
    "n",
    "rows",
    "correct",
    "n_tied",
    "n_train",
    "n_test",
    "n_train_rows",
    "n_test_rows",
    "rho_rows",
    "grid_size",
)


def _section(parts: pd.DataFrame, name: str) -> pd.DataFrame:
    """The rows of one section of the concatenated parts, with its own columns (counts back to integers)."""
    rows = parts[parts["section"] == name] if "section" in parts else parts.iloc[:0]
    rows = rows.dropna(axis=1, how="all").drop(columns=["section", "unit"], errors="ignore").reset_index(drop=True)
    return rows.astype({c: "Int64" for c in _COUNTS if c in rows})


def _conditions(parts: pd.DataFrame, config: Config) -> tuple[pd.DataFrame, pd.DataFrame]:
    curve = _section(parts, "curve")
    curve = curve.rename(
        columns={"ci_low": "accuracy_ci_low", "ci_high": "accuracy_ci_high", "half_width": "accuracy_ci_half_width"}
    )
    base = curve[
        (curve["subset"] == "all")
        & (curve["tier"] == config.reference_tier)
        & (curve["prompt_variant"] == config.baseline_variant)
        & (curve["k"] == 1)
    ]
    baseline = float(base["cost_per_example"].iloc[0]) if len(base) else float("nan")
    baseline = config.baseline_cost or baseline
    curve["cost_ratio"] = curve["cost_per_example"] / baseline
    order = [
        "tier",
        "prompt_variant",
        "k",
        "n",
        "accuracy",
        "accuracy_ci_low",
        "accuracy_ci_high",
        "n_tied",
        "cost_per_example",
        "accuracy_ci_half_width",
        "correct",
        "rows",
        "cost_ratio",
        "dataset",
        "join",
        "source",
    ]
    overall = curve[curve["subset"] == "all"][order].sort_values(["tier", "prompt_variant", "dataset", "k"])
    by_subset = curve[curve["subset"] != "all"][
        ["subset", *order[:8], "accuracy_ci_half_width", "correct", "dataset", "join"]
    ]
    by_subset = by_subset.sort_values(["tier", "prompt_variant", "dataset", "k", "subset"])
    return overall.reset_index(drop=True), by_subset.reset_index(drop=True)


def _routing_sections(parts: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    keys = ["dataset", "prompt_variant", "cheap_tier", "full_tier", "cost_cheap", "cost_full"]
    out: dict[str, list[dict[str, Any]]] = {"escalation": [], "blend": [], "variance_informed": []}
    sweep = _section(parts, "escalation")
    for key, rows in sweep.groupby(keys[:4], sort=True) if len(sweep) else []:
        cols = ["theta", "n", "accuracy", "p_escalate", "cost", "cost_ratio"]
        out["escalation"].append(
            dict(
                zip(
                    keys,
                    [plain(v) for v in (*key, rows["cost_cheap"].iloc[0], rows["cost_full"].iloc[0])],
                    strict=True,
                )
            )
            | {
                "frontier": json_records(
                    rows[rows["on_frontier"].astype(bool)].sort_values("cost", kind="stable")[cols]
                ),
                "thresholds": json_records(rows[cols]),
            }
        )
    for name in ("blend", "variance_informed"):
        table = _section(parts, name)
        for key, rows in table.groupby(keys[:4], sort=True) if len(table) else []:
            fits = {
                r.pop("fit"): {k: v for k, v in r.items() if v is not None}
                for r in json_records(rows.drop(columns=keys, errors="ignore"))
            }
            out[name].append(dict(zip(keys[:4], key, strict=True)) | fits)
    return out


def _pearson(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    ok = ~(np.isnan(x) | np.isnan(y))
    r = float(pearsonr(x[ok], y[ok])[0]) if ok.sum() > 2 and np.ptp(x[ok]) > 0 and np.ptp(y[ok]) > 0 else None
    return {"r": r, "rows": int(ok.sum())}


def _chosen_variance(scores: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Population variance of the chosen response's non-null samples; NaN with fewer than two (spec 004 §3.13)."""
    own = scores[np.arange(len(chosen)), chosen]
    enough = (~np.isnan(own)).sum(axis=1) >= 2
    return np.where(enough, ens.dispersion(own[:, None, :])[:, 0] ** 2, np.nan)


def _statistics(data: EnsembleInput, config: Config) -> list[dict[str, Any]]:
    """Dispersion-correctness and cross-tier dispersion correlations, tokens per call (spec 004 §3.13)."""
    out = []
    for host in data.collections:
        if config.reference_tier not in host.tiers:
            continue
        full = host.tiers[config.reference_tier]
        outcome = ens.winner_outcome(ens.prefix_means(full.scores, full.n_samples), host.chosen)
        sigma = ens.dispersion(full.scores).mean(axis=1)
        entry: dict[str, Any] = {
            "dataset": host.dataset,
            "prompt_variant": host.prompt_variant,
            "reference_tier": config.reference_tier,
            "mean_input_tokens_per_call": float(full.input_tokens[full.present].mean() / full.scores.shape[1]),
            "dispersion_correctness": _pearson(
                sigma[outcome.evaluable], outcome.correct[outcome.evaluable].astype(float)
            ),
            "dispersion_vs_reference": {},
        }
        ref_var = _chosen_variance(full.scores, host.chosen)
        others = [c for c in data.collections if c.prompt_variant == host.prompt_variant and c is not host]
        other_ids = [set(c.example_ids.tolist()) for c in others]
        in_others = np.array([all(i in ids for ids in other_ids) for i in host.example_ids]) if others else None
        for tier, scores in host.tiers.items():
            if tier == config.reference_tier:
                continue
            var = _chosen_variance(scores.scores, host.chosen)
            entry["dispersion_vs_reference"][tier] = {"all_rows": _pearson(var, ref_var)}
            if in_others is not None:
                # The paper's published figure (0.421) is this one: rows whose id occurs in the other collection(s).
                entry["dispersion_vs_reference"][tier]["rows_with_id_in_" + "+".join(c.dataset for c in others)] = (
                    _pearson(var[in_others], ref_var[in_others])
                )
        for other in others:
            for tier in other.tiers:
                joined = attach_tier(host, other, tier, key="id" if config.join_key == "id" else "subset_id")
                var = _chosen_variance(joined.scores, host.chosen)
                entry["dispersion_vs_reference"][tier] = {f"{config.join_key}_join": _pearson(var, ref_var)}
        out.append(entry)
    return out


def _intersection(data: EnsembleInput, config: Config) -> dict[str, Any]:
    """Conditions recomputed on the rows whose id string is in every main collection (spec 004 §3.13)."""
    mains = [c for c in data.collections if config.reference_tier in c.tiers]
    if len(mains) < 2:
        return {"collections": [c.dataset for c in mains], "ids": None, "conditions": []}
    ids = set.intersection(*(set(c.example_ids.tolist()) for c in mains))
    rows = []
    for c in mains:
        inside = np.isin(c.example_ids, list(ids))
        for tier, scores in sorted(c.tiers.items()):
            for k in (1, scores.n_samples):
                whole = ens.winner_outcome(ens.prefix_means(scores.scores[scores.present], k), c.chosen[scores.present])
                keep = inside & scores.present
                part = ens.winner_outcome(ens.prefix_means(scores.scores[keep], k), c.chosen[keep])
                n, n_all = int(part.evaluable.sum()), int(whole.evaluable.sum())
                acc, acc_all = part.correct.sum() / max(n, 1), whole.correct.sum() / max(n_all, 1)
                rows.append(
                    {
                        "dataset": c.dataset,
                        "prompt_variant": c.prompt_variant,
                        "tier": tier,
                        "k": k,
                        "n": n,
                        "accuracy": float(acc),
                        "full_n": n_all,
                        "full_accuracy": float(acc_all),
                        "delta": float(acc - acc_all),
                    }
                )
    return {"collections": [c.dataset for c in mains], "ids": len(ids), "conditions": rows}


def _derived(records: pd.DataFrame, config: Config) -> list[dict[str, Any]]:
    """Deltas of Table 9: ensemble gain per condition, prompt-variant deltas, share of the gain reached at k=3."""
    out = []
    for (tier, variant, dataset), rows in records.groupby(["tier", "prompt_variant", "dataset"], sort=True):
        acc = rows.set_index("k")["accuracy"]
        k_max = int(acc.index.max())
        gain = float(acc[k_max] - acc[1])
        entry = {
            "tier": tier,
            "prompt_variant": variant,
            "dataset": dataset,
            "ensemble_gain": gain,
            "k_max": k_max,
            "share_of_gain_at_k3": float((acc[3] - acc[1]) / gain) if 3 in acc and gain else None,
        }
        base = records[(records["tier"] == tier) & (records["prompt_variant"] == config.baseline_variant)]
        if variant != config.baseline_variant and len(base):
            b = base.set_index("k")["accuracy"]
            entry["vs_baseline_variant"] = {int(k): float(acc[k] - b[k]) for k in (1, k_max) if k in b}
        out.append(entry)
    return out


def _choices(config: Config) -> dict[str, Any]:
    return {
        "accuracy_rule": "mean of the non-null scores among the first k stored samples; chosen response strictly "
        "highest (a tie at the top is wrong); an example with a response without any non-null score is not evaluable",
        "bootstrap": f"{config.replicates} resamples of all rows of the condition (non-evaluable rows drawn and "
        f"skipped) from numpy RandomState({config.bootstrap_seed}).randint(0, N, size=(B, N)), fresh per condition; "
        f"per-subset CIs from the same resamples; linear percentiles",
        "join_key": config.join_key
        + (
            " (paper-compatible joins on the example id only)"
            if config.join_key == "id"
            else " (each tier on its own rows)"
        ),
        "cost": "input tokens once per call, output tokens x k / K; mean over the condition's rows; ratios against "
        f"{config.reference_tier} k=1 on {config.baseline_variant}"
        + (f" = {config.baseline_cost} (set)" if config.baseline_cost else " (computed)"),
        "dispersion": "population standard deviation (ddof 0) of all non-null cheap-tier samples; 0 below two",
        "split": f"stratified by subset, RandomState({config.split_seed}) shuffles each sorted subset's rows in "
        f"file order, test = first max(1, floor({config.test_fraction} n))",
        "sweeps": "ascending candidates, first strict improvement kept (ties to the smallest midpoint / pair)",
        "hard_routing": "sigma >= theta escalates when a full mean exists; escalation fraction over all responses",
        "variance_informed_cost": "full input once + full output x mean n / K at the budget cap and at the realised "
        "test budget (approximate in the paper)",
        "example_order": "file order = order of the examples' first verdict rows in the ingested table",
    }


def _engine_curve(overall: pd.DataFrame, data: EnsembleInput) -> dict[str, Any] | None:
    """The engine's one-pass accuracy-vs-k counts against the study's curve on each tier's own collection."""
    if data.engine_curve is None:
        return None
    own = overall[(overall["source"] == overall["dataset"]) & (overall["join"] == "own")]
    own = own.rename(columns={"tier": "judge_id"})[["dataset", "judge_id", "k", "n", "correct", "n_tied"]]
    both = data.engine_curve.merge(own, on=["dataset", "judge_id", "k"], suffixes=("", "_study"))
    differ = both[
        (both["n"] != both["n_study"])
        | (both["correct"] != both["correct_study"])
        | (both["n_tied"] != both["n_tied_study"])
    ]
    return {
        "rows": json_records(data.engine_curve.assign(accuracy=data.engine_curve["correct"] / data.engine_curve["n"])),
        "cells_compared": len(both),
        "cells_differing": len(differ),
        "equal": bool(len(both)) and differ.empty,
    }


def _engine_curve_lines(config: Config, check: dict[str, Any] | None) -> str:
    if check is None:
        skipped = "the spark extra is not installed" if config.engine_curve else "engine_curve: false"
        return f"\nAccuracy vs k from the engine's one-pass job: not computed ({skipped}).\n"
    verdict = "equal" if check["equal"] else f"{check['cells_differing']} cells differ"
    return (
        "\n## Accuracy vs k from the engine's one-pass job\n\n"
        f"The engine's accuracy-vs-k job (one pass over the verdicts; Spark on large tables) against the curve above "
        f"on each tier's own collection: {check['cells_compared']} (collection, tier, k) cells, counts of evaluable, "
        f"correct and tied examples {verdict}. Its counts are in `summary.json` under `engine_curve`.\n"
    )


def summarise(config: Config, parts: pd.DataFrame, data: EnsembleInput) -> StudyResult:
    from judgecal_dist.studies.ensemble import figures as ensemble_figures

    overall, by_subset = _conditions(parts, config)
    routing = _routing_sections(parts)
    agreement = _section(parts, "agreement")
    engine_check = _engine_curve(overall, data)
    policy = export_policy(config, routing)
    exported = (
        exported_model(policy.name, FORMAT, "<rule> (auto, most_accurate or cheapest)")
        if policy is not None
        else "none (no collection has both the cheap and the full tier, so no escalation policy was fitted)"
    )
    extra = {
        "by_subset": json_records(by_subset),
        **routing,
        "agreement": json_records(agreement),
        "statistics": _statistics(data, config),
        "intersection": _intersection(data, config),
        "derived": _derived(overall, config),
        "collections": [
            {
                "dataset": c.dataset,
                "prompt_variant": c.prompt_variant,
                "rows": c.n_examples,
                "tiers": {t: int(s.present.sum()) for t, s in c.tiers.items()},
            }
            for c in data.collections
        ],
        "bad_input": data.bad_input,
        "choices": _choices(config),
        "engine_curve": engine_check,
    }
    return StudyResult(
        records=json_records(overall),
        summary=overall,
        report=_report(config, overall, by_subset, extra) + _engine_curve_lines(config, engine_check),
        figures=ensemble_figures.figures(config, overall, parts, data),
        model={"model.json": policy.document} if policy is not None else {},
        extra=extra,
        recommendation=replace(recommend(config, overall), exported=exported),
    )


def export_policy(config: Config, routing: dict[str, list[dict[str, Any]]]) -> EscalationPolicy | None:
    """The hard-routing policy the run exports (``judgecal.escalation/v2``): on each collection's frontier, the
    threshold of the ``export`` rule (None when no collection was routed)."""
    frontiers = [e for e in routing["escalation"] if e["frontier"]]
    if not frontiers:
        return None
    return policy_from_frontier(
        frontiers,
        cheap_tier=config.cheap_tier,
        full_tier=config.reference_tier,
        prices=dict(config.prices),
        rule=config.export,
        score_range=(config.score_low, config.score_high),
        fitted_on={"dataset": frontiers[0]["dataset"] if len(frontiers) == 1 else None, "study": "ensemble"},
    )


def _pct(x: Any, digits: int = 2) -> str:
    """An accuracy share as a percentage without the sign (the columns say %); "—" where undefined."""
    return percent(x, digits, symbol=False, missing="—")


def _pct_bracket(low: Any, high: Any, digits: int = 2) -> str:
    """A bootstrap interval of an accuracy in percent, ``[low, high]`` (its ends, never value +- a half-width, which
    could pass 100)."""
    return f"[{_pct(low, digits)}, {_pct(high, digits)}]"


def _accuracy_lines(overall: pd.DataFrame, by_subset: pd.DataFrame) -> list[str]:
    rows = [
        [
            r.tier,
            r.prompt_variant,
            r.join,
            r.k,
            r.n,
            _pct(r.accuracy),
            _pct_bracket(r.accuracy_ci_low, r.accuracy_ci_high),
        ]
        + [r.n_tied, number(r.cost_per_example, ".5f"), number(r.cost_ratio, ".3f")]
        for r in overall.itertuples()
    ]
    k1 = by_subset[by_subset["k"].isin([1, by_subset["k"].max()])]
    subsets = []
    for (tier, variant, _, k), group in k1.groupby(["tier", "prompt_variant", "dataset", "k"], sort=True):
        cells = [
            f"{_pct(r.accuracy)} {_pct_bracket(r.accuracy_ci_low, r.accuracy_ci_high, 1)}"
            for r in group.sort_values("subset").itertuples()
        ]
        subsets.append([tier, variant, k, *cells])
    header = ["tier", "variant", "join", "k", "n", "accuracy", "95% interval", "ties", "$/ex", "× baseline"]
    return [
        *section(
            "Accuracy vs k (accuracy % with its interval, n, ties, $/example)",
            "Columns: tier = judge model; variant = prompt (base, or criteria: one category-aware sentence added); "
            "join = how tiers are matched to examples; k = samples averaged per response; n = evaluable examples; "
            "95% interval = percentile bootstrap over the examples; ties = examples whose top mean is shared (counted wrong); "
            "$/ex = mean cost per example; × baseline = cost relative to the reference tier with one sample on the "
            "base prompt.",
            rows=markdown_table(header, rows),
        ),
        *section(
            "Per subset (accuracy % [95% interval]) at k = 1 and k = K",
            rows=markdown_table(["tier", "variant", "k", *sorted(k1["subset"].unique())], subsets),
        ),
    ]


def _routing_lines(config: Config, extra: dict[str, Any]) -> list[str]:
    """Hard routing's frontier, the soft blend and the variance-informed rule, per collection."""
    lines = []
    for esc in extra["escalation"]:
        lines += section(
            f"Hard variance routing ({esc['dataset']}, {esc['cheap_tier']} -> {esc['full_tier']})",
            "Thresholds on the cost-accuracy frontier of the routing sweep (the figure adds plain ensembles): "
            + "; ".join(
                f"θ={p['theta']:.4g}: {_pct(p['accuracy'])}% at {number(p['cost_ratio'], '.3f')} of cheap+full"
                for p in esc["frontier"]
            ),
        )
    for b in extra["blend"]:
        t = b["train"]
        lines += section(
            None,
            f"Soft blend ({b['dataset']}): midpoint {number(t['midpoint'], '.5f')}, train {_pct(t['train_accuracy'])}% "
            f"(n={t['n_train']}), test {_pct(t['test_accuracy'])}% (n={t['n_test']}), "
            f"${number(t['cost_per_example'], '.5f')}/ex; midpoint tuned on all rows: "
            f"{number(b['all_rows']['midpoint'], '.5f')} ({_pct(b['all_rows']['train_accuracy'])}%).",
        )
    for v in extra["variance_informed"]:
        c, u = v["constrained"], v["unconstrained"]
        lines += section(
            None,
            f"Variance-informed ({v['dataset']}, budget ≤ {config.varinf_budget}): σ1={c['sigma1']:.5g}, "
            f"σ2={c['sigma2']:.5g}, test {_pct(c['test_accuracy'])}% (n={c['n_test']}, budget "
            f"{number(c['test_budget'], '.3f')}, ≈${number(c['cost_at_test_budget'])}/ex); unconstrained "
            f"σ1={u['sigma1']:.5g}, σ2={u['sigma2']:.5g}, test {_pct(u['test_accuracy'])}%.",
        )
    return lines


def _agreement_lines(config: Config, agreement: list[dict[str, Any]]) -> list[str]:
    if not agreement:
        return []
    bullets = [
        f"- {tier} vs {config.reference_tier} ({variant}, {join} key), k = 1..K: agreement "
        + ", ".join(_pct(a) for a in rows["agreement"])
        + "; ρ "
        + ", ".join(number(r) for r in rows["spearman"])
        for (variant, tier, join), rows in pd.DataFrame(agreement).groupby(
            ["prompt_variant", "tier", "join"], sort=True
        )
    ]
    return section("Cheap vs reference winner agreement and Spearman ρ vs k", "\n".join(bullets))


def _bad_input_lines(bad: dict[str, Any]) -> list[str]:
    bullets = [
        f"- {k}: {v}" + (f" (e.g. {bad['examples'][k]})" if k in bad["examples"] else "")
        for k, v in bad["counts"].items()
    ]
    if bad["k_differs_across_tiers"]:
        bullets.append(f"- samples per tier differ in {bad['k_differs_across_tiers']}: {bad['samples_per_tier']}")
    return section("Bad input (counted, never dropped silently)", "\n".join(bullets))


def _report(config: Config, overall: pd.DataFrame, by_subset: pd.DataFrame, extra: dict[str, Any]) -> str:
    lines = [
        "# Ensemble scoring and escalation",
        "",
        f"Data: `{config.data}`; join key `{config.join_key}`; {config.replicates} bootstrap resamples per condition.",
        *_accuracy_lines(overall, by_subset),
        *_routing_lines(config, extra),
        *_agreement_lines(config, extra["agreement"]),
        *_bad_input_lines(extra["bad_input"]),
        *paper_and_here(PAPER, paper_here(overall)),
        *section("Protocol", "\n".join(f"- {k}: {words(v)}" for k, v in extra["choices"].items())),
        "",
        "Figures: `figures/accuracy_vs_k.png`, `figures/pareto_frontier.png`, `figures/variance_vs_error.png`.",
        "",
    ]
    return "\n".join(lines)
