"""``judgecal drift`` at scale: 30 nightly runs of 1M items x 50 judges, and detection power vs size of change.

1. **History**: 30 nightly runs of a 1M-item x 50-judge panel recorded with ``history.store.record_run``. Running
   30 full studies on 50M verdict rows each is far too slow for two shared cores, so the per-judge counts of each
   night are drawn at that scale (binomial counts around fixed per-judge rates: accuracy, agreement, share of A,
   parse rate; two judges change at night 20) and recorded exactly as the runner records a real night. The drift
   check reads only these per-judge rows, so its cost does not depend on the number of items; the items' cost is
   paid once per night when a run records its counts, which part 3 measures on a real table.
2. **Drift check**: ``judgecal drift`` on night 30 (baseline ``previous`` and ``window:7``), in a child process
   (interpreter start and imports included, as cron sees it), on both engines (``--engine local`` and ``spark``,
   the JVM started inside the timing): wall seconds and the driver's peak RSS (VmHWM of the Python process).
3. **Recording cost** (``--count-items N``, 0 to skip): ``history.judges.judge_counts`` on one real generated
   night of N items x 50 judges (in memory), wall seconds and peak RSS, in a child process. Keep N x judges near
   the in-memory limit (``stats.local_row_limit``): above it ``auto`` counts through Spark, and the in-memory
   path on 50M rows (1M items) peaked above 18 GB here before it was stopped.
4. **Power**: for an accuracy drop of 0.1 to 5 points of one judge among 50 at 1M items, the share of
   ``--reps`` simulated nights on which drift flags that judge's accuracy (all 250 judge x measure tests drawn,
   Holm at 0.05), with the default ``min_change`` 0.02 and with ``min_change`` 0; and how often any other
   judge x measure is flagged (the family-wise error).

Usage (from the repository root)::

    python -m benchmarks.drift_scale                       # 30 nights, 1M items, 50 judges, 100 reps
    python -m benchmarks.drift_scale --count-items 100000  # also a real night's recording cost (5M rows)
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
import pandas as pd

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.history.drift import DriftSettings, compare_judges
from judgecal_dist.history.judges import COUNT_COLUMNS, with_rates
from judgecal_dist.history.store import record_run

ROOT = Path(__file__).resolve().parents[1]
CHANGE_NIGHT = 20


def _judge_rates(judges: int, rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "judge_id": [f"judge-{j:03d}" for j in range(judges)],
            "accuracy": rng.uniform(0.55, 0.9, judges),
            "agreement": rng.uniform(0.6, 0.9, judges),
            "share_A": rng.uniform(0.45, 0.6, judges),
            "parse_rate": np.full(judges, 0.98),
        }
    )


def night_counts(rates: pd.DataFrame, items: int, rng: np.random.Generator) -> pd.DataFrame:
    """One night's per-judge counts (the columns ``judge_counts`` gives) drawn at ``items`` items, one sample."""
    n = len(rates)
    parsed = rng.binomial(items, rates["parse_rate"].to_numpy())
    consensus = rng.binomial(parsed, 0.97)  # votes on items where the other judges' majority is strict
    counts = {
        "judge_id": rates["judge_id"].to_numpy(),
        "rows": np.full(n, items),
        "parsed": parsed,
        "votes": parsed,
        "n_A": rng.binomial(parsed, rates["share_A"].to_numpy()),
        "labelled_votes": parsed,
        "correct": rng.binomial(parsed, rates["accuracy"].to_numpy()),
        "consensus_votes": consensus,
        "agree": rng.binomial(consensus, rates["agreement"].to_numpy()),
        "items": parsed,
        "panel_items": np.full(n, items),
    }
    return pd.DataFrame(counts).astype({c: np.int64 for c in COUNT_COLUMNS})


def build_history(out: str, nights: int, items: int, judges: int, seed: int) -> float:
    """Record ``nights`` runs; judge-003's accuracy drops 2 points and judge-007 loses 20% parses at night 20."""
    rng = np.random.default_rng(seed)
    rates = _judge_rates(judges, rng)
    start = time.perf_counter()
    for night in range(nights):
        tonight = rates.copy()
        if night >= CHANGE_NIGHT:
            tonight.loc[3, "accuracy"] -= 0.02
            tonight.loc[7, "parse_rate"] = 0.78
        stamp = f"{np.datetime64('2026-10-01') + night}T02:30:00+00:00"
        manifest = {"study": "inclusion", "run_id": f"nightly-{night:02d}", "status": "succeeded"}
        summary = pd.DataFrame({"aggregator": ["majority", "one_coin"], "nll": rng.normal(0.45, 0.005, 2)})
        judges_rows = with_rates(night_counts(tonight, items, rng))
        record_run(out, manifest | {"started": stamp, "ended": stamp}, summary=summary, judges=judges_rows)
    return time.perf_counter() - start


def _vm_hwm_mb() -> float:
    return int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) / 1024


