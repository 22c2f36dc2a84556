r"""Weighted votes with plug-in judge accuracies :math:`\hat\theta_j = c_j / n_j` (spec §3.1(b), (c)).

Both aggregators are fitted from the per-judge counts :math:`(n_j, c_j)` alone (through
:class:`~judgecal_dist.methods.aggregation.aggregate.CountAggregator`), so the engine fits every replicate from one pass of
counts (:meth:`fit_counts`). Missing verdicts are skipped; a judge without a verdict on the fit items
(:math:`n_j = 0`) gets weight 0.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
"""

from __future__ import annotations

import numbers

import numpy as np
import numpy.typing as npt
from scipy.special import logit

from judgecal_dist.methods.aggregation.aggregate import CountAggregator, log_odds_proba, log_odds_score
from judgecal_dist.methods.aggregation.votes import MISSING, VOTE_A, class_prior
from judgecal_dist.stats.checks import check_param

__all__ = ["AccuracyWeighted", "LogOddsWeighted"]


def _plug_in_accuracy(n_j: npt.NDArray[np.int64], c_j: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """:math:`c_j / n_j`, and 0 where :math:`n_j = 0` (no evidence: such a judge never enters a weighted sum)."""
    return np.divide(c_j, n_j, out=np.zeros(n_j.shape), where=n_j > 0)


class AccuracyWeighted(CountAggregator):
    r"""Accuracy-weighted vote fraction (spec §3.1(b)).

    .. math::

        p_i^{\mathrm{AW}} = \frac{\sum_{j \in S_i} \hat\theta_j V_{ij}}{\sum_{j \in S_i} \hat\theta_j},
        \qquad \hat\theta_j = \frac{c_j}{n_j},

    with :math:`\hat\theta_j = 0` when :math:`n_j = 0`, and :math:`p_i = 1/2` when no judge of :math:`S_i` has a
    positive weight (no verdict at all, or only judges that were never right or never seen on the fit items).

    Attributes
    ----------
    n_votes_, n_correct_ : ndarray of int64, shape (n_judges,)
        :math:`n_j` and :math:`c_j` on the fit items.
    weights_ : ndarray of float64, shape (n_judges,)
        :math:`\hat\theta_j` (0 for :math:`n_j = 0`).
    classes_ : ndarray of shape (2,)
        ``[0, 1]`` (B, A).
    n_features_in_ : int
        Number of judges.

    Notes
    -----
    Weights are non-negative, so unlike :class:`LogOddsWeighted` a below-chance judge is down-weighted, never
    flipped. Prediction is two matrix-vector products over indicator matrices, :math:`O(nJ)`.

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §3.1 and Table 1 ("AW").

    Examples
    --------
    >>> V = np.array([[1, 1, 0], [0, 0, 1], [1, -1, 0], [0, 1, -1]], dtype=np.int8)
    >>> model = AccuracyWeighted().fit(V, [1, 0, 1, 0])
    >>> model.weights_.round(4)
    array([1.    , 0.6667, 0.    ])
    >>> model.predict_proba([[1, 0, 1], [-1, -1, 0]])[:, 1].round(4)  # 1 / (1 + 2/3); judge 2 has weight 0
    array([0.6, 0.5])
    """

    def __init__(self) -> None:
        pass

    def _fit_counts(
        self,
        n_j: npt.NDArray[np.int64],
        c_j: npt.NDArray[np.int64],
        *,
        n_items: int | None,
        n_positive: int | None,
        where: str,
    ) -> None:
        self.weights_ = _plug_in_accuracy(n_j, c_j)

    def _predict_proba(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        num = (votes == VOTE_A).astype(np.float64) @ self.weights_  # sum_{j in S_i} theta_j V_ij
        den = (votes != MISSING).astype(np.float64) @ self.weights_  # sum_{j in S_i} theta_j
        p_a = np.divide(num, den, out=np.full(num.shape, 0.5), where=den > 0)
        return np.column_stack([1.0 - p_a, p_a])


class LogOddsWeighted(CountAggregator):
    r"""Log-odds weighted vote with plug-in weights, the plug-in form of Proposition 2 (spec §3.1(c)).

    .. math::

        p_i^{\mathrm{LO}} = \sigma\Big(\mathrm{logit}\,\pi + \sum_{j \in S_i} z_{ij}\,\hat w_j\Big),\qquad
        \hat w_j = \log\frac{\tilde\theta_j}{1 - \tilde\theta_j},\qquad
        \tilde\theta_j = \mathrm{clip}(c_j / n_j,\ \varepsilon_\theta,\ 1 - \varepsilon_\theta),

    with :math:`z_{ij} = 2V_{ij} - 1` and :math:`\hat w_j = 0` when :math:`n_j = 0`. It differs from the
    integrated one-coin model (:class:`~judgecal_dist.methods.aggregation.aggregate.OneCoin`) only by using
    :math:`\hat\theta_j` instead of the posterior mean :math:`(c_j + \alpha_0)/(n_j + \alpha_0 + \beta_0)`.

    Parameters
    ----------
    eps_theta : float, default 1e-3
        Clipping floor :math:`\varepsilon_\theta \in (0, 1/2)` of the plug-in accuracy, which bounds every weight
        by :math:`\mathrm{logit}(1 - \varepsilon_\theta)` (6.9 nats for the default).
    prior : {"half", "empirical"}, default "half"
        Class prior :math:`\pi`: :math:`1/2`, or :math:`(\sum_i Y_i + 1)/(n + 2)` on the fit items.

    Attributes
    ----------
    n_votes_, n_correct_ : ndarray of int64, shape (n_judges,)
        :math:`n_j` and :math:`c_j` on the fit items.
    weights_ : ndarray of float64, shape (n_judges,)
        :math:`\hat w_j`; negative for a below-chance judge (its votes are flipped), 0 for :math:`n_j = 0`.
    prior_ : float
        Class prior :math:`\pi`.
    classes_ : ndarray of shape (2,)
        ``[0, 1]`` (B, A).
    n_features_in_ : int
        Number of judges.

    Notes
    -----
    Under the oracle one-coin model with known accuracies :math:`p_j`, the weights :math:`\log(p_j/(1-p_j))` give
    the Bayes-optimal decision [2]_; here they are estimated. Prediction is one matrix-vector product,
    :math:`O(nJ)`, in log-odds space.

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §3.1(c) and Proposition 2.
    .. [2] S. Nitzan, J. Paroush. Optimal Decision Rules in Uncertain Dichotomous Choice Situations.
       International Economic Review 23(2):289-297, 1982.

    Examples
    --------
    >>> V = np.array([[1, 1, 0], [0, 0, 1], [1, -1, 0], [0, 1, -1]], dtype=np.int8)
    >>> model = LogOddsWeighted().fit(V, [1, 0, 1, 0])
    >>> model.weights_.round(4)  # logit(0.999), logit(2/3), logit(0.001)
    array([ 6.9068,  0.6931, -6.9068])
    >>> model.predict_proba([[-1, 1, -1], [-1, -1, -1]])[:, 1].round(4)
    array([0.6667, 0.5   ])
    """

    exact_log_odds = True

    def __init__(self, *, eps_theta: float = 1e-3, prior: str = "half") -> None:
        self.eps_theta = eps_theta
        self.prior = prior

    def _fit_counts(
        self,
        n_j: npt.NDArray[np.int64],
        c_j: npt.NDArray[np.int64],
        *,
        n_items: int | None,
        n_positive: int | None,
        where: str,
    ) -> None:
        eps_theta = float(
            check_param(
                self.eps_theta,
                where=where,
                name="eps_theta",
                target_type=numbers.Real,
                min_val=0.0,
                max_val=0.5,
                include_boundaries="neither",
            )
        )
        self.prior_ = class_prior(self.prior, n_items=n_items, n_positive=n_positive, where=where)
        theta = np.clip(_plug_in_accuracy(n_j, c_j), eps_theta, 1.0 - eps_theta)
        self.weights_ = np.where(n_j > 0, logit(theta), 0.0)

    def _predict_proba(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        return log_odds_proba(votes, self.weights_, self.prior_)

    def _decision_function(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        return log_odds_score(votes, self.weights_, self.prior_)
