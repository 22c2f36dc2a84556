"""``judgecal fit`` on LLMBar exports the pipeline its card names, and ``judgecal score`` with it reproduces the
card's predictions exactly, in memory and on Spark; the choice rule on a hand-made table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.fit.study import choose

#: A fast candidate grid that still holds a log-odds model, stacking, isotonic breakpoints and a curated panel.
FAST = [
    "aggregators=[majority, one_coin, stacking]",
    "calibrators=[none, platt, isotonic]",
    "panels=[all, top3]",
    "resamples=200",
]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def llmbar_url(llmbar_dir, tmp_path_factory) -> str:
    from judgecal_dist.io.ingest import ingest

    data = str(tmp_path_factory.mktemp("llmbar") / "llmbar")
    ingest("llmbar", str(llmbar_dir), data)
    return data


@pytest.fixture(scope="module")
def fitted(llmbar_url, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("fit")
    sets = [a for s in FAST for a in ("--set", s)]
    result = invoke("fit", "--data", llmbar_url, "--output", str(out), "--serial", *sets)
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


def test_card_names_the_exported_pipeline(fitted):
    run = Path(fitted)
    model = json.loads((run / "model" / "model.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    exported = summary["choice"]["exported"]
    agg, cal_panel = exported.split("+")
    assert (model["aggregator"]["name"], model["calibrator"]["name"], model["panel"]) == (agg, *cal_panel.split("@"))
    report = (run / "report.md").read_text()
    assert f"# Model card: `{exported}`" in report and "## Recommendation" in report
    assert interval_note(0.95, bootstrap_over="groups of linked items", resamples=200) in report
    assert "| bin | items |" in report and "| judge | weight |" in report and (run / "figures/reliability.png").exists()
    assert summary["choice"]["runner_up"] and summary["choice"]["runner_up"] != exported
    weights = pd.read_csv(run / "judge_weights.csv")
    assert sorted(weights["judge_id"].astype(str)) == sorted(model["judge_ids"])
    assert "convergence_warnings" in pd.read_parquet(run / "summary.parquet").columns


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_score_reproduces_the_card_predictions_exactly(fitted, llmbar_url, tmp_path, engine):
    out = tmp_path / "scored"
    result = invoke("score", "--model", fitted, "--data", llmbar_url, "--output", str(out), "--engine", engine)
    assert result.exit_code == 0, result.output
    card = pd.read_parquet(Path(fitted) / "predictions.parquet")
    scored = pd.read_parquet(out / "items").set_index("item_id").loc[card["item_id"]]
    np.testing.assert_array_equal(scored["p"].to_numpy(), card["p"].to_numpy())
    assert (scored["verdict"].to_numpy() == card["verdict"].to_numpy()).all() and scored["in_calibration"].all()


def test_card_lists_the_extreme_weights_of_a_large_panel():
    from judgecal_dist.studies.fit.report import SHOWN_JUDGES, _weight_lines

    weights = pd.DataFrame(
        {"judge_id": [f"j{k}" for k in range(30)], "weight": np.linspace(2, -1, 30), "votes": 10, "accuracy": 0.7}
    )
    lines = _weight_lines(weights)
    assert (
        sum(line.startswith("| j") and "judge" not in line for line in lines) == 2 * SHOWN_JUDGES
        and "| (20 more) | | | |" in lines
    )
    first = lines.index("| judge | weight | votes | accuracy |") + 2  # after the header and its rule
    assert "| j0 |" in lines[first] and lines[-1].startswith("| j29 |")


def test_one_standard_error_rule_prefers_fewer_judges_then_simpler_calibrators():
    table = pd.DataFrame(
        {
            "candidate": ["one_coin+beta@all", "one_coin+isotonic@top3", "one_coin+platt@top3", "majority+none@top3"],
            "aggregator": ["one_coin", "one_coin", "one_coin", "majority"],
            "calibrator": ["beta", "isotonic", "platt", "none"],
            "panel": ["all", "top3", "top3", "top3"],
            "n_judges": [9, 3, 3, 3],
            "nll": [0.30, 0.31, 0.32, 0.40],
            "se": [0.025, 0.02, 0.02, 0.02],
        }
    )
    assert choose(table, "one_se") == ("one_coin+platt@top3", "one_coin+beta@all")  # 0.32 <= 0.30 + 0.025
    assert choose(table, "lowest") == ("one_coin+beta@all", "one_coin+isotonic@top3")


@pytest.mark.parametrize("export", ["auto", "majority+isotonic@top3"])
def test_inclusion_exports_its_recommended_pipeline(llmbar_url, tmp_path, export):
    from judgecal_dist.config import EngineConfig
    from judgecal_dist.models import load_model
    from judgecal_dist.studies.runner import execute, prepare

    sets = [f"data={llmbar_url}", "replicates=2", "permutation_resamples=200", f"export={export}", *FAST[:3]]
    run = execute(prepare("inclusion", sets), EngineConfig(ray_num_cpus=2), output=str(tmp_path), serial=True)
    model = load_model(run)
    # auto exports the recommendation: the one rule (one-SE toward simpler) applied here by hand to the summary.
    summary = pd.read_parquet(Path(run) / "summary.parquet").sort_values("nll", kind="stable")
    se = (summary["nll_ci_high"] - summary["nll_ci_low"]) / (2 * 1.959964)
    near = summary[summary["nll"] <= summary["nll"].iloc[0] + se.iloc[0]].assign(
        cal=lambda t: t["calibrator"].map(["none", "platt", "isotonic"].index),
        agg=lambda t: t["aggregator"].map(["majority", "one_coin", "stacking"].index),
    )
    best = near.sort_values(["panel_size", "cal", "agg", "nll"], kind="stable").iloc[0]
    recommended = json.loads((Path(run) / "summary.json").read_text())["recommendation"]["choice"]
    assert (recommended["aggregator"], recommended["calibrator"], recommended["panel"]) == (
        best.aggregator,
        best.calibrator,
        best.panel,
    )
    expected = (
        f"{best.aggregator} + {best.calibrator} @ {best.panel}" if export == "auto" else "majority + isotonic @ top3"
    )
    assert model.name == expected and f"**Exported model:** `{expected}`" in (Path(run) / "report.md").read_text()
    assert len(model.judge_ids) == (3 if model.panel == "top3" else 130)


def test_the_run_history_records_the_exported_models_weights(fitted):
    """The history's per-judge weights are the exported model's (``coef`` of a stacker, else ``weights``)."""
    from judgecal_dist.history.store import read_history

    run = Path(fitted)
    model = json.loads((run / "model" / "model.json").read_text())
    aggregator = model["aggregator"]
    judges = read_history(str(run.parent.parent), "judges").set_index("judge_id")["weight"]
    expected = aggregator.get("weights") or aggregator.get("coef")
    if expected is None:  # majority has no per-judge weight
        assert judges.isna().all()
    else:
        np.testing.assert_allclose(judges.loc[model["judge_ids"]].to_numpy(), expected)
