"""The page ``judgecal advise`` writes: the answers first, then the evidence; its folder and commit.

Folder: ``report.md``, ``frontier.parquet``, ``escalation.parquet`` (where repeated samples were priced),
``figures/frontier.png``, ``advice.json``, the ``_JUDGECAL_ADVISE`` marker and ``_SUCCESS`` last. The folder is
advise's by the one ownership rule (:mod:`judgecal_dist.io.ownership`): a new or empty folder is claimed, a result
of the same inputs is left as it is, one of other inputs is refused unless ``--overwrite``.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend is chosen first (no display on a scheduler)
import pandas as pd  # noqa: E402

from judgecal_dist.history.store import write_bytes_atomic  # noqa: E402
from judgecal_dist.io.filesystem import open_fs  # noqa: E402
from judgecal_dist.io.ownership import Ownership  # noqa: E402
from judgecal_dist.io.records import to_json  # noqa: E402
from judgecal_dist.io.schema import SUCCESS  # noqa: E402

__all__ = ["OWNER", "render_markdown", "frontier_figure", "claim", "write_advice"]

MARKER, MARKER_FORMAT = "_JUDGECAL_ADVISE", "judgecal.advise-output/v1"
OWNER = Ownership(
    MARKER,
    MARKER_FORMAT,
    "advise",
    "--output",
    ("report.md", "frontier.parquet", "escalation.parquet", "advice.json", "figures/", SUCCESS),
)


def _interval(row: Mapping[str, Any], metric: str, spec: str = ".4f") -> str:
    return f"{row[metric]:{spec}} [{row[f'{metric}_ci_low']:{spec}}, {row[f'{metric}_ci_high']:{spec}}]"


def _answers(advice: Mapping[str, Any]) -> list[str]:
    chosen, best = advice["chosen"], advice["best"]
    lines = [
        "## What to run and buy",
        "",
        f"- **Run the panel `{chosen['panel']}`** ({chosen['n_judges']} judge(s)) at **{chosen['cost_per_item']:.6g} "
        f"per item**: cross-fitted NLL {_interval(chosen, 'nll')}, accuracy {_interval(chosen, 'accuracy')} "
        f"({advice['level']:.0%} intervals, {chosen['n_items']} labelled items).",
        f"- The lowest-NLL panel is `{best['panel']}` at {best['cost_per_item']:.6g} per item (NLL "
        f"{_interval(best, 'nll')}); the chosen one is the cheapest within one standard error of it.",
    ]
    for policy in advice["escalation"]:
        lines.append(
            f"- **Escalation ({policy['dataset']}, {policy['prompt_variant']})**: score with `{advice['cheap_tier']}` "
            f"and escalate a response to `{advice['full_tier']}` when the cheap tier's sample SD >= "
            f"{policy['theta']:.3g} ({policy['p_escalate']:.1%} of responses): **{policy['cost']:.6g} per example**, "
            f"accuracy {policy['accuracy']:.4f} (n = {policy['n']}), against {policy['cost_full']:.6g} for "
            f"`{advice['full_tier']}` alone with {policy['n_samples_full']} samples."
        )
    if not advice["escalation"]:
        lines.append(f"- Escalation: {advice['escalation_reason']}")
    need = advice.get("labels")
    if need:
        lines.append(
            f"- **Labels**: an accuracy interval of width {need['target_width']:.3g} for this panel needs about "
            f"{need['needed']} labelled items; **buy {need['to_buy']}** (now {need['have']}, width "
            f"{need['width_now']:.3g}; width scales as 1/sqrt(labels)). Below which label count the choice of "
            "pipeline itself changes is the budget study's question (`judgecal run budget`)."
        )
    else:
        lines.append("- Labels: no target width given (`--set target_width=0.05` says how many to buy for it).")
    return lines


def render_markdown(advice: Mapping[str, Any], frontier: pd.DataFrame) -> str:
    """The page: answers first, then the frontier table and figure, then how the numbers were made."""
    shown = frontier.sort_values(["cost_per_item", "nll"], kind="stable")
    table = [
        "| panel | judges | cost per item | NLL [interval] | accuracy [interval] | on frontier |",
        "|---|---:|---:|---|---|---|",
    ]
    for _, row in shown[shown["on_frontier"]].iterrows():
        table.append(
            f"| `{row['panel']}` | {row['n_judges']} | {row['cost_per_item']:.6g} | {_interval(row, 'nll')} | "
            f"{_interval(row, 'accuracy')} | yes |"
        )
    lines = [
        "# What to run and buy next week",
        "",
        f"Data: `{advice['data']}`; {advice['n_items']} labelled items, {advice['n_judges']} judges, "
        f"{len(frontier)} panels scored.",
        "",
        *_answers(advice),
        "",
        "## Evidence: the cost-quality frontier",
        "",
        f"Panels on the frontier (a panel is on it when no cheaper panel has a lower NLL); all {len(frontier)} in "
        "`frontier.parquet`.",
        "",
        *table,
        "",
        "![frontier](figures/frontier.png)",
        "",
        "## How these numbers were made",
        "",
        f"- Panels: found by the {advice['search']} search of the judges; each is one-coin + beta calibration; NLL and accuracy are cross-fitted over {advice['folds']} keyed "
        "folds (grouped items stay together): no item's loss uses its own label. Intervals are cluster-robust over "
        f"the {advice['chosen']['n_groups']} item groups (items of one group are not independent): a t interval for "
        "the NLL, a Wilson interval at the effective number of items for the accuracy.",
        "- Cost per item = the sum of the panel's judges' cost per call; " + advice["cost_source"],
        "- Escalation: hard variance routing swept over thresholds, priced as the ensemble study prices its "
        "tiers (input tokens once per call, output tokens per sample); the policy is the cheapest point of the "
        "cost-accuracy frontier whose accuracy reaches the lower end of the best point's interval. Its accuracy "
        "is per example (the chosen response strictly highest of four), the panels' per response pair: compare "
        "their costs, both per example, not their accuracies.",
        "",
    ]
    return "\n".join(lines)


def frontier_figure(frontier: pd.DataFrame, advice: Mapping[str, Any]) -> bytes:
    """NLL (with interval) against cost per item for every panel; frontier joined, the chosen panel marked."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    err = [frontier["nll"] - frontier["nll_ci_low"], frontier["nll_ci_high"] - frontier["nll"]]
    ax.errorbar(
        frontier["cost_per_item"], frontier["nll"], yerr=err, fmt="o", color="0.65", ms=4, lw=0.8, label="panel"
    )
    front = frontier[frontier["on_frontier"]].sort_values("cost_per_item")
    ax.plot(front["cost_per_item"], front["nll"], "-o", color="tab:blue", ms=5, label="frontier")
    chosen = advice["chosen"]
    ax.plot(chosen["cost_per_item"], chosen["nll"], "*", color="tab:red", ms=16, label=f"chosen: {chosen['panel']}")
    ax.set_xlabel(f"cost per item ({advice['cost_unit']})")
    ax.set_ylabel("cross-fitted NLL (nats per item, lower is better)")
    ax.set_title(
        f"Panels: NLL vs cost ({len(frontier)} panels, {advice['n_items']} labelled items, "
        f"{advice['level']:.0%} intervals)",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def claim(dest: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Refuse a folder holding files advise did not write; return its marker (None when new or empty)."""
    fs, root = open_fs(dest, dict(storage_options or {}))
    root = root.rstrip("/")
    if not fs.exists(root):
        return None
    files = [f[len(root) + 1 :] for f in fs.find(root)] if fs.isdir(root) else [root.rsplit("/", 1)[-1]]
    return OWNER.read(dest.rstrip("/"), files, lambda name: bytes(fs.cat_file(f"{root}/{name}")))


def _parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def write_advice(
    dest: str,
    marker: dict[str, Any] | None,
    inputs: Mapping[str, Any],
    parts: Mapping[str, Any],
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Write the folder: the marker first (listing old and new files), then the files, ``_SUCCESS`` last.

    ``parts`` maps file names to bytes, text or frames (Parquet). Files an earlier result of advise listed and
    this one does not write are removed; nothing else is.
    """
    fs, root = open_fs(dest, dict(storage_options or {}))
    root = root.rstrip("/")
    blobs = {
        name: _parquet(v) if isinstance(v, pd.DataFrame) else (v.encode() if isinstance(v, str) else v)
        for name, v in parts.items()
    }
    old = [f for f in (marker or {}).get("files", []) if f not in (MARKER,)]
    files = sorted({*blobs, *old, SUCCESS})
    write_bytes_atomic(fs, f"{root}/{MARKER}", to_json(OWNER.document(files)).encode())
    if fs.exists(f"{root}/{SUCCESS}"):
        fs.rm(f"{root}/{SUCCESS}")  # readers stop trusting the folder while it changes
    for name, blob in blobs.items():
        write_bytes_atomic(fs, f"{root}/{name}", blob)
    stale = [f for f in old if f not in blobs and f != SUCCESS and fs.exists(f"{root}/{f}")]
    if stale:
        fs.rm([f"{root}/{f}" for f in stale])
    files = sorted({*blobs, SUCCESS})
    write_bytes_atomic(fs, f"{root}/{MARKER}", to_json(OWNER.document(files, inputs=dict(inputs))).encode())
    write_bytes_atomic(fs, f"{root}/{SUCCESS}", b"")
