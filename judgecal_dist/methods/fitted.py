r"""Fitted pipeline numbers applied with numpy alone: the vote matrix check, each aggregator's and calibrator's
prediction from its fitted numbers, and split-conformal sets.

The estimators of :mod:`judgecal_dist.methods.aggregation` and :mod:`judgecal_dist.methods.calibration` are
sklearn classes (fitting, ``get_params``, ``clone``); applying an exported model needs only their fitted numbers.
This module imports numpy and ``scipy.special`` and nothing of sklearn or ``scipy.stats`` (about a second of
imports), so that ``judgecal score`` and Spark's Python workers apply a model without them. The calibrators'
``predict_proba`` call the functions here; the aggregators' numeric forms are pinned to the estimators'
``predict_proba`` and ``decision_function`` by tests (within 1e-12; the same floats in practice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit, log_expit, logit

from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import MISSING_CODE as MISSING
from judgecal_dist.io.schema import VOTE_A, VOTE_B

__all__ = [
    "check_votes",
    "signed_votes",
    "proba_from_logit",
    "probability_logit",
    "beta_log_features",
    "lac_sets",
    "FittedAggregator",
    "FittedCalibrator",
    "FittedConformal",
]

#: Aggregators whose log-odds are exact (a weighted vote, Dawid-Skene, stacking's linear predictor).
LOG_ODDS_AGGREGATORS = ("log_odds", "one_coin", "dawid_skene")


def check_votes(V: npt.ArrayLike, *, where: str, n_judges: int | None = None) -> npt.NDArray[np.int8]:
    """Return ``V`` as a C-contiguous int8 matrix after checking its shape and codes.

    Parameters
    ----------
    V : array-like of shape (n_items, n_judges)
        Codes in {-1, 0, 1}; any integer, float or bool dtype holding only those values is accepted.
    where : str
        Caller named in error messages (e.g. ``"OneCoin.fit"``).
    n_judges : int, optional
        Required number of columns (the panel the model was fitted on).

    Returns
    -------
    ndarray of int8, shape (n_items, n_judges)

    Raises
    ------
    InputError
        If ``V`` is not 2-D, has no items or no judges, has the wrong number of judges, or holds a code outside
        {-1, 0, 1} (NaN included).

    Examples
    --------
    >>> check_votes([[1, 0, -1]], where="demo")
    array([[ 1,  0, -1]], dtype=int8)
    >>> check_votes([[1, 2]], where="demo")
    Traceback (most recent call last):
    ...
    judgecal_dist.errors.InputError: demo: V: codes must be 1 (A), 0 (B) or -1 (missing) (1 cells, e.g. [0, 1]=2)
    """
    columns = {str(c) for c in getattr(V, "columns", ())}
    if {"task", "worker", "label"} <= columns or {"item_id", "judge_id", "verdict"} <= columns:
        raise InputError(
            f"{where}: V: a long frame of verdicts ({', '.join(sorted(columns)[:4])}), not a vote matrix: use "
            "judgecal_dist.CalibratedAggregator on it, or judgecal_dist.vote_matrix(frame) for the matrix"
        )
    arr = np.asarray(V)
    if arr.ndim != 2:
        hint = "; for a single item use V.reshape(1, -1)" if arr.ndim == 1 else ""
        raise InputError(f"{where}: V: expected a 2-D vote matrix (n_items, n_judges), got shape {arr.shape}{hint}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"{where}: V: empty vote matrix of shape {arr.shape}; need >= 1 item and >= 1 judge")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InputError(f"{where}: V: expected numeric vote codes in {{-1, 0, 1}}, got dtype {arr.dtype}")
    # int8 codes (the codec's dense votes): one range test instead of a set lookup per cell
    bad = (arr < MISSING) | (arr > VOTE_A) if arr.dtype == np.int8 else ~np.isin(arr, (MISSING, VOTE_B, VOTE_A))
    if bad.any():
        cells = np.argwhere(bad)[:3]
        examples = ", ".join(f"[{i}, {j}]={arr[i, j].item()!r}" for i, j in cells)
        raise InputError(
            f"{where}: V: codes must be 1 (A), 0 (B) or -1 (missing) ({int(bad.sum())} cells, e.g. {examples})"
        )
    if n_judges is not None and arr.shape[1] != n_judges:
        raise InputError(f"{where}: V: has {arr.shape[1]} judges (columns), but the model was fitted on {n_judges}")
    return np.ascontiguousarray(arr, dtype=np.int8)


def signed_votes(V: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
    r"""The :math:`\pm 1` vote matrix :math:`z_{ij} = 2V_{ij} - 1`, with :math:`z_{ij} = 0` for missing votes.

    ``V`` must already be checked by :func:`check_votes`. The result is float64 so that ``signed_votes(V) @ w``
    is a single BLAS matrix-vector product.

    Examples
    --------
    >>> signed_votes(np.array([[1, 0, -1]], dtype=np.int8))
    array([[ 1., -1.,  0.]])
    """
    return np.where(V == MISSING, 0.0, 2.0 * V - 1.0)


def proba_from_logit(t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``[sigma(-t), sigma(t)]``: P(Y=0) keeps full relative precision when P(Y=1) is near 1."""
    return np.column_stack([expit(-t), expit(t)])


