"""Sanity controls and ablations of the inclusion study (spec 000 §3.10, Table 10), on the default pipeline.

Every control runs the default aggregator (one-coin) on the full panel of one split under the study's
``calib_scores`` protocol and reports evaluation NLL:

* ``random_labels`` (H.11): every label of the split replaced by a seeded fair coin; a calibrated pipeline must
  then score about log 2 = 0.693 nats, whatever the votes.
* ``difficulty_transfer`` (H.8): Platt fitted on the hard (bottom agreement tercile) or easy (top tercile)
  calibrator items, evaluated on the hard or easy evaluation items; agreement is |2 p_MV - 1| of the votes.
* ``distortions`` (H.8, Proposition 3): the Step-1 probability distorted before calibration (s^2, sqrt s, Gaussian
  noise sd 0.1 / 0.3 clipped to [0, 1], inversion 1 - s, a shuffle across items) or 20% of the votes of 40% of the
  judges flipped before aggregation; each is calibrated by Platt, beta and isotonic. Monotone maps should be
  recovered; inversion only by Platt (beta's a, b >= 0 cannot turn a score around).
* ``chaining`` (Table 10): Step 1 alone, + Platt, + beta, and Platt then beta fitted on Platt's output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import expit, logit

from judgecal_dist.methods.pipeline import Settings, calibrate, fit_pipelines, protocol_scores
from judgecal_dist.stats.metrics import pointwise_nll

__all__ = ["CONTROLS", "DISTORTIONS", "control_rows", "control_lines", "scope_lines"]

CONTROLS = ("random_labels", "difficulty_transfer", "distortions", "chaining")
DISTORTIONS = ("clean", "square", "sqrt", "noise0.1", "noise0.3", "invert", "shuffle", "flip20")
#: Calibrators of the distortion control (spec §3.10: monotone maps are recovered, inversion by Platt only).
DISTORTION_CALIBRATORS = ("platt", "beta", "isotonic")
#: Seed offsets of the random labels and the distortions (independent of the split and every other draw).
LABEL_SEED_OFFSET, DISTORT_SEED_OFFSET = 4_000_037, 5_000_011
AGGREGATOR = "one_coin"


def _agreement(votes: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
    voted = (votes >= 0).sum(axis=1)
    p_mv = np.divide((votes == 1).sum(axis=1), voted, out=np.full(voted.shape, 0.5), where=voted > 0)
    return np.abs(2.0 * p_mv - 1.0)


def _nll(y: npt.NDArray[np.int8], p: npt.NDArray[np.float64], eps: float) -> float:
    return float(pointwise_nll(y, p, eps=eps).mean())


def _probability_maps(rng: np.random.Generator) -> dict[str, Callable[[npt.NDArray[np.float64]], Any]]:
    """The distortions of the Step-1 probability (each call draws fresh noise / a fresh permutation)."""
    return {
        "clean": lambda p: p,
        "square": np.square,
        "sqrt": np.sqrt,
        "noise0.1": lambda p: np.clip(p + rng.normal(0.0, 0.1, p.size), 0.0, 1.0),
        "noise0.3": lambda p: np.clip(p + rng.normal(0.0, 0.3, p.size), 0.0, 1.0),
        "invert": lambda p: 1.0 - p,
        "shuffle": lambda p: rng.permutation(p),
    }


def flip_votes(
    votes: npt.NDArray[np.int8], rng: np.random.Generator, *, judge_share: float = 0.4, vote_share: float = 0.2
) -> npt.NDArray[np.int8]:
    """Votes with ``vote_share`` of the non-missing votes of a random ``judge_share`` of the judges flipped."""
    out = votes.copy()
    judges = rng.choice(votes.shape[1], size=round(judge_share * votes.shape[1]), replace=False)
    for j in judges:
        voted = np.flatnonzero(out[:, j] >= 0)
        hit = rng.choice(voted, size=round(vote_share * voted.size), replace=False)
        out[hit, j] = 1 - out[hit, j]
    return out


def control_rows(
    controls: tuple[str, ...],
    seed: int,
    settings: Settings,
    v_cal: npt.NDArray[np.int8],
    y_cal: npt.NDArray[np.int8],
    v_eval: npt.NDArray[np.int8],
    y_eval: npt.NDArray[np.int8],
    protocol: str,
    roles: npt.NDArray[np.int8] | None,
) -> list[dict[str, Any]]:
    """One ``control`` row (control, variant, calibrator, nll) per requested control of split ``seed``."""
    if not controls:
        return []
    eps, rows = settings.eps, []

    def row(control: str, variant: str, calibrator: str, nll: float, **extra: Any) -> None:
        rows.append({"kind": "control", "control": control, "variant": variant, "calibrator": calibrator, "nll": nll})
        rows[-1].update(extra)

    s_fit, y_fit, s_eval = protocol_scores(AGGREGATOR, settings, v_cal, y_cal, v_eval, protocol, roles)
    # Probability -> calibrator input, clipped: Platt saturates to exactly 0 or 1 on well-separated items.
    back = (lambda p: logit(np.clip(p, eps, 1 - eps))) if settings.calibrator_input == "logit" else np.asarray
    if "random_labels" in controls:
        rng = np.random.default_rng([seed, LABEL_SEED_OFFSET])
        yr_cal = rng.integers(0, 2, y_cal.size).astype(np.int8)
        yr_eval = rng.integers(0, 2, y_eval.size).astype(np.int8)
        for cal, p in fit_pipelines(
            AGGREGATOR, ("none", "platt", "beta"), settings, v_cal, yr_cal, v_eval, protocol, roles
        ).items():
            row("random_labels", "fair coin", cal, _nll(yr_eval, p, eps))
    if "difficulty_transfer" in controls:
        # The calibrator's own training items: role 1 under the nested protocol, every calibration item otherwise.
        trained = v_cal[roles == 1] if protocol == "nested" and roles is not None else v_cal
        strata = {}
        for side, votes in (("fit", trained), ("eval", v_eval)):
            g = _agreement(votes)
            low, high = np.quantile(g, [1 / 3, 2 / 3])
            strata[side] = {"hard": g <= low, "easy": g >= high}
        for fit_on in ("hard", "easy"):
            m = strata["fit"][fit_on]
            if np.unique(y_fit[m]).size < 2:  # unpenalised Platt has no optimum on one class
                continue
            for eval_on in ("easy", "hard"):
                e = strata["eval"][eval_on]
                p = calibrate("platt", settings, s_fit[m], y_fit[m], {"e": s_eval[e]})["e"]
                row("difficulty_transfer", f"{fit_on}->{eval_on}", "platt", _nll(y_eval[e], p, eps), items=int(e.sum()))
    if "distortions" in controls:
        rng = np.random.default_rng([seed, DISTORT_SEED_OFFSET])
        to_p = expit if settings.calibrator_input == "logit" else np.asarray
        p_fit, p_eval = (np.clip(to_p(s), eps, 1 - eps) for s in (s_fit, s_eval))
        for name, fn in _probability_maps(rng).items():
            d_fit, d_eval = back(fn(p_fit)), back(fn(p_eval))
            for cal in DISTORTION_CALIBRATORS:
                row(
                    "distortions",
                    name,
                    cal,
                    _nll(y_eval, calibrate(cal, settings, d_fit, y_fit, {"e": d_eval})["e"], eps),
                )
        flipped = flip_votes(np.concatenate([v_cal, v_eval]), rng)
        f_cal, f_eval = flipped[: v_cal.shape[0]], flipped[v_cal.shape[0] :]
        for cal, p in fit_pipelines(
            AGGREGATOR, DISTORTION_CALIBRATORS, settings, f_cal, y_cal, f_eval, protocol, roles
        ).items():
            row("distortions", "flip20", cal, _nll(y_eval, p, eps))
    if "chaining" in controls:
        for cal in ("none", "platt", "beta"):
            row("chaining", cal, cal, _nll(y_eval, calibrate(cal, settings, s_fit, y_fit, {"e": s_eval})["e"], eps))
        # Step 2 -> Step 3: beta fitted on Platt's calibrated output of the same items.
        stepped = calibrate("platt", settings, s_fit, y_fit, {"f": s_fit, "e": s_eval})
        p = calibrate("beta", settings, back(stepped["f"]), y_fit, {"e": back(stepped["e"])})["e"]
        row("chaining", "platt>beta", "platt>beta", _nll(y_eval, p, eps))
    return rows


def _transfer_verdict(rows: pd.DataFrame) -> str:
    """Whether the two transfers behaved as the paper says, in words (the intervals decide nothing here)."""
    nll = rows.set_index("variant")["nll"]
    if not {"hard->easy", "easy->easy", "easy->hard", "hard->hard"} <= set(nll.index):
        return ""
    gap_easy = nll["hard->easy"] - nll["easy->easy"]
    gap_hard = nll["easy->hard"] - nll["hard->hard"]
    held = "held" if gap_easy < gap_hard else "did not hold"
    return (
        f" Here the cost of calibrating on the other tercile is {gap_easy:+.4f} nats on easy items and "
        f"{gap_hard:+.4f} on hard ones: the asymmetry {held}."
    )


def control_lines(controls: pd.DataFrame, config: Any) -> str:
    """Report section: the controls' mean evaluation NLL over splits with intervals, and what the paper reported."""
    if controls.empty:
        return ""
    level = f"{config.ci_level:.0%}"

    def cell(r: Any) -> str:
        return f"{r.nll:.4f} [{r.nll_ci_low:.4f}, {r.nll_ci_high:.4f}]"

    out = [
        "",
        "## Sanity controls and the pipeline ablation",
        "",
        f"One-coin on all judges, calibration protocol `{config.calib_scores}`; evaluation NLL, mean over splits "
        f"with its {level} interval.",
    ]
    order = {name: i for i, name in enumerate(("none", "platt", "beta", "platt>beta", "hard->easy", "easy->easy"))}
    controls = controls.sort_values(["variant", "calibrator"], key=lambda col: col.map(order).fillna(len(order)))
    by = {c: rows for c, rows in controls.groupby("control", sort=False)}
    if "random_labels" in by:
        out += [
            "",
            "**Random labels** (every label a fair coin; a calibrated pipeline should score log 2 = 0.6931):",
            "",
        ]
        out += ["| calibrator | NLL |", "| --- | --- |"]
        out += [f"| {r.calibrator} | {cell(r)} |" for r in by["random_labels"].itertuples()]
        out += ["", "The paper reports 0.69 on every dataset; the upper end of its range is lost."]
    if "difficulty_transfer" in by:
        out += ["", "**Difficulty transfer** (Platt fitted on one agreement tercile, evaluated on another):", ""]
        out += ["| fitted on -> evaluated on | NLL |", "| --- | --- |"]
        out += [f"| {r.variant} | {cell(r)} |" for r in by["difficulty_transfer"].itertuples()]
        out += [
            "",
            "Expected: hard -> easy transfers (close to easy -> easy), easy -> hard only partly (above "
            "hard -> hard)." + _transfer_verdict(by["difficulty_transfer"]) + " The paper's hard-tercile numbers "
            "(JudgeBench 3.47 -> 0.038) are on data the project does not have.",
        ]
    if "distortions" in by:
        table = by["distortions"].pivot(index="variant", columns="calibrator", values="nll")
        table = table.reindex([v for v in DISTORTIONS if v in table.index])
        cols = [c for c in DISTORTION_CALIBRATORS if c in table.columns]
        out += ["", "**Distortions** of the Step-1 probability (flip20: 20% of the votes of 40% of the judges):", ""]
        out += ["| distortion | " + " | ".join(cols) + " |", "| --- |" + " --- |" * len(cols)]
        out += [f"| {v} | " + " | ".join(f"{table.loc[v, c]:.4f}" for c in cols) + " |" for v in table.index]
        out += [
            "",
            "Monotone maps (square, sqrt) should come back to the clean NLL (calibration is invariant to increasing maps; isotonic exactly on "
            "the fitted scores), inversion only under Platt. The paper ran these on Chatbot Arena (not in the "
            "project's data); its numbers are lost.",
        ]
    if "chaining" in by:
        out += ["", "**Pipeline ablation** (Step 1, + Platt, + beta, Platt then beta):", ""]
        out += ["| pipeline | NLL |", "| --- | --- |"]
        out += [f"| {r.variant} | {cell(r)} |" for r in by["chaining"].itertuples()]
        out += [
            "",
            "The paper's ablation (nested protocol: `--set calib_scores=nested`) is on JudgeBench and "
            "RewardBench (NLL 1.22 -> 0.084 and 0.41 -> 0.046), which the project does not have.",
        ]
    return "\n".join(out) + "\n"


