"""The notebook API: docs/api.md runs as written (in a fresh interpreter that cannot import pyspark or ray), the
estimators compose in a scikit-learn Pipeline exactly as the studies' pipeline, ``CalibratedAggregator`` is a
scikit-learn classifier on wide frames, and the notebook gives the rows ``judgecal score`` gives (both engines) for
the same model and votes, missing evidence included."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sklearn.base import clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import GridSearchCV, KFold, ParameterGrid, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from judgecal_dist import CalibratedAggregator
from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation import (
    AccuracyWeighted,
    DawidSkene,
    LogisticStacking,
    LogOddsWeighted,
    MajorityVote,
    OneCoin,
)
from judgecal_dist.methods.calibration import BetaCalibration
from judgecal_dist.methods.pipeline import Settings, aggregate, calibrate

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "api.md"

_FRESH = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "ray"):
            raise ImportError(f"No module named {name!r} (the base install has no engine)")
        return None
sys.meta_path.insert(0, Refuse())
"""


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_docs_api_runs_on_the_base_install_and_imports_no_engine():
    code = _FRESH + "\n".join(_blocks())
    code += "\nimport json\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'ray'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    # the output the page shows is the output it gives
    shown = re.findall(r"```text\n(.*?)```", DOC.read_text(), flags=re.S)
    assert all(block.strip() in out.stdout for block in shown)


def _panel(seed: int = 3, n: int = 240, accuracy=(0.85, 0.75, 0.7, 0.6, 0.52, 0.8)):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(np.int8)
    right = rng.random((n, len(accuracy))) < np.array(accuracy)
    V = np.where(right, y[:, None], 1 - y[:, None]).astype(np.int8)
    V[rng.random(V.shape) < 0.1] = -1
    return V, y


@pytest.mark.parametrize(
    ("name", "agg"),
    [
        ("majority", MajorityVote()),
        ("accuracy_weighted", AccuracyWeighted()),
        ("log_odds", LogOddsWeighted()),
        ("one_coin", OneCoin()),
        ("dawid_skene", DawidSkene()),
        ("stacking", LogisticStacking(random_state=0)),
    ],
)
def test_a_pipeline_of_estimators_is_the_studies_pipeline(name, agg):
    V, y = _panel()
    fit, new = slice(0, 160), slice(160, None)
    pipe = make_pipeline(agg, BetaCalibration()).fit(V[fit], y[fit])
    settings = Settings()  # log-odds input: the default everywhere
    s_fit, s_new, _ = aggregate(name, settings, V[fit], y[fit], V[new])
    expected = calibrate("beta", settings, s_fit, y[fit], {"new": s_new})["new"]
    np.testing.assert_allclose(pipe.predict_proba(V[new])[:, 1], expected, rtol=1e-10, atol=1e-12)
    assert set(pipe.predict(V[new])) <= {0, 1}


def _long(V: np.ndarray) -> pd.DataFrame:
    i, j = np.nonzero(V >= 0)
    return pd.DataFrame({"item_id": [f"i{k}" for k in i], "judge_id": [f"j{k}" for k in j], "verdict": V[i, j]})


def _wide(V: np.ndarray) -> pd.DataFrame:
    """One row per item, one column per judge: 1 = A, 0 = B, null = no vote (pandas' nullable integers)."""
    frame = pd.DataFrame(V, index=[f"i{k}" for k in range(len(V))], columns=[f"j{k}" for k in range(V.shape[1])])
    return frame.astype("Int8").mask(frame < 0)


