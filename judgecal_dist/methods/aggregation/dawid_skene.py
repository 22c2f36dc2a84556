r"""Dawid-Skene EM for binary verdicts: a latent-class model with one 2x2 confusion matrix per judge (spec §3.1(e)).

Dense numpy implementation over the vote matrix of :mod:`judgecal_dist.methods.aggregation.votes`: the E-step is one matrix
product of the one-hot vote indicators with the log confusion matrices, the M-step one product of their
transpose with the soft labels, so an iteration costs :math:`O(nJ)` BLAS work and no per-item Python.

References
----------
.. [1] A. P. Dawid, A. M. Skene. Maximum Likelihood Estimation of Observer Error-Rates Using the EM Algorithm.
   Journal of the Royal Statistical Society, Series C 28(1):20-28, 1979. doi:10.2307/2346806.
.. [2] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Self

import numpy as np
import numpy.typing as npt
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning

from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation.cells import vote_cells, vote_indicators
from judgecal_dist.methods.aggregation.votes import MISSING, VOTE_A, VOTE_B, LogOddsTransformer, check_votes
from judgecal_dist.stats.checks import DEFAULT_EPS, check_eps, check_param, check_same_length

__all__ = ["DawidSkene", "UNLABELLED", "vote_cells", "vote_indicators"]

UNLABELLED: int = -1  # code of an item without a known label in ``y`` (semi-supervised fits)


def _normalise(log_joint: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Two-class softmax of the rows, :math:`T_{i1} = \\sigma(\\log\\tilde T_{i1} - \\log\\tilde T_{i0})`; each column
    is computed directly, so a posterior near 0 keeps full relative precision."""
    d = log_joint[:, 1] - log_joint[:, 0]
    return np.column_stack([expit(-d), expit(d)])


def _clamp(T: npt.NDArray[np.float64], labels: npt.NDArray[np.int64] | None) -> npt.NDArray[np.float64]:
    """Labelled items' soft labels set to their label (one-hot), in place."""
    if labels is not None:
        known = np.flatnonzero(labels != UNLABELLED)
        T[known] = np.eye(2)[labels[known]]
    return T


def _check_partial_labels(y: npt.ArrayLike | None, n_items: int, where: str) -> npt.NDArray[np.int64]:
    if y is None:
        raise InputError(f"{where}: y: required with semi_supervised=True (use -1 for items without a label)")
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InputError(f"{where}: y: expected a 1-D array of labels, got shape {arr.shape}; use np.ravel")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InputError(f"{where}: y: expected numeric labels in {{-1, 0, 1}}, got dtype {arr.dtype}")
    bad = ~np.isin(arr, (UNLABELLED, 0, 1))
    if bad.any():
        idx = np.flatnonzero(bad)[:3]
        examples = ", ".join(f"[{i}]={arr[i].item()!r}" for i in idx)
        raise InputError(f"{where}: y: labels must be 0, 1 or -1 (no label) ({int(bad.sum())} items, e.g. {examples})")
    check_same_length(("V", np.empty(n_items)), ("y", arr), where=where)
    return arr.astype(np.int64)