def scope_lines(summary: pd.DataFrame, scope: pd.DataFrame, config: Any) -> str:
    """Report section: the P3 arm (one-coin vs Dawid-Skene with and without the P3-flagged judges) and the
    operating-rule arm (P1 filter and below-chance flag applied), both against all judges.

    Each arm is compared with all judges through the paired ΔNLL (arm minus all judges, the same evaluation items)
    and its corrected interval, over the splits where the arm dropped a judge (elsewhere it is all judges and is not
    fitted again); the P3 rule reads those paired differences, never means over different sets of splits.
    """
    if scope.empty:
        return ""
    out = ["", "## Scope arms: P3 missingness and the operating rule", ""]
    cal = "beta" if "beta" in config.calibrators else config.calibrators[-1]
    rows = summary[summary["calibrator"] == cal].set_index(["aggregator", "panel"])
    for name, arm in scope.groupby("panel", sort=False):
        dropped = arm["dropped"].to_numpy(dtype=np.int64)
        what = "P3-flagged" if name == "no_p3" else "P1-filtered or reliably below chance"
        if name == "operating" and getattr(config, "judge_grain", "judge") == "both_orders":
            what = (
                "reliably below chance (no parse-rate filter: a missing verdict is also a disagreement of the orders)"
            )
        out.append(
            f"- `{name}`: {what} judges dropped on the calibration half: mean {dropped.mean():.2f} "
            f"(max {dropped.max()}) over {len(arm)} splits; {int((dropped > 0).sum())} splits dropped any."
        )
        if not dropped.any():
            out.append("  No judge was flagged in any split, so the arm is all judges and was not fitted again.")
            continue
        out.append(
            f"  ΔNLL = without them minus with every judge ({cal}, the same evaluation items, over the splits that "
            "dropped any; negative: dropping them helps):"
        )
        delta = {}
        for agg in config.aggregators:
            if (agg, name) in rows.index and (agg, "all") in rows.index:
                r = rows.loc[(agg, name)]
                delta[agg] = (r["delta_nll"], r["delta_nll_ci_low"], r["delta_nll_ci_high"])
                out.append(
                    f"  {agg} + {cal}: NLL {rows.loc[(agg, 'all'), 'nll']:.4f} with every judge; ΔNLL "
                    f"{r['delta_nll']:+.4f} [{r['delta_nll_ci_low']:+.4f}, {r['delta_nll_ci_high']:+.4f}]."
                )
        if name == "operating":
            out.append(_operating_note(delta))
        elif not {"one_coin", "dawid_skene"} <= set(config.aggregators):
            out.append("  Warning: the P3 rule compares one_coin with dawid_skene; add both to `aggregators`.")
        elif {"one_coin", "dawid_skene"} <= set(delta):
            out.append(_p3_note(delta, rows, cal))
    return "\n".join(out) + "\n"


