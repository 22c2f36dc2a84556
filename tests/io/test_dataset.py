"""The dataset store: layout, commit marker, overwrite rules, streaming writer, and a real S3 API (moto)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import (
    DatasetWriter,
    dataset_files,
    dataset_tables,
    open_fs,
    read_dataset_table,
    read_report,
    write_dataset,
)


@pytest.fixture()
def tables():
    verdicts = pa.table(
        {
            "dataset": ["d"] * 6,
            "item_id": ["i1", "i1", "i2", "i2", "i3", "i3"],
            "judge_id": ["j1", "j2"] * 3,
            "verdict": ["A", "B", None, "tie", "B", "B"],
        }
    )
    labels = pa.table({"dataset": ["d"] * 3, "item_id": ["i1", "i2", "i3"], "label": ["A", "B", None]})
    return {"verdicts": verdicts, "labels": labels}


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_layout_parts_and_roundtrip(tmp_path, tables):
    dest = tmp_path / "ds"
    assert write_dataset(str(dest), tables, {"format": "test"}, rows_per_part=4) == str(dest)
    assert _files(dest) == [
        "_SUCCESS",
        "_ingest.json",
        "labels/part-00000.parquet",
        "verdicts/part-00000.parquet",
        "verdicts/part-00001.parquet",
    ]
    assert [pq.read_metadata(dest / "verdicts" / f).num_rows for f in ("part-00000.parquet", "part-00001.parquet")] == [
        4,
        2,
    ]
    verdicts = read_dataset_table(f"file://{dest}", "verdicts")
    assert verdicts["verdict"].to_pylist() == ["A", "B", None, "tie", "B", "B"]
    assert verdicts["group_id"].to_pylist() == verdicts["item_id"].to_pylist()
    assert read_dataset_table(str(dest), "labels", columns=["item_id"]).column_names == ["item_id"]
    assert dataset_tables(str(dest)) == ["verdicts", "labels"]
    assert dataset_files(f"file://{dest}", "labels") == [f"file://{dest}/labels/part-00000.parquet"]
    report = json.loads((dest / "_ingest.json").read_text())
    assert report == read_report(str(dest))
    assert report["rows_written"] == {"verdicts": 6, "labels": 3} and report["parts"] == {"verdicts": 2, "labels": 1}


def test_overwrite_rules(tmp_path, tables):
    dest = str(tmp_path / "ds")
    write_dataset(dest, tables, {"n": 1})
    with pytest.raises(InputError, match=r"ds: _SUCCESS: already holds a committed dataset; pass overwrite=True"):
        write_dataset(dest, tables, {"n": 2})
    smaller = {"verdicts": tables["verdicts"].slice(0, 2), "labels": tables["labels"].slice(0, 1)}
    write_dataset(dest, smaller, {"n": 3}, overwrite=True)
    assert read_report(dest)["n"] == 3 and read_dataset_table(dest, "verdicts").num_rows == 2
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"home: \(folder\): not empty and not a dataset \(holds \['notes.txt'\]\)"):
        write_dataset(str(foreign), tables, {})
    assert _files(foreign) == ["notes.txt"]


def test_rejected_input_writes_nothing_and_keeps_the_old_dataset(tmp_path, tables):
    dest = tmp_path / "ds"
    write_dataset(str(dest), tables, {"n": 1})
    before = {f: (dest / f).read_bytes() for f in _files(dest)}
    bad = dict(tables, labels=pa.table({"dataset": ["d"], "item_id": ["ghost"], "label": ["A"]}))
    with pytest.raises(InputError, match=r"labels: item_id: labels for items not in verdicts \(1 rows"):
        write_dataset(str(dest), bad, {"n": 2}, overwrite=True)
    assert {f: (dest / f).read_bytes() for f in _files(dest)} == before


def test_uncommitted_and_missing(tmp_path, tables):
    with pytest.raises(InputError, match=r"nowhere: no such file or directory"):
        read_dataset_table(str(tmp_path / "nowhere"), "verdicts")
    half = tmp_path / "half"
    (half / "verdicts").mkdir(parents=True)
    pq.write_table(tables["verdicts"], half / "verdicts" / "part-00000.parquet")
    with pytest.raises(InputError, match=r"half: _SUCCESS: not a committed dataset: run `judgecal ingest`"):
        dataset_files(str(half), "verdicts")
    write_dataset(str(half), tables, {})  # a half-written dataset is replaced without overwrite=True
    assert read_dataset_table(str(half), "verdicts").num_rows == 6
    with pytest.raises(InputError, match=r"half: judges: table not in dataset \(present: \['verdicts', 'labels'\]\)"):
        read_dataset_table(str(half), "judges")
    with pytest.raises(InputError, match=r"nosuchproto://x: cannot open this URL"):
        open_fs("nosuchproto://x")


def test_streaming_writer_checks_chunks_and_cleans_up(tmp_path, tables):
    dest = tmp_path / "stream"
    verdicts = tables["verdicts"]
    with DatasetWriter(str(dest), rows_per_part=10) as writer:
        writer.write_verdicts(verdicts.slice(0, 4))
        writer.write_verdicts(verdicts.slice(4))
        writer.write_table("labels", tables["labels"])
        report = writer.commit({"format": "stream"})
    assert report["parts"] == {"verdicts": 2, "labels": 1}
    assert read_dataset_table(str(dest), "verdicts")["item_id"].to_pylist() == verdicts["item_id"].to_pylist()

    again = tmp_path / "again"
    split = r"verdicts \(items across chunks\): dataset\+item_id: duplicate keys .*'i2'"
    with pytest.raises(InputError, match=split), DatasetWriter(str(again)) as writer:
        writer.write_verdicts(verdicts.slice(0, 3))
        writer.write_verdicts(verdicts.slice(3))  # i2 is split across the two chunks
        writer.write_table("labels", tables["labels"])
    assert not again.exists()
    bad_chunk = verdicts.set_column(3, "verdict", pa.array(["A", "B", "C", None, "A", "A"]))
    unknown = r"verdicts chunk 1: verdict: unknown categories \['C'\]"
    with pytest.raises(InputError, match=unknown), DatasetWriter(str(again)) as writer:
        writer.write_verdicts(verdicts.slice(0, 2))
        writer.write_verdicts(bad_chunk.slice(2))
    assert not again.exists()
    with DatasetWriter(str(again)) as writer:  # closed without commit: nothing stays
        writer.write_verdicts(verdicts)
    assert not again.exists()


@pytest.mark.s3
def test_s3_roundtrip(s3_bucket, tables):
    """Write and read a dataset through s3fs against moto's S3 server; the endpoint comes from AWS_ENDPOINT_URL."""
    url = f"{s3_bucket}/panels/ds"
    write_dataset(url, tables, {"format": "test"})
    fs, root = open_fs(url)
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.find(root)) == sorted(
        ["_SUCCESS", "_ingest.json", "part-00000.parquet", "part-00000.parquet"]
    )
    assert dataset_files(url, "verdicts") == [f"{url}/verdicts/part-00000.parquet"]
    assert read_dataset_table(url, "verdicts")["verdict"].to_pylist() == tables["verdicts"]["verdict"].to_pylist()
    assert read_report(url)["rows_written"] == {"verdicts": 6, "labels": 3}
    with pytest.raises(InputError, match=r"_SUCCESS: already holds a committed dataset"):
        write_dataset(url, tables, {})
    with pytest.raises(InputError, match=r"s3://.*/panels/missing: no such file or directory"):
        read_dataset_table(f"{s3_bucket}/panels/missing", "verdicts")
    bad = dict(tables, labels=pa.table({"dataset": ["d"], "item_id": ["ghost"], "label": ["A"]}))
    with pytest.raises(InputError, match=r"labels for items not in verdicts"):
        write_dataset(f"{s3_bucket}/panels/bad", bad, {})
    fs.invalidate_cache()
    assert not fs.exists(f"{root.rsplit('/', 1)[0]}/bad")


