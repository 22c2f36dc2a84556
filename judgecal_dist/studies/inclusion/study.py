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

from dataclasses import dataclass, replace
from typing import Any

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
)
from judgecal_dist.models.binary import FORMAT
from judgecal_dist.splits import calibration_mask
from judgecal_dist.stats.metrics import ece_positive, metric_table, pointwise_nll, reliability_bins
from judgecal_dist.stats.selective import accuracy_at_confidence, auac
from judgecal_dist.stats.strata import nll_by_agreement_tercile
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.inclusion import report as inclusion_report
from judgecal_dist.studies.inclusion.config import DIAGNOSTIC_PANEL, Config, Replicate
from judgecal_dist.studies.inclusion.controls import control_lines, control_rows, scope_lines
from judgecal_dist.studies.inclusion.diagnostics import diagnose
from judgecal_dist.studies.inclusion.figures import figures
from judgecal_dist.studies.inclusion.grain import grain_lines, regrain
from judgecal_dist.studies.inclusion.model import (
    DEFAULT_AGGREGATOR,
    DEFAULT_CALIBRATOR,
    choices,
    conformal_rows,
    export_model,
    exported_candidate,
)
from judgecal_dist.studies.inclusion.paired import attach_paired_tests, item_pair_rows
from judgecal_dist.studies.inclusion.recommend import recommend
from judgecal_dist.studies.inclusion.search import SEARCHES, is_search, run_searches
from judgecal_dist.studies.inclusion.summary import saturation, side_tables, summary_table
from judgecal_dist.studies.preflight import check_labels, check_splits, check_votes
from judgecal_dist.studies.recommendation import exported_model, read_choices

__all__ = [
    "NAME",
    "Config",
    "Replicate",
    "InclusionInput",
    "load",
    "preflight",
    "plan",
    "run_replicate",
    "summarise",
    "AGGREGATORS",
    "CALIBRATORS",
    "PANELS",
    "SEARCHES",
]

NAME = "inclusion"


@dataclass(frozen=True)
class InclusionInput:
    """What every replicate task receives: the dense panel and the per-judge statistics of all splits."""

    panel: Panel
    judges: pd.DataFrame
    others: tuple[dict[str, Any], ...] = ()


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
    others = tuple(read_choices(config.compare, engine.storage_options))
    seeds = config.seeds
    if config.judge_grain != "judge":  # the engine's counts are per stored judge: count the regrained panel here
        return InclusionInput(panel, _panel_judges(panel, seeds, config.calib_fraction), others)
    per_split = judge_summary(judge_cells(config.data_url, seeds, config.calib_fraction, config=engine))
    cal = per_split[per_split["side"] == "calibration"]
    judges = cal.groupby("judge_id", as_index=False)[["rows", "votes", "correct"]].mean()
    judges["parse_rate"] = cal.groupby("judge_id")["parse_rate"].mean().to_numpy()
    judges["accuracy"] = judges["correct"] / judges["votes"].where(judges["votes"] > 0)
    return InclusionInput(panel, judges.sort_values("accuracy", ascending=False, kind="stable"), others)


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


def preflight(config: Config, data: InclusionInput) -> None:
    """Refuse, before anything is written, a panel without A/B verdicts or with only one, too few labelled items,
    or a ``calib_fraction`` whose planned splits leave a calibration part without two items of each class (the
    calibrators and the panel choice fit on it; a cross-fitted aggregator needs its folds there) or an evaluation
    part without two items (the paired tests)."""
    panel, source = data.panel, str(config.data)
    check_votes(panel, source=source)
    stacking = config.stacking_folds if "stacking" in config.aggregators else 0  # a stratified k-fold
    crossfit = config.crossfit_folds if config.calib_scores == "crossfit" else 0
    why = "the calibrators fit on both classes" + (", stacking cross-fits in stacking_folds folds" if stacking else "")
    why += ", calib_scores=crossfit uses crossfit_folds folds" if crossfit else ""
    check_labels(panel.labels, need=2, source=source, study=NAME, why="the calibrators fit on both classes")
    check_splits(
        panel.group_keys,
        panel.labels,
        config.seeds,
        config.calib_fraction,
        need_cal=2,
        need_cal_total=crossfit,
        need_cal_largest=stacking,
        need_eval=2,
        setting="calib_fraction",
        source=source,
        why=why,
    )


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
    attach_paired_tests(table, losses, rep)
    extra = [base | row for row in (*_tercile_rows(full_p, v_eval, y_eval, settings.eps), *search_rows)]
    extra += [base | row for row in conformal_rows(panel, in_cal, v_eval, y_eval, rep)]
    extra += [base | row for row in item_pair_rows(losses, rep)]
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


