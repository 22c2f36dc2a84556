"""Ensemble scoring and cost-aware escalation on repeated-sample score collections (spec 004).

Work units (the runner's replicates; ``seed`` is the unit's index):

``curve``      one tier of one collection: accuracy, bootstrap CIs (overall and per subset), ties and $/ex for
               every k = 1..K (spec 004 §3.1-3.3, §2.4; Tables 5, 8, 11);
``routing``    one collection with the cheap and the full tier: hard variance routing sweep and Pareto frontier
               (§3.7), soft blending (§3.9) and variance-informed ensembling (§3.10) on the stratified split (§3.8);
``agreement``  one cheap tier against the reference tier: winner agreement and Spearman rho vs k (§3.11).

Joins (spec 004 §3.11-3.12): by default a tier is evaluated on its own collection and matched to the reference
tier by ``(subset, id)``; ``join_key: id`` reproduces the paper's id-only joins (a tier from another collection of
the same prompt variant is attached to the reference collection's rows by id, later rows winning, and reference
means are looked up by id). ``summarise`` adds the statistics of §3.13, the intersection check and the report.

References
----------
.. [1] An Empirical Investigation of Practical LLM-as-a-Judge Improvement Techniques on RewardBench 2 (seed 004).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.score_collections import Collection, TierScores, attach_tier, load_collections, lookup_rows
from judgecal_dist.methods.repeated import ensemble as ens
from judgecal_dist.methods.repeated.routing import (
    HardVarianceRouting,
    SoftBlend,
    VarianceInformedEnsemble,
    stratified_split,
)
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.ensemble import report as ensemble_report
from judgecal_dist.studies.ensemble.config import Config, EnsembleInput

__all__ = ["NAME", "Config", "Replicate", "EnsembleInput", "load", "plan", "run_replicate", "summarise"]

NAME = "ensemble"


@dataclass(frozen=True)
class Replicate:
    """One work unit (module docstring); ``source`` is the dataset holding ``tier`` when it is joined."""

    seed: int
    kind: str
    dataset: str
    prompt_variant: str
    tier: str
    source: str
    join: str
    config: Config


def load(config: Config, engine: EngineConfig) -> EnsembleInput:
    """Score collections of ``config.data`` (validated before the runner writes anything)."""
    collections, bad = load_collections(
        config.data_url,
        datasets=tuple(config.datasets) or None,
        score_range=(config.score_low, config.score_high),
        storage_options=dict(engine.storage_options),
    )
    tiers = {t for c in collections for t in c.tiers}
    unpriced = sorted(tiers - set(dict(config.prices)))
    if unpriced:
        raise ConfigError(f"prices: no price for tier(s) {unpriced}; set e.g. --set prices.{unpriced[0]}=[1.0,4.0]")
    curve = None
    if config.engine_curve:  # the scalable path: one pass over the verdicts, on Spark when the table is large
        try:
            from judgecal_dist.engine.jobs.ensemble import accuracy_by_k
        except ImportError:  # the base install has no Spark extra: the report says the check was skipped
            pass
        else:
            curve = accuracy_by_k(config.data_url, config=engine)
            curve = curve[curve["dataset"].isin([c.dataset for c in collections])].reset_index(drop=True)
    return EnsembleInput(collections=tuple(collections), bad_input=bad.as_dict(), engine_curve=curve)


def _hosts(data: EnsembleInput, config: Config) -> dict[str, Collection]:
    """Per prompt variant, the collection holding the reference tier (the first by dataset name)."""
    hosts: dict[str, Collection] = {}
    for c in data.collections:
        if config.reference_tier in c.tiers:
            hosts.setdefault(c.prompt_variant, c)
    return hosts


def plan(config: Config, data: EnsembleInput) -> list[Replicate]:
    hosts = _hosts(data, config)
    units: list[tuple[str, str, str, str, str, str]] = []
    for c in data.collections:
        host = hosts.get(c.prompt_variant)
        for tier in sorted(c.tiers):
            joined = config.join_key == "id" and host is not None and host.dataset != c.dataset
            units.append(
                (
                    "curve",
                    host.dataset if joined and host is not None else c.dataset,
                    c.prompt_variant,
                    tier,
                    c.dataset,
                    "id" if joined else "own",
                )
            )
            if host is not None and tier != config.reference_tier:
                units.append(("agreement", host.dataset, c.prompt_variant, tier, c.dataset, config.join_key))
        if {config.cheap_tier, config.reference_tier} <= set(c.tiers):
            units.append(("routing", c.dataset, c.prompt_variant, config.cheap_tier, c.dataset, "own"))
    return [Replicate(i, *unit, config=config) for i, unit in enumerate(units)]


def _tier_rows(data: EnsembleInput, rep: Replicate) -> tuple[Collection, TierScores]:
    """The rows a unit evaluates and the tier's scores on them (own collection, or joined by ``rep.join``)."""
    host = data.get(rep.dataset, rep.prompt_variant)
    if rep.source == rep.dataset:
        return host, host.tiers[rep.tier]
    return host, attach_tier(host, data.get(rep.source, rep.prompt_variant), rep.tier, key=rep.join)


