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
has one}. Each table row is (judge, rubric, corrector, budget, seed) with the test metrics.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.flow_tasks import FlowJob, fit_predict_flows
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.synthetic_judge import strict_compressing_judge
from judgecal_dist.methods.continuous.hb_linear import ConvergenceGateWarning, HierarchicalLinear
from judgecal_dist.methods.continuous.linear_conjugate import ConjugateLinear, sufficient_stats
from judgecal_dist.methods.continuous.score_flow import route_for_review
from judgecal_dist.methods.continuous.score_transport import MarginalOT
from judgecal_dist.splits import group_keys, split_uniforms
from judgecal_dist.stats.continuous_metrics import continuous_metrics
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.continuous import report as continuous_report
from judgecal_dist.studies.continuous.config import Config, ContinuousInput
from judgecal_dist.studies.continuous.data import load_paired_scores

__all__ = ["NAME", "Config", "ContinuousInput", "Replicate", "load", "plan", "run_replicate", "summarise", "split"]

NAME = "continuous"
CORRECTORS = ("raw", "linear_hb", "flow", "ot")
SYNTHETIC = "synthetic"
#: Key of the synthetic judge's random stream (spawned with the seed, so budgets share the draws).
_SYNTH_KEY = 7001


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
        config.data, judges=judges, variant=config.variant, storage_options=dict(engine.storage_options)
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
    seeds = [config.seed + i for i in range(config.replicates)]
    nuts, rest = seeds[: config.nuts_seeds], seeds[config.nuts_seeds :]
    reps: list[Replicate] = []
    for arm in data.arms:
        for budget in sorted(config.budgets):
            # NUTS seeds one per task (each fit is seconds); conjugate seeds in chunks; flows in stacked chunks.
            chunks = [("linear", (s,)) for s in nuts]
            chunks += [("linear", tuple(rest[i : i + 25])) for i in range(0, len(rest), 25)]
            chunks += [
                ("flow", tuple(seeds[i : i + config.flow_batch])) for i in range(0, len(seeds), config.flow_batch)
            ]
            for kind, chunk in chunks:
                reps.append(Replicate(len(reps), kind, arm, int(budget), chunk, config))
    return reps


