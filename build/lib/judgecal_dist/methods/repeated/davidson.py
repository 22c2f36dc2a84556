r"""Bradley-Terry-Davidson aggregation of repeated three-way votes, with the MAE Bayes action (spec 003 §3).

An item's ``n`` votes are tallied into counts :math:`(c^+, c^0, c^-)` (A better, tie, B better; missing votes
dropped). Two features summarise them (Eqs. 2-3, :math:`\alpha = \kappa = 1`):

.. math::

    s = \tfrac12 \log\frac{c^+ + \alpha}{c^- + \alpha}, \qquad t = \log\frac{c^0 + \kappa}{n + \kappa} \le 0.

The ground-truth label :math:`y \in \{-1, 0, +1\}` follows Davidson's three-outcome model (Eq. 4) with latent
margin :math:`u = \beta s` and tie logit :math:`\eta` (global: :math:`\eta_0`; local: :math:`\gamma t`; the
extension :math:`\eta_0 + \gamma t`):

.. math::

    p(+1) = e^{u}/Z,\quad p(-1) = e^{-u}/Z,\quad p(0) = e^{\eta}/Z,\quad Z = e^{u} + e^{-u} + e^{\eta}.

The logits are linear in the parameters, so the mean negative log-likelihood on the calibration items (Eq. 8) is
a convex log-sum-exp objective; it is minimised with L-BFGS-B under box constraints from several starts. The
decision minimising expected absolute error (Eqs. 5-6) is the median of :math:`p`:
:math:`\hat y = +1` iff :math:`u > \tau`, :math:`-1` iff :math:`u < -\tau`, else 0, with
:math:`\tau = \operatorname{asinh}(e^{\eta}/2)` (equal risks break toward 0).

References
----------
.. [1] Distribution-Calibrated Inference Time Compute for Thinking LLM-as-a-Judge. ICLR 2026 submission
   (seed 003), Eqs. 1-8 and Algorithm 1.
.. [2] R. R. Davidson. On Extending the Bradley-Terry Model to Accommodate Ties in Paired Comparison
   Experiments. JASA 65(329):317-328, 1970. doi:10.1080/01621459.1970.10481082.
.. [3] R. A. Bradley, M. E. Terry. Rank Analysis of Incomplete Block Designs: I. Biometrika 39(3/4):324-345,
   1952. doi:10.2307/2334029.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Self

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.checks import check_param

__all__ = [
    "CLASSES",
    "TIE_MODELS",
    "check_counts",
    "davidson_features",
    "davidson_design",
    "davidson_nll",
    "mae_risks",
    "mae_action",
    "DavidsonAggregator",
]

#: Label order of every probability matrix here: columns are P(y = -1), P(y = 0), P(y = +1).
CLASSES = np.array([-1, 0, 1])
#: Tie links: global eta0 (the paper's model), local gamma * t (the paper's variant), eta0 + gamma * t (extension).
TIE_MODELS = ("global", "local", "local_intercept")
_PARAMS = {"global": ("beta", "eta0"), "local": ("beta", "gamma"), "local_intercept": ("beta", "eta0", "gamma")}

FloatArray = npt.NDArray[np.float64]


def check_counts(counts: npt.ArrayLike, *, where: str) -> npt.NDArray[np.float64]:
    """Return vote counts ``(c+, c0, c-)`` per item as a float (N, 3) array after checking them.

    Raises
    ------
    InputError
        Not of shape (N, 3), empty, negative or non-integer counts.

    Examples
    --------
    >>> check_counts([[3, 1, 0]], where="demo")
    array([[3., 1., 0.]])
    """
    arr = np.asarray(counts, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] == 0:
        raise InputError(f"{where}: counts: expected shape (n_items, 3) = (c+, c0, c-), got {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0) | (arr != np.round(arr))
    if bad.any():
        raise InputError(f"{where}: counts: must be non-negative integers ({int(bad.any(axis=1).sum())} items)")
    return arr


def davidson_features(
    counts: npt.ArrayLike, *, alpha: float = 1.0, kappa: float = 1.0
) -> tuple[FloatArray, FloatArray]:
    """Margin feature ``s`` (Eq. 2) and tie feature ``t`` (Eq. 3) of every item; both 0 when all votes are missing.

    Examples
    --------
    >>> s, t = davidson_features([[1, 8, 0], [9, 0, 0], [5, 0, 4], [0, 0, 0]])
    >>> s.round(3).tolist(), t.round(3).tolist()
    ([0.347, 1.151, 0.091, 0.0], [-0.105, -2.303, -2.303, 0.0])
    """
    c = check_counts(counts, where="davidson_features")
    plus, tie, minus = c[:, 0], c[:, 1], c[:, 2]
    n = c.sum(axis=1)
    s = 0.5 * np.log((plus + alpha) / (minus + alpha))
    t = np.log((tie + kappa) / (n + kappa))
    return np.where(n > 0, s, 0.0), np.where(n > 0, t, 0.0)


def davidson_design(s: npt.ArrayLike, t: npt.ArrayLike, tie: str) -> npt.NDArray[np.float64]:
    r"""Design tensor ``X`` with logits ``z[i, k] = X[i, k, :] @ theta`` for classes (-1, 0, +1).

    Columns of the parameter vector: ``(beta, eta0)`` (global), ``(beta, gamma)`` (local), ``(beta, eta0, gamma)``
    (local_intercept); the -1 and +1 logits are :math:`\mp \beta s`, the tie logit the tie link.
    """
    s_arr, t_arr = np.asarray(s, np.float64), np.asarray(t, np.float64)
    zero, one = np.zeros_like(s_arr), np.ones_like(s_arr)
    beta = np.stack([-s_arr, zero, s_arr], axis=1)
    cols = {
        "global": [beta, np.stack([zero, one, zero], 1)],
        "local": [beta, np.stack([zero, t_arr, zero], 1)],
        "local_intercept": [beta, np.stack([zero, one, zero], 1), np.stack([zero, t_arr, zero], 1)],
    }
    return np.stack(cols[tie], axis=2)


def _label_index(y: npt.ArrayLike, where: str) -> npt.NDArray[np.intp]:
    arr = np.asarray(y)
    bad = ~np.isin(arr, CLASSES)
    if arr.ndim != 1 or bad.any():
        raise InputError(f"{where}: y: labels must be -1, 0 or +1 in a 1-D array ({int(bad.sum())} bad values)")
    return (arr.astype(np.int64) + 1).astype(np.intp)


def davidson_nll(
    theta: npt.ArrayLike,
    X: npt.NDArray[np.float64],
    y_index: npt.NDArray[np.intp],
    weights: npt.NDArray[np.float64] | None = None,
    l2: float = 0.0,
) -> tuple[float, FloatArray]:
    r"""Mean (weighted) negative log-likelihood of Eq. 8 and its gradient.

    .. math::

        L(\theta) = \frac{1}{\sum_i w_i} \sum_i w_i\big[\operatorname{LSE}(z_i) - z_{i, y_i}\big]
                    + \tfrac{\lambda}{2}\lVert\theta\rVert^2,
        \qquad \nabla L = \frac{1}{\sum_i w_i}\sum_i w_i X_i^\top (p_i - e_{y_i}) + \lambda\theta

    LSE uses :func:`scipy.special.log_softmax` (max-shifted), so large :math:`\beta s` never overflows.
    """
    th = np.asarray(theta, dtype=np.float64)
    z = X @ th
    logp = log_softmax(z, axis=1)
    rows = np.arange(len(y_index))
    w = np.ones(len(y_index)) if weights is None else weights
    total = w.sum()
    loss = -(w * logp[rows, y_index]).sum() / total + 0.5 * l2 * (th @ th)
    resid = np.exp(logp)
    resid[rows, y_index] -= 1.0
    grad = np.einsum("i,ik,ikp->p", w, resid, X) / total + l2 * th
    return float(loss), grad


def mae_risks(proba: npt.ArrayLike) -> FloatArray:
    """Expected absolute error of the actions -1, 0, +1 (Eq. 5), columns in that order.

    Examples
    --------
    >>> mae_risks([[0.2, 0.3, 0.5]]).tolist()
    [[1.3, 0.7, 0.7]]
    """
    p = np.asarray(proba, dtype=np.float64)
    p_minus, p_tie, p_plus = p[:, 0], p[:, 1], p[:, 2]
    return np.column_stack([p_tie + 2 * p_plus, p_plus + p_minus, 2 * p_minus + p_tie])


def mae_action(u: npt.ArrayLike, eta: npt.ArrayLike) -> npt.NDArray[np.int64]:
    r"""MAE Bayes action (the median of :math:`p`) in closed form: +1 iff :math:`u > \tau`, -1 iff :math:`u < -\tau`.

    :math:`\tau = \operatorname{asinh}(e^{\eta}/2)`; equality gives 0 (spec 003 §3.7: equal risks break toward 0).

    Examples
    --------
    >>> mae_action([2.0, 0.1, -2.0], 0.0).tolist()
    [1, 0, -1]
    """
    u_arr = np.asarray(u, dtype=np.float64)
    tau = np.arcsinh(0.5 * np.exp(np.asarray(eta, dtype=np.float64)))
    return np.where(u_arr > tau, 1, np.where(u_arr < -tau, -1, 0)).astype(np.int64)


class DavidsonAggregator(BaseEstimator):
    r"""Davidson three-outcome model on vote counts, fitted by maximum likelihood; predicts the MAE Bayes action.

    Parameters
    ----------
    tie : {"global", "local", "local_intercept"}, default "global"
        Tie link: :math:`\eta_0` (the paper's main model), :math:`\gamma t` (the paper's local variant; with
        :math:`\gamma \ge 0` it caps :math:`P(0)` at 1/3), or :math:`\eta_0 + \gamma t` (an extension, not in the
        paper).
    alpha, kappa : float, default 1.0
        Smoothing of the features (Eqs. 2-3).
    beta_bounds, eta_bounds, gamma_bounds : (float, float)
        Box constraints (spec 003 §3.6): beta in [0, 50] keeps the rule monotone; the other bounds cover every
        useful tie logit.
    n_starts : int, default 5
        One deterministic start (beta = 1, eta0 matching the tie rate at s = 0, gamma = 0) plus ``n_starts - 1``
        random ones (beta ~ U(0, 5), eta0 and gamma ~ U(-3, 3)); the lowest loss is kept.
    decision : {"mae", "accuracy"}, default "mae"
        Median (MAE action) or mode (0/1-loss action) of the fitted label distribution.
    l2 : float, default 0.0
        Optional ridge penalty (off in the paper).
    tol : float, default 1e-10
        L-BFGS-B ``ftol`` (``gtol`` is 1e-8, ``maxiter`` 1000).
    random_state : int or None, default 0

    Attributes
    ----------
    coef_ : dict of str to float
        Fitted ``beta``, ``eta0`` and/or ``gamma``.
    loss_ : float
        Mean NLL at the optimum.
    at_bound_ : dict of str to bool
        Whether each parameter ended on a box bound (expected for eta0 when the calibration set has no tie label).
    start_losses_ : ndarray
        Final loss of every start (equal up to 1e-6 for a convex problem).
    n_iter_ : int
        Iterations of the best start.

    References
    ----------
    .. [1] Seed 003 (ICLR 2026 submission), Eqs. 2-8; Davidson, JASA 1970, doi:10.1080/01621459.1970.10481082.

    Examples
    --------
    >>> counts = np.array([[8, 0, 0], [0, 0, 8], [2, 4, 2], [6, 1, 1], [1, 1, 6], [3, 2, 3]])
    >>> model = DavidsonAggregator().fit(counts, [1, -1, 0, 1, -1, 0])
    >>> model.predict(counts).tolist()
    [1, -1, 0, 1, -1, 0]
    """

    def __init__(
        self,
        *,
        tie: str = "global",
        alpha: float = 1.0,
        kappa: float = 1.0,
        beta_bounds: tuple[float, float] = (0.0, 50.0),
        eta_bounds: tuple[float, float] = (-20.0, 20.0),
        gamma_bounds: tuple[float, float] = (-50.0, 50.0),
        n_starts: int = 5,
        decision: str = "mae",
        l2: float = 0.0,
        tol: float = 1e-10,
        random_state: int | None = 0,
    ) -> None:
        self.tie = tie
        self.alpha = alpha
        self.kappa = kappa
        self.beta_bounds = beta_bounds
        self.eta_bounds = eta_bounds
        self.gamma_bounds = gamma_bounds
        self.n_starts = n_starts
        self.decision = decision
        self.l2 = l2
        self.tol = tol
        self.random_state = random_state

    def _check_params(self) -> None:
        where = "DavidsonAggregator"
        if self.tie not in TIE_MODELS:
            raise ConfigError(f"{where}: tie: must be one of {list(TIE_MODELS)}, got {self.tie!r}")
        if self.decision not in ("mae", "accuracy"):
            raise ConfigError(f"{where}: decision: must be 'mae' or 'accuracy', got {self.decision!r}")
        check_param(self.n_starts, where=where, name="n_starts", target_type=numbers.Integral, min_val=1)
        for name in ("alpha", "kappa"):
            check_param(
                getattr(self, name),
                where=where,
                name=name,
                target_type=numbers.Real,
                min_val=0.0,
                include_boundaries="neither",
            )
        check_param(self.l2, where=where, name="l2", target_type=numbers.Real, min_val=0.0)

    def _features(self, counts: npt.ArrayLike, where: str) -> tuple[FloatArray, FloatArray]:
        return davidson_features(check_counts(counts, where=where), alpha=self.alpha, kappa=self.kappa)

    def _starts(self, tie_rate: float) -> FloatArray:
        pi0 = float(np.clip(tie_rate, 0.01, 0.99))
        eta0 = np.log(2 * pi0 / (1 - pi0))  # p(0) at s = 0 equals the calibration tie rate (spec 003 §3.6)
        first = {"beta": 1.0, "eta0": eta0, "gamma": 0.0}
        names = _PARAMS[self.tie]
        rng = np.random.default_rng(self.random_state)
        rand = {
            "beta": rng.uniform(0, 5, self.n_starts - 1),
            "eta0": rng.uniform(-3, 3, self.n_starts - 1),
            "gamma": rng.uniform(-3, 3, self.n_starts - 1),
        }
        starts = [[first[p] for p in names]] + [[rand[p][j] for p in names] for j in range(self.n_starts - 1)]
        lo, hi = np.array(self._bounds()).T
        return np.clip(np.array(starts, dtype=np.float64), lo, hi)

    def _bounds(self) -> list[tuple[float, float]]:
        table = {"beta": self.beta_bounds, "eta0": self.eta_bounds, "gamma": self.gamma_bounds}
        return [(float(table[p][0]), float(table[p][1])) for p in _PARAMS[self.tie]]

    def fit(self, counts: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Fit the parameters on calibration items by L-BFGS-B from every start.

        Parameters
        ----------
        counts : array-like of shape (n_items, 3)
            ``(c+, c0, c-)`` per item.
        y : array-like of shape (n_items,)
            Labels in {-1, 0, +1}.
        sample_weight : array-like of shape (n_items,), optional
            Item weights (e.g. multiplicities of identical (counts, label) cells).

        Returns
        -------
        self

        Warns
        -----
        ConvergenceWarning
            When starts end more than 1e-6 apart in loss (the problem is convex, so they should agree) or an
            optimiser run reports failure.
        """
        self._check_params()
        s, t = self._features(counts, "DavidsonAggregator.fit")
        yi = _label_index(y, "DavidsonAggregator.fit")
        if len(yi) != len(s):
            raise InputError(f"DavidsonAggregator.fit: counts has {len(s)} items, y has {len(yi)}")
        w = np.ones(len(s)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        X = davidson_design(s, t, self.tie)
        bounds = self._bounds()
        # The problem has 2-3 parameters: BLAS threads inside L-BFGS-B only contend (spin-waits cost ~20x on a
        # busy machine), so the fit runs single-threaded.
        with threadpool_limits(limits=1, user_api="blas"):
            results = [
                minimize(
                    davidson_nll,
                    x0,
                    args=(X, yi, w, self.l2),
                    jac=True,
                    method="L-BFGS-B",
                    bounds=bounds,
                    options={"ftol": self.tol, "gtol": 1e-8, "maxiter": 1000},
                )
                for x0 in self._starts(float((w * (yi == 1)).sum() / w.sum()))
            ]
        losses = np.array([r.fun for r in results])
        best = results[int(np.argmin(losses))]
        if losses.max() - losses.min() > 1e-6 or not best.success:
            warnings.warn(
                f"DavidsonAggregator.fit: starts disagree by {losses.max() - losses.min():.2e} in loss "
                f"(best: {best.message})",
                ConvergenceWarning,
                stacklevel=2,
            )
        names = _PARAMS[self.tie]
        self.coef_ = {p: float(v) for p, v in zip(names, best.x, strict=True)}
        self.at_bound_ = {
            p: bool(np.isclose(v, lo) or np.isclose(v, hi))
            for p, v, (lo, hi) in zip(names, best.x, bounds, strict=True)
        }
        self.loss_, self.start_losses_, self.n_iter_ = float(best.fun), losses, int(best.nit)
        return self

    def _logits(self, counts: npt.ArrayLike, where: str) -> FloatArray:
        check_is_fitted(self)
        s, t = self._features(counts, where)
        theta = np.array([self.coef_[p] for p in _PARAMS[self.tie]])
        return np.asarray(davidson_design(s, t, self.tie) @ theta, dtype=np.float64)

    def predict_proba(self, counts: npt.ArrayLike) -> FloatArray:
        """Label distribution per item, columns P(-1), P(0), P(+1)."""
        return np.asarray(softmax(self._logits(counts, "DavidsonAggregator.predict_proba"), axis=1), np.float64)

    def predict(self, counts: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The Bayes action of ``decision`` per item, in {-1, 0, +1}."""
        z = self._logits(counts, "DavidsonAggregator.predict")
        u, eta = z[:, 2], z[:, 1]
        if self.decision == "mae":
            return mae_action(u, eta)
        # Mode of p: 0 when eta >= |u|, else the sign of u (ties toward 0).
        return np.where(eta >= np.abs(u), 0, np.sign(u)).astype(np.int64)
