r"""The dense vote matrix every aggregator reads, and the per-judge counts computed from it (spec 000 §2, §3.0).

``V`` has shape ``(n_items, n_judges)`` with int8 codes :data:`VOTE_A` = 1 (judge votes for response A, class 1),
:data:`VOTE_B` = 0 (class 0) and :data:`MISSING` = -1 (no verdict, an unparseable one, or a tie, which is mapped
to missing upstream); the codes are those of :mod:`judgecal_dist.io.schema`, the one place they are declared. In :math:`\pm 1` form, :math:`z_{ij} = 2V_{ij} - 1` and :math:`z_{ij} = 0` when missing.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy.special import logit
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.schema import MISSING_CODE as MISSING
from judgecal_dist.io.schema import VOTE_A, VOTE_B
from judgecal_dist.methods.fitted import check_votes, signed_votes
from judgecal_dist.stats.checks import DEFAULT_EPS, check_binary_labels, check_same_length

__all__ = [
    "VOTE_A",
    "VOTE_B",
    "MISSING",
    "check_votes",
    "signed_votes",
    "count_judge_votes",
    "check_judge_counts",
    "class_prior",
    "LogOddsTransformer",
]


def count_judge_votes(V: npt.ArrayLike, y: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    r"""Per-judge sufficient statistics :math:`n_j` (non-missing votes) and :math:`c_j` (correct votes).

    .. math:: n_j = \#\{i : V_{ij} \ne \bot\},\qquad c_j = \#\{i : V_{ij} = Y_i\}

    These are the counts the engine computes for every replicate in one pass (spec §8); feeding them to
    :meth:`~judgecal_dist.methods.aggregation.aggregate.OneCoin.fit_counts` is equivalent to fitting on ``(V, y)``.

    Parameters
    ----------
    V : array-like of shape (n_items, n_judges)
        Vote codes, as in :func:`check_votes`.
    y : array-like of shape (n_items,)
        Labels in {0, 1}.

    Returns
    -------
    n_votes, n_correct : ndarray of int64, shape (n_judges,)

    Raises
    ------
    InputError
        As :func:`check_votes`; also if ``y`` is not binary or its length differs from ``V``'s rows.

    Examples
    --------
    >>> count_judge_votes([[1, 0], [0, -1], [1, 1]], [1, 0, 0])
    (array([3, 2]), array([2, 0]))
    """
    votes = check_votes(V, where="count_judge_votes")
    labels = check_binary_labels(y, where="count_judge_votes")
    check_same_length(("V", votes), ("y", labels), where="count_judge_votes")
    n_votes = (votes != MISSING).sum(axis=0, dtype=np.int64)
    n_correct = (votes == labels[:, None].astype(np.int8)).sum(axis=0, dtype=np.int64)
    return n_votes, n_correct


def _check_count_vector(counts: npt.ArrayLike, name: str, where: str) -> npt.NDArray[np.int64]:
    arr = np.asarray(counts)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"{where}: {name}: expected a non-empty 1-D array (one count per judge), got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_:
        raise InputError(f"{where}: {name}: expected integer counts, got dtype {arr.dtype}")
    bad = ~(np.isfinite(arr) & (arr >= 0) & (arr == np.round(arr)))
    if bad.any():
        raise InputError(
            f"{where}: {name}: counts must be non-negative integers ({int(bad.sum())} judges, e.g. {arr[bad][:3].tolist()})"
        )
    return arr.astype(np.int64)


def check_judge_counts(
    n_votes: npt.ArrayLike, n_correct: npt.ArrayLike, *, where: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    r"""Return per-judge counts :math:`(n_j, c_j)` as int64 after checking :math:`0 \le c_j \le n_j`.

    Raises
    ------
    InputError
        If either array is not a non-empty 1-D array of non-negative integers, their lengths differ, or some
        :math:`c_j > n_j`.

    Examples
    --------
    >>> check_judge_counts([3, 2], [3, 0], where="demo")
    (array([3, 2]), array([3, 0]))
    >>> check_judge_counts([3, 2], [4, 0], where="demo")
    Traceback (most recent call last):
    ...
    judgecal_dist.errors.InputError: demo: n_correct: exceeds n_votes (1 judges, e.g. [0])
    """
    n_j = _check_count_vector(n_votes, "n_votes", where)
    c_j = _check_count_vector(n_correct, "n_correct", where)
    check_same_length(("n_votes", n_j), ("n_correct", c_j), where=where)
    over = c_j > n_j
    if over.any():
        raise InputError(
            f"{where}: n_correct: exceeds n_votes ({int(over.sum())} judges, e.g. {np.flatnonzero(over)[:3]})"
        )
    return n_j, c_j


def class_prior(prior: str, *, n_items: int | None, n_positive: int | None, where: str) -> float:
    r"""Class prior :math:`\pi` of the log-odds aggregators (spec §3.1(c), (d)).

    ``"half"`` gives :math:`1/2`; ``"empirical"`` gives the Laplace-smoothed share of class 1 among the fit items,
    :math:`\hat\pi = (\sum_i Y_i + 1)/(n + 2)`, and needs ``n_items`` and ``n_positive``.

    Raises
    ------
    ConfigError
        If ``prior`` is not ``"half"`` or ``"empirical"``.
    InputError
        If ``prior="empirical"`` and the item counts are missing or ``n_positive`` is outside ``[0, n_items]``.

    Examples
    --------
    >>> class_prior("empirical", n_items=4, n_positive=3, where="demo")
    0.6666666666666666
    """
    if prior not in ("half", "empirical"):
        raise ConfigError(f"{where}: prior: must be 'half' or 'empirical', got {prior!r}")
    if prior == "half":
        return 0.5
    if n_items is None or n_positive is None:
        raise InputError(f"{where}: n_items, n_positive: both are required with prior='empirical'")
    if not 0 <= n_positive <= n_items:
        raise InputError(f"{where}: n_positive: must be in [0, n_items={n_items}], got {n_positive}")
    return (n_positive + 1.0) / (n_items + 2.0)


class LogOddsTransformer(TransformerMixin):
    """Step 1 as a scikit-learn transformer: ``transform(V)`` is the one column of log-odds the calibrators read
    (their default ``score_input="logit"``), so ``make_pipeline(OneCoin(), BetaCalibration())`` is the default
    pipeline and fits, predicts and cross-validates like any scikit-learn classifier. Being every aggregator's
    base, it also holds what their predictions share: the checks before one (:meth:`_fitted_votes`) and the hard
    label (:meth:`predict`).

    The column is the exact, unclipped log-odds of the log-odds models (``decision_function``: one-coin, plug-in
    log-odds, Dawid-Skene, stacking's linear predictor) and, for the vote-fraction models, the logit of
    :math:`P(Y=1)` clipped at ``DEFAULT_EPS`` (a unanimous vote would be infinite): what
    :func:`judgecal_dist.methods.pipeline.step1_scores` hands the calibrators with log-odds input.
    """

    #: True where ``decision_function`` is the model's own finite log-odds.
    exact_log_odds: ClassVar[bool] = False

    def _fitted_votes(self, V: npt.ArrayLike, method: str) -> npt.NDArray[np.int8]:
        """``V`` checked for a prediction: the model is fitted and ``V`` a valid vote matrix of its panel.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before the model is fitted.
        InputError
            If ``V`` is not a valid vote matrix for the fitted panel (named ``<class>.<method>``).
        """
        check_is_fitted(self)
        model: Any = self
        return check_votes(V, where=f"{type(self).__name__}.{method}", n_judges=model.n_features_in_)

    def predict(self, V: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Hard labels: 1 (A) iff :math:`P(Y=1 \\mid V_i) > 1/2`; an exact 1/2 gives 0 (B).

        The accuracy metric (:func:`judgecal_dist.stats.metrics.accuracy`) gives half credit to ties instead of
        using this rule.
        """
        model: Any = self
        return (model.predict_proba(V)[:, 1] > 0.5).astype(np.int64)

    def transform(self, V: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log-odds of every item, shape (n_items, 1)."""
        model: Any = self
        if self.exact_log_odds:
            t = model.decision_function(V)
        else:
            p = model.predict_proba(V)[:, 1]
            t = logit(np.clip(p, DEFAULT_EPS, 1.0 - DEFAULT_EPS))
        return np.asarray(t, dtype=np.float64).reshape(-1, 1)
