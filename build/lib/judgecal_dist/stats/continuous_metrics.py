r"""Metrics of a corrected continuous score against the reference (spec 001 §6), one test set, paired.

``mean_error`` (Q1, sign: reference minus corrected), ``mae`` and ``pearson`` (Q2), ``kde_kl`` (Q3: Gaussian
KDEs with Scott's rule on a 500-point grid of the bounded support, in the paper's direction
:math:`\mathrm{KL}(\hat p \| q)`, and the symmetrised mean as an extra column) and ``w1`` (Wasserstein-1).
Undefined values (Pearson or KDE of a constant) are NaN, never an exception.

References
----------
.. [1] L. Morandi. Two Ways to De-Bias an LLM-as-a-Judge. 2026, §VI-D, §VIII-C.
.. [2] D. W. Scott. Multivariate Density Estimation. Wiley, 1992 (Scott's rule).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import gaussian_kde, pearsonr, spearmanr, wasserstein_distance

from judgecal_dist.errors import InputError

__all__ = ["mean_error", "kde_on_grid", "kde_kl", "continuous_metrics", "METRICS"]

#: Metric columns of :func:`continuous_metrics`.
METRICS = ("mean_error", "mae", "pearson", "spearman", "kl", "kl_sym", "w1")
KL_EPS = 1e-10
Array = npt.NDArray[np.float64]


def _pair(y: npt.ArrayLike, y_hat: npt.ArrayLike) -> tuple[Array, Array]:
    y, y_hat = np.asarray(y, dtype=np.float64).ravel(), np.asarray(y_hat, dtype=np.float64).ravel()
    if y.size != y_hat.size or y.size < 2:
        raise InputError(f"continuous metrics: y, y_hat: need equal lengths >= 2, got {y.size} and {y_hat.size}")
    if not (np.isfinite(y).all() and np.isfinite(y_hat).all()):
        raise InputError("continuous metrics: y, y_hat: non-finite values")
    return y, y_hat


def mean_error(y: npt.ArrayLike, y_hat: npt.ArrayLike) -> float:
    r""":math:`\bar y - \bar{\hat y}` (positive: the corrector under-rates)."""
    y, y_hat = _pair(y, y_hat)
    return float(y.mean() - y_hat.mean())


def kde_on_grid(x: npt.ArrayLike, grid: Array) -> Array | None:
    """Scott-bandwidth Gaussian KDE of ``x`` normalised to a distribution on ``grid``; None for a constant sample."""
    x = np.asarray(x, dtype=np.float64)
    if np.ptp(x) == 0.0:
        return None
    dens = gaussian_kde(x, bw_method="scott")(grid)
    return dens / dens.sum()


def kde_kl(
    y_hat: npt.ArrayLike, y: npt.ArrayLike, *, support: tuple[float, float] = (1.0, 5.0), n_grid: int = 500
) -> tuple[float, float]:
    r"""Directional :math:`\mathrm{KL}(\hat p \| q) = \sum_k p_k \log\frac{p_k + \varepsilon}{q_k + \varepsilon}` and
    the symmetrised :math:`\tfrac12[\mathrm{KL}(\hat p\|q) + \mathrm{KL}(q\|\hat p)]` (NaN for a constant sample)."""
    grid = np.linspace(support[0], support[1], n_grid)
    p, q = kde_on_grid(y_hat, grid), kde_on_grid(y, grid)
    if p is None or q is None:
        return float("nan"), float("nan")
    forward = float(np.sum(p * np.log((p + KL_EPS) / (q + KL_EPS))))
    backward = float(np.sum(q * np.log((q + KL_EPS) / (p + KL_EPS))))
    return forward, 0.5 * (forward + backward)


def continuous_metrics(
    y: npt.ArrayLike, y_hat: npt.ArrayLike, *, support: tuple[float, float] = (1.0, 5.0)
) -> dict[str, float]:
    """All metrics of :data:`METRICS` for one corrector on one test set.

    Examples
    --------
    >>> m = continuous_metrics([1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 3.5, 4.5])
    >>> round(m["mean_error"], 3), round(m["mae"], 3), round(m["pearson"], 3), round(m["w1"], 3)
    (-0.5, 0.5, 1.0, 0.5)
    """
    y, y_hat = _pair(y, y_hat)
    constant = np.ptp(y) == 0.0 or np.ptp(y_hat) == 0.0
    kl, kl_sym = kde_kl(y_hat, y, support=support)
    return {
        "mean_error": float(y.mean() - y_hat.mean()),
        "mae": float(np.mean(np.abs(y_hat - y))),
        "pearson": float("nan") if constant else float(pearsonr(y_hat, y).statistic),
        "spearman": float("nan") if constant else float(spearmanr(y_hat, y).statistic),
        "kl": kl,
        "kl_sym": kl_sym,
        "w1": float(wasserstein_distance(y_hat, y)),
    }