def test_the_api_model_is_what_judgecal_score_applies(tmp_path):
    from judgecal_dist.models import load_model

    V, y = _panel()
    votes = _long(V)
    labels = pd.Series(y[:200], index=[f"i{k}" for k in range(200)])
    est = CalibratedAggregator(aggregator="stacking", calibrator="isotonic").fit(votes, labels)
    url = est.save(str(tmp_path / "m.json"))
    model = load_model(url)
    scored = est.predict_items(votes)
    np.testing.assert_array_equal(model.score(V[:, np.argsort([f"j{k}" for k in range(V.shape[1])])])["p"], scored["p"])
    assert model.name == "stacking + isotonic @ all" and list(scored.index[:2]) == ["i0", "i1"]
    # the fingerprint of the fit: every labelled item, whatever its conformal role; no dataset in this frame
    assert (model.fitted_dataset, sorted(model.fitted_items)) == (None, sorted(labels.index))
    assert scored["in_calibration"].tolist() == [k < 200 for k in range(len(V))]
    with pytest.raises(InputError, match="m.json: exists; .*overwrite=True"):
        est.save(url)


def test_frames_are_checked_with_the_column_and_fix():
    V, y = _panel()
    votes = _long(V)
    labels = pd.Series(y, index=[f"i{k}" for k in range(len(y))])
    with pytest.raises(InputError, match=r"X: verdict: \d+ rows with a category outside \('A', 'B', 'tie'\) .*'yes'"):
        CalibratedAggregator().fit(votes.assign(verdict="yes"), labels)
    with pytest.raises(InputError, match="repeated verdicts .*keep one sample per judge and item"):
        CalibratedAggregator().fit(pd.concat([votes, votes.iloc[:1]]), labels)
    with pytest.raises(InputError, match="aggregator: 'em' is not one of"):
        CalibratedAggregator(aggregator="em").fit(votes, labels)
    with pytest.raises(InputError, match="a long frame of verdicts .*CalibratedAggregator"):
        OneCoin().fit(votes, y)
    with pytest.raises(InputError, match=r"y: a label is A/B or 0/1 \(1 = A\) or null, got \['tie'\]"):
        CalibratedAggregator().fit(votes, labels.map({1: "A", 0: "tie"}))
    with pytest.raises(InputError, match=r"y: .* mix codings"):
        CalibratedAggregator().fit(votes, labels.astype(object).where(labels.index != "i0", "A"))
    wide = _wide(V)
    with pytest.raises(InputError, match=r"y: one label per row of X \(240\), got shape \(3,\)"):
        CalibratedAggregator().fit(wide, y[:3])
    with pytest.raises(InputError, match="expected a DataFrame"):
        CalibratedAggregator().fit(V, y)


def test_unknown_judges_are_named_absent_ones_are_missing_votes_and_the_floor_is_the_cli_s():
    V, y = _panel()
    votes = _long(V)
    labels = pd.Series(y, index=[f"i{k}" for k in range(len(y))])
    est = CalibratedAggregator(conformal_alphas=()).fit(votes, labels)
    extra = pd.concat([votes, pd.DataFrame({"item_id": ["i0"], "judge_id": ["new"], "verdict": [1]})])
    with pytest.warns(UserWarning, match=r"judge_id: 1 judge\(s\) not in the model \(e\.g\. \['new'\]\)"):
        with_new = est.predict_items(extra)
    pd.testing.assert_frame_equal(with_new, est.predict_items(votes))
    fewer = votes[votes["judge_id"] != "j0"]
    V0 = V.copy()
    V0[:, 0] = -1
    np.testing.assert_allclose(est.predict_items(fewer)["p"], est.model_.score(V0)["p"])
    # 2 of 6 judges: below the CLI's floor (half), refused with the notebook's way to lower it
    two = votes[votes["judge_id"].isin(["j0", "j1"])]
    with pytest.raises(
        InputError, match=r"4 of the model's 6 judges have no verdicts .*coverage 33% below 50%.*min_judge_coverage=0"
    ):
        est.predict_items(two)
    assert est.set_params(min_judge_coverage=0.0).predict_items(two)["p"].notna().all()


