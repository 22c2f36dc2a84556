"""Summary table, crossover budgets, canary and saturation of the continuous study (spec 001 §6, §7.5, §3.7, §3.9)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.methods.continuous.saturation import (
    conditional_mean_headroom,
    projection_leftover,
    saturation_summary,
)
from judgecal_dist.stats.intervals import RangeInterval, mean_interval
from judgecal_dist.stats.ranges import metric_range
from judgecal_dist.studies.continuous.data import arm_scores

if TYPE_CHECKING:
    from judgecal_dist.studies.continuous.config import Config, ContinuousInput

__all__ = [
    "BASELINES",
    "BUDGET_FREE",
    "CONVERGED",
    "METRICS",
    "ORDER",
    "canary",
    "crossover",
    "flow_training",
    "paper_tanh_leftover",
    "saturation",
    "seed_interval",
    "split_overlap_ratio",
    "summary_table",
    "usable_rows",
]

METRICS = ("mean_error", "mae", "pearson", "spearman", "kl", "kl_sym", "w1")
KEYS = ["rubric", "judge", "corrector", "budget"]
ORDER = {"raw": 0, "linear_hb": 1, "flow": 2, "flow_per_rubric": 3, "ot": 4, "ot_oracle": 5, "constant": 6}
#: Baselines that do not depend on the anchor budget (one row per seed, copied to every budget in the summary).
BUDGET_FREE = ("raw", "ot_oracle")
#: Rows that are references, never correctors: the judge itself, the quantile map fitted on the test labels and
#: the anchors' mean (a constant does not correct a score, it replaces it).
BASELINES = ("raw", "ot_oracle", "constant")
#: A flow counts as trained when its loss over the last ``flow_window`` epochs moved by less than this fraction
#: (``flow_tol`` when set).
CONVERGED = 0.01
#: Extra per-row columns averaged over seeds in the summary (NaN where a corrector has none).
EXTRA = ("coverage", "interval_width", "latency_ms_per_item")


def usable_rows(parts: pd.DataFrame) -> pd.DataFrame:
    """The rows a summary may use: a NUTS fit that failed its gate is reported as failed, never used (spec §3.5)."""
    failed = (parts["corrector"] == "linear_hb") & (parts["converged"] == False)  # noqa: E712 - NaN-safe column
    return parts[~failed]


def _expand_raw(parts: pd.DataFrame, budgets: list[int]) -> pd.DataFrame:
    free = parts["corrector"].isin(BUDGET_FREE)
    copies = [parts[free].assign(budget=b) for b in budgets]  # raw and ot_oracle do not depend on the budget
    return pd.concat([parts[~free], *copies], ignore_index=True)


def split_overlap_ratio(rows: pd.DataFrame) -> float:
    """:math:`n_2/n_1` of the corrected t: a seed's test items over the rubric's other items (every seed draws its
    test set from the same items); 1 (half splits) for parts written before ``n_items`` was recorded."""
    if "n_items" not in rows or not rows["n_items"].notna().all():
        return 1.0
    test = float(rows["n_test"].mean())
    return test / max(float(rows["n_items"].mean()) - test, 1.0)


def seed_interval(values: np.ndarray, rows: pd.DataFrame, level: float, metric: str) -> RangeInterval | None:
    """Corrected resampled t over seeds inside ``metric``'s range (None with one seed: no spread over seeds)."""
    if len(values) < 2:
        return None
    bounds = metric_range(metric, study="continuous")
    return mean_interval(values, bounds, test_train_ratio=split_overlap_ratio(rows), confidence=level)


def summary_table(config: Config, parts: pd.DataFrame) -> pd.DataFrame:
    """Mean and corrected resampled t interval over seeds of every metric, per (rubric, judge, corrector, budget)."""
    frame = _expand_raw(usable_rows(parts), sorted(config.budgets))
    rows = []
    for key, group in frame.groupby(KEYS, sort=True):
        row: dict[str, Any] = dict(zip(KEYS, key, strict=True)) | {"seeds": len(group)}
        row["n_anchors"] = float(group["n_anchors"].mean())
        for m in METRICS:
            values = group[m].to_numpy(dtype=np.float64)
            values = values[np.isfinite(values)]
            if values.size == 0:
                row[m] = row[f"{m}_ci_low"] = row[f"{m}_ci_high"] = np.nan
                continue
            ci = seed_interval(values, group, config.ci_level, m)
            low, high = (ci.low, ci.high) if ci else (np.nan, np.nan)
            row[m], row[f"{m}_ci_low"], row[f"{m}_ci_high"] = float(values.mean()), low, high
        for m in EXTRA:
            values = group[m].to_numpy(dtype=np.float64) if m in group else np.array([np.nan])
            row[m] = float(np.nanmean(values)) if np.isfinite(values).any() else np.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    rank = out["corrector"].map(ORDER).fillna(9)
    return (
        out.assign(_r=rank).sort_values(["judge", "rubric", "_r", "budget"]).drop(columns="_r").reset_index(drop=True)
    )


