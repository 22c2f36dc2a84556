"""Monte Carlo coverage of ``label estimate``'s intervals (issue 32): synthetic panels with a known truth, the
calibrated panel (Dawid-Skene fitted without labels) as the proxy, uniform and active labels from ``select``'s
draw, every target kind and method (PPI++, PPI, classical) at 0.95 nominal.

The simulation is :mod:`tests.labels.label_simulation` (the suite runs it at 200 repetitions); this prints the full
table at ``--repetitions`` (default 1,000) and whether every row reaches 0.94. Usage (from the repository root)::

    python -m benchmarks.label_coverage --repetitions 1000
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from benchmarks.harness import add_smoke, smoke
from tests.labels.label_simulation import coverage_draws, coverage_table

THRESHOLD = 0.94


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--labels", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    add_smoke(parser)
    args = smoke(parser.parse_args(), repetitions=20, items=300, labels=60)
    started = time.perf_counter()
    table = coverage_table(coverage_draws(args.repetitions, n_items=args.items, budget=args.labels, seed=args.seed))
    wall = time.perf_counter() - started
    print(
        f"label coverage: {args.repetitions} repetitions, {args.items} items, {args.labels} expected labels, "
        f"95% intervals; {wall:.1f} s"
    )
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    low = table[table["coverage"] < THRESHOLD]
    verdict = "every row" if low.empty else f"{len(low)} rows below"
    print(f"coverage >= {THRESHOLD}: {verdict} (pooled over each kind's targets)")


if __name__ == "__main__":
    main()
