r"""``judgecal fit``: every candidate pipeline cross-fitted on the labelled items, the choice exported with a card.

Candidates are aggregators x calibrators x panels (spec 000's pipeline, :mod:`judgecal_dist.methods.pipeline`).
Items are cut into ``folds`` folds grouped by ``group_id`` (a keyed hash, so linked copies stay together); one
replicate per fold fits every candidate on the other folds (curated panels chosen there too; the calibrator on
the aggregator's in-sample scores, stacking's out-of-fold ones) and predicts the fold. Every labelled item thus
gets one out-of-sample probability per candidate, and the candidates are compared by the mean of

.. math:: \ell_i = -y_i \log \hat p_i - (1-y_i)\log(1-\hat p_i)

over all labelled items. The rule (``rule: one_se``): the lowest mean NLL, then, among the candidates whose mean
NLL is within one standard error of it (:math:`\mathrm{sd}(\ell_i)/\sqrt n` of the best candidate's losses,
Breiman et al. 1984's rule), the one with the fewest judges, then the simplest calibrator (none < temperature <
platt < beta < isotonic), then the simplest aggregator, then the lowest NLL. The chosen candidate is refitted on
all labelled items and exported (``model/model.json``, :mod:`judgecal_dist.models`); its conformal thresholds come
from its cross-fitted probabilities, which no fit has seen.

Dawid-Skene is the one candidate fitted on more than the labelled panel: semi-supervised EM over every item of
the table with a verdict from the panel's judges (:mod:`judgecal_dist.studies.fit.ds`: the votes read and coded
once, in memory when they fit, counted into vote-pattern cells by one Spark job when they do not, same result),
the labels of the training folds anchoring it and the held-out fold's labels left latent. These fits run on the
driver when the data is loaded (a Spark session is not shipped to replicates); a replicate reads its fold's fitted model. ``predictions.parquet`` holds the exported model's
probability of every labelled item: ``judgecal score`` with the model reproduces it exactly.

References
----------
.. [1] L. Breiman, J. Friedman, R. Olshen, C. Stone. Classification and Regression Trees. Wadsworth, 1984, §3.4.3.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.panel import Panel, load_panel, load_panel_and_votes
from judgecal_dist.engine.jobs.stats import choose_engine
from judgecal_dist.errors import ConfigError
from judgecal_dist.history.judges import coded_counts, counts_frame
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.pipeline import aggregate, calibrate, calibrator, choose_panels, step1_scores
from judgecal_dist.models import pipeline_from_estimators
from judgecal_dist.splits import assign_blocks
from judgecal_dist.stats.metrics import pointwise_nll
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.fit import report
from judgecal_dist.studies.fit.config import Config, Replicate
from judgecal_dist.studies.fit.ds import TableVotes, fit_fold
from judgecal_dist.studies.preflight import check_parts, check_votes
from judgecal_dist.studies.recommendation import candidate_name, read_choices
from judgecal_dist.studies.recommendation import choose as pick

__all__ = [
    "NAME",
    "Config",
    "load",
    "preflight",
    "history_counts",
    "plan",
    "run_shared",
    "run_replicate",
    "summarise",
    "choose",
]

NAME = "fit"
T = TypeVar("T")
#: Seed offset of the fold assignment (apart from every study's split seeds).
FOLD_SEED_OFFSET = 7_000_003


@dataclass(frozen=True)
class FitInput:
    """The labelled panel and the settings every fold task needs.

    ``ds`` holds the Dawid-Skene fit of each (fold, panel), over every item of the table (module docstring);
    ``engine`` is the engine those fits (and the exported one) ran on; ``counts`` the table's per-judge counts for
    the run history when the read coded the whole table (:func:`history_counts`).
    """

    panel: Panel
    config: Config
    roles: np.ndarray
    engine: EngineConfig
    ds_engine: str = "local"
    ds: dict[tuple[int, str], DawidSkene] = field(default_factory=dict)
    ds_warnings: dict[tuple[int, str], int] = field(default_factory=dict)
    others: tuple[dict[str, Any], ...] = ()
    table: TableVotes | None = None
    counts: pd.DataFrame | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The coded table stays on the driver: replicates read their fold's fitted model from ``ds``.
        return {**self.__dict__, "table": None}


def load(config: Config, engine: EngineConfig) -> FitInput:
    """The dense labelled panel of ``config.data`` (natural orientation: the exported model reads A/B verdicts)."""
    url = config.data
    assert url is not None  # the runner requires it (Config.data_required)
    ds_engine = choose_engine(url, None, engine) if "dawid_skene" in config.aggregators else "local"
    options = dict(engine.storage_options)
    votes, counts = None, None
    if "dawid_skene" in config.aggregators and ds_engine == "local":  # one read: the panel and every item's votes
        panel, votes, whole = load_panel_and_votes(
            url, sample=config.sample, dataset=config.dataset, storage_options=options
        )
        # the run history's per-judge counts from this read, when it coded the whole table (no second read)
        counts = coded_counts(votes.rows, votes.labels) if whole else None
    else:
        # Dawid-Skene on Spark (the table beyond memory) or not fitted: only the labelled items' rows are held
        panel = load_panel(url, sample=config.sample, dataset=config.dataset, storage_options=options, scan=True)
    if len(np.unique(panel.labels)) < 2:
        raise ConfigError(f"{config.data}: labels: label: every labelled item has the same label; fit needs both")
    roles = assign_blocks(panel.group_keys, config.seed + FOLD_SEED_OFFSET, [1.0 / config.folds] * config.folds)
    if len(np.unique(roles)) < config.folds:
        raise ConfigError(
            f"folds={config.folds}: {len(np.unique(panel.group_keys))} groups leave a fold empty; lower folds"
        )
    others = tuple(read_choices(config.compare, engine.storage_options))
    data = FitInput(panel=panel, config=config, roles=roles, engine=engine, others=others)
    preflight(config, data)  # before the Dawid-Skene fits below: a degenerate panel fails them
    if "dawid_skene" not in config.aggregators:
        return data
    table = TableVotes.of(votes, panel) if votes is not None else TableVotes.read(url, panel, engine, config.sample)
    if table is not None and table.judge_counts is not None:  # the Spark job counted them on the way
        counts = counts_frame([str(j) for j in panel.judge_ids], table.judge_counts)
    data = FitInput(panel, config, roles, engine, ds_engine, others=others, table=table, counts=counts)
    for fold in range(config.folds):
        held = roles == fold
        train = ~held
        chosen = choose_panels(
            tuple(config.panels),
            panel.votes[train],
            panel.labels[train],
            panel.judge_ids,
            panel.families,
            config.settings,
        )
        for panel_name, cols in chosen.items():
            data.ds[fold, panel_name], data.ds_warnings[fold, panel_name] = counting_warnings(
                _dawid_skene, data, cols, held
            )
    return data


def history_counts(data: FitInput) -> pd.DataFrame | None:
    """The per-judge counts of ``config.data`` the run history records, when :func:`load` coded the whole table
    (None: the history reads the table for them)."""
    return data.counts


def _dawid_skene(data: FitInput, cols: np.ndarray, held: np.ndarray) -> DawidSkene:
    """Semi-supervised Dawid-Skene over every item of the table, the labels of the panel rows ``held`` left out;
    its columns are ``cols`` in order (:func:`judgecal_dist.studies.fit.ds.fit_fold`)."""
    config = data.config
    return fit_fold(
        str(config.data),
        data.panel,
        config.settings,
        data.engine,
        data.ds_engine,
        config.sample,
        cols,
        held,
        data.table,
    )


def _aggregate(
    data: FitInput,
    agg: str,
    fold: int | None,
    panel_name: str,
    cols: np.ndarray,
    v_fit: np.ndarray,
    y_fit: np.ndarray,
    v_new: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, Any]:
    """:func:`~judgecal_dist.methods.pipeline.aggregate`, except Dawid-Skene: the table-wide fit of ``fold``
    (None: every label anchoring it, for the export)."""
    settings = data.config.settings
    if agg != "dawid_skene":
        return aggregate(agg, settings, v_fit, y_fit, v_new)
    model = (
        _dawid_skene(data, cols, np.zeros(len(data.roles), dtype=bool)) if fold is None else data.ds[fold, panel_name]
    )
    return step1_scores(agg, model, v_fit, settings), step1_scores(agg, model, v_new, settings), model


def preflight(config: Config, data: FitInput) -> None:
    """Refuse, before anything is fitted or written, a panel without A/B verdicts or with only one, and folds whose
    training part (every other fold) lacks two labelled items of each class (every candidate's calibrator fits
    there; a stacking aggregator cross-fits it in ``stacking_folds`` folds)."""
    check_votes(data.panel, source=str(config.data))
    stacking = "stacking" in config.aggregators
    why = f"the calibrators fit on both classes{', stacking cross-fits in stacking_folds folds' if stacking else ''}"
    check_parts(
        data.roles,
        data.panel.labels,
        need=2,
        need_largest=config.stacking_folds if stacking else 0,
        setting="folds",
        value=config.folds,
        source=str(config.data),
        why=why,
    )


def plan(config: Config, data: FitInput) -> list[Replicate]:
    return [Replicate(seed=config.seed + k, fold=k) for k in range(config.folds)]


def run_shared(
    config: Config, data: FitInput, todo: list[Replicate], commit: Callable[[int, pd.DataFrame], None]
) -> bool:
    """With Dawid-Skene the only aggregator, run the folds here (the runner starts no Ray): its fits were made on
    the driver in :func:`load`, so a fold only fits calibrators on the labelled panel, less work than starting
    Ray. False otherwise (the runner fans the folds out)."""
    if list(config.aggregators) != ["dawid_skene"]:
        return False
    for rep in todo:
        commit(rep.seed, run_replicate(data, rep))
    return True


def run_replicate(data: FitInput, rep: Replicate) -> pd.DataFrame:
    """Every candidate fitted on the other folds, its probability of each item of fold ``rep.fold``."""
    config, panel = data.config, data.panel
    settings = config.settings
    held = data.roles == rep.fold
    V_tr, y_tr = panel.votes[~held], panel.labels[~held]
    panels = choose_panels(tuple(config.panels), V_tr, y_tr, panel.judge_ids, panel.families, settings)
    items = np.flatnonzero(held)
    rows = []
    for panel_name, cols in panels.items():
        for agg in config.aggregators:
            (s_fit, s_new, _), agg_warnings = counting_warnings(
                _aggregate, data, agg, rep.fold, panel_name, cols, V_tr[:, cols], y_tr, panel.votes[held][:, cols]
            )
            agg_warnings += data.ds_warnings.get((rep.fold, panel_name), 0) if agg == "dawid_skene" else 0
            for cal in config.calibrators:
                p, cal_warnings = counting_warnings(calibrate_all, (cal,), settings, s_fit, y_tr, s_new)
                rows.append(
                    pd.DataFrame(
                        {
                            "item": items,
                            "aggregator": agg,
                            "calibrator": cal,
                            "panel": panel_name,
                            "n_judges": len(cols),
                            "p": p[cal],
                            "warnings": agg_warnings + cal_warnings,
                        }
                    )
                )
    return pd.concat(rows, ignore_index=True).assign(fold=rep.fold)


def counting_warnings(fn: Callable[..., T], *args: Any) -> tuple[T, int]:
    """``fn(*args)`` and the number of ConvergenceWarnings it raised (recorded for the card, not printed); other
    warnings are raised again."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    converge = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out, len(converge)


