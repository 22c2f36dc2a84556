r"""Synthetic narrow-band ablation: log-odds weighting vs pruning as the accuracy spread grows (spec 000 §5.6(a), H.6).

Each replicate (seed) draws one panel per accuracy spread :math:`\sigma_p` from the generator of spec §5.6(a):

.. math::

    p_j = \mathrm{clip}(\mu + \sigma_p\zeta_j,\ 0.02,\ 0.98),\quad \zeta_j \sim N(0, 1),\qquad
    Y_i \sim \mathrm{Bernoulli}(1/2),\qquad V_{ij} = \begin{cases} Y_i & U_{ij} < p_j \\ 1 - Y_i & \text{else}
    \end{cases},\quad U_{ij} \sim U(0, 1),

with no missing verdicts, and splits it 50/50 at random. On the calibration half it estimates
:math:`\hat\theta_j = c_j/n_j`; on the evaluation half it scores the point accuracy (ties half credit) of

* ``log_odds``: log-odds weighting with the estimated weights (spec §3.1(c));
* ``top_half`` / ``top_third``: majority vote over the best :math:`\lceil J/2\rceil` / :math:`\lceil J/3\rceil`
  judges by :math:`\hat\theta_j` (pruning, the contrast H.6 draws);
* ``oracle``: log-odds weighting with the true weights :math:`\log(p_j/(1-p_j))` (Proposition 2);
* ``majority``: majority vote over all judges (reference).

The gap is acc(log_odds) - max(acc(top_half), acc(top_third)). Theorem 3's exponent gap between log-odds and
majority-vote weighting, :math:`2J\sigma_\delta^2` with :math:`\delta_j = p_j - 1/2`, is printed beside the
exact Hoeffding exponents :math:`E(w) = 2(\sum_j w_j\delta_j)^2/\sum_j w_j^2` at the oracle weights and at
:math:`w = 1`.

The spreads of one replicate share :math:`\zeta`, :math:`Y`, :math:`U` and the split (common random numbers): every
spread's panel follows the generator exactly, and the curve over spreads is paired within a replicate.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv 2605.09702, 2026,
   Theorem 3 and H.6.
.. [2] S. Nitzan, J. Paroush. Optimal Decision Rules in Uncertain Dichotomous Choice Situations. International
   Economic Review 23(2):289-297, 1982.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import Field, model_validator
from scipy.special import logit

from judgecal_dist.config import EngineConfig
from judgecal_dist.io.figures import colours, png, pyplot
from judgecal_dist.io.records import json_records
from judgecal_dist.methods.aggregation.aggregate import MajorityVote, log_odds_proba
from judgecal_dist.methods.aggregation.theory import jury_error_bound
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.methods.aggregation.weighted import LogOddsWeighted
from judgecal_dist.methods.selection.curate import top_k
from judgecal_dist.settings import (
    Fraction,
    NonNegative,
    SplitFields,
    integer,
    listed,
    number,
    one_of,
    refuse,
)
from judgecal_dist.stats.inference import summarise_over_splits
from judgecal_dist.stats.metrics import accuracy
from judgecal_dist.studies import report_kit
from judgecal_dist.studies.base import StudyResult, interval_note
from judgecal_dist.studies.narrowband.recommend import recommend
from judgecal_dist.studies.report_kit import Claim, Here, PaperClaims, markdown_table, paper_and_here, row_interval

__all__ = [
    "NAME",
    "Config",
    "Replicate",
    "NarrowbandDraw",
    "load",
    "plan",
    "run_replicate",
    "summarise",
    "draw_panel",
    "panel_votes",
    "hoeffding_exponent",
    "SPREADS",
]

NAME = "narrowband"
SOURCE = "synthetic:narrowband"
#: Spec §5.6(a) spreads plus 0.20, which the spec adds when the grid does not reach near-perfect accuracy.
SPREADS = (0.01, 0.02, 0.05, 0.08, 0.10, 0.15, 0.20)
METHODS = ("log_odds", "top_half", "top_third", "oracle", "majority")
METRICS = (
    *(f"acc_{m}" for m in METHODS),
    "gap",
    "oracle_gap",
    "lo_vs_majority",
    "exponent_gap_theorem3",
    "exponent_gap_exact",
    "theorem1_bound",
)


class Config(SplitFields):
    """Settings of the narrow-band study (``studies/configs/narrowband.yaml``); every key can be ``--set``."""

    data: Annotated[str, one_of((SOURCE,))] = Field(
        default=SOURCE, description="the study generates its panels in memory"
    )
    n_judges: Annotated[int, integer(3, 1_000, description="J (>= 3: top-third pruning needs a choice)")] = 15
    n_items: Annotated[int, integer(4, 10_000_000)] = 1000
    mean_accuracy: Fraction = 0.60
    spreads: Annotated[tuple[NonNegative, ...], listed(min_length=1)] = SPREADS
    accuracy_bounds: tuple[Fraction, Fraction] = (0.02, 0.98)
    calib_fraction: Fraction = 0.5
    eps_theta: Annotated[float, number(gt=0.0, lt=0.5)] = 1e-3

    @model_validator(mode="after")
    def _check(self) -> Config:
        if not 2 <= int(self.calib_fraction * self.n_items) <= self.n_items - 2:
            raise refuse(
                "calib_fraction", self.calib_fraction, f"must leave >= 2 of the n_items={self.n_items} on each side"
            )
        low, high = self.accuracy_bounds
        if not low < high:
            raise refuse("accuracy_bounds", list(self.accuracy_bounds), "must be [low, high] with 0 < low < high < 1")
        if not low <= self.mean_accuracy <= high:
            raise refuse("mean_accuracy", self.mean_accuracy, f"must lie in accuracy_bounds [{low}, {high}]")
        return self


@dataclass(frozen=True)
class NarrowbandInput:
    """The generator settings every replicate receives (no data is read)."""

    source: str
    n_judges: int
    n_items: int


@dataclass(frozen=True)
class Replicate:
    seed: int
    config: Config


class NarrowbandDraw(NamedTuple):
    """The random parts of one replicate, shared by its spreads: :math:`\\zeta_j`, :math:`Y_i`, :math:`U_{ij}`."""

    zeta: npt.NDArray[np.float64]
    labels: npt.NDArray[np.int8]
    uniforms: npt.NDArray[np.float64]
    calibration: npt.NDArray[np.bool_]


def draw_panel(rng: np.random.Generator, *, n_items: int, n_judges: int, calib_fraction: float) -> NarrowbandDraw:
    """Draw :math:`\\zeta \\sim N(0, I_J)`, :math:`Y \\sim \\mathrm{Bernoulli}(1/2)^n`, :math:`U \\sim U(0,1)^{n \\times J}`
    and a random calibration set of :math:`\\lfloor fn \\rfloor` items."""
    zeta = rng.standard_normal(n_judges)
    labels = (rng.random(n_items) < 0.5).astype(np.int8)
    uniforms = rng.random((n_items, n_judges))
    calibration = np.zeros(n_items, dtype=bool)
    calibration[rng.permutation(n_items)[: int(np.floor(calib_fraction * n_items))]] = True
    return NarrowbandDraw(zeta, labels, uniforms, calibration)


def panel_votes(
    draw: NarrowbandDraw, *, mean_accuracy: float, spread: float, bounds: tuple[float, float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Accuracies :math:`p_j` and votes :math:`V_{ij}` (1 = class 1) of one spread (spec §5.6(a))."""
    p = np.clip(mean_accuracy + spread * draw.zeta, bounds[0], bounds[1])
    correct = draw.uniforms < p[None, :]
    votes = np.where(correct, draw.labels[:, None], 1 - draw.labels[:, None]).astype(np.int8)
    return p, votes


