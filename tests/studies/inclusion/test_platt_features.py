"""Platt scaling with item features (spec 000 eq. (3)) reached from the inclusion config, against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from judgecal_dist.config import EngineConfig
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.methods.pipeline import protocol_scores
from judgecal_dist.splits import calibration_mask
from judgecal_dist.studies.inclusion import study as inclusion


@pytest.mark.parametrize("calib_scores", ["insample", "nested"])
def test_platt_with_item_features_equals_unpenalised_logistic_regression(tmp_path, calib_scores):
    dest = str(tmp_path / "panel")
    generate_panel(dest, n_items=600, n_judges=6, seed=4, missing_rate=0.15)
    config = inclusion.Config(
        data=dest,
        replicates=1,
        aggregators=("one_coin", "majority"),
        calibrators=("platt",),
        panels=("all",),
        permutation_resamples=100,
        calib_scores=calib_scores,
        platt_item_features=("agreement", "coverage"),
    )
    data = inclusion.load(config, EngineConfig(stats_engine="local"))
    rep = inclusion.plan(config, data)[0]
    table = inclusion.run_replicate(data, rep)
    rows = table[table["kind"] == "platt_features"].set_index(["aggregator", "calibrator"])
    panel, settings = data.panel, rep.settings
    cal = calibration_mask(panel.group_keys, [rep.seed], rep.calib_fraction)[0]
    v_cal, y_cal, v_eval, y_eval = panel.votes[cal], panel.labels[cal], panel.votes[~cal], panel.labels[~cal]
    roles = inclusion.protocol_roles(calib_scores, panel.group_keys[cal], rep.seed)

    def features(v: np.ndarray) -> np.ndarray:  # written out by hand: A share among votes, share of judges voting
        a, b = (v == 1).sum(axis=1), (v == 0).sum(axis=1)
        share = np.where(a + b > 0, a / np.maximum(a + b, 1), 0.5)
        return np.column_stack([np.abs(2 * share - 1), (a + b) / v.shape[1]])

    trained = v_cal if roles is None else v_cal[roles == 1]
    for agg in config.aggregators:
        s_train, y_train, s_eval = protocol_scores(agg, settings, v_cal, y_cal, v_eval, calib_scores, roles)
        for name, x_train, x_eval in (
            ("platt", np.empty((len(s_train), 0)), np.empty((len(s_eval), 0))),
            ("platt+agreement+coverage", features(trained), features(v_eval)),
        ):
            ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000)
            ref.fit(np.column_stack([s_train, x_train]), y_train)
            p = np.clip(ref.predict_proba(np.column_stack([s_eval, x_eval]))[:, 1], settings.eps, 1 - settings.eps)
            nll = -np.mean(y_eval * np.log(p) + (1 - y_eval) * np.log(1 - p))
            assert rows.loc[(agg, name), "nll"] == pytest.approx(nll, abs=1e-6)
        assert rows.loc[(agg, "platt+agreement+coverage"), "gamma_agreement"] == pytest.approx(
            ref.coef_[0][1], abs=1e-4
        )
