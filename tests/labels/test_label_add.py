"""``judgecal label add`` as a user reaches it: the labelling loop typed from another folder with relative paths
(generate -> fit -> label select -> the queue's label column filled -> label add -> label estimate), the file
formats ingest takes, and every refusal (exit 2, the dataset byte for byte as it was). The truth: the same generated
panel with every label (``--label-fraction 1.0``; the same seed gives the same verdicts and truths)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.io.filesystem import fingerprint_inputs
from judgecal_dist.labels.add import REPLACED, _restore


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _listing(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder`` with its bytes and modification time: a created, changed or removed file shows."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
    }


def _summary(output: str) -> dict:
    return json.loads(next(line for line in output.splitlines() if line.startswith("{")))


def _truth(full: Path | str) -> pd.Series:
    labels = pd.read_parquet(Path(full) / "labels")
    return labels.set_index("item_id")["label"]


def test_the_labelling_loop_from_another_folder(tmp_path, monkeypatch) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "desk").mkdir()
    monkeypatch.chdir(tmp_path / "desk")
    common = ["generate", "--items", "1500", "--judges", "5", "--seed", "7"]
    assert invoke(*common, "--label-fraction", "0.1", "../store/panel").exit_code == 0
    assert invoke(*common, "../store/full").exit_code == 0
    pd.testing.assert_frame_equal(pd.read_parquet("../store/panel/verdicts"), pd.read_parquet("../store/full/verdicts"))
    fitted = invoke("fit", "--data", "../store/panel", "--output", "../store/results", "--serial")
    assert fitted.exit_code == 0, fitted.output
    run = fitted.output.strip().splitlines()[-1]
    selected = invoke("label", "select", "--model", run, "--data", "../store/panel", "--budget", "40", "--output", "q1")
    assert selected.exit_code == 0, selected.output
    estimate = ["label", "estimate", "--model", run, "--data", "../store/panel", "--queue", "q1"]
    pending = CliRunner().invoke(cli, [*estimate, "--output", "est0"])
    assert pending.exit_code == 2 and "have no label" in pending.output  # the labels are not back yet
    truth, before = _truth("../store/full"), pd.read_parquet("../store/panel/labels")
    fingerprint = fingerprint_inputs("../store/panel")["sha256"]

    # The labeller fills the queue's label column in place; two labels are not back yet (blank).
    queue = pd.read_csv("q1/queue.csv", dtype={"item_id": str})
    queue["label"] = truth.reindex(queue["item_id"]).to_numpy()
    queue.loc[queue.index[:2], "label"] = None
    queue.to_csv("q1/queue.csv", index=False)
    first = invoke("label", "add", "--data", "../store/panel", "--labels", "q1/queue.csv")
    assert first.exit_code == 0, first.output
    assert first.output.strip().endswith("../store/panel")
    assert _summary(first.output) == {
        "added": len(queue) - 2,
        "replaced": 0,
        "unchanged": 0,
        "blank": 2,
        "total_labelled": int(before["label"].notna().sum()) + len(queue) - 2,
        "written": True,
    }
    queue["label"] = truth.reindex(queue["item_id"]).to_numpy()  # the last two came back
    queue.to_csv("q1/queue.csv", index=False)
    second = invoke("label", "add", "--data", "../store/panel", "--labels", "q1/queue.csv")
    assert _summary(second.output) | {"total_labelled": 0} == {
        "added": 2, "replaced": 0, "unchanged": len(queue) - 2, "blank": 0, "total_labelled": 0, "written": True
    }  # fmt: skip

    # The labels table: the truth on the earlier labelled items and the queue's, null elsewhere; rows in order.
    after = pd.read_parquet("../store/panel/labels")
    assert list(after["item_id"]) == list(before["item_id"])
    labelled = before["label"].notna() | before["item_id"].isin(queue["item_id"])
    expected = truth.reindex(before["item_id"]).where(labelled.to_numpy())
    assert after["label"].tolist() == [v if isinstance(v, str) else None for v in expected]
    report = json.loads(Path("../store/panel/_ingest.json").read_text())
    assert [entry["added"] for entry in report["labels_added"]] == [len(queue) - 2, 2]
    assert report["rows_written"]["labels"] == len(after) and Path("../store/panel/_SUCCESS").exists()
    assert not any(p.name.startswith("_labels.") for p in Path("../store/panel").iterdir())
    assert fingerprint_inputs("../store/panel")["sha256"] != fingerprint  # every later command sees changed input

    # label estimate counts the new labels: every labelled item, the queue's at their inclusion probability.
    done = invoke(*estimate, "--output", "est")
    assert done.exit_code == 0, done.output
    record = json.loads(Path("est/estimates.json").read_text())
    assert record["counts"]["labelled_in_queue"] == len(queue) and record["counts"]["queued_without_label"] == 0
    frame = pd.read_parquet("est/estimates.parquet").set_index("target")
    assert frame.loc["win_rate", "n_labels"] == int(labelled.sum())

    # The same labels again: a no-op that says so, the dataset untouched (bytes and times).
    listing = _listing(tmp_path / "store" / "panel")
    again = invoke("label", "add", "--data", "../store/panel", "--labels", "q1/queue.csv")
    assert again.exit_code == 0 and _summary(again.output)["written"] is False
    assert "present already; nothing written" in again.output
    assert _listing(tmp_path / "store" / "panel") == listing


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A generated panel with a fifth of its labels, and the same panel fully labelled (the truth)."""
    root = tmp_path_factory.mktemp("small")
    common = ["generate", "--items", "200", "--judges", "4", "--seed", "5"]
    assert invoke(*common, "--label-fraction", "0.2", str(root / "panel")).exit_code == 0
    assert invoke(*common, str(root / "full")).exit_code == 0
    return root