def test_an_item_without_a_known_vote_gets_no_verdict():
    V, y = _panel()
    est = CalibratedAggregator().fit(_wide(V), y)
    wide = _wide(V).astype(object)
    wide.iloc[5, :] = None  # every vote null: the item has no evidence
    rows = est.predict_items(wide)
    assert rows.loc["i5", ["score", "p", "verdict", "set_alpha_0_1"]].isna().all() and rows.loc["i5", "n_votes"] == 0
    assert rows.drop(index="i5")["p"].notna().all()
    with pytest.raises(
        InputError, match=r"1 item\(s\) without a vote from any model judge \(e\.g\. \['i5'\]\).*predict_items"
    ):
        est.predict_proba(wide)
    with pytest.raises(InputError, match="without a vote from any model judge"):
        est.predict(wide)


# -- a scikit-learn classifier on wide frames ------------------------------------------------------------------
def test_it_is_a_classifier_that_clones_and_round_trips_its_params():
    est = CalibratedAggregator("dawid_skene", "platt", conformal_alphas=(0.1, 0.2), seed=3, min_judge_coverage=0.2)
    assert is_classifier(est)
    params = est.get_params()
    assert params["aggregator"] == "dawid_skene" and params["conformal_alphas"] == (0.1, 0.2)
    twin = clone(est)
    assert twin is not est and twin.get_params() == params
    again = CalibratedAggregator().set_params(**params)
    assert again.get_params() == params
    V, y = _panel()
    fresh = clone(est)
    with pytest.raises(NotFittedError):
        fresh.predict(_wide(V))
    fitted = fresh.fit(_wide(V), y)
    assert fitted is fresh and fitted.get_params() == params  # fit returns self and leaves the parameters be
    assert not hasattr(clone(fitted), "model_")  # clone copies parameters, never the fit
    proba = fitted.predict_proba(_wide(V))
    assert proba.shape == (len(y), 2) and np.allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(fitted.classes_, [0, 1])
    np.testing.assert_array_equal(proba[:, 1], fitted.predict_items(_wide(V))["p"])  # column 1 = class 1 = A
    np.testing.assert_array_equal(fitted.predict(_wide(V)), (proba[:, 1] > 0.5).astype(int))
    assert fitted.score(_wide(V), y) == accuracy_score(y, fitted.predict(_wide(V)))
    letters = clone(est).fit(_wide(V), np.where(y == 1, "A", "B"))
    np.testing.assert_array_equal(letters.classes_, ["A", "B"])  # sorted: column 0 is A now
    np.testing.assert_allclose(letters.predict_proba(_wide(V))[:, 0], proba[:, 1], rtol=1e-12)
    assert set(letters.predict(_wide(V))) == {"A", "B"}


def test_cross_val_score_is_the_manual_fold_loop():
    V, y = _panel(seed=5, n=300)
    X = _wide(V)
    cv = KFold(5, shuffle=True, random_state=0)
    est = CalibratedAggregator("log_odds", "beta")
    for scoring in (None, "neg_log_loss"):
        got = cross_val_score(est, X, y, cv=cv, scoring=scoring)
        manual = []
        for train, test in cv.split(X):
            fold = CalibratedAggregator("log_odds", "beta").fit(X.iloc[train], y[train])
            if scoring is None:
                manual.append(accuracy_score(y[test], fold.predict(X.iloc[test])))
            else:
                manual.append(-log_loss(y[test], fold.predict_proba(X.iloc[test])[:, 1]))
        np.testing.assert_allclose(got, manual, rtol=1e-12)


def test_grid_search_picks_what_the_manual_loop_over_the_grid_picks():
    V, y = _panel(seed=8, n=300, accuracy=(0.8, 0.62, 0.74, 0.55, 0.7))
    X = _wide(V)
    grid = {"aggregator": ["majority", "one_coin", "stacking"], "calibrator": ["none", "platt", "isotonic"]}
    cv = KFold(4, shuffle=True, random_state=1)
    search = GridSearchCV(CalibratedAggregator(conformal_alphas=()), grid, cv=cv, scoring="neg_log_loss").fit(X, y)
    means = {}
    for params in ParameterGrid(grid):
        folds = []
        for train, test in cv.split(X):
            fold = CalibratedAggregator(conformal_alphas=(), **params).fit(X.iloc[train], y[train])
            folds.append(-log_loss(y[test], fold.predict_proba(X.iloc[test])[:, 1]))
        means[tuple(sorted(params.items()))] = np.mean(folds)
    best = max(means, key=means.__getitem__)
    assert tuple(sorted(search.best_params_.items())) == best
    assert search.best_score_ == pytest.approx(means[best], rel=1e-12)
    # refit on everything: the best estimator is the grid point fitted on all of X
    refit = CalibratedAggregator(conformal_alphas=(), **dict(best)).fit(X, y)
    np.testing.assert_array_equal(search.predict_proba(X), refit.predict_proba(X))


