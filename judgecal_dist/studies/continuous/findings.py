"""The six findings the paper's claims predict (spec 001 §8.3), each checked on the study's data.

Every finding is always present, per arm where it is per arm: held, not held, or not checked with the reason (a
run whose settings cannot decide it), never dropped. Each carries the numbers its verdict rests on
(``measured``), so the summary and a test can read them without parsing the report's sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.studies.continuous.data import SYNTHETIC
from judgecal_dist.studies.continuous.summary import BASELINES, flow_training, seed_interval, usable_rows

if TYPE_CHECKING:
    from judgecal_dist.studies.continuous.config import Config

__all__ = ["Finding", "findings", "BIAS_LIMIT", "GAIN_LIMIT", "CANARY_ALERT"]

#: (1) the largest |mean error| a corrector may keep from 100 anchors on.
BIAS_LIMIT = 0.08
#: (5) the largest MAE gain of the flow over the linear corrector expected on a real judge.
GAIN_LIMIT = 0.02
#: (6) Pr(beta < 0.3) above which the canary alerts (spec §3.7).
CANARY_ALERT = 0.05


@dataclass(frozen=True)
class Finding:
    """One §8.3 finding on one arm (``scope``: an arm, or ``all``): its verdict and the numbers behind it."""

    number: int
    name: str
    scope: str
    holds: bool | None
    text: str
    measured: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "not checked" if self.holds is None else ("held" if self.holds else "not held")

    @property
    def line(self) -> str:
        """The report's sentence: the finding, its numbers and its verdict."""
        return f"({self.number}) {self.text} - {self.verdict}."


def _by_seed(parts: pd.DataFrame, judge: str, corrector: str, budget: int, metric: str) -> pd.Series:
    """Rubric-mean ``metric`` per seed (the unit the seed s.d. and paired differences are taken over)."""
    g = parts[(parts["judge"] == judge) & (parts["corrector"] == corrector) & (parts["budget"] == budget)]
    return g.groupby("seed")[metric].mean()


def _bias(table: pd.DataFrame) -> Finding:
    """(1) every corrector's |mean error| below 0.08 from 100 anchors (baselines are not correctors)."""
    name = "every corrector's |mean error| below 0.08 at n >= 100"
    big = table[(table["budget"] >= 100) & ~table["corrector"].isin(BASELINES)].dropna(subset="mean_error")
    if not len(big):
        return Finding(1, name, "all", None, f"{name}: no corrector row at n >= 100")
    w = big.loc[big["mean_error"].abs().idxmax()]
    over = big[big["mean_error"].abs() >= BIAS_LIMIT]
    measured: dict[str, Any] = {"largest": float(abs(w["mean_error"])), "cells_over": len(over), "cells": len(big)}
    measured |= {"corrector": str(w["corrector"]), "judge": str(w["judge"]), "rubric": str(w["rubric"])}
    text = (
        f"Every corrector's |mean error| at n >= 100 below {BIAS_LIMIT}: largest {measured['largest']:.3f} "
        f"({w['corrector']}, {w['judge']}/{w['rubric']}, n={int(w['budget'])}); {len(over)} of {len(big)} "
        f"(judge, rubric, corrector, budget) cells at or above {BIAS_LIMIT} (correctors: "
        f"{', '.join(sorted(big['corrector'].unique()))}; {', '.join(BASELINES)} are baselines)"
    )
    return Finding(1, name, "all", over.empty, text, measured)


def _order_kept(parts: pd.DataFrame, usable: pd.DataFrame) -> Finding:
    """(2) the linear corrector keeps the raw Pearson; the flow nearly keeps the raw Spearman."""
    name = "HB Pearson = raw Pearson; flow Spearman = raw Spearman"
    raw = parts[parts["corrector"] == "raw"][["judge", "rubric", "seed", "pearson", "spearman"]]
    lin = usable[usable["corrector"] == "linear_hb"].merge(raw, on=["judge", "rubric", "seed"], suffixes=("", "_raw"))
    gap = float(np.nanmax(np.abs(lin["pearson"] - lin["pearson_raw"]))) if len(lin) else float("nan")
    flow = usable[usable["corrector"] == "flow"].merge(raw, on=["judge", "rubric", "seed"], suffixes=("", "_raw"))
    rho = float(np.nanmax(np.abs(flow["spearman"] - flow["spearman_raw"]))) if len(flow) else float("nan")
    text = (
        f"HB Pearson = raw Pearson: max |difference| {gap:.1e}; flow Spearman vs raw: max |difference| {rho:.3f} "
        "(exact only for the deterministic map; the MC-dropout mean is nearly monotone, so only the first is judged)"
    )
    holds = bool(gap < 1e-9) if len(lin) else None
    return Finding(2, name, "all", holds, text, {"pearson_gap": gap, "spearman_gap": rho})


