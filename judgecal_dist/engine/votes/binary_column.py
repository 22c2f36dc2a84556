"""Dense vote rows as one ``binary`` column, one byte per judge (Arrow buffers, no copy either way)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["to_binary_column", "from_binary_column"]


def to_binary_column(votes: npt.NDArray[np.int8]) -> pa.BinaryArray:
    """Dense rows as a ``binary`` column, one byte per judge (read back by :func:`from_binary_column`)."""
    votes = np.ascontiguousarray(votes, dtype=np.int8)
    width = votes.shape[1]
    offsets = pa.array(np.arange(0, votes.size + 1, max(width, 1), dtype=np.int32)[: len(votes) + 1])
    return pa.BinaryArray.from_buffers(pa.binary(), len(votes), [None, offsets.buffers()[1], pa.py_buffer(votes)])


def from_binary_column(column: pa.Array | pa.ChunkedArray, n_judges: int) -> npt.NDArray[np.int8]:
    """The dense rows of a ``binary`` column written by :func:`to_binary_column`, without a copy."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(column) == 0:
        return np.empty((0, n_judges), dtype=np.int8)
    offset_type = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(column.buffers()[1], dtype=offset_type)[column.offset : column.offset + len(column) + 1]
    data = np.frombuffer(column.buffers()[2], dtype=np.int8)[offsets[0] : offsets[-1]]
    return data.reshape(len(column), n_judges)
