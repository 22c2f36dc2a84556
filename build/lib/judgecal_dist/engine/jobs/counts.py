"""The numpy kernels behind every sufficient-statistics job, shared by the Spark and the in-memory paths.

Both engines reduce their input to the same small integer arrays per row (judge index, label code, verdict
code, group key; or joint pattern, label code, group key) and call the functions here: Spark inside one
``mapInArrow`` per job (:func:`judge_cell_partition`, :func:`pattern_partition`), the in-memory path over the
whole table (:func:`judge_cell_tensor`, :func:`pattern_tensor`). Only the final ``sum`` over partitions differs,
so the two paths are equal exactly.

Codes follow :data:`judgecal_dist.io.schema.VERDICT_CODES` (``B`` = 0, ``A`` = 1, ``tie`` = 2); a null verdict
is :data:`~judgecal_dist.io.schema.MISSING_CODE` (-1) and a category outside the alphabet is
:data:`~judgecal_dist.io.schema.UNKNOWN_CODE` (-2), which the kernels reject.

Replicates are computed all at once: rows are first summed per (group key, cell), then the calibration
membership of every group for every seed (:func:`judgecal_dist.splits.calibration_mask`) is multiplied into
that sparse matrix. Evaluation counts are the totals minus the calibration counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Literal, overload

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import scipy.sparse as sp

from judgecal_dist.engine.votes.codec import MAX_VERDICT_PATTERN_JUDGES
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.schema import MISSING_CODE, UNKNOWN_CODE, VERDICT_CATEGORIES, VERDICT_CODES
from judgecal_dist.splits import calibration_mask

__all__ = [
    "UNKNOWN_CODE",
    "SIDES",
    "N_LABELS",
    "N_VERDICT_SLOTS",
    "MISSING_SYMBOL",
    "MAX_VERDICT_PATTERN_JUDGES",
    "JUDGE_CELLS_DDL",
    "pattern_ddl",
    "check_replicates",
    "check_pattern_judges",
    "CELLS_PER_JUDGE",
    "cell_codes",
    "cell_tensor",
    "judge_cell_tensor",
    "judge_cell_partition",
    "judge_cell_batch",
    "decode_judge_cells",
    "pattern_tensor",
    "pattern_partition",
    "pattern_batch",
    "expand_prefixes",
    "BLOCK_COLUMNS",
    "check_blocks",
    "block_pattern_cells",
    "BLOCK_STATS",
]

#: Side names, indexed by the side code of the count tensors.
SIDES: tuple[str, str] = ("calibration", "evaluation")
N_LABELS = len(VERDICT_CODES)
#: Verdict slots: the category codes plus one slot (the last) for a missing verdict.
N_VERDICT_SLOTS = N_LABELS + 1
#: Cells per judge in the flat cell index: label x verdict slot.
CELLS_PER_JUDGE = N_LABELS * N_VERDICT_SLOTS
#: Symbol of a missing verdict in a joint pattern string.
MISSING_SYMBOL = "-"

_NAMES = np.array(sorted(VERDICT_CODES, key=VERDICT_CODES.__getitem__) + [None], dtype=object)  # code -> name
_SYMBOLS = [str(name) for name in _NAMES[:-1]] + [MISSING_SYMBOL]
#: Rows per kernel chunk scale with the replicate count so that the (R x groups) membership matrix stays near 100 MB.
_MEMBERSHIP_ENTRIES = 25_000_000

JUDGE_CELLS_DDL = "replicate long, side byte, judge_idx int, label byte, verdict byte, n long"


def pattern_ddl(with_replicates: bool) -> str:
    """DDL schema of :func:`pattern_partition`'s batches."""
    head = "replicate long, side byte, " if with_replicates else ""
    return head + "pattern long, n long, label_sum long, n_labelled long"


@overload
def check_replicates(
    seeds: Sequence[int] | None, fraction: float | None, *, required: Literal[True] = True
) -> list[int]: ...


@overload
def check_replicates(seeds: Sequence[int] | None, fraction: float | None, *, required: bool) -> list[int] | None: ...


