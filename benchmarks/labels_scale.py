"""The labelling commands at arena scale, timed as a user types them: ``judgecal label select`` and ``judgecal
label estimate`` on 10M items x 10 judges (issue 32: under 120 s each on 2 cores, with the driver's memory).

One run generates a seeded panel (``--items`` x ``--judges``, 0.1% labelled; kept in ``--workdir`` and reused when
it is there, untimed), fits the panel's model on a small panel of the same generator and judges (20k items,
untimed: ``judgecal fit`` at scale is issue 31's benchmark), then times each command as a fresh whole process
(the typed ``judgecal``, its own interpreter start and imports included; the auto engine decides by size as for
``score``). Reported per command: wall and CPU seconds (the process and all its descendants), the peak RSS of the
driver (the ``judgecal`` process) and of the whole process tree (a JVM and its Python workers when Spark runs),
the engine the command chose, and the 1-minute load before and after (on a shared machine the wall time moves
with the load; the CPU time much less).

Usage (from the repository root)::

    python -m benchmarks.labels_scale                  # 10M items x 10 judges (100M verdict rows)
    python -m benchmarks.labels_scale --smoke          # a tiny panel, seconds (CI's benchmark smoke test)
    python -m benchmarks.labels_scale --items 1000000 --workdir /tmp/labels-1m

``label estimate`` is timed the same way, on the panel's labels as a uniform sample (every target's PPI++ estimate).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SMOKE_ITEMS = 3000
FIT_ITEMS = 20_000
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def judgecal() -> list[str]:
    """The typed ``judgecal``: the console script next to this interpreter, else ``python -m judgecal_dist.cli``."""
    script = Path(sys.executable).with_name("judgecal")
    return [str(script)] if script.exists() else [sys.executable, "-m", "judgecal_dist.cli"]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(pid))
    return tree


def _tree(root: int) -> list[int]:
    children, out, stack = _children(), [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def _rss_mb(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_MB
    except (OSError, IndexError):
        return 0.0


def _cpu_s(pid: int) -> float:
    """User + system seconds of ``pid`` and its reaped children."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def timed(args: Sequence[str], env: dict[str, str]) -> dict[str, Any]:
    """``judgecal ARGS`` as a fresh process: wall and CPU seconds, peak RSS of the driver and of the tree."""
    load_before = os.getloadavg()[0]
    peak = {"driver_mb": 0.0, "tree_mb": 0.0, "cpu_s": 0.0}
    started = time.perf_counter()
    proc = subprocess.Popen([*judgecal(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        cpu: dict[int, float] = {}
        while not done.is_set():
            pids = _tree(proc.pid)
            peak["driver_mb"] = max(peak["driver_mb"], _rss_mb(proc.pid))
            peak["tree_mb"] = max(peak["tree_mb"], sum(_rss_mb(p) for p in pids))
            cpu |= {p: _cpu_s(p) for p in pids}  # the last reading of each process, gone ones kept
            peak["cpu_s"] = sum(cpu.values())
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"judgecal {' '.join(args)} exited {proc.returncode}:\n{err[-3000:]}")
    line = next((x for x in out.splitlines() if x.startswith("{")), "{}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(peak["cpu_s"], 2),
        "driver_peak_mb": round(peak["driver_mb"]),
        "tree_peak_mb": round(peak["tree_mb"]),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "result": json.loads(line),
    }


def prepare(work: Path, items: int, judges: int, env: dict[str, str], labelled: float = 0.001) -> tuple[str, str]:
    """The big panel (reused when committed) and a model fitted on a small panel of the same judges.

    The small panel's items are the big panel's first ones (same generator and seed), at most half of them: the
    big panel's labels beyond them are labels the proxy never saw, which ``label estimate`` counts.
    """
    data, small, results = work / f"panel-{items}x{judges}", work / f"fit-panel-{judges}", work / "results"
    if not (data / "_SUCCESS").exists():
        shutil.rmtree(data, ignore_errors=True)
        args = ["generate", "--items", str(items), "--judges", str(judges), "--label-fraction", str(labelled)]
        subprocess.run([*judgecal(), *args, "--seed", "0", str(data)], env=env, check=True, capture_output=True)
    if not (small / "_SUCCESS").exists():
        args = ["generate", "--items", str(min(items // 2, FIT_ITEMS)), "--judges", str(judges), "--seed", "0"]
        subprocess.run([*judgecal(), *args, str(small)], env=env, check=True, capture_output=True)
    fitted = subprocess.run(
        [*judgecal(), "fit", "--data", str(small), "--output", str(results), "--serial"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return str(data), fitted.stdout.strip().splitlines()[-1]


def commands(run: str, data: str, out: Path, budget: int) -> dict[str, list[str]]:
    """The timed commands, by name: each a fresh output folder."""
    return {
        "label select": [
            "label",
            "select",
            "--model",
            run,
            "--data",
            data,
            "--budget",
            str(budget),
            "--output",
            str(out / "queue"),
        ],
        # the panel's labels the model never saw, as a uniform sample: every target's PPI++ estimate
        "label estimate": ["label", "estimate", "--model", run, "--data", data, "--output", str(out / "estimates")],
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000_000)
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_ITEMS} items: a check that it runs")
    parser.add_argument("--workdir", default=None, help="Keeps the generated panel between runs.")
    opts = parser.parse_args(argv)
    items, budget = (SMOKE_ITEMS, 50) if opts.smoke else (opts.items, opts.budget)
    work = Path(opts.workdir or tempfile.mkdtemp(prefix="labels-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # at smoke size 0.1% would leave a label or two: 5% gives the estimate labels to work with
    data, run = prepare(work, items, opts.judges, env, labelled=0.05 if opts.smoke else 0.001)
    out = Path(tempfile.mkdtemp(prefix="out-", dir=work))
    report: dict[str, Any] = {"items": items, "judges": opts.judges, "budget": budget, "cores": os.cpu_count()}
    for name, args in commands(run, data, out, budget).items():
        report[name] = timed(args, env)
        print(json.dumps({"command": name, **report[name]}), flush=True)
    shutil.rmtree(out, ignore_errors=True)
    if opts.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return report


if __name__ == "__main__":
    main()