def _child(argv: list[str]) -> None:
    """Run one measured step in this (child) process and print its figures as JSON."""
    step, rest = argv[0], argv[1:]
    start = time.perf_counter()
    if step == "drift":
        from judgecal_dist.cli import cli

        try:
            cli.main(args=argv, prog_name="judgecal", standalone_mode=False)
            code = 0
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        result = {"exit": code}
    else:
        from judgecal_dist.history.judges import judge_counts
        from judgecal_dist.io.synthetic import generate_panel

        data, items, judges = rest[0], int(rest[1]), int(rest[2])
        generate_panel(data, n_items=items, n_judges=judges, seed=1, chunk_items=50_000)
        start = time.perf_counter()
        counts = judge_counts(data, engine="local")
        result = {"judges": len(counts), "rows": int(counts["rows"].sum())}
    print(json.dumps(result | {"seconds": time.perf_counter() - start, "driver_peak_mb": _vm_hwm_mb()}))


def _timed_child(*args: str) -> dict:
    start = time.perf_counter()
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.drift_scale", "--child", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1]) | {"wall_s": time.perf_counter() - start}


def power_table(items: int, judges: int, reps: int, seed: int) -> pd.DataFrame:
    """Share of ``reps`` nights flagging one judge's accuracy drop, per drop and ``min_change``; and the FWER."""
    rng = np.random.default_rng(seed)
    rates = _judge_rates(judges, rng)
    rows = []
    for drop in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05):
        changed = rates.copy()
        changed.loc[0, "accuracy"] -= drop
        for min_change in (0.02, 0.0):
            settings = DriftSettings(min_change=min_change)
            hits = others = 0
            for _ in range(reps):
                history = pd.concat(
                    [
                        night_counts(rates, items, rng).assign(run_id="before"),
                        night_counts(changed, items, rng).assign(run_id="now"),
                    ]
                )
                changes, _, _ = compare_judges(history, "now", ["before"], settings)
                flagged = changes[changes["flag"]]
                hits += bool(((flagged["judge_id"] == "judge-000") & (flagged["measure"] == "accuracy")).any())
                others += bool((flagged["judge_id"] != "judge-000").any())
            rows.append(
                {
                    "accuracy drop (points)": drop * 100,
                    "min_change": min_change,
                    "power": hits / reps,
                    "other judges flagged (FWER)": others / reps,
                }
            )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--judges", type=int, default=50)
    parser.add_argument("--reps", type=int, default=100, help="Simulated nights per cell of the power table.")
    parser.add_argument("--count-items", type=int, default=0, help="Items of a real night whose counts are timed.")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), nights=CHANGE_NIGHT + 2, items=300, judges=10, reps=5)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="drift-scale-"))
    out = str(workdir / "results")
    built = build_history(out, args.nights, args.items, args.judges, args.seed)
    print(f"history: {args.nights} runs x {args.judges} judges at {args.items:,} items (counts drawn), {built:.1f} s")
    conf = workdir / "engine.yaml"
    conf.write_text(json.dumps({"spark_master": args.master}))  # otherwise the CLI's defaults
    print("\njudgecal drift on the last night (child process: start-up and imports included)")
    for engine in ("local", "spark"):
        for baseline in ("previous", "window:7"):
            report = str(workdir / f"report-{engine}-{baseline.replace(':', '')}")
            argv = ["drift", "--output", out, "--engine", engine, "--baseline", baseline, "--report", report]
            got = _timed_child(*argv, "--conf", str(conf))
            print(
                f"  {engine:5s} {baseline:9s}: wall {got['wall_s']:.1f} s (command {got['seconds']:.1f} s), "
                f"driver peak {got['driver_peak_mb']:.0f} MB, exit {got['exit']}"
            )
    flags = json.loads(Path(workdir / "report-local-previous" / "drift.json").read_text())["flags"]
    print(f"  flags on night {args.nights - 1} vs {args.nights - 2}: {[(f['judge_id'], f['kind']) for f in flags]}")
    night20 = ["drift", "--output", out, "--engine", "local", "--current", f"nightly-{CHANGE_NIGHT:02d}"]
    got = _timed_child(*night20, "--report", str(workdir / "report-20"), "--conf", str(conf))
    flags = json.loads(Path(workdir / "report-20" / "drift.json").read_text())["flags"]
    print(
        f"  night {CHANGE_NIGHT} (the change): exit {got['exit']}, flags {[(f['judge_id'], f['kind']) for f in flags]}"
    )
    if args.count_items:
        data = str(workdir / "night")
        got = _timed_child("count", data, str(args.count_items), str(args.judges))
        print(
            f"\nrecording one real night ({args.count_items:,} items x {args.judges} judges = {got['rows']:,} "
            f"verdicts): judge_counts in memory {got['seconds']:.1f} s, peak {got['driver_peak_mb']:.0f} MB"
        )
    print(f"\ndetection power at {args.items:,} items, one judge of {args.judges} drops, {args.reps} nights per cell")
    table = power_table(args.items, args.judges, args.reps, args.seed + 1)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
