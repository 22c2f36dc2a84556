r"""Step 4 of the pipeline: split-conformal prediction sets for a binary label (spec §3.5).

References
----------
.. [1] V. Vovk, A. Gammerman, G. Shafer. Algorithmic Learning in a Random World. Springer, 2005.
   doi:10.1007/b106715.
.. [2] M. Sadinle, J. Lei, L. Wasserman. Least Ambiguous Set-Valued Classifiers With Bounded Error Levels.
   JASA 114(525):223-234, 2019. doi:10.1080/01621459.2017.1395341.
.. [3] A. N. Angelopoulos, S. Bates. A Gentle Introduction to Conformal Prediction and Distribution-Free
   Uncertainty Quantification. arXiv:2107.07511, 2021.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any, Self

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.stats.checks import check_binary_labels, check_param, check_probabilities, check_same_length

__all__ = ["SplitConformal"]

_ROUND_OFF = 1e-9  # guard so that float error in (n + 1)(1 - alpha) never adds one to the ceiling


def _lac_scores(p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Nonconformity :math:`s(x, y) = 1 - \\hat p_y(x)` of both labels, columns ``[y=0, y=1]`` (eq. (5))."""
    return 1.0 - np.column_stack([1.0 - p, p])


class SplitConformal(BaseEstimator):
    r"""Split-conformal prediction sets with the LAC score and the finite-sample quantile (spec §3.5, eqs. (5)-(6)).

    On a conformal slice of :math:`n_c` items disjoint from every fitted step, with calibrated
    :math:`\hat p_1 = \hat p`, :math:`\hat p_0 = 1 - \hat p`:

    .. math::

        s_i = 1 - \hat p_{Y_i}(x_i),\qquad k = \big\lceil (n_c + 1)(1 - \alpha) \big\rceil,\qquad
        \hat q = \begin{cases} s_{(k)} & k \le n_c \\ +\infty & k > n_c \end{cases},

        C_\alpha(x) = \{y \in \{0, 1\} : 1 - \hat p_y(x) \le \hat q\} = \{y : \hat p_y(x) \ge 1 - \hat q\},

    where :math:`s_{(k)}` is the :math:`k`-th smallest score. Under exchangeability
    :math:`P(Y \in C_\alpha(X)) \ge 1 - \alpha` [1]_, and :math:`\le 1 - \alpha + 1/(n_c + 1)` without ties.

    Parameters
    ----------
    alpha : float, default 0.1
        Miscoverage level :math:`\alpha \in (0, 1)` (targets 0.9 and 0.8 in the paper: ``alpha`` 0.1 and 0.2).

    Attributes
    ----------
    threshold_ : float
        :math:`\hat q`; ``inf`` when :math:`k > n_c` (too few items for the level: every set is ``{0, 1}``).
        :meth:`to_dict` writes it as ``None`` in that case, and :meth:`from_dict` reads ``None``, ``"inf"`` or a
        number.
    rank_ : int
        :math:`k`.
    n_calibration_ : int
        :math:`n_c`.

    Notes
    -----
    Sets can be empty when :math:`\hat q < 1/2` (both :math:`\hat p` and :math:`1 - \hat p` below
    :math:`1 - \hat q`); they are kept (size 0, a miss). Binary judge scores tie a lot, so expect over-coverage.
    The scores of prediction and of calibration are computed by the same expression, so an item whose score
    equals :math:`\hat q` is covered. :math:`k` is computed with a 1e-9 guard against float round-off (e.g.
    :math:`n_c = 99`, :math:`\alpha = 0.1` gives :math:`k = 90`). Cost :math:`O(n_c \log n_c)`.

    References
    ----------
    .. [1] V. Vovk, A. Gammerman, G. Shafer. Algorithmic Learning in a Random World. Springer, 2005.
       doi:10.1007/b106715.
    .. [2] M. Sadinle, J. Lei, L. Wasserman. Least Ambiguous Set-Valued Classifiers With Bounded Error Levels.
       JASA 114(525):223-234, 2019. doi:10.1080/01621459.2017.1395341.
    .. [3] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §3.5, eqs. (5)-(6).

    Examples
    --------
    >>> p_cal = np.array([0.9, 0.8, 0.3, 0.6, 0.2, 0.7, 0.95, 0.4, 0.1])
    >>> y_cal = np.array([1, 1, 0, 0, 0, 1, 1, 1, 0])
    >>> conf = SplitConformal(alpha=0.2).fit(p_cal, y_cal)  # k = ceil(10 * 0.8) = 8
    >>> conf.rank_, round(conf.threshold_, 2)  # 8th smallest of the scores 1 - p_{y_i}
    (8, 0.6)
    >>> conf.predict_set([0.5, 0.9, 0.35])
    array([[ True,  True],
           [False,  True],
           [ True, False]])
    """

    def __init__(self, *, alpha: float = 0.1) -> None:
        self.alpha = alpha

    def fit(self, p_cal: npt.ArrayLike, y_cal: npt.ArrayLike) -> Self:
        """Compute the conformal threshold on the conformal slice.

        Parameters
        ----------
        p_cal : array-like of shape (n_c,)
            Calibrated :math:`\\hat p = P(Y=1)` of the slice items, in [0, 1].
        y_cal : array-like of shape (n_c,)
            Their labels in {0, 1}.

        Returns
        -------
        self

        Raises
        ------
        InputError
            If ``p_cal`` is not a 1-D probability vector, ``y_cal`` is not binary, or the lengths differ.
        ConfigError
            If ``alpha`` is not in (0, 1).
        """
        where = "SplitConformal.fit"
        alpha = self._check_alpha(where)
        p = check_probabilities(p_cal, where=where, name="p_cal")
        y = check_binary_labels(y_cal, where=where, name="y_cal")
        check_same_length(("p_cal", p), ("y_cal", y), where=where)
        scores = _lac_scores(p)[np.arange(y.size), y]
        n_c = scores.size
        k = math.ceil((n_c + 1) * (1.0 - alpha) - _ROUND_OFF)
        self.threshold_ = float(np.sort(scores)[k - 1]) if k <= n_c else math.inf
        self.rank_, self.n_calibration_ = k, n_c
        return self

    def predict_set(self, p: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Prediction sets as a boolean matrix: column ``y`` is True iff label ``y`` is in :math:`C_\\alpha(x)`.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit`.
        InputError
            If ``p`` is not a 1-D probability vector.
        """
        check_is_fitted(self)
        probs = check_probabilities(p, where="SplitConformal.predict_set", name="p")
        return np.asarray(_lac_scores(probs) <= self.threshold_)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state: ``alpha``, ``threshold`` (``None`` for :math:`+\\infty`), ``rank``, ``n_calibration``.

        Examples
        --------
        >>> SplitConformal(alpha=0.1).fit([0.9, 0.8], [1, 1]).to_dict()  # k = 3 > 2 items
        {'alpha': 0.1, 'threshold': None, 'rank': 3, 'n_calibration': 2}
        """
        check_is_fitted(self)
        threshold = None if math.isinf(self.threshold_) else self.threshold_
        return {"alpha": self.alpha, "threshold": threshold, "rank": self.rank_, "n_calibration": self.n_calibration_}

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> SplitConformal:
        """Rebuild a fitted instance from :meth:`to_dict` output; ``threshold`` may be ``None``, ``"inf"`` or a number.

        Raises
        ------
        InputError
            If a key is missing or ``threshold`` is not ``None``, ``"inf"`` or a number in [0, 1].
        """
        where = "SplitConformal.from_dict"
        missing = {"alpha", "threshold", "rank", "n_calibration"} - set(state)
        if missing:
            raise InputError(f"{where}: missing keys {sorted(missing)}")
        raw = state["threshold"]
        if raw is None or (isinstance(raw, str) and raw.lower() in ("inf", "+inf", "infinity")):
            threshold = math.inf
        elif (
            isinstance(raw, numbers.Real)
            and not isinstance(raw, bool)
            and (0.0 <= float(raw) <= 1.0 or raw == math.inf)
        ):
            threshold = float(raw)
        else:
            raise InputError(f"{where}: threshold: expected None, 'inf' or a number in [0, 1], got {raw!r}")
        model = cls(alpha=state["alpha"])
        model._check_alpha(where)
        model.threshold_, model.rank_, model.n_calibration_ = threshold, int(state["rank"]), int(state["n_calibration"])
        return model

    def _check_alpha(self, where: str) -> float:
        return float(
            check_param(
                self.alpha,
                where=where,
                name="alpha",
                target_type=numbers.Real,
                min_val=0.0,
                max_val=1.0,
                include_boundaries="neither",
            )
        )
