"""One split of the inclusion study: panels, aggregators and calibrators fitted on the calibration part.

Spec 000 §5.1 main protocol: every aggregator is fitted on the calibration part and its in-sample scores there
train the calibrator (stacking uses its out-of-fold scores, §3.1(f)); curated panels are chosen from
calibration data only and then run through exactly the same aggregator and calibrator (§3.6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.aggregate import MajorityVote, OneCoin
from judgecal_dist.methods.beta import BetaCalibration
from judgecal_dist.methods.curate import dedup_by_family, top_k
from judgecal_dist.methods.dawid_skene import DawidSkene
from judgecal_dist.methods.isotonic import IsotonicCalibrator
from judgecal_dist.methods.platt import PlattCalibrator
from judgecal_dist.methods.stacking import LogisticStacking
from judgecal_dist.methods.temperature import TemperatureScaling
from judgecal_dist.methods.votes import count_judge_votes
from judgecal_dist.methods.weighted import AccuracyWeighted, LogOddsWeighted

__all__ = ["AGGREGATORS", "CALIBRATORS", "PANELS", "Settings", "choose_panels", "aggregate", "calibrate"]

AGGREGATORS = ("majority", "accuracy_weighted", "log_odds", "one_coin", "dawid_skene", "stacking")
CALIBRATORS = ("none", "platt", "temperature", "beta", "isotonic")
#: Curated panels: top-k by posterior mean accuracy (spec §3.1(g)) and one judge per family (§3.6).
PANELS = ("all", "top3", "top5", "top10", "dedup")


@dataclass(frozen=True)
class Settings:
    """Hyperparameters shared by every pipeline of a run (recorded in the manifest through the config)."""

    eps: float = 1e-6
    alpha0: float = 1.0
    beta0: float = 1.0
    class_prior: str = "half"
    beta_penalty: float = 0.01
    beta_l1_ratio: float = 0.5
    beta_penalty_scale: str = "mean"
    ds_n_iter: int = 100
    stacking_c: float = 1.0
    stacking_folds: int = 5


def choose_panels(
    names: tuple[str, ...],
    v_cal: npt.NDArray[np.int8],
    y_cal: npt.NDArray[np.int8],
    judge_ids: npt.NDArray[Any],
    families: npt.NDArray[Any],
    settings: Settings,
) -> dict[str, npt.NDArray[np.intp]]:
    """Column indices of every requested panel, chosen from calibration data only.

    A top-k panel with k >= J, or a dedup panel when every judge is its own family, equals the full panel and is
    skipped (it would only repeat the ``all`` rows).
    """
    n_judges = v_cal.shape[1]
    n_votes, n_correct = count_judge_votes(v_cal, y_cal)
    panels: dict[str, npt.NDArray[np.intp]] = {}
    for name in names:
        if name == "all":
            panels[name] = np.arange(n_judges)
        elif name.startswith("top"):
            k = int(name[3:])
            if k < n_judges:
                chosen = top_k(n_votes, n_correct, judge_ids, k, alpha0=settings.alpha0, beta0=settings.beta0)
                panels[name] = np.sort(chosen)
        elif name == "dedup":
            if len(set(families.tolist())) < n_judges:
                chosen = dedup_by_family(n_votes, n_correct, judge_ids, families, alpha0=settings.alpha0,
                                         beta0=settings.beta0)  # fmt: skip
                panels[name] = np.sort(chosen)
        else:
            raise ConfigError(f"panels: unknown panel {name!r}; known: {list(PANELS)} (topK for any K)")
    return panels


def _aggregator(name: str, settings: Settings) -> Any:
    if name == "majority":
        return MajorityVote()
    if name == "accuracy_weighted":
        return AccuracyWeighted()
    if name == "log_odds":
        return LogOddsWeighted(prior=settings.class_prior)
    if name == "one_coin":
        return OneCoin(alpha0=settings.alpha0, beta0=settings.beta0, prior=settings.class_prior)
    if name == "dawid_skene":
        return DawidSkene(n_iter=settings.ds_n_iter, eps=settings.eps)
    if name == "stacking":
        return LogisticStacking(C=settings.stacking_c, n_folds=settings.stacking_folds, random_state=0)
    raise ConfigError(f"aggregators: unknown aggregator {name!r}; known: {list(AGGREGATORS)}")


def aggregate(
    name: str, settings: Settings, v_fit: npt.NDArray[np.int8], y_fit: npt.NDArray[np.int8], v_new: npt.NDArray[np.int8]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], Any]:
    """Step 1 scores: (scores on the fit items that train the calibrator, scores on new items, fitted model)."""
    model = _aggregator(name, settings)
    if name == "dawid_skene":
        model.fit(v_fit)  # unsupervised latent-class model: labels unused (spec §3.1(e))
    else:
        model.fit(v_fit, y_fit)
    s_fit = model.oof_scores_ if name == "stacking" else model.predict_proba(v_fit)[:, 1]
    return np.asarray(s_fit, dtype=np.float64), model.predict_proba(v_new)[:, 1], model


def calibrator(name: str, settings: Settings) -> Any:
    """An unfitted Step-2/3 calibrator (``none`` is None)."""
    if name == "none":
        return None
    if name == "platt":
        return PlattCalibrator(eps=settings.eps)
    if name == "temperature":
        return TemperatureScaling(eps=settings.eps)
    if name == "beta":
        return BetaCalibration(penalty=settings.beta_penalty, l1_ratio=settings.beta_l1_ratio,
                               penalty_scale=settings.beta_penalty_scale, eps=settings.eps)  # fmt: skip
    if name == "isotonic":
        return IsotonicCalibrator(eps=settings.eps)
    raise ConfigError(f"calibrators: unknown calibrator {name!r}; known: {list(CALIBRATORS)}")


def calibrate(
    name: str, settings: Settings, s_fit: npt.NDArray[np.float64], y_fit: npt.NDArray[np.int8],
    s_new: Mapping[str, npt.NDArray[np.float64]],
) -> dict[str, npt.NDArray[np.float64]]:  # fmt: skip
    """Calibrated probabilities of every score vector in ``s_new`` (clipped raw scores for ``none``)."""
    model = calibrator(name, settings)
    if model is None:
        return {key: np.clip(s, settings.eps, 1 - settings.eps) for key, s in s_new.items()}
    model.fit(s_fit, y_fit)
    return {key: model.predict_proba(s)[:, 1] for key, s in s_new.items()}
