"""Continuous-score calibration study (spec 001 §7-§8.3): HB linear vs Neural-ODE flow vs marginal OT by budget.

Arms (``judge`` in the results): each real judge tier in ``judges`` (RewardBench 2 k=8: sample 0 of the tier vs the
full tier's 8-sample mean, :mod:`~judgecal_dist.studies.continuous.data`) and, with ``synthetic: true``, the
paper's strict-and-compressing judge drawn on the same reference scores (:mod:`judgecal_dist.io.synthetic_judge`).
Rubric = RewardBench 2 subset.

Per seed and rubric the prompt groups are ordered by a keyed hash of ``group_id`` (:mod:`judgecal_dist.splits`):
the first ``test_groups`` groups are the test set (fixed across budgets and correctors), the others the anchor
pool in hash order, so budget :math:`n` takes the first :math:`\\min(n, |\\text{pool}_r|)` pool items (nested).

Replicates (Ray tasks): (arm, budget, seed chunk) x {``linear``: raw, OT and the HB linear corrector — NUTS with
partial pooling for the first ``nuts_seeds`` seeds, the exact conjugate posterior mean otherwise; ``flow``: one
rubric-embedded flow per seed, all seeds of the chunk trained as one stacked model, on a GPU worker when the cluster
has one; with ``flow_rubrics: [per_rubric]`` also one plain flow per rubric, ``flow_per_rubric``}. Baselines beside
them: ``ot_oracle`` (the quantile map fitted on the test marginals themselves, the shape floor) and ``constant`` (the
anchors' mean). Each table row is (judge, rubric, corrector, budget, seed) with the test metrics, the predictive
interval's coverage and width (linear_hb, flows) and the per-item prediction latency.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm, spearmanr

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.cluster.flow_tasks import FlowJob, fit_predict_flows
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.continuous.hb_linear import ConvergenceGateWarning, HierarchicalLinear
from judgecal_dist.methods.continuous.linear_conjugate import ConjugateLinear, sufficient_stats
from judgecal_dist.methods.continuous.score_flow import loss_change, route_for_review
from judgecal_dist.methods.continuous.score_transport import MarginalOT
from judgecal_dist.stats.continuous_metrics import continuous_metrics
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.continuous import report as continuous_report
from judgecal_dist.studies.continuous.config import Config, ContinuousInput
from judgecal_dist.studies.continuous.data import SYNTHETIC, load_paired_scores
from judgecal_dist.studies.continuous.design import RUBRIC_STRIDE, arm_data, draw_anchors, flow_settings, split

__all__ = ["NAME", "Config", "ContinuousInput", "Replicate", "load", "plan", "run_replicate", "summarise", "split"]

NAME = "continuous"
CORRECTORS = ("raw", "linear_hb", "flow", "flow_per_rubric", "ot", "ot_oracle", "constant")


@dataclass(frozen=True)
class Replicate:
    """One task: ``kind`` (linear | flow) for ``arm`` at ``budget`` over ``seeds``; ``seed`` is the part id."""

    seed: int
    kind: str
    arm: str
    budget: int
    seeds: tuple[int, ...]
    config: Config


def load(config: Config, engine: EngineConfig) -> ContinuousInput:
    """Paired scores of the real arms, plus the synthetic arm's reference items (judge drawn per seed)."""
    judges = tuple(config.judges) or ("mini",)
    scores = load_paired_scores(
        config.data_url, judges=judges, variant=config.variant, storage_options=dict(engine.storage_options)
    )
    arms = list(config.judges)
    if config.synthetic:
        base = max((j for j in judges if j != "full"), key=lambda j: int((scores["judge_id"] == j).sum()), default=None)
        if base is None:
            raise ConfigError("synthetic: needs a cheap judge tier (mini or nano) for its reference items")
        synth = scores[scores["judge_id"] == base].assign(judge_id=SYNTHETIC, j=np.nan)
        scores = pd.concat([scores[scores["judge_id"].isin(arms)], synth], ignore_index=True)
        arms.append(SYNTHETIC)
    rubrics = tuple(sorted(scores["rubric"].unique()))
    small = scores.groupby("rubric")["group_id"].nunique()
    small = small[small <= config.test_groups]
    if not small.empty:
        raise InputError(
            f"{config.data}: group_id: rubrics {small.index.tolist()} have <= test_groups={config.test_groups} "
            "prompt groups, leaving no anchors; lower test_groups"
        )
    return ContinuousInput(scores=scores, rubrics=rubrics, arms=tuple(arms))


