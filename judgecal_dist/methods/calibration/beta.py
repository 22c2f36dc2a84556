r"""Beta calibration with an elastic-net penalty toward the identity map (spec §3.3, eq. (4)).

References
----------
.. [1] M. Kull, T. M. Silva Filho, P. Flach. Beta calibration: a well-founded and easily implemented improvement
   on logistic calibration for binary classifiers. AISTATS 2017, PMLR 54:623-631.
.. [2] M. Kull, T. M. Silva Filho, P. Flach. Beyond sigmoids: How to obtain well-calibrated probabilities from
   binary classifiers with beta calibration. Electronic Journal of Statistics 11(2):5052-5080, 2017.
   doi:10.1214/17-EJS1338SI.
.. [3] H. Zou, T. Hastie. Regularization and variable selection via the elastic net. JRSS B 67(2):301-320, 2005.
   doi:10.1111/j.1467-9868.2005.00503.x.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Self

import numpy as np
import numpy.typing as npt
from scipy.optimize import OptimizeResult, minimize
from scipy.special import expit, logit
from sklearn.exceptions import ConvergenceWarning

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.calibration.base import ScoreCalibrator, logistic_loss, proba_from_logit, separates
from judgecal_dist.methods.fitted import beta_log_features
from judgecal_dist.stats.checks import DEFAULT_EPS, check_param

__all__ = ["BetaCalibration", "objective", "IDENTITY", "GTOL", "MAX_ITER"]

MAX_ITER = 1000  # optimiser iterations (public: the one-pass engine runs the same optimiser on summed data)
GTOL = 1e-10  # L-BFGS-B target on the projected gradient (spec §3.3)
_GTOL_ACCEPT = 1e-7  # converged if the final projected gradient is this small when round-off stopped the search
IDENTITY = np.array([1.0, 1.0, 0.0])  # (a, b, c) of the identity map


def objective(
    v: npt.NDArray[np.float64],
    F: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    lam: float,
    l1_ratio: float,
) -> tuple[float, npt.NDArray[np.float64]]:
    r"""Weighted mean log-loss plus the elastic net in :math:`u = u^+ - u^-`, with its gradient in :math:`(u^+, u^-)`.

    ``v = (u+, u-)`` with :math:`u = (a-1, b-1, c)`; the L1 term :math:`\sum(u^+ + u^-)` is linear, so the whole
    objective is smooth on the box :math:`u^\pm \ge 0`.
    """
    u_pos, u_neg = v[:3], v[3:]
    u = u_pos - u_neg
    t = F @ (IDENTITY + u)
    loss = np.dot(w, logistic_loss(t, y))
    penalty = lam * (l1_ratio * np.sum(u_pos + u_neg) + 0.5 * (1.0 - l1_ratio) * np.dot(u, u))
    g = F.T @ (w * (expit(t) - y))
    ridge = lam * (1.0 - l1_ratio) * u
    grad = np.concatenate([g + lam * l1_ratio + ridge, -g + lam * l1_ratio - ridge])
    return float(loss + penalty), grad


def _projected_gradient(
    v: npt.NDArray[np.float64], grad: npt.NDArray[np.float64], upper: npt.NDArray[np.float64]
) -> float:
    """Largest KKT violation on the box ``0 <= v <= upper``: what L-BFGS-B's ``gtol`` measures."""
    g = grad.copy()
    g[(v <= 0.0) & (g > 0.0)] = 0.0
    g[(v >= upper) & (g < 0.0)] = 0.0
    return float(np.max(np.abs(g)))


