"""The SQL guard on a real local Spark session: statement splitting by Spark's lexer and CTE scoping."""

from __future__ import annotations

import pytest

from judgecal_dist.errors import InputError

pytest.importorskip("pyspark")

from judgecal_dist.engine.sql.guard import SqlGuard, split_statements  # noqa: E402

SPLITS = {
    "one": ("SELECT 1", ["SELECT 1"]),
    "trailing": ("SELECT 1 ;  ", ["SELECT 1"]),
    "two": ("SELECT 1; SELECT 2", ["SELECT 1", "SELECT 2"]),
    "in-string": ("SELECT ';' AS a; SELECT \"b;\" AS b", ["SELECT ';' AS a", 'SELECT "b;" AS b']),
    "escaped-quote": (r"SELECT 'it\'s;' AS a; SELECT 2", [r"SELECT 'it\'s;' AS a", "SELECT 2"]),
    "backticks": ("SELECT 1 AS `a;b`; SELECT 2", ["SELECT 1 AS `a;b`", "SELECT 2"]),
    "line-comment": ("SELECT 1 -- x; y\n; SELECT 2", ["SELECT 1 -- x; y", "SELECT 2"]),
    "nested-comment": ("SELECT 1 /* a; /* b; */ c; */; SELECT 2", ["SELECT 1 /* a; /* b; */ c; */", "SELECT 2"]),
    "empty-pieces": (";; -- only a comment\n; SELECT 3;;", ["SELECT 3"]),
    "nothing": ("  ", []),
}


@pytest.mark.parametrize("case", sorted(SPLITS))
def test_split_statements_follows_spark_lexer(case, spark):
    text, expected = SPLITS[case]
    assert split_statements(spark, text) == expected


@pytest.fixture()
def guard(spark, tmp_path):
    return SqlGuard(spark, views=["verdicts", "labels"], data_url=str(tmp_path / "data"))


@pytest.mark.parametrize(
    "statement",
    [
        "WITH a AS (SELECT * FROM verdicts), b AS (SELECT * FROM a) SELECT * FROM b",
        "WITH a AS (SELECT 1 AS x) SELECT * FROM a WHERE x IN (WITH c AS (SELECT 1 AS y) SELECT y FROM c)",
        "SELECT * FROM VERDICTS v JOIN Labels l USING (item_id)",
        "SELECT * FROM range(3) CROSS JOIN verdicts",
        "SELECT explode(array(1, 2)) AS e",
    ],
)
def test_queries_pass(guard, statement):
    guard.check(statement)


@pytest.mark.parametrize(
    ("statement", "offence"),
    [
        # A CTE is visible in its own WITH only: outside it, 'a' would name a catalog table.
        ("SELECT * FROM (WITH a AS (SELECT 1 AS x) SELECT * FROM a) t JOIN a", "'a' is not a view"),
        ("WITH b AS (SELECT * FROM a), a AS (SELECT 1) SELECT * FROM b", "'a' is not a view"),
        ("SELECT default.myudf(item_id) FROM verdicts", "function default.myudf is refused"),
        ("SELECT * FROM verdicts LATERAL VIEW read_files('/etc') t AS x", "table function read_files"),
    ],
)
def test_statements_refused(guard, statement, offence):
    with pytest.raises(InputError, match="^sql: ") as info:
        guard.check(statement)
    assert offence in str(info.value)


def test_parse_errors_are_input_errors(guard):
    with pytest.raises(InputError, match=r"^sql: statement 3: \[PARSE_SYNTAX_ERROR\]"):
        guard.check("SELEC 1", 3)
