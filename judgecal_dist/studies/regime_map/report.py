"""Summary, figures and report of the regime-map study (spec 002 §6.6, Tables 2, 3, 11, 22; Figs. 1-5)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.errors import RunError
from judgecal_dist.io.figures import heatmap, plain_log_axis, png, pyplot
from judgecal_dist.io.rubric_panel import rubric_bayes_mse
from judgecal_dist.methods.fcps.paths import PATH_RULES
from judgecal_dist.methods.fcps.select import FAMILY_LADDER, MENUS, menu_families, selection_penalty
from judgecal_dist.stats.intervals import mean_interval
from judgecal_dist.stats.ranges import metric_range
from judgecal_dist.studies.base import StudyResult, interval_note
from judgecal_dist.studies.regime_map.cfps import cfps_report
from judgecal_dist.studies.regime_map.cold_start import COLD, cold_start_report
from judgecal_dist.studies.regime_map.config import SINGLE, extra_menus
from judgecal_dist.studies.regime_map.diagnostics import growth_population
from judgecal_dist.studies.regime_map.diagnostics_report import diagnostics_report
from judgecal_dist.studies.regime_map.extended import extended
from judgecal_dist.studies.regime_map.paper import paper_lines
from judgecal_dist.studies.regime_map.recommend import recommend, verdict
from judgecal_dist.studies.regime_map.sensitivity import ALPHA, alpha_report
from judgecal_dist.studies.regime_map.split_check import SPLIT, variant_report
from judgecal_dist.studies.report_kit import bracket, interval, markdown_table, number, row_interval

if TYPE_CHECKING:
    from judgecal_dist.studies.regime_map.config import Config

__all__ = ["summarise", "t_interval", "split_overlap_ratio"]

_DIAGNOSTICS = ("effective_support", "seen_term", "unseen_rate", "cell_pressure")


def t_interval(
    values: np.ndarray, level: float, test_train_ratio: float = 0.0, metric: str | None = None
) -> tuple[float, float, float]:
    """Mean and t interval over splits inside ``metric``'s range: the corrected resampled t with
    ``test_train_ratio`` = n_2/n_1 when the splits share items (real data), the one-sample t with 0 when every
    replicate draws fresh data."""
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    if x.size < 2:
        return mean, mean, mean
    bounds = None if metric is None else metric_range(metric)
    res = mean_interval(x, bounds, test_train_ratio=test_train_ratio, confidence=level)
    return mean, res.low, res.high


def split_overlap_ratio(config: Config, parts: pd.DataFrame, data: Any) -> float:
    """:math:`n_2/n_1` for :func:`t_interval`: 0 on generated data (fresh rows every replicate); on real data the
    test rows over the dataset's other rows (every split draws its test block from the same rows)."""
    if config.synthetic:
        return 0.0
    test = float(parts["test_rows"].mean())
    rows = float((getattr(data, "info", None) or {}).get("rows", 0))
    if rows <= test:
        raise RunError(f"regime_map: input: {rows:g} rows counted for {test:g} test rows per split; rerun the study")
    return test / (rows - test)


def _modal(values: pd.Series, order: tuple[str, ...]) -> tuple[Any, float]:
    # Deterministic mode: most frequent, ties by ``order`` (the selector's own tie-break: simpler family first).
    counts = Counter(values.tolist())
    rank = {v: i for i, v in enumerate(order)}
    value, count = max(counts.items(), key=lambda kv: (kv[1], -rank.get(kv[0], len(rank))))
    return value, count / len(values)


def _selected(parts: pd.DataFrame, menu: str) -> pd.DataFrame:
    chosen = parts[parts[f"selected_{menu}"]]
    if chosen.groupby(["seed", "budget"]).size().max() != 1:
        raise RunError(f"regime_map: menu {menu}: a (split, budget) has more than one selected candidate")
    return chosen.sort_values(["budget", "seed"])


