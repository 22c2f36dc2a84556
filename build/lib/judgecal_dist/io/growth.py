r"""Calibration-growth panels of FCPS (spec 002 §7.1-§7.3): 7 judges, known targets, additive to interaction regimes.

Judge outputs are engine category codes (0 = B, 1 = A, 2 = tie, 3 = err). With :math:`t_j = +1, -1, 0` for
A, B, other and :math:`b_j = X_j = 1[v_j = \texttt A]`, the target probability is

.. math::

    \eta_{\mathrm{add}} = \sigma(\beta^\top t),\qquad
    \eta_{\mathrm{par}} = \tfrac12 + \tfrac a2 (-1)^{\sum_{j \le 6} b_j},\qquad
    \eta_{\mathrm{mix}} = (1 - w)\,\eta_{\mathrm{add}} + w\,\eta_{\mathrm{par}},

    \eta_{\mathrm{XOR}} = \sigma\big(\beta_{3:7}^\top t_{3:7}/2 + b\,t_1t_2\big),\qquad
    \eta_{\mathrm{AND}} = \sigma\big(\beta_{3:7}^\top t_{3:7}/2 - 1 + c\,X_1X_2\big)

(§7.2, Table 24: judges 1 and 2 matter only through their interaction; under XOR neither has a marginal signal).
An interaction ``weight`` :math:`w'` mixes any interaction regime with the additive one,
:math:`\eta_{w'} = (1 - w')\,\eta_{\mathrm{add}} + w'\,\eta_{\mathrm{regime}}` (Table 25's interaction-strength
sweep mixes XOR; the default :math:`w' = 1` is the pure regime), then label noise :math:`\eta \leftarrow \epsilon + (1 - 2\epsilon)\eta` and :math:`Y \sim \mathrm{Bernoulli}(\eta)`.
For binary judges :math:`(-1)^{\sum_{j\le6} b_j} = \prod_{j \le 6} t_j` (six is even), the six-way parity of §7.1.

* :func:`draw_growth_outputs`: :math:`X_{ij} = 1[\sqrt\gamma G_i + \sqrt{1-\gamma} E_{ij} > 0]` (independent fair
  coins at the default :math:`\gamma = 0`), coded A for 1 and B for 0.
* :func:`draw_semi_real_outputs`: i.i.d. draws from an empirical distribution of real 7-judge output patterns
  (e.g. LLMBar's ``llmbar7`` pool from the engine's pattern job), which keeps judge correlation, ties/parse
  errors and sparsity; gold labels are discarded and replaced by the controlled target.

None of the generator parameters survive in the paper; the defaults are spec 002's recommended values.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS), App. C.3, C.4, Tables 22, 23.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from judgecal_dist.errors import ConfigError, InputError

__all__ = [
    "REGIMES",
    "INTERACTION_REGIMES",
    "BETA",
    "N_JUDGES",
    "growth_eta",
    "draw_growth_outputs",
    "draw_semi_real_outputs",
    "draw_labels",
]

REGIMES = ("additive", "mixed", "parity", "xor", "and")
#: Regimes with an interaction that an interaction ``weight`` can mix with the additive one (Table 25).
INTERACTION_REGIMES = ("parity", "xor", "and")
#: Additive coefficients of the seven judges (spec 002 §7.1).
BETA = (0.9, 0.7, 0.5, 0.4, 0.3, 0.2, 0.1)
N_JUDGES = 7
_PARITY_JUDGES = 6


def growth_eta(
    codes: npt.ArrayLike,
    regime: str,
    *,
    beta: Sequence[float] = BETA,
    a: float = 0.8,
    w: float = 0.5,
    noise: float = 0.0,
    b: float = 2.0,
    c: float = 2.0,
    weight: float = 1.0,
) -> npt.NDArray[np.float64]:
    """Target probability :math:`\\eta` of each row of 7-judge codes under ``regime`` (module formulas).

    ``b`` and ``c`` are the XOR and AND interaction strengths (spec §7.2 recommends 2); ``weight`` mixes an
    interaction regime (parity, xor, and) with the additive one and must stay 1 for additive and mixed.

    Raises
    ------
    ConfigError
        Unknown regime, ``a``, ``w`` or ``weight`` outside [0, 1], ``noise`` outside [0, 1/2], or a ``weight``
        other than 1 for a regime without an interaction.
    InputError
        ``codes`` not of shape (n, 7) with codes 0..3.

    Examples
    --------
    >>> growth_eta(np.array([[1] * 7, [0] + [1] * 6]), "parity").tolist()
    [0.9, 0.09999999999999998]
    >>> growth_eta(np.array([[1, 1] + [1, 0] * 2 + [1], [1, 0] + [1, 0] * 2 + [1]]), "xor").round(4).tolist()
    [0.8957, 0.1359]
    """
    if regime not in REGIMES:
        raise ConfigError(f"regime: must be one of {REGIMES}, got {regime!r}")
    if not (0.0 <= a <= 1.0 and 0.0 <= w <= 1.0 and 0.0 <= noise <= 0.5):
        raise ConfigError(f"growth: need a, w in [0, 1] and noise in [0, 1/2], got a={a}, w={w}, noise={noise}")
    if not 0.0 <= weight <= 1.0 or (weight != 1.0 and regime not in INTERACTION_REGIMES):
        raise ConfigError(
            f"growth: weight={weight}: must lie in [0, 1], and differ from 1 only for {list(INTERACTION_REGIMES)}"
        )
    x = np.asarray(codes)
    if (
        x.ndim != 2
        or x.shape[1] != len(beta)
        or x.shape[1] < _PARITY_JUDGES
        or x.min(initial=0) < 0
        or x.max(initial=0) > 3
    ):
        raise InputError(f"growth: codes: need shape (n, {len(beta)}) with codes 0..3, got {x.shape}")
    t = np.select([x == 1, x == 0], [1.0, -1.0], 0.0)
    coef = np.asarray(beta, dtype=np.float64)
    additive = expit(t @ coef)
    if regime == "xor":
        interaction = expit(t[:, 2:] @ coef[2:] / 2.0 + b * t[:, 0] * t[:, 1])
    elif regime == "and":
        interaction = expit(t[:, 2:] @ coef[2:] / 2.0 - 1.0 + c * (x[:, 0] == 1) * (x[:, 1] == 1))
    else:
        interaction = 0.5 + 0.5 * a * (-1.0) ** (x[:, :_PARITY_JUDGES] == 1).sum(axis=1)
    eta = (1.0 - weight) * additive + weight * interaction
    if regime == "additive":
        eta = additive
    elif regime == "mixed":
        eta = (1.0 - w) * additive + w * interaction
    return noise + (1.0 - 2.0 * noise) * eta


def draw_growth_outputs(n: int, rng: np.random.Generator, *, gamma: float = 0.0) -> npt.NDArray[np.int64]:
    """``n`` rows of 7 binary judges (A = 1, B = 0 codes), equicorrelated through ``gamma`` in [0, 1)."""
    if n < 1 or not 0.0 <= gamma < 1.0:
        raise ConfigError(f"growth: need n >= 1 and gamma in [0, 1), got n={n}, gamma={gamma}")
    latent = np.sqrt(gamma) * rng.standard_normal((n, 1)) + np.sqrt(1.0 - gamma) * rng.standard_normal((n, N_JUDGES))
    return (latent > 0).astype(np.int64)


def draw_semi_real_outputs(
    n: int, rng: np.random.Generator, patterns: npt.ArrayLike, weights: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """``n`` i.i.d. draws from the empirical distribution of real output patterns (rows of ``patterns``).

    Raises
    ------
    InputError
        Patterns not (P, 7) codes 0..3, or weights not P non-negative numbers with a positive sum.
    """
    pats = np.asarray(patterns, dtype=np.int64)
    p = np.asarray(weights, dtype=np.float64)
    if pats.ndim != 2 or pats.shape[1] != N_JUDGES or pats.min(initial=0) < 0 or pats.max(initial=0) > 3:
        raise InputError(f"semi-real: patterns: need shape (P, {N_JUDGES}) with codes 0..3, got {pats.shape}")
    if p.shape != (len(pats),) or (p < 0).any() or p.sum() <= 0:
        raise InputError("semi-real: weights: need one non-negative weight per pattern, positive in total")
    return pats[rng.choice(len(pats), size=n, p=p / p.sum())]


def draw_labels(eta: npt.ArrayLike, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """:math:`Y_i \\sim \\mathrm{Bernoulli}(\\eta_i)` as float 0/1."""
    return (rng.random(np.shape(eta)) < np.asarray(eta)).astype(np.float64)
