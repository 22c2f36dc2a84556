r"""The calibration earlier versions saved (``<run>/model/calibration.json``), read as a binary pipeline.

The model format family (:mod:`judgecal_dist.models`) supersedes this file; it is still read (and converted to a
``judgecal.binary-pipeline/v1`` pipeline with the same numbers) so that runs of earlier versions stay scorable:
:func:`judgecal_dist.models.files.model_from_dict` calls :func:`from_dict` for a document of this format.

Format ``judgecal.calibration/v2`` (written by ``_model`` in :mod:`judgecal_dist.studies.inclusion.study`): the one-coin
aggregator (``judge_ids``, log-odds ``weights``, ``class_prior``), the beta calibrator (``a``, ``b``, ``c``),
split-conformal thresholds per alpha (:meth:`~judgecal_dist.methods.calibration.conformal.SplitConformal.to_dict`), the
clipping ``eps`` and the ``vote_codes``. The optional ``calibrator_input`` says what the calibrator was fitted
on: ``"probability"`` (absent = this; the aggregator's :math:`P(A)`, clipped to :math:`[\varepsilon,
1-\varepsilon]`) or ``"logit"`` (the aggregator's unclipped log-odds :math:`t`, so that the beta features are
:math:`\ln s = \log\sigma(t)` and :math:`-\ln(1-s) = -\log\sigma(-t)`, finite for any :math:`t`).

:func:`from_dict` rebuilds :class:`~judgecal_dist.methods.aggregation.aggregate.OneCoin`,
:class:`~judgecal_dist.methods.calibration.beta.BetaCalibration` and
:class:`~judgecal_dist.methods.calibration.conformal.SplitConformal` instances with their fitted attributes, so scoring
runs exactly the code that the study evaluated.

Every number is checked when the file is read (a hand-edited or truncated file is refused with the file and the
key, never scored): judge ids non-empty and distinct, weights and calibrator parameters finite, the class prior
in (0, 1), ``eps`` in (0, 1/2), conformal levels in (0, 1) with thresholds in [0, 1] (or ``inf``). The optional
``fitted_on.item_ids`` (with ``fitted_on.dataset``) lists the items the model was fitted on, so scored rows can
say whether the model has seen them (``in_calibration``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import VOTE_CODING
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.pipeline import CALIBRATOR_INPUTS, Settings
from judgecal_dist.models.binary import BinaryPipeline, from_document, to_document
from judgecal_dist.models.bounds import checked
from judgecal_dist.models.documents import LEGACY_FORMAT, BinaryPipelineDoc

__all__ = ["FORMAT", "from_dict"]

FORMAT = LEGACY_FORMAT


def _require(state: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in state:
        raise InputError(f"{where}: missing key {key!r}")
    return state[key]


def _section(state: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = _require(state, key, where)
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: {key}: expected an object, got {type(value).__name__}")
    return value


def _number(state: Mapping[str, Any], key: str, where: str, low: float = -math.inf, high: float = math.inf) -> float:
    """A finite number strictly between ``low`` and ``high`` (the bounds are open when finite)."""
    value = _require(state, key, where)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{where}: {key}: expected a finite number, got {value!r}")
    if not low < value < high:
        raise InputError(f"{where}: {key}: must be in ({low:g}, {high:g}), got {value!r}")
    return float(value)


def _weights(agg: Mapping[str, Any], n_judges: int, where: str) -> npt.NDArray[np.float64]:
    raw = _require(agg, "weights", where)
    ok = isinstance(raw, list) and all(isinstance(w, int | float) and not isinstance(w, bool) for w in raw)
    weights = np.asarray(raw if ok else [], dtype=np.float64)
    if not ok or weights.shape != (n_judges,) or not np.isfinite(weights).all():
        bad = [w for w in raw if not (isinstance(w, int | float) and math.isfinite(w))][:3] if ok else raw
        raise InputError(
            f"{where}: weights: expected {n_judges} finite numbers (one per judge), got "
            f"{len(raw) if isinstance(raw, list) else type(raw).__name__} (e.g. {bad!r})"
        )
    return weights


def _conformal(state: Mapping[str, Any], source: str) -> list[SplitConformal]:
    entries = _require(state, "conformal", source)  # never a silent "no sets": the fit wrote its thresholds
    if not isinstance(entries, list):
        raise InputError(f"{source}: conformal: expected a list, got {type(entries).__name__}")
    out = []
    for i, entry in enumerate(entries):
        where = f"{source}: conformal[{i}]"
        if not isinstance(entry, Mapping):
            raise InputError(f"{where}: expected an object, got {type(entry).__name__}")
        _number(entry, "alpha", where, 0.0, 1.0)
        try:
            out.append(SplitConformal.from_dict(entry))
        except (InputError, TypeError, ValueError) as err:  # from_dict names itself, not the file
            raise InputError(f"{where}: {str(err).removeprefix('SplitConformal.from_dict: ')}") from err
    return out


def _fitted_items(fitted_on: Mapping[str, Any], source: str) -> tuple[str | None, tuple[str, ...] | None]:
    ids = fitted_on.get("item_ids")
    if ids is None:
        return None, None
    where = f"{source}: fitted_on"
    dataset = fitted_on.get("dataset")
    if not isinstance(dataset, str) or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InputError(f"{where}: item_ids: expected a list of item id strings with the dataset name")
    return dataset, tuple(ids)


def _header(state: Mapping[str, Any], source: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The aggregator and calibrator sections of a v2 document (format and kinds checked)."""
    fmt = state.get("format") if isinstance(state, Mapping) else None
    if fmt != FORMAT:
        raise InputError(f"{source}: format: expected {FORMAT!r}, got {fmt!r} (rerun the study with this version)")
    agg = _section(state, "aggregator", source)
    cal = _section(state, "calibrator", source)
    if agg.get("name") != "one_coin" or cal.get("name") != "beta":
        raise InputError(
            f"{source}: aggregator/calibrator: only one_coin + beta can be scored, got "
            f"{agg.get('name')!r} + {cal.get('name')!r}"
        )
    return agg, cal


