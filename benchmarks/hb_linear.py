"""HB linear corrector cost (spec 001 §3; issue 7 targets): closed-form sweep and NUTS on the RB2 rubrics.

Prints, in one run:

* the 50-seed closed-form sweep at both budgets (100, 1500) x 5 rubrics: OLS and the exact conjugate posterior
  (4000-point sigma quadrature) of every cell, from sufficient statistics (target < 10 s);
* NUTS fits of the hierarchical model on the 5 RewardBench 2 rubrics, each cheap tier (nano, mini) as the judge
  (up to 1500 anchors per rubric; 2 chains x (500 warm-up + 1000 draws), one retry at target_accept 0.95 on a
  failed gate): with the data-driven per-rubric centring, a first fit (with JIT compile) and a second fit (NumPyro
  re-traces and re-compiles per fit, so both include a compile), and the same data all non-centred (the previous
  parametrisation) for the before/after divergence counts (target < 60 s per chain pair). Needs
  ../shared/data/rewardbench2_k8 (or --data).

Usage (from the repository root)::

    python -m benchmarks.hb_linear                # full: 50 seeds, both judges, before/after
    python -m benchmarks.hb_linear --judges nano --no-before   # quicker
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.io.synthetic_judge import strict_compressing_judge
from judgecal_dist.methods.continuous.hb_linear import HierarchicalLinear
from judgecal_dist.methods.continuous.linear_conjugate import ConjugateLinear, ols_from_stats, sufficient_stats
from judgecal_dist.studies.continuous.data import load_paired_scores
from judgecal_dist.studies.continuous.study import split


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


def _fit(anchors, centring: str, seed: int) -> tuple[HierarchicalLinear, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HierarchicalLinear(centring=centring, random_state=seed).fit(
            anchors["j"], anchors["y"], anchors["rubric"]
        )
    return model, time.perf_counter() - t0, time.process_time() - c0


def _line(model: HierarchicalLinear) -> str:
    return (
        f"gate {'passed' if model.converged_ else 'FAILED'}{' after retry' if model.retried_ else ''} "
        f"(max R-hat {max(model.rhat_.values()):.4f}, min bulk/tail ESS {min(model.ess_bulk_.values()):.0f}/"
        f"{min(model.ess_tail_.values()):.0f}, {model.divergences_} divergences, {model.mean_steps_:.0f} "
        "leapfrog steps/draw)"
    )


def nuts(data: str, budget: int, judges: tuple[str, ...], before: bool) -> None:
    scores = load_paired_scores(data, judges=judges)
    for judge in judges:
        rows = scores[scores["judge_id"] == judge].reset_index(drop=True)
        _, pool = split(rows, 0, 50)
        anchors = rows.iloc[pool].groupby("rubric", sort=False).head(budget)
        print(f"NUTS data: {judge} judge, {len(anchors)} anchors ({anchors.groupby('rubric').size().to_dict()})")
        runs = [("auto", 0, "auto centring, first fit (with JIT compile)"), ("auto", 1, "auto centring, second fit")]
        if before:
            runs.append(("noncentred", 0, "all non-centred (before)"))
        for centring, seed, label in runs:
            model, dt, cpu = _fit(anchors, centring, seed)
            print(f"  {label}: {dt:.1f} s wall per chain pair (target < 60 s; {cpu:.1f} s CPU); {_line(model)}")
            if centring == "auto" and seed == 0:
                print(
                    f"    centred (alpha, beta) per rubric {model.rubrics_}: {model.centred_.astype(int).tolist()}; "
                    f"beta {np.round(model.beta_, 3).tolist()}; Pr(beta<0.3) {np.round(model.canary_prob_, 3).tolist()}"
                )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--data", default="../shared/data/rewardbench2_k8")
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--judges", default="nano,mini", help="cheap tiers to use as the judge, comma-separated")
    parser.add_argument("--no-before", action="store_true", help="skip the all-non-centred comparison fit")
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), seeds=1, budget=60, judges="nano", no_before=True)
    sweep(args.seeds)
    nuts(args.data, args.budget, tuple(args.judges.split(",")), not args.no_before)


if __name__ == "__main__":
    main()
