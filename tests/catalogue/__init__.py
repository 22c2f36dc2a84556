"""Error-catalogue cases by area; each module holds ``CASES: dict[id, tmp_path -> argv]`` for its rows of docs/errors.md."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

AREAS = (
    "run",
    "settings",
    "score",
    "models",
    "correctors",
    "sql",
    "ingest",
    "drift",
    "serve",
    "degenerate",
    "advise",
    "labels",
)


def area_cases() -> dict[str, dict[str, Callable[[Path], list[str]]]]:
    """Every area module's ``CASES``, by area name."""
    return {area: importlib.import_module(f"tests.catalogue.{area}").CASES for area in AREAS}
