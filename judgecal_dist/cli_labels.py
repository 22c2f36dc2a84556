"""The labelling commands of ``judgecal``: ``label select``, ``label estimate`` and ``advise`` (registered on the
group in :mod:`.cli`).

Each command parses, calls one function of :mod:`judgecal_dist.labels` and prints; errors map to exit codes through
:func:`judgecal_dist.cli_common.guarded` like every other command.
"""

from __future__ import annotations

import click

from judgecal_dist.cli_common import guarded


@click.group()
def label() -> None:
    """Choose the next items to label (select) and estimate with the labels that came back (estimate)."""


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
    click.echo(f"{output.rstrip('/')}/report.md: run {chosen.get('panel')} at {chosen.get('cost_per_item')} per item")