def test_it_runs_inside_a_pipeline():
    V, y = _panel()
    X = _wide(V)
    drop_coin = FunctionTransformer(lambda frame: frame.drop(columns=["j4"]))
    pipe = make_pipeline(drop_coin, CalibratedAggregator("one_coin", "beta")).fit(X, y)
    direct = CalibratedAggregator("one_coin", "beta").fit(X.drop(columns=["j4"]), y)
    np.testing.assert_array_equal(pipe.predict_proba(X), direct.predict_proba(X.drop(columns=["j4"])))
    assert pipe[-1].judge_ids_ == ["j0", "j1", "j2", "j3", "j5"]


# -- one semantics for missing evidence: the notebook's rows are score's ---------------------------------------
def _weekly_table(url: str) -> tuple[pd.DataFrame, pd.Series]:
    """A dataset with every kind of missing evidence, written as ingest writes it; its verdicts and labels.

    Judges j0-j4 (the model's) and a stranger; 10% of the model judges' verdicts null (unparseable), 5% ties;
    items w0-w4 have only the stranger's vote, items w5-w7 only null verdicts; labels for items 0-159.
    """
    from judgecal_dist.io.dataset import write_dataset

    rng = np.random.default_rng(11)
    n, acc = 220, (0.85, 0.75, 0.7, 0.6, 0.8)
    truth = rng.integers(0, 2, n)
    rows = []
    for i in range(n):
        item = f"w{i}"
        if i < 5:
            rows.append((item, "stranger", "A"))
            continue
        for j, a in enumerate(acc):
            right = rng.random() < a
            verdict: str | None = "A" if (truth[i] == 1) == right else "B"
            u = rng.random()
            verdict = None if i < 8 or u < 0.1 else ("tie" if u < 0.15 else verdict)
            rows.append((item, f"j{j}", verdict))
        if rng.random() < 0.2:
            rows.append((item, "stranger", "B"))
    verdicts = pd.DataFrame(rows, columns=["item_id", "judge_id", "verdict"]).assign(dataset="weekly")
    label_rows = pd.DataFrame(
        {"dataset": "weekly", "item_id": [f"w{i}" for i in range(n)], "label": [None] * n}, dtype=object
    )
    label_rows.loc[:159, "label"] = np.where(truth[:160] == 1, "A", "B")
    tables = {
        "verdicts": pa.Table.from_pandas(verdicts, preserve_index=False),
        "labels": pa.Table.from_pandas(label_rows, preserve_index=False),
    }
    write_dataset(url, tables, {"adapter": "test"})
    return verdicts, label_rows.set_index("item_id")["label"]


def _score_rows(model: str, data: str, out: str, engine: str) -> pd.DataFrame:
    from judgecal_dist.config import EngineConfig
    from judgecal_dist.scoring.apply import score_dataset

    result = score_dataset(model, data, out, engine=EngineConfig(stats_engine=engine), unknown_judges="ignore")
    assert result["engine"] == engine and result["counts"]["unknown_judges_ignored"] == ["stranger"]
    items = pd.read_parquet(f"{out}/items")
    return items.assign(dataset=items["dataset"].astype(str)).sort_values("item_id").reset_index(drop=True)


