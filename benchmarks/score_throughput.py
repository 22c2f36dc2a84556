"""``judgecal score`` throughput: Spark vs a single-process pyarrow + numpy pass over the same Parquet files.

One run generates a seeded panel (``--items`` x ``--judges``, 1% labelled, :func:`judgecal_dist.io.synthetic.
generate_panel`), fits the study's default pipeline on the labelled items and saves it as a run's
``model/model.json`` (the inclusion study's own export; ``--run`` reuses a fitted run instead, e.g. one
fitted on a smaller panel of the same generator, which has the same judges), then times, each in a fresh
subprocess:

1. ``spark``: :func:`judgecal_dist.scoring.apply.score_dataset` on Spark (``--master``, default ``local[*]``;
   ``--conf KEY=VALUE`` adds session settings); the session is started before the clock starts. Reported: wall
   time, verdicts/s, the Python driver's peak RSS (``VmHWM``) and the JVM's peak RSS (``VmHWM``; in local mode
   the JVM is driver and executors);
2. ``local``: the same function on the in-memory engine (pyarrow + numpy inside ``judgecal``);
3. ``baseline``: a minimal hand-written pass: read ``item_id, judge_id, verdict`` with pyarrow, build the dense
   vote matrix, one-coin log-odds + beta + conformal sets with numpy, write one Parquet file of item rows.

and prints the ratios spark / baseline and local / baseline (target of issue 9: spark within 2x of the baseline
at 2M items x 50 judges, driver under 2 GB), of wall time and of CPU time (user + system of the process and all
its descendants: on a shared machine the wall-time ratio moves with the other jobs' load, the CPU ratio much
less). ``--modes`` picks the passes (``local`` holds the whole table in memory: leave it out at 100M). Usage
(from the repository root)::

    python -m benchmarks.score_throughput                          # 200k items x 50 judges (10M verdicts)
    python -m benchmarks.score_throughput --items 2000000 --modes baseline,spark   # the issue's 100M verdicts
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _tree_cpu_s() -> float:
    """CPU seconds (user + system) of this process and all its descendants, live or reaped (JVM, Python workers).

    Reported beside the wall time: on a shared machine the wall time of a run depends on the other jobs' load,
    its CPU time much less.
    """
    tick, children, own = os.sysconf("SC_CLK_TCK"), {}, 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu = sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
        if int(pid) == os.getpid():
            own = cpu
        children.setdefault(int(fields[1]), []).append((int(pid), cpu))
    total, stack = own, [os.getpid()]
    while stack:
        for pid, cpu in children.get(stack.pop(), []):
            total, stack = total + cpu, [*stack, pid]
    return total


def _jvm_peak_mb() -> float:
    """Peak RSS (VmHWM) of this process's java children, in MB (0 when none)."""
    peak = 0.0
    for child in Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split():
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            continue
        if "java" in Path(f"/proc/{child}/comm").read_text():
            peak = max(peak, int(status.split("VmHWM:")[1].split()[0]) / 1024)
    return peak


def prepare(workdir: Path, items: int, judges: int, run_url: str | None = None) -> tuple[str, str, int]:
    from judgecal_dist.engine.jobs.panel import load_panel
    from judgecal_dist.io.synthetic import generate_panel
    from judgecal_dist.studies.inclusion.model import DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR, export_model
    from judgecal_dist.studies.inclusion.study import Config

    data = str(workdir / f"panel-{items}x{judges}")
    if not Path(data, "_SUCCESS").exists():
        generate_panel(data, n_items=items, n_judges=judges, seed=0, label_fraction=0.01, overwrite=True)
    if run_url:  # a model fitted on a smaller panel of the same generator (same judges): no 100M-row fit
        return data, run_url, items * judges
    run = workdir / f"run-{items}x{judges}"
    if (run / "_SUCCESS").exists():
        return data, str(run), items * judges
    (run / "model").mkdir(parents=True, exist_ok=True)
    panel = load_panel(data)  # the labelled 1%
    model = export_model(Config(data=data), panel, (DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR, "all"))
    (run / "model" / "model.json").write_text(json.dumps(model.document))  # the study's own export
    (run / "_SUCCESS").write_text("")
    return data, str(run), items * judges


