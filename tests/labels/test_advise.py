"""``judgecal advise`` on a generated panel (no shared data): the frontier against a brute-force reference over
every panel, the pick, the folder's commit and ownership, and refusals that write nothing."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.io.dataset import read_dataset_table, write_dataset
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.pipeline import Settings, calibrate
from judgecal_dist.splits import assign_blocks, group_keys
from judgecal_dist.studies.inclusion.search import FOLD_SEED_OFFSET

ACCURACY = {"judge-000": 0.85, "judge-001": 0.8, "judge-002": 0.62, "judge-003": 0.58}
COSTS = {"judge-000": 4.0, "judge-001": 1.0, "judge-002": 0.25, "judge-003": 0.1}


@pytest.fixture(scope="module")
def panel_url(tmp_path_factory) -> str:
    dest = str(tmp_path_factory.mktemp("panel") / "ds")
    generate_panel(
        dest,
        n_items=800,
        n_judges=4,
        seed=11,
        families=4,
        family_corr=0.0,
        below_chance=0.0,
        unsure_rate=0.0,
        position_bias=0.5,
        missing_rate=0.05,
        judge_params={j: {"accuracy": a} for j, a in ACCURACY.items()},
    )
    return dest


def _costs_args() -> list[str]:
    return [arg for j, c in COSTS.items() for arg in ("--set", f"costs.{j}={c}")]


def _invoke(*args: str):
    return CliRunner().invoke(cli, ["advise", *args])


@pytest.fixture(scope="module")
def advised(panel_url, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("advice") / "out"
    result = _invoke("--data", panel_url, "--output", str(out), *_costs_args(), "--set", "target_width=0.03")
    assert result.exit_code == 0, result.output
    return out


def _reference(url: str) -> pd.DataFrame:
    """Every panel scored naively: per subset and fold, one-coin on the other folds' items, then beta calibration
    fitted per fold on the out-of-fold log-odds of the other folds (the library's calibrator, one at a time)."""
    v = read_dataset_table(url, "verdicts").to_pandas()
    lab = read_dataset_table(url, "labels").to_pandas()
    lab = lab[lab["label"].isin(["A", "B"])]
    v = v[v["sample"] == 0]
    wide = v.pivot(index="item_id", columns="judge_id", values="verdict").reindex(lab["item_id"])
    votes = wide.apply(lambda col: col.map({"A": 1, "B": 0})).fillna(-1).to_numpy(np.int8)
    y = (lab["label"] == "A").to_numpy(np.int8)
    groups = v.drop_duplicates("item_id").set_index("item_id")["group_id"].reindex(lab["item_id"])
    keys = group_keys((lab["dataset"].to_numpy() + "/" + groups.astype(str).to_numpy()).astype(str))
    folds = assign_blocks(keys, FOLD_SEED_OFFSET, [0.2] * 5)
    settings = Settings()
    rows = []
    judges = list(wide.columns)
    for r in range(1, len(judges) + 1):
        for subset in itertools.combinations(range(len(judges)), r):
            cols = list(subset)
            t = np.zeros(len(y))
            for k in np.unique(folds):
                held = folds == k
                model = OneCoin().fit(votes[~held][:, cols], y[~held])
                t[held] = model.decision_function(votes[held][:, cols])
            loss = np.zeros(len(y))
            for k in np.unique(folds):
                held = folds == k
                p = calibrate("beta", settings, t[~held], y[~held], {"e": t[held]})["e"]
                p = np.clip(p, settings.eps, 1 - settings.eps)
                loss[held] = -(y[held] * np.log(p) + (1 - y[held]) * np.log1p(-p))
            rows.append(
                {
                    "panel": "+".join(judges[i] for i in subset),
                    "nll": loss.mean(),
                    "se": loss.std(ddof=1) / math.sqrt(len(y)),
                    "accuracy": float((loss < math.log(2)).mean()),
                    "cost": sum(COSTS[judges[i]] for i in subset),
                }
            )
    return pd.DataFrame(rows)


def test_frontier_and_pick_agree_with_brute_force(panel_url, advised):
    ref = _reference(panel_url).set_index("panel")
    got = pd.read_parquet(advised / "frontier.parquet").set_index("panel")
    assert sorted(got.index) == sorted(ref.index) and len(ref) == 15
    np.testing.assert_allclose(got.loc[ref.index, "nll"], ref["nll"], atol=2e-3)
    np.testing.assert_allclose(got.loc[ref.index, "cost_per_item"], ref["cost"], rtol=1e-12)
    assert (got["nll_ci_low"] < got["nll"]).all() and (got["nll"] < got["nll_ci_high"]).all()
    best = ref["nll"].idxmin()
    near = ref[ref["nll"] <= ref.loc[best, "nll"] + ref.loc[best, "se"]]
    expected = near.sort_values(["cost", "nll"]).index[0]
    advice = json.loads((advised / "advice.json").read_text())
    assert advice["chosen"]["panel"] == expected
    assert advice["best"]["panel"] == best
    # the frontier flag: no cheaper panel has a lower NLL
    for name, row in got[got["on_frontier"]].iterrows():
        assert not (got[got["cost_per_item"] < row["cost_per_item"]]["nll"] < row["nll"]).any(), name


def test_above_the_exhaustive_limit_the_beam_and_greedy_panels_are_scored(panel_url, tmp_path):
    out = tmp_path / "out"
    result = _invoke("--data", panel_url, "--output", str(out), *_costs_args(), "--set", "max_judges=3")
    assert result.exit_code == 0, result.output
    got = pd.read_parquet(out / "frontier.parquet").set_index("panel")
    ref = _reference(panel_url).set_index("panel")
    assert (got["search"] == "beam + greedy forward").all() and 4 <= len(got) < len(ref)
    np.testing.assert_allclose(got["nll"], ref.loc[got.index, "nll"], atol=2e-3)
    assert "beam + greedy forward search" in (out / "report.md").read_text()


def test_cluster_values_give_the_cluster_robust_standard_error():
    import statsmodels.api as sm

    from judgecal_dist.labels.advise_frontier import cluster_values

    rng = np.random.default_rng(3)
    groups = rng.integers(0, 60, size=400)
    values = rng.gamma(2.0, 0.2, size=400) + 0.3 * (groups % 5)
    u = cluster_values(values, groups)
    assert u.mean() == pytest.approx(values.mean(), rel=1e-12)
    fit = sm.OLS(values, np.ones(values.size)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert u.std(ddof=1) / math.sqrt(u.size) == pytest.approx(float(fit.bse[0]), rel=1e-9)
    singletons = np.arange(values.size)
    np.testing.assert_allclose(cluster_values(values, singletons), values, rtol=1e-12)


def test_report_answers_first_and_the_folder_is_committed(advised):
    report = (advised / "report.md").read_text()
    advice = json.loads((advised / "advice.json").read_text())
    assert report.index("Run the panel") < report.index("Labels") < report.index("## Evidence")
    assert "no collection holds repeated samples" in report  # no repeated samples here: said, not invented
    need = advice["labels"]
    assert need["target_width"] == 0.03 and need["needed"] > 0
    assert (advised / "figures" / "frontier.png").stat().st_size > 10_000
    marker = json.loads((advised / "_JUDGECAL_ADVISE").read_text())
    assert "_SUCCESS" in marker["files"] and (advised / "_SUCCESS").exists()
    assert set(marker["files"]) == {p.relative_to(advised).as_posix() for p in advised.rglob("*") if p.is_file()} - {
        "_JUDGECAL_ADVISE"
    }


def test_rerun_is_already_complete_and_other_inputs_are_refused(panel_url, advised):
    before = {p: p.stat().st_mtime_ns for p in advised.rglob("*") if p.is_file()}
    again = _invoke("--data", panel_url, "--output", str(advised), *_costs_args(), "--set", "target_width=0.03")
    assert again.exit_code == 0, again.output
    assert before == {p: p.stat().st_mtime_ns for p in advised.rglob("*") if p.is_file()}
    other = _invoke("--data", panel_url, "--output", str(advised), *_costs_args(), "--set", "target_width=0.05")
    assert other.exit_code == 2 and "--overwrite" in other.output
    assert before == {p: p.stat().st_mtime_ns for p in advised.rglob("*") if p.is_file()}


def test_costs_from_the_judges_table_then_a_settings_file(panel_url, tmp_path):
    tables = {name: read_dataset_table(panel_url, name) for name in ("verdicts", "labels")}
    table_costs = {j: c * 10 for j, c in COSTS.items()}
    tables["judges"] = pa.table({"judge_id": list(table_costs), "cost_per_call": list(table_costs.values())})
    priced = str(tmp_path / "priced")
    write_dataset(priced, tables, {"source": "test"})
    out = tmp_path / "out"
    result = _invoke("--data", priced, "--output", str(out), "--set", "folds=3")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "advice.json").read_text())["costs"] == table_costs
    conf = tmp_path / "costs.yaml"  # the settings' map wins over the table's column, judge by judge
    conf.write_text("costs:\n  judge-001: 0.5\nfolds: 3\n")
    out2 = tmp_path / "out2"
    result = _invoke("--data", priced, "--output", str(out2), "--costs", str(conf))
    assert result.exit_code == 0, result.output
    assert json.loads((out2 / "advice.json").read_text())["costs"] == table_costs | {"judge-001": 0.5}


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--set", "costs.judge-999=1.0"], "costs.judge-999"),
        (["--set", "costs.judge-001=-1"], "costs.judge-001"),
        (["--set", "costs.judge-001=abc"], "costs.judge-001"),
        (["--set", "budget=5"], "budget"),
        (["--set", "prices.mini=[0.75,4.5]"], "prices.mini"),
        (["--set", "target_width=0"], "target_width"),
    ],
)
def test_bad_settings_exit_2_and_write_nothing(panel_url, tmp_path, args, names):
    out = tmp_path / "out"
    result = _invoke("--data", panel_url, "--output", str(out), *_costs_args(), *args)
    assert result.exit_code == 2, result.output
    assert names in result.output
    assert not out.exists()


