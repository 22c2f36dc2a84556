"""``judgecal.davidson/v2``: fitted Davidson aggregators export, reload, and score a verdict table (in process and
on Spark) exactly as the estimators predict; a tampered document is refused naming its field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import write_dataset
from judgecal_dist.methods.repeated.davidson import DavidsonAggregator
from judgecal_dist.models import load_model, model_from_dict, save_model
from judgecal_dist.models.davidson import davidson_from_estimators
from judgecal_dist.scoring.apply import score_dataset

JUDGES = ("j1", "j2")
N_SAMPLES, BUDGET = 6, 4


def _verdicts(seed: int = 3, n_items: int = 80) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Repeated three-way verdicts with ties and some missing samples, and labels A / tie / B."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(["A", "tie", "B"], n_items, p=[0.4, 0.2, 0.4])
    rows = []
    for i, label in enumerate(labels):
        for k, judge in enumerate(JUDGES):
            for s in range(N_SAMPLES):
                if s >= 2 and rng.random() < 0.15:
                    continue  # a missing sample (the first two are always there: budgets of 2 see every item)
                right = rng.random() < 0.75 - 0.1 * k
                verdict = label if right else rng.choice([v for v in ("A", "tie", "B") if v != label])
                rows.append((f"i{i:03d}", f"g{i % 7}", judge, s, verdict))
    frame = pd.DataFrame(rows, columns=["item_id", "group_id", "judge_id", "sample", "verdict"]).assign(dataset="d")
    return frame, pd.DataFrame({"dataset": "d", "item_id": [f"i{i:03d}" for i in range(n_items)], "label": labels})


def _counts(frame: pd.DataFrame, judge: str, items: list[str]) -> np.ndarray:
    """(A, tie, B) of samples 0..BUDGET-1, tallied here independently of the engine's job."""
    own = frame[(frame["judge_id"] == judge) & (frame["sample"] < BUDGET)]
    table = own.groupby(["item_id", "verdict"]).size().unstack(fill_value=0).reindex(items, fill_value=0)
    return table.reindex(columns=["A", "tie", "B"], fill_value=0).to_numpy(np.int64)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    frame, labels = _verdicts()
    root = tmp_path_factory.mktemp("davidson")
    data = write_dataset(
        str(root / "data"),
        {
            "verdicts": pa.Table.from_pandas(frame, preserve_index=False),
            "labels": pa.Table.from_pandas(labels, preserve_index=False),
        },
        {"adapter": "test"},
    )
    items = sorted(labels["item_id"])
    y = labels.set_index("item_id").loc[items, "label"].map({"A": 1, "tie": 0, "B": -1}).to_numpy()
    out = {}
    for tie, decision in (("global", "mae"), ("local_intercept", "accuracy")):
        ests = {
            j: DavidsonAggregator(tie=tie, decision=decision, n_starts=2).fit(_counts(frame, j, items), y)
            for j in JUDGES
        }
        out[(tie, decision)] = ests
    return frame, items, data, root, out


@pytest.mark.parametrize("variant", [("global", "mae"), ("local_intercept", "accuracy")])
def test_round_trip_predicts_as_the_estimators(fitted, variant):
    frame, items, _, root, ests = fitted
    model = davidson_from_estimators(ests[variant], n=BUDGET, method="davidson")
    url = save_model(model, str(root / f"m-{variant[0]}.json"))
    back = load_model(url)
    assert back.document == json.loads(json.dumps(model.document))
    for j in JUDGES:
        c = _counts(frame, j, items)
        np.testing.assert_array_equal(back.predict(j, c), ests[variant][j].predict(c))
        np.testing.assert_array_equal(back.predict_proba(j, c), ests[variant][j].predict_proba(c))


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_score_equals_the_estimators_on_both_engines(fitted, engine, tmp_path):
    frame, items, data, root, ests = fitted
    model = davidson_from_estimators(ests[("local_intercept", "accuracy")], n=BUDGET)
    url = save_model(model, str(tmp_path / "model.json"))
    record = score_dataset(url, data, str(tmp_path / "out"), engine=EngineConfig(stats_engine=engine))
    assert record["engine"] == engine and record["model"]["kind"] == "davidson"
    rows = pq.read_table(tmp_path / "out" / "items").to_pandas()
    assert len(rows) == len(items) * len(JUDGES)
    for j in JUDGES:
        got = rows[rows["judge_id"] == j].set_index("item_id").loc[items]
        c = _counts(frame, j, items)
        np.testing.assert_array_equal(got[["n_A", "n_tie", "n_B"]].to_numpy(), c)
        p = ests[("local_intercept", "accuracy")][j].predict_proba(c)
        assert np.abs(got[["p_B", "p_tie", "p_A"]].to_numpy() - p).max() == 0.0
        want = np.array(["B", "tie", "A"])[ests[("local_intercept", "accuracy")][j].predict(c) + 1]
        np.testing.assert_array_equal(got["verdict"].to_numpy(), want)
    judges = pd.DataFrame(record["judges"])
    assert judges["n_labelled"].sum() == len(items) * len(JUDGES)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["judges"][0].pop("eta0"), "judges.0.eta0: tie='global' needs eta0"),
        (lambda d: d["judges"][1].update(beta=-1.0), "judges.1.beta: input should be greater than or equal to 0"),
        (lambda d: d.update(decision="mode"), "decision: input should be 'mae' or 'accuracy'"),
        (lambda d: d.update(n=0), "n: input should be greater than or equal to 1"),
    ],
)
def test_a_tampered_document_is_refused_naming_its_field(fitted, change, message):
    model = davidson_from_estimators(fitted[4][("global", "mae")], n=BUDGET)
    doc = json.loads(json.dumps(model.document))
    change(doc)
    with pytest.raises(InputError, match="^m.json: " + message.replace(".", r"\.").replace("(", r"\(")):
        model_from_dict(doc, source="m.json")


