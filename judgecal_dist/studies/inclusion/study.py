"""Calibrate, don't curate (spec 000): aggregators x calibrators x panels on random grouped splits.

Each replicate splits the labelled items of a panel into a calibration part (fraction ``calib_fraction``, by
keyed hash of ``group_id``) and an evaluation part. For every panel (all judges, top-k by posterior mean
accuracy, one per family; chosen on calibration data only) and every aggregator, the calibration scores train
every calibrator (spec 000 §5.1 main protocol); the evaluation part is scored with NLL, Brier, ECE and accuracy
(§4). Which scores train the calibrators is ``calib_scores`` (``insample`` = the main protocol, ``nested`` 70/30 or
``crossfit``, §5.2), and ``calibrator_input`` says whether they read the aggregator's unclipped log-odds (default)
or its probability clipped at eps. Searched panels (``beam``, ``backward``, ``greedy``, ``exhaustive`` in
``panels``) are chosen by the spec's inner protocol (:mod:`~judgecal_dist.studies.inclusion.search`) and then run
through the same grid. Curated and searched panels are compared with the full panel on the same items by the
paired permutation test (§5.5(a)); NLL is also reported per agreement tercile (§3.10). The default pipeline (one-coin + beta) is also wrapped in split-conformal sets on a disjoint slice
(§3.5, §5.2: 60/20/20 of the calibration part). ``summarise`` averages over replicates with corrected resampled
t intervals (the splits share items; :func:`~judgecal_dist.stats.inference.corrected_resampled_t`),
draws the figures, and fits the default pipeline with its conformal thresholds on all labelled items as the
run's model.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv 2605.09702, 2026.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.panel import Panel, load_panel
from judgecal_dist.engine.jobs.stats import judge_cells, judge_summary
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.records import json_records
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.methods.calibration.platt import PlattCalibrator
from judgecal_dist.methods.pipeline import (
    AGGREGATORS,
    CALIBRATORS,
    PANELS,
    Settings,
    choose_panels,
    fit_pipelines,
    protocol_roles,
    protocol_scores,
)
from judgecal_dist.methods.selection.curate import l1_logistic_support, oracle_top_k, random_k
from judgecal_dist.methods.selection.diagnostics import (
    flag_below_chance,
    flag_missingness,
    flag_parse_rate,
    flag_saturation,
)
from judgecal_dist.models.binary import FORMAT
from judgecal_dist.splits import calibration_mask
from judgecal_dist.stats.equivalence import TOSTResult, tost, tost_paired
from judgecal_dist.stats.inference import summarise_over_splits
from judgecal_dist.stats.metrics import ece_positive, metric_table, pointwise_nll, reliability_bins
from judgecal_dist.stats.permutation import paired_permutation_test_many
from judgecal_dist.stats.resampling import paired_bootstrap_ci
from judgecal_dist.stats.selective import accuracy_at_confidence, auac
from judgecal_dist.stats.strata import nll_by_agreement_tercile
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.inclusion import report as inclusion_report
from judgecal_dist.studies.inclusion.config import DIAGNOSTIC_PANEL, Config, Replicate
from judgecal_dist.studies.inclusion.controls import control_lines, control_rows, scope_lines
from judgecal_dist.studies.inclusion.diagnostics import diagnose
from judgecal_dist.studies.inclusion.grain import grain_lines, regrain
from judgecal_dist.studies.inclusion.model import (
    DEFAULT_AGGREGATOR,
    DEFAULT_CALIBRATOR,
    choices,
    conformal_rows,
    export_model,
    exported_candidate,
    summarise_conformal,
)
from judgecal_dist.studies.inclusion.recommend import recommend
from judgecal_dist.studies.inclusion.search import SEARCHES, is_search, run_searches

__all__ = [
    "NAME",
    "Config",
    "Replicate",
    "InclusionInput",
    "load",
    "plan",
    "run_replicate",
    "summarise",
    "AGGREGATORS",
    "CALIBRATORS",
    "PANELS",
    "SEARCHES",
]

NAME = "inclusion"
METRICS = ("nll", "brier", "ece", "accuracy")
#: Spec §4's further metrics, summarised with intervals beside the headline ones.
SELECTIVE = ("ece_positive", "auac", "coverage_at_tau")
#: Every split is a random half of the same items: intervals over splits are Nadeau-Bengio corrected t intervals.
SPLIT_SIZES = ("n_eval", "n_cal")


@dataclass(frozen=True)
class InclusionInput:
    """What every replicate task receives: the dense panel and the per-judge statistics of all splits."""

    panel: Panel
    judges: pd.DataFrame


def load(config: Config, engine: EngineConfig) -> InclusionInput:
    """The dense labelled panel of ``config.data`` and per-judge statistics of every planned split.

    The statistics come from the engine's one-pass job (Spark for large tables, pyarrow + numpy otherwise, equal
    exactly): calibration-side votes, correct votes and parse rate of every judge in every replicate, averaged
    for the report. Input is validated here, before the runner writes anything.
    """
    panel = load_panel(
        config.data_url,
        sample=config.sample,
        orientation=config.orientation,
        orientation_seed=config.seed,
        dataset=config.dataset,
        storage_options=dict(engine.storage_options),
    )
    panel = regrain(panel, config.judge_grain, source=str(config.data))
    if len(np.unique(panel.labels)) < 2 and config.orientation != "gold_positive":
        raise ConfigError(
            f"{config.data}: labels: label: every labelled item has the same label; calibration needs "
            "both classes (or orientation=gold_positive, with penalised calibrators only)"
        )
    seeds = config.seeds
    if config.judge_grain != "judge":  # the engine's counts are per stored judge: count the regrained panel here
        return InclusionInput(panel=panel, judges=_panel_judges(panel, seeds, config.calib_fraction))
    per_split = judge_summary(judge_cells(config.data_url, seeds, config.calib_fraction, config=engine))
    cal = per_split[per_split["side"] == "calibration"]
    judges = cal.groupby("judge_id", as_index=False)[["rows", "votes", "correct"]].mean()
    judges["parse_rate"] = cal.groupby("judge_id")["parse_rate"].mean().to_numpy()
    judges["accuracy"] = judges["correct"] / judges["votes"].where(judges["votes"] > 0)
    return InclusionInput(panel=panel, judges=judges.sort_values("accuracy", ascending=False, kind="stable"))


def _panel_judges(panel: Panel, seeds: list[int], calib_fraction: float) -> pd.DataFrame:
    """Per-judge calibration-side means over splits, as :func:`load` reports them, from the dense panel."""
    masks = calibration_mask(panel.group_keys, seeds, calib_fraction)
    counts = [count_judge_votes(panel.votes[m], panel.labels[m]) for m in masks]
    votes = np.mean([n for n, _ in counts], axis=0)
    correct = np.mean([c for _, c in counts], axis=0)
    rows = float(np.mean([m.sum() for m in masks]))
    judges = pd.DataFrame(
        {"judge_id": panel.judge_ids, "rows": rows, "votes": votes, "correct": correct, "parse_rate": votes / rows}
    )
    judges["accuracy"] = judges["correct"] / judges["votes"].where(judges["votes"] > 0)
    return judges.sort_values("accuracy", ascending=False, kind="stable")


def plan(config: Config, data: InclusionInput) -> list[Replicate]:
    return [
        Replicate(
            seed=seed,
            calib_fraction=config.calib_fraction,
            aggregators=tuple(config.aggregators),
            calibrators=tuple(config.calibrators),
            panels=tuple(config.panels),
            settings=config.settings,
            conformal_alphas=tuple(config.conformal_alphas),
            permutation_resamples=config.permutation_resamples,
            n_bins=config.n_bins,
            calib_scores=config.calib_scores,
            nested_fraction=config.nested_fraction,
            crossfit_folds=config.crossfit_folds,
            search=config.search,
            l1_c=config.l1_c,
            selective_tau=config.selective_tau,
            platt_item_features=tuple(config.platt_item_features),
            tost_margin=config.tost_margin,
            controls=tuple(config.controls),
            item_bootstrap_resamples=config.item_bootstrap_resamples,
        )
        for seed in config.seeds
    ]


def run_replicate(data: InclusionInput, rep: Replicate) -> pd.DataFrame:
    """Metrics of every panel x aggregator x calibrator on the evaluation part of split ``rep.seed``.

    Returns a long table with a ``kind`` column: ``metrics`` rows (one per pipeline, with the paired test against
    the full panel), ``tercile`` rows (full panel, NLL per agreement stratum), ``search`` rows (spec Table 3:
    searched subset vs all judges through the identical nested fit), ``conformal`` rows (default pipeline, per
    alpha) and ``reliability`` rows (default aggregator before and after its default calibrator, per bin).
    """
    panel, settings = data.panel, rep.settings
    in_cal = calibration_mask(panel.group_keys, [rep.seed], rep.calib_fraction)[0]
    v_cal, y_cal, keys_cal = panel.votes[in_cal], panel.labels[in_cal], panel.group_keys[in_cal]
    v_eval, y_eval = panel.votes[~in_cal], panel.labels[~in_cal]
    roles = protocol_roles(
        rep.calib_scores, keys_cal, rep.seed, nested_fraction=rep.nested_fraction, folds=rep.crossfit_folds
    )
    rank = roles == 0 if rep.calib_scores == "nested" else slice(None)  # counts of the aggregator's items
    curated = tuple(p for p in rep.panels if not is_search(p) and not DIAGNOSTIC_PANEL.fullmatch(p))
    panels = choose_panels(curated, v_cal[rank], y_cal[rank], panel.judge_ids, panel.families, settings)
    p1 = panel.info.get("judge_grain") != "both_orders"  # there a missing verdict is also an order disagreement
    panels |= _diagnostic_panels(rep, v_cal[rank], y_cal[rank], v_eval, y_eval, panel.judge_ids, settings, p1=p1)
    searched, search_rows = run_searches(
        rep.panels, v_cal, y_cal, keys_cal, v_eval, y_eval, rep.seed, settings, rep.search
    )
    panels |= searched
    base = {"seed": rep.seed, "n_cal": int(in_cal.sum()), "n_eval": int((~in_cal).sum())}
    rows, losses, full_p = [], {}, {}
    for agg_name in rep.aggregators:
        for panel_name, cols in panels.items():
            probabilities = fit_pipelines(
                agg_name, rep.calibrators, settings, v_cal[:, cols], y_cal, v_eval[:, cols], rep.calib_scores, roles
            )
            for cal_name, p in probabilities.items():
                losses[agg_name, cal_name, panel_name] = pointwise_nll(y_eval, p, eps=settings.eps)
                rows.append(
                    base
                    | {
                        "kind": "metrics",
                        "aggregator": agg_name,
                        "calibrator": cal_name,
                        "panel": panel_name,
                        "panel_size": len(cols),
                    }
                    | metric_table(y_eval, p, eps=settings.eps, n_bins=rep.n_bins)
                    | _selective_metrics(y_eval, p, rep)
                )
                if panel_name == "all":
                    full_p[f"{agg_name}|{cal_name}"] = p
                if agg_name == DEFAULT_AGGREGATOR and panel_name == "all" and cal_name in ("none", DEFAULT_CALIBRATOR):
                    rows += _reliability_rows(base, cal_name, y_eval, p, rep.n_bins)
    table = pd.DataFrame(rows)
    _attach_paired_tests(table, losses, rep)
    extra = [base | row for row in (*_tercile_rows(full_p, v_eval, y_eval, settings.eps), *search_rows)]
    extra += [base | row for row in conformal_rows(panel, in_cal, v_eval, y_eval, rep)]
    extra += [base | row for row in _item_pair_rows(losses, rep)]
    extra += [
        base | row
        for row in control_rows(rep.controls, rep.seed, settings, v_cal, y_cal, v_eval, y_eval, rep.calib_scores, roles)
    ]
    extra += [
        base | {"kind": "scope_arm", "panel": name, "dropped": panel.n_judges - len(panels.get(name, panel.judge_ids))}
        for name in ("operating", "no_p3")
        if name in rep.panels
    ]
    if rep.platt_item_features:
        extra += [base | row for row in _platt_feature_rows(rep, settings, v_cal, y_cal, v_eval, y_eval, roles)]
    return pd.concat([table, pd.DataFrame(extra)], ignore_index=True)


def item_features(votes: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """Item features of Platt scaling with features (spec 000 eq. (3)), one column per name, from the votes.

    ``agreement`` is |2 p_MV - 1| with p_MV the share of A among the item's votes (0.5 when none voted);
    ``coverage`` the share of the panel's judges that voted on the item.
    """
    voted = (votes >= 0).sum(axis=1)
    p_mv = np.divide((votes == 1).sum(axis=1), voted, out=np.full(voted.shape, 0.5), where=voted > 0)
    columns = {"agreement": np.abs(2.0 * p_mv - 1.0), "coverage": voted / max(votes.shape[1], 1)}
    return np.column_stack([columns[name] for name in names])


def _platt_feature_rows(
    rep: Replicate,
    settings: Settings,
    v_cal: np.ndarray,
    y_cal: np.ndarray,
    v_eval: np.ndarray,
    y_eval: np.ndarray,
    roles: np.ndarray | None,
) -> list[dict]:
    """Evaluation NLL of Platt scaling without and with item features, every aggregator on the full panel.

    The calibrator's training items follow ``calib_scores`` (the nested protocol trains it on role 1 only).
    """
    trained = v_cal[roles == 1] if rep.calib_scores == "nested" and roles is not None else v_cal
    x_train, x_eval = (item_features(v, rep.platt_item_features) for v in (trained, v_eval))
    name = "platt+" + "+".join(rep.platt_item_features)
    rows = []
    for agg_name in rep.aggregators:
        s_train, y_train, s_eval = protocol_scores(agg_name, settings, v_cal, y_cal, v_eval, rep.calib_scores, roles)
        for cal_name, x in (("platt", None), (name, x_train)):
            model = PlattCalibrator(eps=settings.eps, score_input=settings.calibrator_input)
            model.fit(s_train, y_train, x=x)
            p = model.predict_proba(s_eval, x=None if x is None else x_eval)[:, 1]
            nll = float(pointwise_nll(y_eval, p, eps=settings.eps).mean())
            row = {"kind": "platt_features", "aggregator": agg_name, "calibrator": cal_name, "panel": "all", "nll": nll}
            rows.append(
                row | {f"gamma_{f}": float(c) for f, c in zip(rep.platt_item_features, model.coef_, strict=False)}
            )
    return rows


def _diagnostic_panels(
    rep: Replicate,
    v_cal: np.ndarray,
    y_cal: np.ndarray,
    v_eval: np.ndarray,
    y_eval: np.ndarray,
    judge_ids: np.ndarray,
    settings: Settings,
    *,
    p1: bool = True,
) -> dict[str, np.ndarray]:
    """The sanity floor / ceiling panels of spec §3.6 and the L1-logistic support; a panel of every judge is
    skipped (it would repeat ``all``), as for top-k. ``p1=False``: the operating arm skips the parse-rate filter."""
    n_judges = v_cal.shape[1]
    out: dict[str, np.ndarray] = {}
    for name in rep.panels:
        if not DIAGNOSTIC_PANEL.fullmatch(name):
            continue
        if name in ("operating", "no_p3"):
            cols = _scope_arm(name, v_cal, y_cal, p1=p1)
        elif name == "l1":
            support = l1_logistic_support(v_cal, y_cal, Cs=(rep.l1_c,))["support"].iloc[0]
            cols = np.asarray(support, dtype=np.intp)
        elif name.startswith("oracle"):
            cols = np.sort(
                oracle_top_k(v_eval, y_eval, judge_ids, int(name[6:]), alpha0=settings.alpha0, beta0=settings.beta0)
            )
        else:
            # Seeded per split and per panel size, so random3 and random5 are independent draws.
            cols = random_k(n_judges, int(name[6:]), rng=np.random.default_rng([rep.seed, int(name[6:])]))
        if 0 < cols.size < n_judges:
            out[name] = cols
    return out


def _scope_arm(name: str, v_cal: np.ndarray, y_cal: np.ndarray, *, p1: bool = True) -> np.ndarray:
    """Judges kept by the operating rule (P1 filter and the Bayesian below-chance flag as actions) or by dropping
    the P3-flagged judges, judged on the calibration items the aggregator sees (spec §3.8). ``p1=False`` (judges
    whose missing verdicts are also disagreements of two orders) applies the below-chance flag only."""
    n_votes, n_correct = count_judge_votes(v_cal, y_cal)
    if name == "operating":
        drop = flag_below_chance(n_votes, n_correct, method="bayes")["below_chance"].to_numpy()
        if p1:
            drop |= flag_parse_rate(n_votes, v_cal.shape[0])["filter"].to_numpy()
    else:
        drop = flag_missingness(v_cal, y_cal)["p3_flag"].to_numpy() if len(np.unique(y_cal)) == 2 else None
        if drop is None:
            return np.arange(v_cal.shape[1])
    return np.flatnonzero(~drop)


def _selective_metrics(y: np.ndarray, p: np.ndarray, rep: Replicate) -> dict[str, float]:
    """Spec §4's positive-class ECE, AUAC and coverage / accuracy at confidence >= tau (H.14)."""
    kept = accuracy_at_confidence(y, p, tau=rep.selective_tau)
    return {
        "ece_positive": ece_positive(y, p, n_bins=rep.n_bins),
        "auac": auac(y, p),
        "coverage_at_tau": kept.coverage,
        "accuracy_at_tau": kept.accuracy,
    }


