"""Probes of ingest and of the dataset folders a run reads: what a user does by accident.

Each probe drives the real command (click's runner, in-process) on copies of real LLMBar files (skipped when the
release is absent) or on small hand-written sources, and checks what the user sees (exit code, one named line,
no traceback) and what is left on disk. References are independent of the code under test: file listings of the
copied release, row counts written by hand, a run on the same data without the accident.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority]", "calibrators=[none]", "panels=[all]", "permutation_resamples=100", "replicates=2"]
VERDICTS = "dataset,item_id,judge_id,sample,verdict\nd,i1,j1,0,A\nd,i1,j2,0,B\nd,i2,j1,0,B\nd,i2,j2,0,\n"
LABELS = "dataset,item_id,label\nd,i1,A\nd,i2,B\n"
SUBSETS = {"Natural": 100, "Adversarial/GPTOut": 47}  # items per subset, from the release's dataset files
STRATEGIES = ("GPT-4/Vanilla", "GPT-4/Swap", "ChatGPT/Vanilla")


def _invoke(*argv: str):
    return CliRunner().invoke(cli, list(argv))


def _refused(result, pattern: str) -> str:
    """The one error line of a refused command (exit 2, no traceback), checked against ``pattern``."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert re.search(pattern, errors[0]), errors[0]
    return errors[0]


def _report(result) -> dict:
    """The ingest report stored in the dataset, whose URL ingest prints last (a summary before it)."""
    return json.loads((Path(result.stdout.strip().splitlines()[-1]) / "_ingest.json").read_text())


@pytest.fixture()
def release(llmbar_dir, tmp_path) -> Path:
    """Two subsets of the real release with three strategies each, copied file by file."""
    root = tmp_path / "release"
    for subset in SUBSETS:
        (root / subset).mkdir(parents=True)
        shutil.copyfile(llmbar_dir / subset / "dataset.json.gz", root / subset / "dataset.json.gz")
        for strategy in STRATEGIES:
            folder = root / subset / "evaluators" / strategy
            folder.mkdir(parents=True)
            shutil.copyfile(llmbar_dir / subset / "evaluators" / strategy / "result.json.gz", folder / "result.json.gz")
    return root


def _long(tmp_path: Path, verdicts: str = VERDICTS) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "verdicts.csv").write_text(verdicts)
    (src / "labels.csv").write_text(LABELS)
    return src


# -- LLMBar: a strategy file missing from one subset --------------------------------------------------------------
def test_a_missing_strategy_file_is_reported_per_judge_not_dropped_silently(release, tmp_path):
    (release / "Adversarial/GPTOut/evaluators/ChatGPT/Vanilla/result.json.gz").unlink()
    result = _invoke("ingest", "--format", "llmbar", str(release), str(tmp_path / "ds"))
    assert result.exit_code == 0, result.output
    report = _report(result)
    absent = {f"ChatGPT/Vanilla/{o}": {"items_absent": 47, "subsets": ["Adversarial/GPTOut"]} for o in ("ab", "ba")}
    assert report["absent_judges"] == absent and report["absent_verdicts"] == 94
    assert report["missing_verdicts"] == 0  # absent items are not counted as missing verdicts, but listed above
    (warning,) = [line for line in result.stderr.splitlines() if " WARNING " in line]
    assert "judge ChatGPT/Vanilla (ab, ba) has no result file in subset Adversarial/GPTOut" in warning
    assert report["warnings"] == [warning.split(": ", 1)[1]]
    stored = json.loads((tmp_path / "ds" / "_ingest.json").read_text())
    assert stored["absent_judges"] == absent and stored["warnings"] == report["warnings"]
    # Rows by hand: 3 strategies x 2 orders x 147 items, less ChatGPT/Vanilla's 2 x 47 in GPTOut.
    assert report["rows_written"]["verdicts"] == 3 * 2 * 147 - 2 * 47


