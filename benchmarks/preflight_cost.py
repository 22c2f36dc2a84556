"""The cost of the data-dependent checks (:mod:`judgecal_dist.studies.preflight`) on a 10M-row verdict table.

What the checks add to is the part of a run before its first write: the study's ``load`` (read the table, build
the dense panel, the one-pass per-judge statistics of every planned split). This benchmark times, in one process
and alternately, ``load`` alone (a run without the checks) and ``load`` then ``preflight`` (a run with them) for
the panel studies, and ``score``'s in-memory read and encode with and without its A/B-verdict check, and prints
them side by side with their ratio. The rest of a run (replicates, summaries) comes after and is untouched, so a
whole run's ratio is closer to 1 than the one printed. The machine is shared: each figure is the fastest of
``--repeats`` runs. Usage (from the repository root)::

    python -m benchmarks.preflight_cost                       # 1,000,000 items x 10 judges = 10M verdict rows
    python -m benchmarks.preflight_cost --items 100000        # a quick look
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.votes.codec import VERDICT_COLUMNS, encode
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.schema import VOTE_A, VOTE_B
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.studies import get_study


def _fastest(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def _study(name: str, data: str, replicates: int, repeats: int, engine: EngineConfig) -> tuple[float, float]:
    module = get_study(name)
    config = module.Config(data=data, replicates=replicates)
    without, loaded = _fastest(lambda: module.load(config, engine), repeats)
    checks, _ = _fastest(lambda: module.preflight(config, loaded), repeats)
    return without, without + checks


def _score(data: str, repeats: int) -> tuple[float, float]:
    def read() -> Any:
        verdicts = read_dataset_table(data, "verdicts", VERDICT_COLUMNS)
        return encode(verdicts, None, sample=0)

    without, rows = _fastest(read, repeats)
    checks, _ = _fastest(lambda: int(np.count_nonzero((rows.code == VOTE_A) | (rows.code == VOTE_B))), repeats)
    return without, without + checks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--replicates", type=int, default=100, help="Planned splits the split check draws.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--studies", default="inclusion,inclusion_scale,budget")
    parser.add_argument("--workdir", default=None, help="Keep the generated panel here (reused when present).")
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), items=2000, replicates=5, repeats=1)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="preflight-cost-"))
    data = workdir / f"panel-{args.items}x{args.judges}"
    if not (data / "_SUCCESS").exists():
        generate_panel(str(data), n_items=args.items, n_judges=args.judges, seed=0)
    engine = EngineConfig(stats_engine="local", local_max_rows=10**12)  # the in-memory engine on both sides
    print(
        f"table: {args.items:,} items x {args.judges} judges = {args.items * args.judges:,} verdict rows; "
        f"{args.replicates} planned splits; fastest of {args.repeats}; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'command (part before the first write)':42} {'without checks':>15} {'with checks':>12} {'ratio':>7}")
    rows = [(f"run {name}: load [+ preflight]", name) for name in args.studies.split(",") if name]
    for label, name in rows:
        without, with_checks = _study(name, str(data), args.replicates, args.repeats, engine)
        print(f"{label:42} {without:14.2f}s {with_checks:11.2f}s {with_checks / without:7.3f}")
    without, with_checks = _score(str(data), args.repeats)
    label = "score: read + encode [+ A/B check]"
    print(f"{label:42} {without:14.2f}s {with_checks:11.2f}s {with_checks / without:7.3f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
