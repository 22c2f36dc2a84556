r"""What every score calibrator shares: input checks, clipping, and the tests for an infinite logistic MLE.

A calibrator maps a 1-D score :math:`s = P(Y=1)` from Step 1 (or Step 2) to a calibrated probability. It clips
:math:`s` to :math:`[\varepsilon, 1-\varepsilon]` before any log or logit (spec §3.4), is fitted on
``(s, y[, sample_weight])`` and returns ``predict_proba(s)`` with columns ``[P(Y=0), P(Y=1)]``.

With ``score_input="logit"`` the score is instead the aggregator's log-odds :math:`t = \mathrm{logit}\,P(Y=1)`, any
finite real, and is *not* clipped: a large panel's one-coin log-odds routinely exceed
:math:`\mathrm{logit}(1-10^{-6}) \approx 13.8`, and clipping first would give the calibrator only two distinct
values for those items. Logit-based maps use :math:`t` directly and :math:`\ln s = \log\sigma(t)`,
:math:`\ln(1-s) = \log\sigma(-t)` (finite for any :math:`t`); only the calibrated output is clipped, by the metrics.

References
----------
.. [1] A. Albert, J. A. Anderson. On the existence of maximum likelihood estimates in logistic regression
   models. Biometrika 71(1):1-10, 1984. doi:10.1093/biomet/71.1.1.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog
from scipy.special import log_expit, logit
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.fitted import proba_from_logit
from judgecal_dist.stats.checks import check_binary_labels, check_eps, check_probabilities, check_same_length

__all__ = [
    "SCORE_INPUTS",
    "ScoreCalibrator",
    "check_log_odds",
    "check_sample_weight",
    "logistic_loss",
    "no_finite_mle",
    "proba_from_logit",
    "separates",
]


#: What a calibrator's score is: a probability P(Y=1) (clipped at eps) or the log-odds logit P(Y=1) (unclipped).
SCORE_INPUTS = ("probability", "logit")


def check_log_odds(t: npt.ArrayLike, *, where: str, name: str = "s") -> npt.NDArray[np.float64]:
    """Return ``t`` as a 1-D float64 array after checking that every entry is a finite real (a log-odds score).

    Raises
    ------
    InputError
        If ``t`` is not 1-D, is empty, is not numeric, or holds NaN or infinity.
    """
    arr = np.asarray(t)
    if arr.ndim != 1:
        raise InputError(f"{where}: {name}: expected a 1-D array of log-odds, got shape {arr.shape}")
    if arr.size == 0:
        raise InputError(f"{where}: {name}: no scores (0 items)")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InputError(f"{where}: {name}: expected numeric log-odds, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = np.flatnonzero(bad)[:3]
        raise InputError(
            f"{where}: {name}: log-odds must be finite ({int(bad.sum())} items, e.g. "
            f"{', '.join(f'[{i}]={arr[i]!r}' for i in idx)}); clip the probability before taking its logit"
        )
    return arr


def logistic_loss(t: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    r"""Log-loss of a logit, :math:`\ell(\sigma(t), y) = \log(1 + e^{-(2y-1)t})`, per item.

    Written with ``logaddexp`` on the signed margin, it is finite for any :math:`t` and keeps full relative
    precision in both tails (``logaddexp(0, t) - y t`` cancels to 0 for a confident correct logit). No
    probability is formed, so none needs clipping.

    Examples
    --------
    >>> logistic_loss(np.array([40.0, 0.0]), np.array([1.0, 0.0]))
    array([4.24835426e-18, 6.93147181e-01])
    """
    return np.asarray(np.logaddexp(0.0, (1.0 - 2.0 * y) * t), dtype=np.float64)


def check_sample_weight(sample_weight: npt.ArrayLike | None, n: int, where: str) -> npt.NDArray[np.float64]:
    """Return non-negative finite item weights of length ``n`` (all ones when ``None``).

    Raises
    ------
    InputError
        If the weights are not 1-D, have the wrong length, hold a negative or non-finite value, or are all zero.
    """
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim != 1:
        raise InputError(f"{where}: sample_weight: expected a 1-D array, got shape {w.shape}")
    check_same_length(("s", np.empty(n)), ("sample_weight", w), where=where)
    bad = ~(np.isfinite(w) & (w >= 0))
    if bad.any():
        raise InputError(
            f"{where}: sample_weight: must be finite and >= 0 ({int(bad.sum())} items, e.g. {w[bad][:3].tolist()})"
        )
    if w.sum() <= 0:
        raise InputError(f"{where}: sample_weight: all weights are zero")
    return w


def separates(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> bool:
    """Whether one threshold on ``x`` splits the classes (ties on the threshold allowed).

    For a logistic model in a monotone transform of ``x`` (Platt, beta with :math:`a, b \\ge 0`) this is exactly
    (quasi-)complete separation, so the unpenalised MLE is infinite [1]_. Both classes must be present.
    """
    x1, x0 = x[y == 1], x[y == 0]
    return bool(x0.max() <= x1.min() or x1.max() <= x0.min())


def no_finite_mle(X: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> bool:
    r"""Whether the unpenalised logistic MLE of ``y`` on the design ``X`` is infinite (Albert & Anderson [1]_).

    It is iff some direction :math:`d \ne 0` has :math:`(2y_i - 1)\,x_i^\top d \ge 0` for every item, strictly
    for at least one (complete or quasi-complete separation). Decided by one linear programme:
    :math:`\max_d \sum_i (2y_i-1)\,x_i^\top d` subject to those inequalities and :math:`-1 \le d \le 1`, whose
    optimum is 0 exactly when no such direction exists.
    """
    A = (2.0 * y - 1.0)[:, None] * X
    res = linprog(-A.sum(axis=0), A_ub=-A, b_ub=np.zeros(A.shape[0]), bounds=(-1.0, 1.0), method="highs")
    scale = max(1.0, float(np.abs(A).sum()))
    return bool(res.status == 0 and -res.fun > 1e-9 * scale)


class ScoreCalibrator(BaseEstimator):
    r"""Base of the score calibrators: checks, clipping and ``predict_proba``.

    Subclasses store ``eps`` and ``score_input``, implement ``fit`` with :meth:`_check_fit_input` and
    ``_proba(s_checked)``; :meth:`_logit` and :meth:`_log_probs` turn a checked score into the logit and
    :math:`(\ln s, \ln(1-s))` whatever ``score_input`` is.
    """

    eps: float
    score_input: str = "logit"

    def _input_is_logit(self, where: str) -> bool:
        if self.score_input not in SCORE_INPUTS:
            raise ConfigError(f"{where}: score_input: must be one of {list(SCORE_INPUTS)}, got {self.score_input!r}")
        return self.score_input == "logit"

    def _logit(self, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Log-odds of a checked score: ``s`` itself for log-odds input, ``logit(s)`` of a clipped probability."""
        return s if self.score_input == "logit" else np.asarray(logit(s), dtype=np.float64)

    def _log_probs(self, s: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        r""":math:`(\ln s, \ln(1-s))` of a checked score; from log-odds via ``log_expit``, exact in both tails."""
        if self.score_input == "logit":
            return log_expit(s), log_expit(-s)
        return np.log(s), np.log1p(-s)

    def _check_fit_input(
        self, s: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None, where: str
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Checked scores (clipped probabilities, or unclipped log-odds), labels as float64 and weights (all ones
        by default), after checking all three."""
        scores = self._clipped_scores(s, where)
        labels = check_binary_labels(y, where=where).astype(np.float64)
        check_same_length(("s", scores), ("y", labels), where=where)
        weights = check_sample_weight(sample_weight, scores.size, where)
        return scores, labels, weights

    def _clipped_scores(self, s: npt.ArrayLike, where: str) -> npt.NDArray[np.float64]:
        eps = check_eps(self.eps, where=where)
        arr = np.asarray(s)
        if arr.ndim == 2 and arr.shape[1] == 1:  # one column: an aggregator's transform in a Pipeline
            s = arr[:, 0]
        if self._input_is_logit(where):
            return check_log_odds(s, where=where, name="s")
        return np.clip(check_probabilities(s, where=where, name="s"), eps, 1.0 - eps)

    def predict_proba(self, s: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Calibrated ``[P(Y=0), P(Y=1)]`` for scores ``s`` (probabilities clipped to :math:`[\\varepsilon,
        1-\\varepsilon]`, or log-odds with ``score_input="logit"``).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        InputError
            If ``s`` is not a 1-D probability vector (finite log-odds with ``score_input="logit"``).
        """
        check_is_fitted(self)
        return self._proba(self._clipped_scores(s, f"{type(self).__name__}.predict_proba"))

    def predict(self, s: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Hard labels: 1 iff the calibrated :math:`P(Y=1) > 1/2`."""
        return (self.predict_proba(s)[:, 1] > 0.5).astype(np.int64)

    def _proba(self, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        raise NotImplementedError
