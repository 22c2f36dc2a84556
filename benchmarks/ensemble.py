"""Ensemble study on the shared rb2-k8 files, and the accuracy-vs-k job on a generated table through Spark.

1. **study**: ``judgecal run ensemble`` on the ingested shared files (all tiers and prompt
   variants, k = 1..8, 2000-resample CIs overall and per subset, escalation sweeps, blend, variance-informed,
   agreement), once on local Ray (2 CPUs, Ray start included) and once serially; wall time of each.
2. **spark**: :func:`judgecal_dist.engine.jobs.ensemble.accuracy_by_k` with ``engine="spark"`` on a generated
   rb2-k8-shaped table (examples x 4 responses x 8 samples, integer scores, 1% nulls) on ``local[2]`` with
   ``spark.driver.memory`` capped (default 2g); the table is generated first in a child process. Prints wall
   time, rows/s, and peak RSS of this Python driver and of the JVM (sampled every 50 ms).

Usage (from the repository root)::

    python -m benchmarks.ensemble                          # study + 1M-example (32M-row) Spark job
    python -m benchmarks.ensemble --examples 10000000      # the issue's 10M examples (320M rows; slow on 2 cores)
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.harness import MemorySampler, add_smoke, engine_config, smoke
from judgecal_dist.config import EngineConfig

log = logging.getLogger("ensemble_bench")
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "rewardbench2_k8"
ROOT = Path(__file__).resolve().parents[1]


def _generate(dest: str, n_examples: int, chunk: int = 250_000) -> None:
    """An rb2-k8-shaped verdict table: response 0 is better on average; scores 1..10; 1% nulls."""
    from judgecal_dist.io.dataset import DatasetWriter

    rng = np.random.default_rng(0)
    with DatasetWriter(dest, overwrite=True, validate=False, rows_per_part=4_000_000) as writer:
        labels = []
        for start in range(0, n_examples, chunk):
            n = min(chunk, n_examples - start)
            quality = rng.normal(0, 1, (n, 4))
            quality[:, 0] += 0.9
            scores = np.clip(np.rint(6 + 1.3 * quality[:, :, None] + rng.normal(0, 0.9, (n, 4, 8))), 1, 10)
            scores[rng.random(scores.shape) < 0.01] = np.nan
            groups = np.char.add("ex-", np.arange(start, start + n).astype(str))
            items = np.char.add(np.repeat(groups, 4), np.tile(np.array(["/0", "/1", "/2", "/3"]), n))
            rows = n * 32
            writer.write_verdicts(
                pa.table(
                    {
                        "dataset": pa.repeat("generated", rows),
                        "item_id": pa.array(np.repeat(items, 8)),
                        "group_id": pa.array(np.repeat(groups, 32)),
                        "judge_id": pa.repeat("full", rows),
                        "sample": pa.array(np.tile(np.arange(8, dtype=np.int32), n * 4)),
                        "verdict": pa.nulls(rows, pa.string()),
                        "score": pa.array(scores.ravel(), from_pandas=True),
                    }
                )
            )
            labels.append(
                pa.table(
                    {
                        "dataset": pa.repeat("generated", n * 4),
                        "item_id": pa.array(items),
                        "label": pa.nulls(n * 4, pa.string()),
                        "label_score": pa.array(np.tile([1.0, 0.0, 0.0, 0.0], n)),
                    }
                )
            )
        writer.write_table("labels", pa.concat_tables(labels))
        writer.commit({"format": "benchmark", "examples": n_examples})


def _study(workdir: Path) -> None:
    from judgecal_dist.io.ingest import ingest
    from judgecal_dist.studies.runner import execute, prepare

    data = str(workdir / "rb2")
    ingest("rb2-k8", str(SHARED), data)
    config = ROOT / "judgecal_dist" / "studies" / "configs" / "ensemble.yaml"
    engine = EngineConfig(ray_num_cpus=2)
    for label, serial in (("ray (2 CPUs, Ray start included)", False), ("serial", True)):
        start = time.perf_counter()
        execute(prepare(config, [f"data={data}"], run_id=label.split()[0]), engine, output=str(workdir), serial=serial)
        print(f"ensemble study, {label}: {time.perf_counter() - start:.1f} s (target < 30 s)")


def _spark(workdir: Path, n_examples: int, driver_memory: str) -> None:
    from judgecal_dist.engine.jobs import spark as spark_engine
    from judgecal_dist.engine.jobs.ensemble import accuracy_by_k

    dest = str(workdir / f"generated-{n_examples}")
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(_generate, dest, n_examples).result()
    print(f"generated {n_examples:,} examples ({n_examples * 32:,} rows) in {time.perf_counter() - start:.0f} s")
    # The CLI's engine settings (its shuffle partitions) with this driver memory.
    engine = engine_config(spark_master="local[2]", spark_conf={"spark.driver.memory": driver_memory})
    spark_engine.get_session(engine.spark_master, conf=dict(engine.spark_conf))
    with MemorySampler() as memory:
        start = time.perf_counter()
        curve = accuracy_by_k(dest, k_max=8, engine="spark", config=engine)
        seconds = time.perf_counter() - start
    rows = n_examples * 32
    print(curve.assign(accuracy=curve["correct"] / curve["n"]).to_string(index=False))
    print(
        f"accuracy-vs-k on Spark (local[2], spark.driver.memory={driver_memory}): {seconds:.1f} s, "
        f"{rows / seconds / 1e6:.2f}M rows/s; peak RSS: Python driver {memory.driver / 2**20:.0f} MB, "
        f"JVM + workers {memory.children / 2**20:.0f} MB"
    )
    print(f"linear extrapolation to 10M examples (320M rows): {seconds * 1e7 / n_examples / 60:.1f} min")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1_000_000)
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--skip-study", action="store_true")
    parser.add_argument("--skip-spark", action="store_true")
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), examples=2000)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if not args.skip_study:
            _study(workdir)
        if not args.skip_spark:
            _spark(workdir, args.examples, args.driver_memory)


if __name__ == "__main__":
    main()
