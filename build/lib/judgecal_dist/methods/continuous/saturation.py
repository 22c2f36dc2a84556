r"""Why the linear corrector saturates (spec 001 §3.9): the :math:`L^2` projection of a conditional mean on (1, j).

If :math:`E[y \mid j] = m(j)`, the linear fit converges to :math:`a^\star + b^\star j` with
:math:`b^\star = \mathrm{Cov}(j, m(j))/\mathrm{Var}(j)`, :math:`a^\star = E[m(j)] - b^\star E j`, so no anchor budget
removes the leftover :math:`m(j) - a^\star - b^\star j`; its mean absolute value bounds what a flexible corrector
can gain over the linear one in MAE at the same noise.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = ["projection_leftover", "saturation_summary", "conditional_mean_headroom"]

Array = npt.NDArray[np.float64]


def projection_leftover(j: npt.ArrayLike, m: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> Array:
    r""":math:`m(j) - a^\star - b^\star j` with :math:`(a^\star, b^\star)` the ``weights``-weighted least-squares
    line of ``m`` on ``j`` (the law of ``j`` given by the points and their weights).

    Examples
    --------
    >>> projection_leftover([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]).round(12).tolist()
    [0.0, 0.0, 0.0]
    """
    j, m = np.asarray(j, dtype=np.float64), np.asarray(m, dtype=np.float64)
    w = np.ones_like(j) if weights is None else np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    ej, em = w @ j, w @ m
    b = (w @ ((j - ej) * (m - em))) / (w @ (j - ej) ** 2)
    return m - (em - b * ej) - b * j


def saturation_summary(leftover: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> dict[str, float]:
    """Range, largest and (weighted) mean absolute value of a projection leftover."""
    r = np.asarray(leftover, dtype=np.float64)
    w = np.ones_like(r) if weights is None else np.asarray(weights, dtype=np.float64)
    return {"range": float(np.ptp(r)), "max_abs": float(np.abs(r).max()), "mean_abs": float(w @ np.abs(r) / w.sum())}


def conditional_mean_headroom(j: npt.ArrayLike, y: npt.ArrayLike, *, bins: int = 20) -> dict[str, float]:
    r"""In-sample MAE of the least-squares line and of the per-level conditional mean of ``y`` given ``j`` (``j``
    grouped by its distinct values, or by ``bins`` quantile bins when it has more), their difference (the
    non-linear headroom a flexible corrector could take, spec §8.3 finding 5) and the mean absolute projection
    leftover of the conditional mean."""
    j, y = np.asarray(j, dtype=np.float64), np.asarray(y, dtype=np.float64)
    levels = j if np.unique(j).size <= bins else pd.qcut(j, bins, labels=False, duplicates="drop").astype(np.float64)
    frame = pd.DataFrame({"level": levels, "j": j, "y": y})
    cond = frame.groupby("level")["y"].transform("mean").to_numpy()
    b, a = np.polyfit(j, y, 1)
    linear_mae, cond_mae = float(np.mean(np.abs(y - a - b * j))), float(np.mean(np.abs(y - cond)))
    per_level = frame.assign(cond=cond).groupby("level").agg(j=("j", "mean"), m=("cond", "first"), w=("y", "size"))
    left = projection_leftover(per_level["j"], per_level["m"], per_level["w"])
    return {
        "linear_mae": linear_mae,
        "conditional_mean_mae": cond_mae,
        "headroom_mae": linear_mae - cond_mae,
        "leftover_mean_abs": saturation_summary(left, per_level["w"])["mean_abs"],
        "levels": float(len(per_level)),
    }