def test_strict_refuses_a_missing_strategy_file_naming_judge_subset_and_fix(release, tmp_path):
    (release / "Adversarial/GPTOut/evaluators/GPT-4/Swap/result.json.gz").unlink()
    result = _invoke("ingest", "--format", "llmbar", "--strict", str(release), str(tmp_path / "ds"))
    _refused(
        result,
        r"Adversarial/GPTOut/evaluators/GPT-4/Swap/result\.json\.gz: not found: judge GPT-4/Swap \(ab, ba\) has no "
        r"result file in subset Adversarial/GPTOut.*; restore .*, or ingest without --strict",
    )
    assert not (tmp_path / "ds").exists()


def test_strict_accepts_a_complete_release(release, tmp_path):
    result = _invoke("ingest", "--format", "llmbar", "--strict", str(release), str(tmp_path / "ds"))
    assert result.exit_code == 0, result.output
    assert _report(result)["warnings"] == [] and _report(result)["absent_judges"] == {}


# -- long sources: headers, table folders, silent judges ----------------------------------------------------------
@pytest.mark.parametrize(
    ("verdicts", "pattern"),
    [
        (
            VERDICTS.replace("sample,verdict\n", "sample,sample\n"),
            r"verdicts\.csv: sample: named 2 times in the header \('sample' x2\); keep one column of each name$",
        ),
        (
            VERDICTS + VERDICTS,  # two exports joined with `cat`
            r"verdicts\.csv: \(header\): the header line repeats as line 6 \(1 times in all; files concatenated",
        ),
    ],
    ids=["duplicated-header-cell", "header-line-repeated"],
)
def test_a_duplicated_header_is_one_named_line(tmp_path, verdicts, pattern):
    result = _invoke("ingest", "--format", "long", str(_long(tmp_path, verdicts)), str(tmp_path / "ds"))
    _refused(result, pattern)
    assert not (tmp_path / "ds").exists()


def test_a_readme_in_a_source_table_folder_is_named(tmp_path):
    src = _long(tmp_path)
    (src / "verdicts.csv").unlink()
    folder = src / "verdicts.parquet"  # as Spark writes a table: parts, _SUCCESS, .crc
    folder.mkdir()
    header, *lines = VERDICTS.splitlines()
    rows = pd.DataFrame([line.split(",") for line in lines], columns=header.split(","))
    rows.replace("", None).to_parquet(folder / "part-00000-x.snappy.parquet")
    (folder / "_SUCCESS").write_text("")
    ok = _invoke("ingest", "--format", "long", str(src), str(tmp_path / "ok"))
    assert ok.exit_code == 0, ok.output
    assert _report(ok)["rows_written"]["verdicts"] == 4
    (folder / "README.md").write_text("exported from the judge service\n")
    result = _invoke("ingest", "--format", "long", str(src), str(tmp_path / "ds"))
    _refused(
        result, r"verdicts\.parquet: README\.md: a file that is not a Parquet part.*move it out of verdicts\.parquet/$"
    )
    assert not (tmp_path / "ds").exists()


def test_an_all_null_judge_is_warned_and_refused_when_strict(tmp_path):
    src = _long(tmp_path, VERDICTS + "d,i1,j3,0,\nd,i2,j3,0,\n")
    strict = _invoke("ingest", "--format", "long", "--strict", str(src), str(tmp_path / "strict"))
    _refused(
        strict, r"verdicts\.csv: verdict: 1 judge\(s\) whose every verdict is null.*\['j3'\].*\(refused by --strict\)$"
    )
    assert not (tmp_path / "strict").exists()
    result = _invoke("ingest", "--format", "long", str(src), str(tmp_path / "ds"))
    assert result.exit_code == 0, result.output
    assert _report(result)["all_null_judges"] == {"j3": 2}
    assert re.search(r"WARNING .*verdict: 1 judge\(s\) whose every verdict is null", result.stderr)


