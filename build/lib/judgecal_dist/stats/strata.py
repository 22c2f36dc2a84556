r"""NLL by difficulty stratum: terciles of judge agreement on the evaluation items (spec 000 §3.10, H.11).

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   H.11.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

from judgecal_dist.errors import InputError
from judgecal_dist.stats.checks import DEFAULT_EPS, check_binary_labels, check_probabilities, check_same_length
from judgecal_dist.stats.metrics import nll

__all__ = ["nll_by_agreement_tercile"]


def nll_by_agreement_tercile(
    y: npt.ArrayLike,
    probas: Mapping[str, npt.ArrayLike] | npt.ArrayLike,
    agreement: npt.ArrayLike,
    *,
    eps: float = DEFAULT_EPS,
) -> pd.DataFrame:
    r"""NLL per difficulty stratum: hard = bottom tercile of agreement, easy = top tercile (spec §3.10, H.11).

    Agreement is :math:`g_i = |2p_i^{\mathrm{MV}} - 1|` on the evaluation items. With :math:`q_{1/3}, q_{2/3}` its
    tercile points (:func:`numpy.quantile`), hard is :math:`g_i \le q_{1/3}`, easy is :math:`g_i \ge q_{2/3}` and
    not hard (they overlap only when :math:`q_{1/3} = q_{2/3}`), middle is the rest.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels.
    probas : mapping of str to array-like, or array-like
        Predicted :math:`P(Y=1)` of one or more methods (e.g. ``{"raw": p, "beta": p_hat}``); an array is named
        ``"p"``.
    agreement : array-like of shape (n,)
        :math:`g_i \in [0, 1]`.
    eps : float, default 1e-6
        Clipping floor of :func:`~judgecal_dist.stats.metrics.nll`.

    Returns
    -------
    pandas.DataFrame
        One row per (method, stratum) with a non-empty stratum: ``method``, ``stratum`` (hard, middle, easy),
        ``n_items``, ``nll``.

    Raises
    ------
    InputError
        If ``y``, a probability vector or ``agreement`` is invalid, or their lengths differ.

    Examples
    --------
    >>> g = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    >>> nll_by_agreement_tercile([1, 0, 1, 1, 1, 1], [0.5, 0.5, 0.7, 0.9, 0.9, 0.99], g)["n_items"].tolist()
    [2, 2, 2]
    """
    where = "nll_by_agreement_tercile"
    labels = check_binary_labels(y, where=where)
    g = np.asarray(agreement, dtype=np.float64)
    if g.shape != labels.shape or not (np.isfinite(g) & (g >= 0) & (g <= 1)).all():
        raise InputError(f"{where}: agreement: expected {labels.size} finite values in [0, 1], got shape {g.shape}")
    methods = dict(probas) if isinstance(probas, Mapping) else {"p": probas}
    q_low, q_high = np.quantile(g, [1 / 3, 2 / 3])
    hard = g <= q_low
    easy = (g >= q_high) & ~hard
    strata = {"hard": hard, "middle": ~hard & ~easy, "easy": easy}
    rows = []
    for name, p in methods.items():
        p_arr = check_probabilities(p, where=where, name=f"probas[{name!r}]")
        check_same_length(("y", labels), (f"probas[{name!r}]", p_arr), where=where)
        for stratum, mask in strata.items():
            if mask.any():
                rows.append(
                    {
                        "method": name,
                        "stratum": stratum,
                        "n_items": int(mask.sum()),
                        "nll": nll(labels[mask], p_arr[mask], eps=eps),
                    }
                )
    return pd.DataFrame(rows)
