r"""The oracle one-coin model's closed forms (spec 000 §3.9): Proposition 2's posterior and Theorem 1's bound.

Oracle one-coin model: :math:`Y \sim \mathrm{Bernoulli}(\pi)`; given :math:`Y`, votes :math:`V_j` are independent
with :math:`P(V_j = Y) = p_j`, and a missing vote (:math:`\bot`, code -1) carries no information.

* **Proposition 2** (Bayes-optimal log-odds aggregation, eq. (11)):

  .. math:: \log\frac{P^*(Y=1 \mid V_S)}{P^*(Y=0 \mid V_S)} = \mathrm{logit}\,\pi
            + \sum_{j \in S}(2V_j - 1)\,\mathrm{logit}\,p_j ,

  :func:`oracle_posterior`; a judge at :math:`p_j = 1/2` gets weight 0, one below chance a negative weight.
* **Theorem 1** (Calibrated Jury Theorem, eq. (10)): with :math:`\pi = 1/2`, the Bayes decision
  :math:`\hat y = \mathrm{sign}(\sum_j w_j^* Z_j)` errs with probability at most

  .. math:: \frac12\prod_{j=1}^J 2\sqrt{p_j(1-p_j)} = \frac12\exp\Big(-\sum_j D_j\Big),\qquad
            D_j = -\log\big(2\sqrt{p_j(1-p_j)}\big) \ge 2\delta_j^2,\quad \delta_j = p_j - \tfrac12 ,

  :func:`jury_error_bound` and :func:`bhattacharyya_exponents`; every judge with :math:`p_j \ne 1/2`, below chance
  included, has :math:`D_j > 0` and tightens the bound.

The numerical checks of Propositions 1-3 and Theorems 1-2 against brute-force enumeration live in the tests
(``tests/methods/aggregation/test_theory.py``).

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   eqs. (10)-(11), Proposition 2 and Theorem 1.
.. [2] T. Kailath. The Divergence and Bhattacharyya Distance Measures in Signal Selection. IEEE Transactions on
   Communication Technology 15(1):52-60, 1967 (the Bhattacharyya bound on the Bayes error).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import logit

from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation.aggregate import log_odds_proba
from judgecal_dist.methods.aggregation.votes import check_votes

__all__ = ["bhattacharyya_exponents", "jury_error_bound", "oracle_posterior", "oracle_weights"]


def _accuracies(accuracy: npt.ArrayLike, where: str) -> npt.NDArray[np.float64]:
    p = np.atleast_1d(np.asarray(accuracy, dtype=np.float64))
    if p.ndim != 1 or not ((p > 0) & (p < 1)).all():
        raise InputError(f"{where}: accuracy: every p_j must lie in (0, 1), got {p.ravel()[:5].tolist()}")
    return p


def oracle_weights(accuracy: npt.ArrayLike) -> npt.NDArray[np.float64]:
    r"""Bayes-optimal weights :math:`w_j^* = \log(p_j / (1 - p_j))` of Proposition 2.

    Examples
    --------
    >>> oracle_weights([0.5, 0.8, 0.2]).round(4)
    array([ 0.    ,  1.3863, -1.3863])
    """
    return np.asarray(logit(_accuracies(accuracy, "oracle_weights")), dtype=np.float64)


def oracle_posterior(votes: npt.ArrayLike, accuracy: npt.ArrayLike, prior: float = 0.5) -> npt.NDArray[np.float64]:
    r""":math:`P^*(Y = 1 \mid V_S)` under the oracle one-coin model (Proposition 2), one value per item.

    Parameters
    ----------
    votes : array-like of int, shape (n_items, n_judges)
        1 = A (class 1), 0 = B, -1 = missing (outside :math:`S`).
    accuracy : array-like of float, shape (n_judges,)
        True accuracies :math:`p_j \in (0, 1)`.
    prior : float, default 0.5
        :math:`\pi = P(Y = 1) \in (0, 1)`.

    Examples
    --------
    >>> oracle_posterior([[1, 0, -1]], [0.8, 0.6, 0.9]).round(4)  # sigma(logit 0.8 - logit 0.6)
    array([0.7273])
    """
    if not 0.0 < prior < 1.0:
        raise InputError(f"oracle_posterior: prior: must lie in (0, 1), got {prior}")
    weights = oracle_weights(accuracy)
    checked = check_votes(votes, where="oracle_posterior", n_judges=weights.size)
    return np.asarray(log_odds_proba(checked, weights, prior)[:, 1], dtype=np.float64)


def bhattacharyya_exponents(accuracy: npt.ArrayLike) -> npt.NDArray[np.float64]:
    r"""Per-judge exponents :math:`D_j = -\log(2\sqrt{p_j(1-p_j)})` of Theorem 1 (symmetric about 1/2).

    Examples
    --------
    >>> bhattacharyya_exponents([0.5, 0.9, 0.1]).round(4)
    array([0.    , 0.5108, 0.5108])
    """
    p = _accuracies(accuracy, "bhattacharyya_exponents")
    # -1/2 log(4 p (1 - p)) = -1/2 log(1 - 4 delta^2), written with log1p for accuracies near 1/2.
    return np.asarray(-0.5 * np.log1p(-4.0 * (p - 0.5) ** 2), dtype=np.float64)


def jury_error_bound(accuracy: npt.ArrayLike) -> float:
    r"""Theorem 1's bound :math:`\frac12\exp(-\sum_j D_j)` on the Bayes-optimal panel's error (:math:`\pi = 1/2`).

    Examples
    --------
    >>> round(jury_error_bound([0.9]), 4)  # one judge: sqrt(p(1-p)) = 0.3 >= its error 0.1
    0.3
    """
    return float(0.5 * np.exp(-bhattacharyya_exponents(accuracy).sum()))