def _comparable(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.sort_values("item_id").reset_index(drop=True)
    return rows.assign(set_alpha_0_1=rows["set_alpha_0_1"].map(lambda s: None if s is None else list(s)))


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_the_notebook_gives_score_s_rows_with_every_kind_of_missing_evidence(engine, tmp_path, spark):
    from judgecal_dist.io.dataset import read_dataset_table

    data = str(tmp_path / "weekly")
    _, labels = _weekly_table(data)
    # the notebook reads the project's own verdicts table as read (null verdicts, ties, the sample column)
    table = read_dataset_table(data, "verdicts").to_pandas()
    fit_on = table[(table["judge_id"] != "stranger") & table["item_id"].isin([f"w{i}" for i in range(130)])]
    est = CalibratedAggregator("one_coin", "beta").fit(fit_on, labels)
    model = est.save(str(tmp_path / "model.json"))
    with pytest.warns(UserWarning, match=r"1 judge\(s\) not in the model \(e\.g\. \['stranger'\]\)"):
        notebook = est.predict_items(table, labels).reset_index()
    score = _score_rows(model, data, str(tmp_path / "out"), engine)
    pd.testing.assert_frame_equal(_comparable(notebook)[list(score.columns)], _comparable(score), check_dtype=False)
    # what the rows say, against the table itself
    by_item = score.set_index("item_id")
    unscored = [f"w{i}" for i in range(8)]  # the stranger's only, or only null verdicts
    assert by_item.loc[unscored, ["p", "verdict"]].isna().all().all() and (by_item.loc[unscored, "n_votes"] == 0).all()
    assert by_item.drop(index=unscored)["p"].notna().all()
    # in-sample: the labelled items of the frame fitted on (w0-w4 were not in it: only the stranger voted on them)
    fitted = {i for i in set(fit_on["item_id"]) if labels[i] is not None}
    assert len(fitted) == 125
    assert set(by_item.index[by_item["in_calibration"]]) == fitted


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_model_fitted_in_a_notebook_marks_its_items_when_scored_on_an_ingested_table(engine, tmp_path, spark):
    data = str(tmp_path / "weekly")
    verdicts, labels = _weekly_table(data)
    # crowd-kit's layout, no dataset column: the fingerprint is the item ids, on any dataset
    crowd = verdicts[verdicts["judge_id"] != "stranger"].rename(
        columns={"item_id": "task", "judge_id": "worker", "verdict": "label"}
    )
    crowd["label"] = crowd["label"].map({"A": 1, "B": 0, "tie": None})
    first = labels.iloc[:100].map({"A": 1, "B": 0})
    model = CalibratedAggregator().fit(crowd.drop(columns="dataset"), first).save(str(tmp_path / "m.json"))
    score = _score_rows(model, data, str(tmp_path / "out"), engine).set_index("item_id")
    fitted = set(first.index) & set(crowd["task"])  # labels of items X does not hold are not fitted on
    assert len(fitted) == 95 and set(score.index[score["in_calibration"]]) == fitted
    # a document an earlier notebook saved named the dataset "api": read as no dataset, the same marks
    doc = json.loads(Path(model).read_text())
    doc["fitted_on"]["dataset"] = "api"
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = _score_rows(str(tmp_path / "old.json"), data, str(tmp_path / "out-old"), engine).set_index("item_id")
    pd.testing.assert_series_equal(old["in_calibration"], score["in_calibration"])
    # a document without item ids: in_calibration null, the count null, and summary.json says why
    del doc["fitted_on"]["item_ids"]
    (tmp_path / "bare.json").write_text(json.dumps(doc))
    from judgecal_dist.config import EngineConfig
    from judgecal_dist.scoring.apply import score_dataset

    bare = score_dataset(
        str(tmp_path / "bare.json"),
        data,
        str(tmp_path / "o3"),
        engine=EngineConfig(stats_engine=engine),
        unknown_judges="ignore",
    )
    assert bare["counts"]["items_in_calibration"] is None and "in_calibration is null" in bare["model"]["note"]
    assert [row["items_in_calibration"] for row in bare["datasets"]] == [None]
    assert pd.read_parquet(tmp_path / "o3" / "items")["in_calibration"].isna().all()
