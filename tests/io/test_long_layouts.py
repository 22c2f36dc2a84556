"""What users hold, through ``ingest --format long``: crowd-kit's layout, unlabelled batches, labels kept apart.

The reference for every layout is the same panel written by hand in the contract's own layout; datasets are compared
as stored (the Parquet tables a run reads), sorted by their keys.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.long import category, long_columns
from judgecal_dist.io.column_docs import LONG_INPUT_DOCS, LONG_INPUT_RULES
from judgecal_dist.io.dataset import read_dataset_table, read_report
from judgecal_dist.io.ingest import ingest

DOC = Path(__file__).resolve().parents[2] / "docs" / "tables.md"
#: The panel by hand: (item, judge, verdict) and (item, label); None = missing / unlabelled.
VOTES = [("t1", "w1", "A"), ("t1", "w2", "B"), ("t2", "w1", "B"), ("t2", "w2", "B"), ("t3", "w1", "A")]
TRUTH = [("t1", "A"), ("t2", "B"), ("t3", "A")]
BINARY = {"A": "1", "B": "0"}


def _ours(folder: Path, *, labels: bool = True) -> Path:
    folder.mkdir(parents=True)
    rows = "".join(f"d,{i},{j},{v}\n" for i, j, v in VOTES)
    (folder / "verdicts.csv").write_text("dataset,item_id,judge_id,verdict\n" + rows)
    if labels:
        (folder / "labels.csv").write_text("dataset,item_id,label\n" + "".join(f"d,{i},{y}\n" for i, y in TRUTH))
    return folder


def _crowdkit_csv(path: Path, binary: bool) -> Path:
    code = BINARY.get if binary else (lambda v: v)
    path.write_text("task,worker,label\n" + "".join(f"{i},{j},{code(v)}\n" for i, j, v in VOTES))
    return path


def _truth_csv(path: Path, binary: bool) -> Path:
    code = BINARY.get if binary else (lambda v: v)
    path.write_text("task,label\n" + "".join(f"{i},{code(y)}\n" for i, y in TRUTH))
    return path


def _stored(dest: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    verdicts = read_dataset_table(str(dest), "verdicts").to_pandas()
    labels = read_dataset_table(str(dest), "labels").to_pandas()
    return (
        verdicts.sort_values(["item_id", "judge_id"]).reset_index(drop=True),
        labels.sort_values("item_id").reset_index(drop=True),
    )


@pytest.mark.parametrize("binary", [True, False], ids=["0/1", "A/B"])
def test_crowdkit_layout_gives_the_dataset_of_the_equivalent_long_layout(tmp_path, binary):
    ingest("long", str(_ours(tmp_path / "ours")), str(tmp_path / "ref"))
    reference = _stored(tmp_path / "ref")
    src = tmp_path / "ck"
    src.mkdir()
    _crowdkit_csv(src / "verdicts.csv", binary)
    _truth_csv(src / "labels.csv", binary)
    ingest("long", str(src), str(tmp_path / "out"), dataset="d")
    got = _stored(tmp_path / "out")
    for ref, out in zip(reference, got, strict=True):
        pd.testing.assert_frame_equal(out, ref)
    assert got[0]["verdict"].tolist() == [v for _, _, v in sorted(VOTES)]  # 1 -> A, 0 -> B, by hand


def test_labels_from_a_separate_file_equal_labels_inline(tmp_path):
    inline = _ours(tmp_path / "inline")
    ingest("long", str(inline), str(tmp_path / "a"))
    apart = _ours(tmp_path / "apart", labels=False)
    (tmp_path / "truth.csv").write_text((inline / "labels.csv").read_text())
    report = ingest("long", str(apart), str(tmp_path / "b"), labels=str(tmp_path / "truth.csv"))
    assert report["unlabelled"] is False and report["files"]["labels"] == str(tmp_path / "truth.csv")
    for a, b in zip(_stored(tmp_path / "a"), _stored(tmp_path / "b"), strict=True):
        pd.testing.assert_frame_equal(a, b)
    # a single crowd-kit file plus its ground truth, the dataset named by the file: the same labels
    ck = ingest(
        "long",
        str(_crowdkit_csv(tmp_path / "weekly.csv", True)),
        str(tmp_path / "c"),
        labels=str(_truth_csv(tmp_path / "gt.csv", True)),
    )
    assert ck["datasets"] == ["weekly"]
    labels = _stored(tmp_path / "c")[1]
    assert labels["label"].tolist() == [y for _, y in TRUTH] and set(labels["dataset"]) == {"weekly"}


def test_labels_in_the_folder_and_from_a_file_are_refused(tmp_path):
    src = _ours(tmp_path / "src")
    with pytest.raises(InputError, match=r"labels\.csv: \(file\): labels in the source folder and from --labels"):
        ingest("long", str(src), str(tmp_path / "out"), labels=str(src / "labels.csv"))
    with pytest.raises(InputError, match=r"--labels: .*: a separate labels file is read with --format long only"):
        ingest("llmbar", str(src), str(tmp_path / "out"), labels=str(src / "labels.csv"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "labels_csv",
    [None, "dataset,item_id,label\n", "dataset,item_id\nd,t1\nd,t2\n"],
    ids=["none", "no-rows", "no-label"],
)
def test_an_unlabelled_batch_stores_every_item_unlabelled(tmp_path, labels_csv):
    src = _ours(tmp_path / "src", labels=False)
    if labels_csv is not None:
        (src / "labels.csv").write_text(labels_csv)
    report = ingest("long", str(src), str(tmp_path / "out"))
    verdicts, labels = _stored(tmp_path / "out")
    assert len(verdicts) == len(VOTES)
    expected_items = ["t1", "t2"] if labels_csv and "d,t1" in labels_csv else ["t1", "t2", "t3"]
    assert labels["item_id"].tolist() == expected_items and labels["label"].isna().all()
    assert report["unlabelled"] is (labels_csv is None or "d,t1" not in labels_csv)
    assert read_report(str(tmp_path / "out"))["rows_written"]["labels"] == len(expected_items)


def test_an_unlabelled_batch_without_item_ids_is_named(tmp_path):
    path = tmp_path / "votes.csv"
    path.write_text("item,judge_id,verdict\nt1,w1,A\n")
    with pytest.raises(InputError, match=r"votes\.csv: item_id: missing required column \(found \['item', 'judge_id'"):
        ingest("long", str(path), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_table_mixing_both_layouts_is_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "verdicts.csv").write_text("task,item_id,worker,label\nt1,t1,w1,1\n")
    with pytest.raises(InputError, match=r"verdicts\.csv: item_id: mixes crowd-kit's layout .* with ours; keep one"):
        ingest("long", str(src), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("rows", "pattern"),
    [
        ("t1,w1,2\n", r"verdict: unknown categories \['2'\]"),
        ("t1,w1,true\n", r"verdict: unknown categories \['true'\]"),
        ("t1,w1,1.0\n", r"verdict: unknown categories \['1\.0'\]"),
    ],
)
def test_other_codes_are_named_not_guessed(tmp_path, rows, pattern):
    path = tmp_path / "votes.csv"
    path.write_text("task,worker,label\nt0,w1,1\n" + rows)
    with pytest.raises(InputError, match=r"votes\.csv: " + pattern + r".*first at row 2\)$"):
        ingest("long", str(path), str(tmp_path / "out"))


def test_one_mapping_for_the_notebook_and_ingest():
    assert long_columns(["task", "worker", "label"], "verdicts", source="f") == {
        "task": "item_id",
        "worker": "judge_id",
        "label": "verdict",
    }
    assert long_columns(["task", "label"], "labels", source="f") == {"task": "item_id", "label": "label"}
    assert long_columns(["item_id", "judge_id", "verdict"], "verdicts", source="f") == {
        "item_id": "item_id",
        "judge_id": "judge_id",
        "verdict": "verdict",
    }
    assert [category(v) for v in ("A", "B", "tie", 1, 0, "1", "0", 1.0, None, float("nan"), True)] == [
        "A", "B", "tie", "A", "B", "A", "B", "A", None, None, "True",
    ]  # fmt: skip


def test_the_long_format_is_documented_in_tables_md_and_in_ingest_help():
    text = DOC.read_text()
    for table, (columns, meaning) in LONG_INPUT_DOCS.items():
        assert f"| `{table}` | {columns} | {meaning} |" in text
    for rule in LONG_INPUT_RULES:
        assert f"- {rule}." in text
    help_text = " ".join(CliRunner().invoke(cli, ["ingest", "--help"]).output.split())
    for table, (columns, meaning) in LONG_INPUT_DOCS.items():
        assert f"{table}: {columns}." in help_text
        assert meaning[1:] in help_text
    for rule in LONG_INPUT_RULES:
        assert rule in help_text
    assert re.search(r"--labels FILE", help_text)
