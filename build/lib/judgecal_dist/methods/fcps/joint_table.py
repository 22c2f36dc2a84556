r"""Joint output-table calibrator over the judges' categorical output patterns (spec 002 §3.3, §3.4).

One estimate per joint pattern of the ``k`` columns of ``X`` (a prefix of a judge path), smoothed toward the
calibration marginal, with a fallback for patterns unseen in calibration; and the hybrid residual-shrinkage
variant that smooths toward a fitted scalar predictor instead. Rows may be single items or aggregated pattern
cells (weights ``n_c``, targets ``S_c / n_c``): every fit depends on the data only through :math:`(n_c, S_c)`.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), Eqs. 12-13, Tables 15, 18, 19.
.. [2] D. J. C. MacKay, L. C. B. Peto. A hierarchical Dirichlet language model. Natural Language Engineering
   1(3):289-308, 1995. doi:10.1017/S1351324900000218.
.. [3] L. Györfi, M. Kohler, A. Krzyżak, H. Walk. A Distribution-Free Theory of Nonparametric Regression.
   Springer, 2002 (partitioning estimates). doi:10.1007/b97848.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Self

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.checks import check_param

__all__ = [
    "FALLBACKS",
    "SCHEMA_CATEGORIES",
    "JointTableCalibrator",
    "HybridResidualShrinkage",
    "check_patterns",
    "pattern_keys",
]

#: Unseen-pattern rules: ``global`` (the calibration marginal), ``lower_prefix`` (the longest seen lower prefix),
#: ``hierarchical`` (recursive smoothing toward the parent prefix at every level).
FALLBACKS = ("global", "lower_prefix", "hierarchical")
#: Output alphabet size per judge of each verdict schema: pairwise codes 0 = B, 1 = A, 2 = tie, 3 = err; scalar
#: codes 0..4 = rubric scores 1..5, 5 = err (the 6-symbol alphabet of a 1-5 rubric).
SCHEMA_CATEGORIES = {"pairwise": 4, "scalar": 6}
_ALPHA_FLOOR = 1e-9  # hierarchical alpha = 0 would stop unseen nodes inheriting their parent (spec §3.3)


def check_patterns(
    X: npt.ArrayLike, y: npt.ArrayLike | None, sample_weight: npt.ArrayLike | None, *, n_categories: int, where: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64] | None, npt.NDArray[np.float64]]:
    """Validate category codes ``X`` (2-D, in ``0..n_categories-1``), targets in [0, 1] and non-negative weights."""
    codes = np.asarray(X)
    if codes.ndim != 2 or codes.shape[1] == 0:
        raise InputError(f"{where}: X: need a 2-D array of category codes with >= 1 column, got shape {codes.shape}")
    if codes.size and (not np.issubdtype(codes.dtype, np.integer) or codes.min() < 0 or codes.max() >= n_categories):
        raise InputError(f"{where}: X: category codes must be integers in 0..{n_categories - 1}")
    weights = np.ones(len(codes)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if weights.shape != (len(codes),) or (weights < 0).any() or not np.isfinite(weights).all():
        raise InputError(f"{where}: sample_weight: need {len(codes)} finite non-negative weights")
    target = None
    if y is not None:
        target = np.asarray(y, dtype=np.float64)
        if target.shape != (len(codes),) or not np.isfinite(target).all() or (target < 0).any() or (target > 1).any():
            raise InputError(f"{where}: y: need {len(codes)} targets in [0, 1]")
    return codes.astype(np.int64), target, weights


def pattern_keys(codes: npt.NDArray[np.int64], n_categories: int) -> npt.NDArray[np.int64]:
    """Integer key of each row's pattern, :math:`\\sum_l x_l\\, b^{l-1}` (column order = prefix order)."""
    if codes.shape[1] * math.log2(n_categories) > 62:
        raise InputError(f"pattern_keys: {codes.shape[1]} columns of base {n_categories} overflow an int64 key")
    powers = n_categories ** np.arange(codes.shape[1], dtype=np.int64)
    return codes @ powers