def plan(config: Config, data: ContinuousInput) -> list[Replicate]:
    seeds = config.seeds
    nuts, rest = seeds[: config.nuts_seeds], seeds[config.nuts_seeds :]
    reps: list[Replicate] = []
    for arm in data.arms:
        for budget in sorted(config.budgets):
            # NUTS seeds one per task (each fit is seconds); conjugate seeds in chunks; flows in stacked chunks.
            chunks: list[tuple[str, tuple[int, ...]]] = [("linear", (s,)) for s in nuts]
            step = config.linear_batch
            chunks += [("linear", tuple(rest[i : i + step])) for i in range(0, len(rest), step)]
            chunks += [
                ("flow", tuple(seeds[i : i + config.flow_batch])) for i in range(0, len(seeds), config.flow_batch)
            ]
            for kind, chunk in chunks:
                reps.append(Replicate(len(reps), kind, arm, int(budget), chunk, config))
    return reps


def _timed(predict: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    """Predictions and the wall milliseconds per item of producing them (reported, never asserted)."""
    t0 = time.perf_counter()
    out = np.asarray(predict(), dtype=np.float64)
    return out, 1e3 * (time.perf_counter() - t0) / max(out.size, 1)


def interval_metrics(y: np.ndarray, low: np.ndarray, high: np.ndarray) -> dict[str, float]:
    """Coverage (share of ``y`` inside [low, high]) and mean width of per-item predictive intervals."""
    return {"coverage": float(np.mean((y >= low) & (y <= high))), "interval_width": float(np.mean(high - low))}


def conjugate_interval(
    anchor_j: np.ndarray, anchor_y: np.ndarray, j: np.ndarray, level: float, *, nodes: int = 60
) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed posterior-predictive interval of the single-cell conjugate corrector at scores ``j`` (spec §3.6,
    §3.8b): exact mixture quantiles at the distinct scores, or at ``nodes`` points interpolated when there are more
    (the quantiles are smooth in ``j``)."""
    cell = ConjugateLinear().fit(sufficient_stats(anchor_j, anchor_y))
    at = np.unique(j)
    if at.size > nodes:
        at = np.linspace(at[0], at[-1], nodes)
    tail = (1.0 - level) / 2.0
    low, high = cell.predictive_quantiles(at, tail), cell.predictive_quantiles(at, 1.0 - tail)
    return np.interp(j, at, low), np.interp(j, at, high)


def _row(
    arm: str,
    rubric: str,
    corrector: str,
    budget: int,
    seed: int,
    y: np.ndarray,
    y_hat: np.ndarray,
    figures: bool,
    /,
    **extra: Any,
) -> dict[str, Any]:
    row = {"judge": arm, "rubric": rubric, "corrector": corrector, "budget": budget, "seed": seed}
    row |= continuous_metrics(y, y_hat) | extra
    row["y_items"] = y.tolist() if figures else None
    row["y_hat_items"] = np.asarray(y_hat, dtype=float).tolist() if figures else None
    return row


@dataclass(frozen=True)
class _LinearFit:
    """One seed's linear fit over all rubrics: per rubric (alpha, beta, sigma, canary), the sampler's centred
    parameter count, the predictive's moments, the fit's diagnostics, and the NUTS model (None for the conjugate)."""

    params: dict[str, tuple[float, float, float, float]]
    centred: dict[str, int]
    moments: dict[str, dict[str, Any]]
    diag: dict[str, Any]
    nuts: HierarchicalLinear | None


def _moments(rubrics: list[str], cov: np.ndarray, sigma2: np.ndarray) -> dict[str, dict[str, Any]]:
    """The predictive's moments per rubric: with alpha, beta and sigma, the exported model of this fit."""
    return {
        r: {"cov_aa": cov[i, 0, 0], "cov_ab": cov[i, 0, 1], "cov_bb": cov[i, 1, 1], "sigma2": sigma2[i]}
        for i, r in enumerate(rubrics)
    }


def _nuts_fit(config: Config, anchors: pd.DataFrame, rubrics: list[str], seed: int) -> _LinearFit:
    model = HierarchicalLinear(
        num_warmup=config.nuts_warmup,
        num_samples=config.nuts_samples,
        num_chains=config.nuts_chains,
        random_state=seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceGateWarning)  # recorded as converged=False, reported as failed
        model.fit(anchors["j"], anchors["y"], anchors["rubric"], rubrics=rubrics)
    params = {
        r: (model.alpha_[i], model.beta_[i], model.sigma_[i], model.canary_prob_[i]) for i, r in enumerate(rubrics)
    }
    centred = {r: int(model.centred_[:, i].sum()) for i, r in enumerate(rubrics)}  # of (alpha_r, beta_r)
    diag = {"converged": model.converged_, "rhat_max": max(model.rhat_.values()), "divergences": model.divergences_}
    diag["ess_min"] = min(min(model.ess_bulk_.values()), min(model.ess_tail_.values()))
    diag |= {"retried": model.retried_, "leapfrog_steps": model.mean_steps_}
    return _LinearFit(params, centred, _moments(rubrics, *model.posterior_moments()), diag, model)


def _conjugate_fit(anchors: pd.DataFrame, rubrics: list[str]) -> _LinearFit:
    masks = np.stack([(anchors["rubric"] == r).to_numpy() for r in rubrics])
    j, y = anchors["j"].to_numpy(), anchors["y"].to_numpy()
    conj = ConjugateLinear().fit(sufficient_stats(np.where(masks, j, np.nan), np.where(masks, y, np.nan)))
    params = {r: (*conj.mean_[i], conj.sigma_mean_[i], conj.canary_prob_[i]) for i, r in enumerate(rubrics)}
    diag = {"converged": True, "rhat_max": np.nan, "divergences": 0, "ess_min": np.nan}
    diag |= {"retried": False, "leapfrog_steps": np.nan}
    centred = dict.fromkeys(rubrics, -1)  # no sampler
    return _LinearFit(params, centred, _moments(rubrics, *conj.posterior_moments()), diag, None)


def _linear_rubric_rows(
    rep: Replicate,
    seed: int,
    rubric: str,
    rows: pd.DataFrame,
    anchors: pd.DataFrame,
    tests: pd.DataFrame,
    fit: _LinearFit,
    figures: bool,
) -> list[dict[str, Any]]:
    """The raw, ot_oracle (smallest budget only), linear_hb, ot and constant rows of one rubric."""
    config = rep.config
    out = []
    t, a = tests[tests["rubric"] == rubric], anchors[anchors["rubric"] == rubric]
    y, j = t["y"].to_numpy(), t["j"].to_numpy()
    key = (rep.arm, rubric)
    # n_items: the rubric's items, of which every seed's test set is a subset (the intervals' overlap).
    n: dict[str, Any] = {"n_anchors": len(a), "n_test": len(t), "n_items": int((rows["rubric"] == rubric).sum())}
    if rep.budget == min(config.budgets):  # raw and ot_oracle do not depend on the budget: one row per seed
        out.append(_row(*key, "raw", rep.budget, seed, y, j, figures, **n, latency_ms_per_item=0.0))
        # The test marginals' own quantile map (uses the test labels): the floor of the distribution metrics.
        oracle, ms = _timed(lambda: MarginalOT().fit(j, y).predict(j))
        out.append(_row(*key, "ot_oracle", rep.budget, seed, y, oracle, figures, **n, latency_ms_per_item=ms))
    alpha, beta, sigma, canary = fit.params[rubric]
    if fit.nuts is not None:
        low, high = fit.nuts.predict_interval(j, [rubric] * len(j), level=config.interval_level, random_state=seed)
    else:
        low, high = conjugate_interval(a["j"].to_numpy(), a["y"].to_numpy(), j, config.interval_level)
    linear, ms = _timed(lambda: alpha + beta * j)
    out.append(
        _row(
            *key,
            "linear_hb",
            rep.budget,
            seed,
            y,
            linear,
            figures,
            **n,
            **interval_metrics(y, low, high),
            latency_ms_per_item=ms,
            alpha=alpha,
            beta=beta,
            sigma=sigma,
            canary_prob=canary,
            linear_fit="nuts" if fit.nuts is not None else "conjugate",
            centred_params=fit.centred[rubric],
            **fit.moments[rubric],
            **fit.diag,
        )
    )
    ot = MarginalOT().fit(a["j"], a["y"])
    mapped, ms = _timed(lambda: ot.predict(j))
    out.append(_row(*key, "ot", rep.budget, seed, y, mapped, figures, **n, latency_ms_per_item=ms))
    level = float(a["y"].mean())
    constant, ms = _timed(lambda: np.full(len(j), level))
    out.append(_row(*key, "constant", rep.budget, seed, y, constant, figures, **n, latency_ms_per_item=ms))
    return out


def _linear_rows(data: ContinuousInput, rep: Replicate, seed: int) -> list[dict[str, Any]]:
    config = rep.config
    rows = arm_data(data, rep.arm, seed)
    test, pool = split(rows, seed, config.test_groups)
    anchors, tests = draw_anchors(rows, pool, rep.budget), rows.iloc[test]
    figures = config.item_seed_figures and seed == config.seed
    rubrics = list(data.rubrics)
    use_nuts = seed < config.seed + config.nuts_seeds
    fit = _nuts_fit(config, anchors, rubrics, seed) if use_nuts else _conjugate_fit(anchors, rubrics)
    return [r for rubric in rubrics for r in _linear_rubric_rows(rep, seed, rubric, rows, anchors, tests, fit, figures)]


def _pad(columns: list[np.ndarray], fill: float) -> np.ndarray:
    width = max(len(c) for c in columns)
    return np.stack(
        [np.pad(np.asarray(c, dtype=np.float64), (0, width - len(c)), constant_values=fill) for c in columns]
    )


def _flow_job(
    config: Config,
    per_member: list[tuple[pd.DataFrame, pd.DataFrame]],
    seeds: tuple[int, ...],
    code: dict[str, int],
    n_rubrics: int,
) -> FlowJob:
    """One stacked fit: member m trains on ``per_member[m][0]`` (anchors) and predicts ``per_member[m][1]`` (tests)."""
    return FlowJob(
        j=_pad([a["j"].to_numpy() for a, _ in per_member], np.nan),
        y=_pad([a["y"].to_numpy() for a, _ in per_member], np.nan),
        rubric=_pad([a["rubric"].map(code).to_numpy() for a, _ in per_member], 0).astype(np.int64),
        test_j=_pad([t["j"].to_numpy() for _, t in per_member], 1.0),
        test_rubric=_pad([t["rubric"].map(code).to_numpy() for _, t in per_member], 0).astype(np.int64),
        seeds=seeds,
        n_rubrics=n_rubrics,
        settings=flow_settings(config),
        n_passes=config.flow_passes,
        threads=config.flow_threads,
    )


def _flow_predictions(
    data: ContinuousInput,
    config: Config,
    per_seed: list[tuple[pd.DataFrame, pd.DataFrame]],
    seeds: tuple[int, ...],
    mode: str,
) -> tuple[list[np.ndarray], list[np.ndarray], dict[str, Any]]:
    """MC mean and s.d. of every seed's test items (in test-row order) from the shared rubric-embedded flow or from
    one plain flow per rubric (members = seeds x rubrics of one stacked fit), and the fit's facts."""
    tests = [t for _, t in per_seed]
    if mode == "shared":
        code = {r: i for i, r in enumerate(data.rubrics)}
        result = fit_predict_flows(_flow_job(config, per_seed, seeds, code, len(data.rubrics)))
        means = [result.mean[m, : len(t)] for m, t in enumerate(tests)]
        sds = [result.sd[m, : len(t)] for m, t in enumerate(tests)]
        histories = np.asarray(result.loss_history)  # (epochs run, seeds)
    else:
        members, member_seeds, where = [], [], []
        for m, (anchors, t) in enumerate(per_seed):
            for r, rubric in enumerate(data.rubrics):
                members.append((anchors[anchors["rubric"] == rubric], t[t["rubric"] == rubric]))
                member_seeds.append(seeds[m] * RUBRIC_STRIDE + r)
                where.append((m, (t["rubric"] == rubric).to_numpy()))
        result = fit_predict_flows(_flow_job(config, members, tuple(member_seeds), dict.fromkeys(data.rubrics, 0), 1))
        means = [np.full(len(t), np.nan) for t in tests]
        sds = [np.full(len(t), np.nan) for t in tests]
        for k, (m, sel) in enumerate(where):
            means[m][sel], sds[m][sel] = result.mean[k, : sel.sum()], result.sd[k, : sel.sum()]
        # A seed's loss: the mean of its rubric members' losses (each a mean over that rubric's anchors).
        histories = np.asarray(result.loss_history).reshape(-1, len(seeds), len(data.rubrics)).mean(2)
    facts = {
        "device": result.device,
        "fit_seconds": (result.seconds - result.predict_seconds) / len(seeds),
        "latency_ms_per_item": 1e3 * result.predict_seconds / max(sum(len(t) for t in tests), 1),
        "histories": histories,
    }
    return means, sds, facts


def _training_facts(history: np.ndarray, config: Config, *, first: bool) -> dict[str, Any]:
    """One flow's training: final loss, epochs run, the relative change of its last loss window
    (:func:`~judgecal_dist.methods.continuous.score_flow.loss_change`) and, on its first rubric's row only (one copy
    per fit), the loss at every epoch for the report's training figure."""
    return {
        "final_loss": float(history[-1]),
        "epochs_run": len(history),
        "loss_change": float(loss_change(history, config.flow_window)[0]),
        "loss_curve": history.tolist() if first else None,
    }


def _flow_rows(data: ContinuousInput, rep: Replicate) -> list[dict[str, Any]]:
    config = rep.config
    per_seed = []
    items = pd.Series(dtype=np.int64)
    for seed in rep.seeds:
        rows = arm_data(data, rep.arm, seed)
        items = rows.groupby("rubric").size()
        test, pool = split(rows, seed, config.test_groups)
        per_seed.append((draw_anchors(rows, pool, rep.budget), rows.iloc[test]))
    z = float(norm.ppf(0.5 + config.interval_level / 2))
    out = []
    for mode in config.flow_rubrics:
        corrector = "flow" if mode == "shared" else f"flow_{mode}"
        means, sds, facts = _flow_predictions(data, config, per_seed, rep.seeds, mode)
        for m, (seed, (anchors, tests)) in enumerate(zip(rep.seeds, per_seed, strict=True)):
            figures = config.item_seed_figures and seed == config.seed
            for rubric in data.rubrics:
                sel = (tests["rubric"] == rubric).to_numpy()
                y, y_hat, s = tests["y"].to_numpy()[sel], means[m][sel], sds[m][sel]
                routed = route_for_review(s, budget=config.review_budget)
                err = np.abs(y_hat - y)
                extra = {
                    "n_anchors": int((anchors["rubric"] == rubric).sum()),
                    "n_test": int(sel.sum()),
                    "n_items": int(items.get(rubric, 0)),
                    "mc_sd_mean": float(s.mean()),
                    # Does the MC s.d. rank the items by their error (spec §6)? NaN when it or the error is constant.
                    "sd_error_spearman": float(spearmanr(s, err).statistic) if np.ptp(s) and np.ptp(err) else np.nan,
                    "routed_fraction": float(routed.mean()),
                    "routed_mae": float(err[routed].mean()) if routed.any() else np.nan,
                    "kept_mae": float(err[~routed].mean()) if (~routed).any() else np.nan,
                    **_training_facts(facts["histories"][:, m], config, first=rubric == data.rubrics[0]),
                    "device": facts["device"],
                    "fit_seconds": facts["fit_seconds"],
                    "latency_ms_per_item": facts["latency_ms_per_item"],
                }
                extra |= interval_metrics(y, y_hat - z * s, y_hat + z * s)
                out.append(_row(rep.arm, rubric, corrector, rep.budget, seed, y, y_hat, figures, **extra))
    return out


def run_replicate(data: ContinuousInput, rep: Replicate) -> pd.DataFrame:
    """Test metrics of every (rubric, corrector, seed) of the replicate; item-level predictions for the first seed."""
    if rep.kind == "flow":
        rows = _flow_rows(data, rep)
    else:
        rows = [r for seed in rep.seeds for r in _linear_rows(data, rep, seed)]
    return pd.DataFrame(rows).assign(replicate=rep.seed, kind=rep.kind)


def summarise(config: Config, parts: pd.DataFrame, data: ContinuousInput) -> StudyResult:
    return continuous_report.summarise(config, parts, data)
