"""Probes: ``judgecal sql`` on a local session decides access on Spark's analyzed plan, so a glob that Spark
expands outside ``--data``, a path relative to the current folder in catalog mode and, with ``--allow-writes``, a
table or view over outside files are refused in one line (exit 2), and nothing is read or written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli

pytest.importorskip("pyspark")

SECRET = "plan-probe-secret-41d7"


@pytest.fixture(scope="module")
def place(tmp_path_factory, spark):
    """A dataset beside a folder holding a secret file (what a hole would print)."""
    from judgecal_dist.io.ingest import ingest

    tmp = tmp_path_factory.mktemp("plan")
    src = tmp / "src"
    src.mkdir()
    pd.DataFrame(
        {"dataset": "d", "item_id": ["i1", "i2"], "judge_id": "j1", "sample": 0, "verdict": ["A", "B"]}
    ).to_csv(src / "verdicts.csv", index=False)
    pd.DataFrame({"dataset": "d", "item_id": ["i1", "i2"], "label": ["A", "A"]}).to_csv(src / "labels.csv", index=False)
    ingest("long", str(src), str(tmp / "dataset"))
    (tmp / "outside").mkdir()
    (tmp / "outside" / "secret.txt").write_text(SECRET + "\n")
    return tmp


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(args: list[str], folder: Path, *needles: str) -> None:
    before = _snapshot(folder)
    result = CliRunner().invoke(cli, ["sql", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    errors = [line for line in lines if line.startswith("Error:")]  # besides, INFO log lines on stderr
    assert len(errors) == 1 and errors[0].startswith("Error: sql: "), result.output
    assert all(" INFO " in line for line in lines if not line.startswith("Error:")), result.output
    assert SECRET not in result.output and "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output
    assert _snapshot(folder) == before


def test_a_glob_spark_expands_outside_the_data_is_refused(place):
    root = place / "dataset"
    # the text stays inside the dataset; Hadoop expands the braces to <root>/verdicts and <root>/../outside
    pattern = f"{root}/{{verdicts,../outside}}/*"
    _refused([f"SELECT * FROM text.`{pattern}`", "--data", str(root)], place, f"{place}/outside/secret.txt")


def test_a_relative_path_in_catalog_mode_is_refused(place, spark):
    warehouse = place / "wh"
    (warehouse / "metastore_db").mkdir(parents=True, exist_ok=True)  # a catalog: judgecal sql runs over it
    # Spark resolves a relative path against the JVM's current folder (the user's, or the server's warehouse)
    jvm_folder = Path(spark._jvm.java.lang.System.getProperty("user.dir"))  # noqa: SLF001
    name = next(p.name for p in sorted(jvm_folder.iterdir()) if p.is_file() and not p.name.startswith("."))
    before = (jvm_folder / name).read_bytes()
    _refused([f"SELECT * FROM text.`{name}`", "--warehouse", str(warehouse)], place, f"reads {jvm_folder}/{name}")
    assert (jvm_folder / name).read_bytes() == before


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TABLE leak (value STRING) USING text LOCATION '{outside}'; SELECT * FROM leak",
        "CREATE TEMPORARY VIEW leak2 USING text OPTIONS (path '{outside}'); SELECT * FROM leak2",
    ],
    ids=["table-location", "temporary-view-using"],
)
def test_with_writes_a_table_or_view_over_outside_files_is_refused(place, statement):
    root = place / "dataset"
    text = statement.format(outside=place / "outside")
    _refused([text, "--data", str(root), "--allow-writes"], place, "statement 1: ", f"{place}/outside")
