"""The vote codec: verdict rows (Arrow) to item x judge codes (numpy), and the forms every engine path needs.

One kernel, :func:`encode`, turns a table or row group of verdict rows into integer codes: the items it holds
(``dataset, item_id, group_id``, one row each), and per verdict row the item's index, the judge's position in an
ordered judge list and the verdict code of :data:`judgecal_dist.io.schema.VERDICT_CODES` (null = ``MISSING_CODE``,
a category outside the alphabet = ``UNKNOWN_CODE``). String columns are mapped once per dictionary entry and
gathered by integer indices, so the cost per row is a few integer gathers; columns read dictionary-encoded
(Parquet's own dictionaries) skip even the encoding. Every engine path calls it: the in-memory path on a whole
table (:func:`item_votes`), Spark tasks on each Parquet row group they read (:mod:`judgecal_dist.engine.votes.spark`)
or on Arrow batches of a DataFrame, and the per-judge cell counts on each batch.

The forms built from :class:`CodedRows`:

* **dense**: ``(n_items, n_judges)`` int8, binary votes (``VOTE_A``, ``VOTE_B``, ``MISSING_CODE`` for ties, nulls
  and absent pairs) or full verdict codes (ties kept);
* **packed**: judge ``j`` owns bits ``2 (j mod 31)`` and up of the long ``v<j // 31>``, holding ``code + 1``
  (0 = missing, 1 = B, 2 = A, 3 = tie). Packed rows of one item from different row groups add up exactly, because
  an item has at most one verdict per judge and sample, so Spark sums them in a ``groupBy``;
* **binary column**: the dense row as ``binary`` (one byte per judge), reinterpreted without a copy;
* **verdict patterns**: base 4 in int64, digit ``p`` = verdict slot of the ``p``-th judge (``B`` 0, ``A`` 1,
  ``tie`` 2, missing 3), at most :data:`MAX_VERDICT_PATTERN_JUDGES` judges;
* **vote patterns**: base 3 over binary votes, digit ``m`` = ``vote + 1`` (0 missing, 1 B, 2 A);
* **outcome signs**: the three outcomes as ``A`` +1, ``tie`` 0, ``B`` -1 (Davidson's actions), and back.

Verdict or label strings held in pandas or numpy are coded with :func:`codes_of`; nothing else in the package
compares verdict strings (the one-codec test scans for it).

This module imports no Spark: Spark's Python workers import it before their first batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.engine.votes.binary_column import from_binary_column, to_binary_column
from judgecal_dist.engine.votes.chunked import ChunkedDictionary
from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import (
    COLUMN_DEFAULTS,
    MISSING_CODE,
    UNKNOWN_CODE,
    VERDICT_CATEGORIES,
    VERDICT_CODES,
    VOTE_A,
    VOTE_B,
)
from judgecal_dist.splits import group_keys

__all__ = [
    "ITEM_KEYS",
    "VERDICT_COLUMNS",
    "JUDGES_PER_BLOCK",
    "MAX_VERDICT_PATTERN_JUDGES",
    "category_codes",
    "codes_of",
    "binary_codes",
    "outcome_signs",
    "verdicts_of_signs",
    "as_dictionary",
    "CodedRows",
    "encode",
    "LabelIndex",
    "ItemVotes",
    "item_votes",
    "block_columns",
    "pack",
    "unpack",
    "to_binary_column",
    "from_binary_column",
    "verdict_patterns",
    "vote_pattern_digits",
    "vote_pattern_votes",
]

#: Item key columns, in output order.
ITEM_KEYS: tuple[str, ...] = ("dataset", "item_id", "group_id")
#: The verdict columns the codec reads (``sample`` is optional when no sample is chosen).
VERDICT_COLUMNS: tuple[str, ...] = (*ITEM_KEYS, "judge_id", "sample", "verdict")
#: Judges packed into one signed 64-bit sum: 2 bits each, 62 bits in all.
JUDGES_PER_BLOCK = 31
#: Base-4 verdict patterns are int64: two bits per judge, 62 bits in all.
MAX_VERDICT_PATTERN_JUDGES = 31

_CATEGORIES = pa.array(sorted(VERDICT_CODES, key=VERDICT_CODES.__getitem__))  # index in this array = code
_EXAMPLES = 3  # offending categories kept for a message
_BLOCK_ROWS = 1 << 20  # rows per block of the first-row search


def category_codes(values: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.int8]:
    """Codes of a category column: ``VERDICT_CODES``, ``MISSING_CODE`` for null, ``UNKNOWN_CODE`` otherwise."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(pa.string())
    index = pc.index_in(values, value_set=_CATEGORIES)
    codes = pc.if_else(pc.is_null(values), MISSING_CODE, pc.fill_null(index, UNKNOWN_CODE))
    return np.asarray(pc.cast(codes, pa.int8()).to_numpy(zero_copy_only=False), dtype=np.int8)


