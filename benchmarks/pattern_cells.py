"""Joint-pattern cells of all 7 prefixes in one Spark pass vs a single-prefix job (issue 6 target: within 3x).

One run generates (and caches) a 7-judge synthetic panel (``io.synthetic.generate_panel``; 7 verdict rows per
item), warms a Spark session with one untimed job, then times, side by side and alternating:

1. **all prefixes**: ``engine.stats.pattern_cells(url, judges[:7], engine="spark")``: one pivot of the items, one
   aggregation of the full 7-judge pattern, prefixes k = 1..7 as sums of it on the driver;
2. **single prefix**: the same job for ``judges[:1]`` (the k = 1 table alone);
3. optionally (``--per-prefix``) the naive loop of one job per prefix k = 1..7.

It prints the median wall times and the ratio all/single. The job scans every verdict row in both cases, so the
ratio measures what the wider pattern costs on top of the scan.

Usage (from the repository root)::

    python -m benchmarks.pattern_cells --items 2000000          # 14M verdict rows
    python -m benchmarks.pattern_cells --items 10000000         # the issue's 10M items (70M rows)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path

from benchmarks.harness import add_smoke, engine_config, smoke
from judgecal_dist.engine.jobs import spark as spark_engine
from judgecal_dist.engine.jobs import stats
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.synthetic import generate_panel

log = logging.getLogger("pattern_cells")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-prefix", action="store_true", help="also time one job per prefix (7 jobs)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/judgecal-bench"))
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), items=2000, repeats=1)
    logging.basicConfig(level=logging.WARNING)

    root = args.cache / f"pattern7_{args.items}"
    if not (root / "_SUCCESS").exists():
        t = _timed(lambda: generate_panel(str(root), n_items=args.items, n_judges=7, seed=0, missing_rate=0.02))
        print(f"generated {args.items:,} items x 7 judges in {t:.1f}s at {root}")
    judges = sorted(set(read_dataset_table(str(root), "judges", columns=["judge_id"])["judge_id"].to_pylist()))[:7]
    engine = engine_config(spark_master=args.master)  # the CLI's engine settings
    spark_engine.get_session(engine.spark_master, app_name="judgecal-bench-patterns", conf=dict(engine.spark_conf))

    def run_all() -> None:
        cells = stats.pattern_cells(str(root), judges, engine="spark")
        assert sorted(cells["k"].unique()) == list(range(1, 8))

    def run_single() -> None:
        stats.pattern_cells(str(root), judges[:1], engine="spark")

    def run_per_prefix() -> None:
        for k in range(1, 8):
            stats.pattern_cells(str(root), judges[:k], engine="spark")

    run_single()  # warm-up: JVM, Python workers, file listing
    times: dict[str, list[float]] = {"all7": [], "single": [], "per_prefix": []}
    for _ in range(args.repeats):
        times["all7"].append(_timed(run_all))
        times["single"].append(_timed(run_single))
        if args.per_prefix:
            times["per_prefix"].append(_timed(run_per_prefix))
    med = {k: statistics.median(v) for k, v in times.items() if v}
    print(f"items {args.items:,} (verdict rows {7 * args.items:,}), master {args.master}, repeats {args.repeats}")
    for name, value in med.items():
        print(f"  {name:>10}: median {value:8.2f}s  ({', '.join(f'{t:.2f}' for t in times[name])})")
    print(f"ratio all 7 prefixes / single prefix: {med['all7'] / med['single']:.2f}x (target <= 3x)")
    if "per_prefix" in med:
        print(f"ratio one job per prefix / one pass: {med['per_prefix'] / med['all7']:.2f}x")


if __name__ == "__main__":
    main()
