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
    """The ingest report printed on stdout (a JSON object, then the dataset URL)."""
    text = result.stdout
    return json.loads(text[text.index("{") : text.rindex("}") + 1])


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
