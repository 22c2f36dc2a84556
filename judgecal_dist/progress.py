"""Progress lines for long work: ``<label> done/total (pct) rate/s elapsed ETA``, one INFO line per update.

Used by the driver of every long stage (replicate fan-out, synthetic generation, scoring); tasks never report
progress. Quiet when short: an update is logged when at least ``every`` seconds passed since the last line, and
always at the end, so a step of a few seconds prints one line and a long one a line every ``every`` seconds.
"""

from __future__ import annotations

import logging
import time

__all__ = ["Progress"]

log = logging.getLogger(__name__)

#: Seconds between two progress lines of one step (the last line is always written).
EVERY = 10.0


class Progress:
    """One log line per update at most every ``every`` seconds, and the last: ``<label> done/total (pct) rate/s
    elapsed ETA``."""

    def __init__(self, total: int, label: str = "replicates", every: float = EVERY) -> None:
        self.total, self.label, self.done, self.every = total, label, 0, every
        self.start = time.perf_counter()
        self.logged = self.start

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.done < self.total and now - self.logged < self.every:
            return
        self.logged = now
        elapsed = now - self.start
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
