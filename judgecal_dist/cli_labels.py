"""The labelling commands of ``judgecal``: ``label select``, ``label estimate`` and ``advise`` (registered on the
group in :mod:`.cli`).

Each command parses, calls one function of :mod:`judgecal_dist.labels` and prints; errors map to exit codes through
:func:`judgecal_dist.cli_common.guarded` like every other command.
"""

from __future__ import annotations

import click


@click.group()
def label() -> None:
    """Choose the next items to label (select) and estimate with the labels that came back (estimate)."""
