r"""``judgecal.binary-pipeline/v1``: a fitted panel pipeline (aggregator -> calibrator -> conformal sets) as data.

:func:`to_document` writes any aggregator and calibrator of :mod:`judgecal_dist.methods.pipeline` (majority,
accuracy-weighted, log-odds, one-coin, Dawid-Skene including semi-supervised, stacking; none, Platt, temperature,
beta, isotonic as its breakpoints) with their fitted numbers; :func:`from_document` rebuilds the very estimator
classes with those attributes, so that :meth:`BinaryPipeline.score` runs the code that was evaluated and gives
the same floats (JSON keeps every float64 exactly: Python writes the shortest repr that reads back bit for bit).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict, Unpack

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from judgecal_dist.io.schema import VOTE_CODING
from judgecal_dist.methods.aggregation.aggregate import MajorityVote, OneCoin
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.aggregation.stacking import LogisticStacking
from judgecal_dist.methods.aggregation.votes import check_votes
from judgecal_dist.methods.aggregation.weighted import AccuracyWeighted, LogOddsWeighted
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.calibration.isotonic import IsotonicCalibrator
from judgecal_dist.methods.calibration.platt import PlattCalibrator
from judgecal_dist.methods.calibration.temperature import TemperatureScaling
from judgecal_dist.methods.pipeline import Settings, apply_calibrator, step1_scores
from judgecal_dist.models.documents import BinaryPipelineDoc

__all__ = ["FORMAT", "BinaryPipeline", "PipelineFields", "to_document", "from_document", "pipeline_from_estimators"]

FORMAT = "judgecal.binary-pipeline/v1"
_CLASSES = np.array([0, 1])


@dataclass(frozen=True)
class BinaryPipeline:
    """A fitted binary panel pipeline, ready to score a vote matrix of its judges.

    Attributes
    ----------
    judge_ids : list of str
        The panel's judges, in the column order of the vote matrix the aggregator reads.
    aggregator_name, calibrator_name : str
        Names of :data:`~judgecal_dist.methods.pipeline.AGGREGATORS` / ``CALIBRATORS``.
    aggregator : estimator
    calibrator : estimator or None
        None for ``"none"`` (the aggregator's probability, clipped at ``eps``).
    conformal : list of SplitConformal
    calibrator_input : {"probability", "logit"}
    eps : float
    panel : str
        The panel's name at fit time (``all``, ``top5``, ...).
    ignored_judges : list of str
        Judges seen when fitting but left out of the panel: their verdicts are not an error when scoring.
    source, digest : str
        Where it was read from and the SHA-256 of the file's bytes.
    fitted_dataset, fitted_items
        The dataset and item ids it was fitted on (None when not recorded).
    document : dict
        The exported document (what :func:`judgecal_dist.models.save_model` writes).
    """

    judge_ids: list[str]
    aggregator_name: str
    calibrator_name: str
    aggregator: Any
    calibrator: Any
    conformal: list[SplitConformal]
    calibrator_input: str
    eps: float
    panel: str = "all"
    ignored_judges: list[str] = field(default_factory=list)
    source: str = ""
    digest: str = ""
    fitted_dataset: str | None = None
    fitted_items: tuple[str, ...] | None = None
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    kind = "binary-pipeline"

    @functools.cached_property
    def fitted_item_set(self) -> pa.Array | None:
        """``fitted_items`` as an Arrow value set (built once per process, for ``pyarrow.compute.is_in``)."""
        return None if self.fitted_items is None else pa.array(self.fitted_items, pa.string())

    @property
    def alphas(self) -> list[float]:
        return [float(c.alpha) for c in self.conformal]

    @property
    def name(self) -> str:
        """``aggregator + calibrator @ panel``, as reports name a pipeline."""
        return f"{self.aggregator_name} + {self.calibrator_name} @ {self.panel}"

    @property
    def settings(self) -> Settings:
        return Settings(eps=self.eps, calibrator_input=self.calibrator_input)

    def predict_proba(self, votes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Calibrated :math:`P(A)` of every item of a vote matrix (columns in ``judge_ids`` order)."""
        return self.score(votes)["p"]

    def score(self, votes: npt.ArrayLike) -> dict[str, npt.NDArray[Any]]:
        """Aggregator score, calibrated :math:`P(A)` and conformal sets of the items of a vote matrix.

        Returns
        -------
        dict
            ``score`` (the aggregator's :math:`P(A)`), ``p`` (calibrated :math:`P(A)`), ``sets`` (boolean, shape
            (n_alphas, n_items, 2), columns ``[B, A]``), ``n_votes`` (non-missing votes per item).
        """
        V = check_votes(votes, where=f"{self.source or 'model'}: score", n_judges=len(self.judge_ids))
        score = np.asarray(self.aggregator.predict_proba(V)[:, 1], dtype=np.float64)
        s = step1_scores(self.aggregator_name, self.aggregator, V, self.settings)  # what the calibrator reads
        p = apply_calibrator(self.calibrator, s, self.settings)
        sets = np.stack([c.predict_set(p) for c in self.conformal]) if self.conformal else np.empty((0, len(p), 2))
        return {"score": score, "p": p, "sets": sets, "n_votes": (V >= 0).sum(axis=1).astype(np.int32)}


# -- estimators -> document ---------------------------------------------------------------------------------------
def _floats(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def _aggregator_doc(name: str, model: Any) -> dict[str, Any]:
    if name == "majority":
        return {"name": name}
    if name == "accuracy_weighted":
        return {"name": name, "weights": _floats(model.weights_)}
    if name in ("log_odds", "one_coin"):
        doc = {"name": name, "weights": _floats(model.weights_), "class_prior": float(model.prior_)}
        return doc | ({"alpha0": float(model.alpha0), "beta0": float(model.beta0)} if name == "one_coin" else {})
    if name == "dawid_skene":
        return {
            "name": name,
            "class_prior": float(model.prior_),
            "confusion": np.asarray(model.confusion_, dtype=np.float64).tolist(),
            "eps": float(model.eps),
            "semi_supervised": bool(model.semi_supervised),
            "n_iter": int(getattr(model, "n_iter_", 0)),
        }
    if name == "stacking":
        constant = None if model.model_ is not None else float(model.oof_scores_[0])
        return {
            "name": name,
            "coef": _floats(model.coef_),
            "intercept": float(model.intercept_),
            "constant": constant,
            "C": float(model.C),
        }
    raise ValueError(f"aggregator: no document for {name!r}")


def _calibrator_doc(name: str, model: Any) -> dict[str, Any]:
    if name == "none" or model is None:
        return {"name": "none"}
    if name == "platt":
        if getattr(model, "n_item_features_", None) is not None:
            raise ValueError("calibrator: a Platt calibrator with item features cannot be exported")
        return {"name": name, "slope": float(model.slope_), "intercept": float(model.intercept_)}
    if name == "temperature":
        return {"name": name, "temperature": float(model.temperature_)}
    if name == "beta":
        doc = {"name": name, "a": float(model.a_), "b": float(model.b_), "c": float(model.c_)}
        return doc | {"penalty": float(model.penalty), "l1_ratio": float(model.l1_ratio)}
    if name == "isotonic":
        iso = model.isotonic_
        return {"name": name, "x": _floats(iso.X_thresholds_), "y": _floats(iso.y_thresholds_)}
    raise ValueError(f"calibrator: no document for {name!r}")


class PipelineFields(TypedDict):
    """The keywords of :func:`to_document` and :func:`pipeline_from_estimators` (one list, checked by mypy)."""

    judge_ids: Sequence[str]
    aggregator_name: str
    aggregator: Any
    calibrator_name: str
    calibrator: Any
    settings: Settings
    conformal: NotRequired[Sequence[SplitConformal]]
    panel: NotRequired[str]
    ignored_judges: NotRequired[Sequence[str]]
    fitted_on: NotRequired[dict[str, Any] | None]


def pipeline_from_estimators(**fields: Unpack[PipelineFields]) -> BinaryPipeline:
    """A :class:`BinaryPipeline` of fitted estimators (its ``document`` filled, validated as a reader would).

    This is the one way to export a binary pipeline: fit with :mod:`judgecal_dist.methods.pipeline` (or any of its
    estimators), pass them here with the keywords of :func:`to_document`, then
    :func:`judgecal_dist.models.save_model`.
    """
    doc = to_document(**fields)
    return from_document(BinaryPipelineDoc.model_validate(doc), doc)


def to_document(**fields: Unpack[PipelineFields]) -> dict[str, Any]:
    """The ``judgecal.binary-pipeline/v1`` document of fitted estimators (plain JSON data).

    Parameters
    ----------
    judge_ids : sequence of str
        The panel's judges, in the aggregator's column order.
    aggregator_name, aggregator : str, estimator
        The fitted aggregator and its name (``one_coin``, ``dawid_skene``, ``stacking``, ...).
    calibrator_name, calibrator : str, estimator
        The fitted calibrator and its name (``none``, ``platt``, ``beta``, ``isotonic``, ...).
    settings : Settings
        ``calibrator_input`` and ``eps`` the pipeline was fitted with.
    conformal : sequence of SplitConformal, optional
        Fitted conformal thresholds.
    panel : str, default "all"
    ignored_judges : sequence of str, optional
        Judges of the data the panel leaves out.
    fitted_on : dict, optional
        Provenance (``FittedOn`` fields).
    """
    panel, settings = fields.get("panel", "all"), fields["settings"]
    aggregator_name, calibrator_name = fields["aggregator_name"], fields["calibrator_name"]
    return {
        "format": FORMAT,
        "name": f"{aggregator_name} + {calibrator_name} @ {panel}",
        "panel": panel,
        "judge_ids": [str(j) for j in fields["judge_ids"]],
        "ignored_judges": sorted(str(j) for j in fields.get("ignored_judges", ())),
        "aggregator": _aggregator_doc(aggregator_name, fields["aggregator"]),
        "calibrator": _calibrator_doc(calibrator_name, fields["calibrator"]),
        "calibrator_input": settings.calibrator_input,
        "eps": float(settings.eps),
        "conformal": [c.to_dict() for c in fields.get("conformal", ())],
        "vote_codes": dict(VOTE_CODING),
        "fitted_on": dict(fields.get("fitted_on") or {}),
    }


# -- document -> estimators ---------------------------------------------------------------------------------------
def _aggregator(doc: Any, n_judges: int) -> Any:
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


def _calibrator(doc: Any, settings: Settings) -> Any:
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


def from_document(doc: BinaryPipelineDoc, raw: dict[str, Any], *, source: str = "", digest: str = "") -> BinaryPipeline:
    """Rebuild the fitted estimators of a validated document."""
    settings = Settings(eps=doc.eps, calibrator_input=doc.calibrator_input)
    conformal = [SplitConformal.from_dict(c.model_dump()) for c in doc.conformal]
    fitted = doc.fitted_on
    items = tuple(fitted.item_ids) if fitted.item_ids is not None and fitted.dataset is not None else None
    return BinaryPipeline(
        judge_ids=list(doc.judge_ids),
        aggregator_name=doc.aggregator.name,
        calibrator_name=doc.calibrator.name,
        aggregator=_aggregator(doc.aggregator, len(doc.judge_ids)),
        calibrator=_calibrator(doc.calibrator, settings),
        conformal=conformal,
        calibrator_input=doc.calibrator_input,
        eps=doc.eps,
        panel=doc.panel,
        ignored_judges=list(doc.ignored_judges),
        source=source,
        digest=digest,
        fitted_dataset=fitted.dataset if items is not None else None,
        fitted_items=items,
        document=raw,
    )
