"""Judge grain of panels whose judges come in two presentation orders (spec 000 §3.0, LLMBar).

The LLMBar release gives each evaluator configuration ``backbone/strategy`` two verdicts per item, one per order
of the pair (judge ids ``<configuration>/ab`` and ``<configuration>/ba``). The default panel keeps both as separate
judges (130 on LLMBar); ``one_order`` keeps the ``ab`` verdict of each configuration, ``both_orders`` keeps a
verdict only where both orders agree (disagreement or a missing order is missing), 65 judges either way.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.errors import ConfigError

__all__ = ["GRAINS", "ORDER_SUFFIXES", "configurations", "regrain", "position_consistency", "grain_lines"]

GRAINS = ("judge", "one_order", "both_orders")
ORDER_SUFFIXES = ("/ab", "/ba")


def configurations(judge_ids: np.ndarray) -> list[tuple[str, int, int]]:
    """(configuration, column of its ``ab`` judge, column of its ``ba`` judge) for every configuration with both."""
    index = {str(j): i for i, j in enumerate(judge_ids)}
    out = []
    for judge, col in index.items():
        if judge.endswith(ORDER_SUFFIXES[0]):
            config = judge[: -len(ORDER_SUFFIXES[0])]
            other = index.get(config + ORDER_SUFFIXES[1])
            if other is not None:
                out.append((config, col, other))
    return out


def regrain(panel: Panel, grain: str, *, source: str = "data") -> Panel:
    """``panel`` at judge grain ``grain`` (``judge`` returns it unchanged).

    Raises
    ------
    ConfigError
        When ``grain`` asks for orders the panel does not have (no judge pair ``X/ab``, ``X/ba``).
    """
    if grain == "judge":
        return panel
    pairs = configurations(panel.judge_ids)
    if not pairs:
        raise ConfigError(
            f"{source}: judge_grain={grain}: no judge comes in two orders (ids ending /ab and /ba, as in LLMBar); "
            "use judge_grain=judge"
        )
    ab = np.array([a for _, a, _ in pairs])
    ba = np.array([b for _, _, b in pairs])
    v_ab, v_ba = panel.votes[:, ab], panel.votes[:, ba]
    votes = v_ab.copy() if grain == "one_order" else np.where(v_ab == v_ba, v_ab, np.int8(-1)).astype(np.int8)
    disagree = int(((v_ab >= 0) & (v_ba >= 0) & (v_ab != v_ba)).sum())  # verdicts both orders gave, differently
    return replace(
        panel,
        judge_ids=np.array([c for c, _, _ in pairs]),
        votes=votes,
        families=panel.families[ab],
        info=panel.info | {"judge_grain": grain, "configurations": len(pairs), "order_disagreements": disagree},
    )


def position_consistency(panel: Panel) -> float | None:
    """Mean over configurations of the share of items where both orders give the same non-missing verdict
    (among items where both voted); None when the panel has no order pairs."""
    pairs = configurations(panel.judge_ids)
    shares = []
    for _, a, b in pairs:
        both = (panel.votes[:, a] >= 0) & (panel.votes[:, b] >= 0)
        if both.any():
            shares.append(float((panel.votes[both, a] == panel.votes[both, b]).mean()))
    return float(np.mean(shares)) if shares else None


def grain_lines(diagnostics: dict, grain: str, panel: Panel, summary: pd.DataFrame | None = None) -> str:
    """Report section: the judge grain of this run and, for judges in two orders, configuration-level IRT; at a
    65-judge grain, the full panel against the best few beside the paper's LLMBar result."""
    by_config = diagnostics.get("irt_configuration")
    if grain == "judge" and by_config is None:
        return ""
    out = ["", "## Judge grain", ""]
    if grain != "judge":
        what = "the first-order verdict" if grain == "one_order" else "a verdict only where both orders agree"
        out.append(
            f"- `judge_grain={grain}`: {panel.n_judges} configurations, each {what} (the 65-judge LLMBar variant)."
        )
        out += _paper_lines(grain, panel, summary)
    if by_config is not None:
        shares = ", ".join(f"{k} {v:.3f}" for k, v in by_config["variance_shares"].items())
        out += [
            f"- Judges come in two orders: {by_config['configurations']} configurations. Run with "
            "`--set judge_grain=one_order` or `both_orders` for the 65-judge variants.",
            f"- 2PL IRT at the configuration level (both orders agreeing): variance shares {shares}; "
            f"Spearman(ability, accuracy) = {by_config['ability_accuracy_spearman']:.3f}.",
            f"- Position consistency (both orders give the same verdict): {by_config['position_consistency']:.3f} "
            "on average over configurations.",
            "- The paper reports the judge share as dominant on LLMBar without its value (lost in the text).",
        ]
    return "\n".join(out) + "\n"


def _paper_lines(grain: str, panel: Panel, summary: pd.DataFrame | None) -> list[str]:
    """The 65-judge run beside the paper: one-coin + beta on all judges vs the best 3, 5 and 10."""
    out = [
        "- The paper does not say whether it counted an LLMBar configuration once or once per order; this run is the "
        "sensitivity check beside the default (each order a judge, 130)."
    ]
    if grain == "both_orders":
        cells = int((panel.votes >= 0).sum()) + int(panel.info.get("order_disagreements", 0))
        share = panel.info.get("order_disagreements", 0) / max(cells, 1)
        out.append(
            f"- Here a missing verdict also means the two orders disagreed ({share:.1%} of the verdicts both orders "
            "gave): the parse-rate check and the operating arm's parse-rate filter are skipped; the missingness "
            "flags (and so `no_p3`) still read a disagreement as a missing verdict."
        )
    if summary is None or "delta_nll" not in summary:
        return out
    rows = summary[
        (summary["aggregator"] == "one_coin")
        & (summary["calibrator"] == "beta")
        & summary["panel"].isin(["top3", "top5", "top10"])
    ]
    if rows.empty:
        return out
    cells_ = [
        f"{r.panel} {r.delta_nll:+.4f} [{r.delta_nll_ci_low:+.4f}, {r.delta_nll_ci_high:+.4f}]"
        for r in rows.itertuples()
    ]
    ahead = int((rows["delta_nll"] > 0).sum())
    clear = int((rows["delta_nll_ci_low"] > 0).sum())
    out.append(
        "- The paper on LLMBar, after beta: all judges better than the best 3 and the best 5 (per-split tests and a "
        "bootstrap over split means, which ignores that the splits share items), the best 10 slightly better than "
        "all judges but not significantly. Here (one-coin + beta, ΔNLL = best few minus all): "
        + "; ".join(cells_)
        + f". All judges are ahead of {ahead} of {len(rows)} curated panels on average, and the interval across "
        f"splits excludes 0 for {clear} of them."
    )
    return out
