"""Davidson fit + evaluation over 100 random calibration/evaluation splits of 10k items (spec 003 protocol).

Items come from generator G2 (label-first votes with tie labels and tie votes, n = 8 samples); each split puts 5%
of the items in the calibration part (the itc study's exact-size keyed-hash split), fits the global Davidson model
(5 L-BFGS-B starts) on it and predicts the MAE action for the other 95%. Prints the wall time of the 100 splits,
the mean MAE of Davidson and of self-consistency, and the per-split cost.

Usage (from the repository root)::

    python -m benchmarks.davidson                 # 10,000 items, 100 splits
    python -m benchmarks.davidson --items 100000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.methods.repeated.davidson import DavidsonAggregator
from judgecal_dist.methods.repeated.self_consistency import majority_vote
from judgecal_dist.methods.repeated.vote_simulation import simulate_label_first, vote_counts
from judgecal_dist.splits import group_keys
from judgecal_dist.studies.itc.data import Task
from judgecal_dist.studies.itc.study import calibration_part


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--samples", type=int, default=8)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), items=200, splits=3, samples=4)
    sim = simulate_label_first(args.items, args.samples, random_state=0)
    counts = vote_counts(sim.votes)
    keys = group_keys([f"item-{i}" for i in range(args.items)])
    task = Task(
        dataset="g2",
        judge_id="j",
        item_ids=np.arange(args.items).astype(object),
        item_keys=keys,
        group_keys=keys,
        labels=sim.labels,
        budgets=(args.samples,),
        counts=counts[None],
        votes=sim.votes,
    )
    maes, sc = [], []
    start = time.perf_counter()
    for seed in range(args.splits):
        cal = calibration_part(task, seed, 0.05)
        model = DavidsonAggregator(random_state=seed).fit(counts[cal], sim.labels[cal])
        maes.append(np.abs(model.predict(counts[~cal]) - sim.labels[~cal]).mean())
        sc.append(np.abs(majority_vote(counts[~cal]) - sim.labels[~cal]).mean())
    seconds = time.perf_counter() - start
    print(
        f"Davidson fit + predict, {args.splits} splits of {args.items:,} items (5% calibration, n = {args.samples}): "
        f"{seconds:.2f} s ({1000 * seconds / args.splits:.1f} ms per split; target < 5 s); "
        f"MAE Davidson {np.mean(maes):.4f} vs SC {np.mean(sc):.4f}"
    )


if __name__ == "__main__":
    main()
