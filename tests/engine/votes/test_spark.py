"""The codec's packed item votes, read straight from the Parquet parts by Spark tasks, equal the in-memory codec
and a brute-force loop over the rows."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal_dist.engine.jobs.spark import read_table
from judgecal_dist.engine.votes.codec import block_columns, item_votes
from judgecal_dist.engine.votes.codec import unpack as votes_from_blocks
from judgecal_dist.engine.votes.spark import item_votes_spark, partial_items
from judgecal_dist.io.dataset import read_dataset_table as read_arrow_table
from judgecal_dist.io.writer import DatasetWriter

#: 40 model judges (two packed blocks) plus two judges the model does not know.
MODEL = [f"j{k:02d}" for k in range(40)]
COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "sample", "verdict"]


def random_tables(seed: int = 0, n_items: int = 60) -> tuple[pa.Table, pa.Table]:
    """Verdicts of two datasets and two samples, rows shuffled (an item's rows far apart), and labels."""
    rng = np.random.default_rng(seed)
    judges = np.array(MODEL + ["x1", "x2"])
    rows = []
    for i in range(n_items):
        dataset = "d0" if i % 3 else "d1"
        group = f"g{i // 2}"
        for sample in (0, 1):
            for j in rng.choice(len(judges), size=rng.integers(0, len(judges)), replace=False):
                verdict = rng.choice(["A", "B", "tie", None], p=[0.45, 0.4, 0.1, 0.05])
                rows.append((dataset, f"i{i:03d}", group, judges[j], sample, verdict))
    rows = [rows[k] for k in rng.permutation(len(rows))]
    verdicts = pa.table({c: [r[k] for r in rows] for k, c in enumerate(COLUMNS)})
    verdicts = verdicts.set_column(4, "sample", verdicts["sample"].cast(pa.int32()))
    items = sorted({(r[0], r[1]) for r in rows})
    labels = pa.table(
        {
            "dataset": [d for d, _ in items],
            "item_id": [i for _, i in items],
            "label": [["A", "B", "tie", None][k % 4] for k in range(len(items))],
        }
    )
    return verdicts, labels


def as_dense(frame, n_judges: int) -> dict[tuple[str, str], tuple[str, int, tuple[int, ...]]]:
    votes = votes_from_blocks([pa.array(frame[c].to_numpy()) for c in block_columns(n_judges)], n_judges)
    keys = zip(frame["dataset"], frame["item_id"], frame["group_id"], frame["label"], strict=True)
    return {(d, i): (g, int(lab), tuple(v)) for (d, i, g, lab), v in zip(keys, votes.tolist(), strict=True)}


def brute_force(verdicts: pa.Table, labels: pa.Table | None, sample: int) -> dict:
    """Item -> (group, label code, votes) by a loop over the rows: A = 1, B = 0, anything else -1."""
    code = {"A": 1, "B": 0}
    label_of = (
        {}
        if labels is None
        else {
            (d, i): code.get(v, -1)
            for d, i, v in zip(*[labels[c].to_pylist() for c in ("dataset", "item_id", "label")], strict=True)
        }
    )
    out: dict = {}
    for d, i, g, j, s, v in zip(*[verdicts[c].to_pylist() for c in COLUMNS], strict=True):
        if s != sample:
            continue
        votes = out.setdefault((d, i), (g, label_of.get((d, i), -1), [-1] * len(MODEL)))[2]
        if j in MODEL and v in code:
            votes[MODEL.index(j)] = code[v]
    return {k: (g, lab, tuple(v)) for k, (g, lab, v) in out.items()}


def expected(verdicts: pa.Table, labels: pa.Table | None, sample: int) -> dict:
    """The in-memory codec's items, checked against the brute-force loop first."""
    ref = item_votes(verdicts, labels, MODEL, sample=sample)
    keys = ref.keys.to_pydict()
    in_memory = {
        (d, i): (g, int(lab), tuple(v))
        for d, i, g, lab, v in zip(
            keys["dataset"], keys["item_id"], keys["group_id"], ref.labels, ref.votes.tolist(), strict=True
        )
    }
    assert in_memory == brute_force(verdicts, labels, sample)
    return in_memory


@pytest.fixture(scope="module")
def split_dataset(tmp_path_factory) -> tuple[str, pa.Table, pa.Table]:
    """One chunk cut into parts of 37 rows, each written as row groups of 11: items span files and groups."""
    verdicts, labels = random_tables()
    url = str(tmp_path_factory.mktemp("scan") / "data")
    with DatasetWriter(url, rows_per_part=37) as writer:
        writer.write_verdicts(verdicts)
        writer.write_table("labels", labels)
        writer.commit({"adapter": "test"})
    parts = sorted(Path(url).glob("verdicts/*.parquet"))
    for part in parts:
        pq.write_table(pq.read_table(part), part, row_group_size=11)
    assert len(parts) > 10 and pq.ParquetFile(parts[0]).num_row_groups > 1
    return url, read_arrow_table(url, "verdicts", COLUMNS), read_arrow_table(url, "labels")


@pytest.mark.parametrize("sample", [0, 1])
def test_scan_equals_in_memory_codec_across_files_and_row_groups(split_dataset, sample, spark):
    url, verdicts, labels = split_dataset
    items, tally = item_votes_spark(spark, url, read_table(spark, url, "labels"), MODEL, sample=sample)
    got = as_dense(items.toPandas(), len(MODEL))
    want = expected(verdicts, labels, sample)
    assert len(got) == len(want) and got == want
    at_sample = verdicts.filter(pa.compute.equal(verdicts["sample"], sample))
    assert tally.value.rows == at_sample.num_rows  # the checks read this instead of a pre-pass
    assert tally.value.judges == set(at_sample["judge_id"].to_pylist()) and {"x1", "x2"} <= tally.value.judges


def test_scan_without_labels_and_with_the_optional_columns_absent(tmp_path, spark):
    verdicts, _ = random_tables(seed=1, n_items=12)
    verdicts = verdicts.filter(pa.compute.equal(verdicts["sample"], 0)).drop_columns(["group_id", "sample"])
    root = tmp_path / "bare"
    (root / "verdicts").mkdir(parents=True)
    pq.write_table(verdicts, root / "verdicts" / "part-00000.parquet")
    (root / "_SUCCESS").write_text("")
    items, tally = item_votes_spark(spark, str(root), None, MODEL)
    got = as_dense(items.toPandas(), len(MODEL))
    # The contract's defaults: group_id = item_id, every row at sample 0; no labels: -1 everywhere.
    filled = verdicts.append_column("group_id", verdicts["item_id"]).append_column(
        "sample", pa.array(np.zeros(verdicts.num_rows, np.int32))
    )
    assert got == expected(filled.select(COLUMNS), None, 0)
    assert all(g == i for (_, i), (g, _, _) in got.items()) and tally.value.rows == verdicts.num_rows


def test_partial_votes_tally_categories_outside_the_alphabet():
    table = pa.table(
        {
            "dataset": ["d"] * 4,
            "item_id": ["a", "a", "b", "b"],
            "group_id": ["a", "a", "b", "b"],
            "judge_id": ["j00", "j01", "j00", "zz"],
            "verdict": ["A", "C", "D", "B"],
        }
    )
    batch, tally = partial_items(table, pa.array(MODEL), sample=0, dataset=None, binary=True)
    assert tally.rows == 4 and tally.bad_rows == 2 and tally.bad_examples == {"C", "D"}
    assert tally.judges == {"j00", "j01", "zz"}
    votes = votes_from_blocks([batch.column(c) for c in block_columns(len(MODEL))], len(MODEL))
    by_item = dict(zip(batch.column("item_id").to_pylist(), votes[:, :2].tolist(), strict=True))
    assert by_item == {"a": [1, -1], "b": [-1, -1]}  # bad categories and unknown judges are no votes


def test_scan_reads_s3_parts_through_fsspec(split_dataset, s3_server, s3_bucket, spark):
    """The tasks open the parts with the caller's storage options (moto's S3 server on loopback)."""
    _, verdicts, _ = split_dataset
    # Credentials go in the options: Python workers forked before the server's fixture ran lack its environment.
    keys = {"key": os.environ["AWS_ACCESS_KEY_ID"], "secret": os.environ["AWS_SECRET_ACCESS_KEY"]}
    url, options = f"{s3_bucket}/data", {"endpoint_url": s3_server, **keys}
    with DatasetWriter(url, rows_per_part=50, storage_options=options) as writer:
        writer.write_verdicts(verdicts)
        writer.write_table("labels", pa.table({"dataset": ["d1"], "item_id": ["i000"], "label": ["A"]}))
        writer.commit({"adapter": "test"})
    items, tally = item_votes_spark(spark, url, None, MODEL, sample=1, storage_options=options)
    assert as_dense(items.toPandas(), len(MODEL)) == expected(verdicts, None, 1)
    assert tally.value.rows == verdicts.filter(pa.compute.equal(verdicts["sample"], 1)).num_rows
