"""Per-query latency of ad-hoc SQL: ``judgecal sql`` through ``judgecal serve`` vs a cold ``judgecal sql`` vs
``beeline``, with DuckDB over the same Parquet as an outside reference; server memory idle and under load.

The query is the per-judge accuracy join (verdicts x labels, GROUP BY judge_id) on two datasets: LLMBar (ingested
from the shared data) and a generated panel of ``--rows`` verdict rows. Every latency is a whole command as a user
runs it (a fresh process: Python or JVM start included), median of ``--repeats`` runs:

1. **server**: ``judgecal sql QUERY`` with a server running (Spark Connect, no JVM in the client);
2. **cold**: ``judgecal sql QUERY --data URL`` with no server (starts a local Spark session; ``--cold-repeats``);
3. **beeline**: pyspark's ``bin/beeline -u jdbc:hive2://... -e QUERY`` against the same server;
4. **duckdb**: the same join over the same Parquet files in this process (``duckdb`` from the ``bench`` extra);
5. **connect-warm**: the query on an open Spark Connect session (what a notebook pays per query).

Memory: the RSS of the server process and its children (the JVM), idle and peak while 4 ``judgecal sql`` clients
run the large query at once.

Usage (from the repository root)::

    python -m benchmarks.sql_latency --workdir /tmp/sql-bench            # LLMBar + 20M rows, 20 repeats
    python -m benchmarks.sql_latency --rows 5000000 --repeats 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.harness import add_smoke, smoke

QUERY = (
    "SELECT judge_id, sum(int(verdict = label)) AS correct, count(*) AS n "
    "FROM {p}verdicts JOIN {p}labels USING (dataset, item_id) "
    "WHERE verdict IN ('A', 'B') AND label IN ('A', 'B') GROUP BY judge_id ORDER BY judge_id"
)
ROOT = Path(__file__).resolve().parents[1]


def _judgecal(*args: str) -> list[str]:
    return [sys.executable, "-m", "judgecal_dist.cli", *args]


def _env() -> dict[str, str]:
    return os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"{cmd[:4]}... failed: {run.stderr[-1500:]}")
    return time.perf_counter() - start


def _median(cmd: list[str], repeats: int) -> float:
    return statistics.median(_timed(cmd) for _ in range(repeats))


def _rss_mb(pid: int) -> float:
    """RSS of ``pid`` and its descendants, MB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            continue
    return total / 1024


def _prepare(workdir: Path, rows: int, llmbar: Path) -> dict[str, str]:
    from judgecal_dist.io.ingest import ingest
    from judgecal_dist.io.synthetic import generate_panel

    data = {}
    if llmbar.is_dir():
        dest = workdir / "llmbar"
        if not (dest / "_SUCCESS").exists():
            ingest("llmbar", str(llmbar), str(dest), overwrite=True)
        data["llmbar"] = str(dest)
    judges = 40
    dest = workdir / f"panel-{rows // judges}x{judges}"
    if not (dest / "_SUCCESS").exists():
        start = time.perf_counter()
        generate_panel(str(dest), n_items=rows // judges, n_judges=judges, seed=0, overwrite=True)
        print(f"generated {dest.name} ({rows} rows) in {time.perf_counter() - start:.0f} s", flush=True)
    data["big"] = str(dest)
    return data


def _duckdb(url: str, repeats: int) -> float | None:
    """DuckDB's median, or None when the ``bench`` extra is not installed (the report says so)."""
    try:
        import duckdb
    except ImportError:
        return None

    query = QUERY.format(p="").replace("verdicts", f"read_parquet('{url}/verdicts/*.parquet') verdicts", 1)
    query = query.replace("labels USING", f"read_parquet('{url}/labels/*.parquet') labels USING", 1)
    query = query.replace("int(verdict = label)", "CAST(verdict = label AS INTEGER)")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        duckdb.connect().sql(query).fetchall()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/judgecal-sql-bench"))
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cold-repeats", type=int, default=3)
    parser.add_argument("--llmbar", type=Path, default=ROOT.parent / "shared" / "data" / "llmbar")
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), rows=2000, repeats=1, cold_repeats=1)
    if args.smoke:  # the generated table only (one cold JVM fewer), in a scratch folder
        args.workdir = Path(tempfile.mkdtemp(prefix="judgecal-sql-smoke-"))
        args.llmbar = args.workdir / "no-llmbar"
    args.workdir.mkdir(parents=True, exist_ok=True)
    data = _prepare(args.workdir, args.rows, args.llmbar)
    from tests.cluster_support import free_port

    wh = str(args.workdir / "warehouse")
    thrift, connect = free_port(), free_port()
    subprocess.run(
        _judgecal("serve", "--warehouse", wh, "--thrift-port", str(thrift), "--connect-port", str(connect)),
        check=True,
        env=_env(),
    )
    beeline = str(Path(__import__("pyspark").__file__).parent / "bin" / "beeline")
    from judgecal_dist.engine.sql.state import read_state

    pid = int(read_state(wh)["pid"])  # type: ignore[index]
    try:
        for name, url in data.items():
            subprocess.run(_judgecal("catalog", "add", url, "--name", name, "--warehouse", wh), check=True, env=_env())
        time.sleep(0.5 if args.smoke else 5)  # the server settles before its idle RSS is read
        idle = _rss_mb(pid)
        print(f"server RSS idle: {idle:.0f} MB", flush=True)
        for name, url in data.items():
            query = QUERY.format(p=f"{name}.")
            server = _median(_judgecal("sql", query, "--warehouse", wh), args.repeats)
            jdbc = _median(
                [beeline, "-u", f"jdbc:hive2://127.0.0.1:{thrift}", "--silent=true", "-e", query], args.repeats
            )
            cold = _median(
                _judgecal("sql", QUERY.format(p=""), "--data", url, "--warehouse", str(args.workdir / "none")),
                args.cold_repeats,
            )
            duck = _duckdb(url, args.repeats)
            if duck is None:
                print("duckdb not installed (pip install -e '.[bench]'): the outside reference is left out", flush=True)
            duck_s = "-" if duck is None else f"{duck:.3f}"
            from pyspark.sql.connect.session import SparkSession

            spark = SparkSession.builder.remote(f"sc://127.0.0.1:{connect}").create()
            spark.sql(query).collect()
            warm = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                spark.sql(query).collect()
                warm.append(time.perf_counter() - start)
            spark.stop()
            print(
                f"{name}: median s over {args.repeats} (cold: {args.cold_repeats}): server {server:.2f}, "
                f"cold {cold:.2f}, beeline {jdbc:.2f}, duckdb {duck_s}, connect-warm {statistics.median(warm):.2f}; "
                f"server/beeline {server / jdbc:.2f}x, cold/server {cold / server:.1f}x",
                flush=True,
            )
        peak = [0.0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _rss_mb(pid))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample)
        sampler.start()
        query = QUERY.format(p="big.")
        clients = [
            subprocess.Popen(_judgecal("sql", query, "--warehouse", wh), env=_env(), stdout=subprocess.DEVNULL)
            for _ in range(4)
        ]
        start = time.perf_counter()
        codes = [c.wait() for c in clients]
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        print(f"server RSS under 4 concurrent clients (big): peak {peak[0]:.0f} MB; all 4 done in {wall:.1f} s {codes}")
    finally:
        subprocess.run(_judgecal("serve", "--stop", "--warehouse", wh), env=_env())


if __name__ == "__main__":
    main()
