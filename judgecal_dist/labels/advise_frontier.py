"""The cost-quality frontier of ``judgecal advise``: panels found by the inclusion search, scored cross-fitted.

Scoring (:class:`CrossFitScorer`): the labelled items are cut into keyed folds (grouped items stay together);
each fold's one-coin log-odds of a panel come from judge weights fitted on the other folds (a judge's one-coin
weight does not depend on the panel, so every panel of a batch is one matrix product per fold), and beta
calibration is cross-validated on those out-of-fold scores over the same folds
(:func:`~judgecal_dist.methods.calibration.batched_beta.beta_cv_losses`, all panels at once): no item's loss uses
its own label. Search: every panel up to ``max_judges`` judges (the selection library's exhaustive search), above
it the panels a beam search and a greedy forward path score; every scored panel is a point of the frontier.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import logit

from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.aggregation.votes import signed_votes
from judgecal_dist.methods.calibration.batched_beta import beta_cv_losses
from judgecal_dist.methods.pipeline import Settings
from judgecal_dist.methods.repeated.routing import pareto_frontier
from judgecal_dist.methods.selection.search import beam_search, exhaustive, greedy_forward
from judgecal_dist.progress import Progress
from judgecal_dist.splits import assign_blocks
from judgecal_dist.stats.intervals import mean_interval, proportion_interval
from judgecal_dist.stats.ranges import metric_range
from judgecal_dist.studies.inclusion.search import FOLD_SEED_OFFSET, SearchSettings
from judgecal_dist.studies.recommendation import choose

__all__ = ["CrossFitScorer", "cluster_values", "panel_frontier", "pick_panel"]


class CrossFitScorer:
    """Batched score function of the selection searches: mean cross-fitted NLL of each panel (module docstring);
    the per-item losses of every panel scored are kept in ``losses``."""

    def __init__(
        self,
        votes: npt.NDArray[np.int8],
        labels: npt.NDArray[np.int8],
        keys: npt.NDArray[np.int64],
        *,
        folds: int,
        seed: int,
        pipeline: Settings | None = None,
    ) -> None:
        self.pipeline = pipeline or Settings()
        self.labels = labels
        self.folds = assign_blocks(keys, seed + FOLD_SEED_OFFSET, [1.0 / folds] * folds).astype(np.int64)
        if np.unique(self.folds).size < 2 or len(np.unique(labels)) < 2:
            raise InputError("labels: need both labels A and B over at least two groups of items; ingest more labels")
        self.parts = []  # per fold: held-out mask, one-coin prior log-odds and weights, signed votes (J x held)
        for fold in np.unique(self.folds):
            held = self.folds == fold
            p = self.pipeline
            model = OneCoin(alpha0=p.alpha0, beta0=p.beta0, prior=p.class_prior).fit(votes[~held], labels[~held])
            self.parts.append((held, float(logit(model.prior_)), model.weights_, signed_votes(votes[held]).T))
        self.n_judges = votes.shape[1]
        self.losses: dict[tuple[int, ...], npt.NDArray[np.float64]] = {}

    def __call__(self, subsets: Sequence[tuple[int, ...]]) -> list[float]:
        keys = [tuple(sorted(s)) for s in subsets]
        mask = np.zeros((len(keys), self.n_judges))
        for row, subset in enumerate(keys):
            mask[row, list(subset)] = 1.0
        t = np.zeros((len(keys), self.labels.size))
        for held, prior, weights, z in self.parts:
            t[:, held] = prior + (mask * weights) @ z
        p = self.pipeline
        losses = beta_cv_losses(t, self.labels, self.folds, penalty=p.beta_penalty, l1_ratio=p.beta_l1_ratio, eps=p.eps)
        self.losses.update(zip(keys, losses, strict=True))
        return [float(v) for v in losses.mean(axis=1)]


def _search(scorer: CrossFitScorer, n_judges: int, max_judges: int) -> str:
    """Score the panels of the search that fits ``n_judges``; returns its name."""
    if n_judges <= max_judges:
        exhaustive(scorer, n_judges, max_judges=max_judges, batched=True)
        return "exhaustive"
    search = SearchSettings()
    beam_search(scorer, n_judges, width=search.beam_width, max_additions=search.max_additions, batched=True)
    greedy_forward(scorer, n_judges, targets=(n_judges,), early_stop=False, batched=True)
    return "beam + greedy forward"


def cluster_values(values: npt.NDArray[np.float64], groups: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    r"""One pseudo-value per group whose mean is the items' mean and whose variance of the mean is the
    cluster-robust one: :math:`u_g = m + (G/n)(S_g - n_g m)` with :math:`S_g, n_g` the group's sum and size.

    Items of one group (the response pairs of one example) are not independent; the t interval of the ``u_g`` is
    the cluster-robust (CR1) interval of the item mean with :math:`G - 1` degrees of freedom, and with one item
    per group the ``u_g`` are the items' values.
    """
    _, codes = np.unique(groups, return_inverse=True)
    sums, sizes = np.bincount(codes, weights=values), np.bincount(codes)
    m, n = float(values.mean()), values.size
    return m + (sums.size / n) * (sums - sizes * m)


def _row(
    members: list[str], loss: npt.NDArray[np.float64], groups: npt.NDArray[np.int64], cost: float, level: float
) -> dict[str, object]:
    n = loss.size
    u = cluster_values(loss, groups)
    # unbounded t interval of the pseudo-values (they may leave the loss's range), ends kept inside it
    raw = mean_interval(u, None, test_train_ratio=0.0, confidence=level)
    bounds = metric_range("nll")
    se = float(u.std(ddof=1) / math.sqrt(u.size))
    # a calibrated probability of the true label above 1/2 (loss below log 2) is a correct argmax
    correct = (loss < math.log(2.0)).astype(np.float64)
    # Wilson interval at the effective number of items (n over the design effect of the groups)
    iid = correct.var(ddof=1) / n
    grouped = cluster_values(correct, groups).var(ddof=1) / u.size
    n_eff = n if grouped <= 0 or iid <= 0 else max(1, min(n, round(n * iid / grouped)))
    acc = proportion_interval(round(correct.mean() * n_eff), n_eff, confidence=level)
    return {
        "panel": "+".join(members),
        "n_judges": len(members),
        "cost_per_item": cost,
        "nll": float(loss.mean()),
        "nll_ci_low": max(raw.low, bounds.low if bounds else 0.0),
        "nll_ci_high": min(raw.high, bounds.high if bounds else math.inf),
        "se": se,
        "accuracy": float(correct.mean()),
        "accuracy_ci_low": min(acc.low, float(correct.mean())),
        "accuracy_ci_high": max(acc.high, float(correct.mean())),
        "n_items": n,
        "n_groups": int(u.size),
        "effective_items": int(n_eff),
    }


def panel_frontier(
    judge_ids: Sequence[str],
    votes: npt.NDArray[np.int8],
    labels: npt.NDArray[np.int8],
    keys: npt.NDArray[np.int64],
    costs: dict[str, float],
    *,
    folds: int = 5,
    seed: int = 0,
    level: float = 0.95,
    max_judges: int = 12,
) -> pd.DataFrame:
    """One row per scored panel: judges, cost per item, cross-fitted NLL and accuracy with intervals, whether it
    is on the frontier (no cheaper panel has a lower NLL) and the search that scored it.

    ``votes`` (items x judges: 1 = A, 0 = B, -1 = none), ``labels`` (1 = A) and the items' group ``keys``.
    """
    progress = Progress(2, label="advise: panels scored")
    scorer = CrossFitScorer(votes, labels, keys, folds=folds, seed=seed)
    progress.advance()
    search = _search(scorer, len(judge_ids), max_judges)
    progress.advance()
    rows = []
    for subset, loss in sorted(scorer.losses.items(), key=lambda kv: (len(kv[0]), kv[0])):
        members = [str(judge_ids[i]) for i in subset]
        rows.append(_row(members, loss, keys, float(sum(costs[j] for j in members)), level))
    table = pd.DataFrame(rows)
    front = pareto_frontier(table.assign(score=-table["nll"]), cost="cost_per_item", accuracy="score")
    return table.assign(on_frontier=table["panel"].isin(set(front["panel"])), search=search)


def pick_panel(frontier: pd.DataFrame, level: float) -> tuple[pd.Series, pd.Series]:
    """The recommendation engine's one-SE pick (cheapest panel within one SE of the lowest NLL), and the best.

    Every row is one pipeline (one-coin + beta) on a named judge subset, all deployable; the engine ranks the
    near rows by its judges column, here the rank of the cost (cheapest first, then fewer judges).
    """
    view = frontier.assign(
        aggregator="one_coin",
        calibrator="beta",
        subset=frontier["panel"],
        panel="all",
        cost_rank=frontier["cost_per_item"].rank(method="dense") * 1000 + frontier["n_judges"],
    )
    choice = choose(view, "one_se", level=level, judges="cost_rank")
    return frontier.loc[choice.chosen.name], frontier.loc[choice.best.name]
