"""The drift report: ``report.md`` (which judges changed and how, then the evidence), ``drift.json``, figures."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend is chosen first (no display on a scheduler)
import pandas as pd  # noqa: E402

from judgecal_dist.history.drift import Comparison  # noqa: E402
from judgecal_dist.history.judges import MEASURES  # noqa: E402
from judgecal_dist.history.store import write_bytes_atomic  # noqa: E402
from judgecal_dist.io.filesystem import open_fs  # noqa: E402
from judgecal_dist.io.ownership import Ownership, refuse_output_inside  # noqa: E402
from judgecal_dist.io.records import to_json  # noqa: E402

__all__ = [
    "MARKER",
    "drift_document",
    "render_markdown",
    "judge_figure",
    "figure_name",
    "check_report_folder",
    "report_inputs",
    "write_drift_report",
]

#: The marker file that makes a report folder drift's own (as ``_JUDGECAL_SCORE`` does for score), and its format.
MARKER, MARKER_FORMAT = "_JUDGECAL_DRIFT", "judgecal.drift-report/v1"
OWNER = Ownership(MARKER, MARKER_FORMAT, "drift", "--report", ("figures/", "drift.json", "report.md"))
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def drift_document(comparison: Comparison) -> dict[str, Any]:
    """``drift.json``: the runs compared, settings, flags (judge, measure, kind, change, interval, p-values)."""
    flagged = comparison.flagged
    return {
        "study": comparison.study,
        "current": comparison.current,
        "baseline": comparison.baseline,
        "raised": comparison.raised,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(comparison.settings).items()},
        "flags": flagged.drop(columns=["flag"]).to_dict("records") if len(flagged) else [],
        "new_judges": comparison.new_judges,
        "vanished_judges": comparison.vanished_judges,
        "changes": comparison.changes.to_dict("records"),
        "panel": comparison.panel.to_dict("records"),
    }


def _fmt_change(row: Mapping[str, Any]) -> str:
    return (
        f"{row['baseline']:.3f} -> {row['current']:.3f} ({row['change']:+.3f}, CI [{row['change_ci_low']:+.3f}, "
        f"{row['change_ci_high']:+.3f}]; n {int(row['n_baseline'])} -> {int(row['n_current'])}; "
        f"adjusted p {row['p_adjusted']:.2g})"
    )


def render_markdown(comparison: Comparison, figures: Mapping[str, str]) -> str:
    """The report: the answer first (which judges changed and how), then the evidence."""
    c, s = comparison, comparison.settings
    lines = [f"# Judge drift: {c.study}, run {c.current}", ""]
    if not c.baseline:
        lines += ["No baseline: this is the first succeeded run in the history, so nothing is compared.", ""]
    elif not c.raised:
        lines += [f"**No judge changed** against {_baseline_text(c)} (no flag at {s.method} level {s.alpha}).", ""]
    else:
        lines += [f"**Changed against {_baseline_text(c)}:**", ""]
        # Agreement is measured against the other judges' majority, so one judge's change can move another's
        # agreement: a flag on agreement alone, beside a judge flagged on its own measures, says so.
        own = c.flagged[c.flagged["measure"] != "agreement"]
        for judge, rows in c.flagged.groupby("judge_id", sort=True):
            kinds = "; ".join(f"{r['kind']}: {_fmt_change(r)}" for r in rows.to_dict("records"))
            others = sorted(set(own["judge_id"]) - {judge})
            if set(rows["measure"]) == {"agreement"} and others:
                kinds += f" (agreement only: may follow the change of {', '.join(f'`{o}`' for o in others)})"
            lines.append(f"- `{judge}`: {kinds}")
        lines += [f"- `{j}`: new judge (absent from the baseline)" for j in c.new_judges]
        lines += [f"- `{j}`: vanished (in the baseline, absent now)" for j in c.vanished_judges]
        if len(c.new_judges) == 1 and len(c.vanished_judges) == 1:
            lines.append(f"- possibly renamed: `{c.vanished_judges[0]}` -> `{c.new_judges[0]}`")
        lines.append("")
    lines += [
        "## Method",
        "",
        f"Per judge and measure ({', '.join(s.measures)}), the change of a proportion between the baseline (counts "
        f"pooled over its runs) and the current run, with a {s.ci_level:.0%} Newcombe interval and a two-sided score "
        f"test; p-values adjusted across all {len(c.changes)} judge x measure tests ({s.method}); a flag needs an "
        f"adjusted p <= {s.alpha} and a change of at least {s.min_change}.",
        "",
    ]
    if figures:
        lines += ["## Flagged judges over the runs", ""]
        lines += [f"![{judge}]({path})" for judge, path in figures.items()] + [""]
    if not c.changes.empty:
        cols = ["judge_id", "measure", "baseline", "current", "change", "change_ci_low", "change_ci_high"]
        cols += ["n_baseline", "n_current", "p_adjusted", "flag"]
        lines += ["## Every comparison", "", _block(c.changes[cols]), ""]
    if not c.panel.empty:
        lines += ["## The panel's calibrated NLL / ECE (evidence, not flagged)", ""]
        lines += [_block(c.panel), ""]
    return "\n".join(lines)


def _block(table: pd.DataFrame) -> str:
    """A table as a fixed-width code block (no tabulate dependency for one report)."""
    return "```\n" + table.to_string(index=False, float_format=lambda v: f"{v:.4g}") + "\n```"


def _baseline_text(c: Comparison) -> str:
    return f"run {c.baseline[0]}" if len(c.baseline) == 1 else f"the {len(c.baseline)} runs before it (pooled)"


def judge_figure(
    history: pd.DataFrame, judge: str, flagged: set[str], current: str, baseline: list[str], measures: list[str]
) -> bytes:
    """PNG: one panel per measure of ``judge`` over the runs, Wilson intervals, baseline shaded, flags marked."""
    rows = history[history["judge_id"] == judge].sort_values(["recorded_at", "run_id"], kind="stable")
    size = (max(6.0, 0.5 * len(rows) + 3), 2.2 * len(measures))
    fig, axes = plt.subplots(len(measures), 1, figsize=size, sharex=True)
    axes = [axes] if len(measures) == 1 else list(axes)
    x = range(len(rows))
    for ax, measure in zip(axes, measures, strict=True):
        den = rows[MEASURES[measure][1]]
        err = [rows[measure] - rows[f"{measure}_ci_low"], rows[f"{measure}_ci_high"] - rows[measure]]
        ax.errorbar(x, rows[measure], yerr=err, fmt="o-", ms=3, capsize=2, label="per run (95% Wilson CI)")
        at = [i for i, run in enumerate(rows["run_id"]) if run == current]
        base = [i for i, run in enumerate(rows["run_id"]) if run in baseline]
        if base:
            ax.axvspan(min(base) - 0.4, max(base) + 0.4, color="0.9", label="baseline")
        if measure in flagged and at:
            ax.plot(at, rows[measure].iloc[at], "s", color="red", ms=9, mfc="none", label="flagged")
        ax.set_ylabel(measure)
        ax.set_title(f"{measure} (n per run {int(den.min())}-{int(den.max())})", fontsize=9)
        ax.legend(fontsize=7, loc="best")
    axes[-1].set_xticks(list(x), rows["run_id"], rotation=45, ha="right", fontsize=7)
    axes[-1].set_xlabel("run (oldest first)")
    fig.suptitle(f"{judge}: measures over the runs (current {current})")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def figure_name(judge: str) -> str:
    """A file name for ``judge``'s figure: a safe slug of the id plus a short hash of it.

    Judge ids come from data (``../../x`` is a legal id), so they never become paths as they are; the hash keeps
    two ids with the same slug apart.
    """
    slug = _UNSAFE.sub("_", judge).strip("._")[:60] or "judge"
    return f"{slug}-{hashlib.sha256(judge.encode('utf-8')).hexdigest()[:8]}.png"


def _claim(fs: Any, root: str, dest: str) -> dict[str, Any] | None:
    """Refuse a report folder that holds files drift did not write; return its marker (None when new or empty)."""
    if not fs.exists(root):
        return None
    files = [f[len(root) + 1 :] for f in fs.find(root)] if fs.isdir(root) else [root.rsplit("/", 1)[-1]]
    return OWNER.read(dest.rstrip("/"), files, lambda name: bytes(fs.cat_file(f"{root}/{name}")))


def report_inputs(comparison: Comparison, document: bytes) -> dict[str, Any]:
    """What a report is of: the study, the runs compared, the settings, and a fingerprint of the compared counts
    (``drift.json``'s bytes: every judge x measure count of the current and baseline runs)."""
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in vars(comparison.settings).items()}
    return {
        "study": comparison.study,
        "current": comparison.current,
        "baseline": list(comparison.baseline),
        "settings": settings,
        "compared_sha256": hashlib.sha256(document).hexdigest(),
    }


