"""The summary kernels' set terms, against the per-item definition written as a Python loop."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from judgecal_dist.scoring.summary import frame_of


def test_set_sizes_and_hits_equal_the_per_item_loop() -> None:
    rng = np.random.default_rng(0)
    n = 2_000
    choices = [None, [], ["A"], ["B"], ["A", "B"]]
    sets = [choices[i] for i in rng.integers(0, len(choices), n)]
    labels = [[None, "A", "B"][i] for i in rng.integers(0, 3, n)]
    table = pa.table(
        {
            "label": pa.array(labels, pa.string()),
            "p": rng.random(n),
            "set_alpha_0_1": pa.array(sets, pa.list_(pa.string())),
        }
    )
    # two chunks: the kernels see tables assembled from several batches
    table = pa.concat_tables([table.slice(0, 700), table.slice(700)])
    frame = frame_of(table)
    assert "set_alpha_0_1" not in frame
    assert frame["size_set_alpha_0_1"].tolist() == [0 if s is None else len(s) for s in sets]
    expected = [s is not None and lab in s for lab, s in zip(labels, sets, strict=True)]
    assert frame["covered_set_alpha_0_1"].tolist() == expected
    assert frame["label"].tolist() == labels
