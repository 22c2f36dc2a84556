"""HB linear corrector cost (spec 001 §3; issue 7 targets): closed-form sweep and NUTS on the RB2 rubrics.

Prints, in one run:

* the 50-seed closed-form sweep at both budgets (100, 1500) x 5 rubrics: OLS and the exact conjugate posterior
  (4000-point sigma quadrature) of every cell, from sufficient statistics (target < 10 s);
* NUTS fits of the hierarchical model on the 5 RewardBench 2 rubrics (nano judge, up to 1500 anchors per rubric;
  2 chains x (500 warm-up + 1000 draws)): first fit (with JIT compile) and a second fit, with the gate results
  (target < 60 s per chain pair). Needs ../shared/data/rewardbench2_k8 (or --data).

Usage (from the repository root)::

    python -m benchmarks.hb_linear
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from judgecal_dist.io.synthetic_judge import strict_compressing_judge
from judgecal_dist.methods.hb_linear import HierarchicalLinear
from judgecal_dist.methods.linear_conjugate import ConjugateLinear, ols_from_stats, sufficient_stats
from judgecal_dist.studies.continuous import split
from judgecal_dist.studies.continuous_data import load_paired_scores


def sweep(seeds: int, rubrics: int = 5, pool: int = 1700) -> float:
    rng = np.random.default_rng(0)
    y = np.clip(rng.normal(2.6, 1.08, (rubrics, pool)), 1, 5)
    t0 = time.perf_counter()
    cells = []
    for s in range(seeds):
        j = strict_compressing_judge(y, np.random.default_rng(s))
        for n in (100, 1500):
            cells.append(sufficient_stats(j[:, :n], y[:, :n]))
    stats = np.stack(cells)  # (seeds x budgets, rubrics, 6)
    ols_from_stats(stats)
    post = ConjugateLinear().fit(stats)
    dt = time.perf_counter() - t0
    print(
        f"closed-form sweep: {seeds} seeds x 2 budgets x {rubrics} rubrics = {stats.shape[0] * rubrics} cells "
        f"(OLS + exact posterior) in {dt:.2f} s (target < 10 s); mean beta {post.mean_[..., 1].mean():.3f}"
    )
    return dt


def nuts(data: str, budget: int) -> None:
    scores = load_paired_scores(data, judges=("nano",))
    _, pool = split(scores, 0, 50)
    anchors = scores.iloc[pool].groupby("rubric", sort=False).head(budget)
    print(
        f"NUTS data: nano judge, {len(anchors)} anchors over {anchors['rubric'].nunique()} rubrics "
        f"({anchors.groupby('rubric').size().to_dict()})"
    )
    for attempt in ("first (with JIT compile)", "second"):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = HierarchicalLinear(retry_target_accept=0.9, random_state=len(attempt)).fit(
                anchors["j"], anchors["y"], anchors["rubric"]
            )
        dt = time.perf_counter() - t0
        print(
            f"NUTS 2 chains x (500 + 1000), {attempt}: {dt:.1f} s (target < 60 s); gate passed {model.converged_} "
            f"(max R-hat {max(model.rhat_.values()):.4f}, min bulk ESS {min(model.ess_bulk_.values()):.0f}, "
            f"{model.divergences_} divergences); beta {np.round(model.beta_, 3).tolist()}, "
            f"Pr(beta<0.3) {np.round(model.canary_prob_, 3).tolist()}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--data", default="../shared/data/rewardbench2_k8")
    parser.add_argument("--budget", type=int, default=1500)
    args = parser.parse_args()
    sweep(args.seeds)
    nuts(args.data, args.budget)


if __name__ == "__main__":
    main()