def _judges(agg: Mapping[str, Any], source: str) -> list[str]:
    judges = _require(agg, "judge_ids", f"{source}: aggregator")
    if not isinstance(judges, list) or not judges or not all(isinstance(j, str) for j in judges):
        raise InputError(f"{source}: aggregator: judge_ids: expected a non-empty list of strings, got {judges!r:.80}")
    repeated = sorted({j for j in judges if judges.count(j) > 1})
    if repeated:
        raise InputError(
            f"{source}: aggregator: judge_ids: {len(repeated)} judge(s) listed twice (e.g. "
            f"{repeated[:3]}); each judge has one weight"
        )
    return judges


def _fitted_on(state: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    """The ``fitted_on`` section, once the vote codes and the orientation are ones score can read."""
    if state.get("vote_codes", VOTE_CODING) != VOTE_CODING:
        raise InputError(f"{source}: vote_codes: expected {VOTE_CODING}, got {state.get('vote_codes')!r}")
    fitted_on = state.get("fitted_on") or {}
    if not isinstance(fitted_on, Mapping):
        raise InputError(f"{source}: fitted_on: expected an object, got {type(fitted_on).__name__}")
    if fitted_on.get("orientation", "natural") == "gold_positive":
        # gold_positive recodes verdicts as "agrees with the label": its weights cannot read A/B verdicts.
        raise InputError(
            f"{source}: fitted_on: orientation: a gold_positive model cannot score A/B verdicts; "
            "rerun the study with orientation: natural (or randomized)"
        )
    return fitted_on


def _beta(cal: Mapping[str, Any], eps: float, calibrator_input: str, source: str) -> BetaCalibration:
    penalty = _number(cal, "penalty", f"{source}: calibrator", 0.0) if "penalty" in cal else 0.01
    beta = BetaCalibration(penalty=penalty, l1_ratio=cal.get("l1_ratio", 0.5), eps=eps, score_input=calibrator_input)
    beta.a_, beta.b_, beta.c_ = (_number(cal, k, f"{source}: calibrator") for k in ("a", "b", "c"))
    beta.fallback_, beta.n_iter_, beta.loss_history_ = None, 0, []
    return beta


def from_dict(state: Mapping[str, Any], *, source: str = "calibration", digest: str = "") -> BinaryPipeline:
    """Rebuild the fitted estimators of a ``judgecal.calibration/v2`` artifact.

    Raises
    ------
    InputError
        Wrong ``format`` (or version), a name other than one-coin / beta, a missing key, judge ids that are not
        distinct strings, weights that are not finite or of the wrong length, a probability out of (0, 1), a
        calibrator parameter that is not finite, a conformal level out of (0, 1) or threshold out of [0, 1],
        unknown ``calibrator_input`` or ``vote_codes`` other than the v2 coding.
    """
    agg, cal = _header(state, source)
    judges = _judges(agg, source)
    weights = _weights(agg, len(judges), f"{source}: aggregator")
    prior = _number(agg, "class_prior", f"{source}: aggregator", 0.0, 1.0)
    eps = _number(state, "eps", source, 0.0, 0.5)
    fitted_on = _fitted_on(state, source)
    calibrator_input = state.get("calibrator_input", "probability")
    if calibrator_input not in CALIBRATOR_INPUTS:
        raise InputError(f"{source}: calibrator_input: expected one of {CALIBRATOR_INPUTS}, got {calibrator_input!r}")
    fitted_dataset, fitted_items = _fitted_items(fitted_on, source)

    aggregator = OneCoin(alpha0=agg.get("alpha0", 1.0), beta0=agg.get("beta0", 1.0))
    aggregator.weights_, aggregator.prior_ = weights, prior
    aggregator.n_features_in_, aggregator.classes_ = len(judges), np.array([0, 1])
    beta = _beta(cal, eps, calibrator_input, source)
    conformal = _conformal(state, source)
    settings = Settings(eps=eps, calibrator_input=calibrator_input)
    converted = to_document(
        judge_ids=judges,
        aggregator_name="one_coin",
        aggregator=aggregator,
        calibrator_name="beta",
        calibrator=beta,
        settings=settings,
        conformal=conformal,
        fitted_on={"dataset": fitted_dataset, "item_ids": list(fitted_items) if fitted_items else None},
    )
    # the converted numbers meet the pipeline's ranges (refused as any model file is)
    return from_document(checked(BinaryPipelineDoc, converted, source), converted, source=source, digest=digest)
