r"""Temperature scaling of a binary score's logit (spec §3.3).

References
----------
.. [1] C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. On Calibration of Modern Neural Networks. ICML 2017.
   arXiv:1706.04599.
"""

from __future__ import annotations

import warnings
from typing import Self

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar
from sklearn.exceptions import ConvergenceWarning

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.calibration.base import ScoreCalibrator, logistic_loss, proba_from_logit
from judgecal_dist.stats.checks import DEFAULT_EPS

__all__ = ["TemperatureScaling"]

_XATOL = 1e-10  # absolute tolerance on log T of the bounded Brent search
_MAX_ITER = 500


def _nll(log_t: float, u: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> float:
    t = u * np.exp(-log_t)  # logit(s) / T
    return float(np.dot(w, logistic_loss(t, y)))  # weighted mean log-loss


class TemperatureScaling(ScoreCalibrator):
    r"""Temperature scaling: :math:`\hat p = \sigma\big(\mathrm{logit}(s) / T\big)` with :math:`T > 0` fitted by NLL.

    .. math::

        \hat T = \arg\min_{T \in [T_{\min}, T_{\max}]} \frac{1}{\sum_i w_i} \sum_i w_i\,
        \ell\big(\sigma(\mathrm{logit}(s_i)/T), y_i\big),\qquad s \leftarrow \mathrm{clip}(s, \varepsilon, 1-\varepsilon).

    The loss is convex in :math:`1/T`, hence unimodal in :math:`\log T`, which is searched by bounded Brent
    (:func:`scipy.optimize.minimize_scalar`, ``method="bounded"``) to an absolute tolerance of 1e-10.

    Parameters
    ----------
    t_bounds : tuple of float, default (0.01, 100.0)
        Search interval :math:`[T_{\min}, T_{\max}]`, :math:`0 < T_{\min} < T_{\max}`.
    eps : float, default 1e-6
        Clipping floor :math:`\varepsilon` of the score before the logit.
    score_input : {"logit", "probability"}, default "logit"
        Whether ``s`` is :math:`P(Y=1)` (clipped, then its logit is taken) or already the log-odds (used as is).
        Log-odds of a large panel may need a wider ``t_bounds``.
        The default reads an aggregator's log-odds (its ``transform`` or ``decision_function``); pass
        ``score_input="probability"`` for a probability score.

    Attributes
    ----------
    temperature_ : float
        :math:`\hat T`; :math:`T < 1` sharpens, :math:`T > 1` softens.
    fallback_ : str or None
        ``"uninformative_scores"`` when every clipped score is 1/2 (all logits 0, :math:`T` not identified:
        :math:`T = 1`), else ``None``.
    n_iter_ : int
        Brent iterations.
    loss_history_ : list of float
        Objective value at each function evaluation of the search.

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        If the optimum lies on a bound of ``t_bounds`` (the NLL still decreases beyond it); the bound is
        returned, finite and usable. The lower bound is hit when every score is on the correct side of 1/2, e.g.
        constant labels with all scores above 1/2 (spec §3.0: :math:`T \to 0`); the upper one when the scores
        do worse than 1/2 on average (:math:`T \to \infty`). Constant labels need no special case: with scores
        on both sides of 1/2 and a mean logit favouring the label, the optimum is interior.

    Notes
    -----
    A temperature cannot move a score across 1/2 nor add an intercept, so it keeps the ranking and the decisions
    of the score. A single item (:math:`m = 1`) is fitted like any other input (its optimum is a bound unless
    its score is 1/2). Cost :math:`O(m)` per function evaluation.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. On Calibration of Modern Neural Networks. ICML 2017.
       arXiv:1706.04599.
    .. [2] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §3.3 and Table 1.

    Examples
    --------
    >>> s = np.array([0.9, 0.8, 0.2, 0.1, 0.9, 0.3])
    >>> y = np.array([1, 0, 0, 1, 1, 0])
    >>> cal = TemperatureScaling(score_input="probability").fit(s, y)
    >>> bool(cal.temperature_ > 1)  # overconfident scores are softened
    True
    >>> cal.predict_proba([0.5])
    array([[0.5, 0.5]])
    """

    def __init__(
        self,
        *,
        t_bounds: tuple[float, float] = (0.01, 100.0),
        eps: float = DEFAULT_EPS,
        score_input: str = "logit",
    ) -> None:
        self.t_bounds = t_bounds
        self.eps = eps
        self.score_input = score_input

    def fit(self, s: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Fit the temperature on calibrator items.

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
            If ``t_bounds`` or ``eps`` is invalid.
        """
        where = "TemperatureScaling.fit"
        t_min, t_max = self._check_bounds(where)
        scores, labels, weights = self._check_fit_input(s, y, sample_weight, where)
        u = self._logit(scores)
        self.fallback_: str | None = None
        self.loss_history_: list[float] = []
        if not np.any(u[weights > 0]):
            self.temperature_, self.n_iter_, self.fallback_ = 1.0, 0, "uninformative_scores"
            return self

        def objective(log_t: float) -> float:
            value = _nll(log_t, u, labels, weights / weights.sum())
            self.loss_history_.append(value)
            return value

        bounds = (np.log(t_min), np.log(t_max))
        res = minimize_scalar(
            objective, bounds=bounds, method="bounded", options={"xatol": _XATOL, "maxiter": _MAX_ITER}
        )
        self.temperature_ = float(np.exp(res.x))
        self.n_iter_ = int(res.nit)
        if abs(res.x - bounds[0]) < 1e-6 or abs(res.x - bounds[1]) < 1e-6 or not res.success:
            why = (
                "every score is on the correct side of 1/2, e.g. constant labels"
                if res.x - bounds[0] < bounds[1] - res.x
                else "the scores are no better than 1/2 at any temperature"
            )
            warnings.warn(
                f"{where}: the NLL optimum is at the bound T = {self.temperature_:.4g} of t_bounds={self.t_bounds} "
                f"({why}); the bound is used",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _check_bounds(self, where: str) -> tuple[float, float]:
        try:
            t_min, t_max = (float(b) for b in self.t_bounds)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{where}: t_bounds: expected a pair of numbers, got {self.t_bounds!r}") from err
        if not (0.0 < t_min < t_max < np.inf):
            raise ConfigError(f"{where}: t_bounds: need 0 < T_min < T_max < inf, got {self.t_bounds!r}")
        return t_min, t_max

    def _proba(self, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return proba_from_logit(self._logit(s) / self.temperature_)