def codes_of(values: pd.Series | npt.ArrayLike) -> npt.NDArray[np.int8]:
    """:func:`category_codes` of verdict or label strings held in pandas or numpy (None and NaN are null).

    Examples
    --------
    >>> codes_of(pd.Series(["A", None, "tie", "B", "x"])).tolist()
    [1, -1, 2, 0, -2]
    """
    if isinstance(values, pd.Series):
        values = values.astype(object)
    return category_codes(pa.array(values, pa.string(), from_pandas=True))


#: Outcome sign of each verdict code (index = code): ``A`` +1, ``B`` -1, ``tie`` 0.
_SIGNS = np.zeros(len(VERDICT_CODES))
_SIGNS[[VOTE_A, VOTE_B]] = 1.0, -1.0


def outcome_signs(values: pd.Series | npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The three outcomes of verdict or label strings as signs: ``A`` +1, ``tie`` 0, ``B`` -1; NaN for a null or a
    category outside the alphabet.

    Examples
    --------
    >>> outcome_signs(["A", "tie", "B", None]).tolist()
    [1.0, 0.0, -1.0, nan]
    """
    codes = codes_of(values)
    return np.where(codes >= 0, _SIGNS[np.maximum(codes, 0)], np.nan)


def verdicts_of_signs(signs: npt.ArrayLike) -> npt.NDArray[np.object_]:
    """Verdict strings of outcome signs -1, 0, +1 (inverse of :func:`outcome_signs`): ``['B', 'tie', 'A']``."""
    by_sign = np.empty(3, dtype=object)
    by_sign[(_SIGNS + 1).astype(np.int64)] = _CATEGORIES.to_pylist()
    return by_sign[np.asarray(signs, dtype=np.int64) + 1]


def binary_codes(codes: npt.NDArray[np.integer]) -> npt.NDArray[np.int8]:
    """Binary votes (or labels) of verdict codes: ``A`` and ``B`` kept, anything else ``MISSING_CODE``."""
    return np.where((codes == VOTE_A) | (codes == VOTE_B), codes, MISSING_CODE).astype(np.int8)


def as_dictionary(column: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    """One dictionary array (chunks combined, their dictionaries unified) of a string or dictionary column."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)


@dataclass(frozen=True)
class CodedRows:
    """Verdict rows as integer codes (:func:`encode`).

    Attributes
    ----------
    keys : pyarrow.Table
        ``dataset, item_id, group_id`` (strings), one row per item.
    item : ndarray of int64, shape (n_rows,)
        Index into ``keys`` of each row.
    judge : ndarray of int64, shape (n_rows,)
        Position of the row's judge in the judge list; -1 for a judge outside it.
    code : ndarray of int8, shape (n_rows,)
        Verdict code: ``VERDICT_CODES``, ``MISSING_CODE`` (null) or ``UNKNOWN_CODE`` (outside the alphabet).
    judges_seen : list of str
        Judge ids with at least one row.
    unknown_examples : list of str
        A few categories outside the alphabet, sorted.
    """

    keys: pa.Table
    item: npt.NDArray[np.int64]
    judge: npt.NDArray[np.int64]
    code: npt.NDArray[np.int8]
    judges_seen: list[str] = field(default_factory=list)
    unknown_examples: list[str] = field(default_factory=list)

    @property
    def n_items(self) -> int:
        return int(self.keys.num_rows)

    @property
    def n_unknown(self) -> int:
        """Rows with a category outside the alphabet."""
        return int((self.code == UNKNOWN_CODE).sum())

    def reject_unknown(self, *, where: str = "verdicts", judged_only: bool = False) -> None:
        """Raise on rows with a category outside the alphabet (only rows of listed judges with ``judged_only``).

        Raises
        ------
        InputError
            ``<where>: verdict: <n> rows with a category outside ('A', 'B', 'tie') (e.g. [...])``.
        """
        bad = self.code == UNKNOWN_CODE
        if judged_only:
            bad &= self.judge >= 0
        if bad.any():
            raise InputError(
                f"{where}: verdict: {int(bad.sum())} rows with a category outside {VERDICT_CATEGORIES} "
                f"(e.g. {self.unknown_examples})"
            )

    def dense(self, n_judges: int, *, binary: bool = True) -> npt.NDArray[np.int8]:
        """The ``(n_items, n_judges)`` int8 codes: binary votes, or verdict codes with ties kept.

        Rows of judges outside the list and categories outside the alphabet are left out (missing).
        """
        keep = self.judge >= 0
        keep &= ((self.code == VOTE_A) | (self.code == VOTE_B)) if binary else (self.code > MISSING_CODE)
        # Rows left out write to a spare last column (one index array, not three filtered copies of the rows).
        out = np.full((self.n_items, n_judges + 1), MISSING_CODE, dtype=np.int8)
        out[self.item, np.where(keep, self.judge, n_judges)] = self.code
        return np.ascontiguousarray(out[:, :n_judges])


def encode(
    table: pa.Table | pa.RecordBatch,
    judges: pa.Array | Sequence[str] | None,
    *,
    sample: int | None = None,
    dataset: str | None = None,
) -> CodedRows:
    """The codec's kernel: verdict rows to :class:`CodedRows`.

    Parameters
    ----------
    table : pyarrow.Table or RecordBatch
        ``dataset, item_id, group_id, judge_id, verdict`` and, when ``sample`` is given, ``sample``; string
        columns plain or dictionary-encoded.
    judges : sequence of str or pyarrow.Array, optional
        The ordered judge list (position = column of the dense forms); None: every judge of ``table``, sorted.
    sample : int, optional
        Keep the rows of this sample only (all rows when None).
    dataset : str, optional
        Keep the rows of this dataset only.

    Notes
    -----
    Items are numbered in the order of their first row when the item ids are plain strings (dictionary order
    when they are read dictionary-encoded). Cost: the filters, one dictionary lookup per distinct string, and
    integer gathers per row; a table with several datasets adds one ``factorize`` of (dataset, item) codes.
    """
    table = _rows_of(pa.Table.from_batches([table]) if isinstance(table, pa.RecordBatch) else table, sample, dataset)
    # Each column coded chunk by chunk (no concatenated copy: at 10M rows every fresh column costs a cold process
    # 0.1-0.3 s of page faults); string columns are mapped once per dictionary entry.
    ds, item, group, judge, verdict = (ChunkedDictionary(table[c]) for c in [*ITEM_KEYS, "judge_id", "verdict"])
    seen = judge.dictionary.filter(pa.array(judge.used())).to_pylist()
    if judges is None:
        judges = sorted(seen)
    value_set = judges if isinstance(judges, pa.Array) else pa.array(list(judges), pa.string())
    position = pc.fill_null(pc.index_in(judge.dictionary, value_set=value_set), -1).to_numpy(zero_copy_only=False)
    judge_rows = judge.rows(np.asarray(position, dtype=np.int64), where="verdicts: judge_id")
    verdict_codes = category_codes(verdict.dictionary)
    code = verdict.rows(verdict_codes, null_value=MISSING_CODE, dtype=np.int8)
    examples: list[str] = []
    if (verdict_codes == UNKNOWN_CODE).any():
        bad = (verdict_codes == UNKNOWN_CODE) & verdict.used()
        examples = sorted(verdict.dictionary.filter(pa.array(bad)).to_pylist())[:_EXAMPLES]
    # Items by integer codes. One dataset (the usual case): the item_id dictionary codes already are item codes.
    item_rows = item.rows(where="verdicts: item_id")
    if len(ds.dictionary) <= 1:
        inverse, n_codes = item_rows, len(item.dictionary)
    else:
        pair = ds.rows(where="verdicts: dataset") * len(item.dictionary) + item_rows
        inverse, uniques = pd.factorize(pair)
        n_codes = len(uniques)
    # Codes without a row (dictionary entries left by a filter) are dropped; any row of an item gives its keys
    # (group_id is one per item, ingest checks it).
    row_of = np.full(n_codes, -1, dtype=np.int64)
    for stop in range(len(inverse), 0, -_BLOCK_ROWS):  # each item's first row: later blocks first, then earlier
        start = max(0, stop - _BLOCK_ROWS)  # (blocks, not one arange per row: fresh memory is slow in a cold process)
        row_of[inverse[start:stop][::-1]] = np.arange(stop - 1, start - 1, -1)
    present = row_of >= 0
    if not present.all():
        renumber = np.cumsum(present) - 1
        inverse, row_of = renumber[inverse], row_of[present]
    keys = pa.table({name: c.take(row_of) for name, c in zip(ITEM_KEYS, (ds, item, group), strict=True)})
    return CodedRows(
        keys=keys,
        item=np.asarray(inverse, dtype=np.int64),
        judge=judge_rows,
        code=code,
        judges_seen=sorted(seen),
        unknown_examples=examples,
    )


def _rows_of(table: pa.Table, sample: int | None, dataset: str | None) -> pa.Table:
    """The rows of ``sample`` and ``dataset`` (the table itself, no copy, when every row is one of them)."""
    if sample is not None and "sample" in table.column_names:
        low, high = pc.min_max(table["sample"], skip_nulls=False).values()
        if not low.as_py() == high.as_py() == sample:
            table = table.filter(pc.equal(table["sample"], pa.scalar(sample, table.schema.field("sample").type)))
    elif sample is not None and sample != COLUMN_DEFAULTS["sample"]:  # no column: every row is the default sample
        table = table.slice(0, 0)
    if dataset is not None and pc.unique(table["dataset"]).cast(pa.string()).to_pylist() != [dataset]:
        table = table.filter(pc.equal(table["dataset"].cast(pa.string()), pa.scalar(dataset, pa.string())))
    return table


class LabelIndex:
    """Label codes of items by ``(dataset, item_id)``, from a labels table (built once, looked up per batch).

    One Arrow hash lookup of the item ids per dataset (``index_in``), not a pandas index of string pairs: 2M
    items are looked up in about a tenth of a second instead of seconds.
    """

    def __init__(self, labels: pa.Table | None) -> None:
        #: dataset -> (its labelled item ids, their rows in ``labels``; None: every row, in order)
        self.sets: dict[str | None, tuple[pa.Array, npt.NDArray[np.int64] | None]] = {}
        if labels is None or labels.num_rows == 0:
            self.codes = np.array([MISSING_CODE], dtype=np.int8)
            return
        datasets = labels["dataset"].cast(pa.string())
        items = labels["item_id"].cast(pa.string())
        names = pc.unique(datasets).to_pylist()
        for name in names:
            rows = None if len(names) == 1 else _rows_equal(datasets, name)
            ids = (items if rows is None else items.take(rows)).combine_chunks()
            if pc.count_distinct(ids, mode="all").as_py() != len(ids):
                raise InputError(
                    "labels: dataset+item_id: duplicate keys (ingest validates them; was this table written by hand?)"
                )
            self.sets[name] = (ids, rows)
        # Null labels keep MISSING_CODE, so their items count exactly like items without a label row.
        self.codes = np.append(category_codes(labels["label"]), np.int8(MISSING_CODE))

    def __call__(self, keys: pa.Table, *, binary: bool = False) -> npt.NDArray[np.int8]:
        """Label code of each item of ``keys`` (``MISSING_CODE`` without a label; ties too with ``binary``)."""
        where = np.full(keys.num_rows, -1, dtype=np.int64)  # -1 (absent) takes the last entry: MISSING_CODE
        if self.sets and keys.num_rows:
            datasets = keys["dataset"].cast(pa.string())
            items = keys["item_id"].cast(pa.string())
            names = pc.unique(datasets).to_pylist()
            for name in names:
                if name not in self.sets:
                    continue
                ids, rows = self.sets[name]
                picked = None if len(names) == 1 else _rows_equal(datasets, name)
                found = pc.index_in(items if picked is None else items.take(picked), value_set=ids)
                found = np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
                if rows is not None:
                    found = np.where(found >= 0, rows[np.maximum(found, 0)], -1)
                if picked is None:
                    where = found
                else:
                    where[picked] = found
        codes = self.codes[where]
        return binary_codes(codes) if binary else codes


def _rows_equal(column: pa.ChunkedArray | pa.Array, value: str | None) -> npt.NDArray[np.int64]:
    """Positions of the rows of a string column equal to ``value`` (null: the null rows)."""
    mask = pc.is_null(column) if value is None else pc.fill_null(pc.equal(column, pa.scalar(value, pa.string())), False)
    return np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False)))


