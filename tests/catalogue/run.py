"""Catalogue cases: run identity, run ids, resume and part checks, manifests, S3 buckets, secrets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

CASES: dict[str, Callable[[Path], list[str]]] = {}
