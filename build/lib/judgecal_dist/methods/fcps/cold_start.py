r"""Guarded cold-start FCPS with the one-standard-error rule (spec 002 §4.6, App. C.2, Table 21).

With only :math:`n` labelled rows (16 or 64), the same rows build paths and fit candidates, so selection uses
grouped :math:`K`-fold out-of-fold losses. For every candidate :math:`c` (paths built on the training folds
only) and the task-type prior (pairwise: ``one_coin_iso`` on all judges),

.. math::

    \mathrm{cv}[c] = \frac1n\sum_i \ell_i^{\mathrm{oof}}(c),\qquad
    \mathrm{se}[c] = \mathrm{sd}(\ell^{\mathrm{oof}}(c))/\sqrt n,

the naive choice is :math:`\arg\min_c \mathrm{cv}[c]`, and the guard deploys it only when
:math:`\mathrm{cv}[\mathrm{naive}] + \mathrm{se}[\mathrm{naive}] < \mathrm{cv}[\mathrm{prior}] - \mathrm{se}[\mathrm{prior}]`;
otherwise the prior. The deployed candidate is refitted on all :math:`n` rows.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), App. C.2, Table 21.
.. [2] L. Breiman, J. H. Friedman, R. A. Olshen, C. J. Stone. Classification and Regression Trees. Wadsworth,
   1984 (the one-standard-error rule).
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.model_selection import GroupKFold
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.methods.fcps.joint_table import JointTableCalibrator, check_patterns
from judgecal_dist.methods.fcps.paths import JudgePath
from judgecal_dist.methods.fcps.scalar_families import make_family
from judgecal_dist.methods.fcps.select import FAMILY_LADDER

__all__ = ["GuardedColdStart"]

_PRIOR_PATH = "pool"


class GuardedColdStart(BaseEstimator):
    r"""Cold-start FCPS: grouped K-fold out-of-fold selection, guarded toward a prior by the one-SE rule.

    Parameters
    ----------
    paths : tuple of str, default ("information_first", "complexity_penalised", "random")
    families : tuple of str, default all families (table and the six scalar families)
    max_k : int or None
    prior : str, default "one_coin_iso"
        Family of the prior, fitted on all judges (spec 002: pairwise ``one_coin_iso``, scalar ``ridge_iso``).
    n_folds : int, default 4
        Grouped folds (spec 002 recommended value).
    alpha, lam, ridge_lam, C : float
        Candidate hyperparameters (spec 002 recommended defaults).
    random_state : int or None
        Seed of the random path.

    Attributes
    ----------
    cv_ : DataFrame
        ``path, k, family, cv, se`` of every candidate and of the prior (``path == "pool"``, ``k == m``, first row).
    naive_, deployed_ : pandas.Series
        The naive choice and the deployed one (a row of ``cv_``).
    deviated_ : bool
        Whether the guard deployed a candidate other than the prior.
    estimator_ : estimator
        The deployed candidate refitted on all rows; ``prefix_`` its judge columns.
    fitted_ : dict
        ``prior``, ``naive`` and ``deployed`` -> (judge columns, estimator refitted on all rows).
    """

    def __init__(
        self,
        *,
        paths: tuple[str, ...] = ("information_first", "complexity_penalised", "random"),
        families: tuple[str, ...] = FAMILY_LADDER,
        max_k: int | None = None,
        prior: str = "one_coin_iso",
        n_folds: int = 4,
        alpha: float = 1.0,
        lam: float = 0.25,
        ridge_lam: float = 1.0,
        C: float = 1.0,
        random_state: int | None = None,
    ) -> None:
        self.paths = paths
        self.families = families
        self.max_k = max_k
        self.prior = prior
        self.n_folds = n_folds
        self.alpha = alpha
        self.lam = lam
        self.ridge_lam = ridge_lam
        self.C = C
        self.random_state = random_state

    def _model(self, family: str) -> Any:
        if family == "table":
            return JointTableCalibrator(alpha=self.alpha)
        return make_family(family, lam=self.ridge_lam, C=self.C)

    def _paths(self, X: npt.NDArray[np.int64], y: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.int64]]:
        out = {_PRIOR_PATH: np.arange(X.shape[1])}
        for rule in self.paths:
            path = JudgePath(rule, lam=self.lam, budget=len(y), random_state=self.random_state).fit(X, y)
            out[rule] = path.path_
        return out

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, groups: npt.ArrayLike) -> Self:
        """Out-of-fold losses of every candidate and the prior, the guarded choice, and its refit on all rows.

        Raises
        ------
        InputError
            Bad codes/targets, or fewer groups than folds.
        """
        codes, target, _ = check_patterns(X, y, None, n_categories=4, where="GuardedColdStart.fit")
        assert target is not None
        groups = np.asarray(groups)
        if groups.shape != (len(codes),) or len(np.unique(groups)) < self.n_folds:
            raise InputError(f"GuardedColdStart.fit: groups: need one group per row and >= {self.n_folds} groups")
        m = codes.shape[1]
        max_k = m if self.max_k is None else int(self.max_k)
        candidates = [(_PRIOR_PATH, m, self.prior)]
        candidates += [(p, k, f) for p in self.paths for k in range(1, max_k + 1) for f in self.families]
        losses = np.zeros((len(candidates), len(codes)))
        for train, held in GroupKFold(n_splits=self.n_folds).split(codes, target, groups):
            paths = self._paths(codes[train], target[train])
            fold: dict[tuple[Any, ...], npt.NDArray[np.float64]] = {}  # paths often share a prefix: fit it once
            for c, (rule, k, family) in enumerate(candidates):
                cols = paths[rule][:k]
                key = (*cols.tolist(), family)
                if key not in fold:
                    model = self._model(family).fit(codes[train][:, cols], target[train])
                    fold[key] = (model.predict(codes[held][:, cols]) - target[held]) ** 2
                losses[c, held] = fold[key]
        cv = pd.DataFrame(candidates, columns=["path", "k", "family"])
        cv["cv"] = losses.mean(axis=1)
        cv["se"] = losses.std(axis=1, ddof=1) / np.sqrt(len(codes))
        self.cv_ = cv
        order = cv.iloc[1:].assign(_f=cv["family"].map({f: i for i, f in enumerate(FAMILY_LADDER)}))
        self.naive_ = order.sort_values(["cv", "k", "_f"], kind="stable").iloc[0].drop("_f")
        prior = cv.iloc[0]
        guard = self.naive_["cv"] + self.naive_["se"] < prior["cv"] - prior["se"]
        self.deployed_ = self.naive_ if guard else prior
        self.deviated_ = bool(guard)
        # All three refitted on every row, so a study can score the prior and the naive choice beside the guard.
        paths = self._paths(codes, target)
        self.fitted_ = {}
        for role, row in (("prior", prior), ("naive", self.naive_), ("deployed", self.deployed_)):
            prefix = paths[str(row["path"])][: int(row["k"])]
            self.fitted_[role] = (prefix, self._model(str(row["family"])).fit(codes[:, prefix], target))
        self.prefix_, self.estimator_ = self.fitted_["deployed"]
        return self

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Predictions of the deployed candidate for full-pool codes ``X``."""
        check_is_fitted(self)
        return self.estimator_.predict(np.asarray(X, dtype=np.int64)[:, self.prefix_])