def test_itc_exports_the_davidson_model_that_score_applies(fitted, tmp_path):
    """The itc study's export, scored by ``judgecal score``, equals a refit of the same variant by hand."""
    from judgecal_dist.studies.runner import execute, prepare

    frame, items, data, _, _ = fitted
    config = Path(__file__).resolve().parents[2] / "judgecal_dist" / "studies" / "configs" / "itc.yaml"
    sets = [f"data={data}", "replicates=2", f"budgets=[2, {BUDGET}]", "n_starts=2", "export=davidson_accuracy"]
    sets += ["methods=[davidson, davidson_accuracy, sc]"]
    run = execute(prepare(config, sets), EngineConfig(ray_num_cpus=1), output=str(tmp_path / "runs"), serial=True)
    summary = json.loads(Path(run, "summary.json").read_text())
    assert "`davidson_accuracy @ n=4` as `model/model.json`" in summary["recommendation"]["exported"]
    assert "**Exported model:** `davidson_accuracy @ n=4`" in Path(run, "report.md").read_text()
    score_dataset(run, data, str(tmp_path / "out"), engine=EngineConfig(stats_engine="local"))
    rows = pq.read_table(tmp_path / "out" / "items").to_pandas()
    y = _labels(data).loc[items].map({"A": 1, "tie": 0, "B": -1}).to_numpy()
    for j in JUDGES:
        c = _counts(frame, j, items)
        ref = DavidsonAggregator(tie="global", decision="accuracy", n_starts=2, random_state=0).fit(c, y)
        got = rows[rows["judge_id"] == j].set_index("item_id").loc[items]
        np.testing.assert_allclose(got[["p_B", "p_tie", "p_A"]].to_numpy(), ref.predict_proba(c), atol=1e-9)


def _labels(data: str) -> pd.Series:
    return pq.read_table(Path(data) / "labels").to_pandas().set_index("item_id")["label"]


def test_a_model_exported_from_rb2_pairs_scores_that_dataset(rb2_dir, fitted, tmp_path):
    """itc derives response pairs from rb2-k8's pointwise scores; `score` derives them the same way (same items,
    orientations and labels) and gives the exported estimators' own predictions. Data of the other kind (verdicts
    for a pairs model, scores for a verdicts model) is refused with one line naming what to pass."""
    from judgecal_dist.io.ingest import ingest
    from judgecal_dist.studies.itc import study as itc
    from judgecal_dist.studies.itc.model import export_model

    src = tmp_path / "src"
    src.mkdir()
    (src / "base_both_k8.jsonl.gz").write_bytes((rb2_dir / "base_both_k8.jsonl.gz").read_bytes())
    url = str(tmp_path / "rb2")
    ingest("rb2-k8", str(src), url)
    engine = EngineConfig(stats_engine="local")
    config = itc.Config(data=url, budgets=(2, 8), replicates=1, n_starts=1, orientation_seed=7)
    data = itc.load(config, engine)
    model = export_model(config, data, "davidson_local")
    assert (model.votes, model.orientation_seed) == ("score-pairs", 7)
    path = save_model(model, str(tmp_path / "model.json"))
    score_dataset(path, url, str(tmp_path / "out"), engine=engine)
    rows = pq.read_table(tmp_path / "out" / "items").to_pandas().set_index(["dataset", "judge_id", "item_id"])
    assert len(rows) == sum(task.n_items for task in data.tasks)
    for task in data.tasks:
        got = rows.loc[(task.dataset, task.judge_id)].loc[task.item_ids]
        counts = task.counts[-1]
        np.testing.assert_array_equal(got[["n_A", "n_tie", "n_B"]].to_numpy(), counts)
        np.testing.assert_array_equal(got["label"].map({"A": 1, "tie": 0, "B": -1}).to_numpy(), task.labels)
        own = model.estimators[task.judge_id]
        assert np.abs(got[["p_B", "p_tie", "p_A"]].to_numpy() - own.predict_proba(counts)).max() == 0.0
    wrong = [
        (model.document | {"votes": "verdicts"}, url, "holds pointwise scores (rb2-k8) but the model"),
        (model.document, fitted[2], "holds A/B/tie verdicts but the model"),
    ]
    for doc, data_url, message in wrong:
        wrong_path = tmp_path / "wrong.json"
        wrong_path.write_text(json.dumps(doc))
        with pytest.raises(InputError, match=re.escape(message)):
            score_dataset(str(wrong_path), data_url, str(tmp_path / "refused"), engine=engine)
        assert not (tmp_path / "refused").exists()
