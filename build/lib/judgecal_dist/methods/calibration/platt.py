r"""Platt scaling on the logit of a score, optionally with item features (spec §3.2, eqs. (2)-(3)).

References
----------
.. [1] J. C. Platt. Probabilistic Outputs for Support Vector Machines and Comparisons to Regularized Likelihood
   Methods. In Advances in Large Margin Classifiers, MIT Press, 1999.
.. [2] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Self

import numpy as np
import numpy.typing as npt
from scipy.optimize import OptimizeResult, minimize
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.methods.calibration.base import (
    ScoreCalibrator,
    logistic_loss,
    no_finite_mle,
    proba_from_logit,
    separates,
)
from judgecal_dist.stats.checks import DEFAULT_EPS, check_param, check_same_length

__all__ = ["PlattCalibrator", "objective", "hessian", "GTOL", "MAX_ITER"]

MAX_ITER = 1000  # optimiser iterations (public: the one-pass engine runs the same optimiser on summed data)
GTOL = 1e-10  # Newton's target: stop once the gradient's largest entry is below this
_GTOL_ACCEPT = 1e-7  # converged if the final gradient is this small, even when float round-off stopped Newton


def objective(
    theta: npt.NDArray[np.float64],
    X: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    penalty: float,
    theta0: npt.NDArray[np.float64],
) -> tuple[float, npt.NDArray[np.float64]]:
    r"""Weighted mean log-loss of :math:`\sigma(X\theta)` plus :math:`\lambda\lVert\theta - \theta_0\rVert^2`, and its gradient.

    The log-loss is :func:`~judgecal_dist.methods.calibration.base.logistic_loss`, exact for any logit.
    """
    t = X @ theta
    loss = np.dot(w, logistic_loss(t, y)) + penalty * np.sum((theta - theta0) ** 2)
    grad = X.T @ (w * (expit(t) - y)) + 2.0 * penalty * (theta - theta0)
    return float(loss), grad


def hessian(
    theta: npt.NDArray[np.float64],
    X: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    penalty: float,
    theta0: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Hessian of :func:`objective` in ``theta`` (same arguments)."""
    t = X @ theta
    h = w * expit(t) * expit(-t)  # sigma(t) (1 - sigma(t)), both factors exact in the tails
    return np.asarray((X.T * h) @ X + 2.0 * penalty * np.eye(theta.size), dtype=np.float64)


