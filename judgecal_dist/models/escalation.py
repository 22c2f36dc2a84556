r"""``judgecal.escalation/v2``: the ensemble study's hard variance routing (cheap tier -> full tier) as data.

Per collection (``dataset``, ``prompt_variant`` of an ingested ``rb2-k8`` score dataset): the tier order
(``cheap_tier`` first, escalating to ``full_tier``), the threshold :math:`\theta` on the cheap tier's dispersion
chosen on the study's cost-accuracy frontier, and the tiers' prices ($ per million input/output tokens). A
response uses the full tier's mean where the cheap tier's dispersion is at least :math:`\theta` (and a full mean
exists), else the cheap mean; the example's verdict is the strict winner of the response means
(:func:`~judgecal_dist.methods.repeated.routing.hard_route`,
:func:`~judgecal_dist.methods.repeated.ensemble.winner_outcome`), and its cost is the study's:
:math:`C = \bar C_{\mathrm{cheap}} + p_{\mathrm{esc}}\,\bar C_{\mathrm{full}}`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal_dist.errors import InputError
from judgecal_dist.methods.repeated import ensemble as ens
from judgecal_dist.methods.repeated.routing import hard_route
from judgecal_dist.models.documents import EscalationDoc

__all__ = ["FORMAT", "KIND", "EscalationPolicy", "from_document", "policy_from_frontier"]

FORMAT = "judgecal.escalation/v2"
KIND = "escalation"
#: The order of scored rows on both engines (the in-process reader keeps file order, which Spark does not know).
ORDER = ("dataset", "prompt_variant", "subset", "example_id")


@dataclass(frozen=True)
class EscalationPolicy:
    """Hard variance routing per collection, ready to score an ingested score dataset.

    Attributes
    ----------
    cheap_tier, full_tier : str
    prices : dict of str to (float, float)
        $ per million (input, output) tokens of each tier.
    thresholds : dict of (str, str) to float
        :math:`\\theta` per (dataset, prompt_variant).
    score_range : (float, float)
    """

    cheap_tier: str
    full_tier: str
    prices: dict[str, tuple[float, float]]
    thresholds: dict[tuple[str, str], float]
    score_range: tuple[float, float] = (1.0, 10.0)
    source: str = ""
    digest: str = ""
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    kind = KIND

    @property
    def name(self) -> str:
        return str(self.document.get("name") or f"hard variance routing {self.cheap_tier} -> {self.full_tier}")

    @property
    def judge_ids(self) -> list[str]:
        return [self.cheap_tier, self.full_tier]

    def tier_cost(self, name: str, input_tokens: float, output_tokens: float, examples: int, samples: int) -> float:
        """Mean cost per example of tier ``name`` over a collection of ``examples`` from its token totals (sums of
        integer token counts: exact in any order, so both engines give the same number)."""
        p_in, p_out = self.prices[name]
        total = ens.example_cost(
            input_tokens, output_tokens, k=samples, n_collected=samples, price_in=p_in, price_out=p_out
        )
        return float(total) / examples if examples else float("nan")

    def _costs(self, collection: Any) -> tuple[float, float]:
        cheap, full = collection.tiers[self.cheap_tier], collection.tiers[self.full_tier]
        n = collection.n_examples
        return (
            self.tier_cost(
                self.cheap_tier, float(cheap.input_tokens.sum()), float(cheap.output_tokens.sum()), n, cheap.n_samples
            ),
            self.tier_cost(
                self.full_tier, float(full.input_tokens.sum()), float(full.output_tokens.sum()), n, full.n_samples
            ),
        )

    def route(self, collection: Any, theta: float, costs: tuple[float, float] | None = None) -> pa.Table:
        """Every example of ``collection`` that both tiers scored: escalated responses, routed winner (null when
        the means tie or one is undefined), and the collection's mean cost per example of each tier (``costs``:
        given when ``collection`` holds only some of the examples, as on Spark)."""
        cheap_t, full_t = collection.tiers[self.cheap_tier], collection.tiers[self.full_tier]
        both = cheap_t.present & full_t.present
        cheap, full, chosen = cheap_t.scores[both], full_t.scores[both], collection.chosen[both]
        sigma = ens.dispersion(cheap)
        c_mean, f_mean = ens.prefix_means(cheap, cheap.shape[2]), ens.prefix_means(full, full.shape[2])
        means, escalated = hard_route(c_mean, f_mean, sigma, theta)
        out = ens.winner_outcome(means, chosen)
        best = np.argmax(np.where(np.isnan(means), -np.inf, means), axis=1)
        n = len(chosen)
        cost_cheap, cost_full = costs if costs is not None else self._costs(collection)
        return pa.table(
            {
                "dataset": pa.array([collection.dataset] * n, pa.string()),
                "prompt_variant": pa.array([collection.prompt_variant] * n, pa.string()),
                "subset": pa.array(collection.subsets[both].astype(str), pa.string()),
                "example_id": pa.array(collection.example_ids[both].astype(str), pa.string()),
                "theta": pa.array(np.full(n, theta)),
                "responses": pa.array(np.full(n, means.shape[1], dtype=np.int64)),
                "escalated": pa.array(escalated.sum(axis=1).astype(np.int64)),
                "winner": pa.array(best.astype(np.int64), mask=~out.evaluable | out.tied),
                "chosen": pa.array(chosen.astype(np.int64)),
                "evaluable": pa.array(out.evaluable),
                "correct": pa.array(out.correct),
                "cost_cheap": pa.array(np.full(n, cost_cheap)),
                "cost_full": pa.array(np.full(n, cost_full)),
            }
        )

    # -- score's table interface (judgecal_dist.models.interface.TableModel) -----------------------------------
    #: What score reads for this kind: the reader's collections (:mod:`judgecal_dist.scoring.tables`), routed by
    #: :meth:`route`; the tiers are the policy's judges (``unknown_judges`` and ``min_judge_coverage`` do not
    #: apply: a collection without one of its tiers is refused).
    reads = "collections"
    #: The order of the scored rows on both engines.
    order = ORDER

    def matched(self, data_url: str, tiers: Mapping[tuple[str, str], Sequence[str]]) -> list[tuple[str, str]]:
        """The collections (keys of ``tiers``: their tiers) that the policy names; refuses a table without any, or
        a named collection without one of the routed tiers."""
        matched = sorted(key for key in tiers if key in self.thresholds)
        if not matched:
            have = sorted(f"{d}/{p}" for d, p in tiers)
            raise InputError(
                f"{data_url}: items: no collection the policy names ({sorted(f'{d}/{p}' for d, p in self.thresholds)}; "
                f"the data has {have[:4]}): score the dataset the ensemble study ran on, or export a policy from a "
                "run on this one"
            )
        for dataset, variant in matched:
            missing = [t for t in (self.cheap_tier, self.full_tier) if t not in tiers[(dataset, variant)]]
            if missing:
                raise InputError(
                    f"{data_url}: verdicts: judge_id: collection {dataset}/{variant} has no {missing[0]!r} tier "
                    f"(tiers: {sorted(tiers[(dataset, variant)])}); the policy routes {self.cheap_tier} -> "
                    f"{self.full_tier}"
                )
        return matched

    def summaries(self, table: pa.Table) -> dict[str, pd.DataFrame]:
        """Per collection: threshold, evaluable examples, accuracy, escalation fraction and cost per example (the
        study's sweep formula: mean cheap cost + escalation fraction x mean full cost)."""
        frame = table.drop(["winner"]).to_pandas()
        out = frame.groupby(["dataset", "prompt_variant"], sort=True).agg(
            theta=("theta", "first"),
            n=("evaluable", "sum"),
            correct=("correct", "sum"),
            escalated=("escalated", "sum"),
            responses=("responses", "sum"),
            cost_cheap=("cost_cheap", "first"),
            cost_full=("cost_full", "first"),
        )
        out["accuracy"] = out["correct"] / out["n"].where(out["n"] > 0)
        out["p_escalate"] = out["escalated"] / out["responses"]
        out["cost"] = out["cost_cheap"] + out["p_escalate"] * out["cost_full"]
        out["cost_ratio"] = out["cost"] / (out["cost_cheap"] + out["cost_full"])
        return {"collections": out.drop(columns=["correct", "escalated", "responses"]).reset_index()}


def policy_from_frontier(
    frontiers: Sequence[Mapping[str, Any]],
    *,
    cheap_tier: str,
    full_tier: str,
    prices: Mapping[str, Sequence[float]],
    rule: str = "auto",
    score_range: Sequence[float] = (1.0, 10.0),
    fitted_on: dict[str, Any] | None = None,
) -> EscalationPolicy:
    """The policy that takes, on each collection's frontier (``dataset, prompt_variant, frontier`` records of
    ``theta, accuracy, cost, ...``), the threshold of ``rule``: ``auto`` the cheapest point within one accuracy
    point of the frontier's best, ``most_accurate`` the best (cheapest among equals), ``cheapest`` the cheapest."""
    entries = []
    for f in frontiers:
        points = pd.DataFrame(f["frontier"]).sort_values("cost", kind="stable")
        if points.empty:
            continue
        top = points["accuracy"].max()
        pick = {
            "auto": points[points["accuracy"] >= top - 0.01].iloc[0],
            "most_accurate": points[points["accuracy"] == top].iloc[0],
            "cheapest": points.iloc[0],
        }[rule]
        entries.append(
            {
                "dataset": str(f["dataset"]),
                "prompt_variant": str(f["prompt_variant"]),
                "theta": float(pick["theta"]),
                "accuracy": float(pick["accuracy"]),
                "p_escalate": float(pick["p_escalate"]),
                "cost": float(pick["cost"]),
            }
        )
    doc = {
        "format": FORMAT,
        "name": f"hard variance routing {cheap_tier} -> {full_tier} ({rule})",
        "policy": "hard_variance",
        "rule": rule,
        "cheap_tier": cheap_tier,
        "full_tier": full_tier,
        "prices": {t: [float(v) for v in prices[t]] for t in (cheap_tier, full_tier)},
        "score_range": [float(v) for v in score_range],
        "collections": entries,
        "fitted_on": dict(fitted_on or {}),
    }
    return from_document(EscalationDoc.model_validate(doc), doc)


def from_document(doc: EscalationDoc, raw: dict[str, Any], *, source: str = "", digest: str = "") -> EscalationPolicy:
    """The policy of a validated document."""
    return EscalationPolicy(
        cheap_tier=doc.cheap_tier,
        full_tier=doc.full_tier,
        prices={t: (float(p[0]), float(p[1])) for t, p in doc.prices.items()},
        thresholds={(c.dataset, c.prompt_variant): float(c.theta) for c in doc.collections},
        score_range=(float(doc.score_range[0]), float(doc.score_range[1])),
        source=source,
        digest=digest,
        document=raw,
    )


if TYPE_CHECKING:  # mypy checks that the kind implements score's table interface
    from judgecal_dist.models.interface import TableModel

    _IMPLEMENTS: type[TableModel] = EscalationPolicy
