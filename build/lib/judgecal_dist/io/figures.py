"""Figures as PNG bytes: the one place that picks matplotlib's backend and renders a figure for a results store,
and the conventions every study's figures share (fixed colours per method, plain log ticks, labelled heat maps).

Reports hand the bytes to the store (``figures/*.png``), so no figure touches a local path or a display.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["pyplot", "png", "colours", "plain_log_axis", "heatmap"]


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


def colours(names: Iterable[str]) -> dict[str, Any]:
    """One fixed colour per name (matplotlib's ``tab10``, then ``tab20``), by position in ``names``.

    Pass a study's full, ordered list of methods (not the ones one panel happens to show), so a method keeps its
    colour in every panel and every figure of the study.
    """
    from matplotlib import colormaps

    names = list(dict.fromkeys(names))
    palette = colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {name: palette(i % palette.N) for i, name in enumerate(names)}


def plain_log_axis(ax: Any, axis: str = "x", ticks: Iterable[float] | None = None) -> None:
    """Log scale on ``axis`` with ticks written as plain numbers (``60``, ``0.3``), never ``6x10^1``.

    ``ticks``: the values to mark (e.g. the budgets a study ran); otherwise about five round values inside the
    plotted range (call it after plotting), so a range narrower than a decade still has labelled ticks.
    """
    import math

    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter, NullLocator

    limits = getattr(ax, f"get_{axis}lim")()
    getattr(ax, f"set_{axis}scale")("log")
    target = getattr(ax, f"{axis}axis")
    if ticks is None:  # round values spread evenly on the log scale: 0.3, 0.5, 0.7, 1, 1.5, 2, 3, ...
        low, high = sorted(limits)
        low = max(low, high * 1e-12)
        decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
        ticks = sorted(float(f"{m * 10.0**e:.12g}") for e in decades for m in (1, 1.5, 2, 3, 5, 7))
        ticks = [t for t in ticks if low <= t <= high]
        while len(ticks) > 7:
            ticks = ticks[::2]
        if len(ticks) < 3:  # a narrow range (0.28 to 0.37): evenly spaced round values instead
            ticks = [t for t in MaxNLocator(4).tick_values(low, high) if low <= t <= high and t > 0]
    target.set_ticks(sorted(set(ticks)))
    target.set_minor_locator(NullLocator())
    target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    target.set_minor_formatter(NullFormatter())


def heatmap(
    ax: Any,
    values: Any,
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    best: Iterable[tuple[int, int]] = (),
    best_label: str = "best",
    fmt: str = "{:.3f}",
    cmap: str = "viridis",
    norm: Any = None,
    colorbar: str,
    xlabel: str,
    ylabel: str,
    title: str,
) -> None:
    """A labelled heat map: every cell's value written in a colour readable on it, the ``best`` cells outlined
    and in bold, axis titles and a labelled colour bar.

    Parameters
    ----------
    values : array-like of shape (len(rows), len(columns))
        NaN cells stay blank.
    best : iterable of (row, column)
        Cells to mark (e.g. the lowest NLL, or the most selected family per budget), written ``best_label``.
    norm : matplotlib Normalize, optional
        E.g. ``LogNorm`` for a metric spanning orders of magnitude; the colour bar then keeps the metric's units.
    """
    import numpy as np
    from matplotlib.patches import Rectangle

    data = np.asarray(values, dtype=float)
    image = ax.imshow(data, cmap=cmap, norm=norm, aspect="auto")
    ax.set_xticks(range(len(columns)), list(columns))
    ax.set_yticks(range(len(rows)), list(rows))
    marked = set(best)
    for (i, j), value in np.ndenumerate(data):
        if not np.isfinite(value):
            continue
        red, green, blue, _ = image.to_rgba(value)
        light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
        ax.text(
            j,
            i,
            fmt.format(value) + (f"\n{best_label}" if (i, j) in marked else ""),
            ha="center",
            va="center",
            fontsize=8,
            color="black" if light else "white",
            fontweight="bold" if (i, j) in marked else "normal",
        )
    for i, j in marked:
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", lw=2.5))
    bar = ax.figure.colorbar(image, ax=ax, label=colorbar)
    if norm is not None:  # a log colour scale keeps plain tick labels
        from matplotlib.ticker import FuncFormatter

        for formatter in (bar.ax.yaxis.set_major_formatter, bar.ax.yaxis.set_minor_formatter):
            formatter(FuncFormatter(lambda value, _: f"{value:.3g}"))
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
