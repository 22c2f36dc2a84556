"""Summary, report and results of the continuous study (spec 001 §6, §7.5-§7.6, §8.3).

The pieces live beside it: the summary table, crossovers, canary and saturation in
:mod:`~judgecal_dist.studies.continuous.summary`, the paper's findings in
:mod:`~judgecal_dist.studies.continuous.findings`, the later report sections in
:mod:`~judgecal_dist.studies.continuous.sections` and the figures in :mod:`~judgecal_dist.studies.continuous.figures`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import pandas as pd

from judgecal_dist.io.records import json_records
from judgecal_dist.studies.base import StudyResult, interval_note
from judgecal_dist.studies.continuous.export import export_corrector, exported_choice
from judgecal_dist.studies.continuous.figures import figure_one, figures
from judgecal_dist.studies.continuous.findings import findings
from judgecal_dist.studies.continuous.paper import paper_lines
from judgecal_dist.studies.continuous.recommend import recommend
from judgecal_dist.studies.continuous.sections import crossovers, extra_sections, markdown
from judgecal_dist.studies.continuous.summary import (
    METRICS,
    canary,
    crossover,
    paper_tanh_leftover,
    saturation,
    split_overlap_ratio,
    summary_table,
    usable_rows,
)

if TYPE_CHECKING:
    from judgecal_dist.studies.continuous.config import Config, ContinuousInput

__all__ = [
    "METRICS",
    "canary",
    "crossover",
    "paper_tanh_leftover",
    "saturation",
    "split_overlap_ratio",
    "summarise",
    "summary_table",
]


def _head(config: Config, data: ContinuousInput, table: pd.DataFrame, failed: int) -> list[str]:
    """Title, run settings and the rubric-mean metrics table."""
    overall = (
        table.groupby(["judge", "corrector", "budget"])[["mean_error", "mae", "pearson", "kl", "w1"]]
        .mean()
        .reset_index()
    )
    return [
        "# Continuous-score calibration",
        f"Arms: {', '.join(data.arms)}; rubrics: {', '.join(data.rubrics)}; budgets {list(config.budgets)}; "
        f"{config.replicates} seeds ({config.nuts_seeds} with NUTS); flow epochs {config.flow_epochs}, K={config.flow_passes}, "
        f"ODE solver {config.flow_solver}.",
        f"Failed NUTS fits (gate R-hat/ESS/divergences), excluded from linear_hb: {failed} rubric rows.",
        "",
        f"Intervals: {interval_note(config.ci_level)}",
        "",
        "## Rubric-mean metrics by judge, corrector and budget",
        "![metric vs budget](figures/metric_vs_budget.png)",
        "",
        "Columns: budget = human-scored anchors per rubric; mean_error = mean of corrected minus human score "
        "(bias); mae = mean absolute error; pearson = correlation with the human scores; kl = KL divergence between "
        "the human and the corrected score distributions; w1 = Wasserstein-1 distance between them (all means over "
        "the rubrics; per-rubric values with intervals in summary.json).",
        "",
        markdown(overall, ["judge", "corrector", "budget", "mean_error", "mae", "pearson", "kl", "w1"]),
    ]


def _flow_line(parts: pd.DataFrame) -> str:
    """The shared flow's MC s.d., review routing and devices."""
    flows = parts[parts["corrector"] == "flow"]
    if not len(flows):
        return "No flow rows."
    return (
        f"Flow MC s.d. mean {flows['mc_sd_mean'].mean():.3f}; routed fraction {flows['routed_fraction'].mean():.3f}; "
        f"MAE routed {flows['routed_mae'].mean():.3f} vs kept {flows['kept_mae'].mean():.3f}; devices {sorted(flows['device'].dropna().unique())}."
    )


def _report(
    config: Config,
    parts: pd.DataFrame,
    data: ContinuousInput,
    table: pd.DataFrame,
    found: list[str],
    failed: int,
) -> str:
    lines = [
        *_head(config, data, table, failed),
        "## Findings the paper expects, checked on this data",
        *[f"- {line}" for line in found],
        "",
        _flow_line(parts),
        "",
        *[f"![calibration {a}](figures/calibration_{a}.png)" for a in data.arms],
        "",
        "## Judge against reference",
        "![judge vs reference](figures/judge_vs_reference.png)",
        "",
        *extra_sections(config, parts, table, data),
        *paper_lines(table),
        "",
    ]
    return "\n".join(lines) + "\n"


def summarise(config: Config, parts: pd.DataFrame, data: ContinuousInput) -> StudyResult:
    """Summary table, report, figures, exported corrector and the extra summary entries of a finished run."""
    table = summary_table(config, parts)
    cross, canaries = crossover(config, parts), canary(config, parts)
    failed = int(len(parts) - len(usable_rows(parts)))
    found = findings(config, table, cross, canaries, parts)
    report = _report(config, parts, data, table, [f.line for f in found], failed)
    corrector, judge = exported_choice(config, table)
    model = export_corrector(config, data, corrector, judge, parts)
    fmt = model.document["format"]
    exported = (
        f"exported: `{corrector}` for {judge} as `model/model.json` ({fmt}, fitted on the {model.document['fitted_on']['labelled_items']} "
        f"anchors of seed {config.seed} at {max(config.budgets)} per rubric; `judgecal score --model <this run>` "
        "corrects that judge's 1-10 scores onto 1-5; `--set export=<corrector>@<judge>` exports another)"
    )
    crosses = crossovers(config, parts)
    extra: dict[str, Any] = {
        "crossover": cross,
        "crossover_kl": crosses["kl"],
        "crossover_per_rubric_flow": [c for c in crosses["mae"] if c["flow"] == "flow_per_rubric"],
        "saturation": json_records(saturation(config, data)),
        "paper_tanh_leftover": paper_tanh_leftover(),
        "canary": canaries,
        "failed_nuts_fits": failed,
        "findings": [asdict(f) | {"verdict": f.verdict} for f in found],
        "exported_model": {"corrector": corrector, "judge": judge, "format": fmt, "export": config.export},
    }
    figs = figures(config, parts, table, data) | {"judge_vs_reference.png": figure_one(config, data)}
    return StudyResult(
        records=json_records(table),
        summary=table,
        report=report,
        figures=figs,
        model={"model.json": model.document, **model.files},
        extra=extra,
        recommendation=recommend(config, table, cross, exported=exported),
    )
