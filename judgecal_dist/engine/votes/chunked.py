"""Dictionary codes of a chunked string column, written chunk by chunk: the vote codec's per-row lookups without
concatenating the column first.

A verdict table read from Parquet arrives as chunks (row groups), each dictionary-encoded with its own dictionary.
Combining the chunks into one array (``combine_chunks``, which unifies the dictionaries) copies every column, and
each fresh array of 10M rows costs 0.1-0.3 s of first-touch page faults in a cold process, more than the lookups
themselves. :class:`ChunkedDictionary` keeps the chunks: one dictionary for the column (the chunks' dictionaries in
first-appearance order, as ``combine_chunks`` and ``dictionary_encode`` number them), each chunk's map to it, and
per-row values gathered by ``numpy.take`` straight into the one output array.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.errors import InputError

__all__ = ["ChunkedDictionary"]

_EMPTY = pa.array([], pa.string())


class ChunkedDictionary:
    """One dictionary over the chunks of a string or dictionary column, and per-row lookups through it.

    Parameters
    ----------
    column : pyarrow.Array or ChunkedArray
        Strings, plain or dictionary-encoded (chunks may have different dictionaries).
    """

    def __init__(self, column: pa.Array | pa.ChunkedArray) -> None:
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        self.chunks = [c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(c) for c in chunks]
        self.null_count = sum(c.null_count for c in self.chunks)
        self.n_rows = sum(len(c) for c in self.chunks)
        # One hash pass over the distinct dictionaries' entries (not over the rows; the row groups of one Parquet
        # file share its dictionary): codes in first-appearance order.
        distinct: list[pa.Array] = []
        which = []
        for chunk in self.chunks:
            if not distinct or not chunk.dictionary.equals(distinct[-1]):
                distinct.append(chunk.dictionary)
            which.append(len(distinct) - 1)
        entries = pc.dictionary_encode(pa.concat_arrays([d.cast(pa.string()) for d in distinct] or [_EMPTY]))
        self.dictionary: pa.Array = entries.dictionary
        codes = np.asarray(entries.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        per_dictionary = np.split(codes, np.cumsum([len(d) for d in distinct])[:-1])
        #: each chunk's dictionary entry -> its code in ``dictionary``
        self.to_global = [per_dictionary[k] for k in which]

    def _local(self, chunk: pa.DictionaryArray) -> npt.NDArray[np.integer]:
        """The chunk's indices, nulls as ``len(chunk.dictionary)`` (the slot after the last entry)."""
        indices = chunk.indices if not chunk.null_count else pc.fill_null(chunk.indices, len(chunk.dictionary))
        return np.asarray(indices.to_numpy(zero_copy_only=False))

    def rows(
        self,
        per_entry: npt.NDArray[np.generic] | None = None,
        *,
        null_value: int | None = None,
        dtype: npt.DTypeLike = np.int64,
        where: str = "verdicts",
    ) -> npt.NDArray[Any]:
        """Per row: its code in :attr:`dictionary`, or ``per_entry[code]``; ``null_value`` for a null row.

        Raises
        ------
        InputError
            A null row when ``null_value`` is None (a key column): ``<where>: <n> null values in a key column``.
        """
        if self.null_count and null_value is None:
            raise InputError(f"{where}: {self.null_count} null values in a key column")
        out = np.empty(self.n_rows, dtype=dtype)
        start = 0
        for chunk, to_global in zip(self.chunks, self.to_global, strict=True):
            lookup = to_global if per_entry is None else per_entry[to_global]
            lookup = np.append(lookup, np.asarray(null_value or 0, dtype=lookup.dtype)).astype(dtype, copy=False)
            np.take(lookup, self._local(chunk), out=out[start : start + len(chunk)])
            start += len(chunk)
        return out

    def used(self) -> npt.NDArray[np.bool_]:
        """Whether each entry of :attr:`dictionary` has a row (a filter or a Parquet dictionary keeps unused ones)."""
        used = np.zeros(len(self.dictionary), dtype=bool)
        for chunk, to_global in zip(self.chunks, self.to_global, strict=True):
            counts = np.bincount(self._local(chunk), minlength=len(chunk.dictionary) + 1)[: len(chunk.dictionary)]
            used[to_global[counts > 0]] = True
        return used

    def take(self, rows: npt.NDArray[np.int64]) -> pa.Array:
        """The strings of the given rows (null where the row is null)."""
        if not len(self.dictionary):  # every row null (or none)
            return pa.nulls(len(rows), pa.string())
        bounds = np.cumsum([0] + [len(c) for c in self.chunks])
        chunk_of = np.searchsorted(bounds, rows, side="right") - 1
        codes = np.full(len(rows), -1, dtype=np.int64)
        for k in np.unique(chunk_of):
            at = np.flatnonzero(chunk_of == k)
            local = self._local(self.chunks[k])[rows[at] - bounds[k]]
            codes[at] = np.append(self.to_global[k], -1)[local]
        missing = codes < 0
        values = self.dictionary.take(pa.array(np.where(missing, 0, codes)))
        return pc.if_else(pa.array(missing), pa.nulls(len(rows), pa.string()), values) if missing.any() else values
