"""The sums a prediction-powered mean of one target is a function of (numpy only: Spark's Python workers import
this module, not the estimator's interval service).

:class:`LabelMoments` adds, so partial sums over parts of a table (batches, Spark partitions) combine into the
whole table's; :class:`~judgecal_dist.methods.labels.estimators.PredictionPoweredMean` finishes them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import InputError

__all__ = ["LabelMoments", "label_moments"]


@dataclass(frozen=True)
class LabelMoments:
    """The sums every estimate of one target is a function of (``w = 1/pi`` of a labelled item).

    ``n_all, sum_f_all, sum_f2_all`` run over every item; the rest over the labelled ones: plain sums for uniform
    labels and the inverse-probability sums for labels drawn with known inclusion probabilities. Sums add, so
    partial moments of parts of a table combine with :meth:`__add__`.
    """

    n_all: float = 0.0
    sum_f_all: float = 0.0
    sum_f2_all: float = 0.0
    n: float = 0.0
    sum_y: float = 0.0
    sum_f: float = 0.0
    sum_y2: float = 0.0
    sum_f2: float = 0.0
    sum_fy: float = 0.0
    sum_wy: float = 0.0
    sum_wf: float = 0.0
    sum_wf2: float = 0.0
    sum_w2f2: float = 0.0
    sum_w2y2: float = 0.0
    sum_wfy: float = 0.0
    sum_w2fy: float = 0.0
    weighted: bool = False

    def __add__(self, other: LabelMoments) -> LabelMoments:
        values = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name != "weighted"}
        return LabelMoments(**values, weighted=self.weighted or other.weighted)

    @classmethod
    def sum_names(cls) -> tuple[str, ...]:
        """The names of the sums, in field order (the Spark job's aggregate columns)."""
        return tuple(f.name for f in fields(cls) if f.name != "weighted")


def label_moments(
    y: npt.ArrayLike,
    proxy_labelled: npt.ArrayLike,
    proxy_all: npt.ArrayLike,
    inclusion_prob: npt.ArrayLike | None = None,
) -> LabelMoments:
    """The :class:`LabelMoments` of arrays (checked: 1-D, finite, equal lengths, ``0 < pi <= 1``, ``n <= N``).

    Examples
    --------
    >>> m = label_moments([1, 0], [0.9, 0.2], [0.9, 0.2, 0.5, 0.7])
    >>> m.n, m.n_all, round(m.sum_fy, 2), m.weighted
    (2.0, 4.0, 0.9, False)
    """
    where = "PredictionPoweredMean"
    yv, fl, fa = (
        _finite(v, name, where) for v, name in ((y, "y"), (proxy_labelled, "proxy_labelled"), (proxy_all, "proxy_all"))
    )
    if yv.size != fl.size:
        raise InputError(f"{where}: y and proxy_labelled: lengths differ ({yv.size} vs {fl.size}); one proxy per label")
    if fa.size < yv.size:
        raise InputError(f"{where}: proxy_all: {fa.size} items, fewer than the {yv.size} labelled; pass every item")
    base: dict[str, Any] = {
        "n_all": float(fa.size), "sum_f_all": float(fa.sum()), "sum_f2_all": float(fa @ fa), "n": float(yv.size),
        "sum_y": float(yv.sum()), "sum_f": float(fl.sum()), "sum_y2": float(yv @ yv), "sum_f2": float(fl @ fl),
        "sum_fy": float(fl @ yv),
    }  # fmt: skip
    if inclusion_prob is None:
        return LabelMoments(**base)
    pi = _finite(inclusion_prob, "inclusion_prob", where)
    if pi.size != yv.size:
        raise InputError(f"{where}: inclusion_prob: {pi.size} values for {yv.size} labels; one per labelled item")
    if np.any((pi <= 0.0) | (pi > 1.0)):
        bad = pi[(pi <= 0.0) | (pi > 1.0)][:3].tolist()
        raise InputError(f"{where}: inclusion_prob: values outside (0, 1], e.g. {bad}; pass each item's probability")
    w = 1.0 / pi
    return LabelMoments(
        **base, sum_wy=float(w @ yv), sum_wf=float(w @ fl), sum_wf2=float(w @ (fl * fl)),
        sum_w2f2=float((w * w) @ (fl * fl)), sum_w2y2=float((w * w) @ (yv * yv)), sum_wfy=float(w @ (fl * yv)),
        sum_w2fy=float((w * w) @ (fl * yv)), weighted=True,
    )  # fmt: skip


def _finite(values: npt.ArrayLike, name: str, where: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"{where}: {name}: expected a 1-D array, got shape {arr.shape}; use np.ravel")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{where}: {name}: {int(np.sum(~np.isfinite(arr)))} NaN or infinite values; drop them")
    return arr
