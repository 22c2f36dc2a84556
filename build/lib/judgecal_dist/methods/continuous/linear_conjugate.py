r"""Closed-form linear correctors of a continuous judge score (spec 001 §3.1, §3.8): OLS and the exact posterior.

Both work from the six sufficient statistics of a (judge, rubric) cell,
:math:`(n, S_j, S_y, S_{jj}, S_{jy}, S_{yy})`, vectorised over any leading axes (seeds x budgets x rubrics), so a
50-seed sweep is a handful of array operations rather than 100 sampler runs.

References
----------
.. [1] A. Gelman, J. B. Carlin, H. S. Stern, D. B. Dunson, A. Vehtari, D. B. Rubin. Bayesian Data Analysis,
   3rd ed. CRC Press, 2013, §14.2 (conjugate linear regression).
.. [2] L. Morandi. Two Ways to De-Bias an LLM-as-a-Judge. 2026, §IV-A, §VII-G (OLS proxy of the NUTS means).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq
from scipy.special import log_ndtr, logsumexp, ndtr
from scipy.stats import halfnorm
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError

__all__ = ["STAT_NAMES", "sufficient_stats", "ols_from_stats", "ConjugateLinear"]

#: Order of the last axis of a sufficient-statistics array.
STAT_NAMES = ("n", "s_j", "s_y", "s_jj", "s_jy", "s_yy")
Array = npt.NDArray[np.float64]


def sufficient_stats(j: npt.ArrayLike, y: npt.ArrayLike, *, axis: int = -1) -> Array:
    r"""Stack :math:`(n, \sum j, \sum y, \sum j^2, \sum jy, \sum y^2)` along a new last axis.

    ``j`` and ``y`` may hold NaN as padding (e.g. budgets shorter than the array): NaN pairs are not counted.

    Examples
    --------
    >>> sufficient_stats([1.0, 2.0], [2.0, 4.0]).tolist()
    [2.0, 3.0, 6.0, 5.0, 10.0, 20.0]
    """
    j, y = np.asarray(j, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = ~(np.isnan(j) | np.isnan(y))
    j0, y0 = np.where(ok, j, 0.0), np.where(ok, y, 0.0)
    parts = (ok, j0, y0, j0 * j0, j0 * y0, y0 * y0)
    return np.stack([np.sum(p, axis=axis, dtype=np.float64) for p in parts], axis=-1)


def _centred(stats: Array) -> tuple[Array, Array, Array, Array]:
    n, sj, sy, sjj, sjy, syy = np.moveaxis(np.asarray(stats, dtype=np.float64), -1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        vjj = sjj - sj * sj / n
        vjy = sjy - sj * sy / n
        vyy = syy - sy * sy / n
    return n, vjj, vjy, vyy


def ols_from_stats(stats: npt.ArrayLike) -> tuple[Array, Array, Array]:
    r"""OLS :math:`(\hat\alpha, \hat\beta, \hat\sigma)` from sufficient statistics (spec §3.8(a), paper Table 2).

    .. math:: \hat\beta = \frac{S_{jy} - S_jS_y/n}{S_{jj} - S_j^2/n},\quad \hat\alpha = (S_y - \hat\beta S_j)/n,\quad
              \hat\sigma^2 = \tfrac1n\sum_i (y_i - \hat\alpha - \hat\beta j_i)^2

    Raises
    ------
    InputError
        If a cell has fewer than 2 anchors or constant judge scores (the slope is not identified).
    """
    stats = np.asarray(stats, dtype=np.float64)
    n, vjj, vjy, vyy = _centred(stats)
    bad = (n < 2) | ~(vjj > 1e-12 * np.maximum(1.0, n))
    if np.any(bad):
        where = np.argwhere(np.atleast_1d(bad))[:3].tolist()
        raise InputError(
            f"ols: j: fewer than 2 anchors or constant judge scores in {int(np.sum(bad))} cell(s) (e.g. index {where}); "
            "the slope is not identified: use the hierarchical corrector, whose pooled prior covers such cells"
        )
    beta = vjy / vjj
    alpha = (stats[..., 2] - beta * stats[..., 1]) / n
    sigma = np.sqrt(np.maximum(vyy - beta * vjy, 0.0) / n)
    return alpha, beta, sigma


class ConjugateLinear(BaseEstimator):
    r"""Exact posterior of the single-cell linear corrector by 1-D quadrature over :math:`\sigma` (spec §3.8(b)).

    Model: :math:`y_i \sim \mathcal N(\alpha + \beta j_i, \sigma^2)`, :math:`(\alpha, \beta) \sim
    \mathcal N(m_0, S_0)`, :math:`\sigma \sim \mathcal N^+(0, s_\sigma^2)`. For fixed :math:`\sigma` the posterior of
    :math:`w = (\alpha, \beta)` is Gaussian,

    .. math:: S_n = (S_0^{-1} + X^\top X/\sigma^2)^{-1},\qquad m_n = S_n (S_0^{-1} m_0 + X^\top y / \sigma^2),

    and :math:`\sigma` is integrated on a grid weighted by prior x marginal likelihood. Works on any number of cells
    at once: ``fit`` takes sufficient statistics of shape ``(..., 6)``.

    Parameters
    ----------
    prior : (float, float, float, float)
        :math:`(\mu_\alpha, \tau_\alpha, \mu_\beta, \tau_\beta)`, standard deviations (spec §3.2: (0, 2, 1, 2)).
    sigma_scale : float
        HalfNormal scale of :math:`\sigma`.
    n_grid, sigma_max : int, float
        Quadrature grid: ``n_grid`` points on :math:`(0, \sigma_{max}]`.

    Attributes
    ----------
    mean_ : ndarray of shape (..., 2)
        :math:`E[(\alpha, \beta) \mid D]`.
    canary_prob_ : ndarray of shape (...)
        :math:`\Pr(\beta < 0.3 \mid D)`.
    sigma_mean_ : ndarray
        :math:`E[\sigma \mid D]`.
    """

    def __init__(
        self,
        *,
        prior: tuple[float, float, float, float] = (0.0, 2.0, 1.0, 2.0),
        sigma_scale: float = 1.0,
        n_grid: int = 4000,
        sigma_max: float = 3.0,
        canary_beta: float = 0.3,
    ) -> None:
        self.prior = prior
        self.sigma_scale = sigma_scale
        self.n_grid = n_grid
        self.sigma_max = sigma_max
        self.canary_beta = canary_beta

    def fit(self, stats: npt.ArrayLike) -> ConjugateLinear:
        """Posterior of every cell in ``stats`` (shape ``(..., 6)``, see :func:`sufficient_stats`)."""
        stats = np.asarray(stats, dtype=np.float64)
        if stats.shape[-1] != 6 or np.any(stats[..., 0] < 1):
            raise InputError("conjugate: stats: expected shape (..., 6) with n >= 1 in every cell")
        mu_a, tau_a, mu_b, tau_b = self.prior
        sig = np.linspace(self.sigma_max / self.n_grid, self.sigma_max, self.n_grid)
        s2 = sig[:, None] ** 2  # grid axis first, cells flattened after it
        flat = stats.reshape(-1, 6)
        n, sj, sy, sjj, sjy, syy = flat.T
        p0 = np.array([1 / tau_a**2, 1 / tau_b**2])
        m0 = np.array([mu_a, mu_b])
        # Precision matrix entries of S_n^{-1} (2x2), per grid point and cell.
        a11, a12, a22 = p0[0] + n / s2, sj / s2, p0[1] + sjj / s2
        det = a11 * a22 - a12 * a12
        b1, b2 = p0[0] * m0[0] + sy / s2, p0[1] * m0[1] + sjy / s2
        mean_a, mean_b = (a22 * b1 - a12 * b2) / det, (a11 * b2 - a12 * b1) / det
        var_b = a11 / det
        quad = mean_a * b1 + mean_b * b2  # m_n^T S_n^{-1} m_n
        log_ml = (
            -0.5 * n * np.log(2 * np.pi * s2)
            + 0.5 * np.log(p0[0] * p0[1])
            - 0.5 * np.log(det)
            - 0.5 * (syy / s2 + p0 @ m0**2 - quad)
        )
        log_w = log_ml + halfnorm.logpdf(sig, scale=self.sigma_scale)[:, None]
        w = np.exp(log_w - logsumexp(log_w, axis=0))
        shape = stats.shape[:-1]
        self.sigma_grid_ = sig
        self.weights_ = w.reshape((-1, *shape))
        self._cond = tuple(x.reshape((-1, *shape)) for x in (mean_a, mean_b, a11, a12, a22, det))
        self.mean_ = np.stack([np.sum(w * mean_a, 0), np.sum(w * mean_b, 0)], axis=-1).reshape((*shape, 2))
        self.sigma_mean_ = np.sum(w * sig[:, None], 0).reshape(shape)
        z = (self.canary_beta - mean_b) / np.sqrt(var_b)
        self.canary_prob_ = np.sum(w * ndtr(z), 0).reshape(shape)
        self.log_canary_ = logsumexp(np.log(w + 1e-300) + log_ndtr(z), axis=0).reshape(shape)
        return self

    def predict(self, j: npt.ArrayLike) -> Array:
        r"""Posterior-mean corrector :math:`\hat\alpha + \hat\beta j` (``j`` broadcasts against the cells' shape)."""
        check_is_fitted(self)
        j = np.asarray(j, dtype=np.float64)
        a, b = self.mean_[..., 0], self.mean_[..., 1]
        return a.reshape(a.shape + (1,) * (j.ndim - a.ndim)) + b.reshape(b.shape + (1,) * (j.ndim - b.ndim)) * j

    def posterior_moments(self) -> tuple[Array, Array]:
        r"""Posterior covariance of :math:`(\alpha, \beta)` (shape ``(..., 2, 2)``) and :math:`E[\sigma^2 \mid D]` of
        every cell: the moments of the :math:`\sigma`-grid mixture (what a normal summary of the predictive needs)."""
        check_is_fitted(self)
        ma, mb, a11, a12, a22, det = self._cond
        w = self.weights_
        mean_a, mean_b = self.mean_[..., 0], self.mean_[..., 1]
        caa = np.sum(w * (a22 / det + ma * ma), 0) - mean_a**2
        cab = np.sum(w * (-a12 / det + ma * mb), 0) - mean_a * mean_b
        cbb = np.sum(w * (a11 / det + mb * mb), 0) - mean_b**2
        cov = np.stack([np.stack([caa, cab], -1), np.stack([cab, cbb], -1)], -2)
        sig2 = self.sigma_grid_.reshape((-1,) + (1,) * (w.ndim - 1)) ** 2
        return cov, np.sum(w * sig2, 0)

    def _predictive_components(self, j: Array) -> tuple[Array, Array, Array]:
        if self.mean_.shape != (2,):
            raise InputError("conjugate: the predictive needs a single fitted cell (stats of shape (6,))")
        j = j[None, :]
        ma, mb, a11, a12, a22, det = (c[:, None] for c in self._cond)
        mu = ma + mb * j
        var = (a22 - 2 * a12 * j + a11 * j * j) / det + self.sigma_grid_[:, None] ** 2
        return self.weights_[:, None], mu, np.sqrt(var)

    def predictive_quantiles(self, j: npt.ArrayLike, q: float) -> Array:
        r"""Quantile ``q`` of the posterior predictive mixture at each score ``j`` (root of the mixture CDF)."""
        check_is_fitted(self)
        w, mu, sd = self._predictive_components(np.atleast_1d(np.asarray(j, dtype=np.float64)))
        out = []
        for i in range(mu.shape[1]):
            cdf = lambda x, i=i: float(np.sum(w[:, 0] * ndtr((x - mu[:, i]) / sd[:, i]))) - q  # noqa: E731
            lo, hi = float(mu[:, i].min() - 10 * sd[:, i].max()), float(mu[:, i].max() + 10 * sd[:, i].max())
            out.append(brentq(cdf, lo, hi, xtol=1e-8))
        return np.array(out)

    def predictive_moments(self, j: npt.ArrayLike) -> tuple[Array, Array]:
        r"""Mean and s.d. of the posterior predictive mixture :math:`\sum_k \pi_k \mathcal N(x^\top m_n, x^\top S_n x
        + \sigma_k^2)` at scores ``j`` (one cell: ``fit`` on stats of shape ``(6,)``)."""
        check_is_fitted(self)
        w, mu, sd = self._predictive_components(np.atleast_1d(np.asarray(j, dtype=np.float64)))
        var = sd * sd
        mean = np.sum(w * mu, 0)
        return mean, np.sqrt(np.sum(w * (var + mu * mu), 0) - mean**2)
