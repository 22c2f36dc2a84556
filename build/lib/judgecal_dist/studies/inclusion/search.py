"""Searched panels of the inclusion study: same-pipeline subset search with the spec's inner protocol (§3.6).

Inside one split's calibration half, a keyed 70/30 cut gives the aggregator part (one-coin counts) and the inner
calibration part. A candidate subset :math:`A` is scored by the 5-fold cross-validated NLL of beta calibration
(the study's penalty, on the study's calibrator input) refitted on :math:`A`'s one-coin scores of the inner
calibration part. The one-coin weight :math:`\\psi_j` of a judge does not depend on the subset, so the scores
of every candidate of a search step are one matrix product (candidates x judges) @ (judges x items), and their
calibrators are fitted together by :func:`~judgecal_dist.methods.calibration.batched_beta.beta_cv_nll`.

Each search returns a panel that then runs through every aggregator x calibrator of the study like any curated
panel (main protocol, paired test against ``all``). Spec Table 3 is reported beside it: the searched subset and
the full panel through the identical nested fit (one-coin on the aggregator part, beta refitted on all of the
inner calibration part), scored on the untouched evaluation half.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.aggregation.votes import signed_votes
from judgecal_dist.methods.calibration.batched_beta import beta_cv_nll
from judgecal_dist.methods.pipeline import Settings, calibrate
from judgecal_dist.methods.selection.search import (
    SearchResult,
    backward_elimination,
    beam_search,
    exhaustive,
    greedy_forward,
)
from judgecal_dist.splits import assign_blocks
from judgecal_dist.stats.metrics import pointwise_nll

__all__ = ["SEARCHES", "GREEDY_TARGET", "is_search", "SearchSettings", "InnerProblem", "run_searches"]

#: Searched panel names; ``exhaustive`` only when the panel has at most ``exhaustive_max`` judges.
SEARCHES = ("beam", "backward", "greedy", "exhaustive")
#: Greedy forward search run to a target size (spec §3.6 recommends k in {3, 5, 10}): ``greedy3``, ``greedy5``, ...
GREEDY_TARGET = re.compile(r"greedy([1-9][0-9]*)")


def is_search(name: str) -> bool:
    """Whether panel ``name`` is chosen by a search (a fixed search or a greedy target size)."""
    return name in SEARCHES or GREEDY_TARGET.fullmatch(name) is not None


#: Seed offsets of the inner 70/30 cut and of the 5 CV folds (independent of the outer split and conformal cut).
INNER_SEED_OFFSET, FOLD_SEED_OFFSET = 2_000_029, 3_000_017


@dataclass(frozen=True)
class SearchSettings:
    """Search hyperparameters (spec §3.6): beam width 3, up to 10 additions, 5 CV folds, exhaustive for J <= 12."""

    beam_width: int = 3
    max_additions: int = 10
    inner_fraction: float = 0.7
    folds: int = 5
    exhaustive_max: int = 12


class InnerProblem:
    """The inner protocol of one split: batched scoring of candidate subsets by CV-beta NLL.

    Parameters
    ----------
    votes, labels : arrays
        Calibration half of the split.
    keys : array of int64
        Group keys of those items (the inner cut and the folds are keyed, so grouped items stay together).
    seed : int
        The split's seed.
    settings : Settings
        The study's pipeline settings (one-coin prior, beta penalty, calibrator input, eps).
    """

    def __init__(
        self,
        votes: npt.NDArray[np.int8],
        labels: npt.NDArray[np.int8],
        keys: npt.NDArray[np.int64],
        seed: int,
        settings: Settings,
        search: SearchSettings,
    ) -> None:
        if not 0.0 < search.inner_fraction < 1.0:
            raise ConfigError(f"search_inner_fraction: must be in (0, 1), got {search.inner_fraction}")
        blocks = assign_blocks(keys, seed + INNER_SEED_OFFSET, [search.inner_fraction, 1.0 - search.inner_fraction])
        self.agg, self.cal = blocks == 0, blocks == 1
        self.settings = settings
        self.model = OneCoin(alpha0=settings.alpha0, beta0=settings.beta0, prior=settings.class_prior)
        self.model.fit(votes[self.agg], labels[self.agg])
        self.z_cal = signed_votes(votes[self.cal]).T.copy()  # (J, m): judges x items
        self.y_cal, self.y_agg = labels[self.cal], labels[self.agg]
        self.folds = assign_blocks(keys[self.cal], seed + FOLD_SEED_OFFSET, [1.0 / search.folds] * search.folds)
        self.n_judges = votes.shape[1]

    @property
    def usable(self) -> bool:
        """Both classes in the inner calibration part and >= 2 non-empty folds, or no CV score is defined."""
        return len(np.unique(self.y_cal)) == 2 and np.unique(self.folds).size >= 2 and self.agg.sum() > 0

    def scores(self, subsets: list[tuple[int, ...]]) -> npt.NDArray[np.float64]:
        """Inner CV-beta NLL of each subset (the batched ``score_fn`` of the searches)."""
        mask = np.zeros((len(subsets), self.n_judges))
        for row, subset in enumerate(subsets):
            mask[row, list(subset)] = 1.0
        t = logit(self.model.prior_) + (mask * self.model.weights_) @ self.z_cal  # (C, m) one-coin log-odds
        s = self.settings
        if s.calibrator_input == "probability":
            t = expit(t)
        return beta_cv_nll(
            t,
            self.y_cal,
            self.folds,
            penalty=s.beta_penalty,
            l1_ratio=s.beta_l1_ratio,
            score_input=s.calibrator_input,
            eps=s.eps,
        )

    def nested_losses(
        self,
        cols: npt.NDArray[np.intp],
        votes_cal: npt.NDArray[np.int8],
        v_eval: npt.NDArray[np.int8],
        y_eval: npt.NDArray[np.int8],
    ) -> npt.NDArray[np.float64]:
        """Per-item evaluation losses of ``cols`` through the nested fit: one-coin on the aggregator part, beta on
        all of the inner calibration part (spec §3.6 "after selection refit beta on all of C^cal")."""
        s = self.settings
        model = OneCoin(alpha0=s.alpha0, beta0=s.beta0, prior=s.class_prior).fit(
            votes_cal[self.agg][:, cols], self.y_agg
        )
        score = model.decision_function if s.calibrator_input == "logit" else (lambda v: model.predict_proba(v)[:, 1])
        p = calibrate("beta", s, score(votes_cal[self.cal][:, cols]), self.y_cal, {"e": score(v_eval[:, cols])})["e"]
        return pointwise_nll(y_eval, p, eps=s.eps)


def run_searches(
    names: tuple[str, ...],
    votes: npt.NDArray[np.int8],
    labels: npt.NDArray[np.int8],
    keys: npt.NDArray[np.int64],
    v_eval: npt.NDArray[np.int8],
    y_eval: npt.NDArray[np.int8],
    seed: int,
    settings: Settings,
    search: SearchSettings,
) -> tuple[dict[str, npt.NDArray[np.intp]], list[dict[str, Any]]]:
    """Searched panels (name -> sorted column indices) and one Table-3 row per search.

    A search that cannot run (inner part with one class, ``exhaustive`` above ``exhaustive_max`` judges) is left
    out, never reported as NaN.
    """
    wanted = [n for n in names if is_search(n)]
    if not wanted:
        return {}, []
    problem = InnerProblem(votes, labels, keys, seed, settings, search)
    if not problem.usable:
        return {}, []
    n_judges = votes.shape[1]
    results: dict[str, tuple[tuple[int, ...], float, int]] = {}
    targets = {n: int(m.group(1)) for n in wanted if (m := GREEDY_TARGET.fullmatch(n))}
    if targets:  # one forward path gives every target size (a size above J is the full panel)
        path = greedy_forward(problem.scores, n_judges, targets=tuple(targets.values()), early_stop=False, batched=True)
        scored = dict(zip(path.path["subset"], path.path["score"], strict=True))
        for name, k in targets.items():
            subset = path.subsets[k]
            results[name] = (subset, float(scored[subset]), path.n_evaluations)
    for name in wanted:
        if name == "beam":
            res: SearchResult = beam_search(
                problem.scores, n_judges, width=search.beam_width, max_additions=search.max_additions, batched=True
            )
            results[name] = (res.subset, res.score, res.n_evaluations)
        elif name == "backward":
            res = backward_elimination(problem.scores, n_judges, batched=True)
            results[name] = (res.subset, res.score, res.n_evaluations)
        elif name == "greedy":
            fwd = greedy_forward(problem.scores, n_judges, targets=(1,), early_stop=True, batched=True)
            subset = fwd.early_stop_subset or tuple(range(n_judges))
            score = next(float(v) for s, v in zip(fwd.path["subset"], fwd.path["score"], strict=True) if s == subset)
            results[name] = (subset, score, fwd.n_evaluations)
        elif name == "exhaustive" and n_judges <= search.exhaustive_max:
            res = exhaustive(problem.scores, n_judges, max_judges=search.exhaustive_max, batched=True)
            results[name] = (res.subset, res.score, res.n_evaluations)
    all_cols = np.arange(n_judges)
    loss_all = problem.nested_losses(all_cols, votes, v_eval, y_eval)
    inner_all = float(problem.scores([tuple(range(n_judges))])[0])
    rows, panels = [], {}
    for name, (subset, score, n_eval) in results.items():
        cols = np.asarray(subset, dtype=np.intp)
        panels[name] = cols
        loss = problem.nested_losses(cols, votes, v_eval, y_eval)
        rows.append(
            {
                "kind": "search",
                "panel": name,
                "panel_size": len(cols),
                "inner_nll": score,
                "inner_nll_all": inner_all,
                "nested_nll": float(loss.mean()),
                "nested_nll_all": float(loss_all.mean()),
                "nested_delta": float((loss - loss_all).mean()),
                "evaluations": n_eval,
            }
        )
    return panels, rows
