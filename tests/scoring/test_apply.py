"""``judgecal score`` on LLMBar equals applying the fitted estimators in memory, on both engines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, log_expit, logit

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.panel import load_panel
from judgecal_dist.io.ingest import ingest
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.scoring.apply import score_dataset
from judgecal_dist.scoring.summary import set_column
from judgecal_dist.splits import assign_blocks
from judgecal_dist.stats.metrics import accuracy, brier, nll

ALPHAS = (0.1, 0.2)


def write_run(folder: Path, model: dict) -> str:
    """A committed run folder holding only ``model/calibration.json`` (what ``judgecal score`` reads)."""
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "calibration.json").write_text(json.dumps(model))
    (folder / "_SUCCESS").write_text("")
    return str(folder)


def artifact(agg: OneCoin, beta: BetaCalibration, conformal: list, judge_ids, calibrator_input: str | None) -> dict:
    """The v2 artifact of in-memory estimators, field for field as ``studies.inclusion._model`` writes it."""
    model = {
        "format": "judgecal.calibration/v2",
        "aggregator": {
            "name": "one_coin",
            "judge_ids": list(judge_ids),
            "weights": agg.weights_.tolist(),
            "class_prior": float(agg.prior_),
            "alpha0": 1.0,
            "beta0": 1.0,
        },
        "calibrator": {"name": "beta", "a": beta.a_, "b": beta.b_, "c": beta.c_, "penalty": 0.01, "l1_ratio": 0.5},
        "conformal": [c.to_dict() for c in conformal],
        "eps": 1e-6,
        "vote_codes": {"A": 1, "B": 0, "missing": -1, "tie": "missing"},
    }
    if calibrator_input is not None:
        model["calibrator_input"] = calibrator_input
    return model


@pytest.fixture(scope="module")
def llmbar(llmbar_dir, tmp_path_factory):
    data = str(tmp_path_factory.mktemp("score") / "llmbar")
    ingest("llmbar", str(llmbar_dir), data)
    return data, load_panel(data)


@pytest.fixture(scope="module", params=["probability", "logit"])
def fitted(request, llmbar, tmp_path_factory):
    """Estimators fitted in memory on 80% of the groups (conformal slice: the other 20%), and their run folder."""
    _, panel = llmbar
    kind = request.param
    blocks = assign_blocks(panel.group_keys, 7, [0.8, 0.2])
    fit, cut = blocks == 0, blocks == 1
    agg = OneCoin().fit(panel.votes[fit], panel.labels[fit])
    score = agg.decision_function if kind == "logit" else (lambda v: agg.predict_proba(v)[:, 1])
    beta = BetaCalibration(score_input=kind).fit(score(panel.votes[fit]), panel.labels[fit])
    p_cut = beta.predict_proba(score(panel.votes[cut]))[:, 1]
    conformal = [SplitConformal(alpha=a).fit(p_cut, panel.labels[cut]) for a in ALPHAS]
    model = artifact(agg, beta, conformal, panel.judge_ids, None if kind == "probability" else kind)
    run = write_run(tmp_path_factory.mktemp(f"run-{kind}"), model)
    return run, model, agg, beta, conformal, score


def read_items(out: str) -> pd.DataFrame:
    items = pd.read_parquet(f"{out}/items")
    return items.assign(dataset=items["dataset"].astype(str)).sort_values("item_id").reset_index(drop=True)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_score_equals_the_fitted_estimators_in_memory(engine, llmbar, fitted, tmp_path, spark):
    data, panel = llmbar
    run, model, agg, beta, conformal, score = fitted
    out = str(tmp_path / "out")
    result = score_dataset(run, data, out, engine=EngineConfig(stats_engine=engine))
    assert result["engine"] == engine and result["counts"]["items"] == panel.n_items == 419
    assert (Path(out) / "_SUCCESS").exists() and (Path(out) / "figures" / "win_rates.png").stat().st_size > 0
    items = read_items(out)
    order = np.argsort(panel.item_ids)  # the panel's items sorted like the output
    votes, labels = panel.votes[order], panel.labels[order]
    assert items["item_id"].tolist() == panel.item_ids[order].tolist()
    np.testing.assert_allclose(items["score"], agg.predict_proba(votes)[:, 1], rtol=0, atol=1e-9)
    p = beta.predict_proba(score(votes))[:, 1]
    np.testing.assert_allclose(items["p"], p, rtol=0, atol=1e-9)
    assert (items["verdict"] == np.where(p > 0.5, "A", "B")).all()
    assert (items["label"] == np.where(labels == 1, "A", "B")).all()
    assert (items["n_votes"] == (votes >= 0).sum(axis=1)).all()
    for alpha, conf in zip(ALPHAS, conformal, strict=True):
        expected = conf.predict_set(p)
        got = items[set_column(alpha)].map(lambda s: (("B" in s), ("A" in s))).tolist()
        assert got == [tuple(row) for row in expected.tolist()]
    # The per-dataset summary against the metric functions on the in-memory probabilities.
    (row,) = result["datasets"]
    assert row["n_items"] == 419 and row["n_labelled"] == 419
    assert row["win_rate"] == pytest.approx(p.mean(), abs=1e-12)
    assert row["win_rate_ci_low"] < row["win_rate"] < row["win_rate_ci_high"]
    assert row["accuracy"] == pytest.approx(accuracy(labels, p), abs=1e-12)
    assert row["nll"] == pytest.approx(nll(labels, p, eps=1e-6), abs=1e-12)
    assert row["brier"] == pytest.approx(brier(labels, p), abs=1e-12)
    covered = conformal[0].predict_set(p)[np.arange(len(p)), labels].mean()
    assert row["coverage_alpha_0_1"] == pytest.approx(covered, abs=1e-12)
    assert {r["subset"] for r in result["subsets"]} == {
        "Natural",
        "Adversarial/Neighbor",
        "Adversarial/GPTInst",
        "Adversarial/GPTOut",
        "Adversarial/Manual",
    }


def test_logit_artifact_applies_beta_to_the_unclipped_log_odds(llmbar, fitted, tmp_path):
    """calibrator_input=logit: p = sigma(a log sigma(t) - b log sigma(-t) + c), t = logit(pi) + sum z psi."""
    data, panel = llmbar
    run, model, *_ = fitted
    if model.get("calibrator_input") != "logit":
        pytest.skip("the probability artifact is covered above")
    out = str(tmp_path / "out")
    score_dataset(run, data, out, engine=EngineConfig(stats_engine="local"))
    items = read_items(out)
    votes = panel.votes[np.argsort(panel.item_ids)]
    z = np.where(votes < 0, 0.0, 2.0 * votes - 1.0)
    t = logit(model["aggregator"]["class_prior"]) + z @ np.array(model["aggregator"]["weights"])
    cal = model["calibrator"]
    expected = expit(cal["a"] * log_expit(t) - cal["b"] * log_expit(-t) + cal["c"])
    assert np.abs(t).max() > 14  # beyond logit(1 - 1e-6): clipping would have collapsed these items
    np.testing.assert_allclose(items["p"], expected, rtol=0, atol=1e-12)


def test_spark_and_local_summaries_agree(llmbar, fitted, tmp_path, spark):
    data, _ = llmbar
    run = fitted[0]
    local = score_dataset(run, data, str(tmp_path / "l"), engine=EngineConfig(stats_engine="local"))
    remote = score_dataset(run, data, str(tmp_path / "s"), engine=EngineConfig(stats_engine="spark"))
    for name in ("datasets", "subsets"):
        a, b = pd.DataFrame(local[name]), pd.DataFrame(remote[name])
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12, atol=1e-12)
