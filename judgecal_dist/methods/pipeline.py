r"""The calibration pipeline, defined once: panel -> aggregator (Step 1) -> calibrator (Steps 2-3) -> conformal sets.

Every engine runs this: the inclusion studies call it on dense arrays, the one-pass replicate engine
(:mod:`judgecal_dist.engine.onepass`) on sufficient statistics (:func:`panels_from_counts`,
:func:`aggregate_counts`, and the calibrators' own objectives fed with summed data).

Spec 000 §5.1 main protocol: every aggregator is fitted on the calibration part and its in-sample scores there
train the calibrator (stacking uses its out-of-fold scores, §3.1(f)); curated panels are chosen from
calibration data only and then run through exactly the same aggregator and calibrator (§3.6).

``Settings.calibrator_input`` says what passes from Step 1 to the calibrators: ``"probability"`` (spec §3.4: the
aggregator's P(Y=1), clipped at eps before any logit) or ``"logit"`` (this project's recommended default for the
study: the aggregator's unclipped log-odds, so that a large panel's scores beyond logit(1 - eps) keep their
spread). :func:`aggregate` returns scores on that scale and :func:`calibrate` reads them on it, so the two always
agree; only final probabilities are clipped, by the metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.aggregation.aggregate import MajorityVote, OneCoin
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.aggregation.stacking import LogisticStacking
from judgecal_dist.methods.aggregation.votes import count_judge_votes, signed_votes
from judgecal_dist.methods.aggregation.weighted import AccuracyWeighted, LogOddsWeighted
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.calibration.isotonic import IsotonicCalibrator
from judgecal_dist.methods.calibration.platt import PlattCalibrator
from judgecal_dist.methods.calibration.temperature import TemperatureScaling
from judgecal_dist.methods.fitted import probability_logit
from judgecal_dist.methods.selection.curate import dedup_by_family, top_k
from judgecal_dist.settings import CALIBRATOR_INPUTS, AggregationFields, PipelineFields
from judgecal_dist.splits import assign_blocks

__all__ = [
    "AGGREGATORS",
    "CALIBRATORS",
    "CALIBRATOR_INPUTS",
    "PANELS",
    "Settings",
    "PROTOCOLS",
    "choose_panels",
    "panels_from_counts",
    "aggregator",
    "aggregate",
    "aggregate_counts",
    "calibrator",
    "calibrate",
    "apply_calibrator",
    "fit_pipelines",
    "conformal_sets",
    "step1_scores",
    "protocol_roles",
    "protocol_scores",
]

AGGREGATORS = ("majority", "accuracy_weighted", "log_odds", "one_coin", "dawid_skene", "stacking")
CALIBRATORS = ("none", "platt", "temperature", "beta", "isotonic")
#: Curated panels: top-k by posterior mean accuracy (spec §3.1(g)) and one judge per family (§3.6).
PANELS = ("all", "top3", "top5", "top10", "dedup")
#: Which scores train the calibrators (spec §5.2 ``calib_scores``): the aggregator's in-sample scores on the whole
#: calibration part (main protocol), its scores on a held-out 30% (nested 70/30), or 5-fold cross-fitted scores.
PROTOCOLS = ("insample", "nested", "crossfit")
#: Seed offset of the nested / cross-fit cut inside the calibration part.
PROTOCOL_SEED_OFFSET = 4_000_037
#: Aggregators whose decision_function is a true log-odds; the others (vote fractions) are clipped at eps first.
_LOG_ODDS_MODELS = ("log_odds", "one_coin")
#: Temperature range for log-odds input: a 130-judge one-coin panel needs T of 10-100 and more.
_LOGIT_T_BOUNDS = (1e-2, 1e4)


class Settings(PipelineFields, AggregationFields):
    """Hyperparameters shared by every pipeline of a run (recorded in the manifest through the config).

    The one pipeline-settings model: its fields are the :class:`~judgecal_dist.settings.PipelineFields` and
    :class:`~judgecal_dist.settings.AggregationFields` every panel study declares (with their ranges), and
    ``judgecal fit``, the model documents and the API build it from theirs; ``calibrator_input`` is ``"logit"``
    everywhere by default (the library's calibrators, every study's config, the CLI).
    """

    @classmethod
    def of(cls, config: object) -> Settings:
        """The settings of a study config: each field the config has, the defaults for the rest (validated)."""
        return cls(**{name: getattr(config, name) for name in cls.model_fields if hasattr(config, name)})


def choose_panels(
    names: tuple[str, ...],
    v_cal: npt.NDArray[np.int8],
    y_cal: npt.NDArray[np.int8],
    judge_ids: npt.NDArray[Any],
    families: npt.NDArray[Any],
    settings: Settings,
) -> dict[str, npt.NDArray[np.intp]]:
    """Column indices of every requested panel, chosen from calibration data only (:func:`panels_from_counts` of
    the calibration part's per-judge counts)."""
    n_votes, n_correct = count_judge_votes(v_cal, y_cal)
    return panels_from_counts(names, n_votes, n_correct, judge_ids, families, settings)


def panels_from_counts(
    names: Sequence[str],
    n_votes: npt.NDArray[np.int64],
    n_correct: npt.NDArray[np.int64],
    judge_ids: npt.NDArray[Any],
    families: npt.NDArray[Any] | None,
    settings: Settings,
) -> dict[str, npt.NDArray[np.intp]]:
    """Column indices of every requested panel from the calibration part's per-judge votes and correct votes.

    A top-k panel with k >= J, or a dedup panel when every judge is its own family, equals the full panel and is
    skipped (it would only repeat the ``all`` rows).

    Raises
    ------
    ConfigError
        An unknown panel name, or ``dedup`` without ``families``.
    """
    n_judges = len(n_votes)
    panels: dict[str, npt.NDArray[np.intp]] = {}
    for name in names:
        if name == "all":
            panels[name] = np.arange(n_judges)
        elif name.startswith("top") and name[3:].isdigit():
            k = int(name[3:])
            if k < n_judges:
                chosen = top_k(n_votes, n_correct, judge_ids, k, alpha0=settings.alpha0, beta0=settings.beta0)
                panels[name] = np.sort(chosen)
        elif name == "dedup" and families is not None:
            if len(set(families.tolist())) < n_judges:
                chosen = dedup_by_family(
                    n_votes, n_correct, judge_ids, families, alpha0=settings.alpha0, beta0=settings.beta0
                )
                panels[name] = np.sort(chosen)
        elif name == "dedup":
            raise ConfigError("panels: dedup needs the judges' families (this path has only vote counts)")
        else:
            raise ConfigError(f"panels: unknown panel {name!r}; known: {list(PANELS)} (topK for any K)")
    return panels


def aggregator(name: str, settings: Settings) -> Any:
    """An unfitted Step-1 aggregator with the run's hyperparameters."""
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
    """Step 1 scores: (scores on the fit items that train the calibrator, scores on new items, fitted model).

    Scores are P(Y=1) or log-odds as ``settings.calibrator_input`` says (see :func:`step1_scores`); stacking's fit
    scores are its out-of-fold scores.
    """
    model = aggregator(name, settings)
    if name == "dawid_skene":
        model.fit(v_fit)  # unsupervised latent-class model: labels unused (spec §3.1(e))
    else:
        model.fit(v_fit, y_fit)
    if name == "stacking":
        oof = np.asarray(model.oof_scores_, dtype=np.float64)
        s_fit = probability_logit(oof, 0.0) if settings.calibrator_input == "logit" else oof
    else:
        s_fit = step1_scores(name, model, v_fit, settings)
    return s_fit, step1_scores(name, model, v_new, settings), model


def aggregate_counts(
    name: str, settings: Settings, n_votes: npt.ArrayLike, n_correct: npt.ArrayLike, n_items: int, n_positive: int
) -> Any:
    """Step 1 fitted from the fit items' sufficient statistics: per-judge votes and correct votes, the item count
    and the positives; equals :func:`aggregate`'s model fitted on the votes they count.

    Raises
    ------
    ConfigError
        ``name`` is an aggregator that needs the vote matrix (only ``one_coin`` fits from counts).
    """
    if name != "one_coin":
        raise ConfigError(f"aggregators: {name!r} needs the vote matrix; only 'one_coin' fits from counts")
    model = aggregator(name, settings)
    return model.fit_counts(n_votes, n_correct, n_items=n_items, n_positive=n_positive)


def step1_scores(name: str, model: Any, votes: npt.NDArray[np.int8], settings: Settings) -> npt.NDArray[np.float64]:
    """A fitted aggregator's score of ``votes`` on the scale of ``settings.calibrator_input``.

    ``"probability"``: P(Y=1). ``"logit"``: the exact log-odds of the log-odds models (one-coin, plug-in
    log-odds, Dawid-Skene from its fitted prior and confusion matrices, stacking's linear predictor), never
    clipped; for vote fractions, whose probability is the model, the logit of P(Y=1) clipped at eps, so that
    those aggregators calibrate exactly as with probability input.
    """
    if settings.calibrator_input != "logit":
        return np.asarray(model.predict_proba(votes)[:, 1], dtype=np.float64)
    if name in _LOG_ODDS_MODELS:
        return np.asarray(model.decision_function(votes), dtype=np.float64)
    if name == "dawid_skene":
        return np.asarray(model.decision_function(votes), dtype=np.float64)
    if name == "stacking" and getattr(model, "model_", None) is not None:
        return np.asarray(model.model_.decision_function(signed_votes(votes)), dtype=np.float64)
    return probability_logit(model.predict_proba(votes)[:, 1], settings.eps)


def calibrator(name: str, settings: Settings) -> Any:
    """An unfitted Step-2/3 calibrator (``none`` is None) reading scores on ``settings.calibrator_input``'s scale."""
    score_input = settings.calibrator_input
    if name == "none":
        return None
    if name == "platt":
        return PlattCalibrator(eps=settings.eps, score_input=score_input)
    if name == "temperature":
        bounds = _LOGIT_T_BOUNDS if score_input == "logit" else (0.01, 100.0)
        return TemperatureScaling(eps=settings.eps, score_input=score_input, t_bounds=bounds)
    if name == "beta":
        return BetaCalibration(
            penalty=settings.beta_penalty,
            l1_ratio=settings.beta_l1_ratio,
            penalty_scale=settings.beta_penalty_scale,
            eps=settings.eps,
            score_input=score_input,
        )
    if name == "isotonic":
        return IsotonicCalibrator(eps=settings.eps, score_input=score_input)
    raise ConfigError(f"calibrators: unknown calibrator {name!r}; known: {list(CALIBRATORS)}")


def calibrate(
    name: str,
    settings: Settings,
    s_fit: npt.NDArray[np.float64],
    y_fit: npt.NDArray[np.int8],
    s_new: Mapping[str, npt.NDArray[np.float64]],
) -> dict[str, npt.NDArray[np.float64]]:
    """Calibrated probabilities of every score vector in ``s_new`` (clipped raw scores for ``none``).

    Scores are read on the scale of ``settings.calibrator_input`` (as :func:`aggregate` returns them).
    """
    model = calibrator(name, settings)
    if model is not None:
        model.fit(s_fit, y_fit)
    return {key: apply_calibrator(model, s, settings) for key, s in s_new.items()}


def apply_calibrator(model: Any, s: npt.NDArray[np.float64], settings: Settings) -> npt.NDArray[np.float64]:
    """Calibrated P(Y=1) of Step-1 scores ``s`` by a fitted calibrator; ``None`` (``none``) is the score's own
    probability clipped at eps (``s`` read on ``settings.calibrator_input``'s scale)."""
    if model is None:
        to_p = expit if settings.calibrator_input == "logit" else np.asarray
        return np.asarray(np.clip(to_p(s), settings.eps, 1 - settings.eps), dtype=np.float64)
    return np.asarray(model.predict_proba(s)[:, 1], dtype=np.float64)


def fit_pipelines(
    aggregator_name: str,
    calibrators: Sequence[str],
    settings: Settings,
    v_cal: npt.NDArray[np.int8],
    y_cal: npt.NDArray[np.int8],
    v_eval: npt.NDArray[np.int8],
    protocol: str = "insample",
    roles: npt.NDArray[np.int8] | None = None,
) -> dict[str, npt.NDArray[np.float64]]:
    """Evaluation-item probabilities of ``aggregator_name`` followed by each of ``calibrators``.

    The aggregator is fitted once (under ``protocol``, see :func:`protocol_scores`); each calibrator is fitted on
    its training scores and applied to the evaluation scores.
    """
    s_train, y_train, s_eval = protocol_scores(aggregator_name, settings, v_cal, y_cal, v_eval, protocol, roles)
    return {name: calibrate(name, settings, s_train, y_train, {"eval": s_eval})["eval"] for name in calibrators}


def conformal_sets(
    aggregator_name: str,
    calibrator_name: str,
    settings: Settings,
    parts: Sequence[tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]]],
    v_eval: npt.NDArray[np.int8],
    alphas: Sequence[float],
) -> dict[float, npt.NDArray[np.bool_]]:
    """Split-conformal prediction sets of the evaluation items, one per miscoverage level (spec §3.5, §5.2).

    ``parts`` holds three disjoint ``(votes, labels)`` slices of the calibration part: the aggregator is fitted on
    the first, the calibrator on the aggregator's scores of the second, and the conformal threshold on the
    calibrated probabilities of the third.
    """
    (v_agg, y_agg), (v_cal, y_cal), (v_conf, y_conf) = parts
    _, s_cal, model = aggregate(aggregator_name, settings, v_agg, y_agg, v_cal)
    fitted = calibrator(calibrator_name, settings).fit(s_cal, y_cal)
    p_conf = fitted.predict_proba(step1_scores(aggregator_name, model, v_conf, settings))[:, 1]
    p_eval = fitted.predict_proba(step1_scores(aggregator_name, model, v_eval, settings))[:, 1]
    return {alpha: SplitConformal(alpha=alpha).fit(p_conf, y_conf).predict_set(p_eval) for alpha in alphas}


