"""``judgecal score`` from the command line: arena summaries, bad input (exit 2), atomic commits and reruns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from statsmodels.stats.weightstats import DescrStatsW

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import InputError
from judgecal_dist.scoring import summary as summ
from judgecal_dist.scoring.apply import score_dataset
from tests.scoring.support import ITEMS, WEIGHTS, expected_p, model_json, write_arena, write_run


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> str:
    return write_arena(str(tmp_path_factory.mktemp("arena") / "data"))


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_arena_items_and_win_rates(engine, arena, tmp_path, spark):
    run = write_run(tmp_path / "run", model_json())
    out = tmp_path / "out"
    result = invoke("score", "--model", run, "--data", arena, "--output", str(out), "--engine", engine)
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == str(out)
    items = pd.read_parquet(out / "items").set_index("item_id").sort_index()
    p = expected_p()
    np.testing.assert_allclose(items["p"], p.sort_index(), rtol=0, atol=1e-12)
    # i6 has no vote from any model judge (a tie and two absent verdicts): no probability, verdict or set
    assert items.loc["i6", ["score", "p", "verdict", "set_alpha_0_1"]].isna().all()
    strict, loose = items["set_alpha_0_1"].drop("i6").map(list), items["set_alpha_0_2"].drop("i6").map(list)
    assert [strict["i1"], strict["i2"]] == [["A"], ["B"]]  # p = 0.852, 0.378
    assert [loose["i1"], loose["i2"]] == [["A"], ["A", "B"]]
    summary = json.loads((out / "summary.json").read_text())
    models = pd.DataFrame(summary["models"]).set_index("model")
    for m in ("m1", "m2", "m3"):  # P(model wins) averaged over the scored items it plays in, by hand
        played = [i for i, s in ITEMS.items() if m in s[:2]]
        wins = [p[i] if ITEMS[i][0] == m else 1 - p[i] for i in played if not np.isnan(p[i])]
        assert models.loc[m, "win_rate"] == pytest.approx(np.mean(wins), abs=1e-12)
        assert models.loc[m, "n_items"] == len(played)
        assert models.loc[m, "items_without_votes"] == len(played) - len(wins)
    pairs = pd.DataFrame(summary["pairs"]).set_index(["model_a", "model_b"])
    assert pairs.loc[("m1", "m2"), "win_rate"] == pytest.approx((p["i1"] + p["i2"]) / 2, abs=1e-12)
    (lone,) = [r for r in summary["pairs"] if (r["model_a"], r["model_b"]) == ("m3", "m2")]  # only i6: unscored
    assert lone["win_rate"] is None and lone["win_rate_ci_low"] is None and lone["items_without_votes"] == 1
    (row,) = summary["datasets"]
    lab = {i: s[2] for i, s in ITEMS.items() if s[2] and not np.isnan(p[i])}
    assert row["n_labelled"] == 3 and row["n_items"] == 6 and row["items_without_votes"] == 1
    assert row["brier"] == pytest.approx(np.mean([(p[i] - (v == "A")) ** 2 for i, v in lab.items()]), abs=1e-12)
    # the mean of the 5 scored probabilities and its normal interval over items (statsmodels as the reference)
    low, high = DescrStatsW(p.dropna().to_numpy()).zconfint_mean(alpha=0.05)
    assert (row["win_rate_ci_low"], row["win_rate_ci_high"]) == pytest.approx((low, high), abs=1e-12)
    # one scored item has no spread to estimate: a rate without an interval
    lone_rows = [r for r in summary["pairs"] if r["n_items"] - r["items_without_votes"] == 1]
    assert lone_rows and all(r["win_rate"] is not None and r["win_rate_ci_low"] is None for r in lone_rows)


def test_bad_input_exits_2(arena, tmp_path):
    out = str(tmp_path / "out")
    result = invoke("score", "--model", str(tmp_path / "nope"), "--data", arena, "--output", out)
    assert result.exit_code == 2 and "model/model.json: not found" in result.output
    old = write_run(tmp_path / "old", model_json(fmt="judgecal.calibration/v1"))
    result = invoke("score", "--model", old, "--data", arena, "--output", out)
    assert result.exit_code == 2 and "format: expected one of" in result.output
    gold = write_run(tmp_path / "gold", model_json() | {"fitted_on": {"orientation": "gold_positive"}})
    result = invoke("score", "--model", gold, "--data", arena, "--output", out)
    assert result.exit_code == 2 and "gold_positive model cannot score A/B verdicts" in result.output
    two = write_run(tmp_path / "two", model_json({"j1": 1.0, "j2": 0.5}))
    result = invoke("score", "--model", two, "--data", arena, "--output", out)
    assert result.exit_code == 2 and "1 judge(s) not in the model (e.g. ['j3'])" in result.output
    result = invoke("score", "--model", two, "--data", str(tmp_path / "missing"), "--output", out)
    assert result.exit_code == 2 and "missing: no such file or directory" in result.output
    (tmp_path / "empty").mkdir()
    result = invoke("score", "--model", two, "--data", str(tmp_path / "empty"), "--output", out)
    assert result.exit_code == 2 and "_SUCCESS" in result.output
    result = invoke("score", "--model", two, "--data", arena, "--output", out, "--sample", "3", "--engine", "local")
    assert result.exit_code == 2 and "no verdict rows with sample=3" in result.output
    assert not Path(out, "_SUCCESS").exists()
    # documented handling: the model's judges only
    result = invoke("score", "--model", two, "--data", arena, "--output", out, "--ignore-unknown-judges")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.splitlines()[-2])["unknown_judges_ignored"] == ["j3"]
    items = pd.read_parquet(Path(out) / "items").set_index("item_id")
    np.testing.assert_allclose(items["p"].sort_index(), expected_p({"j1": 1.0, "j2": 0.5}).sort_index(), atol=1e-12)


def test_spark_checks_judges_and_sample_in_the_scoring_pass(arena, tmp_path, spark):
    """Spark has no pre-pass over the verdicts: the scan's tally refuses the same inputs, leaving nothing behind."""
    two = write_run(tmp_path / "two", model_json({"j1": 1.0, "j2": 0.5}))
    out = tmp_path / "out"
    engine = EngineConfig(stats_engine="spark")
    with pytest.raises(InputError, match=r"verdicts: judge_id: 1 judge\(s\) not in the model \(e.g. \['j3'\]\)"):
        score_dataset(two, arena, str(out), engine=engine)
    with pytest.raises(InputError, match="no verdict rows with sample=3"):
        score_dataset(two, arena, str(out), engine=engine, sample=3)
    assert not (out / "_SUCCESS").exists() and not (out / "items").exists() and not list(out.glob("_tmp/*"))
    result = score_dataset(two, arena, str(out), engine=engine, unknown_judges="ignore")
    assert result["counts"]["unknown_judges_ignored"] == ["j3"] and result["counts"]["model_judges_absent"] == []
    items = pd.read_parquet(out / "items").set_index("item_id")
    np.testing.assert_allclose(items["p"].sort_index(), expected_p({"j1": 1.0, "j2": 0.5}).sort_index(), atol=1e-12)
    wide = write_run(tmp_path / "wide", model_json(WEIGHTS | {"j9": 3.0}))  # a model judge the table lacks
    result = score_dataset(wide, arena, str(tmp_path / "wide-out"), engine=engine)
    assert result["counts"]["model_judges_absent"] == ["j9"] and result["counts"]["unknown_judges_ignored"] == []


