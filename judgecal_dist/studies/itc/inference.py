"""Inference of the itc study: means over splits, paired tests and top clusters, as spec 003 section 5 sets them.

Error bars over the S splits are the mean +- 1.96 SD/sqrt(S) (the paper's), built by the interval service on the
logit scale of each metric's range (MAE of labels in {-1, 0, +1} in [0, 2], pairwise accuracy in [0, 1]) so no end
leaves it. The splits are random calibration/evaluation partitions of one dataset and share items, so these bars
show the spread over splits, not the uncertainty of the data; the report says so. The paired sign-flip test of two
methods a, b: every one of R joint resamples flips the sign of each item's loss difference, the same sign in every
split the item is evaluated in (the replicates store, per method, the flipped mean losses under these shared
flips), so items that every split re-uses count once, as in the data; T = mean over splits of the
mean difference, p = (1 + #{|T*| >= |T|}) / (R + 1). The share of splits whose own sign-flip test rejects is
reported beside it. Top cluster (Freitag et al. 2023): methods sorted by mean (MAE ascending, PA descending) join
rank 1 until the first that differs significantly from a member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.stats.intervals import mean_interval
from judgecal_dist.stats.ranges import metric_range

if TYPE_CHECKING:
    from judgecal_dist.studies.itc.config import Config

__all__ = ["KEYS", "method_summary", "permutation_pvalue", "top_cluster", "top_clusters"]

#: The cell of a comparison: methods are compared within one (dataset, judge, budget).
KEYS = ["dataset", "judge_id", "n"]


def permutation_pvalue(loss_a: np.ndarray, loss_b: np.ndarray, flipped_a: np.ndarray, flipped_b: np.ndarray) -> float:
    """p-value of the paired sign-flip test from mean losses ``(S,)`` and flipped means ``(S, R)`` under joint flips.

    T is the mean over the S splits of the mean loss difference; each of the R resamples gave every item one sign,
    the same in every split, so column r of the flipped means is one joint resample (spec 003 section 5).

    Examples
    --------
    >>> permutation_pvalue(np.array([0.5]), np.array([0.5]), np.zeros((1, 9)), np.zeros((1, 9)))
    1.0
    """
    t = float(np.mean(loss_a - loss_b))
    t_star = np.mean(flipped_a - flipped_b, axis=0)
    return float((1 + np.sum(np.abs(t_star) >= abs(t) - 1e-12)) / (len(t_star) + 1))


def _split_rejections(la: np.ndarray, lb: np.ndarray, fa: np.ndarray, fb: np.ndarray, alpha: float) -> float:
    """Share of splits whose own sign-flip test rejects at ``alpha`` (a per-split description, not a test)."""
    p = [permutation_pvalue(la[s : s + 1], lb[s : s + 1], fa[s : s + 1], fb[s : s + 1]) for s in range(len(la))]
    return float(np.mean(np.asarray(p) < alpha))


def top_cluster(means: dict[str, float], pvalue: Any, *, lower_is_better: bool, alpha: float) -> list[str]:
    """Rank-1 cluster: walk the methods from the best, stop at the first significantly different from a member.

    Examples
    --------
    >>> top_cluster({"a": 0.3, "b": 0.31, "c": 0.5}, lambda x, y: 0.5 if "c" not in (x, y) else 0.01,
    ...             lower_is_better=True, alpha=0.05)
    ['a', 'b']
    """
    order = sorted(means, key=lambda m: means[m] if lower_is_better else -means[m])
    cluster = order[:1]
    for method in order[1:]:
        if any(pvalue(method, member) < alpha for member in cluster):
            break
        cluster.append(method)
    return cluster


def method_summary(config: Config, parts: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, judge, n, method): means over splits, mean +- 1.96 SD/sqrt(S) intervals of MAE and PA."""
    rows = []
    for (dataset, judge, n, method), g in parts.groupby([*KEYS, "method"], sort=True):
        row: dict[str, Any] = {
            "dataset": dataset,
            "judge_id": judge,
            "n": int(n),
            "method": method,
            "splits": len(g),
            "n_eval": float(g["n_eval"].mean()),
            "n_cal": float(g["n_cal"].mean()),
        }
        if "n_eval_no_verdict" in g:  # evaluation items without a verdict at n (answered with a tie by every method)
            row["n_eval_no_verdict"] = float(g["n_eval_no_verdict"].mean())
        for m in ("mae", "pa", "rev", "pred_tie_rate"):
            row[m] = float(g[m].mean())
            if m in ("mae", "pa"):
                ci = (
                    mean_interval(
                        g[m].to_numpy(),
                        metric_range(m, study="itc"),
                        test_train_ratio=0.0,  # SD/sqrt(S), the paper's error bars
                        confidence=config.ci_level,
                        critical="normal",
                    )
                    if len(g) > 1
                    else None
                )
                row[f"{m}_ci_low"], row[f"{m}_ci_high"] = (ci.low, ci.high) if ci else (np.nan, np.nan)
        for p in ("beta", "eta0", "gamma"):
            if p in g and g[p].notna().any():
                row[p] = float(g[p].mean())
        if "at_bound" in g and g["at_bound"].notna().any():
            row["at_bound_share"] = float((g["at_bound"].fillna("") != "").mean())
        rows.append(row)
    return pd.DataFrame(rows)


def top_clusters(config: Config, parts: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Top-cluster membership for MAE and PA per (dataset, judge, n), with the p-values against the best.

    ``p_vs_best_<metric>`` is the sign-flip test over all splits (:func:`permutation_pvalue`), which decides the
    cluster; ``split_reject_share_<metric>`` is the share of splits whose own sign-flip test rejects against the
    best.
    """
    summary = summary.copy()
    for metric, lower in (("mae", True), ("pa", False)):
        summary[f"top_cluster_{metric}"] = False
        summary[f"p_vs_best_{metric}"] = np.nan
        summary[f"split_reject_share_{metric}"] = np.nan
        for key, cell in parts.groupby(KEYS, sort=True):
            by_method = {m: g.sort_values("seed") for m, g in cell.groupby("method")}
            if len({tuple(g["seed"]) for g in by_method.values()}) != 1:
                continue  # methods must share the splits to be compared

            def losses(a: str, metric: str = metric, by_method: dict = by_method) -> tuple[np.ndarray, np.ndarray]:
                value = by_method[a][metric].to_numpy()
                flipped = np.stack(by_method[a][f"perm_{metric}"].to_numpy()).astype(np.float64)
                return (value if metric == "mae" else 1 - value), flipped

            def pvalue(a: str, b: str, losses: Any = losses) -> float:
                (la, fa), (lb, fb) = losses(a), losses(b)
                return permutation_pvalue(la, lb, fa, fb)

            means = {m: float(g[metric].mean()) for m, g in by_method.items()}
            cluster = top_cluster(means, pvalue, lower_is_better=lower, alpha=config.significance)
            sel = (summary[KEYS] == pd.Series(dict(zip(KEYS, key, strict=True)))).all(axis=1)
            summary.loc[sel & summary["method"].isin(cluster), f"top_cluster_{metric}"] = True
            best = cluster[0]
            for m in means:
                here = sel & (summary["method"] == m)
                summary.loc[here, f"p_vs_best_{metric}"] = 1.0 if m == best else pvalue(m, best)
                if m != best:
                    (la, fa), (lb, fb) = losses(m), losses(best)
                    summary.loc[here, f"split_reject_share_{metric}"] = _split_rejections(
                        la, lb, fa, fb, config.significance
                    )
    return summary
