"""Catalogue cases: judgecal ingest: adapters and table folders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

CASES: dict[str, Callable[[Path], list[str]]] = {}
