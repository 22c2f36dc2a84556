"""One-coin + beta pipeline for 100 splits on a 100k-item x 40-judge panel: per-split loop vs one matrix product.

Both arms fit the same pipeline per split (one-coin weights from calibration counts, beta calibration on the
calibration scores, NLL on the evaluation half) and must give identical NLLs; they differ only in how the
per-judge counts of all splits are obtained: a per-split loop over the vote matrix, or one product of the
(R x items) membership matrix with the (items x judges) voted/correct indicators. Prints times and the ratio.

    .venv/bin/python -m benchmarks.onecoin_beta --items 100000 --judges 40 --splits 100
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.splits import calibration_mask, group_keys
from judgecal_dist.stats.metrics import nll


def panel(n_items: int, n_judges: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A seeded one-coin panel (accuracies 0.35..0.9, 3% missing) and its group keys."""
    rng = np.random.default_rng(seed)
    acc = rng.uniform(0.35, 0.9, n_judges)
    y = rng.integers(0, 2, n_items).astype(np.int8)
    right = rng.random((n_items, n_judges)) < acc
    votes = np.where(right, y[:, None], 1 - y[:, None]).astype(np.int8)
    votes[rng.random((n_items, n_judges)) < 0.03] = -1
    return votes, y, group_keys([f"g{i}" for i in range(n_items)])


def fit_split(votes, y, in_cal, n_votes, n_correct) -> float:
    model = OneCoin().fit_counts(n_votes, n_correct)
    scores = model.decision_function(votes)  # log-odds: what BetaCalibration() reads by default
    beta = BetaCalibration().fit(scores[in_cal], y[in_cal])
    return nll(y[~in_cal], beta.predict_proba(scores[~in_cal])[:, 1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--judges", type=int, default=40)
    parser.add_argument("--splits", type=int, default=100)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), items=500, judges=8, splits=3)
    votes, y, keys = panel(args.items, args.judges)
    seeds = list(range(args.splits))

    t0 = time.perf_counter()
    loop = []
    for seed in seeds:
        in_cal = calibration_mask(keys, [seed], 0.5)[0]
        n_votes, n_correct = count_judge_votes(votes[in_cal], y[in_cal])
        loop.append(fit_split(votes, y, in_cal, n_votes, n_correct))
    t_loop = time.perf_counter() - t0

    t0 = time.perf_counter()
    masks = calibration_mask(keys, seeds, 0.5)  # (R, items)
    member = masks.astype(np.float32)
    voted = (votes >= 0).astype(np.float32)
    correct = (votes == y[:, None]).astype(np.float32)
    all_votes, all_correct = (member @ voted).round().astype(np.int64), (member @ correct).round().astype(np.int64)
    t_counts = time.perf_counter() - t0
    product = [fit_split(votes, y, masks[r], all_votes[r], all_correct[r]) for r in range(len(seeds))]
    t_product = time.perf_counter() - t0

    assert np.allclose(loop, product, rtol=0, atol=1e-12), "the two arms disagree"
    print(f"panel {args.items} items x {args.judges} judges, {args.splits} splits; mean NLL {np.mean(loop):.4f}")
    print(f"per-split loop (counts recomputed per split) : {t_loop:7.2f} s")
    print(f"one product for all splits' counts           : {t_product:7.2f} s  (counts {t_counts:.2f} s)")
    print(f"speed-up                                      : {t_loop / t_product:7.2f}x  (target: under 15 s)")


if __name__ == "__main__":
    main()