def _records(config: Config, parts: pd.DataFrame, ratio: float) -> list[dict[str, Any]]:
    records = []
    families = {m: menu_families(m, config.families) for m in MENUS}
    one = parts[(parts["seed"] == parts["seed"].iloc[0]) & (parts["budget"] == parts["budget"].iloc[0])]
    menu_sizes = {m: int(one["family"].isin(families[m]).sum()) for m in MENUS}
    for menu in MENUS:
        chosen = _selected(parts, menu)
        for budget, group in chosen.groupby("budget", sort=True):
            family, share = _modal(group["family"], FAMILY_LADDER)
            path, _ = _modal(group["path"], PATH_RULES)
            mean, low, high = t_interval(group["test_mse"].to_numpy(), config.ci_level, ratio, "test_mse")
            record = {
                "budget": int(budget),
                "menu": menu,
                "selected_path": path,
                "selected_k": float(group["k"].mean()),
            }
            record |= {"selected_family": family, "selected_family_share": share, "n_splits": len(group)}
            record |= {"test_mse": mean, "test_mse_ci_low": low, "test_mse_ci_high": high}
            record |= {d: float(group[d].mean()) for d in _DIAGNOSTICS}
            record["support_per_label"] = float((group["effective_support"] / budget).mean())
            # Theorem 1's penalty for this menu's candidate count (delta = 0.05), reported with every selection.
            size = int(menu_sizes[menu])
            record |= {"menu_size": size, "selection_penalty": selection_penalty(size, int(group["val_rows"].min()))}
            records.append(record)
    return records


def _table_vs_scalar(config: Config, parts: pd.DataFrame, ratio: float) -> list[dict[str, Any]]:
    table = _selected(parts, "table").set_index(["budget", "seed"])["test_mse"]
    scalar = _selected(parts, "scalar").set_index(["budget", "seed"])["test_mse"]
    delta = (scalar - table).rename("delta").reset_index()
    out = []
    for budget, group in delta.groupby("budget", sort=True):
        mean, low, high = t_interval(group["delta"].to_numpy(), config.ci_level, ratio, "delta_test_mse")
        out.append({"budget": int(budget), "delta": mean, "ci_low": low, "ci_high": high, "n_splits": len(group)})
    return out


def _bayes_mse(config: Config, weight: float) -> float | None:
    """Exact :math:`E[\\eta(1-\\eta)]` of the growth generator over its 2^7 equally likely outputs (None when the
    judges are correlated or resampled from real patterns, where the outputs are not uniform)."""
    if config.growth_gamma != 0.0 or config.semi_real_source:
        return None
    return growth_population(config, weight).bayes_risk  # the 2^7 A/B outputs, equally likely


def _rubric_bayes(config: Config, parts: pd.DataFrame) -> tuple[list[dict[str, Any]], list[str]]:
    """The rubric regime: exact Bayes MSE of each pool prefix beside the fixed-k table's mean test MSE."""
    table = parts[parts["family"] == "table"]
    rows = []
    for k in sorted(table["k"].unique()):
        row = {"k": int(k), "bayes_mse": rubric_bayes_mse(int(k))}
        row |= {f"table_mse_B{b}": float(g["test_mse"].mean()) for b, g in table[table["k"] == k].groupby("budget")}
        rows.append(row)
    budgets = sorted(table["budget"].unique())
    lines = [
        "",
        "## Rubric regime: exact Bayes risk per prefix",
        "",
        "Bayes MSE = E[Y^2] - sum_z P(z) eta(z)^2 of the generator over all 6^k output patterns of the first k "
        "judges (the floor of any calibrator of that prefix); the table columns are the joint table at that k "
        "(mean test MSE over splits). The 1-5 rubric scores form a 6-symbol alphabet with err. The paper's "
        "rubric numbers (summary coherence) are not reproduced: no such dataset ships with the project.",
        "",
        *markdown_table(
            ["k", "Bayes MSE", *(f"table B={b}" for b in budgets)],
            [[r["k"], number(r["bayes_mse"], ".5f"), *(number(r[f"table_mse_B{b}"]) for b in budgets)] for r in rows],
        ),
    ]
    return rows, lines


