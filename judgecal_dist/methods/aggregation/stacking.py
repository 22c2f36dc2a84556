r"""Logistic stacking of the judges' signed votes with out-of-fold scores (spec §3.1(f), H.9).

A reported-but-not-recommended baseline: with one free coefficient per judge it memorises small calibration
sets, which is why the calibrator is trained on its out-of-fold scores rather than on in-sample ones.

References
----------
.. [1] D. H. Wolpert. Stacked Generalization. Neural Networks 5(2):241-259, 1992.
   doi:10.1016/S0893-6080(05)80023-1.
.. [2] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Self

import numpy as np
import numpy.typing as npt
from scipy.special import logit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation.votes import LogOddsTransformer, check_votes, signed_votes
from judgecal_dist.stats.checks import DEFAULT_EPS, check_binary_labels, check_param, check_same_length

__all__ = ["LogisticStacking"]

_MAX_ITER = 1000  # L-BFGS iterations of each logistic fit; the L2 penalty keeps the problem well conditioned


class LogisticStacking(ClassifierMixin, LogOddsTransformer, BaseEstimator):
    r"""L2-penalised logistic regression on the :math:`\pm 1` votes, with K-fold out-of-fold scores (spec §3.1(f)).

    .. math::

        p_i = \sigma\big(\beta_0 + \textstyle\sum_j \beta_j z_{ij}\big),\qquad
        z_{ij} = 2V_{ij} - 1 \in \{-1, +1\},\ z_{ij} = 0 \text{ if missing},

        \hat\beta = \arg\min_\beta\ \tfrac12 \lVert \beta_{1:J} \rVert^2 + C \sum_i \ell(p_i, y_i)
        \quad (\text{sklearn's } C,\ \text{intercept unpenalised}).

    On the fit items, ``oof_scores_`` are out-of-fold predictions (:func:`sklearn.model_selection.cross_val_predict`
    over a :class:`~sklearn.model_selection.StratifiedKFold` with ``n_folds`` folds): the Step-1 scores on which
    the calibrator is trained. New items are scored by the model refitted on all fit items.

    Parameters
    ----------
    C : float, default 1.0
        Inverse L2 strength of :class:`~sklearn.linear_model.LogisticRegression`.
    n_folds : int, default 5
        Number of stratified folds of the out-of-fold scores (at least 2).
    random_state : int or None, default None
        ``None`` keeps the folds in item order (deterministic); an integer shuffles the items with that seed
        before splitting (the replicate's seed, spec §7 item 11).

    Attributes
    ----------
    oof_scores_ : ndarray of float64, shape (n_items,)
        Out-of-fold :math:`P(Y=1)` of the fit items.
    model_ : sklearn.linear_model.LogisticRegression or None
        The model refitted on all fit items (``None`` after a fallback).
    coef_ : ndarray of float64, shape (n_judges,)
        :math:`\beta_{1:J}` (zeros after a fallback).
    intercept_ : float
        :math:`\beta_0` (:math:`\mathrm{logit}` of the clipped label after a fallback).
    fallback_ : str or None
        ``"constant_labels"`` when ``y`` has one class, else ``None``.
    classes_ : ndarray of shape (2,)
        ``[0, 1]`` (B, A).
    n_features_in_ : int
        Number of judges.

    Warns
    -----
    UserWarning
        With a single class in ``y``: the logistic fit has no finite optimum (the intercept is unpenalised), so
        every score, in-fold and new, is that label clipped to :math:`[\varepsilon, 1-\varepsilon]` with
        :math:`\varepsilon = 10^{-6}` (the "NLL at the clipping floor" the paper reports under ``gold_positive``).
        sklearn also warns when a class has fewer items than ``n_folds``.

    Notes
    -----
    A judge without verdicts on the fit items has an all-zero column and gets :math:`\beta_j = 0`. Cost:
    ``n_folds + 1`` logistic fits on a dense float64 :math:`n \times J` matrix.

    References
    ----------
    .. [1] D. H. Wolpert. Stacked Generalization. Neural Networks 5(2):241-259, 1992.
       doi:10.1016/S0893-6080(05)80023-1.
    .. [2] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §3.1(f) and H.9.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 60)
    >>> V = np.where(rng.random((60, 4)) < [0.9, 0.8, 0.7, 0.3], y[:, None], 1 - y[:, None])
    >>> model = LogisticStacking(random_state=0).fit(V, y)
    >>> model.oof_scores_.shape, bool(model.coef_[3] < 0)  # the below-chance judge gets a negative weight
    ((60,), True)
    """

    exact_log_odds = True

    def __init__(self, *, C: float = 1.0, n_folds: int = 5, random_state: int | None = None) -> None:
        self.C = C
        self.n_folds = n_folds
        self.random_state = random_state

    def fit(self, V: npt.ArrayLike, y: npt.ArrayLike) -> Self:
        """Compute out-of-fold scores on the fit items, then refit on all of them.

        Parameters
        ----------
        V : array-like of shape (n_items, n_judges)
            Vote codes in {-1, 0, 1}.
        y : array-like of shape (n_items,)
            Labels in {0, 1}.

        Returns
        -------
        self

        Raises
        ------
        InputError
            If ``V`` or ``y`` is invalid, their lengths differ, a class has a single item, or there are fewer
            items than ``n_folds``.
        ConfigError
            If a hyperparameter is invalid.
        """
        where = "LogisticStacking.fit"
        C = float(
            check_param(
                self.C, where=where, name="C", target_type=numbers.Real, min_val=0.0, include_boundaries="neither"
            )
        )
        n_folds = int(check_param(self.n_folds, where=where, name="n_folds", target_type=numbers.Integral, min_val=2))
        votes = check_votes(V, where=where)
        labels = check_binary_labels(y, where=where)
        check_same_length(("V", votes), ("y", labels), where=where)
        self.n_features_in_ = votes.shape[1]
        self.classes_ = np.array([0, 1])
        class_counts = np.bincount(labels, minlength=2)
        if class_counts.min() == 0:
            self._constant_fallback(int(labels[0]), labels.size, where)
            return self
        if class_counts.min() < 2 or class_counts.max() < n_folds:  # a stratified k-fold needs k of one class
            raise InputError(
                f"{where}: y: {n_folds}-fold out-of-fold scores need >= 2 items of each class and >= n_folds of one "
                "class "
                f"(class counts {class_counts.tolist()}, {labels.size} items); lower n_folds or add labelled items"
            )
        Z = signed_votes(votes)
        model = LogisticRegression(C=C, max_iter=_MAX_ITER)
        cv = StratifiedKFold(n_splits=n_folds, shuffle=self.random_state is not None, random_state=self.random_state)
        self.oof_scores_ = cross_val_predict(model, Z, labels, cv=cv, method="predict_proba")[:, 1]
        self.model_: LogisticRegression | None = model.fit(Z, labels)
        self.coef_ = model.coef_[0].astype(np.float64)
        self.intercept_ = float(model.intercept_[0])
        self.fallback_: str | None = None
        return self

    def _constant_fallback(self, label: int, n_items: int, where: str) -> None:
        warnings.warn(
            f"{where}: y has a single class ({label}): the logistic fit has no finite optimum, so every score is "
            f"the label clipped to [{DEFAULT_EPS}, 1 - {DEFAULT_EPS}]",
            UserWarning,
            stacklevel=3,
        )
        p = float(np.clip(label, DEFAULT_EPS, 1.0 - DEFAULT_EPS))
        self.oof_scores_ = np.full(n_items, p)
        self.model_ = None
        self.coef_ = np.zeros(self.n_features_in_)
        self.intercept_ = float(logit(p))
        self.fallback_ = "constant_labels"

    def predict_proba(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``[P(Y=0), P(Y=1)]`` of new items from the model refitted on all fit items.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit`.
        InputError
            If ``V`` is not a valid vote matrix for the fitted panel.
        """
        votes = self._fitted_votes(V, "predict_proba")
        if self.model_ is None:
            p = np.full(votes.shape[0], float(self.oof_scores_[0]))
            return np.column_stack([1.0 - p, p])
        return np.asarray(self.model_.predict_proba(signed_votes(votes)), dtype=np.float64)

    def decision_function(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log-odds of new items: the refitted model's linear predictor (the constant's logit after a fallback).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit`.
        InputError
            If ``V`` is not a valid vote matrix for the fitted panel.
        """
        votes = self._fitted_votes(V, "decision_function")
        if self.model_ is None:
            return np.full(votes.shape[0], float(logit(self.oof_scores_[0])))
        return np.asarray(self.model_.decision_function(signed_votes(votes)), dtype=np.float64)

    def fit_transform(
        self, V: npt.ArrayLike, y: npt.ArrayLike | None = None, **fit_params: Any
    ) -> npt.NDArray[np.float64]:
        """Fit, then the log-odds of the *out-of-fold* scores of the fit items, shape (n_items, 1): what a
        calibrator after stacking is trained on (in a ``Pipeline`` too), never the in-sample scores."""
        if y is None:
            raise InputError("LogisticStacking.fit_transform: y: required (stacking is fitted on labels)")
        self.fit(V, y)
        # eps = 0: float64 resolves P(Y=1) up to 1 - 2^-53, so the logit stays finite (as methods.pipeline does).
        p = np.clip(self.oof_scores_, np.finfo(np.float64).tiny, 1.0 - 2.0**-53)
        return np.asarray(logit(p), dtype=np.float64).reshape(-1, 1)
