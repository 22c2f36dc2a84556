"""Probes through ``judgecal serve``: the server's check rule decides on each analyzed plan, for JDBC (the real
``beeline``), a Spark Connect client and ``judgecal sql`` alike. One server for the module.

Each hole is refused in one line naming what was refused, and the files are byte for byte unchanged: a glob that
Hadoop expands outside the data, a path relative to the server's folder (its state file holds the token), a write
into a registered dataset (``INSERT INTO`` would add a part file while ``_SUCCESS`` stays) and, with
``--allow-writes``, a table over outside files.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.io.synthetic import generate_panel
from tests.engine.server_support import beeline, invoke, serving

pytestmark = pytest.mark.spark

SECRET = "plan-server-secret-93be"


def _snapshot(tmp: Path) -> dict[str, bytes]:
    """Every file of the registered dataset and of the folder beside it (not the warehouse: its log grows)."""
    return {str(p): p.read_bytes() for p in sorted(tmp.rglob("*")) if p.is_file() and "wh" not in p.parts}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plan-serve")
    panel = tmp / "panel"
    generate_panel(str(panel), n_items=40, n_judges=2, n_samples=1, seed=3, label_fraction=1.0)
    (tmp / "outside").mkdir()
    (tmp / "outside" / "secret.txt").write_text(SECRET + "\n")
    with serving(tmp / "wh", tmp=tmp) as server:
        invoke("catalog", "add", str(panel), "--name", "panel", "--warehouse", server["warehouse"])
        yield server | {"panel": panel, "glob": f"{panel}/{{verdicts,../outside}}/*"}


def _holes(served) -> dict[str, tuple[str, str]]:
    """id: (statement, what the refusal names)."""
    tmp = served["tmp"]
    return {
        "insert-registered": ("INSERT INTO panel.labels SELECT * FROM panel.labels", "writes " + str(tmp)),
        "glob-outside": (f"SELECT * FROM text.`{served['glob']}`", f"reads {tmp}/outside/secret.txt"),
        "relative-state-file": ("SELECT * FROM text.`server.json`", "server.json, outside the readable folders"),
        "table-over-outside": (
            f"CREATE TABLE leak (value STRING) USING text LOCATION '{tmp}/outside'",
            "outside the readable folders",
        ),
        "drop-registered": ("DROP TABLE panel.labels", "registered tables are read-only"),
        "java-call": ("SELECT reflect('java.lang.System', 'getenv', 'HOME')", "reflect/java_method is refused"),
        "shell-command": ("SELECT TRANSFORM(1) USING 'cat' AS (x)", "ScriptTransformation is refused"),
    }


def test_beeline_is_refused_and_nothing_changes(served):
    tmp = served["tmp"]
    state = json.loads((Path(served["warehouse"]) / "server.json").read_text())
    for case, (statement, needle) in _holes(served).items():
        before = _snapshot(tmp)
        run = subprocess.run(
            [beeline(), "-u", f"jdbc:hive2://127.0.0.1:{served['thrift']}", "--silent=true", "-e", statement],
            capture_output=True,
            text=True,
            timeout=300,
        )
        errors = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("Error:")]
        assert run.returncode != 0 and len(errors) == 1, (case, run.stdout[-2000:], run.stderr[-2000:])
        assert "sql: " in errors[0] and needle in errors[0], (case, errors)
        assert SECRET not in run.stdout + run.stderr and state["token"] not in run.stdout + run.stderr
        assert _snapshot(tmp) == before, case
    ok = subprocess.run(
        [beeline(), "-u", f"jdbc:hive2://127.0.0.1:{served['thrift']}", "--silent=true", "--outputformat=csv2"]
        + ["-e", "SELECT count(*) AS n FROM panel.labels"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0 and "\n40\n" in ok.stdout, ok.stderr[-2000:]


def test_a_connect_client_is_refused_and_nothing_changes(served):
    from pyspark.errors import IllegalArgumentException
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    tmp = served["tmp"]
    spark = ConnectSession.builder.remote(f"sc://127.0.0.1:{served['connect']}").create()
    try:
        for case, (statement, needle) in _holes(served).items():
            before = _snapshot(tmp)
            with pytest.raises(IllegalArgumentException) as caught:
                spark.sql(statement).collect()
            first = str(caught.value).strip().splitlines()[0]
            assert first.startswith("sql: ") and needle in first, (case, first)
            assert _snapshot(tmp) == before, case
        with pytest.raises(IllegalArgumentException, match="outside the readable folders"):
            spark.read.text(f"{tmp}/outside").collect()  # the DataFrame API is checked on the same plan
        assert spark.sql("SELECT count(*) AS n FROM panel.labels").collect()[0]["n"] == 40
    finally:
        spark.stop()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["SELECT * FROM text.`{glob}`", "--data", "{panel}"], "reads {tmp}/outside/secret.txt"),
        (["INSERT INTO panel.labels SELECT * FROM panel.labels"], "InsertInto"),
        (
            [
                "CREATE TABLE t (value STRING) USING text LOCATION '{tmp}/outside'",
                "--data",
                "{panel}",
                "--allow-writes",
            ],
            "reads {tmp}/outside",
        ),
    ],
    ids=["glob-with-data", "insert-registered", "table-over-outside-with-writes"],
)
def test_judgecal_sql_through_the_server_is_refused(served, args, needle):
    tmp = served["tmp"]
    fill = {"glob": served["glob"], "panel": served["panel"], "tmp": tmp}
    before = _snapshot(tmp)
    result = CliRunner().invoke(cli, ["sql", *(a.format(**fill) for a in args), "--warehouse", served["warehouse"]])
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert errors[0].startswith("Error: sql: ") and needle.format(**fill) in errors[0], result.output
    assert SECRET not in result.output and "Traceback" not in result.output
    assert _snapshot(tmp) == before
