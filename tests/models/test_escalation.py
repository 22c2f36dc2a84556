"""``judgecal.escalation/v2``: the frontier rules pick the stated thresholds, the document round-trips, and a
tampered document is refused naming its field (scoring on rb2-k8: tests/studies/ensemble/test_study.py)."""

from __future__ import annotations

import json

import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.models import load_model, model_from_dict, save_model
from judgecal_dist.models.escalation import policy_from_frontier

FRONTIER = [
    {"theta": 2.0, "n": 100, "accuracy": 0.60, "p_escalate": 0.0, "cost": 1.0, "cost_ratio": 0.2},
    {"theta": 1.0, "n": 100, "accuracy": 0.655, "p_escalate": 0.3, "cost": 2.2, "cost_ratio": 0.44},
    {"theta": 0.5, "n": 100, "accuracy": 0.66, "p_escalate": 0.6, "cost": 3.4, "cost_ratio": 0.68},
]


def _policy(rule: str = "auto"):
    frontiers = [{"dataset": "rb2k8", "prompt_variant": "base", "frontier": FRONTIER}]
    prices = {"mini": (0.75, 4.5), "full": (2.5, 15.0), "nano": (0.2, 1.25)}
    return policy_from_frontier(frontiers, cheap_tier="mini", full_tier="full", prices=prices, rule=rule)


@pytest.mark.parametrize("rule, theta", [("auto", 1.0), ("most_accurate", 0.5), ("cheapest", 2.0)])
def test_rules_pick_their_frontier_point_and_round_trip(rule, theta, tmp_path):
    policy = _policy(rule)
    assert policy.thresholds == {("rb2k8", "base"): theta}
    assert policy.prices == {"mini": (0.75, 4.5), "full": (2.5, 15.0)}  # only the routed tiers' prices are kept
    back = load_model(save_model(policy, str(tmp_path / "policy.json")))
    assert back.document == json.loads(json.dumps(policy.document))
    assert (back.thresholds, back.prices, back.cheap_tier, back.full_tier) == (
        policy.thresholds,
        policy.prices,
        "mini",
        "full",
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["prices"].pop("full"), "prices: no [input, output] price for tier 'full'"),
        (lambda d: d.update(full_tier="mini"), "full_tier: must differ from cheap_tier ('mini')"),
        (lambda d: d["collections"][0].update(theta=-0.1), "collections.0.theta: input should be greater than"),
        (lambda d: d.update(collections=[]), "collections: list should have at least 1 item"),
    ],
)
def test_a_tampered_policy_is_refused_naming_its_field(change, message):
    doc = json.loads(json.dumps(_policy().document))
    change(doc)
    with pytest.raises(InputError) as err:
        model_from_dict(doc, source="p.json")
    assert str(err.value).startswith("p.json: " + message)


def test_table_kinds_implement_scores_table_interface_and_the_others_do_not(tmp_path):
    """score dispatches on :class:`TableModel`: the kinds that read the table implement it, the panel pipeline
    and the correctors (scored item by item) do not."""
    from judgecal_dist.methods.repeated.davidson import DavidsonAggregator
    from judgecal_dist.models import TableModel
    from judgecal_dist.models.davidson import davidson_from_estimators
    from judgecal_dist.models.documents import KINDS

    est = DavidsonAggregator().fit([[3, 0, 1], [0, 1, 3], [2, 1, 1]], [1, -1, 0])
    table_kinds = [_policy(), davidson_from_estimators({"j1": est}, n=4)]
    assert all(isinstance(m, TableModel) for m in table_kinds)
    assert {m.kind for m in table_kinds} <= set(KINDS)
    from judgecal_dist.models import BinaryPipeline, Corrector

    assert not any(hasattr(cls, "score_table") for cls in (BinaryPipeline, Corrector))
