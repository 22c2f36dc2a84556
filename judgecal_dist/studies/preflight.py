"""Data-dependent checks a study makes before the runner writes anything (its ``preflight(config, data)`` hook).

Settings are checked when a config is parsed; some problems only show once the data is read: a panel with no A/B
verdict (every verdict null or a tie), a constant panel (every A/B verdict the same), too few labelled items, or
a calibration fraction so small that a planned split gets too few labelled items of a class. Each study's
``preflight`` calls these on what its ``load`` read, and :func:`judgecal_dist.studies.runner.execute` calls
``preflight`` after ``load`` and before the run folder is opened, so a refusal is one
:class:`~judgecal_dist.errors.InputError` line (exit 2) and nothing is written.

The split check draws the planned splits with the replicates' own split code (:mod:`judgecal_dist.splits`), so
it is exact: a run it passes gives every replicate the labelled items it asked for. Everything is vectorised over
the dense vote matrix and over blocks of seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from judgecal_dist.engine.jobs.panel import Panel
from judgecal_dist.engine.votes.tally import category_counts
from judgecal_dist.errors import InputError
from judgecal_dist.splits import calibration_mask

__all__ = ["check_votes", "check_vote_counts", "check_labels", "check_splits", "check_parts", "SEED_BLOCK"]

#: Seeds whose split masks are drawn at once (bounds the check's memory at SEED_BLOCK x items uniforms).
SEED_BLOCK = 16


def check_votes(panel: Panel, *, source: str) -> None:
    """Refuse a panel with no A/B verdict on a labelled item, or whose A/B verdicts are all the same.

    Parameters
    ----------
    panel : Panel
        The dense labelled panel (ties and nulls are missing votes).
    source : str
        The dataset URL, named in the message.

    Raises
    ------
    InputError
        ``<source>: verdicts: verdict: ...`` naming the counts and the fix.
    """
    votes = panel.votes
    counts = category_counts(votes)
    ties, nulls = panel.info.get("tie_verdicts_as_missing", 0), panel.info.get("null_verdicts", 0)
    check_vote_counts(
        counts,
        source=source,
        where=f"{panel.n_items} labelled items ({votes.size} item x judge cells: {ties} tie and {nulls} null "
        "verdicts, the rest absent)",
    )


def check_vote_counts(counts: Mapping[str, int], *, source: str, where: str) -> None:
    """Refuse votes (``counts``: category -> votes cast on labelled items) none of which was cast, or all of one
    category: a panel with nothing to calibrate, or a constant one that separates nothing.

    ``where`` describes the items and cells looked at, for the message.
    """
    cast = {name: n for name, n in counts.items() if n}
    named = "/".join(counts)
    if not cast:
        raise InputError(
            f"{source}: verdicts: verdict: no {named} verdict on any of the {where}; the panel has nothing to "
            "calibrate: check the verdict column of the source you ingested (and sample=)"
        )
    if len(cast) == 1:
        ((only, n),) = cast.items()
        raise InputError(
            f"{source}: verdicts: verdict: every one of the {n} {named} verdicts on labelled items is {only!r} (a "
            "constant panel: no judge separates the classes); check the verdict column of the source you ingested "
            "(a constant or mis-mapped column?)"
        )


def check_labels(labels: npt.NDArray[np.int8], *, need: int, source: str, study: str, why: str) -> None:
    """Refuse fewer than ``need`` labelled items of a class present in the study's labels.

    ``labels`` are the panel's binary labels (1 = A, 0 = B); a class absent altogether is the study's own check
    (one class is allowed under ``orientation=gold_positive``).
    """
    counts = category_counts(labels)
    short = {k: n for k, n in counts.items() if 0 < n < need}
    if short or len(labels) < need:
        raise InputError(
            f"{source}: labels: label: {len(labels)} labelled items ({counts['A']} A, {counts['B']} B); {study} "
            f"needs >= {need} of each class ({why}); label more items"
        )


def check_splits(
    group_keys: npt.NDArray[np.int64],
    labels: npt.NDArray[np.int8],
    seeds: Sequence[int],
    fraction: float,
    *,
    need_cal: int,
    need_eval: int,
    setting: str,
    source: str,
    why: str,
    need_cal_total: int = 0,
    need_cal_largest: int = 0,
) -> None:
    """Refuse when a planned split's calibration part holds fewer than ``need_cal`` labelled items of a class (or
    fewer than ``need_cal_total`` in all, or its larger class fewer than ``need_cal_largest``), or its evaluation
    part fewer than ``need_eval`` items.

    The splits are :func:`~judgecal_dist.splits.calibration_mask` of the replicates' seeds, exactly as the
    replicates draw them, in blocks of :data:`SEED_BLOCK` seeds.

    Parameters
    ----------
    group_keys, labels : ndarray
        The panel's per-item group keys and binary labels.
    seeds : sequence of int
        The planned replicates' seeds.
    fraction : float
        The calibration fraction (``setting``'s value).
    need_cal, need_eval : int
        Least labelled items of each class present in ``labels`` on the calibration side, and least items on the
        evaluation side.
    need_cal_total : int, default 0
        Least labelled items on the calibration side in all (e.g. the folds of cross-fitted calibration scores).
    need_cal_largest : int, default 0
        Least labelled items of the larger class on the calibration side (a stratified k-fold needs k there).
    setting : str
        The setting to name (``calib_fraction``).
    source : str
        The dataset URL.
    why : str
        What needs the items (e.g. ``"the calibrators need both classes"``).
    """
    classes = [c for c in (1, 0) if np.any(labels == c)]

    def counts(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        cal = np.stack([(mask & (labels == c)).sum(axis=1) for c in classes], axis=1)
        sides = [
            cal,
            cal.sum(axis=1, keepdims=True),
            cal.max(axis=1, keepdims=True),
            (~mask).sum(axis=1, keepdims=True),
        ]
        return np.concatenate(sides, axis=1)

    _first_short(
        group_keys,
        seeds,
        lambda keys, block: counts(calibration_mask(keys, block, fraction)),
        np.array([need_cal] * len(classes) + [need_cal_total, need_cal_largest, need_eval]),
        lambda seed, row: (
            f"{source}: {setting}={fraction:g}: split seed={seed} gets {_sides(classes, [*row[:-3], row[-1]])} "
            f"of its {len(labels)} labelled items (needs >= {need_cal} of each class"
            f"{f' and >= {need_cal_total} in all' if need_cal_total > need_cal * len(classes) else ''}"
            f"{f' and >= {need_cal_largest} of one class' if need_cal_largest > need_cal else ''} to calibrate "
            f"and >= {need_eval} to evaluate: {why}); raise {setting} or label more items"
        ),
    )


def check_parts(
    roles: npt.NDArray[np.integer],
    labels: npt.NDArray[np.int8],
    *,
    need: int,
    setting: str,
    value: int,
    source: str,
    why: str,
    need_largest: int = 0,
) -> None:
    """Refuse when a fold's training part (every other fold) holds fewer than ``need`` labelled items of a class
    present in ``labels`` (or its larger class fewer than ``need_largest``: a stratified k-fold needs k there);
    ``roles`` assigns each item its fold."""
    classes = [c for c in (1, 0) if np.any(labels == c)]
    for fold in np.unique(roles):
        held = roles == fold
        row = [int(np.count_nonzero(~held & (labels == c))) for c in classes]
        if min(row) < need or max(row) < need_largest:
            raise InputError(
                f"{source}: {setting}={value}: fold {int(fold)}'s training part gets {_sides(classes, [*row, int(held.sum())])} "
                f"of its {len(labels)} labelled items (needs >= {need} of each class"
                f"{f' and >= {need_largest} of one class' if need_largest > need else ''}: {why}); lower {setting} or "
                "label more items"
            )


def _sides(classes: list[int], row: Sequence[int]) -> str:
    named = ", ".join(f"{int(n)} {'A' if c == 1 else 'B'}" for c, n in zip(classes, row, strict=False))
    return f"{named} to calibrate and {int(row[-1])} to evaluate"


def _first_short(
    keys: npt.NDArray[np.int64],
    seeds: Sequence[int],
    count: Callable[[npt.NDArray[np.int64], list[int]], npt.NDArray[np.int64]],
    need: npt.NDArray[np.int64],
    message: Callable[[int, npt.NDArray[np.int64]], str],
) -> None:
    """Raise ``message(seed, counts)`` for the first seed whose counts fall short of ``need`` (blocks of seeds)."""
    seeds = list(seeds)
    for start in range(0, len(seeds), SEED_BLOCK):
        block = seeds[start : start + SEED_BLOCK]
        table = count(keys, block)
        short = np.flatnonzero((table < need).any(axis=1))
        if short.size:
            raise InputError(message(block[short[0]], table[short[0]]))