@dataclass(frozen=True)
class ItemVotes:
    """Items of a verdict table in dense form (:func:`item_votes`).

    Attributes
    ----------
    keys : pyarrow.Table
        ``dataset, item_id, group_id`` per item, in first-appearance order.
    votes : ndarray of int8, shape (n_items, n_judges)
        ``VOTE_A``, ``VOTE_B`` or ``MISSING_CODE``, columns in the order of the judge list.
    labels : ndarray of int8, shape (n_items,)
        Binary label codes (``MISSING_CODE``: null, ``tie`` or no label row).
    rows : CodedRows
        The coded rows the votes came from (counts of ties, nulls, judges seen).
    """

    keys: pa.Table
    votes: npt.NDArray[np.int8]
    labels: npt.NDArray[np.int8]
    rows: CodedRows

    @classmethod
    def from_rows(cls, rows: CodedRows, labels: pa.Table | None, n_judges: int) -> ItemVotes:
        """The dense binary votes of coded rows (judge positions as coded), with the items' binary labels."""
        return cls(
            keys=rows.keys, votes=rows.dense(n_judges), labels=LabelIndex(labels)(rows.keys, binary=True), rows=rows
        )

    @property
    def group_keys(self) -> npt.NDArray[np.int64]:
        """``xxhash64(group_id)`` of each item (:func:`judgecal_dist.splits.group_keys`)."""
        return group_keys(self.keys["group_id"].to_pylist())