def calibrate_all(
    names: Any, settings: Any, s_fit: np.ndarray, y_fit: np.ndarray, s_new: np.ndarray
) -> dict[str, np.ndarray]:
    """Each calibrator fitted on ``s_fit`` and applied to ``s_new``."""
    return {cal: calibrate(cal, settings, s_fit, y_fit, {"new": s_new})["new"] for cal in names}


def candidate_table(config: Config, parts: pd.DataFrame, labels: np.ndarray) -> pd.DataFrame:
    """Mean cross-fitted NLL and its standard error per candidate (candidates that predicted every item)."""
    y = labels[parts["item"].to_numpy()]
    parts = parts.assign(loss=pointwise_nll(y, parts["p"].to_numpy(), eps=config.eps))
    keys = ["aggregator", "calibrator", "panel"]
    table = parts.groupby(keys, as_index=False).agg(
        n=("loss", "size"), nll=("loss", "mean"), sd=("loss", "std"), n_judges=("n_judges", "max")
    )
    # Every row of a (candidate, fold) carries that fit's count: one per fold, summed over the folds.
    fold_warnings = parts.groupby([*keys, "fold"])["warnings"].first().groupby(keys).sum()
    table = table.merge(fold_warnings.rename("convergence_warnings").reset_index(), on=keys, how="left")
    table = table[table["n"] == len(labels)].copy()  # a panel skipped in some fold is not comparable
    table["se"] = table["sd"] / np.sqrt(table["n"])
    table["candidate"] = [candidate_name(*k) for k in table[keys].itertuples(index=False)]
    return table.sort_values("nll", kind="stable").reset_index(drop=True)