def _tercile_rows(full_p: dict[str, np.ndarray], v_eval: np.ndarray, y_eval: np.ndarray, eps: float) -> list[dict]:
    """NLL per agreement tercile of the full panel (spec §3.10): agreement |2 p_MV - 1| on the evaluation items."""
    voted = (v_eval >= 0).sum(axis=1)
    p_mv = np.divide((v_eval == 1).sum(axis=1), voted, out=np.full(voted.shape, 0.5), where=voted > 0)
    table = nll_by_agreement_tercile(y_eval, full_p, np.abs(2.0 * p_mv - 1.0), eps=eps)
    out = []
    for r in table.itertuples():
        agg_name, cal_name = str(r.method).split("|")
        out.append(
            {
                "kind": "tercile",
                "aggregator": agg_name,
                "calibrator": cal_name,
                "panel": "all",
                "stratum": r.stratum,
                "stratum_items": int(r.n_items),
                "nll": float(r.nll),
            }
        )
    return out


def _reliability_rows(base: dict, cal_name: str, y: np.ndarray, p: np.ndarray, n_bins: int) -> list[dict]:
    bins = reliability_bins(y, p, n_bins=n_bins)
    return [
        base
        | {
            "kind": "reliability",
            "aggregator": DEFAULT_AGGREGATOR,
            "calibrator": cal_name,
            "panel": "all",
            "bin": int(r.bin),
            "count": int(r.count),
            "sum_p": float(r.mean_p * r.count) if r.count else 0.0,
            "sum_y": float(r.frac_pos * r.count) if r.count else 0.0,
        }
        for r in bins.itertuples()
    ]


