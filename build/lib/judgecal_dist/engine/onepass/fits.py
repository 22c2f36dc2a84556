"""The in-memory Platt and beta fits, their objective sums answered by an ``evaluate`` callback.

Each function runs exactly the optimiser of :class:`~judgecal_dist.methods.calibration.platt.PlattCalibrator` /
:class:`~judgecal_dist.methods.calibration.beta.BetaCalibration` (same start, options, penalty and degenerate-case rules), but
the data sums of every objective evaluation come from ``evaluate(("platt" | "beta", column, 1 / m, params))``:
a shared data pass (:func:`judgecal_dist.engine.onepass.lockstep.run_lockstep`) or weighted vote-pattern cells
(:class:`judgecal_dist.engine.onepass.patterns.PatternTable`). The penalty is added here, once.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import logit
from sklearn.exceptions import ConvergenceWarning

from judgecal_dist.methods.calibration import beta as beta_module
from judgecal_dist.methods.calibration import platt as platt_module

__all__ = ["fit_platt", "fit_beta"]

_BETA_UPPER = np.array([np.inf, np.inf, np.inf, 1.0, 1.0, np.inf])  # as BetaCalibration: a, b >= 0


def _classes_separated(lo: np.ndarray, hi: np.ndarray) -> bool:
    # calibration.base.separates on the class ranges: max(x0) <= min(x1) or max(x1) <= min(x0)
    return bool(hi[0] <= lo[1] or hi[1] <= lo[0])


def fit_platt(model: Any, k: int, m: int, n_pos: int, lo: np.ndarray, hi: np.ndarray, evaluate: Any) -> tuple:
    """PlattCalibrator.fit without features; ``((slope, intercept, 0), fallback, n_iter)``.

    ``lo``/``hi`` are the per-class min and max of the calibration inputs (the degenerate-case rules).
    """
    penalty = float(model.penalty)
    if penalty == 0.0 and n_pos in (0, m):
        return (1.0, 0.0, 0.0), "constant_labels", 0
    theta0, free, fallback = np.array([1.0, 0.0]), np.array([True, True]), None
    if penalty == 0.0 and np.nanmin(lo) == np.nanmax(hi):
        free[0], theta0[0], fallback = False, 0.0, "constant_scores"
    elif penalty == 0.0 and _classes_separated(lo, hi):
        warnings.warn(
            "PlattCalibrator (one-pass): a threshold on s separates the classes: the unpenalised fit has "
            "no finite optimum",
            ConvergenceWarning,
            stacklevel=2,
        )
    cache: dict[bytes, tuple[float, np.ndarray, np.ndarray]] = {}

    def stats(theta_free: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        key = theta_free.tobytes()
        if key not in cache:
            theta = theta0.copy()
            theta[free] = theta_free
            s = evaluate(("platt", k, 1.0 / m, (float(theta[0]), float(theta[1]))))
            grad, hess = s[1:3], np.array([[s[3], s[4]], [s[4], s[5]]])
            empty = np.empty((0, int(free.sum())))  # the penalty alone, with the in-memory formula
            pen, pen_grad = platt_module.objective(theta_free, empty, np.empty(0), np.empty(0), penalty, theta0[free])
            pen_hess = platt_module.hessian(theta_free, empty, np.empty(0), np.empty(0), penalty, theta0[free])
            cache.clear()
            cache[key] = (float(s[0]) + pen, grad[free] + pen_grad, hess[np.ix_(free, free)] + pen_hess)
        return cache[key]

    res = minimize(
        lambda th: stats(th)[:2],
        x0=theta0[free],
        jac=True,
        hess=lambda th: stats(th)[2],
        method="trust-exact",
        options={"gtol": platt_module.GTOL, "maxiter": platt_module.MAX_ITER},
    )
    theta = theta0.copy()
    theta[free] = res.x
    return (float(theta[0]), float(theta[1]), 0.0), fallback, int(res.nit)


def fit_beta(model: Any, k: int, m: int, n_pos: int, lo: np.ndarray, hi: np.ndarray, evaluate: Any) -> tuple:
    """BetaCalibration.fit; ``((a, b, c), fallback, n_iter)``."""
    lam, l1_ratio = model.check_params("BetaCalibration (one-pass)")
    if lam == 0.0 and n_pos in (0, m):
        return (1.0, 1.0, 0.0), "constant_labels", 0
    if lam == 0.0 and np.nanmin(lo) == np.nanmax(hi):
        mean_y = np.clip(n_pos / m, model.eps, 1.0 - model.eps)
        return (0.0, 0.0, float(logit(mean_y))), "constant_scores", 0
    if lam == 0.0 and _classes_separated(lo, hi):
        warnings.warn(
            "BetaCalibration (one-pass): a threshold on s separates the classes: unregularised beta "
            "calibration has no finite optimum",
            ConvergenceWarning,
            stacklevel=2,
        )
    if model.penalty_scale == "sum":
        lam = lam / m

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        abc = beta_module.IDENTITY + v[:3] - v[3:]
        s = evaluate(("beta", k, 1.0 / m, (float(abc[0]), float(abc[1]), float(abc[2]))))
        pen, pen_grad = beta_module.objective(v, np.empty((0, 3)), np.empty(0), np.empty(0), lam, l1_ratio)
        return float(s[0]) + pen, pen_grad + np.concatenate([s[1:4], -s[1:4]])

    res = minimize(
        objective,
        x0=np.zeros(6),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(np.zeros(6), _BETA_UPPER, strict=True)),
        options={"gtol": beta_module.GTOL, "ftol": 0.0, "maxiter": beta_module.MAX_ITER},
    )
    a, b, c = beta_module.IDENTITY + res.x[:3] - res.x[3:]
    return (max(float(a), 0.0), max(float(b), 0.0), float(c)), None, int(res.nit)
