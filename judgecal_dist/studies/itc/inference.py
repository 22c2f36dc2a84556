"""Inference of the itc study: means over splits, paired tests and top clusters.

The splits are random calibration/evaluation partitions of one dataset, so they share items: intervals over the S
splits and the test that decides the top cluster are corrected resampled t (Nadeau and Bengio 2003, with
n_eval / n_cal of the task), whose width does not shrink as splits are added. The paired sign-flip test of two
methods a, b (spec 003 §5) stays a test within one split: each of R resamples flips the sign of every evaluation
item's loss difference (the replicates store, per method, the flipped mean losses under shared flips);
p = (1 + #{|T*| >= |T|}) / (R + 1). It is reported per split (share of splits where it rejects), never pooled over
splits, which would treat the same items as new evidence in every split. Top cluster (Freitag et al. 2023):
methods sorted by mean (MAE ascending, PA descending) join rank 1 until the first that differs significantly from
a member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.stats.inference import corrected_resampled_t

if TYPE_CHECKING:
    from judgecal_dist.studies.itc.config import Config

__all__ = ["KEYS", "method_summary", "paired_pvalue", "permutation_pvalue", "top_cluster", "top_clusters"]

#: The cell of a comparison: methods are compared within one (dataset, judge, budget).
KEYS = ["dataset", "judge_id", "n"]


def permutation_pvalue(loss_a: np.ndarray, loss_b: np.ndarray, flipped_a: np.ndarray, flipped_b: np.ndarray) -> float:
    """p-value of the paired sign-flip test from mean losses ``(S,)`` and flipped means ``(S, R)``.

    A valid test within one split (``S = 1``): the flips are the null over that split's evaluation items. Over
    several splits of one dataset it is not (the splits share items); use :func:`paired_pvalue` there.

    Examples
    --------
    >>> permutation_pvalue(np.array([0.5]), np.array([0.5]), np.zeros((1, 9)), np.zeros((1, 9)))
    1.0
    """
    t = float(np.mean(loss_a - loss_b))
    t_star = np.mean(flipped_a - flipped_b, axis=0)
    return float((1 + np.sum(np.abs(t_star) >= abs(t) - 1e-12)) / (len(t_star) + 1))


def paired_pvalue(
    loss_a: np.ndarray, loss_b: np.ndarray, flipped_a: np.ndarray, flipped_b: np.ndarray, test_train_ratio: float
) -> float:
    """p-value that methods a and b have the same mean loss, from their per-split losses ``(S,)`` on shared splits.

    With two or more splits: the corrected resampled t of the per-split differences (the splits share items, so
    their differences are correlated; ``test_train_ratio`` = n_eval / n_cal). With one split: the sign-flip test
    within it (:func:`permutation_pvalue`), exact for that split.

    Examples
    --------
    Ten half splits of one dataset whose differences average 0.01: the splits re-use the same items, so their
    agreement is not ten times the evidence of one split.

    >>> d = np.array([0.03, 0.01, -0.01, 0.02, 0.00, 0.02, 0.01, 0.00, 0.03, -0.01])
    >>> flips = np.zeros((10, 9))
    >>> round(paired_pvalue(d, np.zeros(10), flips, flips, test_train_ratio=1.0), 2)
    0.54
    """
    if len(loss_a) < 2:
        return permutation_pvalue(loss_a, loss_b, flipped_a, flipped_b)
    return corrected_resampled_t(np.asarray(loss_a) - np.asarray(loss_b), test_train_ratio=test_train_ratio).pvalue


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


def _ratio(group: pd.DataFrame) -> float:
    # n_2 / n_1 of the corrected t: the task's evaluation items over its calibration items.
    return float(group["n_eval"].mean() / max(group["n_cal"].mean(), 1.0))


def method_summary(config: Config, parts: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, judge, n, method): means over splits, corrected t intervals of MAE and PA."""
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
                    corrected_resampled_t(g[m].to_numpy(), test_train_ratio=_ratio(g), confidence=config.ci_level)
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

    ``p_vs_best_<metric>`` is the corrected resampled t across splits (:func:`paired_pvalue`), which decides the
    cluster; ``split_reject_share_<metric>`` is the share of splits whose own sign-flip test rejects against the
    best, reported as what it is.
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
            ratio = _ratio(cell)

            def losses(a: str, metric: str = metric, by_method: dict = by_method) -> tuple[np.ndarray, np.ndarray]:
                value = by_method[a][metric].to_numpy()
                flipped = np.stack(by_method[a][f"perm_{metric}"].to_numpy()).astype(np.float64)
                return (value if metric == "mae" else 1 - value), flipped

            def pvalue(a: str, b: str, losses: Any = losses, ratio: float = ratio) -> float:
                (la, fa), (lb, fb) = losses(a), losses(b)
                return paired_pvalue(la, lb, fa, fb, ratio)

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