def _read_with(reader, url, table, spark=None):
    """Rows of a stored table through the in-process reader or Spark's (both list parts with table_parts)."""
    if reader == "arrow":
        return sorted(read_dataset_table(url, table).to_pylist(), key=str)
    from judgecal_dist.engine.jobs.spark import read_table

    return sorted((row.asDict() for row in read_table(spark, url, table).collect()), key=str)


@pytest.fixture(params=["arrow", "spark"])
def reader(request):
    """Each reader, with the session it needs (Spark's is started only for its own case)."""
    if request.param == "spark":
        pytest.importorskip("pyspark")
        return request.param, request.getfixturevalue("spark")
    return request.param, None


def test_hidden_entries_of_a_table_folder_are_ignored_by_every_reader(tmp_path, tables, reader):
    name, session = reader
    dest = tmp_path / "ds"
    write_dataset(str(dest), tables, {}, rows_per_part=4)
    expected = _read_with(name, str(dest), "verdicts", session)
    # (A .crc beside a real part is not used here: Hadoop's local filesystem would check that part against it.)
    for hidden in ("_SUCCESS", "_committed_123", ".part-00009.parquet.crc", ".DS_Store"):
        (dest / "verdicts" / hidden).write_bytes(b"not a part")
    (dest / "verdicts" / "_temporary").mkdir()
    assert _read_with(name, str(dest), "verdicts", session) == expected
    assert len(expected) == 6


