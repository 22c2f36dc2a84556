r"""Curators: rules that pick a judge subset :math:`A \subseteq [J]` before aggregation (spec 000 §3.6, §3.1(g)).

Every curator except :func:`oracle_top_k` reads calibration data only, and returns column indices of the vote
matrix; the chosen columns then go through the *same* aggregator and calibrator as the all-judges arm. Ranking
curators order judges by posterior mean accuracy

.. math:: r_j = \frac{c_j + \alpha_0}{n_j + \alpha_0 + \beta_0}

(the ``accuracy_`` of :class:`~judgecal_dist.methods.aggregation.aggregate.OneCoin`), descending, with ties broken by larger
:math:`n_j` and then by ``judge_id`` in lexicographic order, so that runs are deterministic (spec §7 pitfall 10).
With :math:`k \ge J` every top-:math:`k` curator returns the full panel.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   §4.3, H.2-H.4.
.. [2] R. Tibshirani. Regression Shrinkage and Selection via the Lasso. JRSS B 58(1), 1996,
   doi:10.1111/j.2517-6161.1996.tb02080.x.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn import __version__ as sklearn_version
from sklearn.linear_model import LogisticRegression
from sklearn.utils.fixes import parse_version

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.aggregation.votes import check_judge_counts, check_votes, count_judge_votes, signed_votes

# greedy forward selection is a subset search; it is listed here with the other curators of spec §3.6
from judgecal_dist.methods.selection.search import ForwardSelection, greedy_forward
from judgecal_dist.stats.checks import check_binary_labels, check_param, check_same_length

__all__ = [
    "ForwardSelection",
    "check_judge_ids",
    "rank_judges",
    "top_k",
    "dedup_by_family",
    "oracle_top_k",
    "random_k",
    "l1_logistic_support",
    "greedy_forward",
]

# scikit-learn 1.8 deprecated ``penalty`` in favour of ``l1_ratio``; both spell a pure L1 penalty.
_L1 = {"l1_ratio": 1.0} if parse_version(sklearn_version) >= parse_version("1.8") else {"penalty": "l1"}


def check_judge_ids(judge_ids: npt.ArrayLike | None, *, n_judges: int, where: str) -> npt.NDArray[np.generic]:
    """Return the labels of a panel's columns: ``judge_ids`` as a string array, or the positions 0..J-1 if ``None``.

    Raises
    ------
    InputError
        If ``judge_ids`` is not 1-D, has the wrong length, holds a non-string or empty id, or repeats an id.

    Examples
    --------
    >>> check_judge_ids(["gpt-4", "llama"], n_judges=2, where="demo")
    array(['gpt-4', 'llama'], dtype='<U5')
    >>> check_judge_ids(["a", "a"], n_judges=2, where="demo")
    Traceback (most recent call last):
    ...
    judgecal_dist.errors.InputError: demo: judge_ids: duplicate ids (2 judges, e.g. ['a'])
    """
    if judge_ids is None:
        return np.arange(n_judges, dtype=np.int64)
    raw = np.asarray(judge_ids, dtype=object)
    if raw.ndim != 1 or raw.size != n_judges:
        raise InputError(f"{where}: judge_ids: expected {n_judges} ids (one per judge), got shape {raw.shape}")
    bad = np.array([not isinstance(j, str) or j == "" for j in raw], dtype=bool)
    if bad.any():
        raise InputError(
            f"{where}: judge_ids: ids must be non-empty strings ({int(bad.sum())} judges, e.g. {raw[bad][:3].tolist()})"
        )
    ids = raw.astype(str)
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        dup = values[counts > 1]
        raise InputError(
            f"{where}: judge_ids: duplicate ids ({int(counts[counts > 1].sum())} judges, e.g. {dup[:3].tolist()})"
        )
    return ids


def _check_k(k: int, where: str) -> int:
    return int(check_param(k, where=where, name="k", target_type=numbers.Integral, min_val=1))


def _check_prior(alpha0: float, beta0: float, where: str) -> tuple[float, float]:
    a = check_param(
        alpha0, where=where, name="alpha0", target_type=numbers.Real, min_val=0, include_boundaries="neither"
    )
    b = check_param(beta0, where=where, name="beta0", target_type=numbers.Real, min_val=0, include_boundaries="neither")
    return float(a), float(b)


def rank_judges(
    n_votes: npt.ArrayLike,
    n_correct: npt.ArrayLike,
    judge_ids: npt.ArrayLike | None = None,
    *,
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> npt.NDArray[np.intp]:
    r"""Judge indices from best to worst: :math:`r_j` descending, then :math:`n_j` descending, then ``judge_id``.

    Parameters
    ----------
    n_votes, n_correct : array-like of shape (n_judges,)
        Calibration counts :math:`n_j` (non-missing votes) and :math:`c_j` (correct votes), e.g. from
        :func:`~judgecal_dist.methods.aggregation.votes.count_judge_votes`.
    judge_ids : sequence of str, optional
        Judge ids for the last tie-break; ``None`` breaks the last ties by column position.
    alpha0, beta0 : float, default 1.0
        Beta prior of every judge's accuracy (as in :class:`~judgecal_dist.methods.aggregation.aggregate.OneCoin`).

    Returns
    -------
    ndarray of intp, shape (n_judges,)

    Raises
    ------
    InputError
        If the counts are not non-negative integers with :math:`c_j \le n_j`, or ``judge_ids`` is invalid.
    ConfigError
        If ``alpha0`` or ``beta0`` is not positive.

    Examples
    --------
    >>> rank_judges([10, 4, 10], [8, 3, 8], ["b", "c", "a"])  # r = 0.75, 0.667, 0.75: tie broken by id
    array([2, 0, 1])
    """
    where = "rank_judges"
    n_j, c_j = check_judge_counts(n_votes, n_correct, where=where)
    ids = check_judge_ids(judge_ids, n_judges=n_j.size, where=where)
    alpha0, beta0 = _check_prior(alpha0, beta0, where)
    r = (c_j + alpha0) / (n_j + alpha0 + beta0)  # posterior mean accuracy r_j = a_j / (a_j + b_j)
    return np.lexsort((ids, -n_j, -r))  # last key sorts first


def top_k(
    n_votes: npt.ArrayLike,
    n_correct: npt.ArrayLike,
    judge_ids: npt.ArrayLike | None,
    k: int,
    *,
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> npt.NDArray[np.intp]:
    r"""The :math:`k` judges with the highest posterior mean accuracy on the calibration split (spec §3.1(g)).

    Parameters
    ----------
    n_votes, n_correct, judge_ids, alpha0, beta0
        As in :func:`rank_judges` (calibration counts).
    k : int
        Number of judges to keep, >= 1; :math:`k \ge J` keeps all (full inclusion).

    Returns
    -------
    ndarray of intp, shape (min(k, n_judges),)
        Column indices in rank order, best first (sort them if the caller needs column order).

    Raises
    ------
    InputError
        As :func:`rank_judges`.
    ConfigError
        If ``k`` is not a positive integer, or the prior is invalid.

    Examples
    --------
    >>> top_k([10, 10, 10, 8], [9, 5, 7, 8], ["a", "b", "c", "d"], 2)
    array([3, 0])
    """
    k = _check_k(k, "top_k")
    return rank_judges(n_votes, n_correct, judge_ids, alpha0=alpha0, beta0=beta0)[:k]


def dedup_by_family(
    n_votes: npt.ArrayLike,
    n_correct: npt.ArrayLike,
    judge_ids: npt.ArrayLike | None,
    families: npt.ArrayLike,
    *,
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> npt.NDArray[np.intp]:
    r"""One representative per family: the family's best judge by :func:`rank_judges` (spec §3.6).

    Parameters
    ----------
    n_votes, n_correct, judge_ids, alpha0, beta0
        As in :func:`rank_judges` (calibration counts).
    families : sequence of str, shape (n_judges,)
        Family of each judge (the judges table's ``family`` column, e.g. the backbone for LLMBar).

    Returns
    -------
    ndarray of intp, shape (n_families,)
        Column indices of the representatives, in rank order (best first).

    Raises
    ------
    InputError
        As :func:`rank_judges`; also if ``families`` has the wrong length or a missing (None, NaN or empty)
        family.
    ConfigError
        If the prior is invalid.

    Examples
    --------
    >>> dedup_by_family([10, 10, 10, 10], [6, 9, 7, 5], None, ["gpt", "gpt", "llama", "llama"])
    array([1, 2])
    """
    where = "dedup_by_family"
    order = rank_judges(n_votes, n_correct, judge_ids, alpha0=alpha0, beta0=beta0)
    fam = pd.Series(np.asarray(families, dtype=object).ravel())
    if len(fam) != order.size or np.ndim(families) != 1:
        raise InputError(f"{where}: families: expected {order.size} families (one per judge), got {np.shape(families)}")
    missing = fam.isna().to_numpy() | (fam.astype(str) == "").to_numpy()
    if missing.any():
        raise InputError(
            f"{where}: families: missing family ({int(missing.sum())} judges, e.g. {np.flatnonzero(missing)[:3].tolist()})"
        )
    first_of_family = ~fam.iloc[order].duplicated().to_numpy(dtype=bool)  # in rank order, the first is the best
    representatives: npt.NDArray[np.intp] = order[first_of_family]
    return representatives


def oracle_top_k(
    V_eval: npt.ArrayLike,
    y_eval: npt.ArrayLike,
    judge_ids: npt.ArrayLike | None,
    k: int,
    *,
    alpha0: float = 1.0,
    beta0: float = 1.0,
) -> npt.NDArray[np.intp]:
    r"""Top-:math:`k` ranked on the **evaluation** split: a diagnostic ceiling, not a deployable curator (spec §3.6).

    Uses the same key and tie-breaks as :func:`top_k`, computed from the evaluation items' votes and labels; it
    is the only curator allowed to look at :math:`\mathcal E` (spec §7 pitfall 5).

    Parameters
    ----------
    V_eval : array-like of shape (n_items, n_judges)
        Vote codes of the evaluation items.
    y_eval : array-like of shape (n_items,)
        Their labels.
    judge_ids, k, alpha0, beta0
        As in :func:`top_k`.

    Returns
    -------
    ndarray of intp, shape (min(k, n_judges),)

    Raises
    ------
    InputError
        If the votes or labels are invalid (see :func:`~judgecal_dist.methods.aggregation.votes.count_judge_votes`).
    ConfigError
        As :func:`top_k`.

    Examples
    --------
    >>> oracle_top_k([[1, 0, 1], [0, 0, 1]], [1, 0], None, 1)
    array([0])
    """
    n_votes, n_correct = count_judge_votes(V_eval, y_eval)
    return top_k(n_votes, n_correct, judge_ids, k, alpha0=alpha0, beta0=beta0)


def random_k(n_judges: int, k: int, *, rng: np.random.Generator) -> npt.NDArray[np.intp]:
    """A uniformly random subset of ``min(k, n_judges)`` judges, sorted (the random-:math:`k` floor, spec §3.6).

    Parameters
    ----------
    n_judges : int
        Panel size :math:`J`.
    k : int
        Subset size, >= 1.
    rng : numpy.random.Generator
        Seeded per split (spec §7 pitfall 11).

    Returns
    -------
    ndarray of intp, shape (min(k, n_judges),)

    Raises
    ------
    ConfigError
        If ``n_judges`` or ``k`` is not a positive integer or ``rng`` is not a ``numpy.random.Generator``.

    Examples
    --------
    >>> random_k(10, 3, rng=np.random.default_rng(0)).size
    3
    """
    n_judges = int(check_param(n_judges, where="random_k", name="n_judges", target_type=numbers.Integral, min_val=1))
    k = _check_k(k, "random_k")
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(f"random_k: rng: expected a numpy.random.Generator, got {type(rng).__name__}")
    return np.sort(rng.choice(n_judges, size=min(k, n_judges), replace=False)).astype(np.intp)


def l1_logistic_support(
    V: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    Cs: Sequence[float] = (1e-3, 1e-2, 1e-1, 1.0, 10.0),
    solver: str = "liblinear",
    max_iter: int = 1000,
    random_state: int = 0,
) -> pd.DataFrame:
    r"""Support of an L1-penalised logistic regression of the labels on the :math:`\pm 1` votes, per penalty ``C``.

    .. math::

        \hat\beta(C) = \arg\min_{\beta_0, \beta}\ \lVert\beta\rVert_1
        + C\sum_i \log\big(1 + e^{-(2Y_i - 1)(\beta_0 + z_i^\top\beta)}\big),\qquad
        A(C) = \{j : \hat\beta_j(C) \ne 0\},

    with :math:`z_{ij} \in \{-1, 0, +1\}` (0 = missing). Spec §3.6 reports :math:`|A(C)|` over
    :math:`C \in \{10^{-3}, \dots, 10\}`; the paper finds it does not sparsify and recovers the full panel.

    Parameters
    ----------
    V : array-like of shape (n_items, n_judges)
        Calibration vote codes.
    y : array-like of shape (n_items,)
        Calibration labels in {0, 1} (both classes needed).
    Cs : sequence of float
        Inverse penalty strengths, each > 0.
    solver : {"liblinear", "saga"}, default "liblinear"
        scikit-learn solver; liblinear also penalises the intercept, saga does not.
    max_iter : int, default 1000
        Solver iterations.
    random_state : int, default 0
        Seed of the solver's coordinate order.

    Returns
    -------
    pandas.DataFrame
        One row per ``C`` in the given order: ``C``, ``support_size`` and ``support`` (sorted tuple of indices).

    Raises
    ------
    InputError
        If ``V`` or ``y`` is invalid, their lengths differ, or ``y`` has a single class.
    ConfigError
        If ``Cs`` is empty or holds a non-positive value, or ``solver`` is not supported.

    References
    ----------
    .. [1] R. Tibshirani. JRSS B 58(1), 1996, doi:10.1111/j.2517-6161.1996.tb02080.x.
    .. [2] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, H.4.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 300)
    >>> V = np.column_stack([np.where(rng.random(300) < 0.9, y, 1 - y), rng.integers(0, 2, 300)])
    >>> l1_logistic_support(V, y, Cs=[0.001, 10.0])["support_size"].tolist()
    [0, 2]
    """
    where = "l1_logistic_support"
    votes = check_votes(V, where=where)
    labels = check_binary_labels(y, where=where)
    check_same_length(("V", votes), ("y", labels), where=where)
    if np.unique(labels).size < 2:
        raise InputError(f"{where}: y: all {labels.size} labels are {labels[0]}; the logistic fit needs both classes")
    if solver not in ("liblinear", "saga"):
        raise ConfigError(f"{where}: solver: must be 'liblinear' or 'saga', got {solver!r}")
    grid = [
        float(check_param(c, where=where, name="Cs", target_type=numbers.Real, min_val=0, include_boundaries="neither"))
        for c in Cs
    ]
    if not grid:
        raise ConfigError(f"{where}: Cs: give at least one penalty value")
    X = signed_votes(votes)
    rows = []
    for c in grid:
        model = LogisticRegression(C=c, solver=solver, max_iter=max_iter, random_state=random_state, **_L1)
        support = tuple(int(j) for j in np.flatnonzero(model.fit(X, labels).coef_.ravel() != 0.0))
        rows.append({"C": c, "support_size": len(support), "support": support})
    return pd.DataFrame(rows)
