r"""Low-dimensional stackers of the prefix judges' verdicts (spec 002 §3.2, §3.5): the FCPS scalar families.

Every family maps the categorical codes of the prefix judges (pairwise engine codes 0 = B, 1 = A, 2 = tie,
3 = err) to the scalar encoding :math:`s = 1` (A), :math:`0` (B), :math:`1/2` (tie, err) and the centred
:math:`t = 2s - 1`; under the scalar schema (a 1-5 rubric, codes 0..4 = scores 1..5, 5 = err) the encoding is
:math:`s = (\text{score} - 1)/4` with err at the rubric midpoint :math:`1/2`. Each family then fits a score and (except the logistic families) a non-decreasing isotonic map on the
calibration rows. Rows may be aggregated pattern cells with weights :math:`n_c` and targets :math:`S_c/n_c`:
weighted least squares, weighted PAV and the soft-label logistic likelihood have the same optimum as the
row-level fits (spec 002 §10).

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), §3.4, Tables 8, 9, 16.
.. [2] A. P. Dawid, A. M. Skene. Maximum likelihood estimation of observer error-rates using the EM algorithm.
   JRSS C 28(1):20-28, 1979. doi:10.2307/2346806.
.. [3] D. H. Wolpert. Stacked generalization. Neural Networks 5(2):241-259, 1992.
   doi:10.1016/S0893-6080(05)80023-1.
.. [4] B. Zadrozny, C. Elkan. Transforming classifier scores into accurate multiclass probability estimates.
   KDD 2002. doi:10.1145/775047.775151.
"""

from __future__ import annotations

import numbers
from typing import Self

import numpy as np
import numpy.typing as npt
from sklearn import config_context
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.fcps.joint_table import SCHEMA_CATEGORIES, check_patterns
from judgecal_dist.stats.checks import check_param

__all__ = [
    "VERDICT_SCALAR",
    "SCORE_SCALAR",
    "ENCODINGS",
    "SCALAR_FAMILIES",
    "encode_scalar",
    "pairwise_features",
    "MeanIsotonic",
    "OneCoinIsotonic",
    "RidgeIsotonic",
    "LogisticStack",
    "make_family",
    "isotonic_from_breakpoints",
]

#: Scalar encoding of the pairwise engine codes (0 = B, 1 = A, 2 = tie, 3 = err): A -> 1, B -> 0, tie/err -> 1/2.
VERDICT_SCALAR = np.array([0.0, 1.0, 0.5, 0.5])
#: Scalar encoding of the scalar-schema codes (0..4 = rubric scores 1..5, 5 = err): (score - 1)/4, err -> 1/2.
SCORE_SCALAR = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 0.5])
#: Encoding of each verdict schema (:data:`~judgecal_dist.methods.fcps.joint_table.SCHEMA_CATEGORIES`).
ENCODINGS = {"pairwise": VERDICT_SCALAR, "scalar": SCORE_SCALAR}
_VARIANCE_FLOOR = 1e-3  # residual variance floor of the scalar-schema reliability weights
# check_patterns has validated codes, targets and weights (finite, in range) and check_param the hyperparameters,
# so sklearn's own finiteness and parameter checks are skipped: on the few cells of a prefix they cost more than
# the fit (the regime map fits tens of thousands of candidates).
_CHECKED = {"assume_finite": True, "skip_parameter_validation": True}
#: Family ids of spec 002 §3.5, in the ladder order used to break validation ties (simplest first).
SCALAR_FAMILIES = ("mean_iso", "one_coin_iso", "ridge_iso", "logistic", "ridge_pair_iso", "logistic_pair")
_A, _B = 1, 0


def encode_scalar(codes: npt.NDArray[np.int64], schema: str = "pairwise") -> npt.NDArray[np.float64]:
    """:math:`s_{ij}` of each code under ``schema`` (:data:`ENCODINGS`).

    Raises
    ------
    ConfigError
        An unknown schema.
    """
    if schema not in ENCODINGS:
        raise ConfigError(f"schema: must be one of {tuple(ENCODINGS)}, got {schema!r}")
    return ENCODINGS[schema][codes]


def _categories(schema: str) -> int:
    if schema not in SCHEMA_CATEGORIES:
        raise ConfigError(f"schema: must be one of {tuple(SCHEMA_CATEGORIES)}, got {schema!r}")
    return SCHEMA_CATEGORIES[schema]


