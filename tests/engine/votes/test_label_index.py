"""The label lookup by (dataset, item_id) equals a dictionary of the label rows, across datasets, items without a
label row, null labels and a dataset the labels table does not hold; a duplicate key is refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from judgecal_dist.engine.votes.codec import LabelIndex, binary_codes, codes_of
from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import MISSING_CODE


def _labels(rng: np.random.Generator, datasets: list[str], n: int) -> pa.Table:
    ds = rng.choice(datasets, n)
    items = [f"i{k}" for k in rng.permutation(3 * n)[:n]]  # unique per table, so unique per dataset too
    values = rng.choice(np.array(["A", "B", "tie", None], dtype=object), n)
    return pa.table({"dataset": ds, "item_id": items, "label": pa.array(list(values), pa.string())})


@pytest.mark.parametrize("datasets", [["d1"], ["d1", "d2", "d3"]])
def test_lookup_equals_a_dictionary_of_the_label_rows(datasets):
    rng = np.random.default_rng(4)
    labels = _labels(rng, datasets, 500)
    columns = (labels[c].to_pylist() for c in ("dataset", "item_id", "label"))
    truth = {(d, i): v for d, i, v in zip(*columns, strict=True)}
    keys = pa.table(
        {
            "dataset": rng.choice([*datasets, "other"], 900),
            "item_id": [f"i{k}" for k in rng.integers(0, 1600, 900)],
        }
    )
    index = LabelIndex(labels)
    expected = [truth.get(key) for key in zip(keys["dataset"].to_pylist(), keys["item_id"].to_pylist(), strict=True)]
    coded = np.where([v is None for v in expected], MISSING_CODE, codes_of([v or "A" for v in expected]))
    np.testing.assert_array_equal(index(keys), coded)
    np.testing.assert_array_equal(index(keys, binary=True), binary_codes(coded))
    np.testing.assert_array_equal(LabelIndex(None)(keys), np.full(900, MISSING_CODE))


def test_a_duplicate_key_is_refused():
    labels = pa.table({"dataset": ["d", "d"], "item_id": ["x", "x"], "label": ["A", "B"]})
    with pytest.raises(InputError, match="duplicate keys"):
        LabelIndex(labels)
    LabelIndex(pa.table({"dataset": ["d", "e"], "item_id": ["x", "x"], "label": ["A", "B"]}))  # other datasets
