"""Paired sign-flip permutation test (spec 000 §5.5(a)): packed-bit table sums vs a dense numpy reference.

One run measures, on seeded normal loss differences:

1. **many splits**: ``stats.permutation.paired_permutation_test_many`` on 100 splits x 210 items (an LLMBar
   evaluation half) with 10,000 sign vectors each (target: under 10 s).
2. **one large split**: ``paired_permutation_test`` on 50,000 items with 10,000 sign vectors, against a
   straightforward numpy reference in the same run: signs drawn as a dense +-1 float64 matrix in blocks of about
   4M cells (int8 coin flips converted to float), signed sums by a BLAS matrix-vector product, and the same
   ``|S_b| >= |S_obs|`` count. The report prints both wall times and their ratio, and checks that the two
   p-values agree within Monte-Carlo error.
3. **scipy**: ``scipy.stats.permutation_test`` (``permutation_type="samples"``, vectorised paired t) on one
   210-item split, extrapolated linearly to 100 splits (every split is the same amount of work).

Each timing is the best of ``--repeats`` runs. Usage (from the repository root)::

    python -m benchmarks.permutation
    python -m benchmarks.permutation --repeats 3 --large-items 50000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import permutation_test

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.stats.permutation import paired_permutation_test, paired_permutation_test_many

BLOCK_CELLS = 1 << 22  # cells of the dense reference's sign block (32 MiB of float64)


def reference_test(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> float:
    """Dense numpy reference: blocks of +-1 float signs, S = eps @ d, p = (1 + #{|S_b| >= |S_obs|}) / (B + 1)."""
    s_obs = abs(d.sum())
    block = max(1, BLOCK_CELLS // d.size)
    n_extreme = 0
    for start in range(0, n_resamples, block):
        m = min(block, n_resamples - start)
        signs = 2.0 * rng.integers(0, 2, size=(m, d.size), dtype=np.int8) - 1.0
        n_extreme += int(np.count_nonzero(np.abs(signs @ d) >= s_obs * (1 - 1e-12)))
    return (1.0 + n_extreme) / (n_resamples + 1.0)


def paired_t(d: np.ndarray, axis: int = -1) -> Any:
    return d.mean(axis=axis) / (d.std(axis=axis, ddof=1) / np.sqrt(d.shape[axis]))


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--items", type=int, default=210, help="evaluation items per split")
    parser.add_argument("--large-items", type=int, default=50_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=2)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), splits=3, items=50, large_items=500, resamples=200, repeats=1)
    B = args.resamples
    rng = np.random.default_rng(0)
    splits = rng.normal(0.01, 0.3, size=(args.splits, args.items))
    large = rng.normal(0.002, 0.3, size=args.large_items)
    paired_permutation_test(splits[0], n_resamples=100, rng=np.random.default_rng(0))  # warm-up

    t_many, res = best_of(
        args.repeats, lambda: paired_permutation_test_many(splits, n_resamples=B, rng=np.random.default_rng(1))
    )
    print(
        f"many splits : {args.splits} x {args.items} items x {B} flips: {t_many:.3f} s "
        f"(median t {res.median_statistic:.2f}, median p {res.median_pvalue:.4f}; target < 10 s)"
    )

    t_ours, ours = best_of(
        args.repeats, lambda: paired_permutation_test(large, n_resamples=B, rng=np.random.default_rng(2))
    )
    t_ref, p_ref = best_of(args.repeats, lambda: reference_test(large, B, np.random.default_rng(3)))
    se = np.sqrt(p_ref * (1 - p_ref) / B)
    print(f"large split : {args.large_items} items x {B} flips: packed bits {t_ours:.3f} s, dense numpy {t_ref:.3f} s")
    print(f"              ratio packed / dense = {t_ours / t_ref:.2f} (target <= 1.5)")
    print(
        f"              p-values: packed {ours.pvalue:.4f}, dense {p_ref:.4f} "
        f"(|diff| = {abs(ours.pvalue - p_ref) / max(se, 1e-12):.1f} Monte-Carlo SE)"
    )

    def scipy_one() -> Any:
        return permutation_test(
            (splits[0],),
            paired_t,
            permutation_type="samples",
            vectorized=True,
            n_resamples=B,
            alternative="two-sided",
            rng=np.random.default_rng(4),
        )

    t_scipy, _ = best_of(args.repeats, scipy_one)
    per_split = t_many / args.splits
    print(
        f"scipy       : permutation_test, one {args.items}-item split: {t_scipy:.3f} s "
        f"(x{args.splits} = {t_scipy * args.splits:.1f} s; ours {per_split * 1e3:.2f} ms per split, "
        f"{t_scipy / per_split:.0f}x faster)"
    )


if __name__ == "__main__":
    main()
