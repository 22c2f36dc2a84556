"""Catalogue cases: study and engine settings validated before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

CASES: dict[str, Callable[[Path], list[str]]] = {}
