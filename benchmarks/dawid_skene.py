"""Dawid-Skene EM: crowd-kit's pandas implementation vs our dense numpy one, side by side in one run.

One run generates a seeded one-coin panel (``--items`` x ``--judges``, judge accuracies uniform in [0.55, 0.9],
``--missing`` verdicts dropped at random, every item keeping at least one verdict so that both implementations
see the same items), then

1. fits ``crowdkit.aggregation.DawidSkene(n_iter=N, tol=-inf)`` on the long ``task``/``worker``/``label`` frame
   (its native input; ``tol=-inf`` makes it run exactly N iterations);
2. fits ``judgecal_dist.methods.aggregation.dawid_skene.DawidSkene(n_iter=N, smoothing=0, eps=1e-10, fixed_iter=True)`` on
   the dense int8 vote matrix (its native input) with crowd-kit's conventions (no smoothing, 1e-10 floors);
3. prints both wall times (ours: best of ``--repeats``), their ratio, the largest absolute posterior
   difference, and then our default fit (smoothing 0.01, tolerances of spec 000 §3.1(e)) run to convergence
   with its iteration count.

Only the fits are timed, not building either input. Usage (from the repository root)::

    python -m benchmarks.dawid_skene                    # 100k items x 40 judges, 3 iterations
    python -m benchmarks.dawid_skene --n-iter 10 --items 20000
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene


def one_coin_panel(n_items: int, n_judges: int, missing: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded one-coin votes (int8, -1 missing) and labels; every item keeps at least one verdict."""
    rng = np.random.default_rng(seed)
    accuracy = rng.uniform(0.55, 0.9, size=n_judges)
    y = rng.integers(0, 2, size=n_items)
    right = rng.random((n_items, n_judges)) < accuracy
    V = np.where(right, y[:, None], 1 - y[:, None]).astype(np.int8)
    V[rng.random(V.shape) < missing] = -1
    empty = (V == -1).all(axis=1)
    V[empty, 0] = np.where(right[empty, 0], y[empty], 1 - y[empty])
    return V, y


def long_frame(V: np.ndarray) -> pd.DataFrame:
    items, judges = np.nonzero(V != -1)
    return pd.DataFrame({"task": items, "worker": judges, "label": V[items, judges].astype(np.int64)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--judges", type=int, default=40)
    parser.add_argument("--missing", type=float, default=0.1)
    parser.add_argument("--n-iter", type=int, default=3, help="EM iterations for the side-by-side comparison")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of our fit (best is reported)")
    parser.add_argument("--seed", type=int, default=0)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), items=500, judges=8, repeats=1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))  # pandas noise from crowd-kit
        from crowdkit.aggregation import DawidSkene as CrowdKitDawidSkene

    V, y = one_coin_panel(args.items, args.judges, args.missing, args.seed)
    verdicts = long_frame(V)
    print(f"panel: {args.items} items x {args.judges} judges, {len(verdicts)} verdicts, {args.n_iter} iterations")

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))
        ck = CrowdKitDawidSkene(n_iter=args.n_iter, tol=-np.inf).fit(verdicts)
    t_ck = time.perf_counter() - start
    ck_posteriors = ck.probas_.sort_index()[[0, 1]].to_numpy()

    t_ours = np.inf
    for _ in range(args.repeats):
        start = time.perf_counter()
        ours = DawidSkene(n_iter=args.n_iter, smoothing=0.0, eps=1e-10, fixed_iter=True).fit(V)
        t_ours = min(t_ours, time.perf_counter() - start)

    diff = float(np.max(np.abs(ours.posteriors_ - ck_posteriors)))
    print(f"crowd-kit DawidSkene : {t_ck:8.3f} s  ({len(ck.loss_history_)} iterations)")
    print(f"ours (dense numpy)   : {t_ours:8.3f} s  ({ours.n_iter_} iterations, best of {args.repeats})")
    print(f"speed-up             : {t_ck / t_ours:8.1f}x   (target >= 15x)")
    print(f"max |posterior diff| : {diff:.2e}   (target <= 1e-6)")

    start = time.perf_counter()
    converged = DawidSkene().fit(V)
    t_conv = time.perf_counter() - start
    accuracy = float((converged.predict(V) == y).mean())
    print(
        f"ours to convergence  : {t_conv:8.3f} s  ({converged.n_iter_} iterations, converged={converged.converged_}, "
        f"accuracy {accuracy:.4f})"
    )


if __name__ == "__main__":
    main()
