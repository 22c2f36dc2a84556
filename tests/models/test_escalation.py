"""``judgecal.escalation/v2``: the frontier rules pick the stated thresholds, the document round-trips, and a
tampered document is refused naming its field (scoring on rb2-k8: tests/studies/ensemble/test_study.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
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

    assert not any(hasattr(cls, "reads") for cls in (BinaryPipeline, Corrector))


# -- scoring in process and on Spark --------------------------------------------------------------------------
def _score_dataset_with_bad_input(root) -> str:
    """Two collections of repeated 1-10 scores (the policy names one), tiers mini (k=4), full (k=8) and nano, with
    what the reader counts or leaves out: a score outside the range, a response with every sample null, an example
    with one response, one with two chosen responses, one with a response fewer than the others (not evaluable),
    examples the full tier did not score, missing sample rows, and verdicts without an item row."""
    from judgecal_dist.io.dataset import write_dataset

    rng = np.random.default_rng(11)
    verdicts, items, labels = [], [], []
    for variant in ("base", "tuned"):
        for e in range(40):
            subset = ("Math", "Focus")[e % 2]
            n_resp = 1 if e == 3 else 3 if e == 5 else 4
            group = f"{variant}/{subset}/{e}"
            for r in range(n_resp):
                item = f"{group}/{r}"
                items.append(
                    {"dataset": "d", "item_id": item, "subset": subset, "prompt_variant": variant, "example_id": str(e)}
                    | {"response": r}
                )
                top = r == 0 or (e == 7 and r == 1)
                labels.append({"dataset": "d", "item_id": item, "label": None, "label_score": float(top)})
                for tier, k in (("mini", 4), ("full", 8), ("nano", 2)):
                    if tier == "full" and e % 9 == 4:
                        continue  # the full tier did not score this example
                    for s in range(k):
                        if s > 0 and rng.random() < 0.05:
                            continue  # a missing sample row
                        score = float(rng.integers(1, 11)) if not (e == 11 and r == 2 and tier == "mini") else None
                        score = 14.0 if (e, r, s, tier) == (13, 1, 2, "mini") else score
                        verdicts.append(
                            {"dataset": "d", "item_id": item, "group_id": group, "judge_id": tier, "sample": s}
                            | {"verdict": None, "score": score, "input_tokens": 100.0 + r, "output_tokens": 700.0 + e}
                        )
    verdicts += [dict(verdicts[0], item_id="base/Math/0/orphan", sample=s) for s in range(3)]
    tables = {name: pa.Table.from_pylist(rows) for name, rows in (("verdicts", verdicts), ("items", items))}
    tables["labels"] = pa.Table.from_pylist(labels)
    return write_dataset(str(root / "rb"), tables, {"format": "test"}, score_range=(0.0, 20.0))


@pytest.fixture(scope="module")
def scored(tmp_path_factory, spark):
    from judgecal_dist.config import EngineConfig
    from judgecal_dist.io.score_collections import load_collections
    from judgecal_dist.methods.repeated.ensemble import dispersion
    from judgecal_dist.scoring.tables import score_table

    root = tmp_path_factory.mktemp("escalation")
    url = _score_dataset_with_bad_input(root)
    [base, _] = load_collections(url)[0]
    theta = float(np.sort(dispersion(base.tiers["mini"].scores).ravel())[60])  # a response's own dispersion
    policy = policy_from_frontier(
        [{"dataset": "d", "prompt_variant": "base", "frontier": [dict(FRONTIER[0], theta=theta)]}],
        cheap_tier="mini",
        full_tier="full",
        prices={"mini": (0.75, 4.5), "full": (2.5, 15.0)},
    )
    engine = EngineConfig(spark_master="local[2]")
    out = {
        name: score_table(policy, url, engine=engine, engine_name=name, unknown_judges="error", min_judge_coverage=0.5)
        for name in ("local", "spark")
    }
    return url, policy, base, theta, out


def test_spark_and_in_process_scoring_equal_the_policys_own_routing(scored):
    from judgecal_dist.methods.repeated.ensemble import dispersion

    url, policy, base, theta, out = scored
    own = policy.route(base, theta).sort_by([(c, "ascending") for c in ("subset", "example_id")])
    (local, local_info), (spark, spark_info) = out["local"], out["spark"]
    assert local.equals(own) and spark.equals(own)  # every column, bit for bit
    sigma = dispersion(base.tiers["mini"].scores)
    assert (sigma == theta).any() and own["escalated"].to_numpy().sum() > 0  # the threshold's edge is exercised
    assert not own["evaluable"].to_numpy().all() and own.num_rows < base.n_examples  # routed only where both tiers
    assert spark_info["bad_input"]["counts"] == local_info["bad_input"]["counts"]
    assert {k: v for k, v in spark_info.items() if k != "bad_input"} == {
        k: v for k, v in local_info.items() if k != "bad_input"
    }
    assert local_info["collections_without_policy"] == ["d/tuned"]
    counts = local_info["bad_input"]["counts"]
    assert counts["fewer_than_two_responses"] == 2 and counts["no_unique_chosen_response"] == 2
    assert counts["verdicts_without_item_row"] == 3 and counts["scores_outside_1_10"] == 2
    assert counts["responses_all_samples_null"] == 2
    for a, b in zip(policy.summaries(spark).values(), policy.summaries(own).values(), strict=True):
        pd.testing.assert_frame_equal(a, b)