# -- the dataset a run reads: foreign and broken entries in verdicts/ ---------------------------------------------
@pytest.fixture()
def dataset(tmp_path) -> Path:
    data = tmp_path / "D"
    result = _invoke("generate", "--items", "80", "--judges", "3", "--seed", "1", str(data))
    assert result.exit_code == 0, result.output
    return data


def _run(data: Path, out: Path):
    sets = [arg for item in [f"data={data}", *TINY] for arg in ("--set", item)]
    return _invoke("run", CONFIG, *sets, "--output", str(out), "--serial", "--run-id", "r")


def test_hidden_files_in_verdicts_change_nothing(dataset, tmp_path):
    clean = _run(dataset, tmp_path / "clean")
    assert clean.exit_code == 0, clean.output
    for name in (".DS_Store", "._part-00000.parquet", "_committed_1"):  # Finder, AppleDouble, a Spark commit file
        (dataset / "verdicts" / name).write_bytes(b"\x00\x01 not parquet")
    again = _run(dataset, tmp_path / "again")
    assert again.exit_code == 0, again.output
    runs = [Path(result.output.strip().splitlines()[-1]) for result in (clean, again)]
    pd.testing.assert_frame_equal(*[pd.read_parquet(run / "summary.parquet") for run in runs])


@pytest.mark.parametrize(
    ("spoil", "pattern"),
    [
        (
            lambda f: (f / "README.md").write_text("notes\n"),
            r"D: verdicts: README\.md: a file that is not a Parquet part; a table folder holds only \*\.parquet parts "
            r"\(names starting with '_' or '\.' are ignored\): move it out of verdicts/$",
        ),
        (
            lambda f: (f / "part-00001.parquet").write_bytes((f / "part-00000.parquet").read_bytes()[:300]),
            r"D: verdicts: part-00001\.parquet: not a readable Parquet file \(Parquet magic bytes not found",
        ),
    ],
    ids=["readme", "truncated-part"],
)
def test_a_foreign_or_truncated_part_stops_run_with_one_named_line(dataset, tmp_path, spoil, pattern):
    spoil(dataset / "verdicts")
    _refused(_run(dataset, tmp_path / "out"), pattern)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_sql_names_a_readme_in_verdicts_as_run_does(dataset):
    pytest.importorskip("pyspark")
    (dataset / "verdicts" / "README.md").write_text("notes\n")
    result = _invoke("sql", "SELECT count(*) AS n FROM verdicts", "--data", str(dataset))
    _refused(result, r"D: verdicts: README\.md: a file that is not a Parquet part")


# -- long sources: every column's range, named by file and row; unlabelled batches score ------------------------
def _write_as(path: Path, csv_text: str) -> Path:
    """``csv_text`` as the file ``path`` (CSV as given; JSON lines and Parquet with ``sample`` as an integer)."""
    header, *lines = csv_text.splitlines()
    rows = pd.DataFrame([line.split(",") for line in lines], columns=header.split(",")).replace("", None)
    if "sample" in rows:
        rows["sample"] = rows["sample"].map(int)
    if path.suffix == ".csv":
        path.write_text(csv_text)
    elif path.suffix == ".jsonl":
        path.write_text(
            "".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in rows.to_dict("records"))
        )
    else:
        rows.to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
