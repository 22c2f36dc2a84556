"""One question, one answer: on LLMBar's same halves with log-odds calibrator input, the budget study at the full
budget and the inclusion study fit the same pipelines, give them the same evaluation NLL, and so agree on the
full panel vs top-5 (issue 15, "One default pipeline everywhere"); the stacking arm the budget study sweeps for
the inclusion study's recommendation is the inclusion study's stacking pipeline (issue 29)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.io.ingest import ingest
from judgecal_dist.studies.budget import study as budget
from judgecal_dist.studies.inclusion import study as inclusion

SPLITS = 3


def crossed(module, config) -> pd.DataFrame:
    data = module.load(config, EngineConfig())
    return pd.concat([module.run_replicate(data, rep) for rep in module.plan(config, data)], ignore_index=True)


def test_budget_at_full_budget_agrees_with_inclusion(llmbar_dir, tmp_path):
    url = str(tmp_path / "llmbar")
    ingest("llmbar", str(llmbar_dir), url)
    both = {"data": url, "replicates": SPLITS, "seed": 0, "calibrator_input": "logit"}
    aggs = ["one_coin", "stacking"]
    on_budget = crossed(budget, budget.Config(**both, budgets=[100], top_k=5, calibrators=["beta"], aggregators=aggs))
    on_inclusion = crossed(
        inclusion,
        inclusion.Config(**both, aggregators=aggs, calibrators=["beta"], panels=["all", "top5"]),
    )
    beta = on_budget[on_budget["full_budget"] & (on_budget["calibrator"] == "beta")]
    metrics = on_inclusion[(on_inclusion["kind"] == "metrics") & (on_inclusion["calibrator"] == "beta")]
    stacked = beta[beta["aggregator"] == "stacking"].set_index("seed")["nll"].sort_index()
    inc_stacked = metrics[(metrics["aggregator"] == "stacking") & (metrics["panel"] == "all")].set_index("seed")["nll"]
    assert list(stacked.index) == list(range(SPLITS))
    np.testing.assert_allclose(stacked.to_numpy(), inc_stacked.loc[stacked.index].to_numpy(), rtol=1e-6)
    full = beta[beta["aggregator"] == "one_coin"]
    metrics = metrics[metrics["aggregator"] == "one_coin"]
    by_budget = full.set_index(["seed", "panel"])["nll"].sort_index()
    by_inclusion = metrics.set_index(["seed", "panel"])["nll"].sort_index()
    assert list(by_budget.index) == [(s, p) for s in range(SPLITS) for p in ("all", "top5")]
    np.testing.assert_allclose(
        by_budget.to_numpy(), by_inclusion.loc[by_budget.index].to_numpy(), rtol=1e-6
    )  # optimiser tolerance
    gap_budget = by_budget.xs("top5", level="panel") - by_budget.xs("all", level="panel")
    gap_inclusion = by_inclusion.xs("top5", level="panel") - by_inclusion.xs("all", level="panel")
    assert np.sign(gap_budget.mean()) == np.sign(gap_inclusion.mean()) != 0
    assert (full["n_eval"].to_numpy() == metrics.groupby("seed")["n_eval"].first().repeat(2).to_numpy()).all()
