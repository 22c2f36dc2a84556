r"""Monte Carlo coverage of the prediction-powered intervals on synthetic panels with a known truth.

Each repetition draws a population of ``n_items`` items: a label :math:`Y \sim \mathrm{Bernoulli}(0.45)`, a group
(``g1`` for a third of the items, ``g0`` otherwise) and the votes of the judges of
:data:`tests.stats.panel_simulation.ACCURACIES`, judge :math:`j` right with probability :math:`a_j` independently,
each vote missing with probability 0.1. The proxy is the calibrated panel without labels: Dawid-Skene fitted by EM
on the votes alone (the model the votes are drawn from, so its posterior is calibrated), so the proxy never sees a
label. The targets are every kind of ``label estimate`` (:func:`~judgecal_dist.methods.labels.targets.build_targets`:
each judge's accuracy, the panel's accuracy, the win rate and the win rate per group), their truths the values over
all the population's items. Labels are revealed by ``select``'s Poisson draw, either uniform (:math:`\pi = n/N`,
estimated as a uniform sample) or active (:func:`~judgecal_dist.methods.labels.sampling.inclusion_probabilities`,
estimated in the inverse-probability form), and every method's 95% interval (PPI++, PPI, classical) is checked
against the truth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.labels.estimators import METHODS, PredictionPoweredMean
from judgecal_dist.methods.labels.moments import label_moments
from judgecal_dist.methods.labels.sampling import draw_mask, inclusion_probabilities
from judgecal_dist.methods.labels.targets import build_targets
from tests.stats.panel_simulation import ACCURACIES

DESIGNS = ("uniform", "active")
NOMINAL = 0.95


def _population(rng: np.random.Generator, n_items: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = (rng.uniform(size=n_items) < 0.45).astype(np.int8)
    right = rng.uniform(size=(n_items, ACCURACIES.size)) < ACCURACIES
    votes = np.where(right, y[:, None], 1 - y[:, None]).astype(np.int8)
    votes[rng.uniform(size=votes.shape) < 0.1] = -1
    group = np.where(rng.uniform(size=n_items) < 1 / 3, "g1", "g0")
    return y, votes, group


def coverage_draws(repetitions: int, *, n_items: int = 2000, budget: int = 150, seed: int = 0) -> pd.DataFrame:
    """One row per (repetition, design, method, target): whether the interval held the truth, and its width."""
    judges = [f"j{j}" for j in range(ACCURACIES.size)]
    rows = []
    for rep in range(repetitions):
        rng = np.random.default_rng([seed, rep])
        y, votes, group = _population(rng, n_items)
        p = DawidSkene().fit(votes).posteriors_[:, 1]  # no label enters the proxy
        targets = list(build_targets(p, y, votes, judges, groups={"group": group}))
        probabilities = {"uniform": np.full(n_items, budget / n_items), "active": inclusion_probabilities(p, budget)}
        for d, design in enumerate(DESIGNS):
            pi = probabilities[design]
            mask = draw_mask(pi, seed=(seed * repetitions + rep) * len(DESIGNS) + d)
            for target in targets:
                truth = float(target.outcome.mean())
                lab = mask[target.rows]
                weights = pi[target.rows][lab] if design == "active" else None
                moments = label_moments(target.outcome[lab], target.proxy[lab], target.proxy, weights)
                for method in METHODS:
                    est = PredictionPoweredMean(method=method).fit_moments(moments)
                    lo, hi = est.interval_
                    rows.append((rep, design, method, target.name, bool(lo <= truth <= hi), hi - lo))
    frame = pd.DataFrame(rows, columns=["repetition", "design", "method", "target", "covered", "width"])
    # The kind of a target: judge_accuracy, panel_accuracy, win_rate or win_rate:group (the group's value dropped).
    judge = frame["target"].str.startswith("judge_accuracy:")
    frame["kind"] = np.where(judge, "judge_accuracy", frame["target"].str.split("=").str[0])
    return frame


def coverage_table(draws: pd.DataFrame) -> pd.DataFrame:
    """Coverage per (design, method, target kind): pooled over the kind's targets, the lowest single target's, the
    binomial sd of one target's coverage at this many repetitions, and the mean width."""
    per_target = draws.groupby(["design", "method", "kind", "target"], sort=False)["covered"].mean()
    g = draws.groupby(["design", "method", "kind"], sort=False)
    table = pd.DataFrame(
        {
            "targets": g["target"].nunique(),
            "coverage": g["covered"].mean(),
            "min_target_coverage": per_target.groupby(level=[0, 1, 2], sort=False).min(),
            "width": g["width"].mean(),
        }
    ).reset_index()
    repetitions = draws["repetition"].nunique()
    table["binomial_sd"] = np.sqrt(NOMINAL * (1 - NOMINAL) / repetitions)
    return table
