from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from judgecal_dist.methods.calibration.isotonic import IsotonicCalibrator

EPS = 1e-6


def test_matches_sklearn_isotonic_regression(miscalibrated):
    s, y = miscalibrated
    w = np.random.default_rng(4).uniform(0.5, 2.0, size=len(s))
    cal = IsotonicCalibrator(score_input="probability").fit(s, y, sample_weight=w)
    reference = IsotonicRegression(out_of_bounds="clip").fit(np.clip(s, EPS, 1 - EPS), y, sample_weight=w)
    grid = np.linspace(0.0, 1.0, 501)
    expected = np.clip(reference.predict(np.clip(grid, EPS, 1 - EPS)), EPS, 1 - EPS)
    np.testing.assert_allclose(cal.predict_proba(grid)[:, 1], expected, rtol=0, atol=1e-12)


def test_pav_by_hand():
    # Pool-adjacent-violators on sorted scores: 1 > 0 pools to 1/2, which exceeds the next 0: (1, 0, 0) -> 1/3.
    cal = IsotonicCalibrator(score_input="probability").fit([0.1, 0.2, 0.3, 0.4, 0.5], [1, 0, 0, 1, 1])
    np.testing.assert_allclose(
        cal.predict_proba([0.1, 0.2, 0.3, 0.45, 0.5])[:, 1], [1 / 3, 1 / 3, 1 / 3, 1 - EPS, 1 - EPS]
    )


def test_out_of_range_scores_take_boundary_values_and_output_is_clipped():
    cal = IsotonicCalibrator(score_input="probability").fit([0.3, 0.4, 0.6, 0.7], [0, 0, 1, 1])
    np.testing.assert_allclose(cal.predict_proba([0.0, 0.1, 0.9, 1.0])[:, 1], [EPS, EPS, 1 - EPS, 1 - EPS])
    np.testing.assert_allclose(cal.predict_proba([0.5])[:, 1], [0.5])  # linear between fitted scores


def test_constant_labels_give_clipped_constant():
    cal = IsotonicCalibrator(eps=1e-3, score_input="probability").fit([0.2, 0.5, 0.9], [1, 1, 1])
    np.testing.assert_allclose(cal.predict_proba([0.0, 1.0])[:, 1], [1 - 1e-3, 1 - 1e-3])