@pytest.fixture()
def panel(small, tmp_path) -> Path:
    return Path(shutil.copytree(small / "panel", tmp_path / "panel"))


def _unlabelled(small: Path, n: int) -> pd.DataFrame:
    labels = pd.read_parquet(small / "panel" / "labels")
    rows = labels[labels["label"].isna()].head(n)[["item_id"]].copy()
    rows["truth"] = _truth(small / "full").reindex(rows["item_id"]).to_numpy()
    return rows


def test_json_lines_with_1_0_and_parquet_in_crowdkit_layout_with_scores(small, panel, tmp_path) -> None:
    rows = _unlabelled(small, 6)
    coded = rows.iloc[:3].assign(label=(rows["truth"].iloc[:3] == "A").astype(int))  # 1 = A, no dataset column
    coded[["item_id", "label"]].to_json(tmp_path / "back.jsonl", orient="records", lines=True)
    result = invoke("label", "add", "--data", str(panel), "--labels", str(tmp_path / "back.jsonl"))
    assert result.exit_code == 0, result.output and _summary(result.output)["added"] == 3
    crowd = pd.DataFrame({"task": rows["item_id"].iloc[3:], "label": rows["truth"].iloc[3:], "label_score": 0.9})
    crowd.to_parquet(tmp_path / "back.parquet", index=False)
    result = invoke("label", "add", "--data", str(panel), "--labels", str(tmp_path / "back.parquet"))
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(panel / "labels").set_index("item_id")
    assert table.loc[rows["item_id"], "label"].tolist() == rows["truth"].tolist()
    assert table.loc[rows["item_id"], "label_score"].isna().tolist() == [True] * 3 + [False] * 3


def test_a_differing_label_is_refused_unless_overwrite(small, panel, tmp_path) -> None:
    labels = pd.read_parquet(panel / "labels")
    present = labels[labels["label"].notna()].head(2)
    flipped = present.assign(label=present["label"].map({"A": "B", "B": "A"}))[["item_id", "label"]]
    flipped.to_csv(tmp_path / "fix.csv", index=False)
    listing = _listing(panel)
    refused = CliRunner().invoke(cli, ["label", "add", "--data", str(panel), "--labels", str(tmp_path / "fix.csv")])
    assert refused.exit_code == 2 and "2 labels differ" in refused.output and "first at row 1" in refused.output
    assert "--overwrite-labels" in refused.output and _listing(panel) == listing
    args = ["label", "add", "--data", str(panel), "--labels", str(tmp_path / "fix.csv"), "--overwrite-labels"]
    done = invoke(*args)
    assert _summary(done.output)["replaced"] == 2 and _summary(done.output)["added"] == 0
    table = pd.read_parquet(panel / "labels").set_index("item_id")
    assert table.loc[flipped["item_id"], "label"].tolist() == flipped["label"].tolist()
    assert table.loc[flipped["item_id"], "label_score"].isna().all()


