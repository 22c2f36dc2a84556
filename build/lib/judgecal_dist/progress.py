"""Progress lines for long work: ``<label> done/total (pct) rate/s elapsed ETA``, one INFO line per update.

Used by the driver of every long stage (replicate fan-out, synthetic generation); tasks never report progress.
"""

from __future__ import annotations

import logging
import time

__all__ = ["Progress"]

log = logging.getLogger(__name__)


class Progress:
    """One log line per update: ``<label> done/total (pct) rate/s ETA s``."""

    def __init__(self, total: int, label: str = "replicates") -> None:
        self.total, self.label, self.done = total, label, 0
        self.start = time.perf_counter()

    def advance(self, n: int = 1) -> None:
        self.done += n
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else float("inf")
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        log.info(
            "%s %d/%d (%.0f%%) %.1f/s elapsed %.1fs ETA %.1fs",
            self.label,
            self.done,
            self.total,
            100.0 * self.done / max(self.total, 1),
            rate,
            elapsed,
            eta,
        )
