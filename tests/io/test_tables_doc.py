"""docs/tables.md against the contracts: every table and column, its type, nullability and meaning."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.history.store import run_row
from judgecal_dist.io.column_docs import COLUMN_DOCS
from judgecal_dist.io.schema import FREE_TABLES, SCHEMAS, TABLES

DOC = Path(__file__).resolve().parents[2] / "docs" / "tables.md"
ROW = re.compile(r"^\| `(?P<column>\w+)` \| (?P<type>[\w<>, ]+) \| (?P<nullable>yes|no) \| (?P<meaning>.+) \|$")


def _sections() -> dict[str, list[dict[str, str]]]:
    sections: dict[str, list[dict[str, str]]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        if line.startswith("### "):
            current = line[4:].split()[0]
            sections[current] = []
        elif current is not None and (match := ROW.match(line)):
            sections[current].append(match.groupdict())
    return sections


@pytest.mark.parametrize("table", TABLES)
def test_every_dataset_column_is_documented_as_the_schema_declares_it(table):
    from pyspark.sql.pandas.types import from_arrow_type

    documented = _sections()[table]
    if table in SCHEMAS:
        expected = [
            (f.name, from_arrow_type(f.type).simpleString(), "yes" if f.nullable else "no") for f in SCHEMAS[table]
        ]
    else:
        expected = [(c, "string", "no") for c in FREE_TABLES[table]]
    assert [(r["column"], r["type"], r["nullable"]) for r in documented] == expected
    assert {r["column"]: r["meaning"] for r in documented} == COLUMN_DOCS[table]


def test_the_runs_table_documents_every_manifest_column():
    documented = {r["column"] for r in _sections()["runs"]}
    assert set(run_row({})) | {"recorded_at", "study", "date"} <= documented


def test_sql_help_points_to_the_page_and_names_every_table():
    text = CliRunner().invoke(cli, ["sql", "--help"]).output
    assert "docs/tables.md" in text
    assert all(table in text for table in TABLES)