def check_replicates(seeds: Sequence[int] | None, fraction: float | None, *, required: bool = True) -> list[int] | None:
    """Validate replicate arguments: distinct non-negative integer seeds and a fraction in (0, 1).

    Returns the seeds as a list of int (None when both are None and ``required`` is False).

    Raises
    ------
    ConfigError
        Missing, negative or repeated seeds, or a fraction outside (0, 1).
    """
    if seeds is None and fraction is None and not required:
        return None
    if seeds is None or fraction is None:
        raise ConfigError(f"seeds, fraction: give both or neither (got seeds={seeds!r}, fraction={fraction!r})")
    values = [int(s) for s in seeds]
    if not values:
        raise ConfigError("seeds: at least one replicate seed is required")
    if any(s < 0 for s in values) or len(set(values)) != len(values):
        raise ConfigError(f"seeds: must be distinct non-negative integers, got {values[:10]}")
    if not 0.0 < float(fraction) < 1.0:
        raise ConfigError(f"fraction: must be in (0, 1), got {fraction!r}")
    return values


def check_pattern_judges(judges: Sequence[str]) -> list[str]:
    """Validate the ordered judge list of a joint pattern (1 to 31 distinct judge ids)."""
    if isinstance(judges, str):
        raise ConfigError(f"judges: a sequence of judge ids is required, got the string {judges!r}")
    values = [str(j) for j in judges]
    if not values or len(values) > MAX_VERDICT_PATTERN_JUDGES or len(set(values)) != len(values):
        raise ConfigError(
            f"judges: must be 1 to {MAX_VERDICT_PATTERN_JUDGES} distinct judge ids, got {len(values)} ({values[:5]}...)"
        )
    return values


def _check_codes(codes: npt.NDArray[np.integer], *, table: str, column: str, allow_missing: bool) -> None:
    low = MISSING_CODE if allow_missing else 0
    bad = (codes < low) | (codes >= N_LABELS)
    if bad.any():
        raise InputError(
            f"{table}: {column}: {int(bad.sum())} rows with a category outside {VERDICT_CATEGORIES}"
            + ("" if allow_missing else " (nulls must be filtered before counting)")
        )


def _chunk_rows(n_seeds: int) -> int:
    return max(4096, _MEMBERSHIP_ENTRIES // max(n_seeds, 1))


def _chunks(n_rows: int, n_seeds: int) -> Iterator[slice]:
    step = _chunk_rows(n_seeds)
    for start in range(0, max(n_rows, 1), step):
        yield slice(start, min(start + step, n_rows))


def _calibration_sums(
    cell: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float64] | None,
    group_key: npt.NDArray[np.int64],
    n_cells: int,
    seeds: Sequence[int],
    fraction: float,
) -> npt.NDArray[np.int64]:
    """``out[r, c] = sum of weights of rows in cell c whose group is in the calibration part of seeds[r]``."""
    group_index, groups = pd.factorize(group_key, sort=False)
    member = calibration_mask(groups, seeds, fraction).astype(np.float64)  # (R, G)
    data = np.ones(len(cell)) if weights is None else weights
    # Rows summed per (cell, group): a sparse (cells x groups) matrix; its product with the membership matrix
    # gives every replicate at once. Entries are integers far below 2**53, so float64 sums are exact.
    by_group = sp.csr_matrix((data, (cell, group_index)), shape=(n_cells, len(groups)))
    return np.rint(by_group @ member.T).astype(np.int64).T


def judge_cell_tensor(
    judge_idx: npt.ArrayLike,
    label_code: npt.ArrayLike,
    verdict_code: npt.ArrayLike,
    group_key: npt.ArrayLike,
    *,
    seeds: Sequence[int],
    fraction: float,
    n_judges: int,
) -> npt.NDArray[np.int64]:
    """Per-judge cell counts of every replicate: ``n[r, side, j, label, verdict_slot]``.

    .. math:: N_{r,s,j}[y, v] = \\#\\{\\text{rows } i : \\mathrm{side}_r(g_i) = s,\\ j_i = j,\\ Y_i = y,\\ V_i = v\\}

    Parameters
    ----------
    judge_idx : array of int
        Judge index of each row, in ``[0, n_judges)``.
    label_code : array of int
        Label code of each row (0 = B, 1 = A, 2 = tie); unlabelled rows must be filtered out first.
    verdict_code : array of int
        Verdict code of each row; -1 = missing.
    group_key : array of int64
        ``xxhash64(group_id)`` of each row (:func:`judgecal_dist.splits.group_keys`).
    seeds : sequence of int
        Replicate seeds.
    fraction : float
        Calibration fraction in (0, 1).
    n_judges : int
        Number of judges (size of the judge axis).

    Returns
    -------
    ndarray of int64, shape (len(seeds), 2, n_judges, 3, 4)
        Side 0 = calibration, 1 = evaluation; verdict slot 3 = missing.

    Raises
    ------
    InputError
        A label or verdict code outside the alphabet.

    Notes
    -----
    Cost: one hash factorisation of the group keys, ``R x groups`` split uniforms and one sparse-dense product
    with ``rows x R`` multiply-adds, in chunks whose membership matrix stays near 100 MB.

    Examples
    --------
    >>> n = judge_cell_tensor([0, 0, 1], [1, 1, 0], [1, -1, 0], [7, 8, 7], seeds=[0, 1], fraction=0.5, n_judges=2)
    >>> n.shape, int(n.sum()), n[:, :, 0, 1, 1].sum(axis=1).tolist()
    ((2, 2, 2, 3, 4), 6, [1, 1])
    """
    cell = cell_codes(judge_idx, label_code, verdict_code, n_judges=n_judges)
    return cell_tensor(cell, group_key, seeds=seeds, fraction=fraction, n_judges=n_judges)