@pytest.mark.parametrize(
    ("row", "pattern"),
    [
        ("d,i2,j3,-1,A", r"sample: values outside \[0, 2147483647\] \(negative counts\): \[-1\]"),
        ("d,i2,j3,2147483648,A", r"sample: values outside \[0, 2147483647\] \(too large\): \[2147483648\]"),
    ],
    ids=["negative", "beyond-int32"],
)
def test_a_sample_out_of_range_names_file_and_row_and_writes_nothing(tmp_path, suffix, row, pattern):
    src = _long(tmp_path)
    (src / "verdicts.csv").unlink()
    _write_as(src / f"verdicts{suffix}", VERDICTS + row + "\n")  # the 5th data row
    result = _invoke("ingest", "--format", "long", str(src), str(tmp_path / "ds"))
    line = _refused(result, rf"verdicts{re.escape(suffix)}: {pattern} \(1 rows, e\.g\. .*'j3'.*; first at row 5\)$")
    assert str(src) in line
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    ("table", "text", "pattern"),
    [
        (
            "verdicts",
            VERDICTS + "d,i2,j3,99999999999999999999,A\n",
            r"verdicts\.csv: sample: cannot cast string to int64: "
            r"values \['99999999999999999999'\].*first at row 5\)$",
        ),
        (
            "verdicts",
            "dataset,item_id,judge_id,verdict,input_tokens\nd,i1,j1,A,5\nd,i1,j2,B,-3\nd,i2,j1,B,\n",
            r"verdicts\.csv: input_tokens: values outside \[0, 9223372036854775807\] \(negative counts\): \[-3\].*"
            r"first at row 2\)$",
        ),
        (
            "verdicts",
            "dataset,item_id,judge_id,verdict,score\nd,i1,j1,A,inf\nd,i1,j2,B,0.5\nd,i2,j1,B,\n",
            r"verdicts\.csv: score: non-finite values: \[inf\].*first at row 1\)$",
        ),
        ("labels", LABELS + "d,i3,C\n", r"labels\.csv: label: unknown categories \['C'\].*first at row 3\)$"),
    ],
    ids=["sample-beyond-int64", "negative-tokens", "infinite-score", "label-category"],
)
def test_every_long_column_is_range_checked_by_file_and_row(tmp_path, table, text, pattern):
    src = _long(tmp_path)
    (src / f"{table}.csv").write_text(text)
    _refused(_invoke("ingest", "--format", "long", str(src), str(tmp_path / "ds")), pattern)
    assert not (tmp_path / "ds").exists()


def test_an_unlabelled_crowdkit_batch_ingests_and_scores_like_the_notebook(tmp_path):
    """A model fitted in the notebook on a labelled week scores next week's unlabelled crowd-kit file through the CLI;
    every item is scored and unlabelled, with the notebook's p for the same votes."""
    import numpy as np

    from judgecal_dist.api import CalibratedAggregator

    rng = np.random.default_rng(7)
    accuracy = np.array([0.9, 0.8, 0.7, 0.65])

    def week(n: int, start: int) -> tuple[pd.DataFrame, pd.Series]:
        truth = rng.integers(0, 2, n)
        right = rng.random((n, accuracy.size)) < accuracy
        votes = np.where(right, truth[:, None], 1 - truth[:, None])
        tasks = [f"t{start + i}" for i in range(n)]
        frame = pd.DataFrame(
            {
                "task": np.repeat(tasks, accuracy.size),
                "worker": np.tile([f"w{j}" for j in range(4)], n),
                "label": votes.ravel(),
            }
        )
        return frame, pd.Series(truth, index=tasks)

    labelled, truth = week(200, 0)
    model = CalibratedAggregator().fit(labelled, truth)
    model_url = model.save(str(tmp_path / "model.json"))
    batch, _ = week(40, 1000)
    batch.to_csv(tmp_path / "weekly.csv", index=False)

    ingested = _invoke("ingest", "--format", "long", str(tmp_path / "weekly.csv"), str(tmp_path / "ds"))
    assert ingested.exit_code == 0, ingested.output
    assert _report(ingested)["unlabelled"] is True and _report(ingested)["datasets"] == ["weekly"]
    scored = _invoke(
        "score",
        "--model",
        model_url,
        "--data",
        str(tmp_path / "ds"),
        "--output",
        str(tmp_path / "out"),
        "--engine",
        "local",
    )
    assert scored.exit_code == 0, scored.output
    items = pd.read_parquet(tmp_path / "out" / "items").set_index("item_id").sort_index()
    assert len(items) == 40 and items["label"].isna().all() and items["p"].notna().all()
    expected = model.predict_items(batch)["p"].sort_index()
    np.testing.assert_allclose(items["p"].to_numpy(), expected.to_numpy(), rtol=0, atol=1e-12)
