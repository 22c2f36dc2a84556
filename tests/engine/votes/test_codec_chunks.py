"""The codec codes a verdict table chunk by chunk (row groups with their own dictionaries, never concatenated):
the codes equal an independent pandas reference, and the same rows give the same codes however they are chunked
or encoded (plain strings, dictionaries shared by chunks or not)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from judgecal_dist.engine.votes.codec import encode
from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import MISSING_CODE, UNKNOWN_CODE, VERDICT_CODES

ROWS = pd.DataFrame(
    {
        "dataset": ["d1", "d2", "d1", "d2", "d1", "d1", "d2", "d1"],
        "item_id": ["a", "a", "b", "c", "a", "b", "c", "c"],
        "group_id": ["g1", "g2", "g1", "g3", "g1", "g1", "g3", "g4"],
        "judge_id": ["j1", "j1", "j2", "j1", "j2", "j9", "j2", "j1"],
        "sample": [0, 0, 0, 0, 0, 1, 0, 0],
        "verdict": ["A", None, "tie", "x", "B", "A", "B", "A"],
    }
)


def _table(kind: str, cuts: list[int]) -> pa.Table:
    """ROWS as a table of chunks split at ``cuts``: plain strings, or each chunk dictionary-encoded on its own."""
    edges = [0, *cuts, len(ROWS)]

    def column(name: str) -> pa.ChunkedArray:
        values = ROWS[name].tolist()
        chunks = [
            pa.array(values[a:b], pa.int32() if name == "sample" else pa.string())
            for a, b in zip(edges, edges[1:], strict=False)
        ]
        if kind == "dictionary" and name != "sample":
            chunks = [c.dictionary_encode() for c in chunks]
        return pa.chunked_array(chunks)

    return pa.table({name: column(name) for name in ROWS.columns})


def _reference(sample: int, judges: list[str]) -> pd.DataFrame:
    """Item, judge position and verdict code of each row at ``sample``, by pandas (items by first appearance)."""
    rows = ROWS[ROWS["sample"] == sample].reset_index(drop=True)
    item = pd.factorize(pd.MultiIndex.from_frame(rows[["dataset", "item_id"]]))[0]
    judge = rows["judge_id"].map({j: k for k, j in enumerate(judges)}).fillna(-1).astype(np.int64)
    code = rows["verdict"].map(VERDICT_CODES).fillna(UNKNOWN_CODE).where(rows["verdict"].notna(), MISSING_CODE)
    return pd.DataFrame({"item": item, "judge": judge, "code": code.astype(np.int8)})


@pytest.mark.parametrize("kind", ["plain", "dictionary"])
@pytest.mark.parametrize("cuts", [[], [3], [2, 5], [1, 2, 3, 4, 5, 6, 7]])
def test_chunked_codes_equal_the_pandas_reference(kind: str, cuts: list[int]) -> None:
    rows = encode(_table(kind, cuts), ["j2", "j1"], sample=0)
    expected = _reference(0, ["j2", "j1"])
    np.testing.assert_array_equal(rows.item, expected["item"])
    np.testing.assert_array_equal(rows.judge, expected["judge"])
    np.testing.assert_array_equal(rows.code, expected["code"])
    first = ROWS[ROWS["sample"] == 0].drop_duplicates(["dataset", "item_id"])
    assert rows.keys.to_pydict() == first[["dataset", "item_id", "group_id"]].to_dict("list")
    assert rows.judges_seen == ["j1", "j2"] and rows.unknown_examples == ["x"]


def test_a_null_key_is_refused_naming_the_column() -> None:
    item = pa.chunked_array(
        [pa.array(["a", None, "b", "c"]).dictionary_encode(), pa.array(list("abcc")).dictionary_encode()]
    )
    table = _table("dictionary", [4]).set_column(1, "item_id", item)
    with pytest.raises(InputError, match="verdicts: item_id: 1 null values in a key column"):
        encode(table, None)
