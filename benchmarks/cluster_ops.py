"""Cluster operations, measured side by side on one loopback Ray head (``ray start --head``):

1. submission overhead: ``judgecal submit --follow`` (stage, upload, job start, run, log tail) against a local
   ``judgecal run`` of the same study (its own local Ray), as a ratio of wall times;
2. recovery: a study on the cluster with one replicate worker killed (SIGKILL by pid) against the same study
   undisturbed, as a ratio of wall times (the extra time is the retried task plus a fresh worker).

Usage: ``python benchmarks/cluster_ops.py [--replicates 24] [--repeats 2]``. CPU timings on a shared machine are
noisy: the runs alternate and each figure is a median over ``--repeats``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import add_smoke, smoke

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster_support import start_ray_head  # noqa: E402 - the same loopback cluster the tests use

CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml"
FAST = [
    "aggregators=[majority, one_coin]",
    "calibrators=[none, platt]",
    "panels=[all, top3]",
    "permutation_resamples=200",
    "conformal_alphas=[0.2]",
]
ENV = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_ADDRESS="")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "judgecal_dist.cli", *args]


def _sets(args: list[str]) -> list[str]:
    return [x for a in args for x in ("--set", a)]


def _timed(cmd: list[str], on_start=None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if on_start is not None:
        on_start(proc)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed:\n{err[-2000:]}")
    return time.perf_counter() - t0


def _kill_one_worker(head, proc) -> None:
    while proc.poll() is None:
        pids = head.worker_pids("_replicate_chunk")
        if pids:
            os.kill(pids[0], signal.SIGKILL)
            return
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    add_smoke(parser)
    opts = smoke(parser.parse_args(argv), replicates=2, repeats=1)

    from judgecal_dist.io.synthetic import generate_panel

    work = Path(tempfile.mkdtemp(prefix="judgecal-bench-"))
    generate_panel(str(work / "panel"), n_items=400, n_judges=6, seed=5)
    args = [f"data={work / 'panel'}", f"replicates={opts.replicates}", *FAST]
    head = start_ray_head(num_cpus=2)
    times: dict[str, list[float]] = {"local run": [], "submit --follow": [], "cluster run": [], "worker killed": []}
    try:
        for k in range(opts.repeats):
            out = work / f"out{k}"
            times["local run"].append(_timed(_cli("run", str(CONFIG), *_sets(args), "--output", f"{out}/local")))
            times["submit --follow"].append(
                _timed(
                    _cli(
                        "submit",
                        str(CONFIG),
                        *_sets(args),
                        "--ray-address",
                        head.dashboard,
                        "--run-id",
                        f"bench-{k}",
                        "--output",
                        f"{out}/submit",
                        "--follow",
                    )
                )
            )
            cluster = _cli("run", str(CONFIG), *_sets(args), "--ray-address", head.gcs, "--output")
            times["cluster run"].append(_timed([*cluster, f"{out}/cluster"]))
            times["worker killed"].append(_timed([*cluster, f"{out}/killed"], lambda p: _kill_one_worker(head, p)))
            for name in ("local", "submit", "cluster", "killed"):  # the same results everywhere
                summaries = {p.read_text() for p in (out / name).rglob("summary.json")}
                assert len(summaries) == 1, name
            summaries = {p.read_text() for p in out.rglob("summary.json")}
            assert len(summaries) == 1, "results differ between local, submitted, cluster and killed runs"
    finally:
        head.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    print(f"study: inclusion, {opts.replicates} replicates, 400 items x 6 judges; median of {opts.repeats} runs")
    for name, value in med.items():
        print(f"  {name:<16} {value:7.2f} s   (runs: {', '.join(f'{t:.2f}' for t in times[name])})")
    print(f"submission overhead: submit --follow / local run = {med['submit --follow'] / med['local run']:.2f}x")
    print(
        f"  (a local run starts its own Ray; against a driver on the running cluster: submit --follow / cluster "
        f"run = {med['submit --follow'] / med['cluster run']:.2f}x)"
    )
    print(
        f"recovery: worker killed / undisturbed cluster run = {med['worker killed'] / med['cluster run']:.2f}x "
        f"(+{med['worker killed'] - med['cluster run']:.2f} s)"
    )


if __name__ == "__main__":
    main()
