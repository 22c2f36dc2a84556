r"""Metrics of binary prediction sets (spec 000 §4): coverage, mean set size, empty-set and both-labels rates.

A set array has shape ``(n, 2)`` and dtype bool: ``sets[i, 0]`` is True when label 0 (B) is in
:math:`C_\alpha(x_i)` and ``sets[i, 1]`` when label 1 (A) is, the layout of ``predict_proba`` columns.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   §3.5 and §4.
.. [2] A. N. Angelopoulos, S. Bates. A Gentle Introduction to Conformal Prediction and Distribution-Free
   Uncertainty Quantification. arXiv:2107.07511, 2021, §1.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import InputError
from judgecal_dist.stats.checks import check_binary_labels, check_same_length

__all__ = ["check_sets", "set_metrics"]


def check_sets(sets: npt.ArrayLike, *, where: str) -> npt.NDArray[np.bool_]:
    """Return ``sets`` as an ``(n, 2)`` bool array after checking its shape and dtype.

    Raises
    ------
    InputError
        If ``sets`` is not of shape (n >= 1, 2) or is not boolean (0/1 integers are accepted).

    Examples
    --------
    >>> check_sets([[1, 0], [1, 1]], where="demo")
    array([[ True, False],
           [ True,  True]])
    """
    arr = np.asarray(sets)
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] == 0:
        raise InputError(f"{where}: sets: expected a boolean array of shape (n_items >= 1, 2), got {arr.shape}")
    if arr.dtype != np.bool_:
        if not np.issubdtype(arr.dtype, np.number) or not np.isin(arr, (0, 1)).all():
            raise InputError(f"{where}: sets: expected booleans (or 0/1), got dtype {arr.dtype}")
        arr = arr.astype(bool)
    return arr


def set_metrics(y: npt.ArrayLike, sets: npt.ArrayLike) -> dict[str, float]:
    r"""Coverage, mean size, empty-set rate and both-labels rate of binary prediction sets.

    .. math::

        \mathrm{coverage} = \frac1n\sum_i \mathbb 1[Y_i \in C(x_i)],\qquad
        \mathrm{set\_size} = \frac1n\sum_i |C(x_i)| \in [0, 2],

    ``empty_rate`` is the share of :math:`C(x_i) = \emptyset` (an empty set counts as a miss, spec §3.5) and
    ``both_rate`` the share of :math:`C(x_i) = \{0, 1\}`; ``set_size = both_rate + 1 - empty_rate``.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}.
    sets : array-like of shape (n, 2)
        Boolean set membership, column ``k`` for label ``k``.

    Returns
    -------
    dict of str to float
        ``coverage``, ``set_size``, ``empty_rate``, ``both_rate``.

    Raises
    ------
    InputError
        If ``y`` is not binary, ``sets`` is not an ``(n, 2)`` boolean array, or their lengths differ.

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §4.

    Examples
    --------
    >>> set_metrics([1, 0, 1, 0], [[False, True], [True, True], [False, False], [False, True]])
    {'coverage': 0.5, 'set_size': 1.0, 'empty_rate': 0.25, 'both_rate': 0.25}
    """
    labels = check_binary_labels(y, where="set_metrics")
    arr = check_sets(sets, where="set_metrics")
    check_same_length(("y", labels), ("sets", arr), where="set_metrics")
    size = arr.sum(axis=1)
    return {
        "coverage": float(arr[np.arange(labels.size), labels].mean()),
        "set_size": float(size.mean()),
        "empty_rate": float((size == 0).mean()),
        "both_rate": float((size == 2).mean()),
    }