def split(arm_scores: pd.DataFrame, seed: int, test_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the test items and of the anchor pool in budget order, per rubric, for ``seed``."""
    groups = arm_scores["group_id"].to_numpy()
    unique = np.unique(groups)
    u = pd.Series(split_uniforms(group_keys(unique.tolist()), [seed])[0], index=unique)
    frame = pd.DataFrame(
        {"rubric": arm_scores["rubric"].to_numpy(), "u": u.loc[groups].to_numpy(), "row": np.arange(len(groups))}
    )
    frame["item"] = arm_scores["item_id"].to_numpy()
    frame = frame.sort_values(["rubric", "u", "item"], kind="stable")
    rank = frame.groupby("rubric")["u"].rank(method="dense")
    is_test = (rank <= test_groups).to_numpy()
    return frame["row"].to_numpy()[is_test], frame["row"].to_numpy()[~is_test]


def _arm_data(data: ContinuousInput, arm: str, seed: int) -> pd.DataFrame:
    rows = data.scores[data.scores["judge_id"] == arm].reset_index(drop=True)
    if arm == SYNTHETIC:
        rng = np.random.default_rng(np.random.SeedSequence([seed, _SYNTH_KEY]))
        rows = rows.assign(j=strict_compressing_judge(rows["y"].to_numpy(), rng))
    return rows


def _anchors(rows: pd.DataFrame, pool: np.ndarray, budget: int) -> pd.DataFrame:
    pooled = rows.iloc[pool]
    return pooled.groupby("rubric", sort=False, group_keys=False).head(budget)  # first n of each rubric's pool order


def _row(
    arm: str,
    rubric: str,
    corrector: str,
    budget: int,
    seed: int,
    y: np.ndarray,
    y_hat: np.ndarray,
    figures: bool,
    **extra: Any,
) -> dict[str, Any]:
    row = {"judge": arm, "rubric": rubric, "corrector": corrector, "budget": budget, "seed": seed}
    row |= continuous_metrics(y, y_hat) | extra
    row["y_items"] = y.tolist() if figures else None
    row["y_hat_items"] = np.asarray(y_hat, dtype=float).tolist() if figures else None
    return row


def _linear_rows(data: ContinuousInput, rep: Replicate, seed: int) -> list[dict[str, Any]]:
    config = rep.config
    rows = _arm_data(data, rep.arm, seed)
    test, pool = split(rows, seed, config.test_groups)
    anchors, tests = _anchors(rows, pool, rep.budget), rows.iloc[test]
    figures = config.item_seed_figures and seed == config.seed
    rubrics = list(data.rubrics)
    out = []
    use_nuts = seed < config.seed + config.nuts_seeds
    if use_nuts:
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
    else:
        masks = np.stack([(anchors["rubric"] == r).to_numpy() for r in rubrics])
        j, y = anchors["j"].to_numpy(), anchors["y"].to_numpy()
        conj = ConjugateLinear().fit(sufficient_stats(np.where(masks, j, np.nan), np.where(masks, y, np.nan)))
        params = {r: (*conj.mean_[i], conj.sigma_mean_[i], conj.canary_prob_[i]) for i, r in enumerate(rubrics)}
        diag = {"converged": True, "rhat_max": np.nan, "divergences": 0, "ess_min": np.nan}
        diag |= {"retried": False, "leapfrog_steps": np.nan}
        centred = dict.fromkeys(rubrics, -1)  # no sampler
    for rubric in rubrics:
        t, a = tests[tests["rubric"] == rubric], anchors[anchors["rubric"] == rubric]
        y, j = t["y"].to_numpy(), t["j"].to_numpy()
        key = (rep.arm, rubric)
        n = {"n_anchors": len(a), "n_test": len(t)}
        if rep.budget == min(config.budgets):  # raw does not depend on the budget: one row per seed
            out.append(_row(*key, "raw", rep.budget, seed, y, j, figures, **n))
        alpha, beta, sigma, canary = params[rubric]
        out.append(
            _row(
                *key,
                "linear_hb",
                rep.budget,
                seed,
                y,
                alpha + beta * j,
                figures,
                **n,
                alpha=alpha,
                beta=beta,
                sigma=sigma,
                canary_prob=canary,
                linear_fit="nuts" if use_nuts else "conjugate",
                centred_params=centred[rubric],
                **diag,
            )
        )
        out.append(_row(*key, "ot", rep.budget, seed, y, MarginalOT().fit(a["j"], a["y"]).predict(j), figures, **n))
    return out


def _pad(columns: list[np.ndarray], fill: float) -> np.ndarray:
    width = max(len(c) for c in columns)
    return np.stack(
        [np.pad(np.asarray(c, dtype=np.float64), (0, width - len(c)), constant_values=fill) for c in columns]
    )


def flow_settings(config: Config) -> dict[str, Any]:
    """The flow's training and solver settings from the study config (what every stacked fit receives)."""
    return {
        "epochs": config.flow_epochs,
        "lr": config.flow_lr,
        "embed_dim": config.flow_embed_dim,
        "mask_policy": config.flow_mask_policy,
        "solver": config.flow_solver,
    }


def _flow_rows(data: ContinuousInput, rep: Replicate) -> list[dict[str, Any]]:
    config = rep.config
    code = {r: i for i, r in enumerate(data.rubrics)}
    per_seed = []
    for seed in rep.seeds:
        rows = _arm_data(data, rep.arm, seed)
        test, pool = split(rows, seed, config.test_groups)
        per_seed.append((rows, _anchors(rows, pool, rep.budget), rows.iloc[test]))
    job = FlowJob(
        j=_pad([a["j"].to_numpy() for _, a, _ in per_seed], np.nan),
        y=_pad([a["y"].to_numpy() for _, a, _ in per_seed], np.nan),
        rubric=_pad([a["rubric"].map(code).to_numpy() for _, a, _ in per_seed], 0).astype(np.int64),
        test_j=_pad([t["j"].to_numpy() for _, _, t in per_seed], 1.0),
        test_rubric=_pad([t["rubric"].map(code).to_numpy() for _, _, t in per_seed], 0).astype(np.int64),
        seeds=rep.seeds,
        n_rubrics=len(data.rubrics),
        settings=flow_settings(config),
        n_passes=config.flow_passes,
        threads=config.flow_threads,
    )
    result = fit_predict_flows(job)
    out = []
    for m, (seed, (_, anchors, tests)) in enumerate(zip(rep.seeds, per_seed, strict=True)):
        mean, sd = result.mean[m, : len(tests)], result.sd[m, : len(tests)]
        figures = config.item_seed_figures and seed == config.seed
        for rubric in data.rubrics:
            sel = (tests["rubric"] == rubric).to_numpy()
            y, y_hat, s = tests["y"].to_numpy()[sel], mean[sel], sd[sel]
            routed = route_for_review(s, budget=config.review_budget)
            err = np.abs(y_hat - y)
            extra = {
                "n_anchors": int((anchors["rubric"] == rubric).sum()),
                "n_test": int(sel.sum()),
                "mc_sd_mean": float(s.mean()),
                "routed_fraction": float(routed.mean()),
                "routed_mae": float(err[routed].mean()) if routed.any() else np.nan,
                "kept_mae": float(err[~routed].mean()) if (~routed).any() else np.nan,
                "final_loss": float(result.final_loss[m]),
                "device": result.device,
                "fit_seconds": result.seconds / len(rep.seeds),
            }
            out.append(_row(rep.arm, rubric, "flow", rep.budget, seed, y, y_hat, figures, **extra))
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
