r"""Judge orderings (paths) for FCPS prefixes, built on the selection block only (spec 002 §4.1, §4.2).

For a judge set :math:`P`, the selection-block oracle risk and entropy-effective support are

.. math::

    \hat R_{\mathrm{sel}}(P) = \frac{1}{n}\sum_c\Big(Q_c - \frac{S_c^2}{n_c}\Big),\qquad
    S^{\mathrm{sel}}_{\mathrm{eff}}(P) = \exp\Big(-\sum_c \frac{n_c}{n}\log\frac{n_c}{n}\Big),

over the cells :math:`c` of :math:`P`'s joint pattern (the in-sample MSE of the unsmoothed table). Rules:

* ``information_first``: judges by ascending :math:`\hat R_{\mathrm{sel}}(\{j\})`, ties by pool index;
* ``random``: a uniform permutation from the split seed;
* ``complexity_penalised`` (Eq. 4): greedy
  :math:`\pi_{t+1} = \arg\min_{j \notin P_t}[\hat R_{\mathrm{sel}}(P_t \cup \{j\}) + \lambda S^{\mathrm{sel}}_{\mathrm{eff}}(P_t \cup \{j\})/B]`,
  ties by pool index, with :math:`B` the planned calibration budget (so this path is per budget);
* ``pool``: the pool order itself (the synthetic generators' fixed order, spec 002 §7.1 item 5).

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), Eq. 4, Table 3.
"""

from __future__ import annotations

import numbers
from typing import Self

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.fcps.joint_table import check_patterns, pattern_keys
from judgecal_dist.stats.checks import check_param
from judgecal_dist.stats.support import effective_support

__all__ = ["PATH_RULES", "oracle_risk", "JudgePath"]

#: Path rules, in the order used to break validation ties (spec 002 §4.4).
PATH_RULES = ("information_first", "complexity_penalised", "random", "pool")


def oracle_risk(
    codes: npt.NDArray[np.int64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    judges: list[int],
    n_categories: int = 4,
) -> tuple[float, float]:
    r""":math:`(\hat R_{\mathrm{sel}}(P), S^{\mathrm{sel}}_{\mathrm{eff}}(P))` of the judge columns ``judges``.

    Rows may be aggregated cells (weight :math:`n_c`, target :math:`S_c/n_c`): :math:`\sum Q_c` is then taken
    as :math:`\sum_c S_c^2/n_c`, which shifts every :math:`\hat R_{\mathrm{sel}}` by the same constant, so the
    orderings (all that the paths use) are exact.

    Examples
    --------
    >>> codes = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    >>> oracle_risk(codes, np.array([0.0, 0.0, 1.0, 1.0]), np.ones(4), [0])
    (0.0, 2.0)
    """
    keys = pattern_keys(codes[:, judges], n_categories)
    _, inverse = np.unique(keys, return_inverse=True)
    n = np.bincount(inverse, weights=w)
    s = np.bincount(inverse, weights=w * y)
    total = w.sum()
    q = float((w * y * y).sum())
    occupied = n > 0
    risk = (q - float((s[occupied] ** 2 / n[occupied]).sum())) / total
    return float(max(risk, 0.0)), effective_support(n)


class JudgePath(BaseEstimator):
    r"""An ordering of the judge pool from the selection block (one of :data:`PATH_RULES`).

    Parameters
    ----------
    rule : str, default "information_first"
    lam : float, default 0.25
        :math:`\lambda` of the complexity penalty (spec 002 recommended value: the Bernoulli variance bound).
    budget : int or None
        Planned calibration budget :math:`B` (required by ``complexity_penalised``).
    random_state : int or None
        Seed of the ``random`` rule (the split seed, so all budgets of a split share it).
    n_categories : int, default 4
        Alphabet size per judge (4 pairwise, 6 for a 1-5 rubric with err).

    Attributes
    ----------
    path_ : ndarray of int64, shape (m,)
        Pool indices in path order.
    step_risk_ : ndarray of float64, shape (m,)
        :math:`\hat R_{\mathrm{sel}}` of each prefix of the path (selection block).
    step_support_ : ndarray of float64, shape (m,)
        :math:`S^{\mathrm{sel}}_{\mathrm{eff}}` of each prefix.

    Examples
    --------
    >>> codes = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    >>> JudgePath().fit(codes, [1.0, 0.0, 1.0, 0.0]).path_.tolist()  # judge 1 predicts y exactly
    [1, 0]
    """

    def __init__(
        self,
        rule: str = "information_first",
        *,
        lam: float = 0.25,
        budget: int | None = None,
        random_state: int | None = None,
        n_categories: int = 4,
    ) -> None:
        self.rule = rule
        self.lam = lam
        self.budget = budget
        self.random_state = random_state
        self.n_categories = n_categories

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Order the columns of ``X`` (the full pool's codes on the selection block).

        Raises
        ------
        ConfigError
            Unknown rule, ``lam < 0``, or ``complexity_penalised`` without a positive budget.
        """
        where = "JudgePath.fit"
        if self.rule not in PATH_RULES:
            raise ConfigError(f"{where}: rule: must be one of {PATH_RULES}, got {self.rule!r}")
        lam = float(check_param(self.lam, where=where, name="lam", target_type=numbers.Real, min_val=0.0))
        base = int(self.n_categories)
        codes, target, weights = check_patterns(X, y, sample_weight, n_categories=base, where=where)
        assert target is not None
        m = codes.shape[1]
        if self.rule == "pool":
            path = list(range(m))
        elif self.rule == "random":
            path = np.random.default_rng(self.random_state).permutation(m).tolist()
        elif self.rule == "information_first":
            single = [oracle_risk(codes, target, weights, [j], base)[0] for j in range(m)]
            path = sorted(range(m), key=lambda j: (single[j], j))
        else:
            if self.budget is None or int(self.budget) <= 0:
                raise ConfigError(f"{where}: budget: complexity_penalised needs the planned budget B > 0")
            path = []
            for _ in range(m):
                scores = []
                for j in (j for j in range(m) if j not in path):
                    risk, support = oracle_risk(codes, target, weights, path + [j], base)
                    scores.append((risk + lam * support / int(self.budget), j))
                path.append(min(scores)[1])  # ties by pool index
        steps = [oracle_risk(codes, target, weights, path[: k + 1], base) for k in range(m)]
        self.path_ = np.asarray(path, dtype=np.int64)
        self.step_risk_ = np.array([r for r, _ in steps])
        self.step_support_ = np.array([s for _, s in steps])
        self.n_features_in_ = m
        return self

    def prefix(self, k: int) -> npt.NDArray[np.int64]:
        """The first ``k`` pool indices of the path.

        Raises
        ------
        ConfigError
            ``k`` outside ``1..m`` (a prefix longer than the panel).
        """
        check_is_fitted(self)
        if not 1 <= int(k) <= self.n_features_in_:
            raise ConfigError(f"JudgePath.prefix: k: must be in 1..{self.n_features_in_} (the panel), got {k}")
        return self.path_[: int(k)]