def _sweep(config: Config, parts: pd.DataFrame, ratio: float) -> list[dict[str, Any]]:
    """Table 25: per interaction weight and budget, best scalar - table test MSE (paired over splits)."""
    out = []
    for weight, part in parts.groupby("interaction_weight", sort=True):
        table = _selected(part, "table").set_index(["budget", "seed"])["test_mse"]
        scalar = _selected(part, "scalar").set_index(["budget", "seed"])["test_mse"]
        bayes = _bayes_mse(config, float(weight))
        for budget in sorted(part["budget"].unique()):
            mean, low, high = t_interval(
                (scalar[budget] - table[budget]).to_numpy(), config.ci_level, ratio, "delta_test_mse"
            )
            out.append(
                {
                    "interaction_weight": float(weight),
                    "budget": int(budget),
                    "table_mse": float(table[budget].mean()),
                    "scalar_mse": float(scalar[budget].mean()),
                    "delta": mean,
                    "ci_low": low,
                    "ci_high": high,
                    "bayes_mse": bayes,
                }
            )
    return out


def _sweep_report(config: Config, sweep: list[dict[str, Any]]) -> list[str]:
    budgets = sorted({r["budget"] for r in sweep})
    lines = [
        "",
        "## Interaction-strength sweep",
        "",
        f"eta_w = (1 - w) eta_add + w eta_{str(config.data).removeprefix('synthetic:')}; entry = selected scalar MSE - "
        "selected table MSE, mean [paired CI] over splits (positive: the table wins). Bayes = exact "
        "E[eta (1 - eta)] of the generator (the floor of any calibrator's test MSE). The tables above are for "
        f"w = {config.interaction_weights[-1] if config.interaction_weights else 1.0}, the last weight listed.",
    ]
    cells = []
    for weight in sorted({r["interaction_weight"] for r in sweep}):
        rows = {r["budget"]: r for r in sweep if r["interaction_weight"] == weight}
        deltas = [interval(rows[b]["delta"], rows[b]["ci_low"], rows[b]["ci_high"], "+.4f") for b in budgets]
        cells.append([f"{weight:g}", *deltas, number(rows[budgets[0]]["bayes_mse"])])
    lines += ["", *markdown_table(["w", *(f"B={b}" for b in budgets), "Bayes MSE"], cells)]
    lines += [
        "",
        "Paper (budgets lost, increasing): w = 0: -0.024 .. +0.000; 0.3: -0.020 .. +0.012; 0.5: +0.046 .. "
        "+0.056; 0.7: +0.110 .. +0.135; 1.0: +0.171 .. +0.188. The paper's generator constants are lost; "
        "the expected shape is a gap that grows with w at every budget.",
    ]
    return lines


def _winners(records: list[dict[str, Any]], paired: list[dict[str, Any]]) -> list[dict[str, Any]]:
    union = {r["budget"]: r for r in records if r["menu"] == "union"}
    out = []
    for row in paired:
        winner = verdict(row)  # named only when the interval excludes 0
        decisive = winner != "no clear winner"
        u = union[row["budget"]]
        out.append(
            {
                "budget": row["budget"],
                "winner": winner,
                "ci_excludes_zero": bool(decisive),
                "union_family": u["selected_family"],
                "union_family_share": u["selected_family_share"],
            }
        )
    return out


