"""Continuous study: data pairing, splits, and the whole run (Ray, RunStore) on a slice of RewardBench 2 k=8."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.models import load_model
from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.continuous import study as continuous
from judgecal_dist.studies.continuous.data import load_paired_scores
from judgecal_dist.studies.runner import execute, prepare

CONFIG = Path(__file__).resolve().parents[3] / "judgecal_dist" / "studies" / "configs" / "continuous.yaml"
FILES = ("base_both_k8.jsonl.gz", "base_nano_k8.jsonl.gz")


@pytest.fixture(scope="module")
def rb2_slice(rb2_dir: Path, tmp_path_factory) -> Path:
    """The first 30 examples of every subset of the two base files (the same examples in both)."""
    out = tmp_path_factory.mktemp("rb2slice")
    keep: set[tuple[str, str]] = set()
    with gzip.open(rb2_dir / FILES[0], "rt") as fh:
        seen: Counter[str] = Counter()
        for line in fh:
            row = json.loads(line)
            if seen[row["subset"]] < 30:
                seen[row["subset"]] += 1
                keep.add((row["subset"], str(row["id"])))
    for name in FILES:
        with gzip.open(rb2_dir / name, "rt") as src, gzip.open(out / name, "wt") as dst:
            dst.writelines(line for line in src if (lambda r: (r["subset"], str(r["id"])) in keep)(json.loads(line)))
    return out


def test_pairs_match_the_raw_json(rb2_dir: Path):
    scores = load_paired_scores(str(rb2_dir / FILES[0]), judges=("mini", "full"))
    with gzip.open(rb2_dir / FILES[0], "rt") as fh:
        row = json.loads(fh.readline())
    key = f"base/{row['subset']}/{row['id']}/1"
    full = [s for s in row["full_scores"][1] if s is not None]
    got = scores.set_index(["judge_id", "item_id"])
    rescale = lambda x: 1 + 4 * (x - 1) / 9  # noqa: E731 - spec §2's map of [1, 10] onto [1, 5]
    assert got.loc[("mini", key), "j"] == pytest.approx(rescale(row["mini_scores"][1][0]))
    assert got.loc[("mini", key), "y"] == pytest.approx(rescale(np.mean(full)))
    # Leave-one-out control: the full judge's own sample 0 never enters its reference.
    assert got.loc[("full", key), "y"] == pytest.approx(
        rescale(np.mean([s for s in row["full_scores"][1][1:] if s is not None]))
    )
    assert scores.duplicated(["judge_id", "item_id"]).sum() == 0
    with pytest.raises(InputError, match="tiers \\['nano'\\] not found"):
        load_paired_scores(str(rb2_dir / FILES[0]), judges=("nano",))


def test_split_is_grouped_fixed_across_budgets_and_nested(rb2_slice: Path):
    data = continuous.load(continuous.Config(data=str(rb2_slice), test_groups=10), EngineConfig())
    rows = data.scores[data.scores["judge_id"] == "nano"].reset_index(drop=True)
    test, pool = continuous.split(rows, 3, 10)
    assert set(test).isdisjoint(pool) and len(test) + len(pool) == len(rows)
    assert set(rows.loc[test, "group_id"]).isdisjoint(rows.loc[pool, "group_id"])
    assert (rows.loc[test].groupby("rubric")["group_id"].nunique() == 10).all()
    small, big = continuous.draw_anchors(rows, pool, 20), continuous.draw_anchors(rows, pool, 60)
    for rubric, g in small.groupby("rubric"):
        assert g.index.tolist() == big[big["rubric"] == rubric].index[: len(g)].tolist()  # nested prefixes
    assert not np.array_equal(continuous.split(rows, 4, 10)[0], test)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"data": None}, "data=null: required"),
        ({"data": "x", "budgets": (1,)}, r"budgets=\[1\]: must be a non-empty list, each an integer >= 2"),
        ({"data": "x", "flow_passes": 1}, r"flow_passes=1: must be an integer in \[2, 10000\]"),
        ({"data": "x", "judges": (), "synthetic": False}, "no arm to run"),
        ({"data": "x", "flow_mask_policy": "per-step"}, "flow_mask_policy=per-step: must be one of"),
        ({"data": "x", "export": "raw@mini"}, r"export=raw@mini: must be auto or <corrector>@<judge>"),
        ({"data": "x", "export": "flow@synthetic"}, r"export=flow@synthetic: must be auto"),
    ],
)
def test_bad_config_is_rejected(overrides, match):
    with pytest.raises(ConfigError, match=match):
        continuous.Config(**overrides)


@pytest.mark.heavy
@pytest.mark.ray
def test_continuous_study_through_the_runner(rb2_slice: Path, tmp_path: Path, ray_local):
    overrides = [
        f"data={rb2_slice}",
        "judges=[nano]",
        "replicates=2",
        "nuts_seeds=1",
        "nuts_warmup=100",
        "nuts_samples=150",
        "flow_epochs=8",
        "flow_passes=5",
        "budgets=[10,40]",
        "test_groups=10",
        "flow_batch=2",
        "export=linear_hb@nano",
    ]
    folder = Path(execute(prepare(CONFIG, overrides), EngineConfig(ray_num_cpus=2), output=str(tmp_path)))
    assert (folder / "_SUCCESS").exists()
    summary = json.loads((folder / "summary.json").read_text())
    assert interval_note(0.95) in (folder / "report.md").read_text()  # seeds re-split the same items
    results = pd.DataFrame(summary["results"])
    assert set(results["corrector"]) == {"raw", "linear_hb", "flow", "ot", "ot_oracle", "constant"}
    assert set(results["judge"]) == {"nano", "synthetic"} and set(results["budget"]) == {10, 40}
    for m in ("mean_error", "mae", "pearson", "kl", "w1"):
        assert {m, f"{m}_ci_low", f"{m}_ci_high"} <= set(results.columns)
    assert {"rubric", "judge", "budget_or_none"} <= set(summary["crossover"][0])
    assert {"judge", "rubric", "pr_beta_lt_0_3", "alert"} <= set(summary["canary"][0])
    parts = pd.concat([pd.read_parquet(f) for f in sorted((folder / "replicates").glob("*.parquet"))])
    # The linear corrector is an affine map with positive slope: its Pearson equals the raw judge's (spec §8.3 (2)).
    raw = parts[parts["corrector"] == "raw"].set_index(["judge", "rubric", "seed"])["pearson"]
    lin = parts[parts["corrector"] == "linear_hb"].set_index(["judge", "rubric", "seed", "budget"])
    np.testing.assert_allclose(lin["pearson"].to_numpy(), raw.loc[lin.index.droplevel("budget")].to_numpy(), atol=1e-9)
    # Raw metrics against an independent computation on the same split.
    data = continuous.load(continuous.Config(data=str(rb2_slice), judges=("nano",), test_groups=10), EngineConfig())
    rows = data.scores[data.scores["judge_id"] == "nano"].reset_index(drop=True)
    test = rows.iloc[continuous.split(rows, 1, 10)[0]]
    math = test[test["rubric"] == "Math"]
    assert raw.loc[("nano", "Math", 1)] == pytest.approx(np.corrcoef(math["j"], math["y"])[0, 1])
    flows = parts[parts["corrector"] == "flow"]
    assert (flows["device"] == "cpu").all() and (flows["mc_sd_mean"] > 0).all()
    assert {"calibration_nano.png", "calibration_synthetic.png", "metric_vs_budget.png", "judge_vs_reference.png"} <= {
        p.name for p in (folder / "figures").iterdir()
    }
    text = (folder / "report.md").read_text()
    for section in ("Findings the paper expects", "Crossover budgets: MAE and KL", "Predictive intervals", "saturates"):
        assert section in text
    assert summary["crossover_kl"] and summary["saturation"]
    # The exported corrector is the study's own NUTS fit of seed 0 at the largest budget (read off its rows, not
    # refitted): the same coefficients, and on the 1-10 scores of that seed's test items the study's predictions.
    model = load_model(str(folder))
    assert model.kind == "linear-corrector" and model.judge_id == "nano" and model.document["fit"] == "nuts"
    assert "exported: `linear_hb` for nano as `model/model.json`" in summary["recommendation"]["use"]
    assert "exported: `linear_hb` for nano" in (folder / "report.md").read_text().split("## Recommendation")[1][:2000]
    anchors = len(model.document["fitted_on"]["item_ids"])  # the items the fit saw, counted from the document
    assert anchors > 0 and f"fitted on the {anchors} anchors" in summary["recommendation"]["use"]
    rows40 = lin.xs(("nano", 40, 0), level=("judge", "budget", "seed")).reset_index()
    for _, row in rows40.iterrows():
        got = model.document["rubrics"][model.rubrics.index(row["rubric"])]
        assert (got["alpha"], got["beta"], got["sigma"]) == (row["alpha"], row["beta"], row["sigma"])
    first = rows40.iloc[0]
    test0 = rows.iloc[continuous.split(rows, 0, 10)[0]]
    mine = test0[test0["rubric"] == first["rubric"]]
    raw10 = 1 + 9 * (mine["j"].to_numpy() - 1) / 4  # back onto RewardBench 2's 1-10
    np.testing.assert_allclose(
        model.correct(raw10, [first["rubric"]] * len(mine))["corrected"], first["y_hat_items"], rtol=1e-12
    )
    again = execute(prepare(CONFIG, overrides), EngineConfig(ray_num_cpus=2), output=str(tmp_path))
    assert Path(again) == folder  # a finished run is returned as is


def test_per_rubric_flows_export_one_flow_per_rubric_seeded_as_the_studys_members(rb2_slice: Path, tmp_path: Path):
    """``export=flow_per_rubric@<judge>`` writes ``judgecal.flow-per-rubric/v1``: each rubric's flow is the one a
    member of the study's per-rubric fit would train on that rubric's anchors (its seed, its anchors), and the
    reloaded model corrects each score with its rubric's flow."""
    from judgecal_dist.methods.continuous.score_flow import ScoreFlow
    from judgecal_dist.models import save_model
    from judgecal_dist.studies.continuous.export import export_corrector

    config = continuous.Config(
        data=str(rb2_slice), judges=("nano",), test_groups=10, budgets=(40,), flow_epochs=4, flow_passes=2
    )
    data = continuous.load(config, EngineConfig())
    model = load_model(save_model(export_corrector(config, data, "flow_per_rubric", "nano"), str(tmp_path)))
    assert model.kind == "flow-per-rubric" and model.judge_id == "nano"
    rows = continuous.arm_data(data, "nano", config.seed)
    anchors = continuous.draw_anchors(rows, continuous.split(rows, config.seed, config.test_groups)[1], 40)
    assert model.rubrics == [r for r in data.rubrics if (anchors["rubric"] == r).sum() >= 2]
    for flow, entry in zip(model.flows, model.document["flows"], strict=True):
        i = list(data.rubrics).index(entry["rubric"])
        assert entry["seed"] == config.seed * continuous.RUBRIC_STRIDE + i and flow.rubrics == [entry["rubric"]]
        mine = anchors[anchors["rubric"] == entry["rubric"]]
        est = ScoreFlow(n_passes=2, random_state=entry["seed"], **continuous.flow_settings(config))
        est.fit(mine["j"].to_numpy(), mine["y"].to_numpy(), mine["rubric"].to_numpy())
        for key in ("w1", "b1", "w2", "b2", "w3", "b3"):  # the same training, bit for bit
            np.testing.assert_array_equal(
                getattr(flow.stack.drift, key).detach().numpy(), getattr(est.stack_.drift, key).detach().numpy()
            )