def choose(table: pd.DataFrame, rule: str) -> tuple[str, str]:
    """(chosen candidate, runner-up) by ``rule``: the one rule of every pipeline recommendation
    (:func:`judgecal_dist.studies.recommendation.choose`, on each candidate's cross-fitted NLL and its SE)."""
    picked = pick(table, rule)
    runner = "" if picked.runner_up is picked.chosen else str(picked.runner_up["candidate"])
    return str(picked.chosen["candidate"]), runner


def _export(data: FitInput, name: str, crossfit_p: np.ndarray) -> Any:
    """The candidate ``name`` refitted on every labelled item, as an exported pipeline."""
    config, panel = data.config, data.panel
    agg, _, rest = name.partition("+")
    cal, _, panel_name = rest.partition("@")
    settings = config.settings
    cols = choose_panels((panel_name,), panel.votes, panel.labels, panel.judge_ids, panel.families, settings).get(
        panel_name, np.arange(len(panel.judge_ids))
    )
    s_fit, _, model = _aggregate(
        data, agg, None, panel_name, cols, panel.votes[:, cols], panel.labels, panel.votes[:1, cols]
    )
    fitted = calibrator(cal, settings)
    if fitted is not None:
        fitted.fit(s_fit, panel.labels)
    conformal = [SplitConformal(alpha=a).fit(crossfit_p, panel.labels) for a in config.conformal_alphas]
    judges = [str(j) for j in panel.judge_ids[cols]]
    return pipeline_from_estimators(
        judge_ids=judges,
        aggregator_name=agg,
        aggregator=model,
        calibrator_name=cal,
        calibrator=fitted,
        settings=settings,
        conformal=conformal,
        panel=panel_name,
        ignored_judges=sorted(set(map(str, panel.judge_ids)) - set(judges)),
        fitted_on={
            "dataset": panel.dataset,
            "item_ids": sorted(str(i) for i in panel.item_ids),
            "labelled_items": len(panel.labels),
            "sample": config.sample,
            "study": NAME,
        },
    ), cols


