"""``judgecal fit`` on a generated arena-shaped table, and what the run history's recorder adds to it.

Generates (once, cached under ``--cache``) ``--items`` items x ``--judges`` judges, 1% labelled
(``io.synthetic.generate_panel``), runs ``judgecal fit`` with a small candidate grid (folds in this process) and
prints its wall time, then the recorder's per-judge counts (:func:`judgecal_dist.history.judges.judge_counts`)
on each engine, timed alone, and their ratio to the fit. The fit's own wall time includes the recorder (on the
engine ``auto`` picks). Usage (from the repository root)::

    python -m benchmarks.fit_recorder                 # 2M items x 10 judges = 20M verdict rows
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.harness import add_smoke, engine_config, smoke
from judgecal_dist.engine.jobs.stats import choose_engine
from judgecal_dist.history.judges import judge_counts
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.studies.runner import execute, prepare

GRID = ["aggregators=[majority, one_coin]", "calibrators=[none, platt]", "panels=[all]", "resamples=200"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2_000_000)
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "judgecal-bench-fit-recorder"))
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), items=2000, judges=5)
    data = f"{args.cache}/panel-{args.items}x{args.judges}"
    if not Path(data, "_SUCCESS").exists():
        generate_panel(data, n_items=args.items, n_judges=args.judges, seed=3, label_fraction=0.01)
    engine = engine_config(spark_master="local[2]", spark_conf={"spark.driver.memory": "2g"})
    print(
        f"table: {args.items} items x {args.judges} judges; recorder engine (auto): {choose_engine(data, None, engine)}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        execute(prepare("fit", [f"data={data}", *GRID]), engine, output=tmp, serial=True)
        fit = time.perf_counter() - started
    print(f"fit (end to end, recorder included): {fit:.1f} s")
    for name in ("local", "spark"):
        judge_counts(data, engine=name, config=engine)  # warm: the session, the page cache
        started = time.perf_counter()
        judge_counts(data, engine=name, config=engine)
        seconds = time.perf_counter() - started
        print(f"recorder per-judge counts, {name}: {seconds:.1f} s ({seconds / fit:.2f} x the fit)")


if __name__ == "__main__":
    main()
