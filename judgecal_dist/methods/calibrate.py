r"""Steps 2 and 3 of the pipeline: maps from a raw probability score to a calibrated one (spec §3.2, §3.3).

Every calibrator takes a 1-D score :math:`s \in [0, 1]` (the aggregator's :math:`P(Y=1)`), clips it to
:math:`[\varepsilon, 1-\varepsilon]` before any logit (spec §3.4), is fitted by minimising the log-loss on the
calibrator items, and exposes ``predict_proba(s)`` with columns ``[P(Y=0), P(Y=1)]``.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Self

import numpy as np
import numpy.typing as npt
from scipy.optimize import OptimizeResult, minimize
from scipy.special import expit, logit
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.stats.checks import (
    DEFAULT_EPS,
    check_binary_labels,
    check_eps,
    check_param,
    check_probabilities,
    check_same_length,
)

__all__ = ["PlattCalibrator"]

_MAX_ITER = 1000
_GTOL = 1e-10  # Newton's target: stop once the gradient's largest entry is below this
_GTOL_ACCEPT = 1e-7  # converged if the final gradient is this small, even when float round-off stopped Newton


def _check_sample_weight(sample_weight: npt.ArrayLike | None, n: int, where: str) -> npt.NDArray[np.float64]:
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


def _platt_objective(
    params: npt.NDArray[np.float64],
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    penalty: float,
) -> tuple[float, npt.NDArray[np.float64]]:
    r"""Weighted mean log-loss of :math:`\sigma(\alpha x + \beta)` plus :math:`\lambda[(\alpha-1)^2+\beta^2]`, and its gradient.

    The log-loss of a logit :math:`t` is :math:`\log(1+e^t) - yt`, written with ``logaddexp`` so that it stays
    finite and exact for any :math:`t` (no probability is formed, so none needs clipping).
    """
    alpha, beta = params
    t = alpha * x + beta
    loss = np.dot(w, np.logaddexp(0.0, t) - y * t) + penalty * ((alpha - 1.0) ** 2 + beta**2)
    resid = w * (expit(t) - y)
    grad = np.array([np.dot(resid, x), resid.sum()]) + 2.0 * penalty * np.array([alpha - 1.0, beta])
    return float(loss), grad


def _platt_hessian(
    params: npt.NDArray[np.float64],
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    penalty: float,
) -> npt.NDArray[np.float64]:
    t = params[0] * x + params[1]
    h = w * expit(t) * expit(-t)  # sigma(t) (1 - sigma(t)), both factors exact in the tails
    return np.array([[np.dot(h, x * x), np.dot(h, x)], [np.dot(h, x), h.sum()]]) + 2.0 * penalty * np.eye(2)


def _is_separable(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> bool:
    """Whether one threshold on ``x`` splits the classes (ties on the threshold allowed): no finite 1-D MLE."""
    x1, x0 = x[y == 1], x[y == 0]
    return bool(x0.max() <= x1.min() or x1.max() <= x0.min())


class PlattCalibrator(BaseEstimator):
    r"""Platt scaling on the logit of a probability score (spec §3.2, eq. (2)).

    .. math::

        \tilde p = \sigma\big(\alpha\,\mathrm{logit}(s) + \beta\big),\qquad
        s \leftarrow \min(\max(s, \varepsilon), 1 - \varepsilon),

    with :math:`(\alpha, \beta)` minimising the (weighted) mean log-loss plus an optional ridge toward the
    identity map :math:`(\alpha, \beta) = (1, 0)`:

    .. math::

        \mathcal L(\alpha, \beta) = \frac{1}{\sum_i w_i}\sum_{i} w_i\,\ell\big(\sigma(\alpha x_i + \beta), y_i\big)
        + \lambda\big[(\alpha - 1)^2 + \beta^2\big],\qquad x_i = \mathrm{logit}(s_i).

    With :math:`\lambda = 0` (the default, spec §3.2) this is unpenalised logistic regression of :math:`y` on
    :math:`\mathrm{logit}(s)`. Unlike Platt's original recipe and sklearn's ``_SigmoidCalibration``, labels are
    not smoothed toward 1/2. The problem is convex and is solved from the identity by a trust-region Newton
    method (:func:`scipy.optimize.minimize`, ``method="trust-exact"``) with the exact gradient and Hessian, to a
    gradient below 1e-10 (accepted below 1e-7 when round-off in the loss stops the steps earlier; the loss is a
    mean, so these tolerances do not depend on the number of items).

    Parameters
    ----------
    penalty : float, default 0.0
        Ridge strength :math:`\lambda \ge 0` toward the identity; the loss is averaged, not summed, over items.
    eps : float, default 1e-6
        Clipping floor :math:`\varepsilon` of the score before the logit.

    Attributes
    ----------
    slope_ : float
        :math:`\alpha`.
    intercept_ : float
        :math:`\beta`.
    fallback_ : str or None
        ``None`` after a regular fit; ``"constant_labels"`` or ``"constant_scores"`` after a degenerate one.
    n_iter_ : int
        Optimiser iterations (0 for a fallback).
    loss_history_ : list of float
        Objective value after each iteration.

    Warns
    -----
    UserWarning
        With ``penalty == 0`` and a single class in ``y``: the MLE is infinite, so the identity map
        :math:`(\alpha, \beta) = (1, 0)` is returned instead (``fallback_ = "constant_labels"``). Use
        ``penalty > 0`` for a finite fit (mandatory under the ``gold_positive`` orientation, spec §3.0).
    sklearn.exceptions.ConvergenceWarning
        With ``penalty == 0`` when a threshold on the score separates the classes (no finite MLE; the returned
        slope is large and set by the optimiser's tolerance), or when the optimiser does not converge.

    Notes
    -----
    With ``penalty == 0`` and all clipped scores equal, :math:`\alpha` is not identified: the fit returns
    :math:`\alpha = 0` and :math:`\beta = \mathrm{logit}(\bar y)` with :math:`\bar y` the weighted label mean
    clipped to :math:`[\varepsilon, 1-\varepsilon]` (``fallback_ = "constant_scores"``), i.e. the best constant.
    Both degenerate cases are checked on the items with positive weight.

    ``sample_weight`` lets the engine fit from counts per distinct score value (spec §8): fitting on
    ``(s_k, 1)`` with weight :math:`\#\{Y=1\}` and ``(s_k, 0)`` with weight :math:`\#\{Y=0\}` equals fitting on
    the items. Cost :math:`O(m)` per iteration.

    References
    ----------
    .. [1] J. C. Platt. Probabilistic Outputs for Support Vector Machines and Comparisons to Regularized
       Likelihood Methods. In Advances in Large Margin Classifiers, MIT Press, 1999.
    .. [2] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, eq. (2).

    Examples
    --------
    >>> s = np.array([0.2, 0.4, 0.6, 0.8, 0.3, 0.7])
    >>> y = np.array([0, 1, 0, 1, 1, 1])
    >>> cal = PlattCalibrator().fit(s, y)
    >>> round(cal.slope_, 4), round(cal.intercept_, 4)
    (0.8642, 0.8071)
    >>> cal.predict_proba([0.5]).round(4)  # sigma(intercept) at s = 1/2
    array([[0.3085, 0.6915]])
    """

    def __init__(self, *, penalty: float = 0.0, eps: float = DEFAULT_EPS) -> None:
        self.penalty = penalty
        self.eps = eps

    def fit(self, s: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Fit slope and intercept on calibrator items.

        Parameters
        ----------
        s : array-like of shape (m,)
            Scores :math:`P(Y=1)` in [0, 1] (e.g. ``aggregator.predict_proba(V)[:, 1]``).
        y : array-like of shape (m,)
            Labels in {0, 1}.
        sample_weight : array-like of shape (m,), optional
            Non-negative item weights (counts); all ones by default.

        Returns
        -------
        self

        Raises
        ------
        InputError
            If ``s`` is not a 1-D probability vector, ``y`` is not binary, the lengths differ, or
            ``sample_weight`` is invalid.
        ConfigError
            If ``penalty`` or ``eps`` is invalid.
        """
        where = "PlattCalibrator.fit"
        penalty = float(check_param(self.penalty, where=where, name="penalty", target_type=numbers.Real, min_val=0))
        eps = check_eps(self.eps, where=where)
        scores = check_probabilities(s, where=where, name="s")
        labels = check_binary_labels(y, where=where).astype(np.float64)
        check_same_length(("s", scores), ("y", labels), where=where)
        weights = _check_sample_weight(sample_weight, scores.size, where)
        x = logit(np.clip(scores, eps, 1.0 - eps))
        self.fallback_: str | None = None
        self.n_iter_ = 0
        self.loss_history_: list[float] = []
        used = weights > 0
        if penalty == 0.0 and np.ptp(labels[used]) == 0.0:
            warnings.warn(
                f"{where}: y has a single class ({int(labels[used][0])}): the unpenalised Platt fit has no finite "
                "optimum, so the identity map (slope 1, intercept 0) is used; set penalty > 0 for a finite fit",
                UserWarning,
                stacklevel=2,
            )
            self.slope_, self.intercept_, self.fallback_ = 1.0, 0.0, "constant_labels"
            return self
        if penalty == 0.0 and np.ptp(x[used]) == 0.0:
            mean_y = np.clip(np.average(labels, weights=weights), eps, 1.0 - eps)
            self.slope_, self.intercept_, self.fallback_ = 0.0, float(logit(mean_y)), "constant_scores"
            return self
        if penalty == 0.0 and _is_separable(x[used], labels[used]):
            warnings.warn(
                f"{where}: a threshold on s separates the classes: the unpenalised Platt fit has no finite "
                "optimum and the slope returned is arbitrary large; set penalty > 0",
                ConvergenceWarning,
                stacklevel=2,
            )
        self._minimise(x, labels, weights / weights.sum(), penalty)
        return self

    def _minimise(
        self, x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64], penalty: float
    ) -> None:
        def record(intermediate_result: OptimizeResult) -> None:
            self.loss_history_.append(float(intermediate_result.fun))

        res = minimize(
            _platt_objective,
            x0=np.array([1.0, 0.0]),  # start at the identity map
            args=(x, y, w, penalty),
            jac=True,
            hess=_platt_hessian,
            method="trust-exact",
            callback=record,
            options={"gtol": _GTOL, "maxiter": _MAX_ITER},
        )
        if not res.success and np.max(np.abs(res.jac)) > _GTOL_ACCEPT:
            warnings.warn(
                f"PlattCalibrator.fit: optimiser stopped without converging ({res.message})",
                ConvergenceWarning,
                stacklevel=3,
            )
        self.slope_, self.intercept_ = float(res.x[0]), float(res.x[1])
        self.n_iter_ = int(res.nit)

    def predict_proba(self, s: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Calibrated ``[P(Y=0), P(Y=1)]`` for scores ``s``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit`.
        InputError
            If ``s`` is not a 1-D probability vector.
        """
        check_is_fitted(self)
        eps = check_eps(self.eps, where="PlattCalibrator.predict_proba")
        scores = check_probabilities(s, where="PlattCalibrator.predict_proba", name="s")
        t = self.slope_ * logit(np.clip(scores, eps, 1.0 - eps)) + self.intercept_
        # expit(-t) rather than 1 - expit(t): P(Y=0) keeps full relative precision when P(Y=1) is near 1.
        return np.column_stack([expit(-t), expit(t)])