def _p3_note(delta: dict, rows: pd.DataFrame, cal: str) -> str:
    """The P3 rule on the paired differences, and where the paper's case stands."""
    oc, ds = delta["one_coin"], delta["dawid_skene"]
    pattern = oc[0] < 0 < ds[0]  # one-coin better without the flagged judges, Dawid-Skene better with them
    clear = oc[2] < 0 < ds[1]
    if pattern and clear:
        verdict = "holds (both intervals exclude 0): prefer Dawid-Skene"
    elif pattern:
        verdict = "holds on average but not across splits (an interval includes 0): keep one-coin"
    else:
        verdict = "does not hold: keep one-coin"
    levels = f"{rows.loc[('one_coin', 'all'), 'nll']:.4f} vs {rows.loc[('dawid_skene', 'all'), 'nll']:.4f}"
    return (
        f"  Rule (one-coin worse with the flagged judges while Dawid-Skene improves): {verdict}. With every judge, "
        f"one-coin + {cal} vs Dawid-Skene + {cal}: NLL {levels}. The paper's case is a panel of reward models with "
        "GPU judges added that miss 5-8% of their verdicts (one-coin slightly worse with them, Dawid-Skene better); "
        "that panel is not in the project's data."
    )


def _operating_note(delta: dict) -> str:
    """The operating arm beside the paper: dropping below-chance judges should hurt the models that flip them."""
    oc = delta.get("one_coin")
    found = (
        ""
        if oc is None
        else f" Here one-coin's ΔNLL is {oc[0]:+.4f} [{oc[1]:+.4f}, {oc[2]:+.4f}]: dropping them "
        + (
            "hurts it (interval above 0)."
            if oc[1] > 0
            else "helps it (interval below 0)."
            if oc[2] < 0
            else "is a wash."
        )
    )
    return (
        "  The paper applies the filter only in this arm: a judge reliably below chance still informs one-coin, "
        "whose negative weight flips its vote, so dropping it should not help models that weigh judges by their "
        "accuracy; vote counts (majority, accuracy-weighted) cannot flip and may gain. Its case (one added judge "
        "parsing 54% of the items, two added judges below chance) is not in the project's data." + found
    )
