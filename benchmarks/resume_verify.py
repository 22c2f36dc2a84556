"""Cost of verifying replicate parts on resume: a resume of a 100-replicate run with and without part checks.

A run of the inclusion study is computed once on a generated panel; its ``_SUCCESS`` is then removed, so every
timed call of ``execute`` is a resume that finds all parts committed and goes on to summarise and commit. The
"verified" arm is the code as shipped (each part is read in full and its seed and run identity are checked); the
"unverified" arm lists the parts by name only, as resume did before (``RunStore.verified_seeds`` replaced by
``finished_seeds`` in this process). Arms alternate, and the median of each is reported with their ratio, beside
the verification step alone against the listing it replaces.

    .venv/bin/python benchmarks/resume_verify.py                          # 100 replicates, 2000 x 12 panel
    .venv/bin/python benchmarks/resume_verify.py --replicates 100 --trials 7 --synthetic 5000x20
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.results.store import SUCCESS, RunStore
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.studies.runner import execute, identify, prepare

CONFIG = Path(__file__).resolve().parents[1] / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--synthetic", default="2000x12", help="ITEMSxJUDGES of the generated panel")
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), replicates=4, trials=1, synthetic="200x6")
    logging.basicConfig(level=logging.ERROR)

    with tempfile.TemporaryDirectory() as tmp:
        items, judges = (int(x) for x in args.synthetic.split("x"))
        data = f"{tmp}/panel"
        generate_panel(data, n_items=items, n_judges=judges, seed=1)
        overrides = [
            f"data={data}",
            f"replicates={args.replicates}",
            "aggregators=[majority, one_coin, log_odds]",
            "calibrators=[none, platt, beta]",
            "panels=[all, top3]",
            "permutation_resamples=1000",
        ]
        engine, out = EngineConfig(stats_engine="local"), f"{tmp}/out"
        run = identify(prepare(CONFIG, overrides, run_id="bench"), engine.storage_options)
        t0 = time.perf_counter()
        url = execute(run, engine, output=out, serial=True)
        first = time.perf_counter() - t0
        store = RunStore(url, identity=run.identity.digests() if run.identity else None)

        verify = RunStore.verified_seeds
        times: dict[str, list[float]] = {"verified": [], "unverified": []}
        steps: dict[str, list[float]] = {"verified": [], "unverified": []}
        for _ in range(args.trials):
            for arm in ("verified", "unverified"):
                swapped = verify if arm == "verified" else RunStore.finished_seeds
                RunStore.verified_seeds = swapped  # type: ignore[method-assign]
                try:
                    t0 = time.perf_counter()
                    seeds = store.verified_seeds() if arm == "verified" else store.finished_seeds()
                    steps[arm].append(time.perf_counter() - t0)
                    assert len(seeds) == args.replicates
                    Path(url, SUCCESS).unlink()  # the run is interrupted again: the next call resumes it
                    t0 = time.perf_counter()
                    execute(run, engine, output=out, serial=True)
                    times[arm].append(time.perf_counter() - t0)
                finally:
                    RunStore.verified_seeds = verify  # type: ignore[method-assign]

    med = {arm: statistics.median(v) for arm, v in times.items()}
    step = {arm: statistics.median(v) for arm, v in steps.items()}
    print(f"first run ({args.replicates} replicates, {items} x {judges} panel): {first:.2f} s")
    print(f"{'resume':<26}{'verified':>12}{'unverified':>12}{'ratio':>8}")
    ratio, step_ratio = med["verified"] / med["unverified"], step["verified"] / step["unverified"]
    print(f"{'whole resume (median s)':<26}{med['verified']:>12.3f}{med['unverified']:>12.3f}{ratio:>8.3f}")
    print(f"{'part check alone (s)':<26}{step['verified']:>12.3f}{step['unverified']:>12.3f}{step_ratio:>8.1f}")
    print(f"trials per arm: {args.trials}; all resume times: {times}")


if __name__ == "__main__":
    main()