class JointTableCalibrator(RegressorMixin, BaseEstimator):
    r"""Smoothed joint-pattern table with a fallback on unseen patterns (spec 002 Eq. 12).

    With calibration cell statistics :math:`n_c = \sum_{i: Z_i = c} w_i`, :math:`S_c = \sum_{i: Z_i = c} w_i y_i`
    and marginal :math:`\bar y = \sum_c S_c / \sum_c n_c`,

    .. math::

        \hat\eta(c) = \frac{S_c + \alpha\,\bar y}{n_c + \alpha}\quad (n_c > 0),\qquad
        \hat\eta(c) = \mathrm{fallback}(c)\quad (n_c = 0).

    Fallbacks: ``global`` :math:`\bar y`; ``lower_prefix`` :math:`\hat\eta_{m^*}(c_{1:m^*})` with
    :math:`m^* = \max\{m < k: n_{c_{1:m}} > 0\}` (:math:`\bar y` if none); ``hierarchical`` replaces the whole
    table by the recursion :math:`\tilde\eta_0 = \bar y`,
    :math:`\tilde\eta_m(c_{1:m}) = (S_{c_{1:m}} + \alpha\,\tilde\eta_{m-1}(c_{1:m-1})) / (n_{c_{1:m}} + \alpha)`.

    Parameters
    ----------
    alpha : float, default 1.0
        Pseudo-count :math:`\alpha \ge 0` (spec 002 recommended value; the paper's was lost).
    fallback : {"global", "lower_prefix", "hierarchical"}, default "global"
    n_categories : int, default 4
        Alphabet size per column (pairwise: B, A, tie, err).

    Attributes
    ----------
    marginal_ : float
        :math:`\bar y`.
    levels_ : list of tuple
        Per prefix level ``m = 1..k``: sorted keys, :math:`n` and :math:`S` of the occupied cells.
    n_features_in_ : int

    References
    ----------
    .. [1] FCPS Eq. 12 and Table 18 (spec 002 §3.3).
    .. [2] MacKay and Peto (1995), hierarchical Dirichlet smoothing. doi:10.1017/S1351324900000218.

    Examples
    --------
    >>> X = np.array([[0, 0], [0, 0], [1, 0], [1, 1]])
    >>> model = JointTableCalibrator(alpha=1.0).fit(X, [1, 0, 1, 1])
    >>> model.predict(np.array([[0, 0], [1, 0], [3, 3]])).round(4).tolist()  # (1 + .75)/3, (1 + .75)/2, ybar
    [0.5833, 0.875, 0.75]
    """

    def __init__(self, *, alpha: float = 1.0, fallback: str = "global", n_categories: int = 4) -> None:
        self.alpha = alpha
        self.fallback = fallback
        self.n_categories = n_categories

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Cell statistics of every prefix level of ``X`` on the calibration rows.

        Raises
        ------
        InputError
            Bad codes, targets or weights, or zero total weight.
        ConfigError
            ``alpha < 0`` or an unknown fallback.
        """
        where = "JointTableCalibrator.fit"
        check_param(self.alpha, where=where, name="alpha", target_type=numbers.Real, min_val=0.0)
        if self.fallback not in FALLBACKS:
            raise ConfigError(f"{where}: fallback: must be one of {FALLBACKS}, got {self.fallback!r}")
        codes, target, weights = check_patterns(X, y, sample_weight, n_categories=self.n_categories, where=where)
        assert target is not None
        total = weights.sum()
        if total <= 0:
            raise InputError(f"{where}: sample_weight: the calibration rows have zero total weight")
        self.marginal_ = float((weights * target).sum() / total)
        self.levels_ = []
        for m in range(1, codes.shape[1] + 1):
            keys, inverse = np.unique(pattern_keys(codes[:, :m], self.n_categories), return_inverse=True)
            n = np.bincount(inverse, weights=weights, minlength=len(keys))
            s = np.bincount(inverse, weights=weights * target, minlength=len(keys))
            occupied = n > 0
            self.levels_.append((keys[occupied], n[occupied], s[occupied]))
        self.n_features_in_ = codes.shape[1]
        return self

    def _lookup(self, level: int, codes: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.float64], ...]:
        keys, n, s = self.levels_[level - 1]
        return _find(keys, pattern_keys(codes[:, :level], self.n_categories), n, s)

    def cell_counts(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Calibration count :math:`n_c` of each row's full-prefix pattern (0 = unseen)."""
        check_is_fitted(self)
        codes = self._codes(X, "cell_counts")
        return self._lookup(self.n_features_in_, codes)[0]

    def _codes(self, X: npt.ArrayLike, name: str) -> npt.NDArray[np.int64]:
        codes, _, _ = check_patterns(
            X, None, None, n_categories=self.n_categories, where=f"JointTableCalibrator.{name}"
        )
        if codes.shape[1] != self.n_features_in_:
            raise InputError(
                f"JointTableCalibrator.{name}: X: {codes.shape[1]} columns, fitted on {self.n_features_in_}"
            )
        return codes

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """:math:`\\hat\\eta(Z_i)` of each row, in [0, 1]."""
        check_is_fitted(self)
        codes = self._codes(X, "predict")
        alpha, ybar, k = float(self.alpha), self.marginal_, self.n_features_in_
        if self.fallback == "hierarchical":
            a = max(alpha, _ALPHA_FLOOR)
            eta = np.full(len(codes), ybar)
            for m in range(1, k + 1):
                n, s = self._lookup(m, codes)
                eta = (s + a * eta) / (n + a)
            return np.clip(eta, 0.0, 1.0)
        n, s = self._lookup(k, codes)
        seen = n > 0
        out = np.full(len(codes), ybar)
        out[seen] = (s[seen] + alpha * ybar) / (n[seen] + alpha)
        if self.fallback == "lower_prefix":
            todo = ~seen
            for m in range(k - 1, 0, -1):
                if not todo.any():
                    break
                n_m, s_m = self._lookup(m, codes[todo])
                hit = n_m > 0
                idx = np.flatnonzero(todo)[hit]
                out[idx] = (s_m[hit] + alpha * ybar) / (n_m[hit] + alpha)
                todo[idx] = False
        return np.clip(out, 0.0, 1.0)