def _linear_saturates(usable: pd.DataFrame, budgets: list[int], top: int) -> list[Finding]:
    """(3) per arm, HB's MAE and KL move less than a seed s.d. from 100 anchors to the top budget."""
    name = "HB MAE and KL at n=100 and the top budget differ by less than a seed s.d."
    out = []
    for arm in sorted(usable["judge"].unique()):
        if 100 not in budgets or top == 100:
            out.append(Finding(3, name, arm, None, f"{arm}: HB saturation needs budgets 100 and a larger one"))
            continue
        oks: list[bool | None] = []
        text: list[str] = []
        measured: dict[str, Any] = {}
        for metric in ("mae", "kl"):
            lo, hi = _by_seed(usable, arm, "linear_hb", 100, metric), _by_seed(usable, arm, "linear_hb", top, metric)
            sd = float(lo.std(ddof=1)) if len(lo) > 1 else float("nan")
            diff = float(hi.mean() - lo.mean())
            oks.append(bool(abs(diff) < sd) if np.isfinite(sd) and np.isfinite(diff) else None)
            text.append(f"{metric.upper()} {lo.mean():.3f} -> {hi.mean():.3f} (seed s.d. {sd:.3f})")
            measured |= {f"{metric}_difference": diff, f"{metric}_seed_sd": sd}
        holds = None if None in oks else all(oks)
        out.append(Finding(3, name, arm, holds, f"{arm}: HB at n=100 vs n={top}: {'; '.join(text)}", measured))
    return out


def _trained(config: Config, parts: pd.DataFrame, arm: str) -> str:
    """How far the arm's shared flows trained, for the findings that rest on them."""
    train = flow_training(config, parts)
    train = train[(train["judge"] == arm) & (train["corrector"] == "flow")]
    if train.empty:
        return ""
    fits, trained = int(train["fits"].sum()), int(train["trained"].sum())
    return f"; flows trained to convergence: {trained} of {fits} (largest final loss change {train['max_change'].max():.4f})"


def _synthetic_flow_wins(
    config: Config, parts: pd.DataFrame, usable: pd.DataFrame, budgets: list[int], top: int
) -> Finding:
    """(4) on the synthetic judge the flow beats HB on MAE, Pearson and KL at the top budget, not on KL at 100."""
    name = "synthetic judge: flow better on MAE, Pearson and KL at the top budget, HB better or tied on KL at 100"
    if SYNTHETIC not in set(usable["judge"]) or not {"flow", "linear_hb"} <= set(usable["corrector"]):
        return Finding(4, name, SYNTHETIC, None, f"{name}: needs the synthetic arm and both correctors")
    d = {
        m: (_by_seed(usable, SYNTHETIC, "flow", top, m) - _by_seed(usable, SYNTHETIC, "linear_hb", top, m)).dropna()
        for m in ("mae", "pearson", "kl")
    }
    measured: dict[str, Any] = {f"{m}_difference_top": float(v.mean()) for m, v in d.items()}
    wins = d["mae"].mean() < 0 and d["pearson"].mean() > 0 and d["kl"].mean() < 0
    holds: bool | None = bool(wins)
    low_text = "; n=100 not in the budgets, the KL tie there not checked"
    if 100 in budgets and top != 100:
        kl100 = (
            _by_seed(usable, SYNTHETIC, "flow", 100, "kl") - _by_seed(usable, SYNTHETIC, "linear_hb", 100, "kl")
        ).dropna()
        ci = seed_interval(kl100.to_numpy(), usable[usable["judge"] == SYNTHETIC], config.ci_level, "delta_kl")
        if ci is None:
            holds, low_text = None, "; one seed: no interval for the KL tie at n=100"
        else:
            holds = bool(wins and ci.high >= 0)
            measured |= {"kl_difference_100": float(kl100.mean()), "kl_100_low": ci.low, "kl_100_high": ci.high}
            low_text = f"; at n=100 KL(flow) - KL(HB) {kl100.mean():+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]"
    else:
        holds = None
    text = (
        f"synthetic judge: at n={top} flow - HB: MAE {d['mae'].mean():+.3f}, Pearson {d['pearson'].mean():+.3f}, "
        f"KL {d['kl'].mean():+.3f}{low_text}{_trained(config, parts, SYNTHETIC)} (expected: flow better on all "
        "three at the top budget, HB better or tied on KL at 100)"
    )
    return Finding(4, name, SYNTHETIC, holds, text, measured)


