"""The sklearn estimators of an exported binary pipeline, rebuilt from its document for a notebook user who asks
for them (:attr:`judgecal_dist.models.binary.BinaryPipeline.aggregator`, ``.calibrator``, ``.conformal``).

Scoring never needs them (:mod:`judgecal_dist.methods.fitted` applies the numbers); they are the very classes that
were evaluated, with the fitted attributes set, so that their ``predict_proba`` gives the numbers the model does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from judgecal_dist.methods.aggregation.aggregate import MajorityVote, OneCoin
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.aggregation.stacking import LogisticStacking
from judgecal_dist.methods.aggregation.weighted import AccuracyWeighted, LogOddsWeighted
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.calibration.isotonic import IsotonicCalibrator
from judgecal_dist.methods.calibration.platt import PlattCalibrator
from judgecal_dist.methods.calibration.temperature import TemperatureScaling
from judgecal_dist.methods.pipeline import Settings

__all__ = ["aggregator_estimator", "calibrator_estimator", "conformal_estimators"]

_CLASSES = np.array([0, 1])


def aggregator_estimator(doc: Any, n_judges: int) -> Any:
    """The fitted aggregator estimator of an aggregator document."""
    name = doc.name
    if name == "majority":
        model: Any = MajorityVote()
    elif name == "accuracy_weighted":
        model = AccuracyWeighted()
        model.weights_ = np.array(doc.weights, dtype=np.float64)
    elif name in ("log_odds", "one_coin"):
        model = OneCoin(alpha0=doc.alpha0, beta0=doc.beta0) if name == "one_coin" else LogOddsWeighted()
        model.weights_, model.prior_ = np.array(doc.weights, dtype=np.float64), float(doc.class_prior)
    elif name == "dawid_skene":
        model = DawidSkene(eps=doc.eps, semi_supervised=doc.semi_supervised)
        model.prior_, model.confusion_ = float(doc.class_prior), np.array(doc.confusion, dtype=np.float64)
        model.n_iter_ = doc.n_iter
    else:  # stacking: sklearn's LogisticRegression with the fitted numbers (its predict_proba, bit for bit)
        model = LogisticStacking(C=doc.C)
        model.coef_, model.intercept_ = np.array(doc.coef, dtype=np.float64), float(doc.intercept)
        model.fallback_ = None if doc.constant is None else "constant_labels"
        model.oof_scores_ = np.array([doc.constant if doc.constant is not None else np.nan])
        model.model_ = None
        if doc.constant is None:
            lr = LogisticRegression(C=doc.C)
            lr.coef_, lr.intercept_ = model.coef_[None, :].copy(), np.array([model.intercept_])
            lr.classes_, lr.n_features_in_ = _CLASSES.copy(), n_judges
            model.model_ = lr
    model.n_features_in_, model.classes_ = n_judges, _CLASSES.copy()
    return model


def calibrator_estimator(doc: Any, settings: Settings) -> Any:
    """The fitted calibrator estimator (None for ``none``) of a calibrator document."""
    eps, score_input = settings.eps, settings.calibrator_input
    if doc.name == "none":
        return None
    if doc.name == "platt":
        model: Any = PlattCalibrator(eps=eps, score_input=score_input)
        model.slope_, model.intercept_, model.coef_ = float(doc.slope), float(doc.intercept), np.zeros(0)
        model.n_item_features_, model.fallback_, model.n_iter_ = None, None, 0
    elif doc.name == "temperature":
        model = TemperatureScaling(eps=eps, score_input=score_input)
        model.temperature_, model.fallback_, model.n_iter_ = float(doc.temperature), None, 0
    elif doc.name == "beta":
        model = BetaCalibration(penalty=doc.penalty, l1_ratio=doc.l1_ratio, eps=eps, score_input=score_input)
        model.a_, model.b_, model.c_ = float(doc.a), float(doc.b), float(doc.c)
        model.fallback_, model.n_iter_, model.loss_history_ = None, 0, []
    else:  # isotonic: sklearn's interpolation rebuilt from the breakpoints (its pickle protocol does the same)
        model = IsotonicCalibrator(eps=eps, score_input=score_input)
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        x, y = np.array(doc.x, dtype=np.float64), np.array(doc.y, dtype=np.float64)
        iso.__setstate__(iso.__getstate__() | {"X_thresholds_": x, "y_thresholds_": y, "X_min_": x[0], "X_max_": x[-1]})
        iso.increasing_, iso.n_features_in_ = True, 1
        model.isotonic_ = iso
    return model


def conformal_estimators(states: list[dict[str, Any]]) -> list[SplitConformal]:
    """Fitted :class:`SplitConformal` instances of the exported thresholds."""
    return [SplitConformal.from_dict(state) for state in states]
