r"""Prediction-powered means with a calibrated panel as the proxy: PPI++, PPI and the classical mean of the labels.

One formula family over a population of :math:`N` items, :math:`n` of them labelled (outcome :math:`Y_i`), every
item with a proxy :math:`f_i` (the panel's prediction of the outcome):

.. math::

    \hat\theta_\lambda = \frac1N \sum_{i=1}^N \lambda f_i
        + \frac1N \sum_{i\ \mathrm{labelled}} \frac{Y_i - \lambda f_i}{\pi_i},

with :math:`\pi_i` the item's probability of having been labelled. :math:`\lambda = 0` is the classical
(Horvitz-Thompson) mean of the labels, :math:`\lambda = 1` is PPI (Angelopoulos et al. 2023) and the power-tuned
:math:`\hat\lambda` is PPI++ (Angelopoulos, Duchi and Zrnic 2023).

- **Uniform labels** (``inclusion_prob=None``, :math:`\pi_i = n/N`): exactly ``ppi_py.ppi_mean_ci`` /
  ``ppi_mean_pointestimate`` with every item's proxy as the "unlabelled" set: :math:`\hat\lambda =
  \widehat{\mathrm{Cov}}(Y, f) / ((1 + n/N)\,\widehat{\mathrm{Var}}(f))` clipped to [0, 1] and
  :math:`\widehat{se}^2 = \lambda^2 \widehat{\mathrm{Var}}(f_{\mathrm{all}})/N + \widehat{\mathrm{Var}}(Y - \lambda
  f)/n`. The labelled items' proxies sit inside the population mean too, a covariance of order :math:`1/N`.
- **Labels drawn with known** :math:`\pi_i` (active statistical inference, Zrnic and Candes 2024): with
  :math:`\xi_i` the item's label indicator, :math:`\hat\theta_\lambda` is the mean over all items of
  :math:`z_i = \lambda f_i + (Y_i - \lambda f_i)\xi_i/\pi_i`, :math:`\widehat{se}^2 = \widehat{\mathrm{Var}}(z)/N`
  (independent draws, a Bernoulli design; conservative for a fixed-size one) and :math:`\hat\lambda` the value
  that minimises it, clipped to [0, 1]. With :math:`\pi_i = n/N` the estimate equals the uniform one; its
  standard error adds the randomness of the label count under the Bernoulli design.

Everything is a function of a few sums per target (:class:`LabelMoments`), so the Spark job computes them in one
pass and finishes with the same code. The interval is the normal one, clipped to the outcome's range by the
interval service (:func:`~judgecal_dist.stats.intervals.normal_interval`); the effective number of labels is
:math:`n\,(\widehat{se}_{\mathrm{classical}} / \widehat{se})^2`, the labels the classical interval would need for
the same width. For labels drawn with known probabilities that classical interval is measured on uniform labels
(a 0/1 outcome's :math:`\hat\theta(1-\hat\theta)/\widehat{se}^2`): the inverse-probability classical interval of
the same draw is wider than a uniform sample's, and would flatter the active design.

References
----------
.. [1] A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic. Prediction-powered inference.
   Science 382(6671), 2023.
.. [2] A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference.
   arXiv:2311.01453, 2023.
.. [3] T. Zrnic, E. J. Candes. Active statistical inference. ICML 2024.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.labels.moments import LabelMoments, label_moments
from judgecal_dist.stats.checks import check_confidence
from judgecal_dist.stats.intervals import normal_interval
from judgecal_dist.stats.ranges import MetricRange

__all__ = ["ESTIMATE_COLUMNS", "METHODS", "LabelMoments", "PredictionPoweredMean", "estimates_frame", "label_moments"]

#: The estimators of :class:`PredictionPoweredMean` by name: the value of :math:`\lambda` (None: power-tuned).
METHODS: dict[str, float | None] = {"ppi++": None, "ppi": 1.0, "classical": 0.0}
_SHARE = MetricRange(0.0, 1.0)


@dataclass(frozen=True)
class _Fit:
    estimate: float
    se: float
    lam: float
    imputed_var: float  # the part of se**2 more labels do not shrink


def _uniform(m: LabelMoments, lam: float | None) -> _Fit:
    """PPI++ for uniform labels, the formulas of ``ppi_py.ppi_mean_ci`` (ddof 0 variances, ddof 1 in lambda)."""
    n, big_n = m.n, m.n_all
    if lam is None:
        cov = m.sum_fy / n - (m.sum_f / n) * (m.sum_y / n)
        pooled_n, pooled_s = n + big_n, m.sum_f + m.sum_f_all
        var_f = (m.sum_f2 + m.sum_f2_all - pooled_s * pooled_s / pooled_n) / (pooled_n - 1.0)
        lam = 0.0 if var_f <= 0.0 else float(np.clip(cov / ((1.0 + n / big_n) * var_f), 0.0, 1.0))
    mean_f_all = m.sum_f_all / big_n
    var_f_all = max(m.sum_f2_all / big_n - mean_f_all**2, 0.0)
    mean_r = (m.sum_y - lam * m.sum_f) / n
    var_r = max((m.sum_y2 - 2.0 * lam * m.sum_fy + lam * lam * m.sum_f2) / n - mean_r**2, 0.0)
    imputed = lam * lam * var_f_all / big_n
    return _Fit(lam * mean_f_all + mean_r, math.sqrt(imputed + var_r / n), lam, imputed)


def _weighted(m: LabelMoments, lam: float | None) -> _Fit:
    """The inverse-probability form: z = lam * a + b over all items, a = f (1 - xi/pi), b = Y xi / pi."""
    big_n = m.n_all
    sa = m.sum_f_all - m.sum_wf
    saa = m.sum_f2_all - 2.0 * m.sum_wf2 + m.sum_w2f2
    sb, sbb, sab = m.sum_wy, m.sum_w2y2, m.sum_wfy - m.sum_w2fy
    var_a = saa / big_n - (sa / big_n) ** 2
    cov_ab = sab / big_n - (sa / big_n) * (sb / big_n)
    if lam is None:
        lam = 0.0 if var_a <= 0.0 else float(np.clip(-cov_ab / var_a, 0.0, 1.0))
    mean_z = (lam * sa + sb) / big_n
    var_z = max((lam * lam * saa + 2.0 * lam * sab + sbb) / big_n - mean_z**2, 0.0)
    mean_f_all = m.sum_f_all / big_n
    imputed = lam * lam * max(m.sum_f2_all / big_n - mean_f_all**2, 0.0) / big_n
    return _Fit(mean_z, math.sqrt(var_z / big_n), lam, min(imputed, var_z / big_n))


#: The columns of ``estimates.parquet`` (the seam's, then the items in the target and the labels to halve it).
ESTIMATE_COLUMNS = [
    "target", "estimate", "lower", "upper", "method", "n_labels", "effective_labels", "classical_lower",
    "classical_upper", "classical_estimate", "lambda", "n_items", "labels_to_halve",
]  # fmt: skip


class PredictionPoweredMean:
    r"""Mean of an outcome over a population from a few labels and a proxy on every item (sklearn-style).

    Parameters
    ----------
    alpha : float, default 0.05
        One minus the confidence level of the intervals.
    method : {"ppi++", "ppi", "classical"}, default "ppi++"
        Power-tuned :math:`\lambda`, :math:`\lambda = 1`, or :math:`\lambda = 0` (labels only).
    bounds : MetricRange, None or "auto", default "auto"
        The outcome's range, which the interval is kept inside; ``"auto"``: [0, 1] when every label is 0 or 1.

    Attributes
    ----------
    estimate_, interval_ (lower, upper), se_, lambda_, n_labels_, effective_labels_, classical_estimate_,
    classical_interval_, classical_se_, interval_method_ : the fitted values (see the module's formulas).

    Examples
    --------
    Labels that agree with a good proxy: the PPI++ interval is narrower than the classical one.

    >>> rng = np.random.default_rng(0)
    >>> f_all = rng.uniform(size=2000)
    >>> y_all = (rng.uniform(size=2000) < f_all).astype(float)
    >>> est = PredictionPoweredMean().fit(y_all[:100], f_all[:100], f_all)
    >>> bool(est.effective_labels_ > est.n_labels_), est.lambda_ > 0.5
    (True, True)
    >>> lo, hi = est.interval_
    >>> bool(0.0 <= lo < est.estimate_ < hi <= 1.0)
    True
    """

    def __init__(self, alpha: float = 0.05, method: str = "ppi++", bounds: MetricRange | None | str = "auto") -> None:
        self.alpha = alpha
        self.method = method
        self.bounds = bounds

    def fit(
        self,
        y: npt.ArrayLike,
        proxy_labelled: npt.ArrayLike,
        proxy_all: npt.ArrayLike,
        inclusion_prob: npt.ArrayLike | None = None,
    ) -> PredictionPoweredMean:
        """Fit on the labelled items' outcomes and proxies and every item's proxy (see the class)."""
        moments = label_moments(y, proxy_labelled, proxy_all, inclusion_prob)
        binary = bool(np.all(np.isin(np.asarray(y, dtype=np.float64), (0.0, 1.0))))
        return self.fit_moments(moments, binary=binary)

    def fit_moments(self, moments: LabelMoments, *, binary: bool = True) -> PredictionPoweredMean:
        """Fit from a target's sums (the Spark job's path); ``binary``: the outcome is 0/1 (for ``bounds="auto"``)."""
        where = "PredictionPoweredMean"
        if self.method not in METHODS:
            raise ConfigError(f"{where}: method: must be one of {sorted(METHODS)}, got {self.method!r}")
        confidence = check_confidence(1.0 - float(self.alpha), where=where, name="alpha (as 1 - alpha)")
        if moments.n < 2:
            raise InputError(f"{where}: y: {int(moments.n)} labels; an interval needs at least 2 labelled items")
        bounds = (_SHARE if binary else None) if self.bounds == "auto" else self.bounds
        if isinstance(bounds, str):
            raise ConfigError(f"{where}: bounds: a MetricRange, None or 'auto', got {bounds!r}")
        form = _weighted if moments.weighted else _uniform
        fit, classical = form(moments, METHODS[self.method]), form(moments, 0.0)
        ours = normal_interval(fit.estimate, fit.se, bounds, confidence=confidence)
        base = normal_interval(classical.estimate, classical.se, bounds, confidence=confidence)
        self.estimate_, self.interval_, self.se_, self.lambda_ = ours.estimate, (ours.low, ours.high), fit.se, fit.lam
        self.classical_estimate_, self.classical_interval_ = base.estimate, (base.low, base.high)
        self.classical_se_, self.imputed_variance_ = classical.se, fit.imputed_var
        self.n_labels_ = int(moments.n)
        self.effective_labels_ = _effective(moments.n, classical.se, fit.se)
        if moments.weighted and binary:  # against n uniform labels, whose classical variance is theta(1-theta)/n
            share = min(max(ours.estimate, 0.0), 1.0)
            self.effective_labels_ = _effective(1.0, math.sqrt(share * (1.0 - share)), fit.se)
        self.interval_method_ = f"{self.method}{' inverse-probability' if moments.weighted else ''}, {ours.method}"
        return self

    def labels_to_halve(self) -> float:
        """More labels (same design) that would halve the interval: the labels' variance part shrinks as 1/n,
        the proxy's part over all items does not (``inf`` when that part alone exceeds a quarter)."""
        target = self.se_**2 / 4.0
        label_part = self.se_**2 - self.imputed_variance_
        if label_part <= 0.0 or target <= self.imputed_variance_:
            return math.inf
        return self.n_labels_ * label_part / (target - self.imputed_variance_) - self.n_labels_


