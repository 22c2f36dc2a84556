r"""Selective prediction metrics of spec 000 §4 (H.14 of the paper): AUAC and coverage/accuracy at a confidence.

Confidence is the top-label confidence :math:`\mathrm{conf}_i = \max(\hat p_i, 1 - \hat p_i)`, and correctness is
the rule of :func:`judgecal_dist.stats.metrics.accuracy` (half credit for an exact :math:`\hat p_i = 1/2`).

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   §4 and H.14.
.. [2] R. El-Yaniv, Y. Wiener. On the Foundations of Noise-free Selective Classification. JMLR 11, 2010.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from judgecal_dist.stats.checks import check_labels_and_probabilities, check_param
from judgecal_dist.stats.metrics import correctness

__all__ = ["SelectiveResult", "auac", "accuracy_at_confidence"]


class SelectiveResult(NamedTuple):
    """Share of items retained at ``conf >= tau``, accuracy on them (NaN when none) and their number."""

    coverage: float
    accuracy: float
    n_retained: int


def auac(y: npt.ArrayLike, p: npt.ArrayLike) -> float:
    r"""Area under the accuracy-coverage curve, with tied confidences processed as blocks.

    Sort items by :math:`\mathrm{conf}_i` descending and let :math:`\mathrm{acc}(m)` be the accuracy of the
    :math:`m` most confident items; :math:`\mathrm{AUAC} = \frac1n\sum_{m=1}^{n}\mathrm{acc}(m)`. Within a block
    of tied confidences occupying ranks :math:`s+1..s+L` every item counts with the block's mean correctness
    :math:`\bar c_{\mathrm{blk}}`, so the result does not depend on how ties are ordered (spec §4):

    .. math::

        \mathrm{acc}(m) = \frac{C_s + (m - s)\,\bar c_{\mathrm{blk}}}{m},\qquad s < m \le s + L,

    with :math:`C_s` the total correctness of the items ranked before the block.

    Parameters
    ----------
    y, p : array-like of shape (n,)
        Labels in {0, 1} and predicted :math:`P(Y=1)`.

    Returns
    -------
    float
        In [0, 1]; equals the accuracy when all confidences tie.

    Raises
    ------
    InputError
        If ``y`` is not binary, ``p`` is not a probability vector, or their lengths differ.

    Notes
    -----
    :math:`O(n \log n)` (one sort).

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, H.14.

    Examples
    --------
    >>> # conf 0.9, 0.8, 0.8, 0.6 with correctness 1, 1, 0, 1: acc(m) = 1, 1.5/2, 2/3, 3/4
    >>> round(auac([1, 1, 1, 1], [0.9, 0.8, 0.2, 0.6]), 6)
    0.791667
    """
    y_arr, p_arr = check_labels_and_probabilities(y, p, where="auac")
    conf = np.maximum(p_arr, 1.0 - p_arr)
    correct = correctness(y_arr, p_arr)
    order = np.argsort(-conf, kind="stable")
    conf, correct = conf[order], correct[order]
    n = conf.size
    starts = np.flatnonzero(np.r_[True, conf[1:] != conf[:-1]])  # first rank of each tied block
    lengths = np.diff(np.r_[starts, n])
    block_sum = np.add.reduceat(correct, starts)
    before = np.r_[0.0, np.cumsum(block_sum)[:-1]]  # C_s: correctness ranked before each block
    m = np.arange(1, n + 1, dtype=np.float64)
    offset = m - np.repeat(starts, lengths)  # m - s
    acc = (np.repeat(before, lengths) + offset * np.repeat(block_sum / lengths, lengths)) / m
    return float(acc.mean())


def accuracy_at_confidence(y: npt.ArrayLike, p: npt.ArrayLike, *, tau: float = 0.9) -> SelectiveResult:
    r"""Coverage :math:`\frac1n\sum_i\mathbb 1[\mathrm{conf}_i \ge \tau]` and the accuracy on the retained items.

    Spec §4 ("Cov @ conf >= tau", H.14): report :math:`\tau = 0.9` and :math:`0.95`.

    Parameters
    ----------
    y, p : array-like of shape (n,)
        Labels in {0, 1} and predicted :math:`P(Y=1)`.
    tau : float, default 0.9
        Confidence threshold in [0.5, 1].

    Returns
    -------
    SelectiveResult
        ``(coverage, accuracy, n_retained)``; ``accuracy`` is NaN when no item is retained.

    Raises
    ------
    InputError
        As :func:`auac`.
    ConfigError
        If ``tau`` is not in [0.5, 1].

    Examples
    --------
    >>> accuracy_at_confidence([1, 0, 1, 0], [0.95, 0.05, 0.6, 0.92], tau=0.9)
    SelectiveResult(coverage=0.75, accuracy=0.6666666666666666, n_retained=3)
    """
    y_arr, p_arr = check_labels_and_probabilities(y, p, where="accuracy_at_confidence")
    tau = float(
        check_param(tau, where="accuracy_at_confidence", name="tau", target_type=numbers.Real, min_val=0.5, max_val=1.0)
    )
    kept = np.maximum(p_arr, 1.0 - p_arr) >= tau
    n_kept = int(kept.sum())
    acc = float(correctness(y_arr[kept], p_arr[kept]).mean()) if n_kept else float("nan")
    return SelectiveResult(n_kept / p_arr.size, acc, n_kept)