def hoeffding_exponent(weights: npt.ArrayLike, delta: npt.ArrayLike) -> float:
    r"""Theorem 3's Hoeffding exponent :math:`E(w) = 2(\sum_j w_j\delta_j)^2 / \sum_j w_j^2` (0 for :math:`w = 0`).

    Examples
    --------
    >>> round(hoeffding_exponent([1.0, 1.0, 1.0], [0.1, 0.1, 0.1]), 6)  # 2 J mean(delta)^2
    0.06
    """
    w, d = np.asarray(weights, dtype=np.float64), np.asarray(delta, dtype=np.float64)
    norm = float(w @ w)
    return 0.0 if norm == 0.0 else 2.0 * float(w @ d) ** 2 / norm


def load(config: Config, engine: EngineConfig) -> NarrowbandInput:
    """No input to read: the generator settings (each replicate generates its own panels in memory)."""
    return NarrowbandInput(source=SOURCE, n_judges=config.n_judges, n_items=config.n_items)


def plan(config: Config, data: NarrowbandInput) -> list[Replicate]:
    return [Replicate(seed=s, config=config) for s in config.seeds]


def _pruned_majority(votes: npt.NDArray[np.int8], kept: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
    sub = votes[:, np.sort(kept)]
    return MajorityVote().fit(sub).predict_proba(sub)[:, 1]


def _spread_row(config: Config, draw: NarrowbandDraw, spread: float) -> dict[str, Any]:
    p, votes = panel_votes(draw, mean_accuracy=config.mean_accuracy, spread=spread, bounds=config.accuracy_bounds)
    cal, y = draw.calibration, draw.labels
    v_cal, v_eval, y_eval = votes[cal], votes[~cal], y[~cal]
    n_votes, n_correct = count_judge_votes(v_cal, y[cal])
    ids = np.array([f"j{j:03d}" for j in range(config.n_judges)])
    half, third = -(-config.n_judges // 2), -(-config.n_judges // 3)
    # Ranking by the posterior mean (c_j + 1)/(n_j + 2) is ranking by theta_hat here: every n_j is |C|.
    lo = LogOddsWeighted(eps_theta=config.eps_theta).fit_counts(n_votes, n_correct)
    proba = {
        "log_odds": lo.predict_proba(v_eval)[:, 1],
        "top_half": _pruned_majority(v_eval, top_k(n_votes, n_correct, ids, half)),
        "top_third": _pruned_majority(v_eval, top_k(n_votes, n_correct, ids, third)),
        "oracle": log_odds_proba(v_eval, logit(p), 0.5)[:, 1],
        "majority": MajorityVote().fit(v_eval).predict_proba(v_eval)[:, 1],
    }
    acc = {f"acc_{m}": accuracy(y_eval, proba[m]) for m in METHODS}
    best_pruned = max(acc["acc_top_half"], acc["acc_top_third"])
    delta = p - 0.5
    return {
        "spread": float(spread),
        **acc,
        "gap": acc["acc_log_odds"] - best_pruned,
        "oracle_gap": acc["acc_oracle"] - best_pruned,
        "lo_vs_majority": acc["acc_log_odds"] - acc["acc_majority"],  # weighting is not free when accuracies are equal
        "sigma_delta2": float(delta.var()),
        "exponent_gap_theorem3": 2.0 * config.n_judges * float(delta.var()),  # 2 J sigma_delta^2
        "exponent_gap_exact": hoeffding_exponent(logit(p), delta) - hoeffding_exponent(np.ones_like(p), delta),
        # Theorem 1: the oracle log-odds decision errs with probability at most 1/2 exp(-sum_j D_j).
        "theorem1_bound": jury_error_bound(p),
        "n_top_half": half,
        "n_top_third": third,
    }


def run_replicate(data: NarrowbandInput, rep: Replicate) -> pd.DataFrame:
    """Accuracies and gaps of every spread for the panels of seed ``rep.seed`` (pure: one generator per seed)."""
    config = rep.config
    draw = draw_panel(
        np.random.default_rng(rep.seed),
        n_items=config.n_items,
        n_judges=config.n_judges,
        calib_fraction=config.calib_fraction,
    )
    rows = [{"seed": rep.seed} | _spread_row(config, draw, float(s)) for s in config.spreads]
    return pd.DataFrame(rows)


def summarise(config: Config, parts: pd.DataFrame, data: NarrowbandInput) -> StudyResult:
    """Per spread: mean accuracies and gap over replicates with t intervals, the figure and the report."""
    summary = summarise_over_splits(  # every replicate simulates a fresh panel: independent, so n_2/n_1 = 0
        parts,
        by=["spread"],
        metrics=list(METRICS),
        confidence=config.ci_level,
        rng=np.random.default_rng(config.seed),
        split_sizes=0.0,
    )
    summary = summary.rename(columns={f"{m}_mean": m for m in METRICS} | {"n_splits": "replicates"})
    summary["exponent_gap_nominal"] = 2.0 * config.n_judges * summary["spread"] ** 2  # 2 J sigma_p^2
    summary["gap_positive_share"] = summary["spread"].map((parts["gap"] > 0).groupby(parts["spread"]).mean())
    return StudyResult(
        records=json_records(summary),
        summary=summary,
        report=_report(config, summary),
        figures={"gap_vs_spread.png": _figure(config, summary)},
        extra={"generator": _generator(config)},
        recommendation=recommend(config, summary),
    )


def _generator(config: Config) -> dict[str, Any]:
    return {
        "source": SOURCE,
        "n_judges": config.n_judges,
        "n_items": config.n_items,
        "mean_accuracy": config.mean_accuracy,
        "accuracy_bounds": list(config.accuracy_bounds),
        "calib_fraction": config.calib_fraction,
        "eps_theta": config.eps_theta,
        "common_random_numbers": "the spreads of one replicate share zeta, Y, U and the split",
        "pruning": "majority vote within the best ceil(J/2) / ceil(J/3) judges by calibration accuracy; ties 1/2",
    }


#: The headline table's columns: spread, then the accuracies, the gaps with intervals, the exponent gains.
_HEADLINE = (
    "accuracy spread",
    "weighted (estimated)",
    "top-half vote",
    "top-third vote",
    "weighted (true accuracies)",
    "majority vote (all)",
    "weighted − majority vote",
    "weighted − best pruned",
    "share of panels where weighting beats pruning",
    "predicted exponent gain",
    "exponent gain (realised spread)",
    "exponent gain (exact)",
)


def _headline_rows(summary: pd.DataFrame) -> list[list[str]]:
    accuracies = ("acc_log_odds", "acc_top_half", "acc_top_third", "acc_oracle", "acc_majority")
    gains = ("exponent_gap_nominal", "exponent_gap_theorem3", "exponent_gap_exact")
    return [
        [report_kit.number(r["spread"], ".2f"), *(report_kit.number(r[k]) for k in accuracies)]
        + [row_interval(r, "lo_vs_majority"), row_interval(r, "gap"), report_kit.number(r["gap_positive_share"], ".2f")]
        + [report_kit.number(r[k]) for k in gains]
        for _, r in summary.iterrows()
    ]


def _bound_rows(summary: pd.DataFrame) -> list[list[str]]:
    return [
        [
            report_kit.number(r["spread"], ".2f"),
            report_kit.number(1 - r["acc_oracle"]),
            report_kit.number(r["theorem1_bound"]),
        ]
        + ["yes" if 1 - r["acc_oracle"] <= r["theorem1_bound"] else "no"]
        for _, r in summary.iterrows()
    ]


#: The ablation's headline claims of its paper.
PAPER = PaperClaims(
    "Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges",
    (
        Claim(
            "The accuracy gap between log-odds weighting and pruning shrinks as the judges' accuracy spread grows "
            "(weighted minus the better pruned vote, smallest vs largest spread)",
            "a gap at the smallest spread, a smaller one at the largest (values lost)",
            "gap_shrinks",
            "procedure: the paper's generator constants and spreads are lost; here the spreads and mean accuracy "
            "are this run's settings",
        ),
        Claim(
            "With the true accuracies, the weighted vote's error stays within the bound in which every judge off "
            "chance contributes",
            "holds for every panel (a theorem)",
            "within_bound",
            "the bound is on the expected error; a finite panel's error can exceed the mean bound by sampling noise",
        ),
    ),
)


def _paper_here(summary: pd.DataFrame) -> dict[str, Here]:
    ordered = summary.sort_values("spread")
    small, large = ordered.iloc[0], ordered.iloc[-1]
    within = (1 - ordered["acc_oracle"]) <= ordered["theorem1_bound"]
    return {
        "gap_shrinks": Here(
            f"spread {report_kit.number(small['spread'], '.2f')}: {row_interval(small, 'gap')}; spread "
            f"{report_kit.number(large['spread'], '.2f')}: {row_interval(large, 'gap')}",
            agrees=bool(len(ordered) > 1 and abs(large["gap"]) < abs(small["gap"])),
        ),
        "within_bound": Here(f"within at {int(within.sum())} of {len(within)} spreads", agrees=bool(within.all())),
    }


def _report(config: Config, summary: pd.DataFrame) -> str:
    lines = [
        "# Narrow-band ablation: log-odds weighting vs pruning vs plain majority vote",
        "",
        f"{config.n_judges} simulated judges with mean accuracy {config.mean_accuracy}, {config.n_items} items "
        f"({config.calib_fraction:.0%} used to estimate each judge's accuracy), {config.replicates} simulated panels "
        "per spread; evaluation accuracy (ties count half), mean [95% interval over panels].",
        "",
        f"Intervals: {interval_note(config.ci_level, shared_items=False)}",
        "",
        *markdown_table(_HEADLINE, _headline_rows(summary)),
    ]
    lines += [
        "",
        "Glossary:",
        "",
        "- *accuracy spread*: the standard deviation of the judges' true accuracies around the mean (before "
        "clipping to [0.02, 0.98]).",
        "- *weighted (estimated)*: log-odds weighting, each judge's vote weighted by log(a/(1-a)) with its accuracy "
        "a estimated on the labelled half; *weighted (true accuracies)* uses the true accuracies (the best "
        "possible weighting).",
        "- *top-half / top-third vote*: majority vote of the judges ranked best on the labelled half (pruning).",
        "- *weighted − majority vote*: accuracy of estimated weighting minus plain majority vote of all judges; below "
        "0 at small spreads, where estimating weights adds noise and there is little to gain.",
        "- *exponent gain*: how much faster the error of weighting falls with more judges than majority vote's, as "
        "the exponent of a Hoeffding bound: predicted 2 J s² from the nominal spread s, the same from the realised "
        "variance of the clipped accuracies, and the exact difference of the bounds at the true weights "
        "(docs/methods.md, log-odds weighting).",
        "",
        "## The oracle panel's error against its bound",
        "",
        "With the true accuracies p_j, the error of log-odds weighting is at most 1/2 exp(-sum_j D_j), "
        "D_j = -log(2 sqrt(p_j (1 - p_j))) (each judge's information about the label), for every panel; the bound "
        "is the mean over replicates (docs/methods.md, exponent gain).",
        "",
        *markdown_table(
            ["accuracy spread", "error, weighted (true accuracies)", "bound", "within bound"], _bound_rows(summary)
        ),
        "",
        *paper_and_here(PAPER, _paper_here(summary))[1:],
        "",
        "Figure: `figures/gap_vs_spread.png`.",
        "",
    ]
    return "\n".join(lines)


def _figure(config: Config, summary: pd.DataFrame) -> bytes:
    plt = pyplot()

    labels = {
        "log_odds": "weighted (estimated)",
        "oracle": "weighted (true accuracies)",
        "majority": "majority vote (all)",
        "top_half": "top-half vote",
        "top_third": "top-third vote",
    }
    colour = colours(labels)  # one colour per method in both panels
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.2), dpi=110)
    x = summary["spread"]
    for metric, method, label in (
        ("gap", "log_odds", "weighted (estimated) − best pruned"),
        ("oracle_gap", "oracle", "weighted (true) − best pruned"),
        ("lo_vs_majority", "majority", "weighted (estimated) − majority vote"),
    ):
        axes[0].plot(x, 100 * summary[metric], marker="o", ms=3, color=colour[method], label=label)
        axes[0].fill_between(
            x, 100 * summary[f"{metric}_ci_low"], 100 * summary[f"{metric}_ci_high"], color=colour[method], alpha=0.15
        )
    axes[0].axhline(0.0, color="grey", lw=0.8)
    axes[0].set_ylabel("accuracy difference (percentage points)")
    axes[0].set_title("Gain of log-odds weighting (> 0: weighting better)")
    for method, label in labels.items():
        axes[1].plot(x, 100 * summary[f"acc_{method}"], marker="o", ms=3, color=colour[method], label=label)
    axes[1].set_ylabel("evaluation accuracy (%)")
    axes[1].set_title(f"{config.n_judges} judges, mean accuracy {config.mean_accuracy}, {config.n_items} items")
    for ax in axes:
        ax.set_xlabel("accuracy spread (standard deviation of the judges' accuracies)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return png(fig, tight_layout=True)
