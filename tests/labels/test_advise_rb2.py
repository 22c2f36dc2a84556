"""``judgecal advise`` on the RB2 k=8 collections with seed 004's tier prices: the panel and the escalation policy
it names cost what the ensemble study's own computation says (skips without the shared data)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.io.ingest import ingest
from judgecal_dist.studies.ensemble import study as ensemble
from judgecal_dist.studies.runner import prepare

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "ensemble.yaml"


@pytest.fixture(scope="module")
def rb2_url(rb2_dir, tmp_path_factory) -> str:
    dest = str(tmp_path_factory.mktemp("rb2") / "ds")
    ingest("rb2-k8", str(rb2_dir), dest)
    return dest


@pytest.fixture(scope="module")
def ensemble_units(rb2_url):
    """The ensemble study's config, input and work units on the same data (its packaged seed 004 prices)."""
    config = prepare(CONFIG, [f"data={rb2_url}", "engine_curve=false", "replicates=10"]).config
    data = ensemble.load(config, EngineConfig())
    return config, data, ensemble.plan(config, data)


@pytest.fixture(scope="module")
def advised(rb2_url, ensemble_units, tmp_path_factory) -> tuple[dict, Path]:
    config = ensemble_units[0]
    prices = {tier: list(pair) for tier, pair in dict(config.prices).items()}
    settings = tmp_path_factory.mktemp("conf") / "seed004.yaml"
    settings.write_text(json.dumps({"prices": prices, "target_width": 0.01}))
    out = tmp_path_factory.mktemp("advice") / "out"
    result = CliRunner().invoke(cli, ["advise", "--data", rb2_url, "--output", str(out), "--costs", str(settings)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "advice.json").read_text()), out


def test_panel_cost_is_the_ensemble_studys_one_sample_cost(advised, ensemble_units):
    advice, out = advised
    config, data, units = ensemble_units
    curve = pd.concat(
        [ensemble.run_replicate(data, u) for u in units if u.kind == "curve" and u.join == "own"], ignore_index=True
    )
    one_sample = {f"{r.tier}/{r.prompt_variant}": r.cost_per_example for r in curve[curve["k"] == 1].itertuples()}
    assert advice["costs"] == pytest.approx(one_sample, rel=1e-12)
    chosen = advice["chosen"]
    members = chosen["panel"].split("+")
    assert chosen["cost_per_item"] == pytest.approx(sum(one_sample[j] for j in members), rel=1e-12)
    frontier = pd.read_parquet(out / "frontier.parquet")
    assert len(frontier) == 2 ** len(one_sample) - 1
    # the one-SE rule: within one SE of the lowest NLL, and no cheaper panel is
    best = frontier.loc[frontier["nll"].idxmin()]
    near = frontier[frontier["nll"] <= best["nll"] + best["se"]]
    assert chosen["panel"] == near.loc[near["cost_per_item"].idxmin(), "panel"]
    report = (out / "report.md").read_text()
    assert report.index(f"Run the panel `{chosen['panel']}`") < report.index("## Evidence")


def test_escalation_policy_is_a_point_of_the_ensemble_studys_sweep(advised, ensemble_units):
    advice, out = advised
    config, data, units = ensemble_units
    routing = pd.concat([ensemble.run_replicate(data, u) for u in units if u.kind == "routing"], ignore_index=True)
    sweep = routing[routing["section"] == "escalation"]
    assert {p["prompt_variant"] for p in advice["escalation"]} == set(sweep["prompt_variant"])
    for policy in advice["escalation"]:
        rows = sweep[(sweep["prompt_variant"] == policy["prompt_variant"]) & (sweep["theta"] == policy["theta"])]
        assert len(rows) == 1
        row = rows.iloc[0]
        assert row["on_frontier"]
        assert policy["cost"] == pytest.approx(row["cost"], rel=1e-12)
        assert policy["cost_full"] == pytest.approx(row["cost_full"], rel=1e-12)
        assert policy["accuracy"] == pytest.approx(row["accuracy"], rel=1e-12)
        assert policy["p_escalate"] == pytest.approx(row["p_escalate"], rel=1e-12)
        assert f"**{policy['cost']:.6g} per example**" in (out / "report.md").read_text()


def test_labels_to_buy_for_the_target_width(advised):
    advice, _ = advised
    need, chosen = advice["labels"], advice["chosen"]
    width = chosen["accuracy_ci_high"] - chosen["accuracy_ci_low"]
    assert need["needed"] >= chosen["n_items"] * (width / 0.01) ** 2
    assert need["to_buy"] == need["needed"] - chosen["n_items"] > 0


def test_tier_prices_from_the_judges_table(rb2_url, advised, ensemble_units, tmp_path):
    from judgecal_dist.io.dataset import dataset_tables, read_dataset_table, write_dataset

    prices = dict(ensemble_units[0].prices)
    tables = {name: read_dataset_table(rb2_url, name) for name in dataset_tables(rb2_url)}
    judges = tables["judges"].to_pandas()
    judges["cost_per_mtok_in"] = judges["tier"].map(lambda t: prices[t][0])
    judges["cost_per_mtok_out"] = judges["tier"].map(lambda t: prices[t][1])
    tables["judges"] = pa.Table.from_pandas(judges, preserve_index=False)
    priced = str(tmp_path / "priced")
    write_dataset(priced, tables, {"source": "test"})
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["advise", "--data", priced, "--output", str(out)])
    assert result.exit_code == 0, result.output
    got = json.loads((out / "advice.json").read_text())
    assert got["costs"] == advised[0]["costs"]
    assert [p["cost"] for p in got["escalation"]] == [p["cost"] for p in advised[0]["escalation"]]
