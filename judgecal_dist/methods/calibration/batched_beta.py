r"""Beta calibration fitted for many score vectors at once: a batched orthant-wise projected Newton method.

Subset search (spec 000 §3.6) scores thousands of candidate panels per split, each by the cross-validated NLL of
beta calibration refitted on the candidate's scores. One :class:`~judgecal_dist.methods.calibration.beta.BetaCalibration`
fit costs about a millisecond of scipy overhead for a problem of three parameters and ~60 items; here every
(candidate, fold) problem advances together, as numpy operations over a ``(problems, items)`` array, so the
per-fit cost is a few microseconds. The objective is exactly :class:`BetaCalibration`'s (mean scale):

.. math::

    \min_{u}\ \sum_i w_i\,\ell\big(\sigma(f_i^\top(e + u)), y_i\big)
    + \lambda\Big[\alpha_{\mathrm{en}}\lVert u\rVert_1 + \tfrac{1-\alpha_{\mathrm{en}}}{2}\lVert u\rVert_2^2\Big],
    \qquad u_a, u_b \ge -1,

with :math:`f_i = (\ln s_i, -\ln(1-s_i), 1)`, :math:`e = (1, 1, 0)` (the identity map, the start) and
:math:`\sum_i w_i = 1` per problem (a zero weight leaves an item out, which is how cross-validation folds share
one item axis). Each iteration takes the L1 pseudo-gradient (Andrew & Gao [1]_), fixes coordinates that sit at
zero or at a bound with no descent, solves the Newton system on the free coordinates, projects the step back onto
the orthant and the box, and backtracks (Armijo) on the exact objective.

References
----------
.. [1] G. Andrew, J. Gao. Scalable training of L1-regularized log-linear models. ICML 2007 (orthant-wise steps).
.. [2] M. Kull, T. M. Silva Filho, P. Flach. Beta calibration. AISTATS 2017, PMLR 54:623-631.
.. [3] D. P. Bertsekas. Projected Newton methods for optimization problems with simple constraints. SIAM J.
   Control Optim. 20(2):221-246, 1982.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import expit, log_expit

from judgecal_dist.errors import ConfigError, InputError

__all__ = ["beta_features", "fit_beta_batched", "beta_cv_nll", "beta_cv_losses"]

_IDENTITY = np.array([1.0, 1.0, 0.0])
_STEPS = 0.25 ** np.arange(9)  # backtracking step sizes, all tried at once
_ARMIJO = 1e-4


def beta_features(scores: npt.ArrayLike, *, score_input: str = "logit", eps: float = 1e-6) -> npt.NDArray[np.float64]:
    r"""Beta-calibration features :math:`(\ln s, -\ln(1-s), 1)` of scores of any leading shape: ``(..., n, 3)``.

    ``score_input="logit"``: scores are log-odds :math:`t`, :math:`\ln s = \log\sigma(t)` (finite for any
    :math:`t`); ``"probability"``: scores are clipped to :math:`[\varepsilon, 1-\varepsilon]` first, as
    :class:`~judgecal_dist.methods.calibration.beta.BetaCalibration` does.
    """
    t = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(t).all():
        raise InputError("beta_features: scores: must be finite")
    if score_input == "logit":
        log_s, log_1ms = log_expit(t), log_expit(-t)
    elif score_input == "probability":
        s = np.clip(t, eps, 1.0 - eps)
        log_s, log_1ms = np.log(s), np.log1p(-s)
    else:
        raise ConfigError(f"beta_features: score_input: must be 'logit' or 'probability', got {score_input!r}")
    return np.stack([log_s, -log_1ms, np.ones_like(t)], axis=-1)


def _logits(F: npt.NDArray[np.float64], theta: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``F @ theta`` per problem, theta of shape (..., b, 3); written out because einsum is 5x slower here."""
    return np.asarray(
        F[..., 0] * theta[..., :, 0:1] + F[..., 1] * theta[..., :, 1:2] + theta[..., :, 2:3], dtype=np.float64
    )


def _objective(
    u: npt.NDArray[np.float64],
    F: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    lam_l1: float,
    lam_l2: float,
) -> npt.NDArray[np.float64]:
    """Objective at ``u`` of shape (..., b, 3) for problems (F, y, w) of shape (b, n, 3), (b, n), (b, n)."""
    t = _logits(F, _IDENTITY + u)
    loss = (w * np.logaddexp(0.0, (1.0 - 2.0 * y) * t)).sum(axis=-1)
    return np.asarray(loss + lam_l1 * np.abs(u).sum(axis=-1) + 0.5 * lam_l2 * (u * u).sum(axis=-1))


