"""The long adapter: CSV / JSON lines / Parquet, compressed or not, and every rejection leaving nothing under dest."""

from __future__ import annotations

import bz2
import gzip
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import read_dataset_table, read_report
from judgecal_dist.io.ingest import FORMATS, ingest

VERDICTS_CSV = """dataset,item_id,group_id,judge_id,sample,verdict,score,input_tokens
d,007,g1,j1,0,A,0.9,10
d,007,g1,j1,1,,,
d,008,g1,j1,0,B,0.2,12
d,009,,j2,0,tie,0.5,
"""
LABELS_CSV = """dataset,item_id,label,label_score
d,007,A,
d,008,B,1
d,009,,
"""
JUDGES_CSV = "judge_id,family,tier,cost_per_mtok_in,cost_per_mtok_out\nj1,gpt,full,2.5,15\nj2,gpt,mini,,\n"
ROW_COLUMNS = ("dataset", "item_id", "group_id", "judge_id", "sample", "verdict", "score", "input_tokens")
ROWS = [
    dict(zip(ROW_COLUMNS, row, strict=True))
    for row in [
        ("d", "007", "g1", "j1", 0, "A", 0.9, 10),
        ("d", "007", "g1", "j1", 1, None, None, None),
        ("d", "008", "g1", "j1", 0, "B", 0.2, 12),
        ("d", "009", "009", "j2", 0, "tie", 0.5, None),
    ]
]


def _csv_to(fmt, text):
    """Re-encode a CSV text as the bytes of a file in ``fmt``; JSON lines keep ``item_id`` as a JSON string."""
    import pyarrow.csv as pcsv

    table = pcsv.read_csv(
        io.BytesIO(text.encode()),
        convert_options=pcsv.ConvertOptions(
            column_types={"item_id": pa.string(), "group_id": pa.string(), "label": pa.string()},
            null_values=[""],
            strings_can_be_null=True,
        ),
    )
    if fmt == "csv":
        return text.encode()
    if fmt == "jsonl":
        return "".join(
            json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in table.to_pylist()
        ).encode()
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _write_folder(folder, fmt, compression=None, *, verdicts=VERDICTS_CSV, labels=LABELS_CSV, judges=JUDGES_CSV):
    folder.mkdir(parents=True, exist_ok=True)
    compress = {None: lambda b: b, "gz": gzip.compress, "bz2": bz2.compress}[compression]
    suffix = f".{compression}" if compression else ""
    for name, text in (("verdicts", verdicts), ("labels", labels), ("judges", judges)):
        if text is not None:
            (folder / f"{name}.{fmt}{suffix}").write_bytes(compress(_csv_to(fmt, text)))
    return folder


@pytest.mark.parametrize(
    ("fmt", "compression"), [("csv", None), ("csv", "gz"), ("jsonl", "bz2"), ("parquet", None), ("parquet", "gz")]
)
def test_formats_read_alike(tmp_path, fmt, compression):
    src = _write_folder(tmp_path / "src", fmt, compression)
    report = ingest("long", f"file://{src}", str(tmp_path / "out"))
    verdicts = read_dataset_table(str(tmp_path / "out"), "verdicts")
    got = verdicts.select(list(ROWS[0])).to_pylist()
    assert got == ROWS
    labels = read_dataset_table(str(tmp_path / "out"), "labels").to_pylist()
    assert [r["label"] for r in labels] == ["A", "B", None] and [r["label_score"] for r in labels] == [None, 1.0, None]
    judges = read_dataset_table(str(tmp_path / "out"), "judges").to_pylist()
    assert judges[1] == {
        "judge_id": "j2",
        "family": "gpt",
        "tier": "mini",
        "cost_per_mtok_in": None,
        "cost_per_mtok_out": None,
        "cost_per_call": None,
    }
    assert report["rows_read"] == 4 + 3 + 2 and report["missing_verdicts"] == 1 and report["datasets"] == ["d"]
    assert report["rows_written"] == {"verdicts": 4, "labels": 3, "judges": 2}
    assert read_report(str(tmp_path / "out")) == report


def test_dataset_name_fills_a_missing_column(tmp_path):
    no_dataset = "\n".join(line.split(",", 1)[1] for line in VERDICTS_CSV.strip().splitlines()) + "\n"
    labels = "\n".join(line.split(",", 1)[1] for line in LABELS_CSV.strip().splitlines()) + "\n"
    src = _write_folder(tmp_path / "src", "csv", verdicts=no_dataset, labels=labels, judges=None)
    report = ingest("long", str(src), str(tmp_path / "out"), dataset="d")
    assert report["datasets"] == ["d"]
    with pytest.raises(InputError, match=r"verdicts\.csv: dataset: holds \['d'\], but the dataset name given is 'e'"):
        ingest("long", str(_write_folder(tmp_path / "src2", "csv")), str(tmp_path / "out2"), dataset="e")


