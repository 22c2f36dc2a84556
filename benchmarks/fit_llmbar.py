"""``judgecal fit`` on LLMBar, every candidate cross-fitted: wall time, and its choice beside the inclusion study's
lowest-NLL pipeline.

Ingests LLMBar from ``--src`` (default ``../shared/data/llmbar``) into a temporary folder, runs ``judgecal fit``
with the packaged settings (6 aggregators x 5 calibrators x 5 panels, 5 grouped folds; folds in this process with
``--serial``, on local Ray otherwise) and prints the wall time, the candidate count, the rule's choice and the
lowest-NLL candidate with their cross-fitted NLL. ``--inclusion-replicates N`` (default 0: skipped) also runs the
inclusion study on the same data with N splits and prints its lowest-NLL pipeline (mean test NLL over the splits),
so the two ways of choosing can be compared. Usage (from the repository root)::

    python -m benchmarks.fit_llmbar --serial --inclusion-replicates 20
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks.harness import add_smoke, smoke
from judgecal_dist.config import EngineConfig
from judgecal_dist.io.ingest import ingest
from judgecal_dist.studies.runner import execute, prepare


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "llmbar"))
    parser.add_argument("--serial", action="store_true")
    parser.add_argument("--inclusion-replicates", type=int, default=0)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), serial=True)
    engine = EngineConfig(ray_num_cpus=2)
    with tempfile.TemporaryDirectory() as tmp:
        data = f"{tmp}/llmbar"
        ingest("llmbar", args.src, data)
        started = time.perf_counter()
        run = execute(prepare("fit", [f"data={data}"]), engine, output=f"{tmp}/out", serial=args.serial)
        wall = time.perf_counter() - started
        table = pd.read_parquet(Path(run) / "summary.parquet")
        choice = json.loads((Path(run) / "summary.json").read_text())["choice"]
        nll = table.set_index("candidate")["nll"]
        print(f"fit: {len(table)} candidates cross-fitted in {wall:.1f} s (wall, end to end)")
        print(f"fit: chosen {choice['chosen']} NLL {nll[choice['chosen']]:.4f}; lowest {nll.idxmin()} {nll.min():.4f}")
        if args.inclusion_replicates:
            sets = [f"data={data}", f"replicates={args.inclusion_replicates}", "permutation_resamples=1000"]
            inc = execute(prepare("inclusion", sets), engine, output=f"{tmp}/out", serial=args.serial)
            summary = pd.read_parquet(Path(inc) / "summary.parquet").sort_values("nll", kind="stable")
            best = summary.iloc[0]
            name = f"{best['aggregator']}+{best['calibrator']}@{best['panel']}"
            print(f"inclusion ({args.inclusion_replicates} splits): lowest NLL {name} {best['nll']:.4f}")
            if name in nll:
                print(f"fit's cross-fitted NLL of {name}: {nll[name]:.4f}")


if __name__ == "__main__":
    main()
