"""Dawid-Skene through Spark: time per EM iteration vs one Spark scan of the same table, side by side in one run.

One run generates a seeded panel (``--items`` x ``--judges``, ``--labelled`` share of labelled items), starts the
Spark session (not timed), then measures

1. ``scan``: one Spark aggregate over the stored verdict table, ``count(*)`` and ``sum(length(verdict))`` (best of
   ``--repeats``): what reading the table once costs;
2. ``dawid_skene_spark`` (semi-supervised) to convergence, or for exactly ``--n-iter`` iterations with
   ``--fixed``: the first pass (which also builds and persists the item x judge votes) and the median of the
   later passes, one per EM iteration; and a ``count`` over the persisted votes (a scan of the cached input);
3. the in-memory estimator (:class:`judgecal_dist.methods.aggregation.dawid_skene.DawidSkene`) on the same votes, per
   iteration, and the largest difference of the two fits' confusion matrices.

It prints the ratio iteration / scan (target of issue 9: within 2x at 50M verdicts). Usage (repository root)::

    python -m benchmarks.ds_spark                        # 200k items x 50 judges (10M verdicts)
    python -m benchmarks.ds_spark --items 1000000        # the issue's 50M verdicts
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import add_smoke, engine_config, smoke


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--judges", type=int, default=50)
    parser.add_argument("--labelled", type=float, default=0.01)
    parser.add_argument("--n-iter", type=int, default=100)
    parser.add_argument("--fixed", action="store_true", help="Run exactly --n-iter iterations.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--workdir", default=None, help="Keep the generated panel here (reused when present).")
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), items=2000, judges=8, repeats=1, n_iter=5)

    from pyspark.sql import functions as F
    from sklearn.base import clone

    from judgecal_dist.engine.jobs.ds_spark import dawid_skene_spark
    from judgecal_dist.engine.jobs.spark import get_session, read_table
    from judgecal_dist.engine.votes.codec import VERDICT_COLUMNS, item_votes
    from judgecal_dist.io.dataset import read_dataset_table
    from judgecal_dist.io.synthetic import generate_panel
    from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ds-bench-"))
    data = str(workdir / f"panel-{args.items}x{args.judges}-{args.labelled}")
    if not Path(data, "_SUCCESS").exists():
        generate_panel(
            data, n_items=args.items, n_judges=args.judges, seed=0, label_fraction=args.labelled, overwrite=True
        )
    verdicts = args.items * args.judges
    engine = engine_config(spark_master=args.master)  # the CLI's engine settings
    spark = get_session(engine.spark_master, conf=dict(engine.spark_conf))
    spark.range(10).count()  # JVM start-up is not part of any figure

    table = read_table(spark, data, "verdicts")
    scans = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        table.agg(F.count(F.lit(1)), F.sum(F.length("verdict"))).collect()
        scans.append(time.perf_counter() - start)
    scan = min(scans)

    spec = DawidSkene(n_iter=args.n_iter, tol=1e-6, fixed_iter=args.fixed, semi_supervised=True)
    start = time.perf_counter()
    fit = dawid_skene_spark(data, spec, engine=engine)
    total = time.perf_counter() - start
    later = fit.seconds_per_pass[1:]
    per_iter = float(np.median(later))
    start = time.perf_counter()
    fit._votes.count()
    cached_scan = time.perf_counter() - start

    verdict_table = read_dataset_table(data, "verdicts", VERDICT_COLUMNS)
    items = item_votes(verdict_table, read_dataset_table(data, "labels"), fit.judge_ids)
    start = time.perf_counter()
    model = clone(spec).fit(items.votes, items.labels.astype(np.int64))
    in_memory = (time.perf_counter() - start) / model.n_iter_
    diff = float(np.abs(model.confusion_ - fit.confusion_).max())

    print(f"panel {args.items} items x {args.judges} judges = {verdicts:,} verdicts, {fit.n_labelled} labelled")
    print(f"scan of the verdict table (count + sum): {scan:.2f}s ({verdicts / scan / 1e6:.1f}M rows/s)")
    print(
        f"dawid-skene on spark: {fit.n_iter_} iterations, converged={fit.converged_}, total {total:.1f}s; "
        f"first pass (builds + persists the votes) {fit.seconds_per_pass[0]:.2f}s; "
        f"per iteration median {per_iter:.2f}s (min {min(later):.2f}s, max {max(later):.2f}s)"
    )
    print(f"count over the persisted votes: {cached_scan:.2f}s")
    print(
        f"in-memory DawidSkene: {model.n_iter_} iterations, {in_memory:.3f}s per iteration; "
        f"max |confusion difference| {diff:.2e}"
    )
    print(f"ratio iteration / scan: {per_iter / scan:.2f}x (target <= 2x)")
    fit.unpersist()


if __name__ == "__main__":
    main()
