"""Catalogue cases: judgecal advise (costs and settings refused before anything is written)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from judgecal_dist.cli import cli


def _advise(tmp: Path, *sets: str) -> list[str]:
    data = tmp / "dataset"
    assert CliRunner().invoke(cli, ["generate", "--items", "40", "--judges", "3", str(data)]).exit_code == 0
    return ["advise", "--data", str(data), "--output", str(tmp / "advice"), *(a for s in sets for a in ("--set", s))]


_PRICED = ("costs.judge-000=1", "costs.judge-001=1", "costs.judge-002=1")

CASES: dict[str, Callable[[Path], list[str]]] = {
    "advise-unknown-judge": lambda t: _advise(t, *_PRICED, "costs.judge-9=1"),
    "advise-missing-cost": lambda t: _advise(t, "costs.judge-000=1"),
    "advise-negative-cost": lambda t: _advise(t, "costs.judge-000=-1", "costs.judge-001=1", "costs.judge-002=1"),
    "advise-unknown-setting": lambda t: _advise(t, *_PRICED, "budget=100"),
}