def _effective(n: float, se_classical: float, se: float) -> float:
    if se == 0.0:
        return math.inf if se_classical > 0.0 else float(n)
    return float(n * (se_classical / se) ** 2)


def estimates_frame(moments: Mapping[str, LabelMoments], *, alpha: float = 0.05, method: str = "ppi++") -> pd.DataFrame:
    """One row per target (:data:`ESTIMATE_COLUMNS`); a target with fewer than 2 labels gets NaN numbers and the
    method ``"too few labels"``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(size=500)
    >>> y = np.where(np.arange(500) < 80, rng.uniform(size=500) < p, np.nan)
    >>> from judgecal_dist.methods.labels.targets import build_targets, target_moments
    >>> frame = estimates_frame(target_moments(build_targets(p, y)))
    >>> frame["target"].tolist(), bool((frame["effective_labels"] > frame["n_labels"]).all())
    (['panel_accuracy', 'win_rate'], True)
    """
    rows = []
    for name, m in moments.items():
        row = {"target": name, "n_labels": int(m.n), "n_items": int(m.n_all), "method": "too few labels"}
        if m.n >= 2:
            est = PredictionPoweredMean(alpha=alpha, method=method).fit_moments(m, binary=True)
            row |= {
                "estimate": est.estimate_, "lower": est.interval_[0], "upper": est.interval_[1],
                "method": est.interval_method_, "effective_labels": est.effective_labels_,
                "classical_lower": est.classical_interval_[0], "classical_upper": est.classical_interval_[1],
                "classical_estimate": est.classical_estimate_, "lambda": est.lambda_,
                "labels_to_halve": est.labels_to_halve(),
            }  # fmt: skip
        rows.append(row)
    frame = pd.DataFrame(rows).reindex(columns=ESTIMATE_COLUMNS)
    numeric = [c for c in ESTIMATE_COLUMNS if c not in ("target", "method", "n_labels", "n_items")]
    frame[numeric] = frame[numeric].astype(float)
    return frame
