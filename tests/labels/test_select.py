"""``judgecal label select`` as a user reaches it: the project's own panel (``judgecal generate``) and model
(``judgecal fit``), relative paths from another folder, defaults, two rounds, and every refusal (exit 2, nothing
written)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A generated panel (10% labelled), its fitted model and its scored items, in one folder."""
    root = tmp_path_factory.mktemp("project")
    data, results, scores = root / "panel", root / "results", root / "scores"
    assert (
        invoke(
            "generate", "--items", "2000", "--judges", "6", "--label-fraction", "0.1", "--seed", "3", str(data)
        ).exit_code
        == 0
    )
    fitted = invoke("fit", "--data", str(data), "--output", str(results), "--serial")
    assert fitted.exit_code == 0, fitted.output
    run = fitted.output.strip().splitlines()[-1]
    (root / "run.txt").write_text(run)
    assert invoke("score", "--model", run, "--data", str(data), "--output", str(scores)).exit_code == 0
    return root


def _run(project: Path) -> str:
    return (project / "run.txt").read_text()


def _scored(project: Path) -> pd.DataFrame:
    return pd.read_parquet(project / "scores" / "items")[["item_id", "p", "label"]]


def test_defaults_from_another_folder(project, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = os.path.relpath(project / "panel", tmp_path)  # relative paths, as a user types them
    result = invoke("label", "select", "--model", _run(project), "--data", data, "--budget", "40", "--output", "q/r1")
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("q/r1")
    queue = pd.read_parquet("q/r1/queue.parquet")
    assert list(queue.columns) == ["dataset", "item_id", "inclusion_prob", "stratum", "p", "round"]
    csv = pd.read_csv("q/r1/queue.csv")
    pd.testing.assert_frame_equal(csv, queue, check_dtype=False)
    record = json.loads(Path("q/r1/selection.json").read_text())
    assert Path("q/r1/_SUCCESS").exists() and record["round"] == 1 and (queue["round"] == 1).all()
    assert record["design"]["sampling"] == "poisson" and record["inputs"]["settings"]["floor"] == 0.2
    # p is the scoring path's, and no labelled item is queued
    scored = _scored(project).set_index("item_id")
    np.testing.assert_allclose(queue["p"], scored.loc[queue["item_id"], "p"])
    assert scored.loc[queue["item_id"], "label"].isna().all()
    # pi follows the design's formula over the candidates (unlabelled items): pi = c * (phi/N + (1-phi) s/sum s)
    candidates = scored[scored["label"].isna()]
    n, sigma = len(candidates), np.sqrt(candidates["p"] * (1 - candidates["p"]))
    weight = 0.2 / n + 0.8 * np.sqrt(queue["p"] * (1 - queue["p"])).to_numpy() / sigma.sum()
    uncapped = queue["inclusion_prob"].to_numpy() < 1
    ratio = queue["inclusion_prob"].to_numpy()[uncapped] / weight[uncapped]
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
    assert record["counts"]["candidates"] == n and record["design"]["expected_size"] == pytest.approx(40)
    assert (queue["inclusion_prob"] >= 0.2 * 40 / n * (1 - 1e-12)).all()


def test_reproducible_by_seed_and_already_complete(project, tmp_path) -> None:
    args = ["label", "select", "--model", _run(project), "--data", str(project / "panel"), "--budget", "30"]
    first = invoke(*args, "--output", str(tmp_path / "a" / "q"), "--seed", "5")
    again = invoke(*args, "--output", str(tmp_path / "b" / "q"), "--seed", "5")
    other = invoke(*args, "--output", str(tmp_path / "c" / "q"), "--seed", "6")
    assert first.exit_code == again.exit_code == other.exit_code == 0
    a, b, c = (pd.read_parquet(tmp_path / x / "q" / "queue.parquet") for x in "abc")
    pd.testing.assert_frame_equal(a, b)
    assert set(a["item_id"]) != set(c["item_id"])
    stamp = (tmp_path / "a" / "q" / "queue.parquet").stat().st_mtime_ns
    rerun = invoke(*args, "--output", str(tmp_path / "a" / "q"), "--seed", "5")
    assert rerun.exit_code == 0 and (tmp_path / "a" / "q" / "queue.parquet").stat().st_mtime_ns == stamp
    refused = invoke(*args, "--output", str(tmp_path / "a" / "q"), "--seed", "7")
    assert refused.exit_code == 2 and "differing: settings" in refused.output
    assert "holds a committed judgecal label select result of other inputs" in refused.output


def test_rounds_never_select_an_item_twice(project, tmp_path) -> None:
    args = ["label", "select", "--model", _run(project), "--data", str(project / "panel"), "--budget", "150"]
    queues = tmp_path / "queues"
    for name in ("r1", "r2", "r3"):
        assert invoke(*args, "--output", str(queues / name)).exit_code == 0
    frames = [pd.read_parquet(queues / n / "queue.parquet") for n in ("r1", "r2", "r3")]
    assert [int(f["round"].iloc[0]) for f in frames] == [1, 2, 3]
    ids = pd.concat(frames)["item_id"]
    assert ids.is_unique and all(len(f) > 100 for f in frames)  # each round draws afresh (about 150 each)
    record = json.loads((queues / "r3" / "selection.json").read_text())
    assert record["counts"]["in_earlier_queues"] == len(frames[0]) + len(frames[1])
    # an explicit --previous elsewhere counts too
    named = invoke(*args, "--output", str(tmp_path / "elsewhere" / "q"), "--previous", str(queues / "r1"))
    assert named.exit_code == 0
    fresh = pd.read_parquet(tmp_path / "elsewhere" / "q" / "queue.parquet")
    assert not set(fresh["item_id"]) & set(frames[0]["item_id"]) and (fresh["round"] == 2).all()


def test_strata_and_costs(project, tmp_path) -> None:
    args = ["label", "select", "--model", _run(project), "--data", str(project / "panel")]
    strat = invoke(
        *args, "--budget", "40", "--strata", "dataset", "--allocation", "proportional", "--output", str(tmp_path / "s")
    )
    assert strat.exit_code == 0, strat.output
    assert (pd.read_parquet(tmp_path / "s" / "queue.parquet")["stratum"] == "dataset=synthetic").all()
    cost = invoke(
        *args, "--budget", "300", "--label-cost", "5", "--proxy-cost", "0.001", "--output", str(tmp_path / "c")
    )
    assert cost.exit_code == 0, cost.output
    design = json.loads((tmp_path / "c" / "selection.json").read_text())["design"]
    assert design["cost_optimal"]["use_proxy"] and design["expected_size"] == pytest.approx(
        (300 - 1800 * 0.001) / 5, rel=0.02
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budget", "5000"], "--budget: 5000 labels asked but only"),
        (["--budget", "10", "--strata", "subset"], "items: --strata: no column(s) ['subset']"),
        (["--budget", "10", "--floor", "0"], "--floor: 0: must be in (0, 1]"),
        (["--budget", "10", "--floor", "1.5"], "--floor: 1.5: must be in (0, 1]"),
        (["--budget", "-3"], "--budget: -3: must be positive"),
        (["--budget", "10", "--label-cost", "0", "--proxy-cost", "1"], "--label-cost: 0: must be positive"),
        (["--budget", "10", "--label-cost", "1", "--proxy-cost", "-1"], "--proxy-cost: -1: must be positive"),
        (["--budget", "10", "--label-cost", "1"], "give both costs"),
        (["--budget", "10", "--previous", "nowhere/q"], "--previous: nowhere/q: not a committed label select queue"),
    ],
)
def test_refusals_exit_2_and_write_nothing(project, tmp_path, extra, message) -> None:
    out = tmp_path / "q"
    result = invoke(
        "label", "select", "--model", _run(project), "--data", str(project / "panel"), "--output", str(out), *extra
    )
    assert result.exit_code == 2 and message in result.output, result.output
    assert sum(line.startswith("Error:") for line in result.output.splitlines()) == 1 and not out.exists()


