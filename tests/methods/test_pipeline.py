"""The pipeline defined once in methods/: its count-based steps equal the array-based ones, and it composes the
estimators exactly as a hand-written chain of them does."""

from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.calibration.platt import PlattCalibrator
from judgecal_dist.methods.pipeline import (
    Settings,
    aggregate_counts,
    choose_panels,
    conformal_sets,
    fit_pipelines,
    panels_from_counts,
)
from judgecal_dist.methods.selection.curate import top_k


@pytest.fixture(scope="module")
def panel():
    rng = np.random.default_rng(11)
    n, J = 400, 8
    y = rng.integers(0, 2, n).astype(np.int8)
    acc = rng.uniform(0.55, 0.9, J)
    correct = rng.random((n, J)) < acc
    votes = np.where(correct, y[:, None], 1 - y[:, None]).astype(np.int8)
    votes[rng.random((n, J)) < 0.1] = -1
    return votes, y, np.array([f"j{i}" for i in range(J)], dtype=object)


def test_panels_from_counts_are_the_top_k_of_hand_counted_votes(panel):
    votes, y, judges = panel
    n_votes = (votes != -1).sum(axis=0)
    n_correct = (votes == y[:, None]).sum(axis=0)  # a missing vote (-1) never equals a label
    settings = Settings()
    chosen = panels_from_counts(("all", "top3", "top20"), n_votes, n_correct, judges, None, settings)
    assert list(chosen) == ["all", "top3"]  # top20 >= J repeats the full panel and is skipped
    np.testing.assert_array_equal(chosen["top3"], np.sort(top_k(n_votes, n_correct, judges, 3)))
    arrays = choose_panels(("all", "top3"), votes, y, judges, judges, settings)
    assert {k: v.tolist() for k, v in arrays.items()} == {k: v.tolist() for k, v in chosen.items()}


def test_panels_from_counts_rejects_dedup_without_families(panel):
    votes, y, judges = panel
    with pytest.raises(ConfigError, match="dedup needs the judges' families"):
        panels_from_counts(("dedup",), np.ones(len(judges)), np.ones(len(judges)), judges, None, Settings())


def test_aggregate_counts_equals_one_coin_fitted_on_the_votes(panel):
    votes, y, _ = panel
    n_votes = (votes != -1).sum(axis=0)
    n_correct = (votes == y[:, None]).sum(axis=0)
    model = aggregate_counts("one_coin", Settings(), n_votes, n_correct, len(y), int(y.sum()))
    reference = OneCoin().fit(votes, y)
    np.testing.assert_allclose(model.weights_, reference.weights_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.predict_proba(votes), reference.predict_proba(votes), rtol=0, atol=1e-12)
    with pytest.raises(ConfigError, match="needs the vote matrix"):
        aggregate_counts("stacking", Settings(), n_votes, n_correct, len(y), int(y.sum()))


def test_fit_pipelines_is_the_hand_written_chain(panel):
    votes, y, _ = panel
    v_cal, y_cal, v_eval = votes[:250], y[:250], votes[250:]
    settings = Settings(calibrator_input="logit")
    got = fit_pipelines("one_coin", ("none", "platt", "beta"), settings, v_cal, y_cal, v_eval)
    one_coin = OneCoin().fit(v_cal, y_cal)
    s_cal, s_eval = one_coin.decision_function(v_cal), one_coin.decision_function(v_eval)
    platt = PlattCalibrator(score_input="logit").fit(s_cal, y_cal)
    beta = BetaCalibration(score_input="logit").fit(s_cal, y_cal)
    raw = np.clip(1.0 / (1.0 + np.exp(-s_eval)), settings.eps, 1 - settings.eps)
    np.testing.assert_allclose(got["none"], raw, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["platt"], platt.predict_proba(s_eval)[:, 1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["beta"], beta.predict_proba(s_eval)[:, 1], rtol=0, atol=1e-12)


def test_conformal_sets_use_the_three_slices_in_turn(panel):
    votes, y, _ = panel
    parts = [(votes[:150], y[:150]), (votes[150:250], y[150:250]), (votes[250:330], y[250:330])]
    v_eval = votes[330:]
    settings = Settings()
    sets = conformal_sets("one_coin", "beta", settings, parts, v_eval, (0.1, 0.2))
    one_coin = OneCoin().fit(*parts[0])
    beta = BetaCalibration().fit(one_coin.decision_function(parts[1][0]), parts[1][1])  # log-odds: the default
    p_conf = beta.predict_proba(one_coin.decision_function(parts[2][0]))[:, 1]
    p_eval = beta.predict_proba(one_coin.decision_function(v_eval))[:, 1]
    for alpha in (0.1, 0.2):
        expected = SplitConformal(alpha=alpha).fit(p_conf, parts[2][1]).predict_set(p_eval)
        np.testing.assert_array_equal(sets[alpha], expected)