def baseline(model_url: str, data: str, out: str) -> None:
    """The single-process pass: pyarrow read, numpy scatter and model, one Parquet write."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from scipy.special import expit, log_expit, logit

    model = json.loads(Path(model_url, "model", "model.json").read_text())
    agg, cal = model["aggregator"], model["calibrator"]
    table = pq.read_table(f"{data}/verdicts", columns=["item_id", "judge_id", "verdict"])
    items = pc.dictionary_encode(table["item_id"].combine_chunks())
    row = items.indices.to_numpy()
    col = pc.index_in(table["judge_id"], value_set=pa.array(model["judge_ids"])).to_numpy(zero_copy_only=False)
    vote = pc.fill_null(pc.index_in(table["verdict"], value_set=pa.array(["B", "A"])), -1).to_numpy()
    z = np.zeros((len(items.dictionary), len(model["judge_ids"])))
    keep = vote >= 0
    z[row[keep], col[keep].astype(np.int64)] = 2.0 * vote[keep] - 1.0
    t = logit(agg["class_prior"]) + z @ np.array(agg["weights"])
    if model.get("calibrator_input") == "logit":
        log_s, log_1ms = log_expit(t), log_expit(-t)
    else:
        s = np.clip(expit(t), model["eps"], 1 - model["eps"])
        log_s, log_1ms = np.log(s), np.log1p(-s)
    p = expit(cal["a"] * log_s - cal["b"] * log_1ms + cal["c"])
    columns = {"item_id": items.dictionary, "p": p, "verdict": np.where(p > 0.5, "A", "B")}
    for c in model["conformal"]:
        q = np.inf if c["threshold"] is None else c["threshold"]
        columns[f"a_{c['alpha']}"] = (1 - p <= q).astype(np.int8) * 2 + (p <= q)  # bit 1: A in the set, bit 0: B
    pq.write_table(pa.table(columns), out)


def child(mode: str, model_url: str, data: str, out: str, master: str, conf: dict[str, str]) -> dict:
    from judgecal_dist.config import EngineConfig

    if mode == "baseline":
        cpu0, start = _tree_cpu_s(), time.perf_counter()
        baseline(model_url, data, out)
        seconds = time.perf_counter() - start
    else:
        from judgecal_dist.scoring.apply import score_dataset

        engine = EngineConfig(stats_engine=mode, spark_master=master, spark_conf=conf)
        if mode == "spark":
            from judgecal_dist.engine.jobs.spark import get_session

            get_session(master, conf=conf).range(10).count()  # JVM start-up is not part of the pass
        cpu0, start = _tree_cpu_s(), time.perf_counter()
        score_dataset(model_url, data, out, engine=engine)
        seconds = time.perf_counter() - start
    cpu = _tree_cpu_s() - cpu0
    # VmHWM of this process (ru_maxrss would carry the parent's high-water mark across fork + exec)
    driver_mb = int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) / 1024
    return {"mode": mode, "seconds": seconds, "cpu_s": cpu, "driver_peak_mb": driver_mb, "jvm_peak_mb": _jvm_peak_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--judges", type=int, default=50)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--modes",
        default="baseline,local,spark",
        help="Comma-separated subset of baseline,local,spark (local holds the whole table in memory).",
    )
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark session setting.")
    parser.add_argument("--run", default=None, help="Score with this run's model instead of fitting one.")
    parser.add_argument("--workdir", default=None, help="Keep the generated panel here (reused when present).")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "MODEL", "DATA", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        conf = dict(item.split("=", 1) for item in args.conf)
        print(json.dumps(child(*args.child, master=args.master, conf=conf)))
        return
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="score-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data, run, verdicts = prepare(workdir, args.items, args.judges, args.run)
    print(f"panel {args.items} items x {args.judges} judges = {verdicts:,} verdicts ({time.perf_counter() - t0:.0f}s)")
    results = {}
    for mode in args.modes.split(","):
        out = str(workdir / f"out-{mode}-{time.time_ns()}")
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.score_throughput",
            "--master",
            args.master,
            *[f"--conf={item}" for item in args.conf],
            "--child",
            mode,
            run,
            data,
            out,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
        r = results[mode]
        print(
            f"{mode:9s} {r['seconds']:8.2f}s  cpu {r['cpu_s']:7.1f}s  {verdicts / r['seconds'] / 1e6:6.2f}M verdicts/s  "
            f"driver peak {r['driver_peak_mb']:7.0f} MB  jvm peak {r['jvm_peak_mb']:7.0f} MB"
        )
    base = results.get("baseline")
    for mode in [m for m in ("spark", "local") if m in results and base]:
        r = results[mode]
        print(
            f"ratio {mode}/baseline: wall {r['seconds'] / base['seconds']:.2f}x, cpu {r['cpu_s'] / base['cpu_s']:.2f}x"
            + (" (target: wall <= 2x, driver < 2 GB)" if mode == "spark" else " (target: wall <= 1.3x)")
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
