r"""The calibration a study run saved (``<run>/model/calibration.json``), read back as fitted estimators.

Format ``judgecal.calibration/v2`` (written by ``_model`` in :mod:`judgecal_dist.studies.inclusion`): the one-coin
aggregator (``judge_ids``, log-odds ``weights``, ``class_prior``), the beta calibrator (``a``, ``b``, ``c``),
split-conformal thresholds per alpha (:meth:`~judgecal_dist.methods.conformal.SplitConformal.to_dict`), the
clipping ``eps`` and the ``vote_codes``. The optional ``calibrator_input`` says what the calibrator was fitted
on: ``"probability"`` (absent = this; the aggregator's :math:`P(A)`, clipped to :math:`[\varepsilon,
1-\varepsilon]`) or ``"logit"`` (the aggregator's unclipped log-odds :math:`t`, so that the beta features are
:math:`\ln s = \log\sigma(t)` and :math:`-\ln(1-s) = -\log\sigma(-t)`, finite for any :math:`t`).

:func:`from_dict` rebuilds :class:`~judgecal_dist.methods.aggregate.OneCoin`,
:class:`~judgecal_dist.methods.beta.BetaCalibration` and
:class:`~judgecal_dist.methods.conformal.SplitConformal` instances with their fitted attributes, so scoring
runs exactly the code that the study evaluated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.engine.store import RunStore
from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregate import OneCoin
from judgecal_dist.methods.beta import BetaCalibration
from judgecal_dist.methods.conformal import SplitConformal
from judgecal_dist.methods.votes import check_votes

__all__ = ["FORMAT", "MODEL_FILE", "CALIBRATOR_INPUTS", "Calibration", "from_dict", "load_calibration"]

FORMAT = "judgecal.calibration/v2"
MODEL_FILE = "model/calibration.json"
CALIBRATOR_INPUTS = ("probability", "logit")
#: The vote coding every v2 artifact declares (ties are missing, spec 000 §3.0); anything else is refused.
VOTE_CODES = {"A": 1, "B": 0, "missing": -1, "tie": "missing"}


@dataclass(frozen=True)
class Calibration:
    """A fitted default pipeline: one-coin, beta calibration, conformal sets (one per alpha).

    Attributes
    ----------
    judge_ids : list of str
        The model's judges, in the column order of its weights.
    aggregator : OneCoin
    calibrator : BetaCalibration
    conformal : list of SplitConformal
    calibrator_input : {"probability", "logit"}
    eps : float
    source : str
        Where it was read from (for messages and the output's record).
    """

    judge_ids: list[str]
    aggregator: OneCoin
    calibrator: BetaCalibration
    conformal: list[SplitConformal]
    calibrator_input: str
    eps: float
    source: str

    @property
    def alphas(self) -> list[float]:
        return [float(c.alpha) for c in self.conformal]

    def score(self, votes: npt.ArrayLike) -> dict[str, npt.NDArray[Any]]:
        """Aggregator score, calibrated :math:`P(A)` and conformal sets of the items of a vote matrix.

        Returns
        -------
        dict
            ``score`` (one-coin :math:`P(A)`), ``p`` (calibrated :math:`P(A)`), ``sets`` (boolean, shape
            (n_alphas, n_items, 2), columns ``[B, A]``), ``n_votes`` (non-missing votes per item).
        """
        V = check_votes(votes, where=f"{self.source}: score", n_judges=len(self.judge_ids))
        score = self.aggregator.predict_proba(V)[:, 1]
        # The calibrator reads what it was fitted on: the clipped P(A), or the unclipped log-odds (its
        # score_input), logit(pi) + sum_j z_ij psi_j of spec 000 eq. (1).
        s = self.aggregator.decision_function(V) if self.calibrator_input == "logit" else score
        p = self.calibrator.predict_proba(s)[:, 1]
        sets = np.stack([c.predict_set(p) for c in self.conformal]) if self.conformal else np.empty((0, len(p), 2))
        return {"score": score, "p": p, "sets": sets, "n_votes": (V >= 0).sum(axis=1).astype(np.int32)}


def _require(state: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in state:
        raise InputError(f"{where}: missing key {key!r}")
    return state[key]


def _number(state: Mapping[str, Any], key: str, where: str) -> float:
    value = _require(state, key, where)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{where}: {key}: expected a finite number, got {value!r}")
    return float(value)


def from_dict(state: Mapping[str, Any], *, source: str = "calibration") -> Calibration:
    """Rebuild the fitted estimators of a ``judgecal.calibration/v2`` artifact.

    Raises
    ------
    InputError
        Wrong ``format`` (or version), a name other than one-coin / beta, a missing key, judge ids that are not
        distinct strings, weights of the wrong length, a probability out of (0, 1), unknown ``calibrator_input``
        or ``vote_codes`` other than the v2 coding.
    """
    fmt = state.get("format") if isinstance(state, Mapping) else None
    if fmt != FORMAT:
        raise InputError(f"{source}: format: expected {FORMAT!r}, got {fmt!r} (rerun the study with this version)")
    agg = _require(state, "aggregator", source)
    cal = _require(state, "calibrator", source)
    if agg.get("name") != "one_coin" or cal.get("name") != "beta":
        raise InputError(f"{source}: aggregator/calibrator: only one_coin + beta can be scored, got "
                         f"{agg.get('name')!r} + {cal.get('name')!r}")  # fmt: skip
    judges = _require(agg, "judge_ids", f"{source}: aggregator")
    weights = np.asarray(_require(agg, "weights", f"{source}: aggregator"), dtype=np.float64)
    if not judges or not all(isinstance(j, str) for j in judges) or len(set(judges)) != len(judges):
        raise InputError(f"{source}: aggregator: judge_ids: expected distinct strings, got {judges[:3]!r}...")
    if weights.shape != (len(judges),) or not np.isfinite(weights).all():
        raise InputError(f"{source}: aggregator: weights: expected {len(judges)} finite numbers, got {weights.shape}")
    prior = _number(agg, "class_prior", f"{source}: aggregator")
    eps = _number(state, "eps", source)
    if not 0.0 < prior < 1.0 or not 0.0 < eps < 0.5:
        raise InputError(f"{source}: class_prior must be in (0, 1) and eps in (0, 0.5), got {prior}, {eps}")
    if state.get("vote_codes", VOTE_CODES) != VOTE_CODES:
        raise InputError(f"{source}: vote_codes: expected {VOTE_CODES}, got {state.get('vote_codes')!r}")
    fitted_on = state.get("fitted_on") or {}
    if fitted_on.get("orientation", "natural") == "gold_positive":
        # gold_positive recodes verdicts as "agrees with the label": its weights cannot read A/B verdicts.
        raise InputError(f"{source}: fitted_on: orientation: a gold_positive model cannot score A/B verdicts; "
                         "rerun the study with orientation: natural (or randomized)")  # fmt: skip
    calibrator_input = state.get("calibrator_input", "probability")
    if calibrator_input not in CALIBRATOR_INPUTS:
        raise InputError(f"{source}: calibrator_input: expected one of {CALIBRATOR_INPUTS}, got {calibrator_input!r}")

    aggregator = OneCoin(alpha0=agg.get("alpha0", 1.0), beta0=agg.get("beta0", 1.0))
    aggregator.weights_, aggregator.prior_ = weights, prior
    aggregator.n_features_in_, aggregator.classes_ = len(judges), np.array([0, 1])
    beta = BetaCalibration(
        penalty=cal.get("penalty", 0.01), l1_ratio=cal.get("l1_ratio", 0.5), eps=eps, score_input=calibrator_input
    )
    beta.a_, beta.b_, beta.c_ = (_number(cal, k, f"{source}: calibrator") for k in ("a", "b", "c"))
    beta.fallback_, beta.n_iter_, beta.loss_history_ = None, 0, []
    conformal = [SplitConformal.from_dict(c) for c in state.get("conformal", [])]
    return Calibration(
        judge_ids=list(judges),
        aggregator=aggregator,
        calibrator=beta,
        conformal=conformal,
        calibrator_input=calibrator_input,
        eps=eps,
        source=source,
    )


def load_calibration(run_url: str, *, storage_options: Mapping[str, Any] | None = None) -> Calibration:
    """The calibration of a committed run folder (one with ``_SUCCESS``), or of a ``calibration.json`` URL.

    Raises
    ------
    InputError
        No such run or file, an unfinished run, a file that is not JSON, or any check of :func:`from_dict`.
    """
    options = dict(storage_options or {})
    if run_url.rstrip("/").endswith(".json"):
        folder, name = run_url.rstrip("/").rsplit("/", 1)
        store = RunStore(folder, storage_options=options)
    else:
        store, name = RunStore(run_url, storage_options=options), MODEL_FILE
        if not store.exists(name):
            raise InputError(f"{run_url}: {name}: not found (not a run folder with a saved calibration)")
        store.require_success()
    try:
        state = json.loads(store.read_bytes(name).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{store.url_of(name)}: not valid JSON ({err})") from err
    return from_dict(state, source=store.url_of(name))
