"""``judgecal score`` before and after a change, side by side: wall and CPU time per engine, and their ratios.

Written for the output-ownership change (marker, staged items promoted file by file, Spark tasks writing their items
through fsspec, coverage from the scan's tallies, null rows for unvoted items): it must not slow ``score`` down.
It reuses :mod:`benchmarks.score_throughput`'s seeded panel and fitted model, times ``judgecal score`` as a fresh
process (cold, :func:`benchmarks.harness.whole_process`) and runs each engine's pass alternately on the two source trees, ``--repeats`` times each, keeping the
fastest (the machine is shared; the minimum is the least disturbed run). ``--before`` is a checkout of the
older code (e.g. ``git worktree add /tmp/before <commit>``); the current tree is the "after". Usage (from the
repository root)::

    python -m benchmarks.score_ownership --before /tmp/before              # 200k items x 50 judges (10M verdicts)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import add_smoke, smoke, whole_process
from benchmarks.score_throughput import prepare

ROOT = Path(__file__).resolve().parents[1]


def _timed(tree: Path, mode: str, run: str, data: str, out: str, master: str) -> dict:
    """``judgecal score --engine MODE`` of ``tree``'s code as a fresh whole process (cold), as a user types it."""
    conf = Path(out + ".engine.json")
    conf.write_text(json.dumps({"spark_master": master}))  # otherwise the CLI's defaults
    argv = [sys.executable, "-m", "judgecal_dist.cli", "score", "--model", run, "--data", data, "--output", out]
    env = {"PYTHONPATH": str(tree)}  # the tree's package, not this checkout's
    timing = whole_process([*argv, "--engine", mode, "--conf", str(conf)], f"{tree.name} {mode}", env=env, cwd=tree)
    return {
        "seconds": timing.seconds,
        "cpu_s": timing.cpu_s,
        "driver_peak_mb": timing.peak_mb,
        "load": timing.load_after,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=None, help="A checkout of the code to compare against (required).")
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--judges", type=int, default=50)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--modes", default="local,spark")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workdir", default=None, help="Keep the generated panel here (reused when present).")
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), items=3000, judges=6, repeats=1)
    if args.before is None and not args.smoke:
        parser.error("--before is required")
    args.before = args.before or str(ROOT)  # smoke: this tree on both sides
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="score-ownership-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data, run, verdicts = prepare(workdir, args.items, args.judges)
    print(f"panel {args.items} items x {args.judges} judges = {verdicts:,} verdicts")
    trees = {"before": Path(args.before).resolve(), "after": ROOT}
    best: dict[tuple[str, str], dict] = {}
    for mode in args.modes.split(","):
        for _ in range(args.repeats):
            for name, tree in trees.items():  # alternate, so a burst of load hits both sides alike
                out = str(workdir / f"out-{name}-{mode}-{time.time_ns()}")
                result = _timed(tree, mode, run, data, out, args.master)
                if (name, mode) not in best or result["seconds"] < best[name, mode]["seconds"]:
                    best[name, mode] = result
        b, a = best["before", mode], best["after", mode]
        print(
            f"{mode:6s} before {b['seconds']:7.2f}s cpu {b['cpu_s']:6.1f}s | after {a['seconds']:7.2f}s cpu "
            f"{a['cpu_s']:6.1f}s | after/before wall {a['seconds'] / b['seconds']:.2f}x cpu "
            f"{a['cpu_s'] / b['cpu_s']:.2f}x | peak RSS {b['driver_peak_mb']:.0f} -> {a['driver_peak_mb']:.0f} MB | "
            f"load {a['load']:.1f}"
        )
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