class DawidSkene(ClassifierMixin, LogOddsTransformer, BaseEstimator):
    r"""Binary ("two-coin") Dawid-Skene model fitted by EM on unlabelled votes (spec §3.1(e)).

    Judge :math:`j` votes :math:`v` on an item of class :math:`y` with probability
    :math:`\Pi^{(j)}_{yv} = P(V_{ij} = v \mid Y_i = y)`, independently across judges given :math:`Y_i`, and
    :math:`P(Y_i = 1) = \pi`. From soft labels :math:`T_{iy}` (initially the vote fraction,
    :math:`T_{i1} = p_i^{\mathrm{MV}}`, 1/2 for an item without verdicts) EM alternates

    .. math::

        \text{M-step:}\quad \pi = \frac1n \sum_i T_{i1},\qquad
        \Pi^{(j)}_{yv} = \frac{\sum_{i:\, j \in S_i} T_{iy}\,\mathbb 1[V_{ij} = v] + \eta}
                              {\sum_{i:\, j \in S_i} T_{iy} + 2\eta},

        \text{E-step:}\quad \log \tilde T_{iy} = \log \pi_y + \sum_{j \in S_i} \log \Pi^{(j)}_{y, V_{ij}},\qquad
        T_{iy} = \exp\big(\log\tilde T_{iy} - \mathrm{logsumexp}_{y'} \log\tilde T_{iy'}\big),

    with :math:`\pi_1 = \pi`, :math:`\pi_0 = 1 - \pi`, and the observed-data log-likelihood
    :math:`\ell = \sum_i \mathrm{logsumexp}_y \log\tilde T_{iy}`. Missing verdicts contribute a factor 1. Every
    probability entering a log (:math:`\pi_y`, :math:`\Pi^{(j)}_{yv}`) is clipped to
    :math:`[\varepsilon, 1-\varepsilon]`.

    Parameters
    ----------
    n_iter : int, default 100
        Maximum number of EM iterations (one M-step and one E-step each).
    tol : float, default 1e-8
        Stop when the relative change of the observed-data log-likelihood, :math:`|\ell_t - \ell_{t-1}| /
        |\ell_{t-1}|`, is below ``tol``.
    tol_posterior : float, default 1e-6
        Or stop when :math:`\max_i |T^{(t)}_{i1} - T^{(t-1)}_{i1}|` is below ``tol_posterior``.
    smoothing : float, default 0.01
        Additive smoothing :math:`\eta \ge 0` of the confusion matrices.
    semi_supervised : bool, default False
        If True, ``fit`` needs ``y`` with codes 0, 1 or -1 (no label); labelled items are clamped to their label
        (:math:`T_i` one-hot) after the initialisation and after every E-step, as in crowd-kit's ``true_labels``.
    fixed_iter : bool, default False
        If True, run exactly ``n_iter`` iterations, ignoring both tolerances, and never warn (the mode used to
        compare with other implementations at equal iterations); ``converged_`` still reports whether the
        last iteration met a stopping rule.
    eps : float, default 1e-6
        Clipping floor :math:`\varepsilon` of the probabilities entering a log.

    Attributes
    ----------
    posteriors_ : ndarray of shape (n_items, 2)
        Soft labels :math:`[T_{i0}, T_{i1}]` of the fit items after the last E-step.
    prior_ : float
        Class prior :math:`\pi = P(Y = 1)` from the final M-step.
    confusion_ : ndarray of shape (n_judges, 2, 2)
        :math:`\Pi^{(j)}_{yv}` from the final M-step, indexed ``[j, y, v]`` (rows sum to 1; clipping is applied
        only where the values enter a log). A judge without verdicts on the fit items has rows
        :math:`(1/2, 1/2)` and never moves a posterior.
    n_iter_ : int
        Iterations run.
    loss_history_ : list of float
        Mean negative observed-data log-likelihood per item, :math:`-\ell_t / n`, after each iteration.
    converged_ : bool
        Whether a stopping rule was met.
    label_switched_ : bool
        Whether the final classes were swapped (see Notes).
    classes_ : ndarray of shape (2,)
        ``[0, 1]`` (B, A).
    n_features_in_ : int
        Number of judges.

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        If no stopping rule was met within ``n_iter`` iterations (unless ``fixed_iter``).

    Notes
    -----
    *Label switching.* EM cannot tell the classes apart: after the loop, if the judges' mean balanced accuracy
    :math:`\frac1{J'}\sum_j \tfrac12(\Pi^{(j)}_{11} + \Pi^{(j)}_{00})` over the :math:`J'` judges with a verdict is
    below 1/2, the two classes are swapped in ``posteriors_``, ``prior_`` and ``confusion_``. A semi-supervised
    fit with at least one label is anchored by its labels and is never swapped.

    *Which rows.* Labels are not used (unless ``semi_supervised``), so which items to fit on is the caller's
    choice: the calibration items only (spec default; nothing from the evaluation split is touched), or
    transductively all items, calibration and evaluation together; new items are then scored by one E-step with
    the fitted :math:`(\pi, \Pi)` in :meth:`predict_proba`, which gives an item without verdicts the prior
    :math:`\pi`. ``posteriors_`` differs from ``predict_proba`` on the fit items by the final M-step (the
    difference vanishes at convergence).

    *crowd-kit.* ``crowdkit.aggregation.DawidSkene`` follows the same schedule (majority-vote init, then M- and
    E-steps, a final M-step) without smoothing, flooring the confusion counts at 1e-10 and the prior at 1e-10; with
    ``smoothing=0, eps=1e-10, fixed_iter=True`` the posteriors agree with its ``probas_`` at equal ``n_iter``
    (to about 1e-10: crowd-kit also floors its returned posteriors at 1e-10) as long as every item has a verdict
    (crowd-kit drops items without one, which changes its prior). It stops on a change of its evidence lower
    bound instead, and its semi-supervised ``true_labels`` clamp items as ``semi_supervised=True`` does here.

    *Cost.* Memory: a float64 indicator matrix of :math:`8 \cdot 2nJ` bytes; time :math:`O(nJ)` per iteration.

    References
    ----------
    .. [1] A. P. Dawid, A. M. Skene. Maximum Likelihood Estimation of Observer Error-Rates Using the EM
       Algorithm. JRSS C 28(1):20-28, 1979. doi:10.2307/2346806.
    .. [2] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §3.1(e).

    Examples
    --------
    >>> V = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 0], [0, 0, 1], [1, -1, 1], [0, 0, -1]], dtype=np.int8)
    >>> model = DawidSkene().fit(V)
    >>> model.converged_, model.label_switched_
    (True, False)
    >>> model.predict([[1, 1, 1], [0, 0, 0]])
    array([1, 0])
    """

    exact_log_odds = True

    def __init__(
        self,
        *,
        n_iter: int = 100,
        tol: float = 1e-8,
        tol_posterior: float = 1e-6,
        smoothing: float = 0.01,
        semi_supervised: bool = False,
        fixed_iter: bool = False,
        eps: float = DEFAULT_EPS,
    ) -> None:
        self.n_iter = n_iter
        self.tol = tol
        self.tol_posterior = tol_posterior
        self.smoothing = smoothing
        self.semi_supervised = semi_supervised
        self.fixed_iter = fixed_iter
        self.eps = eps

    def fit(self, V: npt.ArrayLike, y: npt.ArrayLike | None = None) -> Self:
        """Fit :math:`(\\pi, \\Pi)` by EM on the votes of the fit items.

        Parameters
        ----------
        V : array-like of shape (n_items, n_judges)
            Vote codes in {-1, 0, 1}.
        y : array-like of shape (n_items,), optional
            Ignored unless ``semi_supervised``; then required, with 0, 1, or -1 for an item without a label.

        Returns
        -------
        self

        Raises
        ------
        InputError
            If ``V`` is not a valid vote matrix, or (semi-supervised) ``y`` is missing, has a code other than
            -1, 0 and 1, or does not match ``V``'s rows.
        ConfigError
            If a hyperparameter is invalid.
        """
        where = "DawidSkene.fit"
        self.check_params(where)
        votes = check_votes(V, where=where)
        labels = _check_partial_labels(y, votes.shape[0], where) if self.semi_supervised else None
        # EM runs over cells: items sharing a vote pattern and a label code have the same posterior at every
        # iteration, so one row per cell weighted by its count gives the same sums (up to their order).
        cell_votes, cell_labels, inverse, w = vote_cells(votes, labels)
        return self.fit_cells(cell_votes, cell_labels, w, inverse)

    def fit_cells(
        self,
        cell_votes: npt.NDArray[np.int8],
        cell_labels: npt.NDArray[np.int64] | None,
        counts: npt.NDArray[np.float64],
        inverse: npt.NDArray[np.intp] | None = None,
    ) -> Self:
        """The EM of :meth:`fit` over vote-pattern cells (:func:`vote_cells`, or counts summed elsewhere: a Spark
        job, a cross-fitting's folds), every sum weighted by the cell's count.

        Parameters
        ----------
        cell_votes : ndarray of shape (n_cells, n_judges)
            One vote pattern per cell, codes in {-1, 0, 1}.
        cell_labels : ndarray of shape (n_cells,) or None
            The cells' label codes (0, 1, -1 = none); None for an unsupervised fit.
        counts : ndarray of shape (n_cells,)
            Items per cell (positive).
        inverse : ndarray of shape (n_items,), optional
            Each item's cell: ``posteriors_`` then holds one row per item; without it, one per cell.
        """
        where = "DawidSkene.fit"
        self.check_params(where)
        w = np.asarray(counts, dtype=np.float64)
        n_items = float(w.sum())
        Ht = vote_indicators(cell_votes)
        T = self.initial_posteriors(Ht, cell_labels)
        self.loss_history_: list[float] = []
        self.converged_ = False
        ll_prev = None
        for it in range(1, int(self.n_iter) + 1):
            prior, confusion = self.m_step(Ht, T, w)
            T_new, ll = self.e_step(Ht, prior, confusion, cell_labels, w)
            delta = float(np.max(np.abs(T_new[:, 1] - T[:, 1])))
            T = T_new
            self.loss_history_.append(-ll / n_items)
            self.n_iter_ = it
            self.converged_ = self.meets_stopping_rule(delta, ll, ll_prev)
            if self.converged_ and not self.fixed_iter:
                break
            ll_prev = ll
        if not self.converged_ and not self.fixed_iter:
            self.warn_not_converged(where)
        prior, confusion = self.m_step(Ht, T, w)
        T = T if inverse is None else T[inverse]
        anchored = cell_labels is not None and bool((cell_labels != UNLABELLED).any())
        self.label_switched_ = not anchored and self.needs_label_swap(confusion, (cell_votes != MISSING).any(axis=0))
        if self.label_switched_:
            T, prior, confusion = T[:, ::-1].copy(), 1.0 - prior, confusion[:, ::-1, :].copy()
        self.posteriors_, self.prior_, self.confusion_ = T, prior, confusion
        self.n_features_in_ = cell_votes.shape[1]
        self.classes_ = np.array([0, 1])
        return self

    @classmethod
    def from_parameters(cls, prior: float, confusion: npt.ArrayLike, **params: Any) -> Self:
        r"""A fitted model from :math:`(\pi, \Pi)` fitted elsewhere (a Spark fit, a saved model), for scoring.

        Parameters
        ----------
        prior : float
            :math:`\pi = P(Y = 1)`.
        confusion : array-like of shape (n_judges, 2, 2)
            :math:`\Pi^{(j)}_{yv}`, ``[j, y, v]``.
        **params
            Hyperparameters of the constructor (``eps`` is the one scoring uses).

        Raises
        ------
        InputError
            ``confusion`` not of shape (n_judges, 2, 2) with rows summing to 1, or ``prior`` outside [0, 1].
        """
        where = "DawidSkene.from_parameters"
        model = cls(**params)
        model.check_params(where)
        conf = np.asarray(confusion, dtype=np.float64)
        if conf.ndim != 3 or conf.shape[1:] != (2, 2) or not conf.shape[0]:
            raise InputError(f"{where}: confusion: expected shape (n_judges, 2, 2), got {conf.shape}")
        if not np.allclose(conf.sum(axis=2), 1.0, rtol=0, atol=1e-9) or (conf < 0).any():
            raise InputError(f"{where}: confusion: each row [j, y, :] must be probabilities summing to 1")
        if not 0.0 <= float(prior) <= 1.0:
            raise InputError(f"{where}: prior: must lie in [0, 1], got {prior!r}")
        model.prior_, model.confusion_ = float(prior), conf
        model.n_features_in_, model.classes_ = conf.shape[0], np.array([0, 1])
        return model

    def predict_proba(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``[P(Y=0 | V_i), P(Y=1 | V_i)]`` by one E-step with the fitted :math:`(\\pi, \\Pi)`.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit`.
        InputError
            If ``V`` is not a valid vote matrix for the fitted panel.
        """
        votes = self._fitted_votes(V, "predict_proba")
        return _normalise(self._log_joint(vote_indicators(votes), self.prior_, self.confusion_))

    def decision_function(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        r"""Log-odds :math:`\log\frac{\pi}{1-\pi} + \sum_{j \in S_i}\log\frac{\Pi^{(j)}_{1,V_{ij}}}
        {\Pi^{(j)}_{0,V_{ij}}}` per item, with the model's own clipping of :math:`\Pi` and :math:`\pi` (the
        posterior :meth:`predict_proba` is its sigmoid); finite, never clipped.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before :meth:`fit`.
        InputError
            If ``V`` is not a valid vote matrix for the fitted panel.
        """
        votes = self._fitted_votes(V, "decision_function")
        eps = float(self.eps)
        log_conf = np.log(np.clip(self.confusion_, eps, 1.0 - eps))  # [j, y, v]
        w_a = log_conf[:, 1, 1] - log_conf[:, 0, 1]  # a vote for A (v = 1)
        w_b = log_conf[:, 1, 0] - log_conf[:, 0, 0]  # a vote for B (v = 0)
        prior = np.clip(self.prior_, eps, 1.0 - eps)
        t = np.log(prior) - np.log1p(-prior) + (votes == VOTE_A) @ w_a + (votes == VOTE_B) @ w_b
        return np.asarray(t, dtype=np.float64)

    # ------------------------------------------------------------------ EM steps
    # Public so that an engine holding the votes elsewhere (Spark: engine/jobs/ds_spark.py) runs this very EM, batch by
    # batch: the E-step per batch of items, the M-step from counts summed over batches.

    def initial_posteriors(
        self, Ht: npt.NDArray[np.float64], labels: npt.NDArray[np.int64] | None = None
    ) -> npt.NDArray[np.float64]:
        """EM's start: soft labels :math:`T_{i1}` = the fraction of A votes (1/2 without verdicts), labels clamped.

        Parameters
        ----------
        Ht : ndarray of shape (2 * n_judges, n_items)
            :func:`vote_indicators` of the items' votes.
        labels : ndarray of shape (n_items,), optional
            Codes 0, 1 or -1 (no label); labelled items are clamped (semi-supervised fits).

        Returns
        -------
        ndarray of shape (n_items, 2)
        """
        n_a = Ht[Ht.shape[0] // 2 :].sum(axis=0)
        n_voted = Ht.sum(axis=0)
        T1 = np.divide(n_a, n_voted, out=np.full(n_a.shape, 0.5), where=n_voted > 0)
        return _clamp(np.column_stack([1.0 - T1, T1]), labels)

    def e_step(
        self,
        Ht: npt.NDArray[np.float64],
        prior: float,
        confusion: npt.NDArray[np.float64],
        labels: npt.NDArray[np.int64] | None = None,
        weight: npt.NDArray[np.float64] | None = None,
    ) -> tuple[npt.NDArray[np.float64], float]:
        r"""Soft labels of the items under :math:`(\pi, \Pi)` and their observed-data log-likelihood.

        Parameters
        ----------
        Ht : ndarray of shape (2 * n_judges, n_items)
            :func:`vote_indicators` of the items' votes.
        prior, confusion
            :math:`\pi` and :math:`\Pi^{(j)}_{yv}` (``[j, y, v]``), as :meth:`m_step` returns them.
        labels : ndarray of shape (n_items,), optional
            Codes 0, 1 or -1; a labelled item is clamped and contributes its label's term to the likelihood.
        weight : ndarray of shape (n_items,), optional
            Items per row when the rows are :func:`vote_cells`; the log-likelihood sums them weighted.

        Returns
        -------
        T : ndarray of shape (n_items, 2)
        loglik : float
            :math:`\ell` summed over the items (sums over batches of items add up).
        """
        log_joint = self._log_joint(Ht, prior, confusion)
        lse = np.logaddexp(log_joint[:, 0], log_joint[:, 1])  # the two-class log-sum-exp, per item
        T = _normalise(log_joint)
        if labels is not None:
            known = np.flatnonzero(labels != UNLABELLED)
            lse[known] = log_joint[known, labels[known]]
            T = _clamp(T, labels)
        return T, float(lse.sum() if weight is None else weight @ lse)

    def m_step(
        self, Ht: npt.NDArray[np.float64], T: npt.NDArray[np.float64], weight: npt.NDArray[np.float64] | None = None
    ) -> tuple[float, npt.NDArray[np.float64]]:
        r""":math:`(\pi, \Pi)` from soft labels: :meth:`m_step_from_counts` of ``Ht @ T`` (rows weighted by
        ``weight``, the items per :func:`vote_cells` row, when given)."""
        if weight is None:
            return self.m_step_from_counts(Ht @ T, float(T[:, 1].sum()), T.shape[0])
        Tw = T * weight[:, None]
        return self.m_step_from_counts(Ht @ Tw, float(Tw[:, 1].sum()), float(weight.sum()))

    def m_step_from_counts(
        self, counts: npt.NDArray[np.float64], t1: float, n_items: float
    ) -> tuple[float, npt.NDArray[np.float64]]:
        r"""The M-step from its sufficient statistics, which add up over batches of items.

        Parameters
        ----------
        counts : ndarray of shape (2 * n_judges, 2)
            ``Ht @ T``: row ``v*J + j``, column ``y`` holds :math:`\sum_i T_{iy}\,\mathbb 1[V_{ij} = v]`.
        t1 : float
            :math:`\sum_i T_{i1}`.
        n_items : float
            Items (a sum of cell weights).

        Returns
        -------
        prior : float
            :math:`\pi = t_1 / n`.
        confusion : ndarray of shape (n_judges, 2, 2)
            Smoothed, row-normalised :math:`\Pi^{(j)}_{yv}`, ``[j, y, v]``.
        """
        J = counts.shape[0] // 2
        by_judge = counts.reshape(2, J, 2).transpose(1, 2, 0)  # [j, y, v]
        num = by_judge + float(self.smoothing)
        den = num.sum(axis=2, keepdims=True)
        confusion = np.divide(num, den, out=np.full(num.shape, 0.5), where=den > 0)  # 0/0 only if eta = 0
        return t1 / n_items, confusion

    def meets_stopping_rule(self, delta: float, ll: float, ll_prev: float | None) -> bool:
        """Whether an iteration converged: largest posterior change below ``tol_posterior``, or relative change of
        the log-likelihood below ``tol`` (never on the first iteration, ``ll_prev=None``)."""
        rel_change = np.inf if ll_prev is None else abs(ll - ll_prev) / max(abs(ll_prev), np.finfo(float).tiny)
        return bool(delta < self.tol_posterior or rel_change < self.tol)

    def warn_not_converged(self, where: str) -> None:
        """The :class:`~sklearn.exceptions.ConvergenceWarning` of a fit that met no stopping rule."""
        warnings.warn(
            f"{where}: EM stopped after n_iter={self.n_iter} iterations without meeting tol={self.tol} or "
            f"tol_posterior={self.tol_posterior}; increase n_iter",
            ConvergenceWarning,
            stacklevel=3,
        )

    @staticmethod
    def needs_label_swap(confusion: npt.NDArray[np.float64], voted: npt.NDArray[np.bool_]) -> bool:
        """Whether the classes came out swapped: the mean balanced accuracy of the judges with a verdict
        (``voted``, one flag per judge) is below 1/2 (see Notes of the class)."""
        if not voted.any():
            return False
        balanced = 0.5 * (confusion[voted, 1, 1] + confusion[voted, 0, 0])
        return bool(balanced.mean() < 0.5)

    def _log_joint(
        self, Ht: npt.NDArray[np.float64], prior: float, confusion: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        r""":math:`\log\pi_y + \sum_{j \in S_i} \log\Pi^{(j)}_{y,V_{ij}}` for y = 0, 1: shape (n, 2)."""
        eps = float(self.eps)
        log_conf = np.log(np.clip(confusion, eps, 1.0 - eps))  # [j, y, v]
        W = log_conf.transpose(2, 0, 1).reshape(-1, 2)  # row v*J + j, column y: matches the rows of Ht
        log_prior = np.log(np.clip([1.0 - prior, prior], eps, 1.0 - eps))
        return np.asarray((W.T @ Ht).T + log_prior, dtype=np.float64)

    def check_params(self, where: str) -> None:
        """Check the hyperparameters (what :meth:`fit` does first), naming ``where`` in the error.

        Raises
        ------
        ConfigError
            If a hyperparameter is out of range or of the wrong type.
        """
        check_param(self.n_iter, where=where, name="n_iter", target_type=numbers.Integral, min_val=1)
        for name in ("tol", "tol_posterior", "smoothing"):
            check_param(getattr(self, name), where=where, name=name, target_type=numbers.Real, min_val=0.0)
        for name in ("semi_supervised", "fixed_iter"):
            check_param(getattr(self, name), where=where, name=name, target_type=bool)
        check_eps(self.eps, where=where)
