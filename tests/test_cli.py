"""The judgecal command, driven in-process with click's runner (and once as a real process)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml"

VERDICTS = "dataset,item_id,judge_id,sample,verdict\nd,i1,j1,0,A\nd,i1,j2,0,B\nd,i2,j1,0,B\nd,i2,j2,0,\n"
LABELS = "dataset,item_id,label\nd,i1,A\nd,i2,B\n"


def _long(folder: Path, verdicts: str = VERDICTS, labels: str = LABELS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "verdicts.csv").write_text(verdicts)
    (folder / "labels.csv").write_text(labels)
    return folder


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_ingest_long_and_sql(tmp_path, spark):
    src = _long(tmp_path / "src")
    result = invoke("ingest", "--format", "long", str(src), str(tmp_path / "ds"))
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == str(tmp_path / "ds")
    result = invoke(
        "sql",
        "SELECT judge_id, count(*) AS n FROM verdicts GROUP BY judge_id ORDER BY judge_id",
        "--data",
        str(tmp_path / "ds"),
    )
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["judge_id", "n", "j1", "2", "j2", "2"]


def test_ingest_prints_a_summary_and_the_report_with_json(tmp_path):
    src = _long(tmp_path / "src")
    result = invoke("ingest", "--format", "long", str(src), str(tmp_path / "ds"))
    assert result.exit_code == 0, result.output
    summary, odd, url = result.stdout.strip().splitlines()
    assert summary == "datasets d (format long): 4 verdicts, 2 labels"
    assert odd == f"1 missing and 0 unparseable verdicts, 0 rejected rows, 0 warnings; full report: {url}/_ingest.json"
    stored = json.loads((tmp_path / "ds" / "_ingest.json").read_text())
    shown = invoke("ingest", "--format", "long", "--json", "--overwrite", str(src), str(tmp_path / "ds"))
    text = shown.stdout
    assert json.loads(text[: text.rindex("}") + 1]) == stored and text.strip().splitlines()[-1] == url


BAD_INPUTS = {
    "missing item_id": (VERDICTS.replace("item_id", "item"), LABELS, r"verdicts\.csv.*item_id"),
    "duplicate key": (VERDICTS + "d,i1,j1,0,B\n", LABELS, r"verdicts.*duplicate.*i1"),
    "unknown category": (VERDICTS.replace("d,i2,j1,0,B", "d,i2,j1,0,C"), LABELS, r"verdicts.*verdict.*'C'"),
    "label for unknown item": (VERDICTS, LABELS + "d,i9,A\n", r"labels.*i9"),
    "empty file": ("", LABELS, r"verdicts\.csv.*empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_rejected_with_exit_2_and_nothing_written(case, tmp_path):
    verdicts, labels, pattern = BAD_INPUTS[case]
    src = _long(tmp_path / "src", verdicts, labels)
    dest = tmp_path / "dest"
    result = invoke("ingest", "--format", "long", str(src), str(dest))
    assert result.exit_code == 2
    assert re.search(pattern, result.output, flags=re.DOTALL), result.output
    assert not dest.exists()


def test_truncated_gzip_and_missing_url(tmp_path):
    src = _long(tmp_path / "src")
    blob = gzip.compress(VERDICTS.encode())
    (src / "verdicts.csv").unlink()
    (src / "verdicts.csv.gz").write_bytes(blob[: len(blob) // 2])
    result = invoke("ingest", "--format", "long", str(src), str(tmp_path / "dest"))
    assert result.exit_code == 2 and "verdicts.csv.gz" in result.output
    assert not (tmp_path / "dest").exists()
    result = invoke("ingest", "--format", "long", str(tmp_path / "nope"), str(tmp_path / "dest"))
    assert result.exit_code == 2 and "nope" in result.output
    assert not (tmp_path / "dest").exists()


def test_run_rejects_bad_config_and_data_before_writing(tmp_path):
    out = tmp_path / "out"
    result = invoke("run", str(CONFIG), "--set", "replicates=0", "--set", "data=x", "--output", str(out))
    assert result.exit_code == 2 and "replicates" in result.output
    result = invoke("run", str(CONFIG), "--set", f"data={tmp_path / 'missing'}", "--output", str(out))
    assert result.exit_code == 2 and "missing" in result.output
    result = invoke("run", str(CONFIG), "--set", "bogus=1", "--output", str(out))
    assert result.exit_code == 2 and "bogus" in result.output
    assert not out.exists()


def test_real_process_exit_code_and_one_line_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "judgecal_dist.cli", "ingest", "--format", "nope", "a", "b"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "unknown format 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_status_reports_a_run(tmp_path):
    from judgecal_dist.engine.results.store import RunStore

    store = RunStore(str(tmp_path / "run"))
    store.write_json(
        "manifest.json", {"study": "inclusion", "run_id": "r1", "status": "running", "config": {"replicates": 3}}
    )
    store.commit_part(0, pd.DataFrame({"a": [1]}))
    result = invoke("status", str(tmp_path / "run"))
    assert result.exit_code == 0 and "inclusion r1: running; replicates 1/3" in result.output


@pytest.mark.s3
def test_missing_s3_source_is_rejected(s3_bucket, tmp_path):
    result = invoke("ingest", "--format", "long", f"{s3_bucket}-absent/verdicts", str(tmp_path / "dest"))
    assert result.exit_code == 2 and f"{s3_bucket}-absent/verdicts" in result.output
    assert not (tmp_path / "dest").exists()


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def test_every_option_has_help_and_run_lists_the_studies_and_presets():
    bare = [
        f"{' '.join(path)} {param.opts[0]}"
        for path, command in _commands(cli)
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]
    assert bare == []
    from judgecal_dist.studies import STUDIES

    shown = invoke("run", "--help").output
    studies = shown[shown.index("Studies:") : shown.index("Presets")]
    listed = {
        line.split()[0] for line in studies.splitlines()[1:] if line.startswith("  ") and not line.startswith("   ")
    }
    assert listed == set(STUDIES)
    presets = {path.stem for path in CONFIG.parent.glob("*.yaml")} - set(STUDIES)
    assert presets and all(f"  {name}  " in shown[shown.index("Presets") :] for name in presets)
    assert re.search(r" itc [^\[]*\[needs spark\] narrowband ", " ".join(studies.split()))  # the extra it needs


def test_a_packaged_setting_error_names_the_setting_and_the_override_not_the_package(tmp_path):
    result = invoke("run", "inclusion", "--set", "replicates=0", "--output", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "replicates=0: must be an integer in [1, 10000]" in result.output and "--set replicates=" in result.output
    assert (
        "made by judgecal config show inclusion > inclusion.yaml" in result.output and str(CONFIG) not in result.output
    )
    result = invoke("config", "show", "inclusion", "--set", "replictes=3")
    assert result.exit_code == 2 and result.output.startswith(
        "Error: study inclusion: unknown setting(s) ['replictes']"
    )
    assert not (tmp_path / "out").exists()
