"""Scope diagnostics of the inclusion study (spec 000 §3.7-3.8), on the calibration half of the first split.

P1 parse rate (denominator: every calibration item), judges reliably below chance (Wald and Bayesian), P3
label-dependent or partial missingness, and the 2PL IRT judge/item/interaction variance shares with the Spearman
correlation of abilities and raw accuracies. They tell when "include everyone" needs care; they never filter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.methods.selection.diagnostics import flag_below_chance, flag_missingness, flag_parse_rate
from judgecal_dist.methods.selection.irt import TwoPLIRT, correctness_matrix
from judgecal_dist.splits import calibration_mask
from judgecal_dist.studies.inclusion.grain import configurations, position_consistency, regrain

__all__ = ["diagnose"]


def _irt(votes: np.ndarray, y: np.ndarray) -> tuple[TwoPLIRT | None, str | None]:
    """The 2PL IRT fit of the calibration half, or None and why it cannot be fitted there: abilities are
    standardised over judges (undefined for a single judge) and need an observed vote. The study still answers;
    the report says the diagnostic was skipped."""
    if votes.shape[1] < 2:
        return None, "not defined for a single judge"
    if not (votes >= 0).any():
        return (
            None,
            f"skipped: no judge voted A or B on the {len(y)} items of this calibration half, so it cannot be fitted (the other results stand)",
        )
    return TwoPLIRT().fit(correctness_matrix(votes, y)), None


def diagnose(panel: Panel, *, seed: int, calib_fraction: float) -> dict[str, Any]:
    """Flags and IRT shares as plain data for ``summary.json`` and the report."""
    in_cal = calibration_mask(panel.group_keys, [seed], calib_fraction)[0]
    votes, y, ids = panel.votes[in_cal], panel.labels[in_cal], panel.judge_ids
    n_votes, n_correct = count_judge_votes(votes, y)
    parse = flag_parse_rate(n_votes, int(in_cal.sum()), ids)
    below = flag_below_chance(n_votes, n_correct, ids, method="bayes")
    missing = flag_missingness(votes, y, ids) if len(np.unique(y)) == 2 else None
    irt, irt_skipped = _irt(votes, y)
    # Judges in two orders (LLMBar): the orders of one configuration are near-duplicates, so IRT is also fitted at
    # the configuration level (a verdict where both orders agree) as the sensitivity check of spec §7.13.
    pairs = configurations(panel.judge_ids)
    by_config = None
    if len(pairs) >= 2:
        by_config, _ = _irt(regrain(panel, "both_orders").votes[in_cal], y)
    # With both orders agreeing, a missing verdict is also a disagreement between the orders, not a parse failure.
    p1 = panel.info.get("judge_grain") != "both_orders"
    return {
        "split_seed": seed,
        "p1_review": parse.loc[parse["review"], "judge_id"].tolist() if p1 else [],
        "p1_filter": parse.loc[parse["filter"], "judge_id"].tolist() if p1 else [],
        "p1_skipped": None if p1 else "judge_grain=both_orders: a missing verdict is also a disagreement of the orders",
        "below_chance_bayes": below.loc[below["below_chance"], "judge_id"].tolist(),
        "p3_flagged": [] if missing is None else missing.loc[missing["p3_flag"], "judge_id"].tolist(),
        "irt_variance_shares": {} if irt is None else {k: float(v) for k, v in irt.variance_shares_.items()},
        "irt_ability_accuracy_spearman": None if irt is None else float(irt.accuracy_spearman_),
        "irt_skipped": irt_skipped,
        "irt_configuration": None
        if by_config is None
        else {
            "configurations": len(pairs),
            "variance_shares": {k: float(v) for k, v in by_config.variance_shares_.items()},
            "ability_accuracy_spearman": float(by_config.accuracy_spearman_),
            "position_consistency": position_consistency(panel),
        },
    }
