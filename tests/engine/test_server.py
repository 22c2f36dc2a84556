"""``judgecal serve`` end to end, real processes on loopback: one server per module (restarted once).

The JDBC client is pyspark's own ``beeline``; the Spark Connect client is ``SparkSession.builder.remote``. The
references are independent of the server: per-judge counts of the in-memory engine, row counts read by pyarrow,
and ``judgecal sql``'s local session.
"""

from __future__ import annotations

import gc
import io
import json
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow.dataset as pads
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.io.synthetic import generate_panel
from tests.cluster_support import free_port

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["replicates=2", "aggregators=[majority]", "calibrators=[none]", "panels=[all]", "permutation_resamples=50"]
ACCURACY = (
    "SELECT judge_id, sum(int(verdict = label)) AS correct, count(*) AS labelled_votes "
    "FROM {db}verdicts JOIN {db}labels USING (dataset, item_id) "
    "WHERE verdict IN ('A', 'B') AND label IN ('A', 'B') GROUP BY judge_id ORDER BY judge_id"
)


def _beeline() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "beeline")


def _invoke(*argv: str) -> str:
    result = CliRunner().invoke(cli, list(argv))
    assert result.exit_code == 0, result.output
    return result.stdout  # log lines go to stderr


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server over a warehouse holding a generated panel (``panel``) and a results root of two runs (``res``)."""
    tmp = tmp_path_factory.mktemp("serve")
    panel = str(tmp / "panel")
    generate_panel(panel, n_items=300, n_judges=4, n_samples=1, seed=5, label_fraction=0.8, tie_rate=0.05)
    out = str(tmp / "out")
    sets = [a for s in [f"data={panel}", *TINY] for a in ("--set", s)]
    for run_id in ("night-1", "night-2"):
        _invoke("run", CONFIG, *sets, "--output", out, "--serial", "--run-id", run_id)
    server = {
        "warehouse": str(tmp / "wh"),
        "thrift": free_port(),
        "connect": free_port(),
        "panel": panel,
        "out": out,
        "tmp": tmp,
    }
    _start(server)
    try:
        _invoke("catalog", "add", panel, "--name", "panel", "--warehouse", server["warehouse"])
        _invoke("catalog", "add", out, "--name", "res", "--warehouse", server["warehouse"])
        yield server
    finally:
        CliRunner().invoke(cli, ["serve", "--stop", "--warehouse", server["warehouse"]])


def _start(server) -> None:
    output = _invoke(
        "serve",
        "--warehouse",
        server["warehouse"],
        "--thrift-port",
        str(server["thrift"]),
        "--connect-port",
        str(server["connect"]),
    )
    assert f"ready: jdbc:hive2://127.0.0.1:{server['thrift']}" in output


def _connect(server):
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    return ConnectSession.builder.remote(f"sc://127.0.0.1:{server['connect']}").create()


def test_beeline_join_gives_the_in_memory_engines_accuracies(served):
    from judgecal_dist.history.judges import judge_counts

    run = subprocess.run(
        [_beeline(), "-u", f"jdbc:hive2://127.0.0.1:{served['thrift']}", "--silent=true", "--outputformat=csv2"]
        + ["-e", ACCURACY.format(db="panel.")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    csv = run.stdout[run.stdout.index("judge_id") :]
    over_jdbc = pd.read_csv(io.StringIO(csv))
    in_memory = judge_counts(served["panel"], engine="local").sort_values("judge_id")
    assert over_jdbc["judge_id"].tolist() == in_memory["judge_id"].tolist()
    assert over_jdbc["correct"].tolist() == in_memory["correct"].tolist()
    assert over_jdbc["labelled_votes"].tolist() == in_memory["labelled_votes"].tolist()


def test_connect_client_and_judgecal_sql_read_the_same_tables(served):
    spark = _connect(served)
    try:
        counted = spark.sql("SELECT count(*) AS n FROM panel.verdicts").collect()[0]["n"]
        remote = spark.sql(ACCURACY.format(db="panel.")).toPandas()
        comments = spark.sql("DESCRIBE TABLE panel.verdicts").toPandas().set_index("col_name")["comment"]
    finally:
        spark.stop()
    assert counted == pads.dataset(f"{served['panel']}/verdicts").count_rows()
    assert "ORIGINAL numbering" in comments["verdict"]
    wh = ["--warehouse", served["warehouse"], "--format", "json"]
    (through_server,) = [json.loads(line) for line in _invoke("sql", ACCURACY.format(db="panel."), *wh).splitlines()]
    assert pd.DataFrame(through_server).equals(remote.astype({"correct": "int64", "labelled_votes": "int64"}))
    # --data through the server (temporary views of this client's session) against the local session
    query = ACCURACY.format(db="")
    server_rows = _invoke("sql", query, "--data", served["panel"], *wh)
    empty = ["--warehouse", str(served["tmp"] / "no-server"), "--format", "json"]
    assert server_rows == _invoke("sql", query, "--data", served["panel"], *empty)
    assert json.loads(server_rows) == through_server
    # every Connect client the commands opened is closed: an open one calls its server again at interpreter exit
    # and, once that server has stopped, retries for minutes before the process can end
    from pyspark.sql.connect.client.core import SparkConnectClient

    clients = [o for o in gc.get_objects() if isinstance(o, SparkConnectClient)]
    assert clients and all(c.is_closed for c in clients)


def test_hostile_sql_through_the_server_is_refused(served):
    wh = ["--warehouse", served["warehouse"]]
    for query, message in [
        ("SELECT reflect('java.lang.System', 'getenv', 'HOME')", "sql: function reflect is refused"),
        ("DROP TABLE panel.verdicts", "sql: DropTable is not a query: judgecal sql is read-only"),
        ("SELECT * FROM text.`/etc/passwd`", "sql: reads the path '/etc/passwd'"),
        ("SELECT 1 AS a; INSERT INTO panel.labels SELECT * FROM panel.labels", "sql: statement 2: InsertInto"),
    ]:
        result = CliRunner().invoke(cli, ["sql", query, *wh])
        assert result.exit_code == 2 and message in result.output, result.output
    (left,) = json.loads(_invoke("sql", "SELECT count(*) AS n FROM panel.labels", *wh, "--format", "json"))
    assert left["n"] == 300


def test_two_runs_of_a_study_are_rows_of_its_table(served):
    rows = json.loads(
        _invoke(
            "sql",
            "SELECT run_id, study, dataset_url, input_digest, finished, count(*) AS n FROM res.inclusion "
            "GROUP BY ALL ORDER BY run_id",
            "--warehouse",
            served["warehouse"],
            "--format",
            "json",
        )
    )
    assert [r["run_id"] for r in rows] == ["night-1", "night-2"]
    assert {r["study"] for r in rows} == {"inclusion"} and {r["dataset_url"] for r in rows} == {served["panel"]}
    assert all(r["input_digest"] and r["finished"] and r["n"] > 0 for r in rows)


def test_prompt_runs_statements_until_eof(served):
    result = CliRunner().invoke(
        cli,
        ["sql", "--warehouse", served["warehouse"], "--format", "csv"],
        input="SELECT count(*)\n AS n FROM panel.judges;\nSELECT reflect('a', 'b');\nSELECT 2 AS b;\n",
    )
    assert result.exit_code == 0, result.output
    assert "n\n4" in result.output and "function reflect is refused" in result.output and "b\n2" in result.output


def test_ingest_register_makes_a_database(served, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "verdicts.csv").write_text("dataset,item_id,judge_id,verdict\nd,i1,j1,A\nd,i1,j2,B\nd,i2,j1,B\n")
    (src / "labels.csv").write_text("dataset,item_id,label\nd,i1,A\nd,i2,B\n")
    wh = ["--warehouse", served["warehouse"]]
    dest = str(tmp_path / "tiny")
    conf = tmp_path / "engine.yaml"  # --register reaches the server of the engine config's warehouse
    conf.write_text(f"sql_warehouse: {served['warehouse']}\n")
    _invoke("ingest", "--format", "long", str(src), dest, "--register", "tiny", "--conf", str(conf))
    query = "SELECT judge_id, count(*) AS n FROM tiny.verdicts GROUP BY judge_id ORDER BY judge_id"
    assert json.loads(_invoke("sql", query, *wh, "--format", "json")) == [
        {"judge_id": "j1", "n": 2},
        {"judge_id": "j2", "n": 1},
    ]


def test_catalog_survives_a_restart_and_a_reingest_shows_new_rows(served):
    wh = ["--warehouse", served["warehouse"]]
    count = ["sql", "SELECT count(*) AS n FROM panel.labels", *wh, "--format", "json"]
    generate_panel(served["panel"], n_items=500, n_judges=4, n_samples=1, seed=6, overwrite=True)
    assert json.loads(_invoke(*count)) == [{"n": 500}]  # the external table reads the folder as it is now
    assert _invoke("serve", "--stop", *wh).startswith("stopped the server")
    _start(served)
    listed = _invoke("catalog", "list", *wh, "--format", "json")
    assert {e["name"] for e in json.loads(listed)} == {"panel", "res", "tiny"}
    _invoke("catalog", "add", served["panel"], "--name", "panel", *wh)  # registering again: a refresh
    assert json.loads(_invoke(*count)) == [{"n": 500}]
    assert "dropped res" in _invoke("catalog", "drop", "res", *wh)
