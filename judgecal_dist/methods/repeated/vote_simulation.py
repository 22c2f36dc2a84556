r"""Seeded simulators of repeated three-way judge votes with real ties (spec 003 §7.9, generators G1 and G2).

G2 is label-first and misspecified for the Davidson aggregator, as real data are: each item has a ground-truth
label :math:`y^* \sim \pi` over (-1, 0, +1), a judge margin :math:`u_i = m\,y^*_i + \mathcal N(0, \sigma_u^2)` and a
tie logit :math:`e_i = \eta_J + \mathcal N(0, \sigma_\eta^2)`; each of the ``n`` samples draws a vote from
:math:`\operatorname{softmax}(u_{ij}, -u_{ij}, e_i)` over (+1, -1, 0), with position bias :math:`\pm b` for samples
shown A-first (the first half) and B-first (the second half), and a missing rate. Confidences
:math:`w_{ij} = \operatorname{clip}(q_{ij}(r_{ij}) + \mathcal N(0, 0.05^2), 0.01, 1)` stand in for the sequence
probability that Soft-SC and CI-SC use (a modelling choice, documented as such in the spec).

G1 is well-specified: given counts, labels are drawn from the Davidson model itself (parameter recovery).

References
----------
.. [1] Seed 003 (ICLR 2026 submission); spec 003 §7.9.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import softmax

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.repeated.davidson import davidson_features
from judgecal_dist.methods.repeated.self_consistency import MISSING

__all__ = ["SimulatedVotes", "simulate_label_first", "davidson_labels", "vote_counts"]


@dataclass(frozen=True)
class SimulatedVotes:
    """Votes ``(items, samples)`` in {-1, 0, +1, MISSING}, confidences of the same shape, labels ``(items,)``."""

    votes: npt.NDArray[np.int64]
    confidence: npt.NDArray[np.float64]
    labels: npt.NDArray[np.int64]


def vote_counts(votes: npt.ArrayLike, n: int | None = None) -> npt.NDArray[np.int64]:
    """``(c+, c0, c-)`` of the first ``n`` samples of every item (missing votes dropped).

    Examples
    --------
    >>> vote_counts([[1, 0, -1, 1], [MISSING, 0, 0, -1]], n=3).tolist()
    [[1, 1, 1], [0, 2, 0]]
    """
    r = np.asarray(votes)
    r = r if n is None else r[:, :n]
    return np.column_stack([(r == 1).sum(axis=1), (r == 0).sum(axis=1), (r == -1).sum(axis=1)]).astype(np.int64)


def simulate_label_first(
    n_items: int,
    n_samples: int,
    *,
    prior: Sequence[float] = (0.25, 0.5, 0.25),
    separation: float = 1.0,
    margin_sd: float = 0.8,
    tie_propensity: float = 0.0,
    tie_sd: float = 0.5,
    position_bias: float = 0.0,
    missing_rate: float = 0.0,
    random_state: int | None = 0,
) -> SimulatedVotes:
    """Generator G2 (module docstring); ``prior`` is (P(-1), P(0), P(+1)).

    Examples
    --------
    >>> sim = simulate_label_first(1000, 8, tie_propensity=1.0, random_state=1)
    >>> sim.votes.shape, bool(0.4 < (sim.votes == 0).mean() < 0.56), bool(abs((sim.labels == 0).mean() - 0.5) < 0.05)
    ((1000, 8), True, True)
    """
    p = np.asarray(prior, dtype=np.float64)
    if p.shape != (3,) or (p < 0).any() or not np.isclose(p.sum(), 1.0):
        raise ConfigError(f"simulate_label_first: prior: expected 3 probabilities summing to 1, got {list(prior)}")
    if not 0.0 <= missing_rate < 1.0 or n_items < 1 or n_samples < 1:
        raise ConfigError("simulate_label_first: need n_items, n_samples >= 1 and missing_rate in [0, 1)")
    rng = np.random.default_rng(random_state)
    y = rng.choice(np.array([-1, 0, 1]), size=n_items, p=p)
    u = separation * y + rng.normal(0.0, margin_sd, n_items)
    e = tie_propensity + rng.normal(0.0, tie_sd, n_items)
    shown_first = np.where(np.arange(n_samples) < n_samples / 2, 1.0, -1.0)
    u_ij = u[:, None] + position_bias * shown_first[None, :]
    q = softmax(np.stack([u_ij, -u_ij, np.broadcast_to(e[:, None], u_ij.shape)], axis=2), axis=2)  # (+1, -1, 0)
    cls = (rng.random((n_items, n_samples, 1)) > np.cumsum(q, axis=2)).sum(axis=2).clip(max=2)
    votes = np.array([1, -1, 0])[cls]
    q_own = np.take_along_axis(q, cls[:, :, None], axis=2)[:, :, 0]
    confidence = np.clip(q_own + rng.normal(0.0, 0.05, q_own.shape), 0.01, 1.0)
    missing = rng.random(votes.shape) < missing_rate
    votes = np.where(missing, MISSING, votes).astype(np.int64)
    return SimulatedVotes(votes=votes, confidence=np.where(missing, 0.0, confidence), labels=y.astype(np.int64))


def davidson_labels(
    counts: npt.ArrayLike, beta: float, eta0: float, *, random_state: int | None = 0
) -> npt.NDArray[np.int64]:
    """Generator G1: labels drawn from the global Davidson model at ``(beta, eta0)`` given the items' counts.

    Examples
    --------
    >>> davidson_labels([[8, 0, 0]] * 5, beta=50.0, eta0=-20.0).tolist()
    [1, 1, 1, 1, 1]
    """
    s, _ = davidson_features(counts)
    p = softmax(np.column_stack([-beta * s, np.full(len(s), eta0), beta * s]), axis=1)  # (-1, 0, +1)
    rng = np.random.default_rng(random_state)
    cls = (rng.random((len(s), 1)) > np.cumsum(p, axis=1)).sum(axis=1).clip(max=2)
    return np.asarray(np.array([-1, 0, 1])[cls], dtype=np.int64)
