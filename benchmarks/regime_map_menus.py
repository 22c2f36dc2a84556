"""The LLMBar regime map with the full menus against a baseline commit, in one run (issue 19 target: at most 2x).

Exports ``--baseline-ref`` (default ``main``; pass the commit before the menus landed once they are on main) with
``git archive`` into a temporary folder, then runs ``studies/configs/regime_map.yaml`` on the position-balanced
LLMBar rows through the study runner on local Ray, once with the baseline's code and once with this checkout's
(the default menus: table/scalar/union plus the fallback tables, hybrid, jury, NLL selection, scalar_main, full
and the single-judge comparators), each in a fresh interpreter, alternating ``--rounds`` times. Prints each wall
time, the ratio of the medians and the machine's load average before and after (a loaded machine slows both).

Usage (from the repository root)::

    python -m benchmarks.regime_map_menus --baseline-ref e0d1886
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchmarks.harness import add_smoke, smoke

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 2.0
_RUN = """
import shutil, sys, tempfile, time
from judgecal_dist.config import EngineConfig
from judgecal_dist.studies.runner import execute, prepare
run = prepare(sys.argv[1], [f"data={sys.argv[2]}", f"replicates={sys.argv[3]}"])
out = tempfile.mkdtemp(prefix="regime_map_menus_")
t0 = time.perf_counter()
try:
    execute(run, EngineConfig(ray_num_cpus=int(sys.argv[4])), output=out)
finally:
    shutil.rmtree(out, ignore_errors=True)
print(f"WALL {time.perf_counter() - t0:.3f}")
"""


def _export(ref: str, dest: Path) -> Path:
    archive = dest / "tree.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", ref], stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "tree", filter="data")
    return dest / "tree"


def _wall(tree: Path, data: str, replicates: int, cpus: int) -> float:
    config = tree / "judgecal_dist" / "studies" / "configs" / "regime_map.yaml"
    env = os.environ | {"PYTHONPATH": str(tree)}
    argv = [sys.executable, "-c", _RUN, str(config), data, str(replicates), str(cpus)]
    done = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, check=True)
    return float(next(line for line in done.stdout.splitlines() if line.startswith("WALL")).split()[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-ref", default="main")
    parser.add_argument("--data", default=None, help="ingested LLMBar URL (default: ingest the shared release)")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--replicates", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/judgecal-bench"))
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), replicates=2, rounds=1)
    data = args.data
    if data is None:
        from judgecal_dist.io.ingest import ingest

        data = str(args.cache / "llmbar")
        if not (Path(data) / "_SUCCESS").exists():
            ingest("llmbar", str(ROOT.parent / "shared" / "data" / "llmbar"), data)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="regime_map_baseline_") as tmp:
        baseline_tree = _export(args.baseline_ref, Path(tmp))
        times: dict[str, list[float]] = {"baseline": [], "menus": []}
        for _ in range(args.rounds):
            for name, tree in (("baseline", baseline_tree), ("menus", ROOT)):
                t0 = time.perf_counter()
                times[name].append(_wall(tree, data, args.replicates, args.cpus))
                print(f"  {name}: run {times[name][-1]:.1f}s (process {time.perf_counter() - t0:.1f}s)", flush=True)
    base, menus = statistics.median(times["baseline"]), statistics.median(times["menus"])
    print(f"LLMBar regime map, {args.replicates} splits, {args.cpus} Ray CPUs, baseline {args.baseline_ref}")
    print(f"  load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    print(f"  baseline median {base:.1f}s, full menus median {menus:.1f}s")
    print(f"ratio full menus / baseline: {menus / base:.2f}  (<= {TARGET_RATIO:.0f} meets the target)")


if __name__ == "__main__":
    main()
