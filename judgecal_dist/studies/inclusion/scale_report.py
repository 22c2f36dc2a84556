"""Report and figure of the ``inclusion_scale`` study (one-coin x calibrators x panels at arena scale)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.io.figures import colours, png, pyplot
from judgecal_dist.methods.pipeline import CALIBRATORS
from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.report_kit import markdown_table, number, row_interval, section

__all__ = ["report", "figures"]


def report(config: Any, summary: pd.DataFrame, execution: dict[str, Any]) -> str:
    """``report.md``: the execution chosen and why, then the metric table with its intervals."""
    lines = [
        "# Inclusion at scale: one-coin x calibrators x panels",
        "",
        f"- data: `{config.data}` (sample {config.sample}), {execution['verdict_rows']} verdict rows",
        f"- execution: **{execution['execution']}** ({execution['reason']})",
        f"- replicates: {config.replicates} keyed-hash splits, calibration fraction {config.calib_fraction}, "
        f"seeds {config.seed}..{config.seed + config.replicates - 1}",
        f"- calibrator input: {config.calibrator_input}; beta penalty {config.beta_penalty} "
        f"(l1_ratio {config.beta_l1_ratio}); ECE with {config.n_bins} top-label bins",
        f"- intervals: {interval_note(config.ci_level)}",
    ]
    rows = [
        [row.panel, number(row.panel_size, ".1f"), row.calibrator]
        + [row_interval(row, m) for m in ("nll", "brier", "ece", "accuracy")]
        for row in summary.itertuples(index=False)
    ]
    header = ["panel", "size", "calibrator", "NLL", "Brier", "ECE", "accuracy"]
    lines += section(
        None,
        rows=markdown_table(header, rows, align=["left", "right", *["left"] * 5]),
        figure=("NLL by panel and calibrator", "figures/nll_by_panel.png"),
    )
    return "\n".join([*lines, ""])


def figures(summary: pd.DataFrame, config: Any) -> dict[str, bytes]:
    """One PNG: evaluation NLL per panel, one bar per calibrator, with the intervals over splits."""
    plt = pyplot()

    panels = [p for p in config.panels if p in set(summary["panel"])]
    calibrators = [c for c in config.calibrators if c in set(summary["calibrator"])]
    width = 0.8 / max(len(calibrators), 1)
    colour = colours(CALIBRATORS)  # the inclusion and budget studies' colours
    fig, ax = plt.subplots(figsize=(1.5 + 1.4 * len(panels), 3.6), dpi=110)
    for i, cal in enumerate(calibrators):
        rows = summary[summary["calibrator"] == cal].set_index("panel").reindex(panels)
        x = np.arange(len(panels)) + (i - (len(calibrators) - 1) / 2) * width
        err = [rows["nll"] - rows["nll_ci_low"], rows["nll_ci_high"] - rows["nll"]]
        ax.bar(x, rows["nll"], width, yerr=err, capsize=3, color=colour[cal], label=cal)
    ax.set_xticks(np.arange(len(panels)), panels)
    ax.set_xlabel("panel (all judges, or the k most accurate)")
    ax.set_ylabel("evaluation NLL (mean, 95% interval)")
    ax.set_title(f"One-coin + calibrator, {config.replicates} splits")
    ax.legend(title="calibrator", fontsize=8)
    return {"nll_by_panel.png": png(fig, tight_layout=True)}
