"""Dense packed path vs one-pass path of ``inclusion_scale``: time per replicate and driver memory, side by side.

For generated tables of N items x 50 judges (``--sizes``), the same study (one-coin x {none, Platt, beta} x
{all, top3, top5, top10}, ``--replicates`` splits) runs twice, each in a fresh child process:

* ``dense``: the item x judge int8 panel loaded in the driver (pyarrow + pandas), put in Ray's object store once,
  one Ray task per replicate chunk;
* ``onepass``: a persisted Spark table of items, every replicate sharing each pass.

It prints both paths' wall time, seconds per replicate, driver and worker peak RSS and the ratio, then the
threshold ``execution: auto`` should use: the verdict count from which the one-pass path is faster per replicate
or the dense driver would pass ``--driver-budget-mb`` (extrapolated linearly in verdict rows from the largest
size measured). The measured value is recorded in ``studies/configs/inclusion_scale.yaml`` and the README.

Usage (from the repository root)::

    python -m benchmarks.dense_vs_onepass --sizes 10000,30000,100000 --replicates 20
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import MemorySampler, add_smoke, engine_config, smoke
from benchmarks.scaling import N_JUDGES, PANELS, ensure_table


def child(execution: str, url: str, replicates: int, cache: str) -> None:
    from judgecal_dist.studies.runner import execute, prepare

    overrides = [f"data={url}", f"replicates={replicates}", f"execution={execution}", f"panels={PANELS}"]
    run = prepare("inclusion_scale", overrides, run_id=f"{execution}-{time.time_ns()}")
    with MemorySampler() as memory:
        start = time.perf_counter()
        execute(run, engine_config(stats_engine="spark", ray_num_cpus=None), output=f"{cache}/runs")
        wall = time.perf_counter() - start
    print(
        "RESULT "
        + json.dumps({"wall": wall, "driver_mb": memory.driver / 2**20, "workers_mb": memory.children / 2**20})
    )


def measure(execution: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.dense_vs_onepass", "--child", execution, "--data", url]
    cmd += ["--replicates", str(args.replicates), "--cache", args.cache]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{execution} on {url} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--driver-budget-mb", type=float, default=3072.0)
    parser.add_argument("--cache", default="/tmp/judgecal-bench")
    parser.add_argument("--child", choices=["dense", "onepass"], help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), sizes="300", replicates=2)
    if args.child:
        return child(args.child, args.data, args.replicates, args.cache)
    Path(args.cache).mkdir(parents=True, exist_ok=True)
    print(
        f"{'items':>8} {'verdicts':>10} | {'dense s/rep':>11} {'driver MB':>9} {'workers MB':>10} | "
        f"{'1-pass s/rep':>12} {'driver MB':>9} {'workers MB':>10} | {'1-pass/dense':>12}",
        flush=True,
    )
    threshold = None
    last = None
    for n in (int(s) for s in args.sizes.split(",")):
        url = ensure_table(Path(args.cache), n, "full")
        dense, onepass = measure("dense", url, args), measure("onepass", url, args)
        per_d, per_o = dense["wall"] / args.replicates, onepass["wall"] / args.replicates
        print(
            f"{n:>8} {n * N_JUDGES:>10} | {per_d:>11.3f} {dense['driver_mb']:>9.0f} {dense['workers_mb']:>10.0f} | "
            f"{per_o:>12.3f} {onepass['driver_mb']:>9.0f} {onepass['workers_mb']:>10.0f} | {per_o / per_d:>12.2f}",
            flush=True,
        )
        if threshold is None and (per_o <= per_d or dense["driver_mb"] > args.driver_budget_mb):
            threshold = n * N_JUDGES
        last = (n * N_JUDGES, dense["driver_mb"])
    if threshold is None and last:
        rows, mb = last  # dense driver memory grows linearly in verdict rows: where does it reach the budget?
        threshold = int(rows * args.driver_budget_mb / mb)
        print(
            f"one-pass never faster per replicate here; dense driver reaches {args.driver_budget_mb:.0f} MB at "
            f"~{threshold:,} verdict rows (linear in the {rows:,}-row run)"
        )
    print(f"dense_max_verdicts = {threshold}")


if __name__ == "__main__":
    main()
