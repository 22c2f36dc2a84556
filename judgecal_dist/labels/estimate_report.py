"""``report.md`` of ``judgecal label estimate``: the estimates first, then what more labels would buy, then how the
numbers were made (formats from :mod:`judgecal_dist.studies.report_kit`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from judgecal_dist.studies.report_kit import bracket, markdown_table, number, section

__all__ = ["render"]


def _more(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return "not by labels alone (the proxy's own spread dominates)"
    return f"about {math.ceil(value):,} more"


def render(frame: pd.DataFrame, record: Mapping[str, Any]) -> str:
    """The page for the rows of ``estimates.parquet`` and the command's record."""
    level = 1.0 - float(record["inputs"]["settings"]["alpha"])
    counts = record["counts"]
    rows = [
        [
            f"`{r.target}`", number(r.estimate), bracket(r.lower, r.upper), str(r.method),
            f"{int(r.n_labels):,}", number(r.effective_labels, ".1f"), bracket(r.classical_lower, r.classical_upper),
        ]
        for r in frame.itertuples()
    ]  # fmt: skip
    header = ["target", "estimate", f"{level:.0%} interval", "method", "labels", "effective labels", "classical"]
    halve = [[f"`{r.target}`", f"{int(r.n_labels):,}", _more(r.labels_to_halve)] for r in frame.itertuples()]
    lines = [
        "# Prediction-powered estimates",
        *section(
            None,
            f"{len(frame)} targets from {counts['labelled']:,} labels over {counts['items']:,} scored items "
            f"({record['design']}; engine {record['engine']}). Effective labels: the labels the classical interval "
            "(labels only) would need for the same width.",
            rows=markdown_table(header, rows, align=["left", "right", "left", "left", "right", "right", "left"]),
        ),
        *section(
            "More labels",
            "How many more labels (drawn the same way) would halve each interval: the labels' share of the variance "
            "shrinks as one over their number, the proxy's share over every item does not.",
            rows=markdown_table(["target", "labels now", "to halve the interval"], halve),
        ),
        *section("How these numbers were made", *_how(record)),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _how(record: Mapping[str, Any]) -> list[str]:
    counts = record["counts"]
    inputs = record["inputs"]
    text = [
        f"- Proxy: the calibrated panel of `{inputs['model']}` applied to every item through the scoring path; each "
        "judge's accuracy uses the panel's probability that the label equals that judge's verdict, the panel's "
        "accuracy max(p, 1 - p), win rates p.",
        "- Estimator: PPI++ (power-tuned; Angelopoulos, Duchi and Zrnic 2023) for uniform labels, the "
        "inverse-probability form of active statistical inference (Zrnic and Candes 2024) for labels drawn by "
        "`label select`; normal intervals kept inside [0, 1].",
    ]
    fitted = counts.get("labelled_in_calibration", 0)
    if "labelled_in_queue" in counts:
        text.append(
            f"- Labels: {counts['labelled_in_queue']:,} drawn by the queues (weighted by one over their inclusion "
            f"probability); {counts['labelled'] - counts['labelled_in_queue']:,} found in no queue count as known "
            f"outcomes (probability 1; {fitted:,} of them the model's calibration items)."
        )
    else:
        text.append(
            f"- Labels: {counts['labelled'] - fitted:,} treated as a uniform sample; {fitted:,} labelled items the "
            "model was fitted on are left out (the proxy saw their labels)."
        )
    return text