def test_a_judge_without_a_cost_is_refused(panel_url, tmp_path):
    out = tmp_path / "out"
    result = _invoke("--data", panel_url, "--output", str(out), "--set", "costs.judge-000=1.0")
    assert result.exit_code == 2 and "costs: no cost for judge(s)" in result.output and "cost_per_call" in result.output
    assert not out.exists()


def test_a_folder_of_other_files_is_refused(panel_url, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    result = _invoke("--data", panel_url, "--output", str(out), *_costs_args())
    assert result.exit_code == 2 and "did not write" in result.output
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_missing_data_and_an_output_inside_the_data_are_refused(panel_url, tmp_path):
    out = tmp_path / "out"
    missing = _invoke("--data", str(tmp_path / "nope"), "--output", str(out), *_costs_args())
    assert missing.exit_code == 2 and "nope" in missing.output and not out.exists()
    inside = _invoke("--data", panel_url, "--output", f"{panel_url}/advice", *_costs_args())
    assert inside.exit_code == 2 and "--output" in inside.output
    assert not Path(panel_url, "advice").exists()


def test_advice_on_s3_equals_the_local_one(advised, s3_server, s3_bucket):
    from judgecal_dist.labels.advise import advise

    options = {"endpoint_url": s3_server}
    url = f"{s3_bucket}/ds"
    generate_panel(
        url,
        n_items=800,
        n_judges=4,
        seed=11,
        families=4,
        family_corr=0.0,
        below_chance=0.0,
        unsure_rate=0.0,
        position_bias=0.5,
        missing_rate=0.05,
        judge_params={j: {"accuracy": a} for j, a in ACCURACY.items()},
        storage_options=options,
    )
    sets = tuple(f"costs.{j}={c}" for j, c in COSTS.items()) + ("target_width=0.03",)
    got = advise(url, f"{s3_bucket}/advice", overrides=sets, storage_options=options)
    local = json.loads((advised / "advice.json").read_text())
    assert got["chosen"] == local["chosen"] and got["labels"] == local["labels"]
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server})
    names = {p.rsplit("/", 1)[-1] for p in fs.find(f"{s3_bucket}/advice")}
    assert {"report.md", "frontier.parquet", "frontier.png", "advice.json", "_SUCCESS"} <= names
