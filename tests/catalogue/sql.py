"""Catalogue cases: judgecal sql: read-only checks and statement handling."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

CASES: dict[str, Callable[[Path], list[str]]] = {}