def _cost(tier: TierScores, name: str, k: float, config: Config) -> float:
    p_in, p_out = dict(config.prices)[name]
    return float(
        ens.example_cost(
            tier.input_tokens, tier.output_tokens, k=k, n_collected=tier.n_samples, price_in=p_in, price_out=p_out
        ).mean()
    )


@functools.lru_cache(maxsize=8)
def _draw_counts(n_rows: int, n_resamples: int, seed: int) -> np.ndarray:
    # The same (N, B, seed) always gives the same stream (a fresh RandomState per condition, spec 004 §3.3); the
    # cache only saves redrawing it for conditions of equal size.
    return ens.resample_counts(n_rows, n_resamples, seed).astype(np.float32)


def _curve(data: EnsembleInput, rep: Replicate) -> pd.DataFrame:
    config = rep.config
    host, tier = _tier_rows(data, rep)
    rows = host.n_examples if rep.join == "id" else int(tier.present.sum())
    keep = np.ones(host.n_examples, bool) if rep.join == "id" else tier.present
    scores, chosen, subsets = tier.scores[keep], host.chosen[keep], host.subsets[keep]
    counts = _draw_counts(rows, config.replicates, config.bootstrap_seed)
    tokens = TierScores(scores, keep[keep], tier.input_tokens[keep], tier.output_tokens[keep])
    frames = []
    for k in range(1, tier.n_samples + 1):
        out = ens.winner_outcome(ens.prefix_means(scores, k), chosen)
        ci = ens.bootstrap_accuracy(out, subsets, confidence=config.ci_level, counts=counts)
        cost = _cost(tokens, rep.tier, k, config)
        frames.append(ci.assign(k=k, rows=rows, n_tied=int(out.tied.sum()), cost_per_example=cost))
    table = pd.concat(frames, ignore_index=True).rename(columns={"stratum": "subset"})
    return table.assign(
        section="curve",
        dataset=rep.dataset,
        prompt_variant=rep.prompt_variant,
        tier=rep.tier,
        source=rep.source,
        join=rep.join,
    )


def _agreement(data: EnsembleInput, rep: Replicate) -> pd.DataFrame:
    config = rep.config
    host = data.get(rep.dataset, rep.prompt_variant)
    reference = ens.prefix_means(host.tiers[config.reference_tier].scores, host.tiers[config.reference_tier].n_samples)
    if rep.join == "id":
        cheap_rows = host
        cheap = host.tiers[rep.tier] if rep.source == rep.dataset else _tier_rows(data, rep)[1]
        ref_rows = lookup_rows(host.example_ids, host.example_ids)  # id map in file order: later rows win
    else:
        cheap_rows = data.get(rep.source, rep.prompt_variant)
        cheap = cheap_rows.tiers[rep.tier]
        ref_rows = lookup_rows(cheap_rows.keys, host.keys)
    ref = np.where((ref_rows >= 0)[:, None], reference[np.maximum(ref_rows, 0)], np.nan)
    keep = cheap.present if rep.join != "id" else np.ones(cheap_rows.n_examples, bool)
    table = ens.agreement_curve(cheap.scores[keep], ref[keep])
    return table.assign(
        section="agreement",
        dataset=rep.dataset,
        prompt_variant=rep.prompt_variant,
        tier=rep.tier,
        source=rep.source,
        join=rep.join,
        reference_tier=config.reference_tier,
    )


