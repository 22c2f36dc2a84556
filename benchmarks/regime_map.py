"""The LLMBar FCPS regime-map study end to end on local Ray (issue 6 target: under 5 minutes on 2 cores).

Runs ``studies/configs/regime_map.yaml`` on the position-balanced LLMBar rows (30 grouped splits x 5 budgets x
3 paths x 7 prefixes x 7 families = 22 050 candidate fits) through the study runner on a local Ray instance,
into a fresh results folder, and prints: the wall time of the whole run and its ratio to the 300 s target, the
engine's one-pass block/pattern job alone, and one replicate timed in this process with one BLAS thread, so
the Ray speed-up over 30 serial replicates is measured side by side in the same run.

Usage (from the repository root)::

    python -m benchmarks.regime_map                       # ingests ../shared/data/llmbar into --cache first
    python -m benchmarks.regime_map --data URL --cpus 2
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.cluster.ray import single_threaded_blas
from judgecal_dist.studies.regime_map import study as regime_map
from judgecal_dist.studies.runner import execute, prepare

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 300.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="ingested LLMBar URL (default: ingest the shared release)")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--replicates", type=int, default=30)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/judgecal-bench"))
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), replicates=2)
    logging.basicConfig(level=logging.WARNING)
    data = args.data
    if data is None:
        from judgecal_dist.io.ingest import ingest

        data = str(args.cache / "llmbar")
        if not (Path(data) / "_SUCCESS").exists():
            ingest("llmbar", str(ROOT.parent / "shared" / "data" / "llmbar"), data)
    engine = EngineConfig(ray_num_cpus=args.cpus)
    run = prepare(
        ROOT / "judgecal_dist" / "studies" / "configs" / "regime_map.yaml",
        [f"data={data}", f"replicates={args.replicates}"],
    )

    t0 = time.perf_counter()
    loaded = regime_map.load(run.config, engine)
    t_load = time.perf_counter() - t0
    rep = regime_map.plan(run.config, loaded)[0]
    with single_threaded_blas():
        t0 = time.perf_counter()
        n_rows = len(regime_map.run_replicate(loaded, rep))
        t_rep = time.perf_counter() - t0

    out = tempfile.mkdtemp(prefix="regime_map_bench_")
    try:
        t0 = time.perf_counter()
        execute(run, engine, output=out)
        t_run = time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    serial = t_rep * args.replicates
    print(f"LLMBar regime map: {args.replicates} splits, {n_rows} candidates per split, {args.cpus} Ray CPUs")
    print(f"  block plan + one-pass pattern job: {t_load:7.2f}s")
    print(f"  one replicate in-process (1 BLAS thread): {t_rep:7.2f}s -> {args.replicates} serial ~ {serial:.1f}s")
    print(f"  whole run (load, Ray fan-out, summary, figures): {t_run:7.2f}s")
    print(f"ratio run / {TARGET_SECONDS:.0f}s target: {t_run / TARGET_SECONDS:.2f}  (<= 1 meets it)")
    print(f"ratio serial estimate / Ray run: {serial / t_run:.2f}x")


if __name__ == "__main__":
    main()
