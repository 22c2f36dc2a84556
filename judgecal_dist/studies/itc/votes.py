"""Tie votes and presentation order of the itc study's judges: the vote tables and their report section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from judgecal_dist.methods.repeated.self_consistency import MISSING
from judgecal_dist.methods.repeated.vote_rates import position_counts, tie_vote_rate
from judgecal_dist.studies.report_kit import markdown_table, percent, section

if TYPE_CHECKING:
    from judgecal_dist.studies.itc.data import ItcInput

__all__ = ["PAPER_VOTE_TABLES", "vote_section", "vote_tables"]

_NO_ORDER = (
    "Positional bias: not measurable on this data, which does not record which response each sample showed first "
    "(rb2-k8 scores each response on its own; datasets with <judge>/ab and <judge>/ba judges such as LLMBar give it "
    "with `pool_orders: true`)."
)

#: The paper's own numbers for the two vote tables (WMT23 ZH->EN and its prompts; data the project does not have).
PAPER_VOTE_TABLES = (
    "The paper's tie-vote rates (12.4-37.6% by model and prompt on WMT23) and its positional bias (336 "
    "human-tie pairs of WMT23 ZH->EN in both orders: gemini-2.5-flash 14.5% forced choice, 3.1% with ties allowed; "
    "qwen3-next-80b -8.0% and 0.6%) come from WMT23 ratings and thinking-model votes the project does not have, so "
    "they cannot be reproduced here; the formulas are checked against the paper's own counts in the tests."
)

_RATES = ("tie_vote_rate", "tie_vote_rate_tie_pairs", "tie_vote_rate_decisive_pairs")


def vote_tables(data: ItcInput, n: int) -> pd.DataFrame:
    """Per (dataset, judge): tie-vote rates (all pairs, tie-labelled pairs, decisive pairs) and positional bias.

    Over each item's first ``n`` samples. Positional bias needs to know which response each sample showed first
    (pooled orders, synthetic:g2); elsewhere its columns are empty. ``bias`` is (First - Second) / (First +
    Second), ``bias_with_ties`` divides by every judgement (how the paper's tie-allowed column was computed).
    """
    rows = []
    for task in data.tasks:
        votes = task.votes[:, :n]
        row: dict[str, Any] = {
            "dataset": task.dataset,
            "judge_id": task.judge_id,
            "samples": votes.shape[1],
            "votes": int((votes != MISSING).sum()),
            "tie_vote_rate": tie_vote_rate(votes),
            "tie_vote_rate_tie_pairs": tie_vote_rate(votes[task.labels == 0]),
            "tie_vote_rate_decisive_pairs": tie_vote_rate(votes[task.labels != 0]),
        }
        if task.shown_first is not None:
            pos = position_counts(votes, task.shown_first[: votes.shape[1]])
            row |= {
                "first": pos.first,
                "second": pos.second,
                "tie": pos.tie,
                "bias": pos.bias,
                "bias_with_ties": pos.bias_with_ties,
            }
        rows.append(row)
    return pd.DataFrame(rows)


def vote_section(records: list[dict[str, Any]]) -> list[str]:
    """Report section: each judge's tie-vote rates and positional bias, and the paper's numbers we cannot check."""
    rows = []
    for r in records:
        pct = [percent(r.get(k), 1, missing="—") for k in _RATES]
        if r.get("first") is not None:
            pos = [str(r[k]) for k in ("first", "second", "tie")]
            pos += [percent(r[k], 1, sign=True, missing="—") for k in ("bias", "bias_with_ties")]
        else:
            pos = ["—"] * 5
        rows.append([r["dataset"], r["judge_id"], r["votes"], *pct, *pos])
    order_known = any(r.get("first") is not None for r in records)
    header = ["dataset", "judge", "votes", "tie votes", "on tie pairs", "on decisive pairs", "first", "second"]
    return section(
        "Tie votes and presentation order",
        "Share of tie votes among a judge's parsed votes (all pairs; pairs labelled tie; pairs with a better "
        "response) and positional bias: (First - Second) / (First + Second), where First counts votes for "
        "whichever response the judge saw first; 'with ties' divides by every vote.",
        rows=markdown_table([*header, "tie", "bias", "bias with ties"], rows),
        after=["\n".join(([] if order_known else [_NO_ORDER]) + [PAPER_VOTE_TABLES])],
    )