class PlattCalibrator(ScoreCalibrator):
    r"""Platt scaling on the logit of a probability score, with optional item features (spec §3.2).

    .. math::

        \tilde p = \sigma\big(\alpha\,\mathrm{logit}(s) + \beta + \gamma^\top x\big),\qquad
        s \leftarrow \min(\max(s, \varepsilon), 1 - \varepsilon),

    (eq. (2) without features, eq. (3) with), with :math:`\theta = (\alpha, \beta, \gamma)` minimising the
    (weighted) mean log-loss plus an optional ridge toward the identity map :math:`(1, 0, 0)`:

    .. math::

        \mathcal L(\theta) = \frac{1}{\sum_i w_i}\sum_{i} w_i\,\ell\big(\sigma(\alpha u_i + \beta + \gamma^\top x_i),
        y_i\big) + \lambda\big[(\alpha - 1)^2 + \beta^2 + \lVert\gamma\rVert^2\big],\qquad u_i = \mathrm{logit}(s_i).

    With :math:`\lambda = 0` (the default, spec §3.2) this is unpenalised logistic regression of :math:`y` on
    :math:`(\mathrm{logit}(s), x)`. Unlike Platt's original recipe and sklearn's ``_SigmoidCalibration``, labels
    are not smoothed toward 1/2. The problem is convex and is solved from the identity by a trust-region Newton
    method (:func:`scipy.optimize.minimize`, ``method="trust-exact"``) with the exact gradient and Hessian, to a
    gradient below 1e-10 (accepted below 1e-7 when round-off in the loss stops the steps earlier; the loss is a
    mean, so these tolerances do not depend on the number of items).

    Parameters
    ----------
    penalty : float, default 0.0
        Ridge strength :math:`\lambda \ge 0` toward the identity; the loss is averaged, not summed, over items.
    eps : float, default 1e-6
        Clipping floor :math:`\varepsilon` of the score before the logit.
    score_input : {"logit", "probability"}, default "logit"
        Whether ``s`` is :math:`P(Y=1)` (clipped, then its logit is taken) or already the log-odds (used as is,
        unclipped; see :mod:`~judgecal_dist.methods.calibration.base`).
        The default reads an aggregator's log-odds (its ``transform`` or ``decision_function``); pass
        ``score_input="probability"`` for a probability score.

    Attributes
    ----------
    slope_ : float
        :math:`\alpha`.
    intercept_ : float
        :math:`\beta`.
    coef_ : ndarray of float64, shape (n_item_features,)
        :math:`\gamma` (empty without features).
    n_item_features_ : int or None
        Number of item features seen in ``fit`` (``None`` when fitted without ``x``).
    fallback_ : str or None
        ``None`` after a regular fit; ``"constant_labels"`` or ``"constant_scores"`` after a degenerate one.
    n_iter_ : int
        Optimiser iterations (0 for the constant-label fallback).
    loss_history_ : list of float
        Objective value after each iteration.

    Warns
    -----
    UserWarning
        With ``penalty == 0`` and a single class in ``y``: the MLE is infinite, so the identity map
        (:math:`\alpha = 1`, :math:`\beta = 0`, :math:`\gamma = 0`) is returned instead
        (``fallback_ = "constant_labels"``). Use ``penalty > 0`` for a finite fit (mandatory under the
        ``gold_positive`` orientation, spec §3.0).
    sklearn.exceptions.ConvergenceWarning
        With ``penalty == 0`` when the classes are (quasi-)separated by a threshold on the score, or by a
        hyperplane in :math:`(\mathrm{logit}(s), x)` (no finite MLE [3]_; the coefficients returned are large and
        set by the optimiser's tolerance), or when the optimiser does not converge.

    Notes
    -----
    With ``penalty == 0`` and all clipped scores equal, :math:`\alpha` is not identified: it is set to 0 and
    :math:`(\beta, \gamma)` are fitted alone (``fallback_ = "constant_scores"``); without features this gives
    :math:`\beta = \mathrm{logit}(\bar y)`, the best constant. Both degenerate cases are checked on the items with
    positive weight. A single item (:math:`m = 1`) has a single class, so it falls back to the identity.

    Item features enter unscaled; one-hot encodings must drop one level (the intercept is always present), or an
    unpenalised fit is not identified.

    ``sample_weight`` lets the engine fit from counts per distinct score value (spec §8): fitting on
    ``(s_k, 1)`` with weight :math:`\#\{Y=1\}` and ``(s_k, 0)`` with weight :math:`\#\{Y=0\}` equals fitting on
    the items. Cost :math:`O(m d^2)` per iteration for :math:`d` coefficients.

    References
    ----------
    .. [1] J. C. Platt. Probabilistic Outputs for Support Vector Machines and Comparisons to Regularized
       Likelihood Methods. In Advances in Large Margin Classifiers, MIT Press, 1999.
    .. [2] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, eqs. (2) and (3).
    .. [3] A. Albert, J. A. Anderson. On the existence of maximum likelihood estimates in logistic regression
       models. Biometrika 71(1):1-10, 1984. doi:10.1093/biomet/71.1.1.

    Examples
    --------
    >>> s = np.array([0.2, 0.4, 0.6, 0.8, 0.3, 0.7])
    >>> y = np.array([0, 1, 0, 1, 1, 1])
    >>> cal = PlattCalibrator(score_input="probability").fit(s, y)
    >>> round(cal.slope_, 4), round(cal.intercept_, 4)
    (0.8642, 0.8071)
    >>> cal.predict_proba([0.5]).round(4)  # sigma(intercept) at s = 1/2
    array([[0.3085, 0.6915]])
    """

    def __init__(self, *, penalty: float = 0.0, eps: float = DEFAULT_EPS, score_input: str = "logit") -> None:
        self.penalty = penalty
        self.eps = eps
        self.score_input = score_input

    def fit(
        self,
        s: npt.ArrayLike,
        y: npt.ArrayLike,
        sample_weight: npt.ArrayLike | None = None,
        *,
        x: npt.ArrayLike | None = None,
    ) -> Self:
        """Fit slope, intercept (and feature coefficients) on calibrator items.

        Parameters
        ----------
        s : array-like of shape (m,)
            Scores :math:`P(Y=1)` in [0, 1] (e.g. ``aggregator.predict_proba(V)[:, 1]``).
        y : array-like of shape (m,)
            Labels in {0, 1}.
        sample_weight : array-like of shape (m,), optional
            Non-negative item weights (counts); all ones by default.
        x : array-like of shape (m, d), optional
            Item features :math:`x_i` of eq. (3) (finite numbers).

        Returns
        -------
        self

        Raises
        ------
        InputError
            If ``s`` is not a 1-D probability vector, ``y`` is not binary, ``x`` is not a finite 2-D array, the
            lengths differ, or ``sample_weight`` is invalid.
        ConfigError
            If ``penalty`` or ``eps`` is invalid.
        """
        where = "PlattCalibrator.fit"
        penalty = float(check_param(self.penalty, where=where, name="penalty", target_type=numbers.Real, min_val=0))
        scores, labels, weights = self._check_fit_input(s, y, sample_weight, where)
        features = self._check_features(x, scores.size, where)
        self.n_item_features_ = None if x is None else features.shape[1]
        u = self._logit(scores)
        self.fallback_: str | None = None
        self.n_iter_ = 0
        self.loss_history_: list[float] = []
        used = weights > 0
        self.slope_, self.intercept_, self.coef_ = 1.0, 0.0, np.zeros(features.shape[1])
        if penalty == 0.0 and np.ptp(labels[used]) == 0.0:
            warnings.warn(
                f"{where}: y has a single class ({int(labels[used][0])}): the unpenalised Platt fit has no finite "
                "optimum, so the identity map (slope 1, intercept 0) is used; set penalty > 0 for a finite fit",
                UserWarning,
                stacklevel=2,
            )
            self.fallback_ = "constant_labels"
            return self
        X = np.column_stack([u, np.ones_like(u), features])
        theta0 = np.r_[1.0, 0.0, np.zeros(features.shape[1])]
        free = np.ones(X.shape[1], dtype=bool)
        if penalty == 0.0 and np.ptp(u[used]) == 0.0:
            free[0], theta0[0], self.slope_, self.fallback_ = False, 0.0, 0.0, "constant_scores"
        if penalty == 0.0 and self._separated(X[used][:, free], u[used], labels[used], features.shape[1]):
            what = "a hyperplane in (logit(s), x)" if features.shape[1] else "a threshold on s"
            warnings.warn(
                f"{where}: {what} separates the classes: the unpenalised Platt fit has no finite optimum and the "
                "coefficients returned are arbitrarily large; set penalty > 0",
                ConvergenceWarning,
                stacklevel=2,
            )
        theta = theta0.copy()
        theta[free] = self._minimise(X[:, free], labels, weights / weights.sum(), penalty, theta0[free])
        self.slope_, self.intercept_, self.coef_ = float(theta[0]), float(theta[1]), theta[2:]
        return self

    @staticmethod
    def _separated(
        X: npt.NDArray[np.float64], u: npt.NDArray[np.float64], y: npt.NDArray[np.float64], n_features: int
    ) -> bool:
        if n_features == 0:
            return bool(np.ptp(u) > 0) and separates(u, y)  # exact and cheap in one dimension
        return no_finite_mle(X, y)

    def _minimise(
        self,
        X: npt.NDArray[np.float64],
        y: npt.NDArray[np.float64],
        w: npt.NDArray[np.float64],
        penalty: float,
        theta0: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64]:
        def record(intermediate_result: OptimizeResult) -> None:
            self.loss_history_.append(float(intermediate_result.fun))

        res = minimize(
            objective,
            x0=theta0,  # start at the identity map
            args=(X, y, w, penalty, theta0),
            jac=True,
            hess=hessian,
            method="trust-exact",
            callback=record,
            options={"gtol": GTOL, "maxiter": MAX_ITER},
        )
        if not res.success and np.max(np.abs(res.jac)) > _GTOL_ACCEPT:
            warnings.warn(
                f"PlattCalibrator.fit: optimiser stopped without converging ({res.message})",
                ConvergenceWarning,
                stacklevel=3,
            )
        self.n_iter_ = int(res.nit)
        return np.asarray(res.x, dtype=np.float64)

    @staticmethod
    def _check_features(x: npt.ArrayLike | None, n: int, where: str) -> npt.NDArray[np.float64]:
        if x is None:
            return np.empty((n, 0))
        arr = np.asarray(x)
        if arr.ndim != 2:
            hint = "; for one feature use x.reshape(-1, 1)" if arr.ndim == 1 else ""
            raise InputError(f"{where}: x: expected a 2-D array of item features (m, d), got shape {arr.shape}{hint}")
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise InputError(f"{where}: x: expected numeric item features, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
        bad = ~np.isfinite(arr)
        if bad.any():
            raise InputError(
                f"{where}: x: item features must be finite ({int(bad.sum())} cells, e.g. {np.argwhere(bad)[:3].tolist()})"
            )
        check_same_length(("s", np.empty(n)), ("x", arr), where=where)
        return arr

    def predict_proba(self, s: npt.ArrayLike, *, x: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
        """Calibrated ``[P(Y=0), P(Y=1)]`` for scores ``s`` (and item features ``x`` when fitted with them).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit`.
        InputError
            If ``s`` is not a 1-D probability vector, or ``x`` is missing, unexpected or of the wrong shape.
        """
        check_is_fitted(self)
        where = "PlattCalibrator.predict_proba"
        scores = self._clipped_scores(s, where)
        if (x is None) != (self.n_item_features_ is None):
            fitted = "with" if self.n_item_features_ is not None else "without"
            raise InputError(f"{where}: x: the calibrator was fitted {fitted} item features; pass x accordingly")
        features = self._check_features(x, scores.size, where)
        if features.shape[1] != self.coef_.size:
            raise InputError(
                f"{where}: x: has {features.shape[1]} features, but the calibrator was fitted on {self.coef_.size}"
            )
        t = self.slope_ * self._logit(scores) + self.intercept_ + features @ self.coef_
        return proba_from_logit(t)
