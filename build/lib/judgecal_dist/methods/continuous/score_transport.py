r"""Marginal optimal-transport (inverse-CDF) corrector, :math:`T(j) = Q_y(F_j(j))` (spec 001 §5.3).

In one dimension the optimal transport map between two laws is the monotone rearrangement: it matches the
anchors' judge-score quantiles to their reference-score quantiles and ignores the pairing, so it fixes the
marginal shape (Q3) but not per-item error beyond rank order.

References
----------
.. [1] C. Villani. Optimal Transport: Old and New. Springer, 2009, Remark 2.19 (monotone rearrangement on R).
.. [2] L. Morandi. Two Ways to De-Bias an LLM-as-a-Judge. 2026, §II, §III-B.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import rankdata
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError

__all__ = ["MarginalOT"]


class MarginalOT(BaseEstimator):
    r"""Inverse-CDF map fitted on anchors: :math:`F_j` linear between order statistics with mid-ranks for ties
    (positions :math:`(\mathrm{rank}-1)/(n-1)`, clamped to [0, 1]), :math:`Q_y` the linear-interpolation quantile.

    Attributes
    ----------
    knots_ : ndarray
        Distinct anchor judge scores.
    levels_ : ndarray
        Their mid-rank CDF positions.
    y_sorted_ : ndarray
        Sorted anchor reference scores.

    Examples
    --------
    >>> MarginalOT().fit([1.0, 2.0, 3.0], [2.0, 4.0, 5.0]).predict([1.0, 2.5, 3.0]).tolist()
    [2.0, 4.5, 5.0]
    """

    def fit(self, j: npt.ArrayLike, y: npt.ArrayLike) -> MarginalOT:
        j, y = np.asarray(j, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
        if j.size != y.size or j.size < 2:
            raise InputError(f"ot: j, y: need two or more paired anchors, got {j.size} and {y.size}")
        levels = (rankdata(j, method="average") - 1.0) / (j.size - 1)
        self.knots_, first = np.unique(j, return_index=True)
        self.levels_ = levels[first]
        self.y_sorted_ = np.sort(y)
        return self

    def predict(self, j: npt.ArrayLike) -> npt.NDArray[np.float64]:
        check_is_fitted(self)
        u = np.interp(np.asarray(j, dtype=np.float64), self.knots_, self.levels_)  # clamps outside the knots
        return np.quantile(self.y_sorted_, np.clip(u, 0.0, 1.0), method="linear")
