"""``judgecal score`` with a continuous corrector equals the fitted estimator's prediction, in memory and on Spark."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import write_dataset
from judgecal_dist.methods.continuous.linear_conjugate import ConjugateLinear, sufficient_stats
from judgecal_dist.methods.continuous.score_transport import MarginalOT
from judgecal_dist.models import (
    flow_from_estimator,
    flows_per_rubric_from_estimators,
    linear_from_conjugate,
    ot_from_estimators,
    save_model,
)
from judgecal_dist.scoring.apply import score_dataset

RUBRICS = ["chat", "math"]
N = 120


def _to5(x: np.ndarray) -> np.ndarray:
    return 1 + 4 * (x - 1) / 9  # the study's rescale of 1-10 onto 1-5


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> tuple[str, pd.DataFrame]:
    """Judge ``mini`` scores (1-10, a few null) on two rubrics, a ``full`` judge, and human scores as labels."""
    rng = np.random.default_rng(11)
    rubric = np.array(RUBRICS)[rng.integers(0, 2, N)]
    human = rng.uniform(1, 10, N).round(1)
    mini = np.clip(np.round(0.7 * human + 2 + rng.normal(0, 1, N)), 1, 10)
    mini[[3, 50]] = np.nan
    items = [f"i{k:03d}" for k in range(N)]
    frame = pd.DataFrame({"item_id": items, "rubric": rubric, "score": mini, "human": human})
    verdicts = pa.table(
        {
            "dataset": ["rb"] * (2 * N),
            "item_id": items * 2,
            "judge_id": ["mini"] * N + ["full"] * N,
            "score": pa.array(np.concatenate([mini, human]), from_pandas=True),  # NaN -> null: no score
            "rubric": list(rubric) * 2,
        }
    )
    labels = pa.table({"dataset": ["rb"] * N, "item_id": items, "label": [None] * N, "label_score": human})
    url = str(tmp_path_factory.mktemp("continuous") / "data")
    write_dataset(url, {"verdicts": verdicts, "labels": labels}, {"adapter": "test"})
    return url, frame


def draw_anchors(frame: pd.DataFrame):
    a = frame.iloc[:60].dropna(subset=["score"])
    return _to5(a["score"].to_numpy()), _to5(a["human"].to_numpy()), a["rubric"].to_numpy()


def _models(frame: pd.DataFrame, folder: Path) -> dict:
    """One model of each kind fitted on the first 60 items, with the estimator that made it."""
    j, y, rubric = draw_anchors(frame)
    masks = np.stack([rubric == r for r in RUBRICS])
    conj = ConjugateLinear().fit(sufficient_stats(np.where(masks, j, np.nan), np.where(masks, y, np.nan)))
    linear = linear_from_conjugate(conj, rubrics=RUBRICS, n_anchors=masks.sum(1), judge_id="mini", input_range=(1, 10))
    maps = {r: MarginalOT().fit(j[rubric == r], y[rubric == r]) for r in RUBRICS}
    ot = ot_from_estimators(maps, judge_id="mini", input_range=(1, 10))
    from judgecal_dist.methods.continuous.score_flow import ScoreFlow

    flow_est = ScoreFlow(epochs=20, hidden=8, embed_dim=2, n_passes=0, random_state=2).fit(j, y, rubric)
    flow = flow_from_estimator(flow_est, judge_id="mini", input_range=(1, 10), n_passes=8)
    # one plain flow per rubric, fitted on its rubric's anchors alone (the study's flow_per_rubric)
    per = {
        r: ScoreFlow(epochs=20, hidden=8, n_passes=0, random_state=3 + i).fit(
            j[rubric == r], y[rubric == r], [r] * (rubric == r).sum()
        )
        for i, r in enumerate(RUBRICS)
    }
    per_rubric = flows_per_rubric_from_estimators(per, judge_id="mini", input_range=(1, 10), n_passes=8)

    def per_rubric_predict(x, r):
        out = np.full(len(x), np.nan)
        for rr, est in per.items():
            out[r == rr] = est.predict(x[r == rr], r[r == rr])
        return out

    def linear_predict(x, r):
        i = np.searchsorted(RUBRICS, r)
        return conj.mean_[i, 0] + conj.mean_[i, 1] * x

    def ot_predict(x, r):
        return np.array([maps[rr].predict([xx])[0] for xx, rr in zip(x, r, strict=True)])

    return {
        "linear": (save_model(linear, str(folder / "linear" / "model.json")), linear_predict, 1e-12),
        "ot": (save_model(ot, str(folder / "ot" / "model.json")), ot_predict, 1e-12),
        # the estimator's deterministic map; the exported model's MC mean is compared with it at its own s.d.
        "flow": (save_model(flow, str(folder / "flow" / "model.json")), flow_est.predict, None),
        "flow_per_rubric": (save_model(per_rubric, str(folder / "per" / "model.json")), per_rubric_predict, None),
    }


@pytest.fixture(scope="module")
def models(table, tmp_path_factory):
    return _models(table[1], tmp_path_factory.mktemp("models"))


def _items(out: str) -> pd.DataFrame:
    return pd.read_parquet(f"{out}/items").sort_values("item_id").reset_index(drop=True)


@pytest.mark.parametrize("kind", ["linear", "ot", "flow", "flow_per_rubric"])
def test_score_equals_the_estimator_on_both_engines(kind, table, models, tmp_path, spark) -> None:
    data, frame = table
    url, predict, tol = models[kind]
    got = {}
    for engine in ("local", "spark"):
        out = str(tmp_path / engine)
        record = score_dataset(url, data, out, engine=EngineConfig(stats_engine=engine), unknown_judges="ignore")
        assert record["engine"] == engine and record["counts"]["items"] == N
        assert record["counts"]["items_without_score"] == 2 and record["counts"]["unknown_judges_ignored"] == ["full"]
        got[engine] = _items(out)
    local, on_spark = got["local"], got["spark"]
    assert local["item_id"].tolist() == frame["item_id"].tolist() == on_spark["item_id"].tolist()
    cols = ["corrected", "sd", "lower", "upper"]
    np.testing.assert_allclose(on_spark[cols], local[cols], rtol=0, atol=1e-6 if kind.startswith("flow") else 0)
    scored = frame["score"].notna().to_numpy()
    assert local["corrected"].isna().to_numpy().tolist() == (~scored).tolist()
    want = predict(_to5(frame["score"].to_numpy()[scored]), frame["rubric"].to_numpy()[scored])
    mine = local["corrected"].to_numpy()[scored]
    if tol is None:  # MC mean of 8 passes vs the deterministic map: within the MC s.d.'s reach
        sd = local["sd"].to_numpy()[scored]
        assert np.all(np.abs(mine - want) <= 4 * sd + 1e-3)
    else:
        np.testing.assert_allclose(mine, want, rtol=0, atol=tol)
    np.testing.assert_allclose(local["label_score"], _to5(frame["human"].to_numpy()))
    summary = pd.read_parquet(tmp_path / "local" / "summary" / "rubrics.parquet")
    assert summary["rubric"].tolist() == RUBRICS and summary["n_items"].sum() == N
    # the Spark score aggregates on Spark: the same table as pandas' groupby of the same rows
    spark_summary = pd.read_parquet(tmp_path / "spark" / "summary" / "rubrics.parquet")
    pd.testing.assert_frame_equal(spark_summary, summary, rtol=1e-6 if kind.startswith("flow") else 1e-12)
    assert summary["n_labelled"].tolist() == [((frame["rubric"] == r) & scored).sum() for r in RUBRICS]


def test_the_cli_refuses_scores_outside_the_input_range_and_unknown_rubrics(table, models, tmp_path) -> None:
    data, frame = table
    url = models["linear"][0]
    bad = pa.table(
        {"dataset": ["rb"] * 3, "item_id": ["a", "b", "c"], "judge_id": ["mini"] * 3, "score": [2.0, 11.5, 3.0]}
        | {"rubric": ["chat", "chat", "code"]}
    )
    src = str(tmp_path / "bad")
    write_dataset(
        src, {"verdicts": bad, "labels": pa.table({"dataset": ["rb"], "item_id": ["a"], "label": [None]})}, {}
    )
    got = CliRunner().invoke(cli, ["score", "--model", url, "--data", src, "--output", str(tmp_path / "o")])
    assert got.exit_code == 2 and "score: scores of judge 'mini' outside the model's input_range [1, 10]" in got.output
    assert not (tmp_path / "o").exists()
    with pytest.raises(InputError, match=r"judge_id: 1 judge\(s\) not in the model \(e\.g\. \['full'\]\)"):
        score_dataset(url, data, str(tmp_path / "o2"), engine=EngineConfig(stats_engine="local"))
