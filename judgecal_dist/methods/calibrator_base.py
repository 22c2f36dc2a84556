r"""What every score calibrator shares: input checks, clipping, and the tests for an infinite logistic MLE.

A calibrator maps a 1-D score :math:`s = P(Y=1)` from Step 1 (or Step 2) to a calibrated probability. It clips
:math:`s` to :math:`[\varepsilon, 1-\varepsilon]` before any log or logit (spec §3.4), is fitted on
``(s, y[, sample_weight])`` and returns ``predict_proba(s)`` with columns ``[P(Y=0), P(Y=1)]``.

References
----------
.. [1] A. Albert, J. A. Anderson. On the existence of maximum likelihood estimates in logistic regression
   models. Biometrika 71(1):1-10, 1984. doi:10.1093/biomet/71.1.1.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.stats.checks import check_binary_labels, check_eps, check_probabilities, check_same_length

__all__ = [
    "ScoreCalibrator",
    "check_sample_weight",
    "logistic_loss",
    "no_finite_mle",
    "proba_from_logit",
    "separates",
]


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


def proba_from_logit(t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``[sigma(-t), sigma(t)]``: P(Y=0) keeps full relative precision when P(Y=1) is near 1."""
    return np.column_stack([expit(-t), expit(t)])


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
    """Base of the score calibrators: checks, clipping and ``predict_proba``.

    Subclasses store ``eps``, implement ``fit`` with :meth:`_check_fit_input` and ``_proba(s_clipped)``.
    """

    eps: float

    def _check_fit_input(
        self, s: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None, where: str
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Clipped scores, labels as float64 and weights (all ones by default), after checking all three."""
        eps = check_eps(self.eps, where=where)
        scores = check_probabilities(s, where=where, name="s")
        labels = check_binary_labels(y, where=where).astype(np.float64)
        check_same_length(("s", scores), ("y", labels), where=where)
        weights = check_sample_weight(sample_weight, scores.size, where)
        return np.clip(scores, eps, 1.0 - eps), labels, weights

    def _clipped_scores(self, s: npt.ArrayLike, where: str) -> npt.NDArray[np.float64]:
        eps = check_eps(self.eps, where=where)
        return np.clip(check_probabilities(s, where=where, name="s"), eps, 1.0 - eps)

    def predict_proba(self, s: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Calibrated ``[P(Y=0), P(Y=1)]`` for scores ``s`` (clipped to :math:`[\\varepsilon, 1-\\varepsilon]`).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        InputError
            If ``s`` is not a 1-D probability vector.
        """
        check_is_fitted(self)
        return self._proba(self._clipped_scores(s, f"{type(self).__name__}.predict_proba"))

    def _proba(self, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        raise NotImplementedError
