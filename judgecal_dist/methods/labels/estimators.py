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
the same width.

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
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.checks import check_confidence
from judgecal_dist.stats.intervals import normal_interval
from judgecal_dist.stats.ranges import MetricRange

__all__ = ["METHODS", "LabelMoments", "PredictionPoweredMean", "label_moments"]

#: The estimators of :class:`PredictionPoweredMean` by name: the value of :math:`\lambda` (None: power-tuned).
METHODS: dict[str, float | None] = {"ppi++": None, "ppi": 1.0, "classical": 0.0}
_SHARE = MetricRange(0.0, 1.0)


@dataclass(frozen=True)
class LabelMoments:
    """The sums every estimate of one target is a function of (``w = 1/pi`` of a labelled item).

    ``n_all, sum_f_all, sum_f2_all`` run over every item; the rest over the labelled ones: plain sums for uniform
    labels and the inverse-probability sums for labels drawn with known inclusion probabilities. Sums add, so
    partial moments of parts of a table combine with :meth:`__add__`.
    """

    n_all: float = 0.0
    sum_f_all: float = 0.0
    sum_f2_all: float = 0.0
    n: float = 0.0
    sum_y: float = 0.0
    sum_f: float = 0.0
    sum_y2: float = 0.0
    sum_f2: float = 0.0
    sum_fy: float = 0.0
    sum_wy: float = 0.0
    sum_wf: float = 0.0
    sum_wf2: float = 0.0
    sum_w2f2: float = 0.0
    sum_w2y2: float = 0.0
    sum_wfy: float = 0.0
    sum_w2fy: float = 0.0
    weighted: bool = False

    def __add__(self, other: LabelMoments) -> LabelMoments:
        values = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name != "weighted"}
        return LabelMoments(**values, weighted=self.weighted or other.weighted)

    @classmethod
    def sum_names(cls) -> tuple[str, ...]:
        """The names of the sums, in field order (the Spark job's aggregate columns)."""
        return tuple(f.name for f in fields(cls) if f.name != "weighted")


def label_moments(
    y: npt.ArrayLike,
    proxy_labelled: npt.ArrayLike,
    proxy_all: npt.ArrayLike,
    inclusion_prob: npt.ArrayLike | None = None,
) -> LabelMoments:
    """The :class:`LabelMoments` of arrays (checked: 1-D, finite, equal lengths, ``0 < pi <= 1``, ``n <= N``).

    Examples
    --------
    >>> m = label_moments([1, 0], [0.9, 0.2], [0.9, 0.2, 0.5, 0.7])
    >>> m.n, m.n_all, round(m.sum_fy, 2), m.weighted
    (2.0, 4.0, 0.9, False)
    """
    where = "PredictionPoweredMean"
    yv, fl, fa = (
        _finite(v, name, where) for v, name in ((y, "y"), (proxy_labelled, "proxy_labelled"), (proxy_all, "proxy_all"))
    )
    if yv.size != fl.size:
        raise InputError(f"{where}: y and proxy_labelled: lengths differ ({yv.size} vs {fl.size}); one proxy per label")
    if fa.size < yv.size:
        raise InputError(f"{where}: proxy_all: {fa.size} items, fewer than the {yv.size} labelled; pass every item")
    base: dict[str, Any] = {
        "n_all": float(fa.size), "sum_f_all": float(fa.sum()), "sum_f2_all": float(fa @ fa), "n": float(yv.size),
        "sum_y": float(yv.sum()), "sum_f": float(fl.sum()), "sum_y2": float(yv @ yv), "sum_f2": float(fl @ fl),
        "sum_fy": float(fl @ yv),
    }  # fmt: skip
    if inclusion_prob is None:
        return LabelMoments(**base)
    pi = _finite(inclusion_prob, "inclusion_prob", where)
    if pi.size != yv.size:
        raise InputError(f"{where}: inclusion_prob: {pi.size} values for {yv.size} labels; one per labelled item")
    if np.any((pi <= 0.0) | (pi > 1.0)):
        bad = pi[(pi <= 0.0) | (pi > 1.0)][:3].tolist()
        raise InputError(f"{where}: inclusion_prob: values outside (0, 1], e.g. {bad}; pass each item's probability")
    w = 1.0 / pi
    return LabelMoments(
        **base, sum_wy=float(w @ yv), sum_wf=float(w @ fl), sum_wf2=float(w @ (fl * fl)),
        sum_w2f2=float((w * w) @ (fl * fl)), sum_w2y2=float((w * w) @ (yv * yv)), sum_wfy=float(w @ (fl * yv)),
        sum_w2fy=float((w * w) @ (fl * yv)), weighted=True,
    )  # fmt: skip


def _finite(values: npt.ArrayLike, name: str, where: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"{where}: {name}: expected a 1-D array, got shape {arr.shape}; use np.ravel")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{where}: {name}: {int(np.sum(~np.isfinite(arr)))} NaN or infinite values; drop them")
    return arr


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