def summarise(config: Config, parts: pd.DataFrame, data: FitInput) -> StudyResult:
    panel = data.panel
    table = candidate_table(config, parts, panel.labels)
    chosen, runner_up = choose(table, config.rule)
    exported_name = chosen if config.export == "auto" else config.export
    if exported_name not in set(table["candidate"]):
        raise ConfigError(f"export={config.export}: not among the cross-fitted candidates ({len(table)} of them)")
    by_item = parts.assign(
        candidate=[candidate_name(*k) for k in parts[["aggregator", "calibrator", "panel"]].itertuples(index=False)]
    )
    crossfit = {
        name: by_item[by_item["candidate"] == name].sort_values("item")["p"].to_numpy()
        for name in {chosen, runner_up, exported_name} - {""}
    }
    model, cols = _export(data, exported_name, crossfit[exported_name])
    p = model.predict_proba(panel.votes[:, cols])
    predictions = pd.DataFrame(
        {
            "dataset": panel.dataset,
            "item_id": panel.item_ids.astype(str),
            "label": np.where(panel.labels == 1, "A", "B"),
            "p": p,
            "verdict": np.where(p > 0.5, "A", "B"),
            "crossfit_p": crossfit[exported_name],
        }
    )
    card = report.card(config, table, chosen, runner_up, exported_name, crossfit, panel, model, data.others)
    return StudyResult(
        records=card.records,
        summary=table.drop(columns=["sd"]),
        report=card.text,
        figures=card.figures,
        model={"model.json": model.document},
        tables={"predictions.parquet": predictions, **card.tables},
        recommendation=card.recommendation,
        extra={"choice": {"rule": config.rule, "chosen": chosen, "runner_up": runner_up, "exported": exported_name}},
    )
