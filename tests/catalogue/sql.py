"""Catalogue cases: judgecal sql: read-only checks and statement handling."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from judgecal_dist.cli import cli


def _dataset(tmp: Path) -> str:
    dest = tmp / "dataset"
    assert CliRunner().invoke(cli, ["generate", "--items", "40", "--judges", "3", str(dest)]).exit_code == 0
    return str(dest)


def _sql(query: str, *extra: str) -> Callable[[Path], list[str]]:
    """A case running ``query`` over a fresh dataset; ``{data}`` in the query or options is that dataset."""

    def case(tmp: Path) -> list[str]:
        data = _dataset(tmp)
        return ["sql", query.format(data=data), "--data", data, *(e.format(data=data) for e in extra)]

    return case


def _glob_outside(tmp: Path) -> list[str]:
    """A glob whose text stays inside --data; Hadoop expands its braces to a folder beside the dataset."""
    (tmp / "outside").mkdir()
    (tmp / "outside" / "notes.txt").write_text("not the dataset's\n")
    return _sql("SELECT * FROM text.`{data}/{{verdicts,../outside}}/*`")(tmp)


CASES: dict[str, Callable[[Path], list[str]]] = {
    "sql-read-only": _sql("INSERT OVERWRITE DIRECTORY '/tmp/judgecal-never' USING parquet SELECT 1 AS a"),
    "sql-java-call": _sql("SELECT reflect('java.lang.System', 'getenv', 'PATH')"),
    "sql-identifier-function": _sql("SELECT IDENTIFIER('reflect')('java.lang.System', 'getenv', 'PATH')"),
    "sql-path-outside-data": _sql("SELECT * FROM text.`/etc/passwd`"),
    "sql-table-function": _sql("SELECT * FROM read_files('/etc/passwd')"),
    "sql-not-a-view": _sql("SELECT * FROM spark_catalog.default.t"),
    "sql-shell-transform": _sql("SELECT TRANSFORM(item_id) USING 'printenv' AS (x) FROM verdicts"),
    "sql-code-loading": _sql("ADD JAR /tmp/judgecal-never.jar", "--allow-writes"),
    "sql-set-setting": _sql("SET"),
    "sql-statement-number": _sql("SELECT 1 AS a; SELECT java_method('java.lang.System', 'getenv', 'PATH')"),
    "sql-write-into-dataset": _sql(
        "CREATE TABLE t USING parquet LOCATION '{data}/verdicts' AS SELECT 1 AS a", "--allow-writes"
    ),
    "sql-write-own-view": _sql("INSERT INTO verdicts SELECT * FROM verdicts", "--allow-writes"),
    "sql-plan-read-outside": lambda tmp: _glob_outside(tmp),
    "sql-plan-table-over-outside": _sql("CREATE TABLE t (value STRING) USING text LOCATION '/etc'", "--allow-writes"),
    "sql-out-inside-data": _sql("SELECT * FROM verdicts", "--out", "{data}/result"),
    "sql-parse-error": _sql("SELEC judge_id FROM verdicts"),
    "sql-no-statement": _sql("; -- nothing here\n;"),
    "sql-limit": _sql("SELECT 1 AS a", "--limit", "0"),
}
