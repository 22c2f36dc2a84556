"""Arena-scale benchmark (issue 9): cost per verdict as the table grows, replicates sharing passes, driver memory.

For generated tables of N items x 50 judges (``--sizes``; 10k, 100k, 1M by default, 10M where the machine
allows) in two variants (``full``: every item labelled; ``p01``: 1% labelled), each workload runs in a fresh child
process (so one run's memory never counts for the next) and the parent prints, side by side:

* wall seconds, verdict rows per second, the driver's peak RSS and the peak RSS of its worker processes (Spark's
  JVM and Python workers, Ray's workers: every descendant of the child), sampled every 50 ms;
* for the study, seconds per replicate per million verdicts.

Workloads: ``study`` (``inclusion_scale``: one-coin x {none, Platt, beta} x {all, top3, top5, top10} panels,
``--replicates`` splits, one-pass execution on Spark), ``study1`` (the same with one replicate: the ratio of the
two is what R replicates cost over one), ``score`` (``judgecal score`` of a model fitted by a small inclusion run)
and ``ds`` (Dawid-Skene over all items, semi-supervised, to convergence, on Spark). Workloads whose module is
not importable print a "not available" line instead.

Usage (from the repository root; the tables are generated once into ``--cache``)::

    python -m benchmarks.scaling --sizes 10000,100000 --variants full,p01
    python -m benchmarks.scaling --sizes 1000000 --variants full --workloads study,study1
    python -m benchmarks.scaling --sizes 100000 --workloads study --study-set onepass_batch=100
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import MemorySampler, add_smoke, engine_config, smoke

log = logging.getLogger("benchmarks.scaling")

N_JUDGES = 50
WORKLOADS = ("study", "study1", "score", "ds")
PANELS = "[all, top3, top5, top10]"


def ensure_table(cache: Path, n_items: int, variant: str) -> str:
    """The generated table ``gen_<n>_<variant>`` (50 judges, seed 0), generated once in a child process."""
    root = cache / f"gen_{n_items}_{variant}"
    if not (root / "_SUCCESS").exists():
        fraction = 1.0 if variant == "full" else 0.01
        code = (
            "from judgecal_dist.io.synthetic import generate_panel; "
            f"generate_panel({str(root)!r}, n_items={n_items}, n_judges={N_JUDGES}, seed=0, "
            f"label_fraction={fraction}, overwrite=True)"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
    return str(root)


def ensure_model(cache: Path, url: str) -> str:
    """A small inclusion run on ``url`` whose ``model/model.json`` the ``score`` workload applies."""
    from judgecal_dist.config import EngineConfig
    from judgecal_dist.studies.runner import execute, prepare

    overrides = [
        f"data={url}",
        "replicates=2",
        "aggregators=[one_coin]",
        "calibrators=[beta]",
        "panels=[all]",
        "permutation_resamples=100",
        "conformal_alphas=[0.1]",
    ]
    run = prepare("inclusion", overrides, run_id="scaling-model")
    return execute(run, EngineConfig(stats_engine="local"), output=str(cache / "models"), serial=True)


def run_workload(
    workload: str, url: str, replicates: int, cache: Path, model: str | None, study_set: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Run one workload in this process and return what it reports (called in the child)."""

    engine = engine_config(stats_engine="spark", output=str(cache / "runs"))
    if workload in ("study", "study1"):
        from judgecal_dist.studies.runner import execute, prepare

        r = 1 if workload == "study1" else replicates
        overrides = [f"data={url}", f"replicates={r}", "execution=onepass", f"panels={PANELS}", *study_set]
        run = prepare("inclusion_scale", overrides, run_id=f"scaling-{time.time_ns()}")
        out = execute(run, engine, serial=True)
        return {"replicates": r, "run": out}
    if workload == "score":
        try:
            from judgecal_dist.scoring.apply import score_dataset
        except ImportError as err:
            return {"not_available": f"judgecal score: {err}"}
        summary = score_dataset(model or "", url, str(cache / "scores" / f"{time.time_ns()}"), engine=engine)
        return {"summary": {k: v for k, v in summary.items() if isinstance(v, int | float | str)}}
    if workload == "ds":
        try:
            from judgecal_dist.engine.jobs.ds_spark import dawid_skene_spark
            from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
        except ImportError as err:
            return {"not_available": f"Spark Dawid-Skene: {err}"}
        result = dawid_skene_spark(url, DawidSkene(tol=1e-6, semi_supervised=True), engine=engine)
        per_pass = [float(x) for x in getattr(result, "seconds_per_pass", [])]
        return {
            "n_iter": int(result.n_iter_),
            "converged": bool(result.converged_),
            "passes": int(result.passes),
            "median_pass_s": round(sorted(per_pass)[len(per_pass) // 2], 2) if per_pass else None,
        }
    raise ValueError(f"unknown workload {workload!r}")


def child(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.WARNING)
    with MemorySampler() as memory:
        start = time.perf_counter()
        info = run_workload(args.child, args.data, args.replicates, Path(args.cache), args.model, tuple(args.study_set))
        wall = time.perf_counter() - start
    print(
        "RESULT "
        + json.dumps(info | {"wall": wall, "driver_mb": memory.driver / 2**20, "workers_mb": memory.children / 2**20})
    )


def measure(workload: str, url: str, args: argparse.Namespace, model: str | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.scaling", "--child", workload, "--data", url, "--cache", args.cache]
    cmd += ["--replicates", str(args.replicates)] + (["--model", model] if model else [])
    cmd += [f"--study-set={kv}" for kv in args.study_set]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1][len("RESULT ") :])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="items per table, comma-separated")
    parser.add_argument("--variants", default="full,p01", help="full (all labelled) and/or p01 (1%% labelled)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--cache", default="/tmp/judgecal-bench")
    parser.add_argument(
        "--study-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override of the study config (repeatable), e.g. onepass_batch=100",
    )
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), sizes="300", replicates=2, variants="full", workloads="study1")
    if args.child:
        return child(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    workloads = args.workloads.split(",")
    model = ensure_model(cache, ensure_table(cache, 10_000, "full")) if "score" in workloads else None
    head = (
        f"{'items':>9} {'variant':>7} {'workload':>8} {'wall s':>9} {'rows/s':>11} {'driver MB':>10} {'workers MB':>11}"
    )
    print(head + f" {'s/rep/Mverdict':>15}  notes", flush=True)
    results: dict[tuple[int, str, str], dict[str, Any]] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        for variant in args.variants.split(","):
            url = ensure_table(cache, n, variant)
            for workload in workloads:
                res = measure(workload, url, args, model)
                results[n, variant, workload] = res
                if "wall" not in res:
                    print(f"{n:>9} {variant:>7} {workload:>8}  {res.get('not_available') or res.get('error')}")
                    continue
                rows = n * N_JUDGES
                per_rep = res["wall"] / res["replicates"] / (rows / 1e6) if "replicates" in res else float("nan")
                note = {
                    k: v
                    for k, v in res.items()
                    if k in ("n_iter", "converged", "passes", "median_pass_s", "replicates")
                }
                print(
                    f"{n:>9} {variant:>7} {workload:>8} {res['wall']:>9.1f} {rows / res['wall']:>11,.0f} "
                    f"{res['driver_mb']:>10.0f} {res['workers_mb']:>11.0f} {per_rep:>15.3f}  {note}",
                    flush=True,
                )
    print_targets(results, args)


def print_targets(results: dict[tuple[int, str, str], dict[str, Any]], args: argparse.Namespace) -> None:
    """The issue's targets, from the rows measured in this run."""
    sizes = sorted({k[0] for k in results})
    for variant in args.variants.split(","):
        for workload in ("study", "score", "ds"):
            walls = {n: results.get((n, variant, workload), {}).get("wall") for n in sizes}
            if walls.get(100_000) and walls.get(1_000_000):
                ratio = (walls[1_000_000] / 1e6) / (walls[100_000] / 1e5)
                print(f"target {variant} {workload}: cost per verdict 1M / 100k = {ratio:.2f} (flat within 1.5x)")
        for n in sizes:
            many, one = (results.get((n, variant, w), {}).get("wall") for w in ("study", "study1"))
            if many and one:
                print(
                    f"target {variant} {n} items: {args.replicates} replicates / 1 replicate = {many / one:.2f} (< 3)"
                )


if __name__ == "__main__":
    main()