def test_output_commits_atomically_and_reruns(arena, tmp_path, monkeypatch):
    run = write_run(tmp_path / "run", model_json())
    out = str(tmp_path / "out")
    engine = EngineConfig(stats_engine="local")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(summ, "figure", broken)  # a fault after the items were written
    with pytest.raises(OSError, match="disk full"):
        score_dataset(run, arena, out, engine=engine)
    assert Path(out, "items").exists() and not Path(out, "_SUCCESS").exists()
    monkeypatch.undo()
    first = score_dataset(run, arena, out, engine=engine)  # the failed output is redone in place
    assert Path(out, "_SUCCESS").exists() and not Path(out, "_tmp").exists()
    assert len(pd.read_parquet(Path(out) / "items")) == len(ITEMS)
    stamp = Path(out, "_SUCCESS").stat().st_mtime_ns
    again = score_dataset(run, arena, out, engine=engine)
    assert again["skipped"] and again["datasets"] == first["datasets"]
    assert Path(out, "_SUCCESS").stat().st_mtime_ns == stamp  # a no-op: nothing rewritten
    # Other inputs at the same output are refused; with --overwrite they replace score's own files (only those).
    Path(out, "NOTES.txt").write_text("mine")
    other = write_run(tmp_path / "other", model_json({"j1": 2.0, "j2": 0.5, "j3": 0.0}))
    refused = invoke("score", "--model", other, "--data", arena, "--output", out)
    assert refused.exit_code == 2 and "other inputs" in refused.output and "--overwrite" in refused.output
    assert Path(out, "_SUCCESS").stat().st_mtime_ns == stamp
    result = invoke("score", "--model", other, "--data", arena, "--output", out, "--overwrite")
    assert result.exit_code == 0, result.output
    items = pd.read_parquet(Path(out) / "items").set_index("item_id").sort_index()
    np.testing.assert_allclose(items["p"], expected_p({"j1": 2.0, "j2": 0.5, "j3": 0.0}).sort_index(), atol=1e-12)
    assert Path(out, "NOTES.txt").read_text() == "mine" and Path(out, "_SUCCESS").exists()


def test_console_counts_shorten_long_judge_lists_and_keep_short_ones():
    from judgecal_dist.scoring.output import brief_counts

    many = [f"judge{i:03d}" for i in range(123)]
    brief = brief_counts({"items": 419, "unknown_judges_ignored": many, "model_judges_absent": ["j9"]})
    assert brief["unknown_judges_ignored"] == {"count": 123, "first": many[:3], "all_in": "summary.json"}
    assert brief["model_judges_absent"] == ["j9"] and brief["items"] == 419
