"""Ray fan-out vs one process: N replicates of the inclusion study's first slice on LLMBar (or a generated panel).

Both arms do the same work per replicate (split, fit majority + one-coin, Platt, metrics) and commit every part
to a run folder; Ray is started and warmed before timing. Prints wall times and the speed-up ratio.

    .venv/bin/python benchmarks/ray_fanout.py --replicates 1000            # LLMBar from ../shared/data
    .venv/bin/python benchmarks/ray_fanout.py --synthetic 20000x40         # a generated panel instead
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import ray

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.cluster.ray import fan_out, init_ray, run_serial
from judgecal_dist.engine.results.store import RunStore
from judgecal_dist.studies.inclusion import study as inclusion

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "llmbar"


def _dataset(args: argparse.Namespace, workdir: Path) -> str:
    if args.synthetic:
        from judgecal_dist.io.synthetic import generate_panel

        items, judges = (int(x) for x in args.synthetic.split("x"))
        dest = str(workdir / "synthetic")
        generate_panel(dest, n_items=items, n_judges=judges, seed=1)
        return dest
    from judgecal_dist.io.ingest import ingest

    dest = str(workdir / "llmbar")
    ingest("llmbar", str(SHARED), dest)
    return dest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--synthetic", default=None, help="ITEMSxJUDGES: use a generated panel")
    parser.add_argument("--cpus", type=int, default=2)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), replicates=8, synthetic="200x6")
    logging.basicConfig(level=logging.WARNING)

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        url = _dataset(args, workdir)
        data = inclusion.load(inclusion.Config(data=url, replicates=1), EngineConfig(stats_engine="local"))
        panel = data.panel
        # The foundation issue's "first slice": majority vote and one-coin, raw and with Platt, full panel only.
        config = inclusion.Config(
            data=url,
            replicates=args.replicates,
            aggregators=("majority", "one_coin"),
            calibrators=("none", "platt"),
            panels=("all",),
            conformal_alphas=(),
        )
        reps = inclusion.plan(config, data)
        print(f"panel {panel.n_items} items x {panel.n_judges} judges; {len(reps)} replicates; {args.cpus} CPUs")

        init_ray(num_cpus=args.cpus)
        fan_out(inclusion.run_replicate, data, reps[: 4 * args.cpus], lambda s, t: None)  # warm the workers

        serial_store = RunStore(str(workdir / "serial"))
        t0 = time.perf_counter()
        run_serial(inclusion.run_replicate, data, reps, serial_store.commit_part)
        serial = time.perf_counter() - t0

        ray_store = RunStore(str(workdir / "ray"))
        t0 = time.perf_counter()
        fan_out(inclusion.run_replicate, data, reps, ray_store.commit_part)
        on_ray = time.perf_counter() - t0
        assert serial_store.read_parts().equals(ray_store.read_parts()), "Ray and serial results differ"
        ray.shutdown()

    print(f"serial (one process) : {serial:8.2f} s  ({1000 * serial / len(reps):.2f} ms/replicate)")
    print(f"Ray fan-out          : {on_ray:8.2f} s  ({1000 * on_ray / len(reps):.2f} ms/replicate)")
    print(f"speed-up serial/Ray  : {serial / on_ray:8.2f}x  (target >= 1.6x on 2 cores)")


if __name__ == "__main__":
    main()
