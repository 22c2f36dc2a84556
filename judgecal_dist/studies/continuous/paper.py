"""The continuous study's "The paper and here" section: the paper's headline comparison of the linear corrector
and the flow, each claim beside this run's number.

The paper's numbers come from UltraFeedback reference scores with a synthesised judge; here the judges are real
(and the synthetic arm, where run, applies the paper's judge generator to another reference), so the comparison is
of the pattern, not of the digits.
"""

from __future__ import annotations

import pandas as pd

from judgecal_dist.studies.report_kit import Claim, Here, PaperClaims, number, paper_and_here, row_interval

__all__ = ["PAPER", "paper_lines"]

_JUDGE = (
    "pool: the paper's judge is synthesised with a tanh-shaped residual the linear corrector cannot follow; the real "
    "judges here leave a residual close to linear, so the flow has little to gain"
)

PAPER = PaperClaims(
    "Two Ways to De-Bias an LLM-as-a-Judge: A Continuous-Score Comparison of Hierarchical Bayesian Calibration and "
    "Neural-ODE Score Transport",
    (
        Claim(
            "Both correctors remove the judge's mean offset to within 0.08 (worst rubric, largest budget)",
            "+0.71 offset brought within ±0.08 at 100 and 1,500 anchors",
            "offset_fixed",
            "procedure: here the worst of every judge and rubric is shown, the paper shows one judge pooled",
        ),
        Claim(
            "With many anchors the flow beats the linear corrector on MAE, correlation and distribution shape "
            "(largest budget, rubric means)",
            "1,500 anchors: MAE 0.320 vs 0.359, Pearson 0.922 vs 0.896, KL 0.026 vs 0.037",
            "flow_wins_large",
            _JUDGE,
        ),
        Claim(
            "With few anchors the linear corrector matches the distribution shape better (smallest budget, rubric-mean "
            "KL divergence)",
            "100 anchors: KL 0.031 vs 0.058",
            "linear_shape_small",
            "the judges here score on 10 levels, so the corrected scores have at most 10 values and the KL divergence "
            "is set by their spacing more than by the corrector",
        ),
        Claim(
            "The paper's own numbers on UltraFeedback",
            "its two tables",
            None,
            "the UltraFeedback reference scores and the paper's synthesised judge draws are not in the shared data",
        ),
    ),
)


def _means(table: pd.DataFrame, budget: int) -> pd.DataFrame:
    rows = table[(table["budget"] == budget) & table["corrector"].isin(["linear_hb", "flow"])]
    return rows.groupby(["judge", "corrector"])[["mae", "pearson", "kl"]].mean().unstack("corrector")


def _measured(table: pd.DataFrame) -> dict[str, Here]:
    out: dict[str, Here] = {}
    budgets = sorted(table["budget"].unique())
    if not budgets:
        return out
    large, small = budgets[-1], budgets[0]
    fixed = table[(table["budget"] == large) & table["corrector"].isin(["linear_hb", "flow"])].dropna(
        subset=["mean_error"]
    )
    if len(fixed):
        worst = fixed.loc[fixed["mean_error"].abs().idxmax()]
        out["offset_fixed"] = Here(
            f"worst: {worst['corrector']}, {worst['judge']} {worst['rubric']}: {row_interval(worst, 'mean_error', '+.3f')}",
            agrees=bool(abs(worst["mean_error"]) <= 0.08),
        )
    wide = _means(table, large)
    if {("mae", "flow"), ("mae", "linear_hb")} <= set(wide.columns):
        cells = "; ".join(
            f"{judge}: MAE {number(r[('mae', 'flow')], '.3f')} vs {number(r[('mae', 'linear_hb')], '.3f')}, Pearson "
            f"{number(r[('pearson', 'flow')], '.3f')} vs {number(r[('pearson', 'linear_hb')], '.3f')}, KL "
            f"{number(r[('kl', 'flow')], '.3f')} vs {number(r[('kl', 'linear_hb')], '.3f')}"
            for judge, r in wide.iterrows()
        )
        wins = (
            (wide[("mae", "flow")] < wide[("mae", "linear_hb")])
            & (wide[("pearson", "flow")] > wide[("pearson", "linear_hb")])
            & (wide[("kl", "flow")] < wide[("kl", "linear_hb")])
        )
        out["flow_wins_large"] = Here(f"{large} anchors (flow vs linear): {cells}", agrees=bool(wins.all()))
    wide = _means(table, small)
    if {("kl", "flow"), ("kl", "linear_hb")} <= set(wide.columns):
        cells = "; ".join(
            f"{judge}: KL {number(r[('kl', 'linear_hb')], '.3f')} vs {number(r[('kl', 'flow')], '.3f')}"
            for judge, r in wide.iterrows()
        )
        out["linear_shape_small"] = Here(
            f"{small} anchors (linear vs flow): {cells}",
            agrees=bool((wide[("kl", "linear_hb")] <= wide[("kl", "flow")]).all()),
        )
    return out


def paper_lines(table: pd.DataFrame) -> list[str]:
    """The section's lines from the study's summary table (per judge, corrector, rubric and budget)."""
    return paper_and_here(PAPER, _measured(table))
