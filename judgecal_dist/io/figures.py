"""Figures as PNG bytes: the one place that picks matplotlib's backend and renders a figure for a results store.

Reports hand the bytes to the store (``figures/*.png``), so no figure touches a local path or a display.
"""

from __future__ import annotations

import io
from typing import Any

__all__ = ["pyplot", "png"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported lazily: matplotlib is slow to import)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig: Any, *, dpi: float | None = None, tight_layout: bool = False) -> bytes:
    """Render ``fig`` as PNG bytes and close it (a closed figure frees its memory in long runs).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    dpi : float, optional
        Resolution; matplotlib's default (rcParams ``savefig.dpi``) when None.
    tight_layout : bool, default False
        Call ``fig.tight_layout()`` first.
    """
    if tight_layout:
        fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    return buf.getvalue()
