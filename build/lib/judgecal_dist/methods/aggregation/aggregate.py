r"""Step 1 of the pipeline: aggregators that turn a panel's verdicts into a raw probability :math:`p_i` (spec §3.1).

Every aggregator reads the dense vote matrix of :mod:`judgecal_dist.methods.aggregation.votes` (1 = A / class 1, 0 = B /
class 0, -1 = missing), skips missing verdicts (never imputes them), returns its prior for an item with no
verdict, and exposes ``predict_proba(V)`` with columns ``[P(B), P(A)] = [P(Y=0), P(Y=1)]`` and
``decision_function(V)``, the log-odds :math:`\mathrm{logit}\,P(Y=1)`: exact and unbounded for the log-odds
models (a large panel's one-coin log-odds reach hundreds of nats, far beyond what a float probability resolves),
the logit of the vote fraction (:math:`\pm\infty` at a unanimous vote) for the vote-fraction models.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
"""

from __future__ import annotations

import numbers
from typing import Any, Self

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit
from sklearn.base import BaseEstimator, ClassifierMixin

from judgecal_dist.methods.aggregation.votes import (
    MISSING,
    VOTE_A,
    LogOddsTransformer,
    check_judge_counts,
    check_votes,
    class_prior,
    count_judge_votes,
    signed_votes,
)
from judgecal_dist.stats.checks import check_binary_labels, check_param, check_same_length

__all__ = ["MajorityVote", "CountAggregator", "OneCoin", "log_odds_proba", "log_odds_score"]

_CLASSES = np.array([0, 1])


def log_odds_score(
    votes: npt.NDArray[np.int8], weights: npt.NDArray[np.float64], prior: float
) -> npt.NDArray[np.float64]:
    r"""Log-odds :math:`t_i = \mathrm{logit}\,\pi + \sum_j z_{ij} w_j` of a weighted vote (checked ``votes``).

    Examples
    --------
    >>> log_odds_score(np.array([[1, 0, -1]], dtype=np.int8), np.array([2.0, 1.0, 5.0]), 0.5)
    array([1.])
    """
    return np.asarray(logit(prior) + signed_votes(votes) @ weights, dtype=np.float64)


def log_odds_proba(
    votes: npt.NDArray[np.int8], weights: npt.NDArray[np.float64], prior: float
) -> npt.NDArray[np.float64]:
    r"""``[P(Y=0), P(Y=1)]`` of a weighted log-odds vote, :math:`\sigma(\mathrm{logit}\,\pi + \sum_j z_{ij} w_j)`.

    One matrix-vector product over the :math:`\pm 1` votes (missing votes have :math:`z_{ij} = 0`); ``votes``
    must already be checked by :func:`~judgecal_dist.methods.aggregation.votes.check_votes`.

    Examples
    --------
    >>> log_odds_proba(np.array([[1, 0, -1]], dtype=np.int8), np.array([2.0, 1.0, 5.0]), 0.5)[:, 1].round(4)
    array([0.7311])
    """
    t = log_odds_score(votes, weights, prior)  # logit(pi) + sum_j z_ij w_j
    # expit(-t) rather than 1 - expit(t): P(B) keeps full relative precision when P(A) is near 1.
    return np.column_stack([expit(-t), expit(t)])


