"""Subset search of the inclusion study on LLMBar: batched candidate scoring vs one scalar fit per candidate.

Arm 1 scores one beam step's candidates (every single judge added to the three best subsets of the previous step,
~390 subsets on LLMBar's 130 judges) the way a plain search would: per candidate, one-coin scores and a 5-fold
loop of the scalar ``BetaCalibration`` (L-BFGS-B). Arm 2 scores the same candidates with one matrix product and
the batched Newton (``beta_cv_nll``). Both must give the same scores (printed: max difference). Then the CPU
seconds (``time.process_time``, robust to other load on a shared machine) of whole replicates of the study,
without search and with beam + backward search, and what 100 splits on 2 cores would take from them.

    .venv/bin/python -m benchmarks.inclusion_search --data /tmp/llmbar_ds --replicates 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings

import numpy as np

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.cluster.ray import single_threaded_blas
from judgecal_dist.engine.jobs.panel import load_panel
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.pipeline import Settings
from judgecal_dist.splits import calibration_mask
from judgecal_dist.stats.metrics import nll
from judgecal_dist.studies.inclusion import study as inclusion
from judgecal_dist.studies.inclusion.search import InnerProblem, SearchSettings


def scalar_scores(problem: InnerProblem, votes: np.ndarray, labels: np.ndarray, subsets: list) -> np.ndarray:
    out = []
    y = problem.y_cal
    for subset in subsets:
        cols = list(subset)
        model = OneCoin().fit(votes[problem.agg][:, cols], labels[problem.agg])
        t = model.decision_function(votes[problem.cal][:, cols])
        p = np.empty(t.size)
        for k in np.unique(problem.folds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                beta = BetaCalibration(score_input="logit").fit(t[problem.folds != k], y[problem.folds != k])
            p[problem.folds == k] = beta.predict_proba(t[problem.folds == k])[:, 1]
        out.append(nll(y, p, eps=1e-6))
    return np.array(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="ingested LLMBar (judgecal ingest --format llmbar; required)")
    parser.add_argument("--replicates", type=int, default=3)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), replicates=1)
    if args.data is None and not args.smoke:
        parser.error("--data is required")
    if args.data is None:  # smoke: a small generated panel of pairs
        from judgecal_dist.io.synthetic import generate_panel

        args.data = tempfile.mkdtemp(prefix="inclusion-search-smoke-") + "/panel"
        generate_panel(args.data, n_items=300, n_judges=8, seed=0, pairs=True)
    panel = load_panel(args.data)
    in_cal = calibration_mask(panel.group_keys, [0], 0.5)[0]
    votes, labels = panel.votes[in_cal], panel.labels[in_cal]
    with single_threaded_blas():
        problem = InnerProblem(
            votes, labels, panel.group_keys[in_cal], 0, Settings(calibrator_input="logit"), SearchSettings()
        )
        singles = problem.scores([(j,) for j in range(panel.n_judges)])
        beam = [int(j) for j in np.argsort(singles)[:3]]
        subsets = sorted({tuple(sorted({b, j})) for b in beam for j in range(panel.n_judges) if j != b})
        t0 = time.process_time()
        batched = problem.scores(subsets)
        t_batched = time.process_time() - t0
        t0 = time.process_time()
        scalar = scalar_scores(problem, votes, labels, subsets)
        t_scalar = time.process_time() - t0
        print(
            f"one beam step, {len(subsets)} candidates x 5 folds: scalar {t_scalar:.2f} s, batched "
            f"{t_batched:.3f} s CPU -> {t_scalar / t_batched:.0f}x; max |score difference| "
            f"{np.abs(batched - scalar).max():.1e}"
        )
        for label, panels in (
            ("without search", ("all", "top3", "top5", "top10", "dedup")),
            ("beam + backward", ("all", "top3", "top5", "top10", "dedup", "beam", "backward")),
        ):
            cfg = inclusion.Config(data=args.data, replicates=args.replicates, panels=panels)
            data = inclusion.load(cfg, EngineConfig(stats_engine="local"))
            cpu = []
            for rep in inclusion.plan(cfg, data):
                t0 = time.process_time()
                inclusion.run_replicate(data, rep)
                cpu.append(time.process_time() - t0)
            per = float(np.mean(cpu))
            print(
                f"replicate {label}: {per:.2f} s CPU (mean of {len(cpu)}); 100 splits on 2 cores ~ "
                f"{100 * per / 2:.0f} s of CPU-bound wall time"
            )


if __name__ == "__main__":
    main()