def test_refuses_a_model_that_is_not_a_binary_panel_and_foreign_folders(project, tmp_path) -> None:
    doc = {
        "format": "judgecal.linear-corrector/v1",
        "judge_id": "judge-000",
        "fit": "conjugate",
        "rubrics": [
            {"rubric": "chat", "alpha": 0.1, "beta": 0.9, "sigma": 0.3, "cov": [[0.01, 0], [0, 0.01]], "sigma2": 0.1}
        ],
    }
    (tmp_path / "m.json").write_text(json.dumps(doc))
    args = ["label", "select", "--data", str(project / "panel"), "--budget", "10"]
    result = invoke(*args, "--model", str(tmp_path / "m.json"), "--output", str(tmp_path / "q"))
    assert result.exit_code == 2 and "linear-corrector model is not a binary panel" in result.output
    assert not (tmp_path / "q").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    foreign = invoke(*args, "--model", _run(project), "--output", str(tmp_path / "mine"))
    assert foreign.exit_code == 2 and "did not write" in foreign.output
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    inside = invoke(*args, "--model", _run(project), "--output", str(project / "panel" / "q"))
    assert inside.exit_code == 2 and "is inside --data" in inside.output


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--strata", "dataset", "--allocation", "proportional", "--floor", "0.5", "--seed", "9"],
        ["--label-cost", "5", "--proxy-cost", "0.001", "--budget", "400"],
    ],
)
def test_spark_selects_the_same_items(project, tmp_path, spark, extra) -> None:
    """Forced engines give the same queue: the same global sums, the same plan, the same keyed draw."""
    args = ["label", "select", "--model", _run(project), "--data", str(project / "panel"), "--budget", "120", *extra]
    for engine in ("local", "spark"):
        first = invoke(*args, "--engine", engine, "--output", str(tmp_path / engine / "r1"))
        assert first.exit_code == 0, first.output
        second = invoke(*args, "--engine", engine, "--output", str(tmp_path / engine / "r2"))
        assert second.exit_code == 0, second.output
    for name in ("r1", "r2"):
        local, remote = (pd.read_parquet(tmp_path / e / name / "queue.parquet") for e in ("local", "spark"))
        assert len(local) > 50
        pd.testing.assert_frame_equal(local, remote, check_exact=False, rtol=1e-12)
        records = [json.loads((tmp_path / e / name / "selection.json").read_text()) for e in ("local", "spark")]
        assert records[0]["counts"] == records[1]["counts"] and records[1]["engine"] == "spark"
        design = [r["design"] for r in records]
        assert design[0]["expected_size"] == pytest.approx(design[1]["expected_size"], rel=1e-12)
        assert design[0]["size_sd"] == pytest.approx(design[1]["size_sd"], rel=1e-9)
        assert design[0].get("cost_optimal", {}).keys() == design[1].get("cost_optimal", {}).keys()
