"""Every aggregator x calibrator of the pipeline exports as ``judgecal.binary-pipeline/v1``, reloads, and scores
exactly as the fitted estimators do; a malformed document is refused naming its field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.pipeline import (
    AGGREGATORS,
    CALIBRATORS,
    Settings,
    aggregate,
    apply_calibrator,
    calibrate,
    calibrator,
    step1_scores,
)
from judgecal_dist.models import load_model, model_from_dict, pipeline_from_estimators, save_model


@pytest.fixture(scope="module")
def panel() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 200).astype(np.int8)
    acc = np.array([0.9, 0.8, 0.7, 0.6, 0.4])
    V = np.where(rng.random((200, 5)) < acc, y[:, None], 1 - y[:, None]).astype(np.int8)
    V[rng.random(V.shape) < 0.15] = -1
    return V, y


def _fit(V: np.ndarray, y: np.ndarray, agg: str, cal: str, settings: Settings):
    """The pipeline fitted as the studies fit it, its in-memory predictions, and the exported model."""
    s_fit, s_new, model = aggregate(agg, settings, V[:150], y[:150], V)
    p = calibrate(cal, settings, s_fit, y[:150], {"new": s_new})["new"]
    fitted = calibrator(cal, settings)
    if fitted is not None:
        fitted.fit(s_fit, y[:150])
    conformal = [SplitConformal(alpha=a).fit(p[150:], y[150:]) for a in (0.1, 0.2)]
    exported = pipeline_from_estimators(
        judge_ids=[f"j{k}" for k in range(V.shape[1])],
        aggregator_name=agg,
        aggregator=model,
        calibrator_name=cal,
        calibrator=fitted,
        settings=settings,
        conformal=conformal,
    )
    return p, exported


@pytest.mark.parametrize(
    ("agg", "calibrator_input"),
    [(a, "logit") for a in AGGREGATORS] + [("one_coin", "probability"), ("dawid_skene", "probability")],
)
def test_every_pipeline_round_trips_exactly(panel, tmp_path, agg: str, calibrator_input: str) -> None:
    V, y = panel
    settings = Settings(calibrator_input=calibrator_input)
    for cal in CALIBRATORS:
        p, exported = _fit(V, y, agg, cal, settings)
        url = save_model(exported, str(tmp_path / f"{agg}-{cal}.json"))
        loaded = load_model(url)
        out = loaded.score(V)
        np.testing.assert_array_equal(out["p"], p, err_msg=f"{agg} + {cal}")
        assert out["sets"].shape == (2, len(y), 2) and loaded.name == f"{agg} + {cal} @ all"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("aggregator", "weights", 1), float("nan"), "aggregator.weights.1"),
        (("aggregator", "class_prior"), 1.5, "aggregator.class_prior"),
        (("calibrator", "temperature"), -1.0, "calibrator.temperature"),
        (("judge_ids",), ["j0", "j0", "j2", "j3", "j4"], "judge_ids"),
        (("aggregator", "weights"), [1.0, 2.0], "aggregator.weights"),
        (("conformal", 0, "alpha"), 2.0, "conformal.0.alpha"),
        (("eps",), "small", "eps"),
        (("format",), "judgecal.binary-pipeline/v9", "format"),
    ],
)
def test_malformed_document_is_refused_naming_the_field(panel, path, value, field: str) -> None:
    V, y = panel
    doc = json.loads(
        json.dumps(
            _fit(V, y, "one_coin" if "calibrator" not in path else "one_coin", "temperature", Settings())[1].document
        )
    )
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(InputError) as err:
        model_from_dict(doc, source="m.json")
    message = str(err.value)
    assert message.startswith(f"m.json: {field}") and "\n" not in message, message


def test_save_never_overwrites_by_accident(panel, tmp_path) -> None:
    V, y = panel
    _, exported = _fit(V, y, "majority", "none", Settings())
    url = save_model(exported, str(tmp_path))
    with pytest.raises(InputError, match="exists"):
        save_model(exported, url)
    assert save_model(exported, url, overwrite=True) == url


@pytest.mark.parametrize("calibrator_input", ["logit", "probability"])
@pytest.mark.parametrize("agg", AGGREGATORS)
def test_numeric_path_equals_the_sklearn_estimators(panel, agg: str, calibrator_input: str) -> None:
    """Scoring applies the fitted numbers with numpy (no sklearn); the estimators rebuilt from the same document
    (``.aggregator``, ``.calibrator``, ``.conformal``) give the same floats, for every aggregator and calibrator."""
    V, y = panel
    settings = Settings(calibrator_input=calibrator_input)
    for cal in CALIBRATORS:
        _, exported = _fit(V, y, agg, cal, settings)
        out = exported.score(V)
        estimator = exported.aggregator
        np.testing.assert_allclose(out["score"], estimator.predict_proba(V)[:, 1], rtol=0, atol=1e-12)
        s = step1_scores(agg, estimator, V, settings)
        np.testing.assert_allclose(exported.step1.step1(V, calibrator_input, settings.eps), s, rtol=0, atol=1e-12)
        expected = apply_calibrator(exported.calibrator, s, settings)
        np.testing.assert_allclose(out["p"], expected, rtol=0, atol=1e-12, err_msg=f"{agg} + {cal}")
        for sets, conformal in zip(out["sets"], exported.conformal, strict=True):
            np.testing.assert_array_equal(sets, conformal.predict_set(out["p"]))
        # exact log-odds of the log-odds models (vote fractions have +-inf at unanimity; a constant none)
        if agg in ("log_odds", "one_coin", "dawid_skene") or (agg == "stacking" and estimator.model_ is not None):
            logits = estimator.decision_function(V)
            np.testing.assert_allclose(exported.step1.log_odds(V), logits, rtol=0, atol=1e-12)