def _parquet_with_names(names):
    sink = io.BytesIO()
    pq.write_table(pa.table([pa.array(["x"]) for _ in names], names=names), sink)
    return sink.getvalue()


def _truncated_gzip(text):
    return gzip.compress(text.encode() * 200)[:-40]


@pytest.mark.parametrize(
    ("files", "pattern"),
    [
        (
            {"verdicts.csv": VERDICTS_CSV.replace("item_id,", "item,")},
            r"verdicts\.csv: item_id: missing required column",
        ),
        (
            {"verdicts.csv": VERDICTS_CSV + "d,008,g1,j1,0,A,,\n"},
            r"verdicts\.csv: dataset\+item_id\+judge_id\+sample: duplicate keys \(2 rows, e\.g\. \[\{'dataset': 'd', "
            r"'item_id': '008', 'judge_id': 'j1', 'sample': 0\}\]\)",
        ),
        (
            {"verdicts.csv": VERDICTS_CSV.replace(",tie,", ",draw,")},
            r"verdicts\.csv: verdict: unknown categories \['draw'\].*\(1 rows, e\.g\. \[\{.*'item_id': '009'",
        ),
        (
            {"labels.csv": LABELS_CSV + "d,999,A,\n"},
            r"labels\.csv: item_id: labels for items not in verdicts "
            r"\(1 rows, e\.g\. \[\{'dataset': 'd', 'item_id': '999'\}\]",
        ),
        (
            {"verdicts.csv": VERDICTS_CSV.replace(",10\n", ",-10\n")},
            r"verdicts\.csv: input_tokens: values outside \[0, \d+\] \(negative counts\): \[-10\] .*first at row 1\)$",
        ),
        ({"labels.csv": ""}, r"labels\.csv: \(file\): empty file"),
        (
            {"verdicts.csv.gz": _truncated_gzip(VERDICTS_CSV)},
            r"verdicts\.csv\.gz: \(file\): cannot read CSV \(EOFError: Compressed file ended",
        ),
        (
            {"verdicts.jsonl": '{"dataset": "d", "item_id": "1", "judge_id": "j"}\n{"dataset": "d", "item_'},
            r"verdicts\.jsonl: \(file\): cannot read JSON .*row 1",
        ),
        (
            {"verdicts.csv": VERDICTS_CSV.replace("0.9", "high")},
            r"verdicts\.csv: score: cannot cast string to double: values \['high'\]",
        ),
        ({"verdicts.xlsx": "x"}, r"verdicts\.xlsx: \(file\): unknown format"),
        (
            {"verdicts.csv": VERDICTS_CSV.replace("verdict,score", "verdict,verdict")},
            r"verdicts\.csv: verdict: named 2 times in the header \('verdict' x2\); keep one column of each name",
        ),
        (
            {"verdicts.parquet": _parquet_with_names(["dataset", "item_id", "judge_id", "item_id"])},
            r"verdicts\.parquet: \(file\): cannot read PARQUET \(ArrowInvalid: Multiple matches for "
            r"FieldRef\.Name\(item_id\) in dataset: string\)$",
        ),
        (  # two exports concatenated with `cat`: the second header is line 6 (the header is line 1)
            {"verdicts.csv": VERDICTS_CSV + VERDICTS_CSV.replace("d,0", "e,0")},
            r"verdicts\.csv: \(header\): the header line repeats as line 6 \(1 times in all; files concatenated",
        ),
    ],
)
def test_rejections_write_nothing(tmp_path, files, pattern):
    src = _write_folder(tmp_path / "src", "csv", judges=None)
    for name, content in files.items():
        stem = name.split(".", 1)[0]
        (src / f"{stem}.csv").unlink()
        (src / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    dest = tmp_path / "out"
    with pytest.raises(InputError, match=pattern):
        ingest("long", str(src), str(dest))
    assert not dest.exists()


def test_missing_source_and_format(tmp_path):
    with pytest.raises(InputError, match=r"file://.*/does-not-exist: no such file or directory"):
        ingest("long", f"file://{tmp_path}/does-not-exist", str(tmp_path / "out"))
    with pytest.raises(InputError, match=r"verdicts: no verdicts\.<csv\|jsonl\|parquet>\[\.gz\] file"):
        ingest("long", str(_write_folder(tmp_path / "src", "csv", verdicts=None)), str(tmp_path / "out"))
    with pytest.raises(
        InputError, match=r"--format: 'excel': unknown format, expected one of \['llmbar', 'rb2-k8', 'long'\]"
    ):
        ingest("excel", str(tmp_path), str(tmp_path / "out"))
    assert FORMATS == ("llmbar", "rb2-k8", "long")
    assert not (tmp_path / "out").exists()


@pytest.mark.s3
def test_long_folder_on_s3(s3_bucket, tmp_path):
    """Source and destination on the S3 API; the source is a gzip CSV folder uploaded with s3fs."""
    import s3fs

    src = _write_folder(tmp_path / "src", "csv", "gz")
    fs = s3fs.S3FileSystem()
    fs.put(str(src), f"{s3_bucket[5:]}/in", recursive=True)
    report = ingest("long", f"{s3_bucket}/in", f"{s3_bucket}/out")
    assert report["rows_written"] == {"verdicts": 4, "labels": 3, "judges": 2}
    assert read_dataset_table(f"{s3_bucket}/out", "verdicts").select(list(ROWS[0])).to_pylist() == ROWS
    with pytest.raises(InputError, match=r"s3://.*/nothing: no such file or directory"):
        ingest("long", f"{s3_bucket}/nothing", f"{s3_bucket}/out2")


def _parquet_folder(src, name="verdicts.parquet"):
    """verdicts as a folder the way Spark writes one: two parts (the second without ``score``), _SUCCESS, .crc."""
    folder = src / name
    folder.mkdir()
    table = pq.read_table(io.BytesIO(_csv_to("parquet", VERDICTS_CSV)))
    pq.write_table(table.slice(0, 2), folder / "part-00000-a.snappy.parquet")
    pq.write_table(table.slice(2).drop_columns(["score"]), folder / "part-00001-a.snappy.parquet")
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-00000-a.snappy.parquet.crc").write_bytes(b"crc")
    return folder


@pytest.mark.parametrize("name", ["verdicts.parquet", "verdicts"])
def test_parquet_table_folders_read_their_parts_and_skip_hidden_files(tmp_path, name):
    src = _write_folder(tmp_path / "src", "csv")
    (src / "verdicts.csv").unlink()
    _parquet_folder(src, name)
    report = ingest("long", str(src), str(tmp_path / "out"))
    got = read_dataset_table(str(tmp_path / "out"), "verdicts").select(list(ROWS[0])).to_pylist()
    assert got == [dict(row, score=None) if i >= 2 else row for i, row in enumerate(ROWS)]
    assert report["rows_written"]["verdicts"] == 4 and report["files"]["verdicts"].endswith(name)


@pytest.mark.parametrize(
    ("spoil", "pattern"),
    [
        (
            lambda f: (f / "README.md").write_text("notes"),
            r"src: verdicts\.parquet: README\.md: a file that is not a Parquet part; a table folder holds only "
            r"\*\.parquet parts \(names starting with '_' or '\.' are ignored\): move it out of verdicts\.parquet/",
        ),
        (lambda f: (f / "old").mkdir(), r"verdicts\.parquet: old: a folder that is not a Parquet part"),
        (
            lambda f: [p.unlink() for p in f.glob("part-*")],
            r"verdicts\.parquet: \(folder\): no \*\.parquet parts in the table folder",
        ),
        (
            lambda f: (f / "part-00001-a.snappy.parquet").write_bytes(b"PAR1 cut short"),
            r"verdicts\.parquet/part-00001-a\.snappy\.parquet: \(file\): cannot read PARQUET",
        ),
    ],
)
def test_a_foreign_or_broken_table_folder_is_named_and_nothing_is_written(tmp_path, spoil, pattern):
    src = _write_folder(tmp_path / "src", "csv")
    (src / "verdicts.csv").unlink()
    spoil(_parquet_folder(src))
    with pytest.raises(InputError, match=pattern):
        ingest("long", str(src), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_all_null_judges_are_warned_and_refused_when_strict(tmp_path, caplog):
    silent = VERDICTS_CSV + "d,007,g1,j3,0,,,\nd,008,g1,j3,0,,,\n"
    src = _write_folder(tmp_path / "src", "csv", verdicts=silent, judges=None)
    with pytest.raises(InputError, match=r"verdicts\.csv: verdict: 1 judge\(s\) whose every verdict is null.*strict"):
        ingest("long", str(src), str(tmp_path / "strict"), strict=True)
    assert not (tmp_path / "strict").exists()
    report = ingest("long", str(src), str(tmp_path / "out"))
    assert report["all_null_judges"] == {"j3": 2} and report["missing_verdicts"] == 3
    assert len(report["warnings"]) == 1 and "['j3']" in report["warnings"][0]
    assert report["warnings"][0] in caplog.text
    # A judge with one score and no verdict votes: not silent. A clean table has no warning.
    assert ingest("long", str(_write_folder(tmp_path / "ok", "csv")), str(tmp_path / "ok-out"))["warnings"] == []
