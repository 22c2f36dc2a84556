r"""A synthetic 1-5 rubric panel (the scalar schema of FCPS): documents of 16 summaries, 7 noisy score judges.

Each document draws a quality type :math:`d \in \{\text{low}, \text{high}\}` (probability 1/2 each); each of its
16 rows draws a true level :math:`L \in \{1, \dots, 5\}` from the type's prior (:data:`LEVEL_PRIORS`), so rows of
one document are correlated and must share ``group_id``. The target is the mean of three raters,
:math:`r = \mathrm{clip}(L + e, 1, 5)` with :math:`e = -1, 0, +1` with probabilities 0.15, 0.7, 0.15, normalised
as :math:`Y = (\bar r - 1)/4 \in [0, 1]` (13 levels, like an averaged human coherence score). Judge :math:`j`
returns ``err`` with probability :math:`\epsilon_j`, else the score
:math:`\mathrm{clip}(\mathrm{round}(L + \delta_j + \sigma_j Z), 1, 5)`, :math:`Z \sim N(0, 1)` (shift
:math:`\delta_j`, noise :math:`\sigma_j`: :data:`JUDGES`); judges are independent given :math:`L`.

Codes are the scalar-schema codes of :mod:`judgecal_dist.methods.fcps` (0..4 = scores 1..5, 5 = err). Because
every row's pattern and target depend on the document only through :math:`L`, the Bayes predictor from a prefix of
judges is :math:`\eta(z) = \sum_L P(L \mid z)\,E[Y \mid L]` under the marginal prior, and its risk
:math:`E[Y^2] - \sum_z P(z)\,\eta(z)^2` is computed exactly by enumerating all :math:`6^k` patterns
(:func:`rubric_bayes_mse`).
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.rubric_codes import ERR

__all__ = [
    "DOC_ROWS",
    "LEVEL_PRIORS",
    "JUDGES",
    "RATER_NOISE",
    "score_confusion",
    "target_levels",
    "draw_rubric_panel",
    "rubric_bayes_mse",
]

#: Rows (system summaries) per document; blocks are whole documents.
DOC_ROWS = 16
#: Prior of the true level 1..5 for a low- and a high-quality document.
LEVEL_PRIORS = np.array([[0.30, 0.30, 0.20, 0.15, 0.05], [0.05, 0.15, 0.20, 0.30, 0.30]])
#: Per judge (shift, noise sd, err rate), in pool order: sharper judges first, the last two biased.
JUDGES = (
    (0.0, 0.5, 0.01),
    (0.3, 0.7, 0.02),
    (-0.3, 0.8, 0.02),
    (0.0, 1.0, 0.03),
    (0.5, 1.2, 0.05),
    (-0.6, 1.5, 0.05),
    (0.0, 2.0, 0.10),
)
#: A rater's error -1, 0, +1 on the true level.
RATER_NOISE = {-1: 0.15, 0: 0.70, 1: 0.15}
_RATERS = 3


def score_confusion() -> npt.NDArray[np.float64]:
    """:math:`P_j(v \\mid L)`, shape (judges, 5 levels, 6 codes); each row sums to 1."""
    levels = np.arange(1, 6, dtype=np.float64)
    edges = np.array([-np.inf, 1.5, 2.5, 3.5, 4.5, np.inf])
    out = np.zeros((len(JUDGES), 5, 6))
    for j, (shift, sd, err) in enumerate(JUDGES):
        cdf = ndtr((edges[None, :] - levels[:, None] - shift) / sd)
        out[j, :, :5] = (1.0 - err) * np.diff(cdf, axis=1)
        out[j, :, ERR] = err
    return out


def target_levels() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The 13 target values :math:`Y` and :math:`P(Y \\mid L)`, shape (5, 13), by enumerating the three raters."""
    values = np.arange(13) / 12.0  # (mean rating - 1)/4 with the sum of three ratings 3..15
    prob = np.zeros((5, 13))
    for level in range(1, 6):
        for errors in itertools.product(RATER_NOISE, repeat=_RATERS):
            total = sum(min(max(level + e, 1), 5) for e in errors)
            prob[level - 1, total - _RATERS] += np.prod([RATER_NOISE[e] for e in errors])
    return values, prob


def draw_rubric_panel(n_rows: int, rng: np.random.Generator) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Codes (n_rows x 7, scalar schema) and targets of ``n_rows / 16`` fresh documents.

    Raises
    ------
    InputError
        ``n_rows`` not a positive multiple of :data:`DOC_ROWS` (blocks are whole documents).
    """
    if n_rows <= 0 or n_rows % DOC_ROWS:
        raise InputError(f"rows: {n_rows} rows is not a positive multiple of {DOC_ROWS} (whole documents)")
    docs = n_rows // DOC_ROWS
    kind = np.repeat(rng.integers(0, 2, size=docs), DOC_ROWS)
    cum = np.cumsum(LEVEL_PRIORS, axis=1)[kind]
    level = (rng.random(n_rows)[:, None] > cum).sum(axis=1)  # 0..4
    errors = np.array(list(RATER_NOISE))
    draws = errors[rng.choice(len(errors), size=(n_rows, _RATERS), p=list(RATER_NOISE.values()))]
    y = (np.clip(level[:, None] + 1 + draws, 1, 5).mean(axis=1) - 1.0) / 4.0
    cum_v = np.cumsum(score_confusion(), axis=2)  # (judges, levels, codes)
    u = rng.random((n_rows, len(JUDGES)))
    codes = (u[:, :, None] > cum_v[:, level, :].transpose(1, 0, 2)).sum(axis=2)
    return np.minimum(codes, ERR).astype(np.int64), y


def rubric_bayes_mse(k: int = len(JUDGES)) -> float:
    """Exact Bayes MSE of predicting :math:`Y` from the first ``k`` judges' outputs (pool order).

    Raises
    ------
    ConfigError
        ``k`` outside ``0..7``.

    Examples
    --------
    >>> rubric_bayes_mse(0) > rubric_bayes_mse(1) > rubric_bayes_mse(7) > 0
    True
    """
    if not 0 <= k <= len(JUDGES):
        raise ConfigError(f"k: must be in 0..{len(JUDGES)}, got {k}")
    prior = LEVEL_PRIORS.mean(axis=0)
    values, prob = target_levels()
    mean_l, second = prob @ values, float(prior @ (prob @ values**2))
    joint = prior[None, :]  # (patterns, levels)
    confusion = score_confusion()
    for j in range(k):
        joint = (joint[:, None, :] * confusion[j].T[None, :, :]).reshape(-1, 5)
    p_z = joint.sum(axis=1)
    eta = np.divide(joint @ mean_l, p_z, out=np.zeros_like(p_z), where=p_z > 0)
    return float(second - (p_z * eta * eta).sum())
