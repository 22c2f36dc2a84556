"""Keep freed heap memory in the process during allocation-heavy loops (glibc ``mallopt``).

glibc serves blocks above ``M_MMAP_THRESHOLD`` (128 KiB at start, adjusted upward dynamically) with fresh
``mmap`` pages and trims the heap top above ``M_TRIM_THRESHOLD``, so a loop that allocates and frees the same
few-hundred-KiB tensors thousands of times pays a page fault per 4 KiB page on every allocation. The flow's
training step is such a loop: measured on this machine, up to 267 minor page faults per drift evaluation at
1500 anchors; with the thresholds raised, none. What that buys depends on the machine's memory pressure
(``benchmarks/flow.py``, side by side): 1.3-1.5x on the training step while other jobs ran, no difference on a
quiet machine. Raising them keeps the process's peak heap resident instead of returning it to the OS between
steps, which is what a training task wants.

The setting is process-wide and only changes where glibc puts memory, never what a computation returns. On a
libc without ``mallopt`` (musl, macOS) :func:`retain_freed_memory` does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from collections.abc import Iterator

__all__ = ["retain_freed_memory"]

# <malloc.h>: the parameter numbers of mallopt(3), and glibc's documented defaults.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_DEFAULTS = {_M_TRIM_THRESHOLD: 128 * 1024, _M_MMAP_THRESHOLD: 128 * 1024}


def _mallopt():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def retain_freed_memory(limit_bytes: int = 1 << 30) -> Iterator[bool]:
    """Within the block, serve blocks up to ``limit_bytes`` from the heap and never trim it; yields whether the
    libc supports it. Afterwards the thresholds go back to glibc's defaults (static from then on)."""
    mallopt = _mallopt()
    if mallopt is None:
        yield False
        return
    mallopt(_M_MMAP_THRESHOLD, int(min(limit_bytes, 1 << 25)))  # glibc caps the mmap threshold at 32 MiB
    mallopt(_M_TRIM_THRESHOLD, int(limit_bytes))
    try:
        yield True
    finally:
        for param, value in _DEFAULTS.items():
            mallopt(param, value)
