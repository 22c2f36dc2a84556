"""Distribution-calibrated aggregation of repeated three-way votes (spec 003): Davidson vs baselines over splits.

Each replicate is one random calibration/evaluation split (seed): for every task (dataset x judge) the
calibration part C holds ``round_half_up(calib_fraction * N)`` items (those with the smallest keyed-hash uniforms
of their item key, or of their group with ``split: group``), the same for every budget and method; the Davidson
model is fitted on C's vote counts and labels, and every method is scored on E = D \\ C with ordinal MAE, pairwise
accuracy and the reversal rate. Each replicate also returns, per method, the means of its per-item losses under
``permutations`` joint sign flips (one sign per item, the same in every split and for every method), from which ``summarise`` computes the paired
sign-flip test over all splits (joint flips) that decides the top cluster, and each split's own (spec 003 §5).

References
----------
.. [1] Distribution-Calibrated Inference Time Compute for Thinking LLM-as-a-Judge. ICLR 2026 submission (seed 003).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.votes.tally import category_counts
from judgecal_dist.errors import InputError
from judgecal_dist.methods.repeated.davidson import DavidsonAggregator
from judgecal_dist.methods.repeated.self_consistency import (
    MISSING,
    confidence_self_consistency,
    constant_tie,
    decisive_majority,
    majority_vote,
    rounded_median,
    soft_self_consistency,
)
from judgecal_dist.methods.repeated.vote_simulation import vote_counts
from judgecal_dist.splits import split_uniforms
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.itc import report as itc_report
from judgecal_dist.studies.itc.config import DAVIDSON_METHODS, METHODS, Config
from judgecal_dist.studies.itc.data import ItcInput, Task, load_tasks
from judgecal_dist.studies.preflight import check_vote_counts

__all__ = [
    "NAME",
    "Config",
    "Replicate",
    "load",
    "preflight",
    "plan",
    "run_replicate",
    "summarise",
    "calibration_part",
    "sample_order",
    "METHODS",
]

NAME = "itc"
_DAVIDSON = DAVIDSON_METHODS


@dataclass(frozen=True)
class Replicate:
    seed: int
    config: Config


def load(config: Config, engine: EngineConfig) -> ItcInput:
    """Tasks with labels and the vote counts of every budget (validated before the runner writes anything)."""
    return load_tasks(
        config.data_url,
        sorted(set(config.budgets)),
        engine=engine,
        orientation_seed=config.orientation_seed,
        synthetic_items=config.synthetic_items,
        synthetic_propensities=config.synthetic_propensities,
        synthetic_prior=config.synthetic_prior,
        synthetic_seed=config.synthetic_seed,
        pool=config.pool_orders,
    )


def preflight(config: Config, data: ItcInput) -> None:
    """Refuse, before anything is written, tasks without a vote or whose votes are all one outcome, and a
    ``calib_fraction`` whose planned splits leave a task's calibration part (the Davidson fits) or its evaluation
    part without an item. The splits are :func:`calibration_part`'s, as the replicates draw them."""
    votes = [task.votes[task.votes != MISSING] for task in data.tasks]
    counts = category_counts(np.concatenate(votes) if votes else [], signs=True, ties=True)  # task votes are signs
    where = f"{sum(t.n_items for t in data.tasks)} labelled items of {len(data.tasks)} (dataset, judge) task(s)"
    check_vote_counts(counts, source=str(config.data), where=where)
    # Pair-level splits have one size whatever the seed; grouped ones are drawn per seed.
    seeds = config.seeds if config.split == "group" else config.seeds[:1]
    for task in data.tasks:
        for seed in seeds:
            cal = calibration_part(task, seed, config.calib_fraction, config.split)
            n_cal = int(cal.sum())
            if n_cal < 1 or n_cal == task.n_items:
                raise InputError(
                    f"{config.data}: calib_fraction={config.calib_fraction:g}: split seed={seed} gets {n_cal} of the "
                    f"{task.n_items} labelled items of {task.dataset}/{task.judge_id} to calibrate and "
                    f"{task.n_items - n_cal} to evaluate (needs >= 1 on each side: the Davidson fit and the "
                    "metrics); raise calib_fraction or label more items"
                )


def plan(config: Config, data: ItcInput) -> list[Replicate]:
    return [Replicate(seed=s, config=config) for s in config.seeds]


def calibration_part(task: Task, seed: int, fraction: float, split: str = "item") -> np.ndarray:
    """Calibration mask of split ``seed``: a pure function of the item (or group) keys, the seed and the fraction.

    Pair-level: the ``floor(fraction * N + 1/2)`` items with the smallest keyed-hash uniforms (the paper's exact
    size, spec 003 §6.5). Grouped: every group whose uniform is below ``fraction`` (binomial size).
    """
    if split == "group":
        return split_uniforms(task.group_keys, [seed])[0] < fraction
    size = int(np.floor(fraction * task.n_items + 0.5))
    order = np.argsort(split_uniforms(task.item_keys, [seed])[0], kind="stable")
    mask = np.zeros(task.n_items, dtype=bool)
    mask[order[:size]] = True
    return mask


