r"""Isotonic-regression calibration by pool-adjacent-violators (spec §3.3).

References
----------
.. [1] B. Zadrozny, C. Elkan. Transforming classifier scores into accurate multiclass probability estimates.
   KDD 2002. doi:10.1145/775047.775151.
.. [2] M. Ayer, H. D. Brunk, G. M. Ewing, W. T. Reid, E. Silverman. An empirical distribution function for
   sampling with incomplete information. Annals of Mathematical Statistics 26(4):641-647, 1955.
   doi:10.1214/aoms/1177728423.
"""

from __future__ import annotations

from typing import Self

import numpy as np
import numpy.typing as npt
from sklearn.isotonic import IsotonicRegression

from judgecal_dist.methods.calibration.base import ScoreCalibrator
from judgecal_dist.stats.checks import DEFAULT_EPS

__all__ = ["IsotonicCalibrator"]


class IsotonicCalibrator(ScoreCalibrator):
    r"""Non-decreasing step map from score to probability, fitted by PAV (:class:`sklearn.isotonic.IsotonicRegression`).

    .. math::

        \hat g = \arg\min_{g \text{ non-decreasing}} \sum_i w_i\,\big(y_i - g(s_i)\big)^2,\qquad
        \hat p = \mathrm{clip}\big(\hat g(s), \varepsilon, 1 - \varepsilon\big),

    on clipped scores :math:`s \leftarrow \mathrm{clip}(s, \varepsilon, 1-\varepsilon)`. The least-squares
    solution is also the monotone maximum-likelihood estimate of :math:`P(Y=1 \mid s)` (Ayer et al. [2]_).
    Scores outside the fitted range take the boundary value (``out_of_bounds="clip"``); between fitted scores
    the map is interpolated linearly (sklearn's convention).

    Parameters
    ----------
    eps : float, default 1e-6
        Clipping floor :math:`\varepsilon` of the input score and of the output probability.
    score_input : {"logit", "probability"}, default "logit"
        Whether ``s`` is :math:`P(Y=1)` (clipped) or the log-odds (unclipped, so scores beyond
        :math:`\mathrm{logit}(1-\varepsilon)` keep their order).
        The default reads an aggregator's log-odds (its ``transform`` or ``decision_function``); pass
        ``score_input="probability"`` for a probability score.

    Attributes
    ----------
    isotonic_ : sklearn.isotonic.IsotonicRegression
        The fitted regression.

    Notes
    -----
    No degenerate case needs a fallback: constant labels give the constant map at that label (clipped to
    :math:`[\varepsilon, 1-\varepsilon]`, the clipped MLE), constant scores or a single item give the
    (weighted) mean label. The map overfits when Step-1 scores take few distinct values (spec §3.3). Cost
    :math:`O(m \log m)` (sort, then PAV).

    References
    ----------
    .. [1] B. Zadrozny, C. Elkan. Transforming classifier scores into accurate multiclass probability
       estimates. KDD 2002. doi:10.1145/775047.775151.
    .. [2] M. Ayer, H. D. Brunk, G. M. Ewing, W. T. Reid, E. Silverman. An empirical distribution function for
       sampling with incomplete information. Ann. Math. Statist. 26(4):641-647, 1955. doi:10.1214/aoms/1177728423.

    Examples
    --------
    >>> cal = IsotonicCalibrator().fit([0.1, 0.3, 0.5, 0.7, 0.9], [0, 1, 0, 1, 1])
    >>> cal.predict_proba([0.0, 0.4, 1.0])[:, 1].tolist()  # boundary values, clipped to [eps, 1 - eps]
    [1e-06, 0.5, 0.999999]
    """

    def __init__(self, *, eps: float = DEFAULT_EPS, score_input: str = "logit") -> None:
        self.eps = eps
        self.score_input = score_input

    def fit(self, s: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Fit the step map on calibrator items.

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
            If ``eps`` is invalid.
        """
        scores, labels, weights = self._check_fit_input(s, y, sample_weight, "IsotonicCalibrator.fit")
        self.isotonic_ = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        self.isotonic_.fit(scores, labels, sample_weight=weights)
        return self

    def _proba(self, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        eps = float(self.eps)
        p = np.clip(self.isotonic_.predict(s), eps, 1.0 - eps)
        return np.column_stack([1.0 - p, p])