def _figures(config: Config, parts: pd.DataFrame, paired: list[dict[str, Any]]) -> dict[str, bytes]:
    plt = pyplot()

    budgets = sorted(parts["budget"].unique())
    union = _selected(parts, "union")
    share = pd.crosstab(union["family"], union["budget"], normalize="columns").reindex(FAMILY_LADDER, fill_value=0)
    share = share.reindex(columns=budgets, fill_value=0)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.5, 4.2))
    values = share.to_numpy()
    heatmap(
        ax,
        values,
        list(FAMILY_LADDER),
        [str(b) for b in budgets],
        best=[(int(np.argmax(values[:, j])), j) for j in range(len(budgets))],
        best_label="most picked",
        fmt="{:.2f}",
        colorbar="share of splits selecting the family",
        xlabel="label budget B (calibration rows)",
        ylabel="family picked by the union menu",
        title="Which family the selector picks, per budget",
    )
    d = pd.DataFrame(paired)
    bx.errorbar(
        d["budget"], d["delta"], yerr=[d["delta"] - d["ci_low"], d["ci_high"] - d["delta"]], marker="o", capsize=3
    )
    bx.axhline(0, color="grey", lw=0.8)
    bx.set(
        xlabel="label budget B (calibration rows)",
        ylabel="scalar MSE - table MSE (< 0: scalar better)",
        title="Table vs scalar stacker (paired interval)",
    )
    plain_log_axis(bx, "x", budgets)
    figures = {"regime_map.png": png(fig, dpi=110, tight_layout=True)}

    table = parts[parts["family"] == "table"]
    paths = sorted(table["path"].unique())
    fig, axes = plt.subplots(1, len(paths), figsize=(4 * len(paths), 3.5), squeeze=False, sharey=True)
    for ax, path in zip(axes[0], paths, strict=True):
        risk = table[table["path"] == path].groupby(["budget", "k"])["test_mse"].mean().unstack("budget")
        for b in risk.columns:
            ax.plot(risk.index, risk[b], marker=".", label=f"B={b}")
        ax.set(title=f"joint table, judge order: {path}", xlabel="judges in the table (prefix k)", ylabel="test MSE")
    axes[0][0].legend(fontsize=7)
    figures["risk_vs_k.png"] = png(fig, dpi=110, tight_layout=True)

    fig, ax = plt.subplots(figsize=(5, 3.5))
    chosen = _selected(parts, "table").groupby("budget")["unseen_rate"].mean()
    ax.plot(chosen.index, chosen.to_numpy(), marker="o", label="selected table")
    kmax = table[table["k"] == table["k"].max()].groupby("budget")["unseen_rate"].mean()
    ax.plot(kmax.index, kmax.to_numpy(), marker="s", label=f"k = {int(table['k'].max())}")
    ax.set(
        xlabel="label budget B (calibration rows)",
        ylabel="share of test rows with an unseen pattern",
        title="Unseen vote patterns vs budget",
    )
    plain_log_axis(ax, "x", budgets)
    ax.legend()
    figures["unseen_rate.png"] = png(fig, dpi=110, tight_layout=True)
    return figures


def _report(
    config: Config,
    records: list[dict[str, Any]],
    paired: list[dict[str, Any]],
    winners: list,
    sweep: list[dict[str, Any]] | None = None,
) -> str:
    lines = [f"# FCPS regime map: {config.data}", ""]
    lines += [
        f"{config.replicates} grouped splits; budgets {list(config.budgets)}; paths {list(config.paths)}; "
        f"scalar families {list(config.families)}; alpha={config.alpha}, fallback={config.fallback}, "
        f"lambda={config.lam}, ridge lambda={config.ridge_lam}, logistic C={config.logistic_c}.",
        "",
    ]
    header = ["B", "menu", "path", "mean k", "family (share)", "test MSE [CI]", "S_eff/B", "seen term", "unseen", "C"]
    lines += markdown_table(
        header,
        [
            [r["budget"], r["menu"], r["selected_path"], number(r["selected_k"], ".2f")]
            + [f"{r['selected_family']} ({number(r['selected_family_share'], '.2f')})", row_interval(r, "test_mse")]
            + [number(r[k]) for k in ("support_per_label", "seen_term", "unseen_rate", "cell_pressure")]
            for r in records
        ],
    )
    lines += [
        "",
        "Columns: B = labelled calibration rows; menu = families the selector may pick (table only, scalar "
        "stackers only, or both); path = judge order; mean k = judges in the selected candidate; family (share) = "
        "the family picked most often and its share of splits; test MSE = squared error of the predicted probability "
        "on test rows; S_eff/B = effective support per label, exp(entropy of the calibration vote patterns) / B "
        "(well below 1: a table can afford its cells); seen term = sum over patterns seen in calibration of (test "
        "share / calibration rows), the variance a table pays; unseen = share of test rows whose pattern never "
        "occurred in calibration; C = cell pressure, seen term + unseen (docs/methods.md).",
        "",
        f"Intervals: {interval_note(config.ci_level, shared_items=not config.synthetic)}",
        "",
        "## Table vs scalar (delta = scalar MSE - table MSE, paired over splits)",
        "",
    ]
    lines += markdown_table(
        ["B", "delta", "CI", "winner", "union-menu family (share)"],
        [
            [p["budget"], number(p["delta"], "+.4f"), bracket(p["ci_low"], p["ci_high"], "+.4f"), w["winner"]]
            + [f"{w['union_family']} ({number(w['union_family_share'], '.2f')})"]
            for p, w in zip(paired, winners, strict=True)
        ],
    )
    counts = Counter(w["winner"] for w in winners)
    lines += [
        "",
        f"Of {len(winners)} budgets: scalar wins {counts['scalar']}, table wins {counts['table']}, "
        f"no clear winner (interval contains 0) {counts['no clear winner']}.",
        "",
        "Figures: `figures/regime_map.png`, `figures/risk_vs_k.png`, `figures/unseen_rate.png`.",
    ]
    if sweep:
        lines += _sweep_report(config, sweep)
    return "\n".join(lines) + "\n"