def crossover(config: Config, parts: pd.DataFrame, metric: str = "mae", flow: str = "flow") -> list[dict[str, Any]]:
    """Smallest budget from which ``metric``(flow) - ``metric``(linear_hb) < 0 with its interval over seeds below 0
    at that and every larger budget (spec §7.5); ``budget_or_none`` is None when not reached."""
    usable = usable_rows(parts)
    wide = usable[usable["corrector"].isin([flow, "linear_hb"])].pivot_table(
        index=["judge", "rubric", "budget", "seed"], columns="corrector", values=metric
    )
    out: list[dict[str, Any]] = []
    if not {flow, "linear_hb"} <= set(wide.columns):
        return out
    delta = (wide[flow] - wide["linear_hb"]).dropna()
    sizes = usable[usable["corrector"] == "linear_hb"]
    for (judge, rubric), cell in delta.groupby(level=["judge", "rubric"]):
        below, budgets, detail = [], [], []
        cell_rows = sizes[(sizes["judge"] == judge) & (sizes["rubric"] == rubric)]
        for budget, d in cell.groupby(level="budget"):
            ci = seed_interval(d.to_numpy(), cell_rows, config.ci_level, f"delta_{metric}")
            low, high = (ci.low, ci.high) if ci else (np.nan, np.nan)
            budgets.append(int(budget))
            below.append(bool(high < 0))
            detail.append({"budget": int(budget), f"delta_{metric}": float(d.mean()), "ci_low": low, "ci_high": high})
        found = None
        for i in range(len(budgets)):
            if all(below[i:]):
                found = budgets[i]
                break
        out.append(
            {
                "rubric": rubric,
                "judge": judge,
                "metric": metric,
                "flow": flow,
                "budget_or_none": found,
                f"delta_{metric}_by_budget": detail,
            }
        )
    return out


def flow_training(config: Config, parts: pd.DataFrame) -> pd.DataFrame:
    """Per (judge, flow corrector, budget): fits, epochs run, mean final loss, the largest relative change of a fit's
    last loss window and how many fits count as trained (that change below ``flow_tol``, else :data:`CONVERGED`)."""
    cols = ["judge", "corrector", "budget", "fits", "epochs_min", "epochs_max", "final_loss", "max_change", "trained"]
    if "loss_change" not in parts:
        return pd.DataFrame(columns=cols)
    fits = parts[parts["corrector"].str.startswith("flow")].drop_duplicates(["judge", "corrector", "budget", "seed"])
    limit = config.flow_tol or CONVERGED
    out = (
        fits.assign(size=fits["loss_change"].abs(), ok=fits["loss_change"].abs() < limit)
        .groupby(["judge", "corrector", "budget"], sort=True)
        .agg(
            fits=("seed", "size"),
            epochs_min=("epochs_run", "min"),
            epochs_max=("epochs_run", "max"),
            final_loss=("final_loss", "mean"),
            max_change=("size", "max"),
            trained=("ok", "sum"),
        )
        .reset_index()
    )
    return out.astype({"epochs_min": int, "epochs_max": int, "trained": int})[cols]


def canary(config: Config, parts: pd.DataFrame) -> list[dict[str, Any]]:
    """Pr(beta < 0.3) of the pooled NUTS posterior per (judge, rubric, budget), mean over NUTS seeds (spec §3.7)."""
    nuts = parts[(parts["corrector"] == "linear_hb") & (parts["linear_fit"] == "nuts")]
    out = []
    for (judge, rubric, budget), g in nuts.groupby(["judge", "rubric", "budget"], sort=True):
        prob = float(g["canary_prob"].mean())
        out.append(
            {
                "judge": judge,
                "rubric": rubric,
                "budget": int(budget),
                "pr_beta_lt_0_3": prob,
                "alert": bool(prob > 0.05),
                "alert_fraction_of_seeds": float((g["canary_prob"] > 0.05).mean()),
                "beta_mean": float(g["beta"].mean()),
                "failed_fits": int((g["converged"] == False).sum()),  # noqa: E712
            }
        )
    return out


def paper_tanh_leftover(n_grid: int = 100_001) -> dict[str, float]:
    r"""The paper's synthetic saturation check (spec §3.9): the leftover of :math:`g(j) = 0.4\tanh(0.9(j-3))` after
    its :math:`L^2` projection on (1, j), :math:`j` uniform on [1, 5] (range about 0.18, mean |.| about 0.040)."""
    j = np.linspace(1.0, 5.0, n_grid)
    return saturation_summary(projection_leftover(j, 0.4 * np.tanh(0.9 * (j - 3.0))))


def saturation(config: Config, data: ContinuousInput) -> pd.DataFrame:
    """Per arm and rubric on all items of the first seed: in-sample MAE of the linear fit vs the per-level
    conditional mean (the headroom no linear corrector can take, spec §3.9 and §8.3 finding 5)."""
    rows = []
    for arm in data.arms:
        scores = arm_scores(data.scores, arm, config.seed)
        for rubric, g in scores.groupby("rubric", sort=True):
            rows.append({"judge": arm, "rubric": rubric, "items": len(g)} | conditional_mean_headroom(g["j"], g["y"]))
    return pd.DataFrame(rows)
