"""One recommendation engine (issue 29): only deployable pipelines are recommended, the exported model is the
recommendation, and on LLMBar the inclusion study, the budget study and ``judgecal fit`` recommend pipelines whose
NLL intervals overlap, each naming the others' choice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.studies.inclusion.config import DIAGNOSTIC_PANEL
from judgecal_dist.studies.inclusion.config import Config as InclusionConfig
from judgecal_dist.studies.inclusion.model import exported_candidate
from judgecal_dist.studies.inclusion.recommend import recommend
from judgecal_dist.studies.recommendation import choose, deployable, overlap


def _grid() -> pd.DataFrame:
    """An inclusion summary in which the oracle, scope and searched arms have the lowest NLL."""
    rows = [
        # aggregator, calibrator, panel, panel size, NLL, half-width of its 95% interval
        ("one_coin", "beta", "oracle5", 5, 0.20, 0.01),
        ("one_coin", "beta", "no_p3", 120, 0.21, 0.01),
        ("one_coin", "beta", "random5", 5, 0.22, 0.01),
        ("one_coin", "beta", "greedy5", 5, 0.23, 0.01),
        ("stacking", "platt", "all", 130, 0.300, 0.0196),  # SE 0.01
        ("one_coin", "temperature", "all", 130, 0.305, 0.0196),  # within one SE, simpler calibrator
        ("one_coin", "beta", "top5", 5, 0.330, 0.0196),  # fewer judges but 3 SEs away
        ("majority", "none", "all", 130, 0.600, 0.0196),
    ]
    table = pd.DataFrame(rows, columns=["aggregator", "calibrator", "panel", "panel_size", "nll", "half"])
    return table.assign(nll_ci_low=table["nll"] - table["half"], nll_ci_high=table["nll"] + table["half"]).drop(
        columns="half"
    )


def test_diagnostic_scope_and_searched_arms_are_reported_never_recommended():
    config = InclusionConfig(data="x", panels=["all", "top5", "oracle5", "no_p3", "random5", "greedy5"])
    assert {p for p in config.panels if DIAGNOSTIC_PANEL.fullmatch(p)} == {"oracle5", "no_p3", "random5"}
    table = _grid()
    picked = choose(table, "one_se", level=0.95, judges="panel_size")
    # By hand: the best deployable row is stacking + platt (0.300, SE 0.0196 / 1.96 = 0.01); one_coin +
    # temperature (0.305) is within one SE and simpler by calibrator; top5 (0.330) is not within it.
    assert picked.name == "one_coin+temperature@all" and picked.best["aggregator"] == "stacking"
    assert picked.runner_up["aggregator"] == "stacking"  # the next deployable row, never oracle5
    assert set(picked.reported["panel"]) == {"oracle5", "no_p3", "random5", "greedy5"}
    assert choose(table, "lowest", level=0.95, judges="panel_size").name == "stacking+platt@all"
    rec = recommend(config, table, n_judges=130, n_items=419)
    assert rec.use == "one_coin + temperature on all 130 judges"
    assert "oracle5" not in rec.use + rec.runner_up and "no_p3" not in rec.use + rec.runner_up
    assert "Not recommended: 4 diagnostic, scope or searched arm(s)" in rec.rule
    # The exported pipeline is the recommended one (export: auto), and the record other studies read names it.
    assert exported_candidate(config, table) == ("one_coin", "temperature", "all")
    assert rec.choice["candidate"] == "one_coin+temperature@all" and rec.choice["nll_ci_high"] == pytest.approx(0.3246)
    assert not any(deployable(p) for p in ("oracle5", "no_p3", "random5", "l1", "operating", "greedy5", "beam"))
    assert all(deployable(p) for p in ("all", "top3", "top10", "dedup"))


# -- the three doors on LLMBar -----------------------------------------------------------------------------------------

#: The smallest settings that still decide: two aggregators (the inclusion default's usual choice, stacking, and
#: one-coin), the calibrators of that choice's one-SE neighbourhood, a curated panel, and the oracle and scope arms.
CANDIDATES = ["aggregators=[one_coin, stacking]", "calibrators=[none, temperature, platt, beta]"]


@pytest.fixture(scope="module")
def llmbar_url(llmbar_dir, tmp_path_factory) -> str:
    from judgecal_dist.io.ingest import ingest

    data = str(tmp_path_factory.mktemp("llmbar") / "llmbar")
    ingest("llmbar", str(llmbar_dir), data)
    return data


def _run(study: str, sets: list[str], out: Path, compare: list[str]) -> Path:
    from judgecal_dist.studies.runner import execute, prepare

    sets = [*sets, f"compare=[{', '.join(compare)}]"]
    return Path(execute(prepare(study, sets), EngineConfig(), output=str(out), serial=True))


def _doors(url: str, out: Path) -> dict[str, Path]:
    """Each study run once, then fit and inclusion once more with every other door to name (a changed ``compare``
    is a new run; the choices do not depend on it)."""
    fit = [f"data={url}", *CANDIDATES, "panels=[all, top5]", "resamples=200"]
    inclusion = [
        f"data={url}",
        *CANDIDATES,
        "panels=[all, top5, oracle5, no_p3]",
        "replicates=4",
        "permutation_resamples=200",
        "item_bootstrap_resamples=0",
        "controls=[]",
        "conformal_alphas=[]",
    ]
    budget = [
        f"data={url}",
        "aggregators=[one_coin, stacking]",
        "calibrators=[beta, platt, temperature]",
        "replicates=4",
        "budgets=[50]",
        "max_t_resamples=500",
    ]
    first = _run("fit", fit, out, [])
    runs = {"inclusion": _run("inclusion", inclusion, out, [str(first)])}
    runs["budget"] = _run("budget", budget, out, [str(first), str(runs["inclusion"])])
    runs["fit"] = _run("fit", fit, out, [str(runs["inclusion"]), str(runs["budget"])])
    runs["inclusion"] = _run("inclusion", inclusion, out, [str(runs["fit"]), str(runs["budget"])])
    return runs


def test_inclusion_budget_and_fit_recommend_overlapping_pipelines_and_name_each_other(llmbar_url, tmp_path):
    runs = _doors(llmbar_url, tmp_path)
    recs = {name: json.loads((run / "summary.json").read_text())["recommendation"] for name, run in runs.items()}
    choices = {name: rec["choice"] for name, rec in recs.items()}
    for name, choice in choices.items():
        assert deployable(choice["panel"]) and not DIAGNOSTIC_PANEL.fullmatch(choice["panel"]), name
        assert choice["nll_ci_low"] <= choice["nll"] <= choice["nll_ci_high"], name
        # The exported model is the recommendation.
        model = json.loads((run_model := runs[name] / "model" / "model.json").read_text())
        assert (model["aggregator"]["name"], model["calibrator"]["name"], model["panel"]) == (
            choice["aggregator"],
            choice["calibrator"],
            choice["panel"],
        ), run_model
    names = list(choices)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert overlap(choices[a], choices[b], "nll"), (a, choices[a], b, choices[b])
    for name, run in runs.items():
        text = (run / "report.md").read_text().split("## Recommendation", 1)[1].split("\n## ", 1)[0]
        for other in set(names) - {name}:
            said = [line for line in recs[name]["others"] if line.startswith(f"{other} (run ")]
            theirs = choices[other]
            assert len(said) == 1, (name, other, recs[name]["others"])
            assert f"chose {theirs['aggregator']} + {theirs['calibrator']} on" in said[0]
            assert ("the same pipeline" in said[0]) == (theirs["candidate"] == choices[name]["candidate"])
            assert said[0] in text
    # The inclusion runner-up is deployable too (the oracle arm had been the runner-up).
    assert "oracle5" not in recs["inclusion"]["runner_up"] and "no_p3" not in recs["inclusion"]["runner_up"]
    assert np.isfinite([c["nll"] for c in choices.values()]).all()


def test_compare_rejects_a_folder_that_is_not_a_finished_run(llmbar_url, tmp_path):
    from judgecal_dist.errors import ConfigError
    from judgecal_dist.studies.runner import execute, prepare

    sets = [f"data={llmbar_url}", f"compare=[{tmp_path / 'nothing'}]", "replicates=2"]
    with pytest.raises(ConfigError, match=r"compare: .*nothing: no summary.json"):
        execute(prepare("budget", sets), EngineConfig(), output=str(tmp_path / "out"), serial=True)
    assert not (tmp_path / "out" / "budget").exists()  # refused before anything was written