class BetaCalibration(ScoreCalibrator):
    r"""Beta calibration, :math:`\hat p = \sigma(a\ln s - b\ln(1-s) + c)` with :math:`a, b \ge 0`, shrunk toward the identity.

    .. math::

        \mu(s; a, b, c) = \frac{1}{1 + 1\big/\big(e^{c}\,s^{a}/(1-s)^{b}\big)}
        = \sigma\big(a\ln s - b\ln(1-s) + c\big),

        \mathcal L(a, b, c) = \frac{1}{Z}\sum_{i=1}^{m} w_i\,\ell\big(\mu(s_i; a, b, c), y_i\big)
        + \lambda\Big[\alpha_{\mathrm{en}}\big(|a-1| + |b-1| + |c|\big)
        + \tfrac{1-\alpha_{\mathrm{en}}}{2}\big((a-1)^2 + (b-1)^2 + c^2\big)\Big],

    minimised subject to :math:`a, b \ge 0` (the monotone family of [1]_), with :math:`Z = \sum_i w_i` (the mean,
    default) or :math:`Z = 1` (the sum). The identity is :math:`(a, b, c) = (1, 1, 0)` and :math:`a = b` gives
    Platt scaling on :math:`\mathrm{logit}(s)`. Following spec §3.3, :math:`u = (a-1, b-1, c) = u^+ - u^-` with
    :math:`u^\pm \ge 0` makes the L1 term linear; L-BFGS-B (:func:`scipy.optimize.minimize`) then solves a smooth
    problem on the box :math:`u^\pm \ge 0`, :math:`u^-_a, u^-_b \le 1` (which is :math:`a, b \ge 0`), from the
    identity, to a projected gradient below 1e-10 (accepted below 1e-7 when round-off stops the line search)
    within 1000 iterations.

    Parameters
    ----------
    penalty : float, default 0.01
        Elastic-net strength :math:`\lambda \ge 0`; 0 is unregularised beta calibration ("Beta (no reg)").
    l1_ratio : float, default 0.5
        L1 share :math:`\alpha_{\mathrm{en}} \in [0, 1]`; 0 is a pure ridge ("Beta + L2").
    penalty_scale : {"mean", "sum"}, default "mean"
        Whether the log-loss is averaged (``"mean"``) or summed (``"sum"``) over items; the sum makes the penalty
        effectively :math:`m` times weaker (spec §3.3).
    eps : float, default 1e-6
        Clipping floor :math:`\varepsilon` of the score before :math:`\ln s` and :math:`\ln(1-s)`.
    score_input : {"logit", "probability"}, default "logit"
        Whether ``s`` is :math:`P(Y=1)` (clipped) or the log-odds :math:`t` (unclipped; then
        :math:`\ln s = \log\sigma(t)` and :math:`\ln(1-s) = \log\sigma(-t)`, finite for any :math:`t`).
        The default reads an aggregator's log-odds (its ``transform`` or ``decision_function``); pass
        ``score_input="probability"`` for a probability score.

    Attributes
    ----------
    a_, b_, c_ : float
        Fitted :math:`a \ge 0`, :math:`b \ge 0`, :math:`c`.
    fallback_ : str or None
        ``None`` after a regular fit; ``"constant_labels"`` or ``"constant_scores"`` after a degenerate
        unpenalised one.
    n_iter_ : int
        L-BFGS-B iterations (0 for a fallback).
    loss_history_ : list of float
        Objective value (on the mean scale) after each iteration.

    Warns
    -----
    UserWarning
        With ``penalty == 0`` and a single class in ``y``: the MLE is infinite, so the identity map
        :math:`(1, 1, 0)` is returned (``fallback_ = "constant_labels"``). Any ``penalty > 0`` gives a finite fit.
    sklearn.exceptions.ConvergenceWarning
        With ``penalty == 0`` when a threshold on the score separates the classes (with :math:`a, b \ge 0` the
        map is monotone, so this is exactly when the MLE is infinite; the coefficients returned are large and set
        by the iteration limit), or when the optimiser does not converge.

    Notes
    -----
    With ``penalty == 0`` and all clipped scores equal, :math:`(a, b)` are not identified: the fit returns
    :math:`a = b = 0` and :math:`c = \mathrm{logit}(\bar y)`, the best constant (``fallback_ = "constant_scores"``).
    A single item has a single class (see above). The solver works on the mean scale for either
    ``penalty_scale`` (the sum is the same problem with :math:`\lambda / \sum_i w_i`), so its tolerances do not
    depend on :math:`m`. Cost :math:`O(m)` per iteration.

    References
    ----------
    .. [1] M. Kull, T. M. Silva Filho, P. Flach. Beta calibration: a well-founded and easily implemented
       improvement on logistic calibration for binary classifiers. AISTATS 2017, PMLR 54:623-631, eq. (4).
    .. [2] H. Zou, T. Hastie. Regularization and variable selection via the elastic net. JRSS B 67(2):301-320,
       2005. doi:10.1111/j.1467-9868.2005.00503.x.
    .. [3] R. H. Byrd, P. Lu, J. Nocedal, C. Zhu. A Limited Memory Algorithm for Bound Constrained Optimization.
       SIAM J. Sci. Comput. 16(5):1190-1208, 1995. doi:10.1137/0916069.
    .. [4] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §3.3.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = rng.uniform(0.01, 0.99, 500)
    >>> y = (rng.random(500) < s).astype(int)  # calibrated scores
    >>> cal = BetaCalibration(penalty=1.0, score_input="probability").fit(s, y)  # a strong penalty keeps the identity
    >>> round(cal.a_, 4), round(cal.b_, 4), round(cal.c_, 4)
    (1.0, 1.0, 0.0)
    >>> cal.predict_proba([0.25]).round(4)
    array([[0.75, 0.25]])
    """

    def __init__(
        self,
        *,
        penalty: float = 0.01,
        l1_ratio: float = 0.5,
        penalty_scale: str = "mean",
        eps: float = DEFAULT_EPS,
        score_input: str = "logit",
    ) -> None:
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.penalty_scale = penalty_scale
        self.eps = eps
        self.score_input = score_input

    def fit(self, s: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Fit :math:`(a, b, c)` on calibrator items.

        Parameters
        ----------
        s : array-like of shape (m,)
            Scores :math:`P(Y=1)` in [0, 1].
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
            If ``s``, ``y`` or ``sample_weight`` is invalid or the lengths differ.
        ConfigError
            If a hyperparameter is invalid.
        """
        where = "BetaCalibration.fit"
        lam, l1_ratio = self.check_params(where)
        scores, labels, weights = self._check_fit_input(s, y, sample_weight, where)
        self.a_, self.b_, self.c_ = (float(v) for v in IDENTITY)
        self.fallback_: str | None = None
        self.n_iter_ = 0
        self.loss_history_: list[float] = []
        used = weights > 0
        if lam == 0.0 and np.ptp(labels[used]) == 0.0:
            warnings.warn(
                f"{where}: y has a single class ({int(labels[used][0])}): unregularised beta calibration has no "
                "finite optimum, so the identity map (a=1, b=1, c=0) is used; set penalty > 0 for a finite fit",
                UserWarning,
                stacklevel=2,
            )
            self.fallback_ = "constant_labels"
            return self
        if lam == 0.0 and np.ptp(scores[used]) == 0.0:
            mean_y = np.clip(np.average(labels, weights=weights), self.eps, 1.0 - self.eps)
            self.a_, self.b_, self.c_, self.fallback_ = 0.0, 0.0, float(logit(mean_y)), "constant_scores"
            return self
        if lam == 0.0 and separates(scores[used], labels[used]):
            warnings.warn(
                f"{where}: a threshold on s separates the classes: unregularised beta calibration has no finite "
                "optimum and the coefficients returned are arbitrarily large; set penalty > 0",
                ConvergenceWarning,
                stacklevel=2,
            )
        if self.penalty_scale == "sum":
            lam = lam / weights.sum()  # sum of losses + lam * P  ==  sum(w) * (mean loss + lam / sum(w) * P)
        self._minimise(beta_log_features(*self._log_probs(scores)), labels, weights / weights.sum(), lam, l1_ratio)
        return self

    def _minimise(
        self,
        F: npt.NDArray[np.float64],
        y: npt.NDArray[np.float64],
        w: npt.NDArray[np.float64],
        lam: float,
        l1_ratio: float,
    ) -> None:
        def record(intermediate_result: OptimizeResult) -> None:
            self.loss_history_.append(float(intermediate_result.fun))

        upper = np.array([np.inf, np.inf, np.inf, 1.0, 1.0, np.inf])  # u-_a <= 1, u-_b <= 1  <=>  a, b >= 0
        res = minimize(
            objective,
            x0=np.zeros(6),  # u = 0: the identity map
            args=(F, y, w, lam, l1_ratio),
            jac=True,
            method="L-BFGS-B",
            bounds=list(zip(np.zeros(6), upper, strict=True)),
            callback=record,
            options={"gtol": GTOL, "ftol": 0.0, "maxiter": MAX_ITER},
        )
        if not res.success and _projected_gradient(res.x, res.jac, upper) > _GTOL_ACCEPT:
            warnings.warn(
                f"BetaCalibration.fit: optimiser stopped without converging ({res.message})",
                ConvergenceWarning,
                stacklevel=3,
            )
        a, b, c = IDENTITY + res.x[:3] - res.x[3:]
        self.a_, self.b_, self.c_ = max(float(a), 0.0), max(float(b), 0.0), float(c)  # exact 0 at the bound
        self.n_iter_ = int(res.nit)

    def check_params(self, where: str) -> tuple[float, float]:
        """The checked ``(penalty, l1_ratio)``, naming ``where`` in the error (what :meth:`fit` does first).

        Raises
        ------
        ConfigError
            If ``penalty``, ``l1_ratio`` or ``penalty_scale`` is out of range.
        """
        lam = float(check_param(self.penalty, where=where, name="penalty", target_type=numbers.Real, min_val=0.0))
        l1_ratio = float(
            check_param(self.l1_ratio, where=where, name="l1_ratio", target_type=numbers.Real, min_val=0.0, max_val=1.0)
        )
        if self.penalty_scale not in ("mean", "sum"):
            raise ConfigError(f"{where}: penalty_scale: must be 'mean' or 'sum', got {self.penalty_scale!r}")
        return lam, l1_ratio

    def _proba(self, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return proba_from_logit(beta_log_features(*self._log_probs(s)) @ np.array([self.a_, self.b_, self.c_]))