def _report_text(
    config: Config, summary: pd.DataFrame, sides: dict[str, pd.DataFrame], data: InclusionInput, made: dict, notes: dict
) -> str:
    """``report.md``: the study's sections, the exported model named under the title, the further sections after."""
    panel = data.panel
    text = inclusion_report.report(
        config,
        summary,
        sides["conformal"],
        panel,
        data.judges,
        made,
        notes["diagnostics"],
        terciles=sides["terciles"],
        search=sides["search"],
        item_pairs=sides["item_bootstrap"],
    )
    title, _, body = text.partition("\n")
    exported = notes["exported"]
    note = (
        f"**Exported model:** `{exported.name}` ({len(exported.judge_ids)} judges) as `model/model.json` "
        f"({FORMAT}; `judgecal score --model <this run>` applies it; `--set export=aggregator+calibrator@panel` "
        "exports another pipeline)."
    )
    return (
        f"{title}\n\n{note}\n{body}"
        + inclusion_report.platt_feature_lines(sides["platt_item_features"], config)
        + inclusion_report.item_bootstrap_lines(
            sides["item_bootstrap"],
            config,
            notes["metrics"],
            inclusion_report.dawid_skene_verdict(summary, sides["item_bootstrap"]),
        )
        + grain_lines(notes["diagnostics"], config.judge_grain, panel, summary)
        + scope_lines(summary, sides["scope"], config)
        + control_lines(sides["controls"], config)
    )


def summarise(config: Config, parts: pd.DataFrame, data: InclusionInput) -> StudyResult:
    """Means over splits with corrected resampled t intervals, figures, the report and the default pipeline's model."""
    panel = data.panel
    rng = np.random.default_rng(config.seed)
    metrics = parts[parts["kind"] == "metrics"]
    summary = summary_table(config, metrics, rng)
    sides = side_tables(config, parts, panel, rng)
    diagnostics = diagnose(panel, seed=config.seed, calib_fraction=config.calib_fraction)
    diagnostics["p2_saturation"] = saturation(summary)
    made = choices(config)
    exported = export_model(config, panel, exported_candidate(config, summary))
    made["exported_model"] = f"{exported.name}: model/model.json ({FORMAT}); export={config.export}"
    notes = {"diagnostics": diagnostics, "exported": exported, "metrics": metrics}
    reported = ("conformal", "terciles", "search", "platt_item_features", "controls", "item_bootstrap")
    return StudyResult(
        records=json_records(summary),
        summary=summary,
        report=_report_text(config, summary, sides, data, made, notes),
        figures=figures(metrics, summary, parts[parts["kind"] == "reliability"], config),
        model={"model.json": exported.document},
        extra={
            "panel": {"dataset": panel.dataset, "items": panel.n_items, "judges": panel.n_judges} | panel.info,
            "choices": made,
            "diagnostics": diagnostics,
            **{name: json_records(sides[name]) for name in reported},
            "judges": json_records(data.judges),
        },
        recommendation=replace(
            recommend(config, summary, panel.n_judges, panel.n_items, data.others),
            exported=exported_model(exported.name, FORMAT, "aggregator+calibrator@panel"),
        ),
    )
