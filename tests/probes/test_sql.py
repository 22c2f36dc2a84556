"""Probes: hostile SQL through ``judgecal sql`` (refused, nothing written, no secret printed) and legitimate queries
(same rows as pandas on the same data), on a real local Spark session."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli

pytest.importorskip("pyspark")

SECRET = "probe-secret-7f3a9c"  # a JVM system property set by the fixture: what reflect(...) would leak
HOSTILE: dict[str, tuple[str, str]] = {
    # id: (statement, the refused node / function / path the message must name); {root} is the dataset,
    # {tmp} a scratch folder, {parent} the folder above the dataset.
    "insert-directory": ("INSERT OVERWRITE DIRECTORY '{tmp}/dir' USING parquet SELECT 1 AS a", "InsertIntoDir"),
    "ctas-location": ("CREATE TABLE t USING parquet LOCATION '{tmp}/t' AS SELECT 1 AS a", "CreateTableAsSelect"),
    "create-table": ("CREATE TABLE t2 (a INT) USING parquet OPTIONS (path '{tmp}/t2')", "CreateTable"),
    "insert-into-view": ("INSERT INTO verdicts SELECT * FROM verdicts", "InsertIntoStatement"),
    "insert-overwrite-path": ("INSERT OVERWRITE parquet.`{root}/labels` SELECT * FROM labels", "InsertIntoStatement"),
    "drop": ("DROP VIEW verdicts", "DropView"),
    "alter": ("ALTER TABLE verdicts SET LOCATION '{tmp}/x'", "SetTableLocation"),
    "truncate": ("TRUNCATE TABLE labels", "TruncateTable"),
    "cache": ("CACHE TABLE verdicts", "CacheTable"),
    "set-list": ("SET", "SET (list every setting)"),
    "set-substitute": ("SET spark.sql.variable.substitute=true", "SET spark.sql.variable.substitute"),
    "set-secret": ("SET spark.hadoop.fs.s3a.secret.key", "SET spark.hadoop.fs.s3a.secret.key"),
    "add-jar": ("ADD JAR {tmp}/evil.jar", "AddJarsCommand"),
    "create-function": ("CREATE TEMPORARY FUNCTION f AS 'java.lang.System'", "CreateFunction"),
    "execute-immediate": ("EXECUTE IMMEDIATE 'SELECT 1'", "UnresolvedExecuteImmediate"),
    "reflect": ("SELECT reflect('java.lang.System', 'getProperty', 'judgecal.probe.secret')", "function reflect"),
    "java-method": ("SELECT java_method('java.lang.System', 'getenv', 'PATH')", "function java_method"),
    "try-reflect": ("SELECT try_reflect('java.lang.System', 'getenv', 'PATH')", "function try_reflect"),
    "reflect-upper": ("SELECT REFLECT('java.lang.System', 'getenv', 'PATH')", "function REFLECT"),
    "reflect-identifier": ("SELECT IDENTIFIER('reflect')('java.lang.System', 'getenv', 'PATH')", "IDENTIFIER"),
    "reflect-in-cte": (
        "WITH a AS (SELECT reflect('java.lang.System', 'getenv', 'PATH') AS x) SELECT * FROM a",
        "function reflect",
    ),
    "reflect-in-subquery": (
        "SELECT * FROM verdicts WHERE item_id IN (SELECT java_method('java.lang.System', 'getenv', 'PATH'))",
        "function java_method",
    ),
    "reflect-in-lambda": (
        "SELECT transform(array(1), x -> reflect('java.lang.System', 'getenv', 'PATH')) AS y",
        "function reflect",
    ),
    "reflect-in-window": (
        "SELECT max(reflect('java.lang.System', 'getenv', 'PATH')) OVER (PARTITION BY judge_id) FROM verdicts",
        "function reflect",
    ),
    "reflect-second-statement": (
        "SELECT 1 AS a; SELECT reflect('java.lang.System', 'getenv', 'PATH')",
        "statement 2: function reflect",
    ),
    "text-file": ("SELECT * FROM text.`/etc/passwd`", "'/etc/passwd' (data source 'text')"),
    "parquet-s3": ("SELECT * FROM parquet.`s3://bucket/key`", "'s3://bucket/key' (data source 'parquet')"),
    "path-escape": ("SELECT * FROM parquet.`{root}/../outside`", "outside --data"),
    "path-in-exists": (
        "SELECT 1 FROM verdicts WHERE EXISTS (SELECT 1 FROM csv.`/etc/hosts`)",
        "'/etc/hosts' (data source 'csv')",
    ),
    "read-files": ("SELECT * FROM read_files('/etc/passwd')", "table function read_files"),
    "other-table": ("SELECT * FROM spark_catalog.default.secrets", "'spark_catalog.default.secrets' is not a view"),
    "describe-path": ("DESCRIBE json.`/etc`", "'/etc' (data source 'json')"),
    "explain-write": ("EXPLAIN INSERT OVERWRITE DIRECTORY '{tmp}/e' SELECT 1", "InsertIntoDir"),
    "transform-shell": (
        "SELECT TRANSFORM(item_id) USING 'printenv PATH' AS (x) FROM verdicts",
        "ScriptTransformation is refused (TRANSFORM ... USING runs a shell command)",
    ),
}
#: With --allow-writes: writes that would reach the dataset's folder (or the folder above it).
HOSTILE_WRITES: dict[str, tuple[str, str]] = {
    "ctas-into-dataset": ("CREATE TABLE w1 USING parquet LOCATION '{root}/verdicts' AS SELECT 1 AS a", "{root}"),
    "directory-above-dataset": ("INSERT OVERWRITE DIRECTORY '{parent}' USING parquet SELECT 1 AS a", "{parent}"),
    "overwrite-own-table": ("INSERT OVERWRITE parquet.`{root}/labels` SELECT * FROM labels", "{root}/labels"),
    "path-option": ("CREATE TABLE w2 (a INT) USING parquet OPTIONS (path '{root}/w2')", "{root}/w2"),
    "relative-dotdot": (
        "INSERT OVERWRITE DIRECTORY '{root}/../dataset' USING parquet SELECT 1 AS a",
        "InsertIntoDir writes to",
    ),
    "own-view": ("INSERT INTO verdicts SELECT * FROM verdicts", "view verdicts"),
    "move-table-in": (
        "CREATE TABLE w3 (a INT) USING parquet LOCATION '{tmp}/w3'; ALTER TABLE w3 SET LOCATION '{root}/w3'",
        "statement 2: SetTableLocation",
    ),
    "reflect-still-refused": ("SELECT reflect('java.lang.System', 'getenv', 'PATH')", "function reflect"),
    "shell-still-refused": ("SELECT TRANSFORM(1) USING 'cat' AS (x)", "ScriptTransformation"),
}


def _frames(seed: int = 5) -> dict[str, pd.DataFrame]:
    """A small seeded panel with every table; nulls, ties and an unlabelled item included."""
    rng = np.random.default_rng(seed)
    items = [f"i{i:02d}" for i in range(30)]
    judges = [f"j{j}" for j in range(4)]
    verdicts = pd.DataFrame(
        [
            (item, judge, rng.choice(["A", "B", "tie", None], p=[0.45, 0.4, 0.05, 0.1]))
            for item in items
            for judge in judges
        ],
        columns=["item_id", "judge_id", "verdict"],
    ).assign(dataset="d", sample=0)
    labels = pd.DataFrame({"dataset": "d", "item_id": items, "label": rng.choice(["A", "B"], size=len(items))})
    labels.loc[3, "label"] = None
    judge_table = pd.DataFrame({"judge_id": judges, "family": ["f", "f", "g", "h"], "tier": ["s", "m", "m", "l"]})
    item_table = pd.DataFrame({"dataset": "d", "item_id": items, "subset": [f"s{i % 3}" for i in range(len(items))]})
    return {"verdicts": verdicts, "labels": labels, "judges": judge_table, "items": item_table}


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return _frames()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, frames, spark) -> str:
    from judgecal_dist.io.ingest import ingest

    src = tmp_path_factory.mktemp("sql-src")
    for name, frame in frames.items():
        frame.to_csv(src / f"{name}.csv", index=False)
    root = tmp_path_factory.mktemp("sql-probe") / "dataset"
    ingest("long", str(src), str(root))
    spark._jvm.java.lang.System.setProperty("judgecal.probe.secret", SECRET)  # noqa: SLF001
    return str(root)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def _sql(*args: str):
    return CliRunner().invoke(cli, ["sql", *args])


def _fill(text: str, dataset: str, tmp: Path) -> str:
    return text.format(root=dataset, tmp=tmp, parent=str(Path(dataset).parent))


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_statement_is_refused_and_writes_nothing(case, dataset, tmp_path, spark):
    statement, names = (_fill(text, dataset, tmp_path) for text in HOSTILE[case])
    before, jvm_path = _snapshot(Path(dataset).parent), spark._jvm.java.lang.System.getenv("PATH")  # noqa: SLF001
    result = _sql(statement, "--data", dataset)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: sql: ") and names in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert SECRET not in result.output and jvm_path not in result.output
    assert _snapshot(Path(dataset).parent) == before
    assert list(tmp_path.iterdir()) == []
    assert sorted(t.name for t in spark.catalog.listTables() if t.isTemporary) == sorted(_frames())


def test_the_secret_is_reachable_without_the_guard(dataset, spark):
    """The probe is live: Spark itself would print the secret that the guarded command refuses to reach."""
    leaked = spark.sql("SELECT reflect('java.lang.System', 'getProperty', 'judgecal.probe.secret') AS x").first().x
    assert leaked == SECRET


@pytest.mark.parametrize("case", sorted(HOSTILE_WRITES))
def test_writes_never_reach_the_dataset_folder(case, dataset, tmp_path):
    statement, names = (_fill(text, dataset, tmp_path) for text in HOSTILE_WRITES[case])
    before = _snapshot(Path(dataset).parent)
    result = _sql(statement, "--data", dataset, "--allow-writes")
    assert result.exit_code == 2, result.output
    assert names in result.output and "Traceback" not in result.output, result.output
    assert _snapshot(Path(dataset).parent) == before
    assert not any(tmp_path.rglob("*.parquet"))


def test_allowed_writes_land_outside_the_dataset(dataset, tmp_path, frames):
    before = _snapshot(Path(dataset).parent)
    location = tmp_path / "by_judge"
    query = (
        f"CREATE TABLE by_judge USING parquet LOCATION '{location}' AS "
        "SELECT judge_id, count(*) AS n FROM verdicts GROUP BY judge_id; "
        "SELECT * FROM by_judge ORDER BY judge_id"
    )
    result = _sql(query, "--data", dataset, "--allow-writes", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = pd.DataFrame(json.loads(result.stdout.strip().splitlines()[-1]))
    expected = frames["verdicts"].groupby("judge_id").size().rename("n").reset_index()
    pd.testing.assert_frame_equal(rows, expected)
    assert list(location.glob("*.parquet")) and _snapshot(Path(dataset).parent) == before
    CliRunner().invoke(cli, ["sql", "DROP TABLE by_judge", "--data", dataset, "--allow-writes"])


def test_out_inside_the_dataset_is_refused(dataset):
    before = _snapshot(Path(dataset).parent)
    result = _sql("SELECT * FROM verdicts", "--data", dataset, "--out", f"{dataset}/verdicts/extra")
    assert result.exit_code == 2 and "is inside or above the dataset's folder" in result.output, result.output
    assert _snapshot(Path(dataset).parent) == before


def _accuracy(f: dict[str, pd.DataFrame]) -> pd.DataFrame:
    both = f["verdicts"].merge(f["labels"], on=["dataset", "item_id"], how="inner").dropna(subset=["verdict", "label"])
    both = both.assign(correct=(both["verdict"] == both["label"]).astype(float))
    return both.groupby("judge_id").agg(acc=("correct", "mean"), n=("correct", "size")).reset_index()


def _majority_a(f: dict[str, pd.DataFrame]) -> pd.DataFrame:
    votes = f["verdicts"].assign(a=f["verdicts"]["verdict"].eq("A")).groupby("item_id")["a"].sum().astype(np.int64)
    return votes[votes >= 2].rename("a").reset_index()


def _rank(f: dict[str, pd.DataFrame]) -> pd.DataFrame:
    frame = f["verdicts"].sort_values(["item_id", "judge_id"])[["item_id", "judge_id"]]
    return frame.assign(r=frame.groupby("item_id").cumcount().astype(np.int32) + 1)


def _no_early_b(f: dict[str, pd.DataFrame]) -> pd.DataFrame:
    verdicts = f["verdicts"]
    voted = set(verdicts.loc[verdicts["verdict"].eq("B") & (verdicts["item_id"] < "i03"), "judge_id"])
    return f["judges"].loc[~f["judges"]["judge_id"].isin(voted), ["judge_id"]]


def _per_subset(f: dict[str, pd.DataFrame]) -> pd.DataFrame:
    both = f["verdicts"].merge(f["items"], on=["dataset", "item_id"], how="inner")
    return both.groupby("subset").size().rename("n").reset_index()


def _above_mean(f: dict[str, pd.DataFrame]) -> pd.DataFrame:
    counts = f["verdicts"].groupby("item_id")["verdict"].count()
    return counts[counts > counts.mean()].rename("n").reset_index()


LEGIT = {
    "join-group": (
        "SELECT v.judge_id, avg(CAST(v.verdict = l.label AS DOUBLE)) AS acc, count(*) AS n "
        "FROM verdicts v JOIN labels l ON v.dataset = l.dataset AND v.item_id = l.item_id "
        "WHERE v.verdict IS NOT NULL AND l.label IS NOT NULL GROUP BY v.judge_id",
        _accuracy,
    ),
    "cte": (
        "WITH votes AS (SELECT item_id, count_if(verdict = 'A') AS a FROM verdicts GROUP BY item_id), "
        "kept AS (SELECT * FROM votes WHERE a >= 2) SELECT item_id, a FROM kept",
        _majority_a,
    ),
    "window": (
        "SELECT item_id, judge_id, row_number() OVER (PARTITION BY item_id ORDER BY judge_id) AS r FROM verdicts",
        _rank,
    ),
    "not-in-subquery": (
        "SELECT judge_id FROM judges WHERE judge_id NOT IN "
        "(SELECT judge_id FROM verdicts WHERE verdict = 'B' AND item_id < 'i03')",
        _no_early_b,
    ),
    "items-join": (
        "SELECT i.subset, count(*) AS n FROM verdicts v JOIN items i USING (dataset, item_id) GROUP BY i.subset",
        _per_subset,
    ),
    "scalar-subquery-in-having": (
        "SELECT item_id, count(verdict) AS n FROM verdicts GROUP BY item_id HAVING count(verdict) > "
        "(SELECT count(verdict) / count(DISTINCT item_id) FROM verdicts)",
        _above_mean,
    ),
    "own-path-read": (
        "SELECT judge_id, count(*) AS n FROM parquet.`{root}/verdicts` GROUP BY judge_id",
        lambda f: f["verdicts"].groupby("judge_id").size().rename("n").reset_index(),
    ),
}


@pytest.mark.parametrize("case", sorted(LEGIT))
def test_legitimate_query_returns_the_pandas_rows(case, dataset, frames):
    query, reference = LEGIT[case]
    result = _sql(query.format(root=dataset), "--data", dataset, "--format", "json", "--limit", "1000")
    assert result.exit_code == 0, result.output
    rows = pd.DataFrame(json.loads(result.stdout))
    expected = reference(frames).reset_index(drop=True)
    assert len(expected) > 0, "the reference must hold rows for the comparison to mean something"
    keys = list(expected.columns)
    rows = rows[keys].sort_values(keys).reset_index(drop=True)
    expected = expected.sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(rows, expected, check_dtype=False, check_exact=False, rtol=1e-12)
    assert "note:" not in result.stderr


def test_read_commands_and_several_statements(dataset, frames):
    query = (
        "SHOW TABLES; DESCRIBE verdicts; SELECT count(*) AS n FROM labels; EXPLAIN SELECT * FROM verdicts; "
        "SET spark.sql.shuffle.partitions"
    )
    result = _sql(query, "--data", dataset, "--format", "json")
    assert result.exit_code == 0, result.output
    shown, described, counted, explained, setting = (json.loads(line) for line in result.stdout.splitlines())
    assert {r["tableName"] for r in shown if r["isTemporary"]} == set(frames)
    assert [r["col_name"] for r in described][:3] == ["dataset", "item_id", "group_id"]
    assert counted == [{"n": len(frames["labels"])}]
    assert "parquet" in explained[0]["plan"].lower()
    assert setting[0]["key"] == "spark.sql.shuffle.partitions"


def test_limit_notice_and_formats(dataset, frames):
    result = _sql(
        "SELECT item_id, judge_id FROM verdicts ORDER BY item_id, judge_id",
        "--data",
        dataset,
        "--limit",
        "3",
        "--format",
        "csv",
    )
    assert result.exit_code == 0, result.output
    expected = frames["verdicts"].sort_values(["item_id", "judge_id"])[["item_id", "judge_id"]].head(3)
    assert result.stdout.strip() == expected.to_csv(index=False).strip()
    assert "note: showing the first 3 rows" in result.stderr
    table = _sql("SELECT count(*) AS n FROM verdicts; SELECT 'a;b' AS s -- c;", "--data", dataset)
    assert table.exit_code == 0 and table.stdout.split() == ["n", str(len(frames["verdicts"])), "s", "a;b"]
    assert "note:" not in table.stderr


def test_help_states_the_read_only_rule_and_every_view():
    text = CliRunner().invoke(cli, ["sql", "--help"]).output
    for word in ("verdicts", "labels", "judges", "items", "Read-only", "--allow-writes", "reflect", "read_files"):
        assert word in text, word


def test_environment_variables_are_not_substituted(dataset, spark):
    # Spark's parser would replace ${env:PATH} by the JVM's PATH before any plan exists; the guard turns that off.
    assert spark._jvm.java.lang.System.getenv("PATH")  # noqa: SLF001 - the variable is there to leak
    result = _sql("SELECT '${env:PATH}' AS x", "--data", dataset, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"x": "${env:PATH}"}]