def _write(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text)
    return str(tmp / name)


def _two_datasets(tmp: Path) -> str:
    src = tmp / "src"
    src.mkdir()
    (src / "verdicts.csv").write_text("dataset,item_id,judge_id,verdict\nd1,i1,j1,A\nd2,i1,j1,B\n")
    assert invoke("ingest", "--format", "long", str(src), str(tmp / "two")).exit_code == 0
    return str(tmp / "two")


def _uncommitted(panel: Path) -> str:
    (panel / "_SUCCESS").unlink()
    return str(panel)


def _labels_folder_with(panel: Path, name: str) -> str:
    (panel / "labels" / name).write_text("notes")
    return str(panel)


def _queue_folder(tmp: Path) -> str:
    (tmp / "q").mkdir()
    (tmp / "q" / "_SUCCESS").write_text("")
    (tmp / "q" / "queue.csv").write_text("dataset,item_id\n")
    return str(tmp / "q")


def _one(ids: list[str]) -> str:
    return f"item_id,label\n{ids[0]},A\n"


def _leftover(panel: Path) -> str:
    shutil.copytree(panel / "labels", panel / REPLACED)
    return str(panel)


#: case -> (the labels file's text from two unlabelled item ids, what --data becomes (None: the panel), message)
CASES: dict[str, tuple[Callable[[list[str]], str], Callable[[Path], str] | None, str]] = {
    "unknown-item": (
        lambda u: f"item_id,label\n{u[0]},A\nnope,B\n",
        None,
        r"item_id: 1 items not in .*first at row 2\): label only",
    ),
    "duplicate-item": (
        lambda u: f"item_id,label\n{u[0]},A\n{u[1]},B\n{u[0]},\n",
        None,
        r"item_id: 1 items listed more than once \(2 rows.*first at row 1\): keep one row per item",
    ),
    "empty-file": (lambda u: "", None, r"l.csv: \(file\): empty file: write a header"),
    "header-only": (lambda u: "item_id,label\n", None, r"no rows \(a header only\)"),
    "no-label-column": (lambda u: f"item_id,p\n{u[0]},0.5\n", None, "label: no label column .*fill its label column"),
    "all-blank": (lambda u: f"item_id,label\n{u[0]},\n", None, r"every label is blank \(1 rows\)"),
    "unknown-category": (lambda u: f"item_id,label\n{u[0]},maybe\n", None, r"label: unknown categories \['maybe'\]"),
    "not-committed": (_one, _uncommitted, "_SUCCESS: not a committed dataset"),
    "a-queue-folder": (_one, lambda p: _queue_folder(p.parent), "_ingest.json: not a judgecal dataset"),
    "foreign-file-in-labels": (
        _one,
        lambda p: _labels_folder_with(p, ".notes"),
        "labels: .notes: not a part judgecal wrote",
    ),
    "leftover-swap": (_one, _leftover, "_labels.replaced: left by an interrupted label add"),
    "several-datasets": (
        lambda u: "item_id,label\ni1,A\n",
        lambda p: _two_datasets(p.parent),
        r"dataset: no dataset column, and .* holds 2 datasets \['d1', 'd2'\]",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refusals_exit_2_and_leave_the_dataset_as_it_was(small, panel, tmp_path, case) -> None:
    text, make_data, message = CASES[case]
    labels = _write(tmp_path, "l.csv", text(_unlabelled(small, 2)["item_id"].tolist()))
    data = make_data(panel) if make_data else str(panel)
    listing = _listing(Path(data))
    result = CliRunner().invoke(cli, ["label", "add", "--data", data, "--labels", labels])
    assert result.exit_code == 2, result.output
    assert re.search(message, result.output), result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1 and "Traceback" not in result.output
    assert _listing(Path(data)) == listing


@pytest.mark.parametrize("stopped", ["after-moving-out", "while-copying-aside"])
def test_a_failed_swap_puts_the_old_table_and_report_back(panel, stopped) -> None:
    """The states a swap can stop in (``_SUCCESS`` gone, the report rewritten): the old table moved aside whole and
    a new one (part) in place, or an object store's copy aside stopped part way with the old table in place.
    Restoring gives the dataset back as it was, byte for byte."""
    from judgecal_dist.io.filesystem import open_fs

    before = {k: v[0] for k, v in _listing(panel).items()}
    report = (panel / "_ingest.json").read_bytes()
    if stopped == "after-moving-out":
        (panel / "labels").rename(panel / REPLACED)
        (panel / "labels").mkdir()
        (panel / "labels" / "part-00000.parquet").write_bytes(b"half")
    else:
        (panel / REPLACED).mkdir()
        (panel / REPLACED / "part-00007.parquet").write_bytes(b"half")
    (panel / "_ingest.json").write_text("{}")
    (panel / "_SUCCESS").unlink()
    fs, root = open_fs(str(panel))
    _restore(fs, root, old_parts={"part-00000.parquet"}, old_report=report)
    assert {k: v[0] for k, v in _listing(panel).items()} == before
    assert not [p.name for p in panel.iterdir() if p.name.startswith("_labels.")]


def test_on_s3_with_a_local_file(small, tmp_path, s3_server, s3_bucket) -> None:
    """A dataset on S3 (moto's server), the returned labels in a local file: the same merge, the swap done there."""
    import s3fs

    from judgecal_dist.labels.add import add_labels

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server})
    fs.put(str(small / "panel"), f"{s3_bucket}/panel", recursive=True)
    rows = _unlabelled(small, 5)
    rows.rename(columns={"truth": "label"}).to_csv(tmp_path / "back.csv", index=False)
    options = {"endpoint_url": s3_server}
    url = f"{s3_bucket}/panel"
    summary = add_labels(url, str(tmp_path / "back.csv"), storage_options=options)
    assert summary["added"] == 5 and summary["written"] is True
    fs.invalidate_cache()
    names = {p.removeprefix(f"{s3_bucket[5:]}/panel/") for p in fs.find(url)}
    assert "_SUCCESS" in names and "labels/part-00000.parquet" in names
    assert not any(name.startswith("_labels.") for name in names)
    with fs.open(f"{url}/labels/part-00000.parquet", "rb") as fh:
        table = pd.read_parquet(fh).set_index("item_id")
    assert table.loc[rows["item_id"], "label"].tolist() == rows["truth"].tolist()
    local = pd.read_parquet(small / "panel" / "labels").set_index("item_id")
    assert table.drop(index=rows["item_id"])["label"].equals(local.drop(index=rows["item_id"])["label"])
    assert add_labels(url, str(tmp_path / "back.csv"), storage_options=options)["written"] is False


