"""What the benchmark scripts share: the typed command timed cold and warm, peak memory, load, the CLI's engine.

A figure a user can compare with what they see is the command they type, as a whole process. This module times it
two ways and prints them side by side in one run, each row with the load average taken beside it:

- **cold** (:func:`cold`): ``judgecal ARGS`` in a fresh process, as typed: imports, JVM and Ray start-up included.
  Wall time, CPU time (user + system of the process and its descendants: reaped ones from ``wait4``, the others
  sampled) and peak RSS: the largest
  single process (``ru_maxrss`` from ``wait4``) and the sum over the process tree, sampled every 50 ms (a local
  Spark's JVM and Python workers count there).
- **warm** (:func:`warm`): the same command run in one long-lived process through the click entry point, after
  ``warmups`` untimed runs: imports done, a Spark session (if the command starts one) already up. This is what a
  notebook or ``judgecal serve`` pays per call.
- **in process** (:func:`in_process`): a Python callable timed in this process, for the kernels and for
  hand-written reference passes.

:func:`table` prints rows with ratios to one reference row. :func:`engine_config` is the CLI's own engine settings
(:func:`judgecal_dist.config.load_engine_config`), so a benchmark's Spark session is the one ``judgecal`` builds.

Every script in ``benchmarks/`` takes ``--smoke`` (:func:`add_smoke`): tiny sizes that run to the printed figures
in seconds; ``tests/test_benchmarks_smoke.py`` runs them all. Usage of this module itself (from the repository
root)::

    python -m benchmarks.harness -- score RUN DATA --output OUT{n}      # one cold and one warm row
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Timing",
    "MemorySampler",
    "add_smoke",
    "cold",
    "engine_config",
    "in_process",
    "jvm_peak_mb",
    "judgecal_argv",
    "load",
    "load_line",
    "peak_rss_mb",
    "smoke",
    "spark_session",
    "table",
    "tree_cpu_s",
    "warm",
    "whole_process",
]

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parents[1]


# -- load, memory, CPU ---------------------------------------------------------------------------------------------


def load() -> float:
    """The 1-minute load average (what every figure is printed beside)."""
    return os.getloadavg()[0]


def load_line() -> str:
    """``load average 1.2 0.9 0.7 on 2 cores``: the closing line of a benchmark's report."""
    return f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _process_tree() -> dict[int, list[tuple[int, float]]]:
    """Children of every process: ``{ppid: [(pid, cpu seconds incl. reaped children), ...]}`` from /proc."""
    children: dict[int, list[tuple[int, float]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            cpu = sum(int(x) for x in fields[11:15]) / TICK  # utime, stime, cutime, cstime
            children.setdefault(int(fields[1]), []).append((int(entry), cpu))
    return children


def _own_cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root``."""
    tree, found, stack = _process_tree(), [], [root]
    while stack:
        kids = [pid for pid, _ in tree.get(stack.pop(), [])]
        found.extend(kids)
        stack.extend(kids)
    return found


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds (user + system) of ``root`` (default: this process) and all its descendants, live or reaped.

    Printed beside wall times: on a shared machine the wall time moves with the other jobs' load, CPU time much less.
    """
    root = os.getpid() if root is None else root
    tree = _process_tree()
    own = next((cpu for kids in tree.values() for pid, cpu in kids if pid == root), 0.0)
    total, stack = own, [root]
    while stack:
        for pid, cpu in tree.get(stack.pop(), []):
            total += cpu
            stack.append(pid)
    return total


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak RSS (``VmHWM``) of one process in MB; ``ru_maxrss`` would carry a parent's mark across fork + exec."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return int(status.split("VmHWM:")[1].split()[0]) / 1024 if "VmHWM:" in status else 0.0


def jvm_peak_mb(root: int | None = None) -> float:
    """Peak RSS (``VmHWM``) of the java processes among ``root``'s descendants (a local Spark's JVM), in MB."""
    peak = 0.0
    for pid in descendants(os.getpid() if root is None else root):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text()
        except OSError:
            continue
        if "java" in comm:
            peak = max(peak, peak_rss_mb(pid))
    return peak


class MemorySampler:
    """Peak RSS of ``root`` (default: this process) and, summed, of its descendants, sampled every ``interval`` s.

    ``driver`` is the root's peak, ``children`` the peak of the descendants' sum (a local Spark's JVM and Python
    workers, Ray's processes), ``total`` the peak of the two together at one sample. ``cpu_s``: the descendants'
    own CPU seconds as last seen (a JVM that outlives its parent is never reaped by it, so ``wait4`` misses it).
    """

    def __init__(self, interval: float = 0.05, root: int | None = None) -> None:
        self.interval = interval
        self.root = os.getpid() if root is None else root
        self.driver = self.children = self.total = 0
        self._cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        tick = 0
        kids: list[int] = []
        while not self._stop.is_set():
            if tick % 10 == 0:  # the process tree changes rarely; walking /proc every 0.5 s is enough
                kids = descendants(self.root)
            driver, children = _rss(self.root), sum(_rss(pid) for pid in kids)
            self.driver, self.children = max(self.driver, driver), max(self.children, children)
            self.total = max(self.total, driver + children)
            if tick % 10 == 0:
                for pid in [self.root, *kids]:
                    self._cpu[pid] = max(self._cpu.get(pid, 0.0), _own_cpu_s(pid))
            tick += 1
            self._stop.wait(self.interval)

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the root and the descendants seen (user + system, each as last sampled)."""
        return sum(self._cpu.values())

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


# -- timings -------------------------------------------------------------------------------------------------------


@dataclass
class Timing:
    """One timed run: wall and CPU seconds, peak memory in MB, and the 1-minute load before and after."""

    label: str
    mode: str  # cold | warm | in process
    seconds: float
    cpu_s: float
    peak_mb: float  # the largest single process
    tree_mb: float  # the process tree's sum (0 where not sampled)
    load_before: float
    load_after: float
    returncode: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """One line: label, mode, seconds, CPU, memory and load."""
        return (
            f"{self.label} ({self.mode}): {self.seconds:.2f} s, cpu {self.cpu_s:.1f} s, peak RSS {self.peak_mb:.0f} MB"
            f" (tree {self.tree_mb:.0f} MB), load {self.load_before:.1f}->{self.load_after:.1f}"
        )


def judgecal_argv() -> list[str]:
    """The typed ``judgecal``: the console script next to this interpreter, else ``python -m judgecal_dist.cli``."""
    script = Path(sys.executable).with_name("judgecal")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "judgecal_dist.cli"]


def _env(env: Mapping[str, str] | None) -> dict[str, str]:
    # The children import this checkout's package (a benchmark of a worktree times the worktree's code).
    base = dict(os.environ)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH", "")]))
    return base | dict(env or {})


def _format(args: Sequence[str], n: int) -> list[str]:
    return [a.replace("{n}", str(n)) for a in args]


def cold(
    args: Sequence[str],
    label: str = "",
    *,
    n: int = 0,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    check: bool = True,
    quiet: bool = True,
) -> Timing:
    """``judgecal ARGS`` as a fresh whole process, as a user types it.

    ``{n}`` in an argument becomes ``n`` (a fresh output folder per run). The wall time runs from the spawn to the
    exit; CPU time and ``ru_maxrss`` come from ``wait4`` (the process and the descendants it reaped); the tree's
    RSS is sampled. ``check``: exit on a non-zero status with the command's stderr tail.
    """
    return whole_process(
        judgecal_argv() + _format(args, n), label or f"judgecal {args[0]}", env=env, cwd=cwd, check=check, quiet=quiet
    )


def whole_process(
    argv: Sequence[str],
    label: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    check: bool = True,
    quiet: bool = True,
) -> Timing:
    """``argv`` as a fresh whole process (:func:`cold` for any program): wall, CPU and peak RSS, load beside."""
    before = load()
    start = time.perf_counter()
    out = subprocess.DEVNULL if quiet else None
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, env=_env(env), cwd=cwd, stdout=out, stderr=err)
        with MemorySampler(root=proc.pid) as memory:
            _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if check and proc.returncode:
            err.seek(0)
            sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err.read().decode()[-3000:]}")
    return Timing(
        label,
        "cold",
        seconds,
        # both are lower bounds: wait4 misses what was not reaped (a JVM outliving its parent), sampling the tail
        max(usage.ru_utime + usage.ru_stime, memory.cpu_s),
        usage.ru_maxrss / 1024,
        memory.total / 2**20,
        before,
        load(),
        proc.returncode,
    )


def warm(
    args: Sequence[str],
    label: str = "",
    *,
    warmups: int = 1,
    repeats: int = 1,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> list[Timing]:
    """``judgecal ARGS`` run ``warmups`` times untimed, then ``repeats`` times timed, in one fresh process.

    The runs go through the click entry point in that process, so imports and any Spark session are already up
    for the timed ones. ``{n}`` in an argument becomes the run's number (0 for the first warm-up). Peak memory is
    the process's ``VmHWM`` and its descendants' sampled sum over the timed runs.
    """
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        cmd = [sys.executable, "-m", "benchmarks.harness", "--warm-child", result.name, str(warmups), str(repeats)]
        proc = subprocess.run([*cmd, "--", *args], env=_env(env), cwd=cwd, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"warm judgecal {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        rows = json.loads(Path(result.name).read_text())
    return [Timing(label or f"judgecal {args[0]}", "warm", **row) for row in rows]


def _warm_child(result: str, warmups: int, repeats: int, args: list[str]) -> None:
    from judgecal_dist.cli import cli

    def once(n: int) -> int:
        try:
            cli.main(args=_format(args, n), prog_name="judgecal", standalone_mode=False)
        except SystemExit as stop:  # commands exit with their code (0 included) through sys.exit
            return int(stop.code or 0)
        return 0

    for n in range(warmups):
        if code := once(n):
            sys.exit(f"warm-up run failed with exit code {code}")
    rows = []
    for n in range(warmups, warmups + repeats):
        before, cpu0 = load(), tree_cpu_s()
        with MemorySampler() as memory:
            start = time.perf_counter()
            code = once(n)
            seconds = time.perf_counter() - start
        if code:
            sys.exit(f"timed run failed with exit code {code}")
        rows.append(
            {
                "seconds": seconds,
                "cpu_s": tree_cpu_s() - cpu0,
                "peak_mb": peak_rss_mb(),
                "tree_mb": memory.total / 2**20,
                "load_before": before,
                "load_after": load(),
            }
        )
    Path(result).write_text(json.dumps(rows))


def in_process(label: str, fn: Callable[[], Any], mode: str = "in process") -> tuple[Any, Timing]:
    """``fn()`` timed in this process: its result and its :class:`Timing` (CPU of this process and descendants)."""
    before, cpu0 = load(), tree_cpu_s()
    with MemorySampler() as memory:
        start = time.perf_counter()
        value = fn()
        seconds = time.perf_counter() - start
    timing = Timing(
        label, mode, seconds, tree_cpu_s() - cpu0, memory.driver / 2**20, memory.total / 2**20, before, load()
    )
    return value, timing


def table(rows: Sequence[Timing], reference: Timing | None = None, file: Any = None) -> None:
    """Rows side by side: wall, ratio to ``reference`` (default the first row), CPU, peak RSS, tree RSS, load."""
    if not rows:
        return
    ref = reference or rows[0]
    width = max(len(r.label) for r in rows) + 2
    print(
        f"{'':<{width}} {'mode':<10} {'wall s':>8} {'ratio':>7} {'cpu s':>7} {'peak MB':>8} {'tree MB':>8} {'load':>9}",
        file=file,
    )
    for r in rows:
        ratio = r.seconds / ref.seconds if ref.seconds > 0 else float("nan")
        print(
            f"{r.label:<{width}} {r.mode:<10} {r.seconds:8.2f} {ratio:6.2f}x {r.cpu_s:7.1f} {r.peak_mb:8.0f} "
            f"{r.tree_mb:8.0f} {r.load_before:4.1f}-{r.load_after:<4.1f}",
            file=file,
        )
    print(f"ratios to: {ref.label} ({ref.mode}); {load_line()}", file=file)


# -- engine settings and smoke sizes ----------------------------------------------------------------------------


def engine_config(**overrides: Any) -> Any:
    """The engine settings ``judgecal`` itself uses (``conf/local.yaml`` when present, else the packaged
    defaults), with ``overrides`` (``None`` values ignored): a benchmark's session is the CLI's session."""
    from judgecal_dist.config import load_engine_config

    return load_engine_config(None, overrides)


def spark_session(config: Any = None) -> Any:
    """The Spark session of ``config`` (default :func:`engine_config`), started before any clock."""
    from judgecal_dist.engine.jobs.spark import get_session

    config = config or engine_config()
    return get_session(config.spark_master, conf=dict(config.spark_conf))


def add_smoke(parser: argparse.ArgumentParser) -> None:
    """``--smoke``: tiny sizes that run to the printed figures in seconds (the benchmark smoke test passes it)."""
    parser.add_argument(
        "--smoke", action="store_true", help="Tiny sizes: run to the printed figures in seconds (CI's smoke test)."
    )


def smoke(args: argparse.Namespace, **tiny: Any) -> argparse.Namespace:
    """``args`` with the ``tiny`` values set when ``--smoke`` was given (and nothing changed otherwise)."""
    if getattr(args, "smoke", False):
        for name, value in tiny.items():
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--warm-child"]:
        result, warmups, repeats, _, *args = argv[1:]
        _warm_child(result, int(warmups), int(repeats), args)
        return
    parser = argparse.ArgumentParser(description="Time `judgecal ARGS` cold (a fresh process) and warm, side by side.")
    parser.add_argument("--repeats", type=int, default=1)
    add_smoke(parser)
    parser.add_argument("args", nargs="*", help="the judgecal arguments; {n} becomes the run number")
    ns = parser.parse_args(argv)
    scratch = tempfile.mkdtemp(prefix="judgecal-harness-")
    try:  # default (and --smoke): a small generated panel, the cheapest command that writes
        size = ["--items", "200" if ns.smoke else "20000", "--judges", "5"]
        args = ns.args or ["generate", *size, "--overwrite", f"{scratch}/panel-{{n}}"]
        rows = [cold(args, n=100 + i) for i in range(ns.repeats)] + warm(args, repeats=ns.repeats)
        table(rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