class HybridResidualShrinkage(RegressorMixin, BaseEstimator):
    r"""Scalar base predictor plus count-weighted table residual (spec 002 Eq. 13).

    .. math::

        f_{\mathrm{hyb},\tau}(c) = \mathrm{clip}_{[0,1]}\Big(f_s(c) + \frac{n_c}{n_c + \tau}\,\bar r_c\Big)
        = \frac{S_c + \tau f_s(c)}{n_c + \tau},\qquad \bar r_c = \frac{1}{n_c}\sum_{Z_i = c}(y_i - f_s(Z_i)),

    i.e. the joint table smoothed toward the scalar prediction; unseen cells (and :math:`\tau = \infty`) give
    :math:`f_s`.

    Parameters
    ----------
    base : estimator
        Any regressor of the same pattern codes with ``fit(X, y, sample_weight)`` and ``predict(X)``
        (a :mod:`judgecal_dist.methods.fcps.scalar_families` family); cloned before fitting.
    tau : float, default 10.0
        Shrinkage strength :math:`\tau > 0` (``math.inf`` = pure scalar).
    n_categories : int, default 4

    Attributes
    ----------
    base_ : estimator
        The fitted clone of ``base``.
    table_ : JointTableCalibrator
        The unsmoothed residual table (``alpha = 0``) fitted on the residuals' cell sums.

    References
    ----------
    .. [1] FCPS Eq. 13 and Table 19 (spec 002 §3.4).
    """

    def __init__(self, base: Any, *, tau: float = 10.0, n_categories: int = 4) -> None:
        self.base = base
        self.tau = tau
        self.n_categories = n_categories

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Fit the base, then the residual table on the same rows."""
        where = "HybridResidualShrinkage.fit"
        tau = float(check_param(self.tau, where=where, name="tau", target_type=numbers.Real, min_val=0.0))
        codes, target, weights = check_patterns(X, y, sample_weight, n_categories=self.n_categories, where=where)
        assert target is not None
        self.base_ = clone(self.base).fit(codes, target, sample_weight=weights)
        self.tau_ = tau
        residual = target - self.base_.predict(codes)
        # The table of residual means: S_c/n_c of (y - f_s) with alpha = 0 (no smoothing; shrinkage is tau's).
        self.residual_keys_, inverse = np.unique(pattern_keys(codes, self.n_categories), return_inverse=True)
        self.residual_n_ = np.bincount(inverse, weights=weights, minlength=len(self.residual_keys_))
        self.residual_sum_ = np.bincount(inverse, weights=weights * residual, minlength=len(self.residual_keys_))
        self.n_features_in_ = codes.shape[1]
        return self

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """:math:`f_{\\mathrm{hyb},\\tau}` of each row, in [0, 1]."""
        check_is_fitted(self)
        codes, _, _ = check_patterns(X, None, None, n_categories=self.n_categories, where="HybridResidualShrinkage")
        base = self.base_.predict(codes)
        if math.isinf(self.tau_) or not len(self.residual_keys_):
            return np.clip(base, 0.0, 1.0)
        query = pattern_keys(codes, self.n_categories)
        n, rsum = _find(self.residual_keys_, query, self.residual_n_, self.residual_sum_)
        # n/(n+tau) * (rsum/n) = rsum/(n+tau); 0 when unseen.
        shift = np.divide(rsum, n + self.tau_, out=np.zeros_like(rsum), where=n + self.tau_ > 0)
        return np.clip(base + shift, 0.0, 1.0)


def _find(
    keys: npt.NDArray[np.int64], query: npt.NDArray[np.int64], *values: npt.NDArray[Any]
) -> tuple[npt.NDArray[np.float64], ...]:
    """``values`` at the positions of ``query`` in sorted ``keys``; 0 where a query key is absent."""
    if not len(keys):
        return tuple(np.zeros(len(query)) for _ in values)
    pos = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    found = keys[pos] == query
    return tuple(np.where(found, v[pos], 0.0) for v in values)