def test_items_the_labels_table_lacks_are_appended(tmp_path) -> None:
    """An ingested dataset whose labels file named some items only: labels for the others are appended as rows."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "verdicts.csv").write_text("item_id,judge_id,verdict\n007,j1,A\ni2,j1,B\ni3,j1,A\n")
    (src / "labels.csv").write_text("item_id,label,label_score\n007,A,0.8\n")
    assert invoke("ingest", "--format", "long", str(src), str(tmp_path / "d")).exit_code == 0
    (tmp_path / "back.csv").write_text("item_id,label\ni3,1\n007,A\n")
    result = invoke("label", "add", "--data", str(tmp_path / "d"), "--labels", str(tmp_path / "back.csv"))
    assert _summary(result.output) == {
        "added": 1, "replaced": 0, "unchanged": 1, "blank": 0, "total_labelled": 2, "written": True
    }  # fmt: skip
    table = pq.read_table(tmp_path / "d" / "labels")
    assert table.to_pylist() == [
        {"dataset": "src", "item_id": "007", "label": "A", "label_score": 0.8},
        {"dataset": "src", "item_id": "i3", "label": "A", "label_score": None},
    ]
    report = json.loads((tmp_path / "d" / "_ingest.json").read_text())
    assert report["rows_written"]["labels"] == 2 and report["inputs"]["labels_added"] == [
        report["labels_added"][0]["file_sha256"]
    ]
    # the dataset is no longer what its source alone makes: ingesting the source again is refused, not "complete"
    again = CliRunner().invoke(cli, ["ingest", "--format", "long", str(src), str(tmp_path / "d")])
    assert again.exit_code == 2 and "differing: labels_added" in again.output
