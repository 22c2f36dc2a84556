"""The labelling commands of ``judgecal``: ``label select``, ``label add``, ``label estimate`` and ``advise`` (registered on the
group in :mod:`.cli`).

Each command parses, calls one function of :mod:`judgecal_dist.labels` and prints; errors map to exit codes through
:func:`judgecal_dist.cli_common.guarded` like every other command.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from judgecal_dist.cli_common import conf_option, engine_option, guarded


@click.group()
def label() -> None:
    """Choose the next items to label (select), add the labels that came back (add), estimate with them (estimate)."""


@click.command()
@click.option("--data", "data_url", required=True, help="Ingested dataset (URL) with labelled items.")
@click.option("--output", required=True, help="Folder (URL) for report.md, frontier.parquet and the figure.")
@click.option(
    "--costs",
    "costs_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="YAML settings: costs (judge -> cost per call), prices (tier -> [input, output] $ per million tokens), "
    "target_width, folds, seed, level, cheap_tier, full_tier, max_judges.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A setting (repeatable; e.g. costs.judge_a=0.002, prices.mini=[0.75,4.5], target_width=0.05).",
)
@click.option("--overwrite", is_flag=True, help="Replace an advise result of other inputs in --output.")
@click.option("--conf", "conf_path", type=click.Path(exists=True, dir_okay=False), default=None, help="Engine YAML.")
@guarded
def advise(
    data_url: str,
    output: str,
    costs_file: str | None,
    overrides: tuple[str, ...],
    overwrite: bool,
    conf_path: str | None,
) -> None:
    """What to run and buy next week: the cost-quality frontier of panels, the escalation policy, labels to buy."""
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.labels.advise import advise as run_advise

    engine = load_engine_config(conf_path)
    advice = run_advise(
        data_url,
        output,
        settings_file=costs_file,
        overrides=overrides,
        overwrite=overwrite,
        storage_options=dict(engine.storage_options),
    )
    chosen = advice.get("chosen", {})
    cost = chosen.get("cost_per_item")
    priced = f"{cost:.6g}" if isinstance(cost, (int, float)) else cost
    click.echo(f"{output.rstrip('/')}/report.md: run {chosen.get('panel')} at {priced} per item")


@label.command("select")
@click.option(
    "--model", "model_url", required=True, help="A `judgecal fit` run folder (or model JSON) of a binary panel."
)
@click.option("--data", "data_url", required=True, help="Ingested dataset URL; its unlabelled items are candidates.")
@click.option("--budget", type=float, required=True, help="Expected number of labels (money with the two costs).")
@click.option(
    "--output", "output_url", required=True, help="Queue folder URL (queue.parquet, queue.csv, selection.json)."
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the draw (the same seed: the same items)."
)
@click.option(
    "--floor",
    type=float,
    default=0.2,
    show_default=True,
    help="Share of the budget drawn uniformly: every item's probability is at least floor*budget/items (1: uniform).",
)
@click.option("--strata", multiple=True, help="Stratify by this column (dataset or an items-table column); repeatable.")
@click.option(
    "--allocation",
    type=click.Choice(["neyman", "proportional"]),
    default="neyman",
    show_default=True,
    help="Split of the active share across strata: by their uncertainty (Neyman) or their sizes.",
)
@click.option(
    "--label-cost", type=float, default=None, help="Cost of one label (with --proxy-cost: --budget is money)."
)
@click.option("--proxy-cost", type=float, default=None, help="Cost of the panel on one item.")
@click.option("--previous", multiple=True, help="An earlier queue folder whose items are not drawn again; repeatable.")
@click.option("--sample", type=int, default=0, show_default=True, help="Verdict sample the panel scores.")
@engine_option
@conf_option
@guarded
def select(
    model_url: str,
    data_url: str,
    budget: float,
    output_url: str,
    seed: int,
    floor: float,
    strata: tuple[str, ...],
    allocation: str,
    label_cost: float | None,
    proxy_cost: float | None,
    previous: tuple[str, ...],
    sample: int,
    stats_engine: str | None,
    conf_path: Path | None,
) -> None:
    """Draw the next items to label where the calibrated panel is unsure (with a uniform floor, so estimates stay
    unbiased); print the counts and the queue folder.

    Items labelled in --data and items of earlier queues (--previous, and committed queues beside --output) are
    never drawn again. The same inputs again are "already complete".
    """
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.labels.select import Settings, select_items

    engine = load_engine_config(conf_path, {"stats_engine": stats_engine})
    settings = Settings(budget, seed, floor, strata, allocation, label_cost, proxy_cost, sample)
    record = select_items(model_url, data_url, output_url, settings, previous=previous, engine=engine)
    design = record["design"]
    summary = {"round": record["round"], "expected": round(design["expected_size"], 3)} | record["counts"]
    click.echo(json.dumps(summary | {"engine": record["engine"]}))
    click.echo(output_url)


@label.command("add")
@click.option("--data", "data_url", required=True, help="Ingested dataset URL whose labels table takes the labels.")
@click.option(
    "--labels",
    "labels_url",
    required=True,
    help="CSV, JSON lines or Parquet with item_id and label (A, B, tie or 1/0); dataset and label_score optional, "
    "other columns ignored: a label select queue.csv with its label column filled works as it is.",
)
@click.option(
    "--overwrite-labels", is_flag=True, help="Replace labels that differ from the ones present (else refused)."
)
@conf_option
@guarded
def add(data_url: str, labels_url: str, overwrite_labels: bool, conf_path: Path | None) -> None:
    """Add returned labels to the dataset's labels table (checked first, then swapped in whole); print the counts
    and the dataset.

    Blank labels are skipped (not back yet). Labels already present are unchanged; adding the same labels again
    writes nothing. Every later fit, score, label select or label estimate sees the dataset changed.
    """
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.labels.add import add_labels

    engine = load_engine_config(conf_path)
    summary = add_labels(
        data_url, labels_url, overwrite_labels=overwrite_labels, storage_options=dict(engine.storage_options)
    )
    click.echo(json.dumps(summary))
    if not summary["written"]:
        click.echo(f"{data_url}: every label of {labels_url} is present already; nothing written", err=True)
    click.echo(data_url)


@label.command("estimate")
@click.option(
    "--model", "model_url", required=True, help="A `judgecal fit` run folder (or model JSON) of a binary panel."
)
@click.option("--data", "data_url", required=True, help="Ingested dataset URL: its verdicts and the labels table.")
@click.option(
    "--queue",
    "queues",
    multiple=True,
    help="A `label select` queue folder whose labelled items use their inclusion probability; repeatable (rounds).",
)
@click.option(
    "--output", "output_url", required=True, help="Folder URL (estimates.parquet, report.md, estimates.json)."
)
@click.option(
    "--by",
    multiple=True,
    help="Win rate per value of this items-table column (or pair: model_a vs model_b); repeatable. Default: subset "
    "and pair where present.",
)
@click.option("--alpha", type=float, default=0.05, show_default=True, help="1 - confidence of the intervals.")
@click.option(
    "--method",
    type=click.Choice(["ppi++", "ppi", "classical"]),
    default="ppi++",
    show_default=True,
    help="Power-tuned PPI++, plain PPI, or the labels alone.",
)
@click.option("--sample", type=int, default=0, show_default=True, help="Verdict sample the panel scores.")
@engine_option
@click.option("--overwrite", is_flag=True, help="Replace an estimate of other inputs at --output.")
@conf_option
@guarded
def estimate(
    model_url: str,
    data_url: str,
    queues: tuple[str, ...],
    output_url: str,
    by: tuple[str, ...],
    alpha: float,
    method: str,
    sample: int,
    stats_engine: str | None,
    overwrite: bool,
    conf_path: Path | None,
) -> None:
    """Prediction-powered estimates of each judge's accuracy, the panel's accuracy and win rates (overall and per
    group), with the calibrated panel as the proxy; print the estimates and the output folder.

    Without --queue the labels are a uniform sample (PPI++; the model's calibration items are left out); with it,
    queued labels are weighted by their inclusion probability. The same inputs again are "already complete".
    """
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.labels.estimate import Settings, estimate_labels

    engine = load_engine_config(conf_path, {"stats_engine": stats_engine})
    settings = Settings(alpha=alpha, method=method, by=by or None, sample=sample)
    record = estimate_labels(
        model_url, data_url, output_url, settings, queues=queues, engine=engine, overwrite=overwrite
    )
    summary = {"targets": len(record["estimates"])} | record["counts"] | {"engine": record["engine"]}
    click.echo(json.dumps(summary))
    for row in record["estimates"]:
        numbers = "too few labels" if row["estimate"] is None else _estimate_line(row)
        click.echo(f"{row['target']}: {numbers}")
    click.echo(output_url)


def _estimate_line(row: dict) -> str:
    """``estimate [lower, upper] (n labels, m effective)`` of one row of estimates.parquet."""
    return (
        f"{row['estimate']:.4f} [{row['lower']:.4f}, {row['upper']:.4f}] ({row['n_labels']} labels, "
        f"{row['effective_labels']:.1f} effective)"
    )
