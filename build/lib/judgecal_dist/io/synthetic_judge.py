r"""The paper's synthesized strict-and-compressing judge, applied to any reference scores (spec 001 §7.2).

.. math:: j = -0.5 + 0.85y + 0.4\tanh(0.9(y-3)) + 0.35\,\mathbf 1[v]\,\mathbf 1[|y-3|<1.5] + (0.30 + 0.18|y-3|)\varepsilon,

:math:`v \sim \mathrm{Bernoulli}(0.3)`, :math:`\varepsilon \sim \mathcal N(0, 1)`, then clipped to [1, 5] (the
spec's decision: the paper defines :math:`j \in [1, 5]`, and clipping reproduces its Table 2 Pearson and MAE).

References
----------
.. [1] L. Morandi. Two Ways to De-Bias an LLM-as-a-Judge. 2026, §VI-B (coefficients restored in spec 001 §7.2).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["strict_compressing_judge", "generator_mean"]


def generator_mean(y: npt.ArrayLike, *, verbose_rate: float = 0.30) -> npt.NDArray[np.float64]:
    """:math:`E[j \\mid y]` before clipping (the curve of spec Fig. 1)."""
    y = np.asarray(y, dtype=np.float64)
    return -0.5 + 0.85 * y + 0.4 * np.tanh(0.9 * (y - 3.0)) + 0.35 * verbose_rate * (np.abs(y - 3.0) < 1.5)


def strict_compressing_judge(
    y: npt.ArrayLike, rng: np.random.Generator, *, clip: bool = True, verbose_rate: float = 0.30
) -> npt.NDArray[np.float64]:
    """Draw one judge score per reference score ``y`` (on [1, 5]); verbose flags and noise from ``rng``.

    Examples
    --------
    >>> j = strict_compressing_judge(np.full(20000, 3.8), np.random.default_rng(0))
    >>> bool(2.9 < j.mean() < 3.2), bool(j.min() >= 1 and j.max() <= 5)
    (True, True)
    """
    y = np.asarray(y, dtype=np.float64)
    verbose = rng.uniform(size=y.shape) < verbose_rate
    eps = rng.standard_normal(y.shape)
    j = (
        -0.5
        + 0.85 * y
        + 0.4 * np.tanh(0.9 * (y - 3.0))
        + 0.35 * verbose * (np.abs(y - 3.0) < 1.5)
        + (0.30 + 0.18 * np.abs(y - 3.0)) * eps
    )
    return np.clip(j, 1.0, 5.0) if clip else j