def _real_gain_small(
    config: Config, parts: pd.DataFrame, usable: pd.DataFrame, cross: list[dict[str, Any]], top: int
) -> list[Finding]:
    """(5) on the real judges the flow's MAE gain over HB at the top budget is at most 0.02."""
    name = f"real judge: the flow's MAE gain over HB at the top budget at most {GAIN_LIMIT}"
    out = []
    for arm in sorted(set(usable["judge"]) - {SYNTHETIC}):
        gain = (_by_seed(usable, arm, "linear_hb", top, "mae") - _by_seed(usable, arm, "flow", top, "mae")).mean()
        if not np.isfinite(gain):
            out.append(Finding(5, name, arm, None, f"{arm}: no flow and linear_hb rows at n={top}"))
            continue
        reached = [c["rubric"] for c in cross if c["judge"] == arm and c["metric"] == "mae" and c["budget_or_none"]]
        text = (
            f"{arm}: flow's MAE gain over HB at n={top}: {gain:+.3f} (expected <= {GAIN_LIMIT}); MAE crossover "
            f"reached on {', '.join(reached) or 'no rubric'}{_trained(config, parts, arm)}"
        )
        out.append(Finding(5, name, arm, bool(gain <= GAIN_LIMIT), text, {"gain": float(gain), "crossed": reached}))
    return out


def _canary(canaries: list[dict[str, Any]]) -> Finding:
    """(6) the canary Pr(beta < 0.3) at n <= 100 is highest, and alerts, on nano's Precise IF."""
    name = "canary: nano on Precise IF the cell with the highest Pr(beta < 0.3) at small n, and alerting"
    alerts = [f"{c['judge']}/{c['rubric']}@{c['budget']} ({c['pr_beta_lt_0_3']:.2f})" for c in canaries if c["alert"]]
    small = [c for c in canaries if c["budget"] <= 100 and np.isfinite(c["pr_beta_lt_0_3"])]
    if not small:
        return Finding(6, name, "all", None, "canary: no NUTS fit at n <= 100 (nuts_seeds = 0 or budgets > 100)")
    worst = max(small, key=lambda c: c["pr_beta_lt_0_3"])
    holds = bool(
        worst["judge"] == "nano" and worst["rubric"] == "Precise IF" and worst["pr_beta_lt_0_3"] > CANARY_ALERT
    )
    text = (
        f"canary Pr(beta < 0.3) at n <= 100: highest on {worst['judge']}/{worst['rubric']} at n={worst['budget']} "
        f"({worst['pr_beta_lt_0_3']:.2f}); alerts (> {CANARY_ALERT}): {', '.join(alerts) or 'none'} (expected: nano "
        "on Precise IF)"
    )
    measured = {"judge": worst["judge"], "rubric": worst["rubric"], "budget": int(worst["budget"])}
    return Finding(6, name, "all", holds, text, measured | {"pr_beta_lt_0_3": float(worst["pr_beta_lt_0_3"])})


def findings(
    config: Config,
    table: pd.DataFrame,
    cross: list[dict[str, Any]],
    canaries: list[dict[str, Any]],
    parts: pd.DataFrame,
) -> list[Finding]:
    """The six qualitative findings the paper's claims predict on this data, in spec order, each with its verdict."""
    usable = usable_rows(parts)
    budgets = sorted(config.budgets)
    top = budgets[-1]
    return [
        _bias(table),
        _order_kept(parts, usable),
        *_linear_saturates(usable, budgets, top),
        _synthetic_flow_wins(config, parts, usable, budgets, top),
        *_real_gain_small(config, parts, usable, cross, top),
        _canary(canaries),
    ]
