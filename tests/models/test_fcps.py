"""``judgecal.fcps/v1``: a fitted FCPS candidate (joint table or scalar family over a judge-path prefix) exports,
reloads, and scores a verdict table in process and on Spark exactly as the estimator predicts; a tampered document
is refused naming its field."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import write_dataset
from judgecal_dist.methods.fcps.joint_table import HybridResidualShrinkage
from judgecal_dist.methods.fcps.scalar_families import make_family
from judgecal_dist.methods.fcps.select import Cells, fit_family, prefix_cells, prefix_squares
from judgecal_dist.models import load_model, model_from_dict, save_model
from judgecal_dist.models.fcps import fcps_from_estimator
from judgecal_dist.scoring.apply import score_dataset

PATH = ["j3", "j1", "j2", "j4"]
K = 3
FAMILIES = (
    "table",
    "table_lower_prefix",
    "table_hierarchical",
    "mean_iso",
    "one_coin_iso",
    "ridge_iso",
    "ridge_pair_iso",
    "logistic",
    "logistic_pair",
    "hybrid",
)
_CODE = {"B": 0, "A": 1, "tie": 2}  # the pairwise alphabet; a missing verdict is err (3)


def _data(seed: int = 5, n_items: int = 160) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Verdicts of four model judges and one other, with ties and missing verdicts; labels A/B, some absent."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(["A", "B"], n_items)
    rows = []
    for i, label in enumerate(truth):
        for j, judge in enumerate([*PATH, "other"]):
            if i == 0 and judge != "other":
                continue  # an item that no model judge judged: scored as unscored, never given a guess
            if rng.random() < 0.1:
                continue  # a missing verdict (err)
            right = rng.random() < 0.8 - 0.1 * j
            verdict = rng.choice(["tie", label if right else ("B" if label == "A" else "A")], p=[0.15, 0.85])
            rows.append((f"i{i:03d}", f"g{i % 11}", judge, 0, str(verdict)))
    frame = pd.DataFrame(rows, columns=["item_id", "group_id", "judge_id", "sample", "verdict"]).assign(dataset="d")
    labels = pd.DataFrame({"dataset": "d", "item_id": [f"i{i:03d}" for i in range(n_items)], "label": truth})
    return frame, labels.iloc[: n_items - 10]  # the last ten items unlabelled


def _codes(frame: pd.DataFrame, items: list[str]) -> np.ndarray:
    """Prefix codes of each item, pivoted here independently of the vote codec (missing = err = 3)."""
    own = frame[frame["judge_id"].isin(PATH[:K])].assign(code=lambda f: f["verdict"].map(_CODE))
    wide = own.pivot(index="item_id", columns="judge_id", values="code").reindex(index=items, columns=PATH[:K])
    return wide.fillna(3).to_numpy(np.int64)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    frame, labels = _data()
    root = tmp_path_factory.mktemp("fcps")
    data = write_dataset(
        str(root / "data"),
        {
            "verdicts": pa.Table.from_pandas(frame, preserve_index=False),
            "labels": pa.Table.from_pandas(labels, preserve_index=False),
        },
        {"adapter": "test"},
    )
    labelled = sorted(labels["item_id"])
    y = labels.set_index("item_id").loc[labelled, "label"].eq("A").to_numpy(float)
    cells = Cells.from_rows(_codes(frame, labelled), y)
    codes, n, s, _ = prefix_cells(cells, np.arange(K))
    ests = {f: fit_family(f, codes, n, s, {"alpha": 1.0}) for f in FAMILIES if f != "hybrid"}
    hybrid = HybridResidualShrinkage(make_family("one_coin_iso"), tau=5.0)
    ests["hybrid"] = hybrid.fit(codes, np.divide(s, n), sample_weight=n)
    return frame, data, ests


def _model(est):
    return fcps_from_estimator(est, path=PATH, k=K, path_rule="information_first", ignored_judges=["other"])


@pytest.mark.parametrize("family", FAMILIES)
def test_round_trip_predicts_as_the_estimator(fitted, family, tmp_path):
    frame, _, ests = fitted
    url = save_model(_model(ests[family]), str(tmp_path / "model.json"))
    back = load_model(url)
    assert back.kind == "fcps" and back.judge_ids == PATH[:K]
    every = np.array(np.meshgrid(*[range(4)] * K)).reshape(K, -1).T  # every pattern, unseen ones included
    np.testing.assert_array_equal(back.predict(every), ests[family].predict(every))


@pytest.mark.parametrize("family", ["table", "hybrid"])
def test_score_equals_the_estimator_on_both_engines(fitted, family, tmp_path):
    frame, data, ests = fitted
    url = save_model(_model(ests[family]), str(tmp_path / "model.json"))
    items = sorted(frame["item_id"].unique())
    scored = {}
    for engine in ("local", "spark"):
        record = score_dataset(url, data, str(tmp_path / engine), engine=EngineConfig(stats_engine=engine))
        assert record["engine"] == engine and record["model"]["kind"] == "fcps"
        scored[engine] = pq.read_table(tmp_path / engine / "items").to_pandas().set_index("item_id").loc[items]
    pd.testing.assert_frame_equal(scored["local"], scored["spark"], check_exact=True)
    rows = scored["local"]
    voted = rows["n_votes"] > 0
    assert not voted["i000"] and np.isnan(rows.loc["i000", "p"]) and record["counts"]["items_without_votes"] == 1
    want = ests[family].predict(_codes(frame, items))
    np.testing.assert_array_equal(rows.loc[voted, "p"].to_numpy(), want[voted.to_numpy()])
    assert record["counts"]["unknown_judges_ignored"] == []  # "other" is a judge the model knowingly ignores


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["family"]["levels"][1]["s"].__setitem__(0, 1e9), "family.levels.1.s.0: a label sum larger"),
        (lambda d: d["family"]["levels"].pop(), "family.levels: 2 levels for a prefix of 3 judges"),
        (lambda d: d["family"].update(fallback="nearest"), "family.fallback: input should be"),
        (lambda d: d["family"].update(marginal=float("nan")), "family.marginal: input should be a finite number"),
        (lambda d: d.update(k=5), "k: a prefix of 5 judges of a path of 4"),
        (lambda d: d["encoding"].update(missing="none"), "encoding.missing: 'none' is not in the alphabet"),
        (lambda d: d["family"]["levels"][0]["patterns"][0].__setitem__(0, 7), "family.levels.0.patterns.0: need 1"),
    ],
)
def test_a_tampered_table_is_refused_naming_its_field(fitted, change, message):
    doc = json.loads(json.dumps(_model(fitted[2]["table"]).document))
    change(doc)
    with pytest.raises(InputError, match="^m.json: " + message.replace(".", r"\.").replace("(", r"\(")):
        model_from_dict(doc, source="m.json")


def test_a_scalar_family_is_refused_off_its_encoding(fitted):
    doc = json.loads(json.dumps(_model(fitted[2]["ridge_iso"]).document))
    with pytest.raises(InputError, match=r"family\.coef: 3 entries for k = 2"):
        model_from_dict(doc | {"k": 2}, source="m.json")
    doc["encoding"]["scalar"] = [0.0, 1.0, 0.5, 0.0]
    with pytest.raises(InputError, match=r"^m\.json: encoding\.scalar: the scalar families of this version"):
        model_from_dict(doc, source="m.json")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_rubric_model_round_trips_and_is_refused_on_ab_verdicts(fitted, family, tmp_path):
    """1-5 rubric codes (0..4 = scores 1..5, 5 = err; soft targets): the rubric encoding travels in the document."""
    rng = np.random.default_rng(9)
    codes = rng.integers(0, 6, size=(400, 3))
    y = np.clip((codes[:, 0] % 5) / 4 + rng.normal(0, 0.2, 400), 0, 1)
    cells = Cells.from_rows(codes, y, schema="scalar")
    prefix = np.array([1, 0])
    c, n, s, _ = prefix_cells(cells, prefix)
    if family == "hybrid":
        hybrid = HybridResidualShrinkage(make_family("ridge_iso", schema="scalar"), tau=2.0, n_categories=6)
        est = hybrid.fit(c, np.divide(s, n), sample_weight=n)
    else:
        est = fit_family(family, c, n, s, {"schema": "scalar"}, prefix_squares(cells, prefix))
    model = fcps_from_estimator(est, path=["r2", "r1", "r3"], k=2)
    assert model.document["encoding"]["alphabet"] == ["1", "2", "3", "4", "5", "err"]
    back = load_model(save_model(model, str(tmp_path / "model.json")))
    every = np.array(np.meshgrid(range(6), range(6))).reshape(2, -1).T
    np.testing.assert_array_equal(back.predict(every), est.predict(every))
    if family == "ridge_iso":
        with pytest.raises(InputError, match=r"verdicts: score: no 1-5 score at sample=0; this model reads rubric"):
            score_dataset(str(tmp_path / "model.json"), fitted[1], str(tmp_path / "out"))
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("family", ["table", "ridge_iso"])
def test_a_rubric_model_scores_a_rubric_table_on_both_engines(family, tmp_path):
    from tests.studies.regime_map.test_ties_and_rubric import write_rubric

    data = str(tmp_path / "rubric")
    codes, y = write_rubric(data)  # the codes and targets the table was written from (by item id)
    path, k = ["j6", "j2", "j0", "j1", "j3"], 3  # j6 is absent on some rows: err there; j4, j5 not in the path
    cells = Cells.from_rows(codes[:, [6, 2, 0]], y, schema="scalar")
    est = fit_family(family, cells.codes, cells.n, cells.s, {"schema": "scalar"}, cells.q)
    url = save_model(fcps_from_estimator(est, path=path, k=k), str(tmp_path / "model.json"))
    scored = {}
    for engine in ("local", "spark"):
        record = score_dataset(
            url, data, str(tmp_path / engine), engine=EngineConfig(stats_engine=engine), unknown_judges="ignore"
        )
        scored[engine] = pq.read_table(tmp_path / engine / "items").to_pandas().set_index("item_id").sort_index()
    pd.testing.assert_frame_equal(scored["local"], scored["spark"], check_exact=True)
    rows = scored["local"]
    want = est.predict(codes[:, [6, 2, 0]])
    np.testing.assert_array_equal(rows["p"].to_numpy(), want)
    np.testing.assert_array_equal(rows["score"].to_numpy(), 1 + 4 * want)
    target = (rows["label_score"].to_numpy() - 1) / 4
    np.testing.assert_allclose(target, y)
    summary = record["datasets"][0]
    assert summary["n_labelled"] == len(y) and summary["mse"] == pytest.approx(np.mean((want - y) ** 2), abs=1e-12)
    assert record["counts"]["unknown_judges_ignored"] == ["j4", "j5"]
    off = str(tmp_path / "off")
    write_rubric(off, docs=4, label_shift=4.5)
    with pytest.raises(
        InputError, match=r"labels: label_score: \d+ score\(s\) outside the 1-5 rubric, e\.g\. item 's\d+' = [5-9]\.\d"
    ):
        score_dataset(url, off, str(tmp_path / "refused"), unknown_judges="ignore")
    assert not (tmp_path / "refused").exists()