def cell_codes(
    judge_idx: npt.ArrayLike, label_code: npt.ArrayLike, verdict_code: npt.ArrayLike, *, n_judges: int
) -> npt.NDArray[np.int64]:
    """Flat cell index ``judge * 12 + label * 4 + verdict_slot`` of each row (slot 3 = missing verdict).

    The Spark path computes the same index in the JVM (:data:`CELLS_PER_JUDGE`, :data:`N_VERDICT_SLOTS`).

    Raises
    ------
    InputError
        A label or verdict code outside the alphabet, or a judge index outside ``[0, n_judges)``.
    """
    judges = np.asarray(judge_idx, dtype=np.int64)
    labels = np.asarray(label_code, dtype=np.int64)
    verdicts = np.asarray(verdict_code, dtype=np.int64)
    _check_codes(labels, table="labels", column="label", allow_missing=False)
    _check_codes(verdicts, table="verdicts", column="verdict", allow_missing=True)
    if judges.size and (judges.min() < 0 or judges.max() >= n_judges):
        raise InputError(f"verdicts: judge_id: index outside the judge list of {n_judges} judges")
    slot = np.where(verdicts == MISSING_CODE, N_LABELS, verdicts)
    return judges * CELLS_PER_JUDGE + labels * N_VERDICT_SLOTS + slot


def cell_tensor(
    cell: npt.ArrayLike, group_key: npt.ArrayLike, *, seeds: Sequence[int], fraction: float, n_judges: int
) -> npt.NDArray[np.int64]:
    """:func:`judge_cell_tensor` from flat cell indices (:func:`cell_codes`) and group keys."""
    cell = np.asarray(cell, dtype=np.int64)
    keys = np.asarray(group_key, dtype=np.int64)
    n_cells = n_judges * CELLS_PER_JUDGE
    if cell.size and (cell.min() < 0 or cell.max() >= n_cells):
        raise InputError(f"verdicts: cell index outside [0, {n_cells}) for {n_judges} judges")
    total = np.bincount(cell, minlength=n_cells)
    calibration = np.zeros((len(seeds), n_cells), dtype=np.int64)
    for part in _chunks(len(cell), len(seeds)):
        calibration += _calibration_sums(cell[part], None, keys[part], n_cells, seeds, fraction)
    shape = (len(seeds), n_judges, N_LABELS, N_VERDICT_SLOTS)
    calibration = calibration.reshape(shape)
    return np.stack([calibration, total.reshape(shape[1:])[None] - calibration], axis=1)


def judge_cell_batch(tensor: npt.NDArray[np.int64], seeds: Sequence[int]) -> pa.RecordBatch:
    """The non-zero cells of a :func:`judge_cell_tensor` as a long batch (schema :data:`JUDGE_CELLS_DDL`)."""
    r, side, judge, label, slot = np.nonzero(tensor)
    return pa.RecordBatch.from_pydict(
        {
            "replicate": pa.array(np.asarray(seeds, dtype=np.int64)[r], pa.int64()),
            "side": pa.array(side.astype(np.int8), pa.int8()),
            "judge_idx": pa.array(judge.astype(np.int32), pa.int32()),
            "label": pa.array(label.astype(np.int8), pa.int8()),
            "verdict": pa.array(np.where(slot == N_LABELS, MISSING_CODE, slot).astype(np.int8), pa.int8()),
            "n": pa.array(tensor[r, side, judge, label, slot], pa.int64()),
        }
    )