def sample_order(task: Task, seed: int, t: int) -> np.ndarray:
    """Per item, a random order of its sample columns for split ``seed`` (``budget_samples: random``).

    Budget n takes the first n columns of this order: a uniformly random n-subset of the item's samples, drawn
    anew per split and task and nested across budgets within a split (spec 003 §6.4's option). An item with fewer
    samples than columns has its own samples first (in random order), so a budget draws among them, not among
    columns it has no sample in; with every sample present the order is the plain random one.
    """
    rng = np.random.default_rng([seed, t, 1])
    keys = rng.random(task.votes.shape)
    if task.present is not None:
        keys += ~task.present  # absent columns (keys >= 1) after every present one (keys < 1)
    return np.argsort(keys, axis=1)


def _predictions(
    task: Task, b: int, cal: np.ndarray, rep: Replicate, order: np.ndarray | None
) -> tuple[dict[str, np.ndarray], dict[str, dict], int]:
    """Every method's predictions on the evaluation items, the Davidson fits, and how many evaluation items have no
    verdict at this budget (counts (0, 0, 0): kept, and answered with a tie by every method)."""
    config = rep.config
    n = task.budgets[b]
    votes, conf = task.votes, task.confidence
    if order is None:
        counts = task.counts[b]
    else:
        votes = np.take_along_axis(votes, order, axis=1)
        conf = None if conf is None else np.take_along_axis(conf, order, axis=1)
        counts = vote_counts(votes, n)
    y = task.labels
    c_eval = counts[~cal]
    preds: dict[str, np.ndarray] = {}
    fits: dict[str, dict[str, Any]] = {}
    for method in config.methods:
        if method in _DAVIDSON:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                tie, decision = _DAVIDSON[method]
                model = DavidsonAggregator(tie=tie, decision=decision, n_starts=config.n_starts, random_state=rep.seed)
                model.fit(counts[cal], y[cal])
            preds[method] = model.predict(c_eval)
            fits[method] = model.coef_ | {
                "at_bound": ",".join(p for p, v in model.at_bound_.items() if v),
                "loss": model.loss_,
                "warnings": len(caught),
            }
        elif method == "sc":
            preds[method] = majority_vote(c_eval, tie_break=config.sc_tie_break, random_state=rep.seed)
        elif method == "decisive_majority":
            preds[method] = decisive_majority(c_eval)
        elif method == "constant_tie":
            preds[method] = constant_tie(len(c_eval))
        elif method == "rounded_median":
            # Greedy decoding's rule on the first two samples (the two orders when pooled), whatever the budget.
            first = task.votes[~cal]
            second = first[:, 1] if first.shape[1] > 1 else np.full(len(first), MISSING)
            preds[method] = rounded_median(first[:, 0], second)
        elif conf is not None:
            v, w = votes[~cal, :n], conf[~cal, :n]
            preds[method] = (
                confidence_self_consistency(v, w)
                if method == "ci_sc"
                else soft_self_consistency(v, w, aggregate=method.rsplit("_", 1)[1])
            )
    return preds, fits, int((c_eval.sum(axis=1) == 0).sum())


def run_replicate(data: ItcInput, rep: Replicate) -> pd.DataFrame:
    """Metrics and sign-flip statistics of every task x budget x method on split ``rep.seed``."""
    config = rep.config
    rows = []
    for t, task in enumerate(data.tasks):
        cal = calibration_part(task, rep.seed, config.calib_fraction, config.split)
        y = task.labels[~cal]
        # One sign per (resample, item) of the task, shared by every split, method and budget: a split evaluates
        # the items other splits evaluate too, and a joint resample must flip an item the same way wherever it
        # appears, or averaging over splits would shrink the null as if re-used items were new ones.
        signs = np.random.default_rng([config.seed, t]).choice(
            np.array([-1.0, 1.0]), size=(config.permutations, len(cal))
        )
        flips = signs[:, ~cal]
        order = sample_order(task, rep.seed, t) if config.budget_samples == "random" else None
        for b, n in enumerate(task.budgets):
            preds, fits, no_verdict = _predictions(task, b, cal, rep, order)
            for method, pred in preds.items():
                err = np.abs(pred - y).astype(np.float64)
                wrong = (pred != y).astype(np.float64)
                rows.append(
                    {
                        "seed": rep.seed,
                        "dataset": task.dataset,
                        "judge_id": task.judge_id,
                        "n": n,
                        "method": method,
                        "n_cal": int(cal.sum()),
                        "n_eval": len(y),
                        "n_eval_no_verdict": no_verdict,
                        "mae": err.mean(),
                        "pa": 1.0 - wrong.mean(),
                        "rev": float((err == 2).mean()),
                        "pred_tie_rate": float((pred == 0).mean()),
                        "perm_mae": (flips @ err / len(y)).astype(np.float32),
                        "perm_pa": (flips @ wrong / len(y)).astype(np.float32),
                        **{
                            k: fits.get(method, {}).get(k)
                            for k in ("beta", "eta0", "gamma", "at_bound", "loss", "warnings")
                        },
                    }
                )
    return pd.DataFrame(rows)


def summarise(config: Config, parts: pd.DataFrame, data: ItcInput) -> StudyResult:
    """Means over splits with corrected resampled t intervals, top clusters, findings, report, figures, model."""
    return itc_report.summarise(config, parts, data)