def protocol_roles(
    protocol: str, keys: npt.NDArray[np.int64], seed: int, *, nested_fraction: float = 0.7, folds: int = 5
) -> npt.NDArray[np.int8] | None:
    """Role of every calibration item under ``protocol`` (keyed by group, seeded by the split).

    ``insample``: None. ``nested``: 0 = aggregator part, 1 = calibrator part. ``crossfit``: fold index 0..K-1.
    """
    if protocol == "insample":
        return None
    if protocol == "nested":
        return assign_blocks(keys, seed + PROTOCOL_SEED_OFFSET, [nested_fraction, 1.0 - nested_fraction])
    if protocol == "crossfit":
        return assign_blocks(keys, seed + PROTOCOL_SEED_OFFSET, [1.0 / folds] * folds)
    raise ConfigError(f"calib_scores: unknown protocol {protocol!r}; known: {list(PROTOCOLS)}")


def protocol_scores(
    name: str,
    settings: Settings,
    v_cal: npt.NDArray[np.int8],
    y_cal: npt.NDArray[np.int8],
    v_eval: npt.NDArray[np.int8],
    protocol: str = "insample",
    roles: npt.NDArray[np.int8] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8], npt.NDArray[np.float64]]:
    """(calibrator training scores, their labels, evaluation scores) of aggregator ``name`` under ``protocol``.

    ``insample`` (spec §5.1): aggregator fitted on all calibration items, its scores there train the calibrator.
    ``nested`` (§5.2): aggregator on role 0, calibrator on its out-of-sample scores of role 1; evaluation items
    scored by the role-0 aggregator. ``crossfit`` (§5.2 extension): every fold scored by the aggregator fitted on
    the other folds; evaluation items by the aggregator fitted on all calibration items.
    """
    if protocol == "insample":
        s_fit, s_eval, _ = aggregate(name, settings, v_cal, y_cal, v_eval)
        return s_fit, y_cal, s_eval
    if roles is None:
        raise ConfigError(f"calib_scores: protocol {protocol!r} needs the item roles (protocol_roles)")
    if protocol == "nested":
        agg, cal = roles == 0, roles == 1
        _, s_new, _ = aggregate(name, settings, v_cal[agg], y_cal[agg], np.concatenate([v_cal[cal], v_eval]))
        n_cal = int(cal.sum())
        return s_new[:n_cal], y_cal[cal], s_new[n_cal:]
    if protocol == "crossfit":
        oof = np.empty(y_cal.size)
        for fold in np.unique(roles):
            held = roles == fold
            _, oof[held], _ = aggregate(name, settings, v_cal[~held], y_cal[~held], v_cal[held])
        _, s_eval, _ = aggregate(name, settings, v_cal, y_cal, v_eval)
        return oof, y_cal, s_eval
    raise ConfigError(f"calib_scores: unknown protocol {protocol!r}; known: {list(PROTOCOLS)}")
