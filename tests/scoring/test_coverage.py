"""Coverage: items no model judge voted on are left unscored and counted; a table holding too few of the model's
judges is refused unless told; rows the model was fitted on are flagged (``in_calibration``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import InputError
from judgecal_dist.scoring.apply import score_dataset
from tests.scoring.support import ITEMS, expected_p, model_json, write_arena, write_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> str:
    return write_arena(str(tmp_path_factory.mktemp("arena") / "data"))


def _score(*args: str):
    return CliRunner().invoke(cli, ["score", *args])


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_table_sharing_no_judge_is_refused_then_left_unscored_when_told(engine, arena, tmp_path, spark):
    strangers = write_run(tmp_path / "run", model_json({"k1": 1.0, "k2": 0.5}))
    out = tmp_path / "out"
    common = ["--model", strangers, "--data", arena, "--engine", engine, "--ignore-unknown-judges"]
    refused = _score(*common, "--output", str(out))
    assert refused.exit_code == 2, refused.output
    assert re_search(
        r"verdicts: judge_id: 2 of the model's 2 judges have no verdicts at sample=0 \(e\.g\. \['k1', "
        r"'k2'\]\), coverage 0% below 50%.*--min-judge-coverage 0",
        refused.output,
    )
    assert not out.exists()
    told = _score(*common, "--output", str(out), "--min-judge-coverage", "0")
    assert told.exit_code == 0, told.output
    counts = json.loads(told.output.splitlines()[-2])
    assert counts["items"] == counts["items_without_votes"] == len(ITEMS) and counts["judge_coverage"] == 0.0
    items = pd.read_parquet(out / "items")
    assert items[["score", "p", "verdict", "set_alpha_0_1"]].isna().all().all()  # no class-prior verdicts
    summary = json.loads((out / "summary.json").read_text())
    (row,) = summary["datasets"]
    assert row["win_rate"] is None and row["win_rate_ci_low"] is None and row["n_labelled"] == 0
    assert all(r["win_rate"] is None for r in summary["models"] + summary["pairs"])


@pytest.mark.parametrize(
    ("weights", "accepted"),
    [({"j1": 1.0, "j2": 0.5, "k1": 2.0, "k2": -1.0}, True), ({"j1": 1.0, "k1": 2.0, "k2": -1.0, "k3": 0.3}, False)],
)
def test_coverage_floor_is_half_the_model_judges_by_default(weights, accepted, arena, tmp_path):
    run = write_run(tmp_path / "run", model_json(weights))
    out = str(tmp_path / "out")
    engine = EngineConfig(stats_engine="local")
    if not accepted:  # 1 of 4 judges present: 25% < 50%
        with pytest.raises(InputError, match=r"3 of the model's 4 judges have no verdicts .*coverage 25% below 50%"):
            score_dataset(run, arena, out, engine=engine, unknown_judges="ignore")
        return
    result = score_dataset(run, arena, out, engine=engine, unknown_judges="ignore")  # 2 of 4 present: 50%
    assert result["counts"]["judge_coverage"] == 0.5 and result["counts"]["model_judges_absent"] == ["k1", "k2"]
    items = pd.read_parquet(Path(out) / "items").set_index("item_id")["p"].sort_index()
    np.testing.assert_allclose(items, expected_p(weights).sort_index(), rtol=0, atol=1e-12)  # absent judges: no vote
    (row,) = result["datasets"]
    assert row["items_without_votes"] == int(expected_p(weights).isna().sum()) == 1


def test_min_judge_coverage_out_of_range_is_refused(arena, tmp_path):
    run = write_run(tmp_path / "run", model_json())
    result = _score("--model", run, "--data", arena, "--output", str(tmp_path / "o"), "--min-judge-coverage", "1.5")
    assert result.exit_code == 2 and "--min-judge-coverage: must be in [0, 1], got 1.5" in result.output


@pytest.fixture(scope="module")
def fitted_run(tmp_path_factory) -> tuple[str, str]:
    """An inclusion run (2 replicates) on a generated table where a third of the items have no label."""
    from judgecal_dist.io.synthetic import generate_panel
    from judgecal_dist.studies.runner import execute, prepare

    base = tmp_path_factory.mktemp("fitted")
    data = str(base / "panel")
    generate_panel(data, n_items=300, n_judges=5, seed=4, label_fraction=0.67)
    settings = [
        f"data={data}",
        "replicates=2",
        "aggregators=[one_coin]",
        "calibrators=[beta]",
        "panels=[all]",
        "permutation_resamples=100",
    ]
    run = execute(
        prepare(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml", settings),
        EngineConfig(),
        output=str(base),
        serial=True,
    )
    return run, data


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_items_the_model_was_fitted_on_are_flagged(engine, fitted_run, tmp_path, spark):
    from judgecal_dist.io.dataset import read_dataset_table

    run, data = fitted_run
    result = score_dataset(run, data, str(tmp_path / "out"), engine=EngineConfig(stats_engine=engine))
    items = pd.read_parquet(tmp_path / "out" / "items").set_index("item_id").sort_index()
    # The reference: the study fits its model on every item labelled A or B (and only those).
    labels = read_dataset_table(data, "labels").to_pandas().set_index("item_id")["label"]
    fitted = labels.reindex(items.index).isin(["A", "B"])
    assert 0 < fitted.sum() < len(items)
    assert (items["in_calibration"] == fitted).all()
    assert result["counts"]["items_in_calibration"] == int(fitted.sum())


def re_search(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, text, flags=re.S) is not None