def item_votes(
    verdicts: pa.Table,
    labels: pa.Table | None,
    judge_ids: Sequence[str] | None,
    *,
    sample: int = 0,
    dataset: str | None = None,
) -> ItemVotes:
    """The dense binary votes of every item with a verdict row at ``sample`` (the in-memory path).

    Parameters
    ----------
    verdicts : pyarrow.Table
        ``dataset, item_id, group_id, judge_id, sample, verdict``.
    labels : pyarrow.Table, optional
        ``dataset, item_id, label``.
    judge_ids : sequence of str, optional
        The judges, in column order; verdicts of other judges are left out. None: every judge at ``sample``.
    sample : int
        The sample to read.
    dataset : str, optional
        Only this dataset's rows.

    Raises
    ------
    InputError
        A verdict outside the alphabet, or no verdict rows at ``sample``.
    """
    rows = encode(verdicts, judge_ids, sample=sample, dataset=dataset)
    if rows.item.size == 0:
        raise InputError(f"verdicts: sample: no verdict rows with sample={sample}")
    rows.reject_unknown()
    return ItemVotes.from_rows(rows, labels, len(rows.judges_seen) if judge_ids is None else len(judge_ids))


def block_columns(n_judges: int) -> list[str]:
    """Names of the packed vote columns of ``n_judges`` judges: ``v0``, ``v1``, ..."""
    return [f"v{b}" for b in range(-(-n_judges // JUDGES_PER_BLOCK))]


def pack(codes: npt.NDArray[np.int8]) -> list[npt.NDArray[np.int64]]:
    """The packed ``v<b>`` longs of dense codes (binary votes or verdict codes; inverse of :func:`unpack`).

    Examples
    --------
    >>> [b.tolist() for b in pack(np.array([[1, -1, 0], [-1, -1, 2]], dtype=np.int8))]
    [[18, 48]]
    """
    blocks = []
    for start in range(0, codes.shape[1], JUDGES_PER_BLOCK):
        digits = codes[:, start : start + JUDGES_PER_BLOCK].astype(np.int64) + 1  # 0 = missing, 1 B, 2 A, 3 tie
        blocks.append((digits << (2 * np.arange(digits.shape[1], dtype=np.int64))).sum(axis=1))
    return blocks


def unpack(blocks: Sequence[pa.Array], n_judges: int, *, binary: bool = True) -> npt.NDArray[np.int8]:
    """Dense int8 codes from the packed ``v<b>`` columns (null = no verdict of any judge of that block).

    With ``binary`` a ``tie`` is a missing vote.

    Examples
    --------
    >>> unpack([pa.array([2 + 1 * 4**2, None], pa.int64())], 3)  # judge 0 votes A, judge 2 B
    array([[ 1, -1,  0],
           [-1, -1, -1]], dtype=int8)
    """
    n = len(blocks[0]) if blocks else 0
    codes = np.empty((n, n_judges), dtype=np.int8)
    for b, column in enumerate(blocks):
        start = b * JUDGES_PER_BLOCK
        width = min(JUDGES_PER_BLOCK, n_judges - start)
        packed = np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
        codes[:, start : start + width] = ((packed[:, None] >> (2 * np.arange(width, dtype=np.int64))) & 3) - 1
    return binary_codes(codes) if binary else codes


def verdict_patterns(codes: npt.NDArray[np.int8]) -> npt.NDArray[np.int64]:
    """Base-4 joint patterns of dense verdict codes: digit ``p`` = slot of judge ``p`` (B 0, A 1, tie 2, missing 3).

    Examples
    --------
    >>> verdict_patterns(np.array([[1, -1], [0, 2]], dtype=np.int8)).tolist()  # 1 + 3*4, 0 + 2*4
    [13, 8]
    """
    if codes.shape[1] > MAX_VERDICT_PATTERN_JUDGES:
        raise InputError(f"judges: at most {MAX_VERDICT_PATTERN_JUDGES} judges in a verdict pattern")
    slot = np.where(codes < 0, len(VERDICT_CODES), codes).astype(np.int64)
    return (slot << (2 * np.arange(codes.shape[1], dtype=np.int64))).sum(axis=1)


def vote_pattern_digits(votes: npt.NDArray[np.int8]) -> npt.NDArray[np.int8]:
    """Base-3 digits of binary votes (0 missing, 1 B, 2 A): a panel's vote pattern is ``sum digit_m 3**m``."""
    return (votes + 1).astype(np.int8)


def vote_pattern_votes(codes: npt.ArrayLike, n_judges: int) -> npt.NDArray[np.int8]:
    """Binary votes ``(n_codes, n_judges)`` of base-3 vote patterns (inverse of :func:`vote_pattern_digits`).

    Examples
    --------
    >>> vote_pattern_votes([2 + 0 * 3 + 1 * 9], 3).tolist()  # A, missing, B
    [[1, -1, 0]]
    """
    codes = np.asarray(codes, dtype=np.int64)
    return ((codes[:, None] // 3 ** np.arange(n_judges, dtype=np.int64)) % 3 - 1).astype(np.int8)
