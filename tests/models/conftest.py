"""Every model the round-trip tests fit (each kind, each family) loads without a plausibility warning: a fit's own
export must never look implausible to its reader. A test that feeds implausible values on purpose takes the
``implausible_warnings`` list, checks it and empties it."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "plausible range" in record.getMessage():
            self.lines.append(record.getMessage())


@pytest.fixture(autouse=True)
def implausible_warnings() -> Iterator[list[str]]:
    """The plausibility warnings the test's model loads gave (none may be left at its end)."""
    logger = logging.getLogger("judgecal_dist.models.bounds")
    handler, level = _Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert not handler.lines, f"a fitted model loaded with plausibility warnings: {handler.lines[:3]}"