def fit_beta_batched(
    F: npt.ArrayLike,
    y: npt.ArrayLike,
    w: npt.ArrayLike,
    *,
    penalty: float = 0.01,
    l1_ratio: float = 0.5,
    tol: float = 1e-9,
    max_iter: int = 100,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    r"""Fit beta calibration (elastic net toward the identity, :math:`a, b \ge 0`) for ``B`` problems at once.

    Parameters
    ----------
    F : array-like of shape (B, n, 3)
        Features :func:`beta_features` of each problem's scores.
    y : array-like of shape (n,) or (B, n)
        Labels in {0, 1}.
    w : array-like of shape (n,) or (B, n)
        Non-negative item weights; each problem's weights are normalised to sum 1 (the ``"mean"`` scale).
    penalty, l1_ratio : float
        :math:`\lambda \ge 0` and :math:`\alpha_{\mathrm{en}} \in [0, 1]`, as in
        :class:`~judgecal_dist.methods.calibration.beta.BetaCalibration`.
    tol : float, default 1e-9
        Stop a problem when its largest pseudo-gradient entry (the KKT violation) is below ``tol``.
    max_iter : int, default 100
        Newton iterations at most.

    Returns
    -------
    params : ndarray of shape (B, 3)
        :math:`(a, b, c)` per problem.
    converged : ndarray of bool, shape (B,)
        Whether the KKT tolerance was met (a problem whose line search cannot improve further in float64 is
        also reported as converged when its violation is below 1e-6).

    Raises
    ------
    InputError
        If shapes disagree, or a problem has no positive weight.
    ConfigError
        If ``penalty`` or ``l1_ratio`` is out of range.

    Notes
    -----
    Cost per iteration :math:`O(Bn)` plus a 3x3 solve per problem; 5-20 iterations are typical. With
    ``penalty == 0`` on separable data the optimum is infinite and the problem reports not converged.
    """
    F, y, w = _checked(F, y, w, penalty, l1_ratio)
    B = F.shape[0]
    lam_l1, lam_l2 = penalty * l1_ratio, penalty * (1.0 - l1_ratio)
    lower = np.array([-1.0, -1.0, -np.inf])  # a, b >= 0
    u = _initial_scale(F, y, w, lam_l1, lam_l2)
    f = _objective(u, F, y, w, lam_l1, lam_l2)
    active = np.ones(B, dtype=bool)
    converged = np.zeros(B, dtype=bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        Fa, ya, wa, ua = F[idx], y[idx], w[idx], u[idx]
        g, H = _gradient_hessian(Fa, ya, wa, ua, lam_l2)
        pg, at_zero, at_bound = _pseudo_gradient(ua, g, lam_l1, lower)
        viol = np.abs(pg).max(axis=1)
        done = viol < tol
        converged[idx[done]] = True
        fixed = (pg == 0.0) & (at_zero | at_bound)
        keep = ~done
        if not keep.any():
            active[idx] = False
            break
        idx, ua, pg, H, fixed = idx[keep], ua[keep], pg[keep], H[keep], fixed[keep]
        Fa, ya, wa = Fa[keep], ya[keep], wa[keep]
        d = _newton_direction(H, pg, fixed)
        orthant = np.where(ua != 0, np.sign(ua), -np.sign(pg))
        found, u_new, f_new = _line_search(ua, d, pg, orthant, lower, Fa, ya, wa, f[idx], lam_l1, lam_l2)
        u[idx[found]] = u_new[found]
        f[idx[found]] = f_new[found]
        stalled = idx[~found]  # no decrease representable in float64: at the optimum up to round-off
        converged[stalled] = viol[keep][~found] < 1e-6
        active[stalled] = False
    a_b_c = _IDENTITY + u
    a_b_c[:, :2] = np.maximum(a_b_c[:, :2], 0.0)
    return a_b_c, converged


def _checked(
    F: npt.ArrayLike, y: npt.ArrayLike, w: npt.ArrayLike, penalty: float, l1_ratio: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Features, labels broadcast to (B, n) and weights normalised per problem, once the shapes and settings hold."""
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 3 or F.shape[2] != 3:
        raise InputError(f"fit_beta_batched: F: expected shape (B, n, 3), got {F.shape}")
    B, n, _ = F.shape
    y = np.broadcast_to(np.asarray(y, dtype=np.float64), (B, n))
    w = np.broadcast_to(np.asarray(w, dtype=np.float64), (B, n))
    total = w.sum(axis=1, keepdims=True)
    if (total <= 0).any() or (w < 0).any():
        raise InputError("fit_beta_batched: w: every problem needs non-negative weights with a positive sum")
    if penalty < 0 or not 0.0 <= l1_ratio <= 1.0:
        raise ConfigError(f"fit_beta_batched: need penalty >= 0 and l1_ratio in [0, 1], got {penalty}, {l1_ratio}")
    return F, y, w / total


def _gradient_hessian(
    Fa: npt.NDArray[np.float64],
    ya: npt.NDArray[np.float64],
    wa: npt.NDArray[np.float64],
    ua: npt.NDArray[np.float64],
    lam_l2: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Gradient (B, 3) and Hessian (B, 3, 3) of the smooth part of the objective (log loss + L2) at ``ua``."""
    p = expit(_logits(Fa, _IDENTITY + ua))
    r, q = wa * (p - ya), wa * p * (1.0 - p)
    f0, f1 = Fa[..., 0], Fa[..., 1]
    g = np.column_stack([(f0 * r).sum(1), (f1 * r).sum(1), r.sum(1)]) + lam_l2 * ua
    q0, q1 = f0 * q, f1 * q
    h00, h01, h02, h11, h12, h22 = (
        (q0 * f0).sum(1),
        (q0 * f1).sum(1),
        q0.sum(1),
        (q1 * f1).sum(1),
        q1.sum(1),
        q.sum(1),
    )
    H = np.stack([h00, h01, h02, h01, h11, h12, h02, h12, h22], axis=1).reshape(-1, 3, 3)
    return g, H + (lam_l2 + 1e-12) * np.eye(3)


def _pseudo_gradient(
    ua: npt.NDArray[np.float64], g: npt.NDArray[np.float64], lam_l1: float, lower: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """The pseudo-gradient of the L1 term (Andrew & Gao: one-sided derivatives where u = 0), zero where a bound
    holds it; with the masks of the entries at zero and at their bound."""
    pg = np.where(ua > 0, g + lam_l1, np.where(ua < 0, g - lam_l1, 0.0))
    at_zero = ua == 0
    pg = np.where(at_zero & (g + lam_l1 < 0), g + lam_l1, pg)
    pg = np.where(at_zero & (g - lam_l1 > 0), g - lam_l1, pg)
    at_bound = ua <= lower
    return np.where(at_bound & (pg > 0), 0.0, pg), at_zero, at_bound


def _newton_direction(
    H: npt.NDArray[np.float64], pg: npt.NDArray[np.float64], fixed: npt.NDArray[np.bool_]
) -> npt.NDArray[np.float64]:
    """The Newton step on the free entries (fixed ones held), or steepest descent where that is no descent."""
    eye = np.broadcast_to(np.eye(3), H.shape)
    free2 = (~fixed)[:, :, None] & (~fixed)[:, None, :]
    Hm = np.where(free2, H, eye)
    d = -np.linalg.solve(Hm, np.where(fixed, 0.0, pg)[:, :, None])[:, :, 0]
    descent = (d * pg).sum(axis=1) < 0
    return np.where(descent[:, None], d, -np.where(fixed, 0.0, pg))


def _initial_scale(
    F: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64], lam_l1: float, lam_l2: float
) -> npt.NDArray[np.float64]:
    """Start of each problem: the best map :math:`(a, b, c) = (k, k, 0)` over a grid of :math:`k \\in (0, 1]`.

    Log-odds of a large panel are tens to hundreds of nats, so the optimum's slopes are far below the identity's
    1; Newton from the identity crawls through the loss's linear region. The grid includes :math:`k = 1` (the
    identity), so the start is never worse than it.
    """
    k = np.array([1.0, 0.3, 0.1, 0.03, 0.01, 0.003])
    cand = np.zeros((k.size, F.shape[0], 3))
    cand[:, :, 0] = cand[:, :, 1] = (k - 1.0)[:, None]
    best = np.argmin(_objective(cand, F, y, w, lam_l1, lam_l2), axis=0)
    return np.asarray(cand[best, np.arange(F.shape[0])])


def _project(
    cand: npt.NDArray[np.float64], orthant: npt.NDArray[np.float64], lower: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Zero the coordinates that left their orthant, then clip to the box (a, b >= 0)."""
    return np.maximum(np.where(np.sign(cand) * orthant < 0, 0.0, cand), lower)


def _line_search(
    ua: npt.NDArray[np.float64],
    d: npt.NDArray[np.float64],
    pg: npt.NDArray[np.float64],
    orthant: npt.NDArray[np.float64],
    lower: npt.NDArray[np.float64],
    F: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    f_old: npt.NDArray[np.float64],
    lam_l1: float,
    lam_l2: float,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Armijo backtracking: the full Newton step for every problem, then all shorter steps at once for the rest."""
    u_new = _project(ua + d, orthant, lower)
    f_new = _objective(u_new, F, y, w, lam_l1, lam_l2)
    found = f_new <= f_old + _ARMIJO * ((u_new - ua) * pg).sum(axis=1)
    retry = np.flatnonzero(~found)
    if retry.size:
        cand = _project(ua[retry][None] + _STEPS[1:, None, None] * d[retry][None], orthant[retry][None], lower)
        f_c = _objective(cand, F[retry], y[retry], w[retry], lam_l1, lam_l2)  # (S, r)
        ok = f_c <= f_old[retry][None] + _ARMIJO * np.einsum("sbk,bk->sb", cand - ua[retry][None], pg[retry])
        first = np.argmax(ok, axis=0)
        cols = np.arange(retry.size)
        hit = ok[first, cols]
        u_new[retry[hit]] = cand[first[hit], cols[hit]]
        f_new[retry[hit]] = f_c[first[hit], cols[hit]]
        found[retry[hit]] = True
    return found, u_new, f_new


def beta_cv_nll(
    t: npt.ArrayLike,
    y: npt.ArrayLike,
    folds: npt.ArrayLike,
    *,
    penalty: float = 0.01,
    l1_ratio: float = 0.5,
    score_input: str = "logit",
    eps: float = 1e-6,
) -> npt.NDArray[np.float64]:
    """Mean of :func:`beta_cv_losses` over the items: one cross-validated NLL per row of ``t``."""
    losses = beta_cv_losses(t, y, folds, penalty=penalty, l1_ratio=l1_ratio, score_input=score_input, eps=eps)
    return np.asarray(losses.mean(axis=1))


def beta_cv_losses(
    t: npt.ArrayLike,
    y: npt.ArrayLike,
    folds: npt.ArrayLike,
    *,
    penalty: float = 0.01,
    l1_ratio: float = 0.5,
    score_input: str = "logit",
    eps: float = 1e-6,
) -> npt.NDArray[np.float64]:
    r"""K-fold cross-validated NLL of beta calibration for each row of ``t`` (spec 000 §3.6 inner protocol).

    For each candidate score vector and each fold, beta calibration is fitted on the other folds and scores the
    held-out items; the result is each item's held-out log-loss (the items' mean is :func:`beta_cv_nll`), with the calibrated probability
    clipped to :math:`[\varepsilon, 1-\varepsilon]` as in the study's metrics.

    Parameters
    ----------
    t : array-like of shape (C, n)
        Candidate scores (log-odds, or probabilities with ``score_input="probability"``).
    y : array-like of shape (n,)
        Labels in {0, 1}.
    folds : array-like of int, shape (n,)
        Fold index of each item, 0..K-1 (K >= 2; every fold must leave training items).

    Returns
    -------
    ndarray of shape (C, n)
    """
    T = np.atleast_2d(np.asarray(t, dtype=np.float64))
    labels = np.asarray(y, dtype=np.float64)
    fold = np.asarray(folds)
    ks = np.unique(fold)
    if ks.size < 2 or T.shape[1] != labels.size or fold.shape != labels.shape:
        raise InputError(f"beta_cv_nll: need >= 2 folds and matching lengths, got {ks.size} folds, {T.shape}")
    C, n = T.shape
    F = beta_features(T, score_input=score_input, eps=eps)  # (C, n, 3)
    train = (fold[None, :] != ks[:, None]).astype(np.float64)  # (K, n)
    FF = np.repeat(F, ks.size, axis=0)  # problem = (candidate c, fold k) -> c * K + k
    ww = np.tile(train, (C, 1))
    params, _ = fit_beta_batched(FF, labels, ww, penalty=penalty, l1_ratio=l1_ratio, tol=1e-7)
    logits = _logits(FF, params).reshape(C, ks.size, n)
    held = fold[None, :] == ks[:, None]  # (K, n)
    t_held = (logits * held[None]).sum(axis=1)  # each item's logit from the fold that held it out
    p = np.clip(expit(t_held), eps, 1.0 - eps)
    return np.asarray(-(labels * np.log(p) + (1.0 - labels) * np.log1p(-p)))