class MajorityVote(ClassifierMixin, LogOddsTransformer, BaseEstimator):
    r"""Majority vote as a probability: the fraction of non-missing verdicts that vote for A (spec §3.1(a)).

    .. math::

        p_i^{\mathrm{MV}} = \frac{1}{|S_i|}\sum_{j \in S_i} V_{ij},\qquad S_i = \{j : V_{ij} \ne \bot\},

    and :math:`p_i = 1/2` when :math:`S_i = \emptyset`. The model has no parameters; :meth:`fit` only checks its
    input and records the panel size, so that scoring a different panel is an error.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        ``[0, 1]`` (B, A).
    n_features_in_ : int
        Number of judges (columns of ``V``) seen in :meth:`fit`.

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §3.1 ("vote fraction", H.9).

    Examples
    --------
    >>> V = np.array([[1, 1, 0], [0, -1, -1], [-1, -1, -1]], dtype=np.int8)
    >>> MajorityVote().fit(V).predict_proba(V)[:, 1]
    array([0.66666667, 0.        , 0.5       ])
    """

    def __init__(self) -> None:
        pass

    def fit(self, V: npt.ArrayLike, y: npt.ArrayLike | None = None) -> Self:
        """Check ``V`` (and ``y`` when given) and record the panel size.

        Parameters
        ----------
        V : array-like of shape (n_items, n_judges)
            Vote codes in {-1, 0, 1}.
        y : array-like of shape (n_items,), optional
            Labels in {0, 1}; unused, checked when given.

        Returns
        -------
        self

        Raises
        ------
        InputError
            If ``V`` is not a valid vote matrix, or ``y`` is not binary or does not match ``V``'s rows.
        """
        votes = check_votes(V, where="MajorityVote.fit")
        if y is not None:
            labels = check_binary_labels(y, where="MajorityVote.fit")
            check_same_length(("V", votes), ("y", labels), where="MajorityVote.fit")
        self.n_features_in_ = votes.shape[1]
        self.classes_ = _CLASSES.copy()
        return self

    def predict_proba(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Vote fractions as ``[P(B), P(A)]`` per item; 1/2 for items without any verdict.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit`.
        InputError
            If ``V`` is not a valid vote matrix for the fitted panel.
        """
        votes = self._fitted_votes(V, "predict_proba")
        n_a = (votes == VOTE_A).sum(axis=1, dtype=np.int64)
        n_voted = (votes != MISSING).sum(axis=1, dtype=np.int64)
        p_a = np.divide(n_a, n_voted, out=np.full(n_a.shape, 0.5), where=n_voted > 0)
        return np.column_stack([1.0 - p_a, p_a])

    def decision_function(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Logit of the vote fraction; :math:`\\pm\\infty` for a unanimous vote (clip before calibrating on it)."""
        p = self.predict_proba(V)
        with np.errstate(divide="ignore"):
            return np.asarray(np.log(p[:, 1]) - np.log(p[:, 0]), dtype=np.float64)


class CountAggregator(ClassifierMixin, LogOddsTransformer, BaseEstimator):
    """Base of the aggregators fitted from per-judge counts :math:`(n_j, c_j)` alone (spec §3.1(b)-(d), §8).

    ``fit(V, y)`` computes the counts with :func:`~judgecal_dist.methods.aggregation.votes.count_judge_votes` and calls
    :meth:`fit_counts`, so fitting on the vote matrix and fitting on the engine's one-pass counts are the same
    code path. Subclasses implement ``_fit_counts`` (set the fitted weights) and ``_predict_proba`` (score a
    checked vote matrix).
    """

    def fit(self, V: npt.ArrayLike, y: npt.ArrayLike) -> Self:
        """Fit on labelled items.

        Parameters
        ----------
        V : array-like of shape (n_items, n_judges)
            Vote codes in {-1, 0, 1} of the fit items.
        y : array-like of shape (n_items,)
            Labels in {0, 1}.

        Returns
        -------
        self

        Raises
        ------
        InputError
            If ``V`` is not a valid vote matrix, ``y`` is not binary, or their numbers of items differ.
        ConfigError
            If a hyperparameter is invalid.
        """
        where = f"{type(self).__name__}.fit"
        votes = check_votes(V, where=where)
        labels = check_binary_labels(y, where=where)
        check_same_length(("V", votes), ("y", labels), where=where)
        n_votes, n_correct = count_judge_votes(votes, labels)
        return self.fit_counts(n_votes, n_correct, n_items=labels.size, n_positive=int(labels.sum()))

    def fit_counts(
        self,
        n_votes: npt.ArrayLike,
        n_correct: npt.ArrayLike,
        *,
        n_items: int | None = None,
        n_positive: int | None = None,
    ) -> Self:
        """Fit from per-judge sufficient statistics instead of the vote matrix.

        ``fit_counts(*count_judge_votes(V, y), n_items=len(y), n_positive=sum(y))`` equals ``fit(V, y)``.

        Parameters
        ----------
        n_votes, n_correct : array-like of shape (n_judges,)
            Non-negative integer counts :math:`n_j` and :math:`c_j \\le n_j`.
        n_items, n_positive : int, optional
            Number of fit items and how many have :math:`Y = 1`; required only for ``prior="empirical"``.

        Returns
        -------
        self

        Raises
        ------
        InputError
            If the counts are not 1-D non-negative integers of equal length with ``n_correct <= n_votes``, or the
            item counts are missing (with ``prior="empirical"``) or inconsistent.
        ConfigError
            If a hyperparameter is invalid.
        """
        where = f"{type(self).__name__}.fit_counts"
        n_j, c_j = check_judge_counts(n_votes, n_correct, where=where)
        self._fit_counts(n_j, c_j, n_items=n_items, n_positive=n_positive, where=where)
        self.n_votes_, self.n_correct_ = n_j, c_j
        self.n_features_in_ = n_j.size
        self.classes_ = _CLASSES.copy()
        return self

    @classmethod
    def from_counts(
        cls,
        n_votes: npt.ArrayLike,
        n_correct: npt.ArrayLike,
        *,
        n_items: int | None = None,
        n_positive: int | None = None,
        **params: Any,
    ) -> Self:
        """``cls(**params).fit_counts(n_votes, n_correct, n_items=..., n_positive=...)`` in one call.

        Examples
        --------
        >>> OneCoin.from_counts([10, 10], [9, 5]).weights_.round(4)
        array([1.6094, 0.    ])
        """
        return cls(**params).fit_counts(n_votes, n_correct, n_items=n_items, n_positive=n_positive)

    def predict_proba(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``[P(Y=0 | V_i), P(Y=1 | V_i)]`` per item; the prior for items with no verdict.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit` or :meth:`fit_counts`.
        InputError
            If ``V`` is not a valid vote matrix for the fitted panel.
        """
        return self._predict_proba(self._fitted_votes(V, "predict_proba"))

    def decision_function(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log-odds :math:`\\mathrm{logit}\\,P(Y=1 \\mid V_i)` per item, unclipped (0 for the half prior without a verdict).

        The log-odds models compute it directly (no probability is formed); the vote-fraction models return the
        logit of their probability, :math:`\\pm\\infty` at 0 and 1.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit` or :meth:`fit_counts`.
        InputError
            If ``V`` is not a valid vote matrix for the fitted panel.
        """
        return self._decision_function(self._fitted_votes(V, "decision_function"))

    def _decision_function(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        p = self._predict_proba(votes)
        with np.errstate(divide="ignore"):
            return np.asarray(np.log(p[:, 1]) - np.log(p[:, 0]), dtype=np.float64)

    def _fit_counts(
        self,
        n_j: npt.NDArray[np.int64],
        c_j: npt.NDArray[np.int64],
        *,
        n_items: int | None,
        n_positive: int | None,
        where: str,
    ) -> None:
        raise NotImplementedError

    def _predict_proba(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        raise NotImplementedError


class OneCoin(CountAggregator):
    r"""Bayesian one-coin aggregator integrated over Beta posteriors of judge accuracy (spec §3.1(d), eq. (1)).

    Judge :math:`j` reports the true label with probability :math:`\theta_j` whatever the class, verdicts are
    independent given :math:`Y`, and :math:`\theta_j \sim \mathrm{Beta}(\alpha_0, \beta_0)`. Given the labelled
    fit items, :math:`\theta_j \mid \mathcal C \sim \mathrm{Beta}(a_j, b_j)` with

    .. math::

        a_j = c_j + \alpha_0,\qquad b_j = n_j - c_j + \beta_0,\qquad
        r_j = \frac{a_j}{a_j + b_j},\qquad \psi_j = \log\frac{a_j}{b_j},

    where :math:`n_j` counts judge :math:`j`'s non-missing verdicts on the fit items and :math:`c_j` its correct
    ones. Each new verdict involves each :math:`\theta_j` once, so integrating the posteriors out gives the exact
    posterior predictive

    .. math::

        P(Y_i = 1 \mid V_i, \mathcal C) = \sigma\Big(\mathrm{logit}\,\pi + \sum_{j \in S_i} z_{ij}\,\psi_j\Big),
        \qquad z_{ij} = 2V_{ij} - 1,

    computed in log-odds space as one matrix-vector product :math:`Z\psi` (missing verdicts have
    :math:`z_{ij} = 0`). A judge below chance (:math:`r_j < 1/2`) gets :math:`\psi_j < 0`, so its verdict is
    flipped rather than discarded (Theorem 1 of [1]_).

    Parameters
    ----------
    alpha0, beta0 : float, default 1.0
        Beta prior of every judge's accuracy; the default is the uniform (Laplace) prior.
    prior : {"half", "empirical"}, default "half"
        Class prior :math:`\pi`: ``"half"`` is :math:`1/2`; ``"empirical"`` is the Laplace-smoothed share of
        class 1 among the fit items, :math:`\hat\pi = (\sum_i Y_i + 1)/(n + 2)`.

    Attributes
    ----------
    n_votes_, n_correct_ : ndarray of int64, shape (n_judges,)
        :math:`n_j` and :math:`c_j` on the fit items.
    posterior_a_, posterior_b_ : ndarray of float64, shape (n_judges,)
        :math:`a_j`, :math:`b_j`.
    accuracy_ : ndarray of float64, shape (n_judges,)
        Posterior mean accuracy :math:`r_j` (the top-:math:`k` ranking key, spec §3.1(g)).
    weights_ : ndarray of float64, shape (n_judges,)
        Log-odds weights :math:`\psi_j`; **0 for a judge with no verdict on the fit items** (:math:`n_j = 0`).
    prior_ : float
        Class prior :math:`\pi`.
    classes_ : ndarray of shape (2,)
        ``[0, 1]`` (B, A).
    n_features_in_ : int
        Number of judges.

    Notes
    -----
    A judge with :math:`n_j = 0` has no evidence; its posterior is the prior and the integrated weight would be
    :math:`\log(\alpha_0/\beta_0)`, which is 0 for a symmetric prior. The weight is set to 0 for any prior, as
    for the plug-in log-odds weights of spec §3.1(c), so that an asymmetric prior never lets an unseen judge sway
    an item; ``accuracy_`` still reports the prior mean.

    Fitting costs :math:`O(nJ)` from ``(V, y)`` and :math:`O(J)` from counts (:meth:`fit_counts`), which is how
    the engine fits many replicates from one pass of per-judge counts. Prediction builds a dense float64
    :math:`\pm 1` copy of ``V`` (8 bytes per cell).

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702,
       2026, eq. (1) and Theorem 1.
    .. [2] A. P. Dawid, A. M. Skene. Maximum Likelihood Estimation of Observer Error-Rates Using the EM
       Algorithm. JRSS C 28(1), 1979. doi:10.2307/2346806 (the one-coin model is its symmetric special case).

    Examples
    --------
    >>> V = np.array([[1, 1, 0], [0, 0, 1], [1, -1, 0], [0, 1, -1]], dtype=np.int8)
    >>> y = np.array([1, 0, 1, 0])
    >>> model = OneCoin().fit(V, y)
    >>> model.n_votes_, model.n_correct_
    (array([4, 3, 3]), array([4, 2, 0]))
    >>> model.weights_.round(4)  # judge 2 is always wrong: its votes are flipped
    array([ 1.6094,  0.4055, -1.3863])
    >>> model.predict_proba([[1, 1, 0], [-1, -1, -1]])[:, 1].round(4)
    array([0.9677, 0.5   ])
    """

    exact_log_odds = True

    def __init__(self, *, alpha0: float = 1.0, beta0: float = 1.0, prior: str = "half") -> None:
        self.alpha0 = alpha0
        self.beta0 = beta0
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
        alpha0, beta0 = (
            float(
                check_param(v, where=where, name=k, target_type=numbers.Real, min_val=0, include_boundaries="neither")
            )
            for k, v in (("alpha0", self.alpha0), ("beta0", self.beta0))
        )
        self.prior_ = class_prior(self.prior, n_items=n_items, n_positive=n_positive, where=where)
        self.posterior_a_ = c_j + alpha0  # a_j = c_j + alpha_0 (spec §2)
        self.posterior_b_ = n_j - c_j + beta0  # b_j = n_j - c_j + beta_0
        self.accuracy_ = self.posterior_a_ / (self.posterior_a_ + self.posterior_b_)
        psi = np.log(self.posterior_a_) - np.log(self.posterior_b_)
        self.weights_ = np.where(n_j > 0, psi, 0.0)

    def _predict_proba(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        return log_odds_proba(votes, self.weights_, self.prior_)

    def _decision_function(self, votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        return log_odds_score(votes, self.weights_, self.prior_)