def pairwise_features(t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``t`` and all products :math:`t_l t_{l'}` (:math:`l < l'`): dimension :math:`k + \\binom k2`."""
    k = t.shape[1]
    left, right = np.triu_indices(k, 1)
    return np.hstack([t, t[:, left] * t[:, right]])


def _isotonic(u: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> IsotonicRegression:
    # sklearn's PAV directly, not methods.isotonic.IsotonicCalibrator: that one clips its input to a probability
    # range, while these scores live on the real line (ridge/one-coin scores); ties are pooled and predictions
    # interpolate linearly between knots and clip outside them, as spec 002 §3.5 asks.
    with config_context(**_CHECKED):
        return IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(
            u, y, sample_weight=w
        )


def isotonic_from_breakpoints(x: npt.ArrayLike, y: npt.ArrayLike) -> IsotonicRegression:
    """The fitted isotonic map whose breakpoints are ``x, y`` (``X_thresholds_``, ``y_thresholds_`` of a map of
    this module): PAV of an already monotone sequence with unit weights gives the same thresholds back, so an
    exported family predicts bit for bit as the fitted one."""
    u = np.asarray(x, dtype=np.float64)
    return _isotonic(u, np.asarray(y, dtype=np.float64), np.ones_like(u))


class _ScoreIsotonic(RegressorMixin, BaseEstimator):
    """Shared fit/predict of the "score + isotonic" families; subclasses define ``_fit_score``/``_score``."""

    def __init__(self, *, schema: str = "pairwise") -> None:
        self.schema = schema

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Fit the score on the calibration rows, then the isotonic map of ``y`` on the in-sample scores."""
        codes, target, weights = check_patterns(
            X, y, sample_weight, n_categories=_categories(self.schema), where=type(self).__name__
        )
        assert target is not None
        self.n_features_in_ = codes.shape[1]
        self._fit_score(codes, target, weights)
        self.isotonic_ = _isotonic(self._score(codes), target, weights)
        return self

    def decision_function(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The score :math:`u` before the isotonic map."""
        check_is_fitted(self)
        codes, _, _ = check_patterns(X, None, None, n_categories=_categories(self.schema), where=type(self).__name__)
        return self._score(codes)

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """:math:`\\mathrm{Iso}(u)` in [0, 1]."""
        score = self.decision_function(X)
        with config_context(**_CHECKED):
            return np.clip(self.isotonic_.predict(score), 0.0, 1.0)

    def _fit_score(self, codes: npt.NDArray[np.int64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> None:
        raise NotImplementedError

    def _score(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        raise NotImplementedError


class MeanIsotonic(_ScoreIsotonic):
    r"""Mean/vote + isotonic: :math:`u = \frac1k\sum_l s_l`, :math:`f = \mathrm{Iso}(u)` (``mean_iso``).

    Majority vote is a monotone function of :math:`u` for binary outputs, so it is covered.

    Examples
    --------
    >>> model = MeanIsotonic().fit(np.array([[1, 1], [1, 0], [0, 0], [0, 0]]), [1, 1, 0, 1])
    >>> model.predict(np.array([[1, 1], [0, 0]])).tolist()
    [1.0, 0.5]
    """

    def _fit_score(self, codes: npt.NDArray[np.int64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> None:
        self.fitted_ = True

    def _score(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return encode_scalar(codes, self.schema).mean(axis=1)


class OneCoinIsotonic(_ScoreIsotonic):
    r"""Supervised one-coin reliability weights + isotonic (``one_coin_iso``).

    .. math::

        \hat q_j = \frac{a_j + 1}{d_j + 2},\quad w_j = \log\frac{\hat q_j}{1 - \hat q_j},\quad
        u = \sum_l w_l t_l,\quad f = \mathrm{Iso}(u),

    with :math:`d_j` the judge's decisive (A/B) calibration rows and :math:`a_j` those agreeing with the label
    (soft targets count :math:`y` agreement for A and :math:`1-y` for B). The weights are those of the Beta(1, 1)
    one-coin model :class:`judgecal_dist.methods.aggregation.aggregate.OneCoin` (:math:`\psi_j`), reused here.

    Under the scalar schema the continuous analogue: per judge the weighted OLS :math:`Y \approx a_j + b_j s_j`,
    residual variance :math:`\hat\sigma_j^2` (floor :math:`10^{-3}`), :math:`w_j = b_j/\hat\sigma_j^2` and
    :math:`u = \sum_l w_l s_l` (a precision-weighted one-factor model).

    Attributes
    ----------
    weights_ : ndarray of float64, shape (k,)
        :math:`w_j` (0 for a judge without decisive votes).
    """

    def fit(
        self,
        X: npt.ArrayLike,
        y: npt.ArrayLike,
        sample_weight: npt.ArrayLike | None = None,
        y_sq: npt.ArrayLike | None = None,
    ) -> Self:
        """As the other families; ``y_sq`` (scalar schema) is the mean of :math:`Y^2` over each row's rows when rows
        are aggregated pattern cells, so the residual variances are the row-level ones (default :math:`y^2`)."""
        self._y_sq = None if y_sq is None else np.asarray(y_sq, dtype=np.float64)
        try:
            return super().fit(X, y, sample_weight)
        finally:
            del self._y_sq

    def _fit_score(self, codes: npt.NDArray[np.int64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> None:
        if self.schema == "scalar":
            s = encode_scalar(codes, "scalar")
            total = w.sum()
            ms, my = (w @ s) / total, float(w @ y) / total
            cs, cy = s - ms, y - my
            sxx = w @ (cs * cs)
            slope = np.divide(w @ (cs * cy[:, None]), sxx, out=np.zeros(s.shape[1]), where=sxx > 0)
            resid = cy[:, None] - cs * slope
            # Rows inside an aggregated cell share s, so each adds its within-cell spread E[Y^2] - y^2 to every judge.
            within = 0.0 if self._y_sq is None else float(w @ np.maximum(self._y_sq - y * y, 0.0)) / total
            variance = np.maximum((w @ (resid * resid)) / total + within, _VARIANCE_FLOOR)
            self.weights_ = slope / variance
            return
        decisive = (codes == _A) | (codes == _B)
        d = (w[:, None] * decisive).sum(axis=0)
        a = (w[:, None] * ((codes == _A) * y[:, None] + (codes == _B) * (1.0 - y[:, None]))).sum(axis=0)
        if np.allclose(d, np.round(d)) and np.allclose(a, np.round(a)):
            self.weights_ = OneCoin.from_counts(np.round(d).astype(np.int64), np.round(a).astype(np.int64)).weights_
        else:  # soft targets or fractional weights: the same Beta(1, 1) log-odds in closed form
            self.weights_ = np.where(d > 0, np.log(a + 1.0) - np.log(d - a + 1.0), 0.0)

    def _score(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        if self.schema == "scalar":
            return encode_scalar(codes, "scalar") @ self.weights_
        return (2.0 * encode_scalar(codes) - 1.0) @ self.weights_


class RidgeIsotonic(_ScoreIsotonic):
    r"""Ridge stacking + isotonic (``ridge_iso``; ``ridge_pair_iso`` with ``pairwise=True``).

    .. math::

        (\hat b, \hat w) = \arg\min \sum_i w_i (y_i - b - w^\top \phi_i)^2 + \lambda_r \lVert w \rVert_2^2,
        \qquad u = \hat b + \hat w^\top \phi,\quad f = \mathrm{Iso}(u),

    intercept unpenalised, :math:`\phi = t` or the pairwise features (:func:`pairwise_features`).

    Parameters
    ----------
    lam : float, default 1.0
        :math:`\lambda_r` on the unstandardised :math:`t` (spec 002 recommended value).
    pairwise : bool, default False
    schema : {"pairwise", "scalar"}, default "pairwise"
        Verdict schema of the codes (:data:`ENCODINGS`).
    """

    def __init__(self, *, lam: float = 1.0, pairwise: bool = False, schema: str = "pairwise") -> None:
        self.lam = lam
        self.pairwise = pairwise
        self.schema = schema

    def _features(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        t = 2.0 * encode_scalar(codes, self.schema) - 1.0
        return pairwise_features(t) if self.pairwise else t

    def _fit_score(self, codes: npt.NDArray[np.int64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> None:
        lam = float(check_param(self.lam, where="RidgeIsotonic", name="lam", target_type=numbers.Real, min_val=0.0))
        phi = self._features(codes)
        total = w.sum()
        mean_phi, mean_y = (w @ phi) / total, float(w @ y) / total
        centred = phi - mean_phi
        gram = centred.T @ (w[:, None] * centred) + lam * np.eye(phi.shape[1])
        # lstsq keeps lam = 0 with collinear features (e.g. a constant judge) well defined (minimum-norm solution).
        self.coef_ = np.linalg.lstsq(gram, centred.T @ (w * (y - mean_y)), rcond=None)[0]
        self.intercept_ = mean_y - float(mean_phi @ self.coef_)

    def _score(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return self.intercept_ + self._features(codes) @ self.coef_


class LogisticStack(RegressorMixin, BaseEstimator):
    r"""L2 logistic stacking of :math:`t` (``logistic``; ``logistic_pair`` with ``pairwise=True``), no isotonic.

    .. math::

        (\hat b, \hat w) = \arg\min -\sum_i w_i\big[y_i \log\sigma(b + w^\top\phi_i)
        + (1 - y_i)\log(1 - \sigma(\cdot))\big] + \frac{1}{2C}\lVert w \rVert_2^2,

    soft targets allowed: each row enters twice, as class 1 with weight :math:`w_i y_i` and class 0 with
    :math:`w_i(1-y_i)`, which is the same objective for :class:`sklearn.linear_model.LogisticRegression`
    (whose loss is :math:`C` times this one, with the same optimum). Constant targets have no finite optimum
    with an unpenalised intercept: the prediction is then the constant.

    Parameters
    ----------
    C : float, default 1.0
        Inverse L2 strength (spec 002 recommended value).
    pairwise : bool, default False
    schema : {"pairwise", "scalar"}, default "pairwise"
        Verdict schema of the codes (:data:`ENCODINGS`).
    """

    def __init__(self, *, C: float = 1.0, pairwise: bool = False, schema: str = "pairwise") -> None:
        self.C = C
        self.pairwise = pairwise
        self.schema = schema

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Fit the soft-label weighted logistic regression on the calibration rows."""
        where = "LogisticStack.fit"
        C = float(
            check_param(
                self.C, where=where, name="C", target_type=numbers.Real, min_val=0.0, include_boundaries="neither"
            )
        )
        codes, target, weights = check_patterns(X, y, sample_weight, n_categories=_categories(self.schema), where=where)
        assert target is not None
        self.n_features_in_ = codes.shape[1]
        pos, neg = (weights * target).sum(), (weights * (1.0 - target)).sum()
        self.constant_ = None if pos > 0 and neg > 0 else float(pos > 0)
        if self.constant_ is None:
            phi = self._features(codes)
            both = np.vstack([phi, phi])
            labels = np.r_[np.ones(len(phi)), np.zeros(len(phi))]
            w = np.r_[weights * target, weights * (1.0 - target)]
            keep = w > 0
            # Newton steps on the few stacked features reach the optimum in 2-3 iterations (lbfgs stops at tol 1e-4)
            with config_context(**_CHECKED):
                model = LogisticRegression(C=C, solver="newton-cholesky", max_iter=1000)
                self.model_ = model.fit(both[keep], labels[keep], sample_weight=w[keep])
        return self

    def _features(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        t = 2.0 * encode_scalar(codes, self.schema) - 1.0
        return pairwise_features(t) if self.pairwise else t

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """:math:`\\sigma(\\hat b + \\hat w^\\top \\phi)`."""
        check_is_fitted(self)
        codes, _, _ = check_patterns(
            X, None, None, n_categories=_categories(self.schema), where="LogisticStack.predict"
        )
        if self.constant_ is not None:
            return np.full(len(codes), self.constant_)
        features = self._features(codes)
        with config_context(**_CHECKED):
            return self.model_.predict_proba(features)[:, 1]


def make_family(name: str, *, lam: float = 1.0, C: float = 1.0, schema: str = "pairwise") -> RegressorMixin:
    """A fresh estimator of family ``name`` (one of :data:`SCALAR_FAMILIES`) for codes of ``schema``.

    Raises
    ------
    ConfigError
        An unknown family.
    """
    if name == "mean_iso":
        return MeanIsotonic(schema=schema)
    if name == "one_coin_iso":
        return OneCoinIsotonic(schema=schema)
    if name in ("ridge_iso", "ridge_pair_iso"):
        return RidgeIsotonic(lam=lam, pairwise=name == "ridge_pair_iso", schema=schema)
    if name in ("logistic", "logistic_pair"):
        return LogisticStack(C=C, pairwise=name == "logistic_pair", schema=schema)
    raise ConfigError(f"family: unknown scalar family {name!r}; known: {SCALAR_FAMILIES}")
