"""The regime map's "The paper and here" section: the paper's qualitative LLMBar pattern (five targets) and its
absolute test MSE, each beside this run's number.

The targets are statements about LLMBar; on synthetic data they are listed as not measured, since a generated
regime says nothing about that pool.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from judgecal_dist.studies.report_kit import Claim, Here, PaperClaims, interval, mean_se, number, paper_and_here

__all__ = ["PAPER", "paper_lines"]

_POOL = (
    "pool: the paper's seven judges are 7B-12B open models; the shared LLMBar pool here is six stronger backbones "
    "(GPT-4, ChatGPT, PaLM 2 among them) plus one prompting variant"
)

PAPER = PaperClaims(
    "A Finite-Calibration Regime Map for LLM Judge Panels",
    (
        Claim(
            "Unseen-pattern rate and cell pressure of the table fall as the budget grows; support per label is below "
            "the cell pressure at the largest budget",
            "both fall; support per label below pressure",
            "pressure_falls",
            _POOL,
        ),
        Claim(
            "The table's selected number of judges grows with the budget and stays below all seven",
            "grows, stays below 7",
            "k_grows",
            _POOL,
        ),
        Claim(
            "The unweighted mean stacker is clearly worse than the learned-weight stackers (largest budget)",
            "clearly worse",
            "mean_worse",
            "pool: with a few strong judges, the plain mean is already near the learned weights",
        ),
        Claim(
            "The scalar selector beats the table at most budgets, with a gap that does not shrink as the budget "
            "grows (scalar minus table test MSE)",
            "scalar ahead at every budget; the gap does not shrink",
            "scalar_beats_table",
            "pool: a few strong, agreeing judges leave few patterns, so the table fills its cells as the budget grows "
            "and closes part of the gap",
        ),
        Claim(
            "Cold start: the guarded selector stays with the prior and the naive one is worse at 64 labels (or the "
            "smallest size run)",
            "guarded about the prior, naive worse at 64 labels",
            "cold_start",
            _POOL,
        ),
        Claim(
            "Absolute test MSE at the largest budget (scalar selector; table)",
            "scalar 0.186, table 0.203 at 300 labels",
            "absolute_mse",
            _POOL + ", whose verdicts are more often right, so every selector's error is lower",
        ),
    ),
)


def _by_menu(records: list[dict[str, Any]], menu: str) -> pd.DataFrame:
    frame = pd.DataFrame(records)
    return frame[frame["menu"] == menu].sort_values("budget").reset_index(drop=True)


def _mse(row: pd.Series) -> str:
    return interval(row["test_mse"], row["test_mse_ci_low"], row["test_mse_ci_high"])


def _measured(records: list[dict[str, Any]], paired: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Here]:
    table, scalar = _by_menu(records, "table"), _by_menu(records, "scalar")
    out: dict[str, Here] = {}
    if len(table) > 1:
        first, last = table.iloc[0], table.iloc[-1]
        falls = last["unseen_rate"] < first["unseen_rate"] and last["cell_pressure"] < first["cell_pressure"]
        out["pressure_falls"] = Here(
            f"budget {first['budget']} -> {last['budget']}: unseen {number(first['unseen_rate'])} -> "
            f"{number(last['unseen_rate'])}, pressure {number(first['cell_pressure'])} -> "
            f"{number(last['cell_pressure'])}; support per label {number(last['support_per_label'])} at the largest",
            agrees=bool(falls and last["support_per_label"] < last["cell_pressure"]),
        )
        out["k_grows"] = Here(
            f"mean k {number(first['selected_k'], '.2f')} -> {number(last['selected_k'], '.2f')}",
            agrees=bool(last["selected_k"] >= first["selected_k"] and last["selected_k"] < 7),
        )
    families = pd.DataFrame(extra.get("families") or [])
    if not families.empty:
        top = families[families["budget"] == families["budget"].max()].set_index("family")
        learned = [f for f in ("ridge_iso", "logistic", "one_coin_iso") if f in top.index]
        if "mean_iso" in top.index and learned:
            best = top.loc[learned, "selected_mse"].idxmin()
            mean, other = top.loc["mean_iso"], top.loc[best]
            margin = 2 * max(mean["selected_se"], other["selected_se"])
            out["mean_worse"] = Here(
                f"mean_iso {mean_se(mean['selected_mse'], mean['selected_se'])}, {best} "
                f"{mean_se(other['selected_mse'], other['selected_se'])} (± SE)",
                agrees=bool(mean["selected_mse"] - other["selected_mse"] > margin),
            )
    if paired:
        deltas = [p["delta"] for p in paired]
        ahead = sum(d < 0 for d in deltas)
        cells = "; ".join(
            f"{p['budget']}: {interval(p['delta'], p['ci_low'], p['ci_high'], '+.4f')}" for p in (paired[0], paired[-1])
        )
        out["scalar_beats_table"] = Here(
            f"scalar ahead at {ahead} of {len(deltas)} budgets; {cells}",
            agrees=bool(ahead > len(deltas) / 2 and abs(deltas[-1]) >= abs(deltas[0])),
        )
    cold = extra.get("cold_start") or []
    if cold:
        r = next((c for c in cold if c["n"] == 64), min(cold, key=lambda c: c["n"]))  # the paper's size if run
        level = abs(r["delta"]) <= 2 * r["delta_se"]
        out["cold_start"] = Here(
            f"n = {r['n']}: prior {number(r['prior_mse'])}, guarded minus prior {mean_se(r['delta'], r['delta_se'], '+.4f')}, "
            f"naive {number(r['naive_mse'])}",
            agrees=bool(level and r["naive_mse"] > r["prior_mse"]),
        )
    if len(scalar) and len(table):
        s, t = scalar.iloc[-1], table.iloc[-1]
        out["absolute_mse"] = Here(
            f"budget {s['budget']}: scalar {_mse(s)}; table {_mse(t)}",
            agrees=bool(abs(s["test_mse"] - 0.186) <= 0.02 and abs(t["test_mse"] - 0.203) <= 0.02),
        )
    return out


def paper_lines(
    synthetic: bool, records: list[dict[str, Any]], paired: list[dict[str, Any]], extra: dict[str, Any]
) -> list[str]:
    """The section's lines; on synthetic data every target is listed as not measured."""
    return paper_and_here(PAPER, {} if synthetic else _measured(records, paired, extra))