def _attach_paired_tests(table: pd.DataFrame, losses: dict, rep: Replicate) -> None:
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
    tests = [_tost_or_none(row, rep.tost_margin) for row in d]
    table.loc[rows, "tost_p"] = np.array([np.nan if r is None else r.pvalue for r in tests])[order]
    table.loc[rows, "tost_equivalent"] = np.array([r is not None and r.equivalent for r in tests], dtype=float)[order]
    table.loc[rows, "perm_stat"] = perm.statistic[order]
    table.loc[rows, "perm_p"] = perm.pvalue[order]


def _item_pair_rows(losses: dict, rep: Replicate) -> list[dict]:
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


def _item_bootstrap_lines(table: pd.DataFrame, config: Config, metrics: pd.DataFrame | None = None) -> str:
    """Report section: the item-level paired bootstrap (H.9) and TOST (H.13) against the default pipeline; where
    Dawid-Skene falls short of the paper's tie, its per-split accuracy beside one-coin's (from ``metrics``)."""
    if table.empty:
        return ""
    lines = [
        "",
        f"## Item-level paired bootstrap and equivalence ({DEFAULT_AGGREGATOR} + {DEFAULT_CALIBRATOR} vs the others)",
        "",
        f"Item groups resampled with replacement ({config.item_bootstrap_resamples} resamples), each draw shared by "
        "every split (the splits are halves of the same items) and each split's evaluation items weighted by it; the "
        f"splits held fixed, so the interval shows item sampling only. ΔNLL = {DEFAULT_AGGREGATOR} minus the other aggregator, "
        f"both with {DEFAULT_CALIBRATOR} on all judges (negative favours {DEFAULT_AGGREGATOR}). TOST on the bootstrap "
        f"SE, margin ±{config.tost_margin:g} nats.",
        "",
        f"| other aggregator | ΔNLL | {config.ci_level:.0%} interval | TOST p | equivalent |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.aggregator} | {r.delta_nll:+.4f} | [{r.ci_low:+.4f}, {r.ci_high:+.4f}] | {r.tost_p:.4g} | "
            f"{'yes' if r.tost_equivalent else 'no'} |"
        )
    lines.append("")
    paper = {"majority": "excludes 0 in favour of one-coin", "dawid_skene": "contains 0"}
    for agg, claim in paper.items():
        row = table[table["aggregator"] == agg]
        if not row.empty:
            low, high = float(row["ci_low"].iloc[0]), float(row["ci_high"].iloc[0])
            found = (
                "excludes 0 in favour of one-coin"
                if high < 0
                else ("contains 0" if low <= 0 <= high else "excludes 0 against one-coin")
            )
            lines.append(f"- vs {agg}: the paper's interval {claim}; here it {found}.")
            if agg == "dawid_skene" and high < 0 and metrics is not None:
                lines += _dawid_skene_accuracy(metrics)
    stacking = table[table["aggregator"] == "stacking"]
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
            f"label as the preferred response would make it); here ΔNLL is {r['delta_nll']:+.4f}: {found}."
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