def check_report_folder(dest: str, output: str, *, storage_options: Mapping[str, Any] | None = None) -> None:
    """Refuse ``dest`` inside the history of ``output`` (the results root) or unless it is new, empty or a report
    folder drift wrote (nothing is read or written else)."""
    refuse_output_inside(dest, "--report", {"the history": f"{output.rstrip('/')}/history"})
    fs, root = open_fs(dest, dict(storage_options or {}))
    _claim(fs, root.rstrip("/"), dest)


def write_drift_report(
    comparison: Comparison,
    dest: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> str:
    """Write ``report.md``, ``drift.json`` and ``figures/<judge>-<hash>.png`` (flagged judges) under ``dest``.

    ``dest`` must be new, empty or a report folder drift wrote (its ``_JUDGECAL_DRIFT`` marker); anything else is
    refused before a byte is written. A finished report of the same comparison (:func:`report_inputs`) is left
    as it is ("already complete"); one of another comparison is refused unless ``overwrite``, which replaces only
    the files its marker lists (the rule of :mod:`judgecal_dist.io.ownership`). Returns ``dest``.
    """
    options = dict(storage_options or {})
    fs, root = open_fs(dest, options)
    root = root.rstrip("/")
    marker = _claim(fs, root, dest)
    document = to_json(drift_document(comparison)).encode()
    inputs = report_inputs(comparison, document)
    found = marker.get("inputs") if marker else None  # None: a report being written (or an older judgecal's)
    if OWNER.reuse(dest.rstrip("/"), found, inputs, committed=True, overwrite=overwrite):
        return dest
    # Only the figures it lists are removed on a rewrite (the marker read refused any path out of the folder).
    old_figures = [f for f in marker["files"] if f.startswith("figures/")] if marker else []
    pngs: dict[str, bytes] = {}
    figures: dict[str, str] = {}
    if len(comparison.flagged):
        measures = list(comparison.settings.measures)
        for judge, rows in comparison.flagged.groupby("judge_id", sort=True):
            pngs[f"figures/{figure_name(str(judge))}"] = judge_figure(
                comparison.series, str(judge), set(rows["measure"]), comparison.current, comparison.baseline, measures
            )
            figures[str(judge)] = f"figures/{figure_name(str(judge))}"
    files = sorted({*pngs, *old_figures, "drift.json", "report.md"})
    # The marker first, listing old and new files, so a crash part-way leaves a folder a rerun may rewrite.
    write_bytes_atomic(fs, f"{root}/{MARKER}", to_json(OWNER.document(files)).encode())
    for name, png in pngs.items():
        write_bytes_atomic(fs, f"{root}/{name}", png)
    write_bytes_atomic(fs, f"{root}/drift.json", document)
    write_bytes_atomic(fs, f"{root}/report.md", render_markdown(comparison, figures).encode())
    stale = [f for f in old_figures if f not in pngs and fs.exists(f"{root}/{f}")]
    if stale:
        fs.rm([f"{root}/{f}" for f in stale])
    files = sorted({*pngs, "drift.json", "report.md"})
    # Finished: the marker records what the report is of, so a rerun of the same comparison writes nothing.
    write_bytes_atomic(fs, f"{root}/{MARKER}", to_json(OWNER.document(files, inputs=inputs)).encode())
    return dest
