r"""Support diagnostics of a joint output table (spec 002 §5.3): why a table can or cannot afford its cells.

All three take pattern counts, so they run on the cell statistics of the engine's pattern job:

* entropy-effective support :math:`S_{\mathrm{eff}} = \exp(-\sum_c \hat p_c \log \hat p_c)` (natural log),
* exact plug-in cell pressure :math:`\hat C = \sum_{c \in \mathcal S} \hat p^{\mathrm{test}}_c / n_c + \hat u`,
* unseen-pattern rate :math:`\hat u` = share of test rows whose pattern has no calibration row.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), Remark 1, Eq. 7, Table 2.
.. [2] M. O. Hill. Diversity and evenness: a unifying notation and its consequences. Ecology 54(2):427-432,
   1973. doi:10.2307/1934352 (the exponential of Shannon entropy as an effective number of categories).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import InputError

__all__ = ["effective_support", "unseen_rate", "cell_pressure"]


def _counts(values: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64).ravel()
    if (arr < 0).any() or not np.isfinite(arr).all():
        raise InputError(f"support: {name}: counts must be finite and non-negative")
    return arr


def effective_support(counts: npt.ArrayLike) -> float:
    r"""Entropy-effective support :math:`S_{\mathrm{eff}} = e^{H}` of cell counts (zero cells ignored).

    Between 1 (one occupied cell) and the number of occupied cells (equality iff they are uniform).

    Raises
    ------
    InputError
        Negative counts, or no positive count.

    Examples
    --------
    >>> effective_support([5, 5, 5, 5]), round(effective_support([9, 1]), 4)
    (4.0, 1.3841)
    """
    n = _counts(counts, "counts")
    n = n[n > 0]
    if not n.size:
        raise InputError("support: counts: no occupied cell")
    p = n / n.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def unseen_rate(cal_counts_at_test: npt.ArrayLike, test_weights: npt.ArrayLike) -> float:
    """Share of test rows (weights = test counts of each test pattern) whose calibration count is 0.

    Examples
    --------
    >>> unseen_rate([3, 0, 1], [2, 1, 1])
    0.25
    """
    cal, w = _counts(cal_counts_at_test, "calibration counts"), _counts(test_weights, "test counts")
    if cal.shape != w.shape or w.sum() <= 0:
        raise InputError("support: test counts: need one positive-total weight per test pattern")
    return float(w[cal == 0].sum() / w.sum())


def cell_pressure(cal_counts_at_test: npt.ArrayLike, test_weights: npt.ArrayLike) -> tuple[float, float, float]:
    r"""Exact plug-in cell pressure :math:`(\sum_{\mathcal S}\hat p^{\mathrm{test}}_c/n_c,\ \hat u,\ \hat C)`.

    Parameters
    ----------
    cal_counts_at_test : array-like
        Calibration count :math:`n_c` of each distinct test pattern (0 = unseen).
    test_weights : array-like
        Test count of each distinct test pattern.

    Examples
    --------
    >>> cell_pressure([2, 0], [3, 1])  # 0.75/2 + 0.25
    (0.375, 0.25, 0.625)
    """
    cal, w = _counts(cal_counts_at_test, "calibration counts"), _counts(test_weights, "test counts")
    u = unseen_rate(cal, w)
    p = w / w.sum()
    seen = cal > 0
    term = float((p[seen] / cal[seen]).sum())
    return term, u, term + u