def _buffered(batches: Iterable[pa.RecordBatch], columns: Sequence[str], rows: int) -> Iterator[list[np.ndarray]]:
    # Arrow batches (10k rows by default in Spark) are regrouped into chunks of about ``rows`` rows, so the
    # per-call cost of the kernel is paid per chunk, not per batch, whatever the Arrow batch size.
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.num_rows
        if size >= rows:
            yield [np.concatenate([b.column(c).to_numpy(zero_copy_only=False) for b in pending]) for c in columns]
            pending, size = [], 0
    if pending:
        yield [np.concatenate([b.column(c).to_numpy(zero_copy_only=False) for b in pending]) for c in columns]


def judge_cell_partition(
    batches: Iterable[pa.RecordBatch], seeds: Sequence[int], fraction: float, n_judges: int
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: sum :func:`judge_cell_tensor` over a partition's batches, emit one long batch.

    Input batches hold ``cell`` (:func:`cell_codes`, computed by the JVM) and ``group_key``: two columns, so
    the Arrow transfer from the JVM is as small as it can be. The output has at most ``R * 2 * J * 12`` rows
    per partition, whatever the partition's size.
    """
    acc = np.zeros((len(seeds), len(SIDES), n_judges, N_LABELS, N_VERDICT_SLOTS), dtype=np.int64)
    for cell, key in _buffered(batches, ("cell", "group_key"), _chunk_rows(len(seeds))):
        acc += cell_tensor(cell, key, seeds=seeds, fraction=fraction, n_judges=n_judges)
    yield judge_cell_batch(acc, seeds)


def decode_judge_cells(cells: pd.DataFrame, judge_ids: Sequence[str]) -> pd.DataFrame:
    """Codes to names: ``replicate, side, judge_id, label, verdict, n`` sorted by all keys (``verdict`` None = missing)."""
    judges = np.asarray(judge_ids, dtype=object)
    verdict = cells["verdict"].to_numpy(dtype=np.int64)
    frame = pd.DataFrame(
        {
            "replicate": cells["replicate"].to_numpy(dtype=np.int64),
            "side": np.asarray(SIDES, dtype=object)[cells["side"].to_numpy(dtype=np.int64)],
            "judge_id": judges[cells["judge_idx"].to_numpy(dtype=np.int64)],
            "label": _NAMES[cells["label"].to_numpy(dtype=np.int64)],
            "verdict": _NAMES[np.where(verdict == MISSING_CODE, N_LABELS, verdict)],
            "n": cells["n"].to_numpy(dtype=np.int64),
        }
    )
    order = np.lexsort(
        (verdict, cells["label"], frame["judge_id"].to_numpy(dtype=str), cells["side"], frame["replicate"])
    )
    return frame.iloc[order].reset_index(drop=True)


def pattern_tensor(
    pattern: npt.ArrayLike,
    label_code: npt.ArrayLike,
    group_key: npt.ArrayLike,
    *,
    seeds: Sequence[int] | None = None,
    fraction: float | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Item counts per full joint pattern: ``(patterns, stats)``.

    Parameters
    ----------
    pattern : array of int64
        Base-4 joint pattern of each item: digit ``p`` (``pattern // 4**p % 4``) is the verdict slot of the
        ``p``-th judge (0 = B, 1 = A, 2 = tie, 3 = missing).
    label_code : array of int
        Label code of each item; -1 = unlabelled.
    group_key : array of int64
        ``xxhash64(group_id)`` of each item.
    seeds, fraction : optional
        Replicate seeds and calibration fraction; without them there is no replicate or side axis.

    Returns
    -------
    patterns : ndarray of int64, shape (P,)
        The distinct patterns.
    stats : ndarray of int64, shape (P, 3) or (R, 2, P, 3)
        ``n`` (items), ``label_sum`` (items labelled A), ``n_labelled`` (items with a label), per side and
        replicate when seeds are given.

    Examples
    --------
    >>> patterns, stats = pattern_tensor([5, 5, 15], [1, -1, 0], [1, 2, 3])
    >>> patterns.tolist(), stats.tolist()
    ([5, 15], [[2, 1, 1], [1, 0, 1]])
    """
    pattern = np.asarray(pattern, dtype=np.int64)
    labels = np.asarray(label_code, dtype=np.int64)
    keys = np.asarray(group_key, dtype=np.int64)
    _check_codes(labels, table="labels", column="label", allow_missing=True)
    index, patterns = pd.factorize(pattern, sort=True)
    n_cells = 3 * len(patterns)
    # Each item contributes to three columns per pattern: n, label_sum and n_labelled.
    cell = np.concatenate([3 * index, 3 * index + 1, 3 * index + 2])
    weight = np.concatenate([np.ones(len(index)), labels == VERDICT_CODES["A"], labels != MISSING_CODE]).astype(float)
    total = np.bincount(cell, weights=weight, minlength=n_cells).astype(np.int64)
    if seeds is None:
        return patterns.astype(np.int64), total.reshape(-1, 3)
    if fraction is None:
        raise ValueError("fraction: required with seeds")
    calibration = np.zeros((len(seeds), n_cells), dtype=np.int64)
    for part in _chunks(len(index), len(seeds)):
        rows = np.r_[part, len(index) + np.r_[part], 2 * len(index) + np.r_[part]]
        calibration += _calibration_sums(cell[rows], weight[rows], np.tile(keys[part], 3), n_cells, seeds, fraction)
    calibration = calibration.reshape(len(seeds), -1, 3)
    return patterns.astype(np.int64), np.stack([calibration, total.reshape(-1, 3)[None] - calibration], axis=1)


def pattern_batch(
    patterns: npt.NDArray[np.int64], stats: npt.NDArray[np.int64], seeds: Sequence[int] | None
) -> pa.RecordBatch:
    """The cells with ``n > 0`` of a :func:`pattern_tensor` result as a long batch (schema :func:`pattern_ddl`)."""
    columns: dict[str, pa.Array] = {}
    if seeds is None:
        (p,) = np.nonzero(stats[:, 0])
        values = stats[p]
    else:
        r, side, p = np.nonzero(stats[..., 0])
        values = stats[r, side, p]
        columns["replicate"] = pa.array(np.asarray(seeds, dtype=np.int64)[r], pa.int64())
        columns["side"] = pa.array(side.astype(np.int8), pa.int8())
    columns["pattern"] = pa.array(patterns[p], pa.int64())
    for i, name in enumerate(("n", "label_sum", "n_labelled")):
        columns[name] = pa.array(values[:, i], pa.int64())
    return pa.RecordBatch.from_pydict(columns)


def pattern_partition(
    batches: Iterable[pa.RecordBatch], seeds: Sequence[int] | None, fraction: float | None
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: :func:`pattern_tensor` over all of a partition's items (``pattern, label, group_key``).

    The partition's items are taken at once (three int64 columns): their distinct patterns must be summed
    before they are emitted, and a partition holds items, not verdict rows.
    """
    chunks = list(_buffered(batches, ("pattern", "label", "group_key"), 1 << 62))
    pattern, label, key = chunks[0] if chunks else [np.empty(0, dtype=np.int64)] * 3
    patterns, stats = pattern_tensor(pattern, label, key, seeds=seeds, fraction=fraction)
    yield pattern_batch(patterns, stats, seeds)


def expand_prefixes(full: pd.DataFrame, n_judges: int) -> pd.DataFrame:
    """All prefixes k = 1..K from full-pattern counts (the K-judge pivot), with patterns as strings.

    The counts of a k-prefix pattern are the sums over the full patterns that extend it
    (``pattern mod 4**k``), so no prefix rescans the items.

    Parameters
    ----------
    full : DataFrame
        ``[replicate, side,] pattern, n, label_sum, n_labelled`` with integer ``pattern`` and ``side`` codes.
    n_judges : int
        K, the number of judges in the pattern.

    Returns
    -------
    DataFrame
        ``[replicate, side,] k, pattern, n, label_sum, n_labelled`` with ``pattern`` like ``"A|B|-"``, sorted.
    """
    keys = [c for c in ("replicate", "side", "block") if c in full.columns]
    stats = ["n", "label_sum", "n_labelled"]
    frames = []
    for k in range(1, n_judges + 1):
        prefix = full[keys + stats].assign(pattern=full["pattern"].to_numpy(dtype=np.int64) % (4**k), k=k)
        frames.append(prefix.groupby(keys + ["k", "pattern"], as_index=False, sort=True)[stats].sum())
    out = pd.concat(frames, ignore_index=True)
    uniq, inverse = np.unique(
        np.stack([out["k"].to_numpy(), out["pattern"].to_numpy()], axis=1), axis=0, return_inverse=True
    )
    names = np.array(["|".join(_SYMBOLS[(p >> (2 * i)) & 3] for i in range(k)) for k, p in uniq], dtype=object)
    out["pattern"] = names[inverse.ravel()]
    if "side" in out.columns:
        out["side"] = np.asarray(SIDES, dtype=object)[out["side"].to_numpy(dtype=np.int64)]
    out[stats] = out[stats].astype(np.int64)
    out = out.sort_values(keys + ["k", "pattern"], kind="stable").reset_index(drop=True)
    return out[keys + ["k", "pattern"] + stats]


#: Columns of a per-replicate block table (:func:`check_blocks`): group ``group_key`` is in block ``block`` of
#: replicate ``replicate``; groups absent from a replicate's rows are in none of its blocks.
BLOCK_COLUMNS = ("replicate", "group_key", "block")
#: Counts of a per-block pattern cell: items, items labelled A, labelled items, items labelled tie.
BLOCK_STATS = ("n", "label_sum", "n_labelled", "label_ties")


def check_blocks(blocks: pd.DataFrame) -> pd.DataFrame:
    """Validate a block table: the columns of :data:`BLOCK_COLUMNS` as int64, one block per (replicate, group).

    Raises
    ------
    ConfigError
        Missing columns, an empty table, or a group in two blocks of one replicate (a leak across blocks).
    """
    missing = [c for c in BLOCK_COLUMNS if c not in blocks.columns]
    if missing or blocks.empty:
        raise ConfigError(f"blocks: need a non-empty table with columns {list(BLOCK_COLUMNS)}, missing {missing}")
    out = blocks[list(BLOCK_COLUMNS)].astype(np.int64).reset_index(drop=True)
    dup = out.duplicated(["replicate", "group_key"])
    if dup.any():
        raise ConfigError(
            f"blocks: {int(dup.sum())} (replicate, group_key) pairs are in more than one block, "
            f"e.g. {out.loc[dup, ['replicate', 'group_key']].head(3).to_numpy().tolist()}"
        )
    return out


def block_pattern_cells(
    pattern: npt.ArrayLike, label_code: npt.ArrayLike, group_key: npt.ArrayLike, blocks: pd.DataFrame
) -> pd.DataFrame:
    """Full-pattern cells per (replicate, block) of items given as ``(pattern, label_code, group_key)``.

    The in-memory twin of the Spark join in :func:`judgecal_dist.engine.jobs.spark.pattern_cells_spark`: every item is
    joined to the blocks of its group (one per replicate) and counted in ``(replicate, block, pattern)``.

    Returns
    -------
    DataFrame
        ``replicate, block, pattern, n, label_sum, n_labelled, label_ties`` (int64; cells with ``n > 0``; the
        last counts the items labelled ``tie``), sorted by the keys.

    Examples
    --------
    >>> blocks = pd.DataFrame({"replicate": [0, 0], "group_key": [7, 8], "block": [0, 1]})
    >>> block_pattern_cells([5, 5, 6, 6], [1, 0, -1, 2], [7, 7, 8, 8], blocks).to_numpy().tolist()
    [[0, 0, 5, 2, 1, 2, 0], [0, 1, 6, 2, 0, 1, 1]]
    """
    labels = np.asarray(label_code, dtype=np.int64)
    _check_codes(labels, table="labels", column="label", allow_missing=True)
    items = pd.DataFrame(
        {
            "group_key": np.asarray(group_key, dtype=np.int64),
            "pattern": np.asarray(pattern, dtype=np.int64),
            "n": np.ones(labels.size, dtype=np.int64),
            "label_sum": (labels == VERDICT_CODES["A"]).astype(np.int64),
            "n_labelled": (labels != MISSING_CODE).astype(np.int64),
            "label_ties": (labels == VERDICT_CODES["tie"]).astype(np.int64),
        }
    )
    joined = items.merge(check_blocks(blocks), on="group_key", how="inner")
    keys = ["replicate", "block", "pattern"]
    out = joined.groupby(keys, as_index=False, sort=True)[list(BLOCK_STATS)].sum()
    return out.astype(np.int64)[keys + list(BLOCK_STATS)]
