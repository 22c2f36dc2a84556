r"""``judgecal.binary-pipeline/v1``: a fitted panel pipeline (aggregator -> calibrator -> conformal sets) as data.

:func:`to_document` writes any aggregator and calibrator of :mod:`judgecal_dist.methods.pipeline` (majority,
accuracy-weighted, log-odds, one-coin, Dawid-Skene including semi-supervised, stacking; none, Platt, temperature,
beta, isotonic as its breakpoints) with their fitted numbers; :func:`from_document` reads them back, and
:meth:`BinaryPipeline.score` applies them with numpy (:mod:`judgecal_dist.methods.fitted`, the numeric path the
estimators share), so that scoring imports no sklearn. The estimator classes themselves, with those attributes,
are rebuilt only when asked for (:attr:`BinaryPipeline.aggregator`, ``.calibrator``, ``.conformal``); tests pin
both to the same floats (JSON keeps every float64 exactly: Python writes the shortest repr that reads back bit for
bit).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, Unpack

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from judgecal_dist.io.schema import VOTE_CODING
from judgecal_dist.methods.fitted import FittedAggregator, FittedCalibrator, FittedConformal, check_votes
from judgecal_dist.models.documents import BinaryPipelineDoc

if TYPE_CHECKING:
    from judgecal_dist.methods.calibration.conformal import SplitConformal
    from judgecal_dist.methods.pipeline import Settings

__all__ = ["FORMAT", "BinaryPipeline", "PipelineFields", "to_document", "from_document", "pipeline_from_estimators"]

FORMAT = "judgecal.binary-pipeline/v1"


@dataclass(frozen=True)
class BinaryPipeline:
    """A fitted binary panel pipeline, ready to score a vote matrix of its judges.

    Attributes
    ----------
    judge_ids : list of str
        The panel's judges, in the column order of the vote matrix the aggregator reads.
    aggregator_name, calibrator_name : str
        Names of :data:`~judgecal_dist.methods.pipeline.AGGREGATORS` / ``CALIBRATORS``.
    step1 : FittedAggregator
    step2 : FittedCalibrator
        The fitted numbers, applied with numpy (``none``: the aggregator's probability, clipped at ``eps``).
    thresholds : list of FittedConformal
        The conformal thresholds, one per level.
    calibrator_input : {"probability", "logit"}
    eps : float
    panel : str
        The panel's name at fit time (``all``, ``top5``, ...).
    ignored_judges : list of str
        Judges seen when fitting but left out of the panel: their verdicts are not an error when scoring.
    source, digest : str
        Where it was read from and the SHA-256 of the file's bytes.
    fitted_dataset, fitted_items
        The dataset (None: any) and item ids it was fitted on (``fitted_items`` None when not recorded;
        :meth:`~judgecal_dist.models.documents.FittedOn.calibration_items`).
    document : dict
        The exported document (what :func:`judgecal_dist.models.save_model` writes).
    aggregator, calibrator, conformal
        The sklearn estimators with the fitted numbers (built on first use; the calibrator is None for ``none``).
    """

    judge_ids: list[str]
    aggregator_name: str
    calibrator_name: str
    step1: FittedAggregator
    step2: FittedCalibrator
    thresholds: list[FittedConformal]
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

    @functools.cached_property
    def aggregator(self) -> Any:
        """The fitted aggregator estimator (sklearn class; imported on first use)."""
        from judgecal_dist.models.binary_estimators import aggregator_estimator

        return aggregator_estimator(self._validated.aggregator, len(self.judge_ids))

    @functools.cached_property
    def calibrator(self) -> Any:
        """The fitted calibrator estimator, None for ``none`` (sklearn class; imported on first use)."""
        from judgecal_dist.models.binary_estimators import calibrator_estimator

        return calibrator_estimator(self._validated.calibrator, self.settings)

    @functools.cached_property
    def conformal(self) -> list[SplitConformal]:
        """The fitted :class:`~judgecal_dist.methods.calibration.conformal.SplitConformal` of each level."""
        from judgecal_dist.models.binary_estimators import conformal_estimators

        return conformal_estimators([t.to_dict() for t in self.thresholds])

    @functools.cached_property
    def _validated(self) -> BinaryPipelineDoc:
        return BinaryPipelineDoc.model_validate(self.document)

    @property
    def alphas(self) -> list[float]:
        return [float(c.alpha) for c in self.thresholds]

    @property
    def name(self) -> str:
        """``aggregator + calibrator @ panel``, as reports name a pipeline."""
        return f"{self.aggregator_name} + {self.calibrator_name} @ {self.panel}"

    @property
    def settings(self) -> Settings:
        from judgecal_dist.methods.pipeline import Settings

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
        score = self.step1.proba(V)
        # what the calibrator reads: the same probability, or the log-odds on the logit scale
        s = score if self.calibrator_input != "logit" else self.step1.step1(V, self.calibrator_input, self.eps)
        p = self.step2.proba(s)
        sets = np.stack([c.predict_set(p) for c in self.thresholds]) if self.thresholds else np.empty((0, len(p), 2))
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


def _fitted_aggregator(doc: Any) -> FittedAggregator:
    """The numbers of an aggregator document (:class:`~judgecal_dist.methods.fitted.FittedAggregator`)."""
    numbers = doc.model_dump()

    def array(key: str) -> npt.NDArray[np.float64]:
        return np.array(numbers[key], dtype=np.float64)

    return FittedAggregator(
        name=doc.name,
        prior=float(numbers.get("class_prior", 0.5)),
        eps=float(numbers.get("eps", 0.0)),
        intercept=float(numbers.get("intercept", 0.0)),
        constant=numbers.get("constant"),
        **{key: array(key) for key in ("weights", "confusion", "coef") if key in numbers},
    )


def from_document(doc: BinaryPipelineDoc, raw: dict[str, Any], *, source: str = "", digest: str = "") -> BinaryPipeline:
    """The pipeline of a validated document (its numbers applied with numpy; estimators on demand)."""
    numbers = {k: v for k, v in doc.calibrator.model_dump().items() if k != "name"}
    for key in ("x", "y"):  # isotonic breakpoints
        if key in numbers:
            numbers[key] = np.array(numbers[key], dtype=np.float64)
    step2 = FittedCalibrator(doc.calibrator.name, doc.calibrator_input, float(doc.eps), numbers)
    fitted_dataset, fitted_items = doc.fitted_on.calibration_items()
    return BinaryPipeline(
        judge_ids=list(doc.judge_ids),
        aggregator_name=doc.aggregator.name,
        calibrator_name=doc.calibrator.name,
        step1=_fitted_aggregator(doc.aggregator),
        step2=step2,
        thresholds=[FittedConformal.from_dict(c.model_dump()) for c in doc.conformal],
        calibrator_input=doc.calibrator_input,
        eps=doc.eps,
        panel=doc.panel,
        ignored_judges=list(doc.ignored_judges),
        source=source,
        digest=digest,
        fitted_dataset=fitted_dataset,
        fitted_items=fitted_items,
        document=raw,
    )
