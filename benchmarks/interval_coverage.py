"""Coverage and width of the across-split interval: percentile bootstrap over split means vs corrected resampled t.

Synthetic panels with a known true difference (:mod:`tests.stats.panel_simulation`): ``--datasets`` datasets of
``--items`` items and 9 judges, each split R times into keyed-hash halves; per split, one-coin on all judges and on
the top 3 are fitted on the calibration half and their NLL difference is measured on the evaluation half. The true
difference is exact over vote patterns (Monte Carlo over the fitted accuracies only). For R in ``--replicates`` the
per-split rows go through ``summarise_over_splits`` twice: without ``split_sizes`` (the old procedure, a
percentile bootstrap of the split means) and with ``split_sizes=("n_eval", "n_cal")`` (Nadeau-Bengio), and the
script prints coverage of the truth, mean interval width and the sd of the point estimate over datasets, with the
ratios new / old and width at the largest R / width at the smallest.

A second table does the same for bounded metrics of one pipeline (one-coin on all judges, no calibrator): its
evaluation NLL (range [0, log 1/eps]), accuracy and Brier score ([0, 1]), whose true values are exact over vote
patterns as well (:func:`tests.stats.panel_simulation.true_metrics`). Per metric and R it prints coverage, mean
width and the share of intervals leaving the metric's range for three methods: the interval service
(:func:`judgecal_dist.stats.intervals.mean_interval`: corrected resampled t on the metric's own scale), the
symmetric corrected resampled t it replaced, and mean +- 1.96 SD/sqrt(S) without the correction (the error bars
some papers print). Usage (from the repository root)::

    python -m benchmarks.interval_coverage
    python -m benchmarks.interval_coverage --datasets 500 --replicates 50 500 2000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.stats.inference import summarise_over_splits
from tests.stats.panel_simulation import (
    ACCURACIES,
    STRONG,
    metric_rows,
    simulate_split_differences,
    true_difference,
)


def _stats(summary: pd.DataFrame, truth: float) -> tuple[float, float]:
    low, high = summary["delta_nll_ci_low"], summary["delta_nll_ci_high"]
    return float(((low <= truth) & (truth <= high)).mean()), float((high - low).mean())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--replicates", type=int, nargs="+", default=[50, 500])
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the old procedure")
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), datasets=4, items=60, replicates=[4, 8], resamples=50)

    start = time.perf_counter()
    truth = true_difference(args.items // 2)
    print(f"{args.datasets} datasets x {args.items} items, half splits; true NLL difference top3 - all = {truth:.5f}")
    print()
    print(f"{'R':>5} | {'coverage old':>12} {'new':>6} | {'width old':>9} {'new':>8} {'new/old':>8} | {'sd(est)':>8}")
    widths: dict[str, list[float]] = {"old": [], "new": []}
    for r in args.replicates:
        parts = simulate_split_differences(args.datasets, r, n_items=args.items, seed=r)
        common = {"by": ["dataset"], "metrics": ["delta_nll"], "rng": np.random.default_rng(0)}
        old = summarise_over_splits(parts, n_resamples=args.resamples, **common)  # type: ignore[arg-type]
        new = summarise_over_splits(parts, split_sizes=("n_eval", "n_cal"), **common)  # type: ignore[arg-type]
        (cov_old, w_old), (cov_new, w_new) = _stats(old, truth), _stats(new, truth)
        widths["old"].append(w_old)
        widths["new"].append(w_new)
        sd = float(new["delta_nll_mean"].std(ddof=1))
        print(
            f"{r:>5} | {cov_old:>12.3f} {cov_new:>6.3f} | {w_old:>9.4f} {w_new:>8.4f} {w_new / w_old:>8.2f} | "
            f"{sd:>8.4f}"
        )
    if len(args.replicates) > 1:
        lo, hi = args.replicates[0], args.replicates[-1]
        print()
        for name in ("old", "new"):
            print(f"width at R={hi} / width at R={lo}, {name}: {widths[name][-1] / widths[name][0]:.2f}")
    print("\n(nominal 95%; a width near 2 x 1.96 x sd(est) is right-sized)\n")
    metric_table(args.datasets, args.items, args.replicates)
    print(f"\n({time.perf_counter() - start:.1f} s)")


def metric_table(datasets: int, items: int, replicates: list[int]) -> None:
    for name, accuracies, n in (
        ("9 judges of accuracy 0.56-0.80", ACCURACIES, items),
        ("7 strong judges (0.80-0.92)", STRONG, 60),
    ):
        table = metric_rows(datasets, n, replicates, accuracies)
        print(f"bounded metrics of one-coin on {name}, {datasets} datasets x {n} items, half splits:")
        print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"), end="\n\n")


if __name__ == "__main__":
    main()