@pytest.mark.parametrize(
    ("entry", "pattern"),
    [
        (
            "README.md",
            r"ds: verdicts: README\.md: a file that is not a Parquet part; a table folder holds only "
            r"\*\.parquet parts \(names starting with '_' or '\.' are ignored\): move it out of verdicts/$",
        ),
        ("verdicts.csv", r"ds: verdicts: verdicts\.csv: a file that is not a Parquet part"),
        ("dataset=d/", r"ds: verdicts: dataset=d: a folder that is not a Parquet part"),
        ("part-00002.parquet", r"ds: verdicts: part-00002\.parquet: not a readable Parquet file \(Parquet magic"),
    ],
)
def test_a_foreign_or_broken_entry_of_a_table_folder_is_named_by_every_reader(tmp_path, tables, reader, entry, pattern):
    name, session = reader
    dest = tmp_path / "ds"
    write_dataset(str(dest), tables, {}, rows_per_part=4)
    path = dest / "verdicts" / entry
    if entry.endswith("/"):
        path.mkdir()
    else:  # a part cut short, or a file that is no part at all
        path.write_bytes((dest / "verdicts" / "part-00000.parquet").read_bytes()[:200] if "part" in entry else b"x")
    with pytest.raises(InputError, match=pattern):
        _read_with(name, str(dest), "verdicts", session)
    if "part" not in entry:  # listing alone names a foreign entry; a broken part is found by its footer
        with pytest.raises(InputError, match=pattern):
            dataset_files(str(dest), "verdicts")


def test_a_part_broken_after_a_first_read_is_still_named(tmp_path, tables):
    """Footers are checked once per listing (paths, sizes, change stamps): a part rewritten since is checked again."""
    dest = tmp_path / "ds"
    write_dataset(str(dest), tables, {}, rows_per_part=4)
    assert read_dataset_table(str(dest), "verdicts").num_rows == 6
    part = dest / "verdicts" / "part-00001.parquet"
    blob = part.read_bytes()
    part.write_bytes(blob[:-8] + b"\0" * 8)  # same size, footer magic gone: only the change stamp differs
    os.utime(part, ns=(part.stat().st_atime_ns, part.stat().st_mtime_ns + 1_000_000))
    with pytest.raises(InputError, match=r"ds: verdicts: part-00001\.parquet: not a readable Parquet file"):
        read_dataset_table(str(dest), "verdicts")
    part.write_bytes(blob[: len(blob) // 2])  # cut short: the size differs
    with pytest.raises(InputError, match=r"part-00001\.parquet: not a readable Parquet file"):
        read_dataset_table(str(dest), "verdicts", columns=["item_id"])