def summarise(config: Config, parts: pd.DataFrame, data: Any) -> StudyResult:
    """Records per (budget, menu), paired table-vs-scalar differences, the winners, figures and the report."""
    if parts.empty:
        raise RunError("regime_map: no replicate rows to summarise")
    singles = parts[parts["path"].str.startswith(SINGLE)]
    cold = parts[parts["path"].str.startswith(COLD)]
    grid = parts[parts["path"].str.startswith(ALPHA)]
    split_rows = parts[parts["path"].str.startswith(SPLIT)]
    parts = parts[~parts["path"].str.startswith((SINGLE, COLD, ALPHA, SPLIT))]
    sweep = None
    ratio = split_overlap_ratio(config, parts, data)
    if "interaction_weight" in parts:
        sweep = _sweep(config, parts, ratio)
        parts = parts[parts["interaction_weight"] == (config.interaction_weights or (1.0,))[-1]]
    records = _records(config, parts, ratio)
    paired = _table_vs_scalar(config, parts, ratio)
    winners = _winners(records, paired)
    extra = {"table_vs_scalar": paired, "winners": winners, "input": getattr(data, "info", None) or {}}
    if sweep is not None:
        extra["interaction_sweep"] = sweep
    further, lines, figures = extended(config, parts, singles, extra_menus(config))
    extra |= further
    extra["diagnostics"], diagnostic_lines = diagnostics_report(config, parts, data)
    lines += diagnostic_lines
    if config.schema == "scalar":
        skipped = ["the unsupervised jury menu (it models A/B votes)"] if config.jury else []
        if not config.synthetic and config.cfps:
            skipped.append("the calibration-frontier subsets (their pressure counts A/B/tie/error patterns)")
        if not config.synthetic and config.cold_start_sizes:
            skipped.append("the cold start (its prior is the pairwise one-coin model)")
        if config.synthetic and (config.decomposition or config.boundary_reps):
            skipped.append("the risk bookkeeping and the regime boundary (they assume a binary target)")
        if skipped:
            lines += ["", f"Not run on 1-5 rubric scores: {'; '.join(skipped)}."]
    if config.synthetic and config.schema == "scalar":
        extra["rubric_bayes"], bayes_lines = _rubric_bayes(config, parts)
        lines += bayes_lines
    if "selected_cfps" in parts:
        extra["cfps"], more = cfps_report(parts)
        lines += more
    if not cold.empty:
        extra["cold_start"], more = cold_start_report(config, cold)
        lines += more
    if not grid.empty:
        extra["alpha_grid"], more = alpha_report(grid)
        lines += more
    if not split_rows.empty:
        extra["split_variants"], more = variant_report(parts, split_rows)
        lines += more
    lines += paper_lines(config.synthetic, records, paired, extra)
    return StudyResult(
        records=records,
        summary=pd.DataFrame(records),
        report=_report(config, records, paired, winners, sweep) + "\n".join(lines) + "\n",
        figures=_figures(config, parts, paired) | figures,
        extra=extra,
        recommendation=recommend(config, records, paired),
    )
