"""``judgecal serve`` end to end, real processes on loopback: one server per module (restarted once).

The JDBC client is pyspark's own ``beeline``; the Spark Connect client is ``SparkSession.builder.remote``. The
references are independent of the server: per-judge counts of the in-memory engine, row counts read by pyarrow,
and ``judgecal sql``'s local session.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.dataset as pads
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.io.synthetic import generate_panel
from tests.cluster_support import free_port
from tests.engine.server_support import beeline, invoke, serving, start

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["replicates=2", "aggregators=[majority]", "calibrators=[none]", "panels=[all]", "permutation_resamples=50"]
ACCURACY = (
    "SELECT judge_id, sum(int(verdict = label)) AS correct, count(*) AS labelled_votes "
    "FROM {db}verdicts JOIN {db}labels USING (dataset, item_id) "
    "WHERE verdict IN ('A', 'B') AND label IN ('A', 'B') GROUP BY judge_id ORDER BY judge_id"
)


SECRET = "s3a-secret-never-on-argv-5c1e"
MARKER = "read-from-the-0600-file"


def _cli(*argv: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``judgecal ARGV`` as its own process, run in ``cwd`` (a user's shell in some folder)."""
    return subprocess.run(
        [sys.executable, "-m", "judgecal_dist.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="class")
def home(tmp_path_factory):
    """``judgecal serve`` with no options, twice at once from two folders, over a HOME of its own.

    The engine config each serve finds (``conf/local.yaml`` in its folder) holds only the ports and a spark_conf
    with an s3a secret key; the warehouse is the per-user default. One serve wins, the other is refused.
    """
    tmp = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if k != "JUDGECAL_WAREHOUSE"}
    env |= {"HOME": str(tmp / "home"), "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")}
    thrift, connect = free_port(), free_port()
    engine = {
        "sql_thrift_port": thrift,
        "sql_connect_port": connect,
        "spark_conf": {"spark.hadoop.fs.s3a.secret.key": SECRET, "spark.judgecal.probe.marker": MARKER},
    }
    folders = {name: tmp / name for name in ("a1", "a2", "b", "c")}
    for name, folder in folders.items():
        (folder / "conf").mkdir(parents=True)
        if name.startswith("a"):
            (folder / "conf" / "local.yaml").write_text(json.dumps(engine))
    argv = [sys.executable, "-m", "judgecal_dist.cli", "serve"]
    racing = [
        subprocess.Popen(argv, cwd=folders[n], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in ("a1", "a2")
    ]
    outcomes = [(p.wait(timeout=300), *p.communicate()) for p in racing]
    panel = str(tmp / "panel")
    generate_panel(panel, n_items=120, n_judges=3, n_samples=1, seed=2, label_fraction=1.0)
    served = {"env": env, "thrift": thrift, "connect": connect, "panel": panel, "tmp": tmp, "outcomes": outcomes}
    served |= {"warehouse": tmp / "home" / ".judgecal" / "warehouse", **folders}
    try:
        yield served
    finally:
        _cli("serve", "--stop", cwd=folders["c"], env=env)


def test_the_warehouse_is_the_option_then_the_environment_then_the_config_then_home(tmp_path, monkeypatch):
    from judgecal_dist.engine.sql.server import warehouse_folder

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("JUDGECAL_WAREHOUSE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert warehouse_folder() == tmp_path / "home" / ".judgecal" / "warehouse"
    assert warehouse_folder(None, "conf-wh") == tmp_path / "conf-wh"  # relative: from the current folder, once
    monkeypatch.setenv("JUDGECAL_WAREHOUSE", "~/env-wh")
    assert warehouse_folder(None, "conf-wh") == tmp_path / "home" / "env-wh"
    assert warehouse_folder("opt-wh", "conf-wh") == tmp_path / "opt-wh"


class TestOneWarehouseFromAnywhere:
    """Real processes on loopback: the per-user warehouse found from every folder, and the server's lifecycle."""

    def test_one_of_two_serves_wins_and_the_other_names_it(self, home):
        codes = sorted(code for code, _, _ in home["outcomes"])
        assert codes == [0, 2], home["outcomes"]
        ((_, out, err),) = [o for o in home["outcomes"] if o[0] == 0]
        ((_, _, refused),) = [o for o in home["outcomes"] if o[0] == 2]
        assert f"ready: jdbc:hive2://127.0.0.1:{home['thrift']}" in out
        assert "serve: ready in" in err and "serve: opening the Hive metastore" in err  # one line per long step
        (line,) = refused.strip().splitlines()
        # the loser names the winner: its pid and URL, or "starting" when it came before the winner's state file
        assert re.fullmatch(
            rf"Error: {re.escape(str(home['warehouse'] / 'server.lock'))}: a server already runs for this warehouse "
            r"\((pid \d+, (jdbc:hive2://\S+|starting)|starting)\); stop it first with `judgecal serve --stop .*`",
            line,
        ), line

    def test_catalog_add_and_sql_from_other_folders_then_beeline(self, home):
        added = _cli("catalog", "add", home["panel"], "--name", "panel", cwd=home["b"], env=home["env"])
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith(f"panel: dataset {home['panel']}")
        assert "catalog add: panel.verdicts (1/5" in added.stderr
        counted = _cli(
            "sql", "SELECT count(*) AS n FROM panel.verdicts", "--format", "json", cwd=home["c"], env=home["env"]
        )
        assert counted.returncode == 0, counted.stderr
        assert json.loads(counted.stdout) == [{"n": pads.dataset(f"{home['panel']}/verdicts").count_rows()}]
        status = _cli("serve", "--status", cwd=home["c"], env=home["env"])
        assert status.returncode == 0 and f"warehouse={home['warehouse']}" in status.stdout
        run = subprocess.run(
            [beeline(), "-u", f"jdbc:hive2://127.0.0.1:{home['thrift']}", "--silent=true", "--outputformat=csv2"]
            + ["-e", "SELECT count(*) AS n FROM panel.labels"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.split()[-1] == str(pads.dataset(f"{home['panel']}/labels").count_rows())

    def test_secrets_reach_spark_through_a_file_not_argv(self, home):
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                args = cmdline.read_bytes()
            except OSError:
                continue  # a process that ended meanwhile
            assert SECRET.encode() not in args, cmdline
        spark = ConnectSession.builder.remote(f"sc://127.0.0.1:{home['connect']}").create()
        try:
            assert spark.conf.get("spark.judgecal.probe.marker") == MARKER  # the engine config's spark_conf applied
        finally:
            spark.stop()

    def test_a_missing_table_is_one_line(self, home):
        missing = _cli("sql", "SELECT * FROM panel.nope", cwd=home["c"], env=home["env"])
        lines = missing.stderr.strip().splitlines()
        assert missing.returncode == 2 and len(lines) == 1, missing.stderr  # no JVM stack trace, no JSON record
        assert lines[0].startswith("Error: sql: [TABLE_OR_VIEW_NOT_FOUND] The table or view `panel`.`nope`")

    def test_connect_to_the_jdbc_port_fails_in_one_line(self, home):
        wrong = _cli("sql", "SELECT 1", "--connect", f"sc://127.0.0.1:{home['thrift']}", cwd=home["c"], env=home["env"])
        assert wrong.returncode == 2
        assert "does not speak Spark Connect" in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1

    def test_a_backtick_path_is_refused_before_anything_is_registered(self, home, tmp_path):
        odd = tmp_path / "odd`name"
        generate_panel(str(odd), n_items=20, n_judges=2, n_samples=1, seed=1)
        added = _cli("catalog", "add", str(odd), "--name", "odd", cwd=home["b"], env=home["env"])
        assert added.returncode == 2 and "a path with a backtick cannot be registered" in added.stderr
        listed = _cli("catalog", "list", "--format", "json", cwd=home["c"], env=home["env"])
        assert [e["name"] for e in json.loads(listed.stdout)] == ["panel"]

    def test_stop_on_a_copied_warehouse_leaves_the_original_running(self, home):
        import shutil

        copy = home["tmp"] / "copy"
        shutil.copytree(home["warehouse"], copy, ignore=shutil.ignore_patterns("metastore_db", "logs"))
        stopped = _cli("serve", "--stop", "--warehouse", str(copy), cwd=home["c"], env=home["env"])
        assert stopped.returncode == 0 and "its server" in stopped.stdout and "was not touched" in stopped.stdout
        assert not (copy / "server.json").exists()
        still = _cli("sql", "SELECT 1 AS a", "--format", "json", cwd=home["c"], env=home["env"])
        assert still.returncode == 0 and json.loads(still.stdout) == [{"a": 1}]

    def test_out_relative_to_the_callers_folder_through_the_server(self, home):
        query = "SELECT judge_id, count(*) AS n FROM verdicts GROUP BY judge_id ORDER BY judge_id"
        wrote = _cli(
            "sql", query, "--data", "../panel", "--out", "result", "--format", "json", cwd=home["c"], env=home["env"]
        )
        assert wrote.returncode == 0, wrote.stderr
        written = pads.dataset(str(home["c"] / "result")).to_table().to_pandas().sort_values("judge_id")
        printed = json.loads(wrote.stdout.splitlines()[0])
        assert written.to_dict("records") == printed
        assert sum(r["n"] for r in printed) == pads.dataset(f"{home['panel']}/verdicts").count_rows()

    def test_after_kill_9_a_client_fails_in_one_line(self, home):
        state = json.loads((home["warehouse"] / "server.json").read_text())
        long_query = "SELECT count(*) AS n FROM range(0, 40000000000, 1, 2)"
        argv = [sys.executable, "-m", "judgecal_dist.cli", "sql", long_query]
        running = subprocess.Popen(argv, cwd=home["c"], env=home["env"], stderr=subprocess.PIPE, text=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            running.wait(timeout=5)  # the client connects and sends the query meanwhile
        os.killpg(state["pid"], signal.SIGKILL)  # the server process and its JVM
        _, err = running.communicate(timeout=120)  # a client in the middle of a call: never a hang
        assert running.returncode == 1 and len(err.strip().splitlines()) == 1, err
        assert "stopped answering" in err
        after = _cli("sql", "SELECT 1", cwd=home["c"], env=home["env"], timeout=120)
        assert after.returncode == 2 and len(after.stderr.strip().splitlines()) == 1, after.stderr
        assert "stale state file" in after.stderr
        cleared = _cli("serve", "--stop", cwd=home["c"], env=home["env"])
        assert cleared.returncode == 0 and "cleared the stale state file" in cleared.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server over a warehouse holding a generated panel (``panel``) and a results root of two runs (``res``)."""
    tmp = tmp_path_factory.mktemp("serve")
    panel = str(tmp / "panel")
    generate_panel(panel, n_items=300, n_judges=4, n_samples=1, seed=5, label_fraction=0.8, tie_rate=0.05)
    out = str(tmp / "out")
    sets = [a for s in [f"data={panel}", *TINY] for a in ("--set", s)]
    for run_id in ("night-1", "night-2"):
        invoke("run", CONFIG, *sets, "--output", out, "--serial", "--run-id", run_id)
    with serving(tmp / "wh", panel=panel, out=out, tmp=tmp) as server:
        invoke("catalog", "add", panel, "--name", "panel", "--warehouse", server["warehouse"])
        invoke("catalog", "add", out, "--name", "res", "--warehouse", server["warehouse"])
        yield server


def _connect(server):
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    return ConnectSession.builder.remote(f"sc://127.0.0.1:{server['connect']}").create()


def test_beeline_join_gives_the_in_memory_engines_accuracies(served):
    from judgecal_dist.history.judges import judge_counts

    run = subprocess.run(
        [beeline(), "-u", f"jdbc:hive2://127.0.0.1:{served['thrift']}", "--silent=true", "--outputformat=csv2"]
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
    (through_server,) = [json.loads(line) for line in invoke("sql", ACCURACY.format(db="panel."), *wh).splitlines()]
    assert pd.DataFrame(through_server).equals(remote.astype({"correct": "int64", "labelled_votes": "int64"}))
    # --data through the server (temporary views of this client's session) against the local session
    query = ACCURACY.format(db="")
    server_rows = invoke("sql", query, "--data", served["panel"], *wh)
    empty = ["--warehouse", str(served["tmp"] / "no-server"), "--format", "json"]
    assert server_rows == invoke("sql", query, "--data", served["panel"], *empty)
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
    (left,) = json.loads(invoke("sql", "SELECT count(*) AS n FROM panel.labels", *wh, "--format", "json"))
    assert left["n"] == 300


def test_two_runs_of_a_study_are_rows_of_its_table(served):
    rows = json.loads(
        invoke(
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
    invoke("ingest", "--format", "long", str(src), dest, "--register", "tiny", "--conf", str(conf))
    query = "SELECT judge_id, count(*) AS n FROM tiny.verdicts GROUP BY judge_id ORDER BY judge_id"
    assert json.loads(invoke("sql", query, *wh, "--format", "json")) == [
        {"judge_id": "j1", "n": 2},
        {"judge_id": "j2", "n": 1},
    ]


def test_catalog_survives_a_restart_and_a_reingest_shows_new_rows(served):
    wh = ["--warehouse", served["warehouse"]]
    count = ["sql", "SELECT count(*) AS n FROM panel.labels", *wh, "--format", "json"]
    generate_panel(served["panel"], n_items=500, n_judges=4, n_samples=1, seed=6, overwrite=True)
    assert json.loads(invoke(*count)) == [{"n": 500}]  # the external table reads the folder as it is now
    assert invoke("serve", "--stop", *wh).startswith("stopped the server")
    start(served)
    listed = invoke("catalog", "list", *wh, "--format", "json")
    assert {e["name"] for e in json.loads(listed)} == {"panel", "res", "tiny"}
    invoke("catalog", "add", served["panel"], "--name", "panel", *wh)  # registering again: a refresh
    assert json.loads(invoke(*count)) == [{"n": 500}]
    assert "dropped res" in invoke("catalog", "drop", "res", *wh)