def _routing(data: EnsembleInput, rep: Replicate) -> pd.DataFrame:
    config = rep.config
    c = data.get(rep.dataset, rep.prompt_variant)
    cheap_t, full_t = c.tiers[config.cheap_tier], c.tiers[config.reference_tier]
    both = cheap_t.present & full_t.present
    cheap, full, chosen, subsets = cheap_t.scores[both], full_t.scores[both], c.chosen[both], c.subsets[both]
    cost_cheap = _cost(cheap_t, config.cheap_tier, cheap_t.n_samples, config)
    cost_full = _cost(full_t, config.reference_tier, full_t.n_samples, config)
    sweep = HardVarianceRouting().fit(cheap, full, chosen, cost_cheap=cost_cheap, cost_full=cost_full)
    frontier = set(sweep.frontier_["theta"].tolist())
    parts = [sweep.sweep_.assign(section="escalation", on_frontier=sweep.sweep_["theta"].isin(frontier))]

    test = stratified_split(subsets, test_fraction=config.test_fraction, random_state=config.split_seed)
    train = ~test
    blend = SoftBlend(steepness=config.blend_steepness).fit(cheap[train], full[train], chosen[train])
    blended, weight = blend.transform(cheap[test], full[test])
    out = ens.winner_outcome(blended, chosen[test])
    everywhere = SoftBlend(steepness=config.blend_steepness).fit(cheap, full, chosen)
    parts.append(
        pd.DataFrame(
            [
                {
                    "section": "blend",
                    "fit": "train",
                    "midpoint": blend.midpoint_,
                    "n_train": blend.n_train_,
                    "train_accuracy": blend.train_accuracy_,
                    "n_test": int(out.evaluable.sum()),
                    "test_accuracy": out.correct.sum() / max(out.evaluable.sum(), 1),
                    "test_mean_weight": float(weight.mean()),
                    "cost_per_example": cost_cheap + cost_full,
                    "n_train_rows": int(train.sum()),
                    "n_test_rows": int(test.sum()),
                },
                {
                    "section": "blend",
                    "fit": "all_rows",
                    "midpoint": everywhere.midpoint_,
                    "n_train": everywhere.n_train_,
                    "train_accuracy": everywhere.train_accuracy_,
                    "cost_per_example": cost_cheap + cost_full,
                },
            ]
        )
    )

    varinf = VarianceInformedEnsemble(n_max=config.varinf_n_max, budget=config.varinf_budget)
    varinf.fit(cheap[train], full[train], chosen[train])
    p_in, p_out = dict(config.prices)[config.reference_tier]
    for fit, unconstrained in (("constrained", False), ("unconstrained", True)):
        result = varinf.evaluate(cheap[test], full[test], chosen[test], unconstrained=unconstrained)
        chosen_pair = (
            varinf.unconstrained_
            if unconstrained
            else {
                "sigma1": varinf.sigma1_,
                "sigma2": varinf.sigma2_,
                "train_accuracy": varinf.train_accuracy_,
                "train_budget": varinf.train_budget_,
            }
        )
        # Cost (spec 004 §3.10, approximate in the paper): full input once + full output x mean n / K; the cheap
        # tier's scores are not charged. Given at the budget cap and at the realised test budget.
        cost_at = {
            b: float(
                ens.example_cost(
                    full_t.input_tokens,
                    full_t.output_tokens,
                    k=b,
                    n_collected=full_t.n_samples,
                    price_in=p_in,
                    price_out=p_out,
                ).mean()
            )
            for b in (config.varinf_budget, result["budget"])
        }
        parts.append(
            pd.DataFrame(
                [
                    {
                        "section": "variance_informed",
                        "fit": fit,
                        **chosen_pair,
                        "test_accuracy": result["accuracy"],
                        "n_test": result["n"],
                        "test_budget": result["budget"],
                        "grid_size": len(varinf.grid_),
                        "cost_at_budget_cap": cost_at[config.varinf_budget],
                        "cost_at_test_budget": cost_at[result["budget"]],
                    }
                ]
            )
        )
    table = pd.concat(parts, ignore_index=True)
    return table.assign(
        dataset=rep.dataset,
        prompt_variant=rep.prompt_variant,
        cheap_tier=config.cheap_tier,
        full_tier=config.reference_tier,
        cost_cheap=cost_cheap,
        cost_full=cost_full,
    )


_UNITS = {"curve": _curve, "agreement": _agreement, "routing": _routing}


def run_replicate(data: EnsembleInput, rep: Replicate) -> pd.DataFrame:
    """The table of one work unit (pure: the same data and unit give the same table on any engine)."""
    return _UNITS[rep.kind](data, rep).assign(unit=rep.seed)


def summarise(config: Config, parts: pd.DataFrame, data: EnsembleInput) -> StudyResult:
    """Records per condition, per-subset records, escalation/blend/variance-informed sections, report, figures."""
    return ensemble_report.summarise(config, parts, data)