def _tost_or_none(d: np.ndarray, margin: float) -> TOSTResult | None:
    """TOST of one split's item differences; None when they are all equal (identical predictions: no SE)."""
    return None if np.ptp(d) == 0.0 else tost_paired(d, margin=margin)


def summarise(config: Config, parts: pd.DataFrame, data: InclusionInput) -> StudyResult:
    """Means over splits with corrected resampled t intervals, figures, the report and the default pipeline's model."""
    panel = data.panel
    rng = np.random.default_rng(config.seed)
    by = ["aggregator", "calibrator", "panel"]
    metrics = parts[parts["kind"] == "metrics"]
    summary = summarise_over_splits(
        metrics,
        by=by,
        metrics=[*METRICS, *SELECTIVE, "panel_size"],
        confidence=config.ci_level,
        rng=rng,
        split_sizes=SPLIT_SIZES,
    )
    summary = summary.rename(
        columns={f"{m}_mean": m for m in (*METRICS, *SELECTIVE, "panel_size")} | {"n_splits": "replicates"}
    )
    # Accuracy at tau is undefined in a split that keeps no item: mean over the splits that keep some.
    kept = metrics.groupby(by, as_index=False)["accuracy_at_tau"].mean()
    summary = summary.merge(kept, on=by, how="left")
    summary = summary.drop(columns=["panel_size_ci_low", "panel_size_ci_high"])
    curated = metrics[metrics["panel"] != "all"]
    if not curated.empty:
        paired = summarise_over_splits(
            curated,
            by=by,
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
        medians = per_split.groupby(by, as_index=False)[["perm_stat", "perm_p", "tost_p"]].median()
        medians = medians.merge(
            curated.groupby(by, as_index=False)["tost_equivalent"]
            .mean()
            .rename(columns={"tost_equivalent": "tost_equivalent_share"}),
            on=by,
        )
        shares = per_split.groupby(by, as_index=False)["perm_share_p05"].mean()
        summary = summary.merge(paired, on=by, how="left").merge(medians, on=by, how="left")
        summary = summary.merge(shares, on=by, how="left")
    order = {name: i for i, name in enumerate((*config.aggregators, *config.calibrators, *config.panels))}
    summary = summary.sort_values(by, key=lambda col: col.map(order), kind="stable").reset_index(drop=True)
    conformal = summarise_conformal(parts, config, rng)
    terciles = _summarise_kind(
        parts, "tercile", ["aggregator", "calibrator", "stratum"], ["nll", "stratum_items"], config, rng
    )
    search = _summarise_kind(
        parts,
        "search",
        ["panel"],
        ["panel_size", "inner_nll", "nested_nll", "nested_nll_all", "nested_delta", "evaluations"],
        config,
        rng,
    )
    featured = _summarise_kind(parts, "platt_features", ["aggregator", "calibrator"], ["nll"], config, rng)
    if not featured.empty:  # the mean feature coefficients over splits (absent on the plain Platt rows)
        gammas = [f"gamma_{f}" for f in config.platt_item_features]
        mean = parts[parts["kind"] == "platt_features"].groupby(["aggregator", "calibrator"])[gammas].mean()
        featured = featured.merge(mean.reset_index(), on=["aggregator", "calibrator"], how="left")
    paired_items = item_bootstrap(parts, config, panel)
    controls = _summarise_kind(parts, "control", ["control", "variant", "calibrator"], ["nll"], config, rng)
    scope = parts[parts["kind"] == "scope_arm"] if "kind" in parts else parts.iloc[:0]
    records = json_records(summary)
    reliability = parts[parts["kind"] == "reliability"]
    diagnostics = diagnose(panel, seed=config.seed, calib_fraction=config.calib_fraction)
    diagnostics["p2_saturation"] = saturation(summary)
    made = choices(config)
    exported = export_model(config, panel, exported_candidate(config, summary))
    made["exported_model"] = f"{exported.name}: model/model.json ({FORMAT}); export={config.export}"
    text = inclusion_report.report(
        config, summary, conformal, panel, data.judges, made, diagnostics, terciles=terciles, search=search
    )
    title, _, body = text.partition("\n")
    note = (
        f"**Exported model:** `{exported.name}` ({len(exported.judge_ids)} judges) as `model/model.json` "
        f"({FORMAT}; `judgecal score --model <this run>` applies it; `--set export=aggregator+calibrator@panel` "
        "exports another pipeline)."
    )
    return StudyResult(
        records=records,
        summary=summary,
        report=f"{title}\n\n{note}\n{body}"
        + _platt_feature_lines(featured, config)
        + _item_bootstrap_lines(paired_items, config, metrics)
        + grain_lines(diagnostics, config.judge_grain, panel, summary)
        + scope_lines(summary, scope, config)
        + control_lines(controls, config),
        figures=inclusion_report.figures(metrics, summary, reliability, config),
        model={"model.json": exported.document},
        extra={
            "panel": {"dataset": panel.dataset, "items": panel.n_items, "judges": panel.n_judges} | panel.info,
            "choices": made,
            "diagnostics": diagnostics,
            "conformal": json_records(conformal),
            "terciles": json_records(terciles),
            "search": json_records(search),
            "platt_item_features": json_records(featured),
            "controls": json_records(controls),
            "item_bootstrap": json_records(paired_items),
            "judges": json_records(data.judges),
        },
        recommendation=recommend(config, summary, panel.n_judges, panel.n_items),
    )


def _platt_feature_lines(featured: pd.DataFrame, config: Config) -> str:
    """Report section: Platt scaling without and with item features, full panel, evaluation NLL."""
    if featured.empty:
        return ""
    lines = [
        "",
        "## Platt scaling with item features",
        "",
        f"Platt scaling of each aggregator's score, alone and with the item features {', '.join(config.platt_item_features)} "
        "(agreement: |2 p_MV - 1| of the item's votes; coverage: the share of judges that voted), on all judges; "
        f"evaluation NLL, mean over splits with its {config.ci_level:.0%} interval.",
        "",
        "| aggregator | Platt | Platt with features | feature coefficients |",
        "| --- | --- | --- | --- |",
    ]
    for agg, rows in featured.groupby("aggregator", sort=False):
        by = rows.set_index("calibrator")
        plain, with_x = by.loc["platt"], by.drop(index="platt").iloc[0]
        coef = ", ".join(f"{f} {with_x[f'gamma_{f}']:+.3f}" for f in config.platt_item_features)
        cells = [f"{r['nll']:.4f} [{r['nll_ci_low']:.4f}, {r['nll_ci_high']:.4f}]" for r in (plain, with_x)]
        lines.append(f"| {agg} | {cells[0]} | {cells[1]} | {coef} |")
    return "\n".join(lines) + "\n"


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


def _summarise_kind(
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