def probability_logit(p: npt.NDArray[np.float64], eps: float) -> npt.NDArray[np.float64]:
    """The logit of a probability clipped at ``eps`` (what a vote-fraction aggregator gives a logit calibrator)."""
    # eps = 0 still keeps the logit finite: float64 resolves P(Y=1) up to 1 - 2^-53 (logit 36.7).
    lo = max(eps, np.finfo(np.float64).tiny)
    return np.asarray(logit(np.clip(p, lo, min(1.0 - eps, 1.0 - 2.0**-53))), dtype=np.float64)


def beta_log_features(log_s: npt.NDArray[np.float64], log_1ms: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Columns :math:`(\\ln s, -\\ln(1-s), 1)` of beta calibration, so that its logit is ``F @ (a, b, c)``."""
    return np.column_stack([log_s, -log_1ms, np.ones_like(log_s)])


def lac_sets(p: npt.NDArray[np.float64], threshold: float) -> npt.NDArray[np.bool_]:
    """Split-conformal sets of the LAC score :math:`1 - \\hat p_y`, columns ``[y=0, y=1]`` (True: in the set)."""
    return np.asarray(1.0 - np.column_stack([1.0 - p, p]) <= threshold)


def _fraction(num: npt.NDArray[np.float64], den: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.divide(num, den, out=np.full(num.shape, 0.5), where=den > 0)


@dataclass(frozen=True)
class FittedAggregator:
    """An exported aggregator's fitted numbers, applied to a checked vote matrix (:func:`check_votes`).

    ``name`` is one of ``majority``, ``accuracy_weighted``, ``log_odds``, ``one_coin``, ``dawid_skene``,
    ``stacking``; the numbers are those the estimator of that name fitted (``weights`` of the weighted votes,
    ``prior`` and ``confusion`` (J, 2, 2) of Dawid-Skene with its ``eps``, ``coef`` and ``intercept`` of
    stacking, or its ``constant`` probability after a one-label fallback).
    """

    name: str
    weights: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    prior: float = 0.5
    confusion: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 2, 2)))
    eps: float = 0.0
    coef: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    intercept: float = 0.0
    constant: float | None = None

    def proba(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        """:math:`P(A)` of each item (the estimator's ``predict_proba(V)[:, 1]``)."""
        if self.name == "majority":
            return _fraction((votes == VOTE_A).sum(axis=1, dtype=np.int64), (votes != MISSING).sum(axis=1))
        if self.name == "accuracy_weighted":
            num = (votes == VOTE_A).astype(np.float64) @ self.weights
            return _fraction(num, (votes != MISSING).astype(np.float64) @ self.weights)
        if self.name == "dawid_skene":
            d = self._ds_log_joint(votes)
            return np.asarray(expit(d[:, 1] - d[:, 0]), dtype=np.float64)
        if self.name == "stacking" and self.constant is not None:
            return np.full(votes.shape[0], float(self.constant))
        return np.asarray(expit(self.log_odds(votes)), dtype=np.float64)

    def log_odds(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        """Exact log-odds of the log-odds models (the estimator's ``decision_function``)."""
        if self.name == "dawid_skene":
            eps = self.eps
            log_conf = np.log(np.clip(self.confusion, eps, 1.0 - eps))  # [j, y, v]
            w_a = log_conf[:, 1, 1] - log_conf[:, 0, 1]  # a vote for A (v = 1)
            w_b = log_conf[:, 1, 0] - log_conf[:, 0, 0]  # a vote for B (v = 0)
            prior = np.clip(self.prior, eps, 1.0 - eps)
            t = np.log(prior) - np.log1p(-prior) + (votes == VOTE_A) @ w_a + (votes == VOTE_B) @ w_b
            return np.asarray(t, dtype=np.float64)
        if self.name == "stacking":  # sklearn's linear predictor: X @ coef.T + intercept
            return np.asarray((signed_votes(votes) @ self.coef[:, None] + self.intercept).ravel(), dtype=np.float64)
        return np.asarray(logit(self.prior) + signed_votes(votes) @ self.weights, dtype=np.float64)

    def _ds_log_joint(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        r""":math:`\log\pi_y + \sum_{j \in S_i} \log\Pi^{(j)}_{y,V_{ij}}` for y = 0, 1 (one E-step), as fitted."""
        eps, n_judges = self.eps, votes.shape[1]
        indicators = np.empty((2 * n_judges, votes.shape[0]))  # row v*J + j: 1[V_ij = v]
        np.equal(votes.T, VOTE_B, out=indicators[:n_judges])
        np.equal(votes.T, VOTE_A, out=indicators[n_judges:])
        log_conf = np.log(np.clip(self.confusion, eps, 1.0 - eps))  # [j, y, v]
        W = log_conf.transpose(2, 0, 1).reshape(-1, 2)
        log_prior = np.log(np.clip([1.0 - self.prior, self.prior], eps, 1.0 - eps))
        return np.asarray((W.T @ indicators).T + log_prior, dtype=np.float64)

    def step1(self, votes: npt.NDArray[np.int8], calibrator_input: str, eps: float) -> npt.NDArray[np.float64]:
        """What the calibrator reads (:func:`judgecal_dist.methods.pipeline.step1_scores`): :math:`P(A)`, or on
        the logit scale the exact log-odds of the log-odds models and the clipped logit of a vote fraction."""
        if calibrator_input != "logit":
            return self.proba(votes)
        if self.name in LOG_ODDS_AGGREGATORS or (self.name == "stacking" and self.constant is None):
            return self.log_odds(votes)
        return probability_logit(self.proba(votes), eps)


@dataclass(frozen=True)
class FittedCalibrator:
    """An exported calibrator's fitted numbers (``none``, ``platt``, ``temperature``, ``beta``, ``isotonic``),
    applied to Step-1 scores on ``score_input``'s scale (probabilities are clipped at ``eps`` first)."""

    name: str
    score_input: str
    eps: float
    numbers: dict[str, Any] = field(default_factory=dict)

    def proba(self, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Calibrated :math:`P(A)` (the estimator's ``predict_proba(s)[:, 1]``)."""
        eps, logit_input = self.eps, self.score_input == "logit"
        if self.name == "none":
            return np.asarray(np.clip(expit(s) if logit_input else s, eps, 1 - eps), dtype=np.float64)
        s = s if logit_input else np.clip(s, eps, 1.0 - eps)
        n = self.numbers
        if self.name == "isotonic":  # sklearn's IsotonicRegression(out_of_bounds="clip"): linear interpolation
            x, y = n["x"], n["y"]
            p = np.interp(np.clip(s, x[0], x[-1]), x, y) if len(x) > 1 else np.full(s.shape, y[0])
            return np.asarray(np.clip(p, eps, 1.0 - eps), dtype=np.float64)
        if self.name == "beta":
            log_s, log_1ms = (log_expit(s), log_expit(-s)) if logit_input else (np.log(s), np.log1p(-s))
            t = beta_log_features(log_s, log_1ms) @ np.array([n["a"], n["b"], n["c"]])
        else:
            u = s if logit_input else np.asarray(logit(s), dtype=np.float64)
            t = u / n["temperature"] if self.name == "temperature" else n["slope"] * u + n["intercept"]
        return np.asarray(expit(t), dtype=np.float64)


@dataclass(frozen=True)
class FittedConformal:
    """A split-conformal threshold as exported (``threshold`` None: :math:`+\\infty`, every label in the set)."""

    alpha: float
    threshold: float
    rank: int = 0
    n_calibration: int = 0

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> FittedConformal:
        threshold = math.inf if state["threshold"] is None else float(state["threshold"])
        return cls(float(state["alpha"]), threshold, int(state["rank"]), int(state["n_calibration"]))

    def predict_set(self, p: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        """Sets as booleans, columns ``[B, A]``."""
        return lac_sets(p, self.threshold)

    def to_dict(self) -> dict[str, Any]:
        threshold = None if math.isinf(self.threshold) else self.threshold
        return {"alpha": self.alpha, "threshold": threshold, "rank": self.rank, "n_calibration": self.n_calibration}
