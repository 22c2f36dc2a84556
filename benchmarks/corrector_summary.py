"""Driver memory of a continuous corrector's score summary: rows read back into pandas vs one Spark aggregation.

``judgecal score`` with a corrector writes its item rows, then summarises them per dataset and rubric. Before, the
driver read the summary's columns of every row back (:func:`judgecal_dist.scoring.continuous.read_back` +
``summarise``; still the in-process path); on Spark it now runs one ``groupBy().agg()``
(:func:`judgecal_dist.scoring.continuous.summarise_spark`) and only one row per (dataset, rubric) comes back.

The parent generates ``--rows`` scores of one judge on five rubrics (with human scores), exports a linear
corrector and scores the table on Spark; then each summary runs in a fresh child process, which reports the peak
resident memory it added to its own baseline (``VmHWM`` reset through ``/proc/self/clear_refs`` after imports and
the Spark session start) and its seconds. Prints both side by side, their ratio, and the largest difference
between the two tables. Usage (from the repository root; Linux)::

    python -m benchmarks.corrector_summary --rows 2000000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import add_smoke, engine_config, smoke

ROOT = Path(__file__).resolve().parents[1]
RUBRICS = ["Factuality", "Focus", "Math", "Precise IF", "Safety"]


def _status(key: str) -> int:
    """A ``/proc/self/status`` memory line in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _child(mode: str, model_url: str, out: str, master: str) -> None:
    import pandas as pd

    from judgecal_dist.engine.jobs.spark import get_session
    from judgecal_dist.models import load_model
    from judgecal_dist.scoring.continuous import read_back, rubric_sums, summarise, summarise_spark

    engine = engine_config(spark_master=master)  # the CLI's engine settings
    session = get_session(
        engine.spark_master, conf=dict(engine.spark_conf)
    )  # the session and its gateway are part of the baseline, not of the summary
    model = load_model(model_url)
    record = json.loads((Path(out) / "summary.json").read_text())
    marker = json.loads((Path(out) / "_JUDGECAL_SCORE").read_text())
    files = [f.removeprefix("items/") for f in marker["files"] if f.startswith("items/")]
    folder = record["items_url"]
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    base = _status("VmRSS")
    started = time.perf_counter()
    if mode == "before":
        table = summarise(rubric_sums(read_back(folder, files, {}), model))
    else:
        table = summarise_spark(model, folder, files, engine)
    seconds = time.perf_counter() - started
    peak = _status("VmHWM") - base
    written = pd.read_parquet(Path(out) / "summary" / "rubrics.parquet")
    diff = np.nanmax(np.abs(table.select_dtypes("number").to_numpy() - written.select_dtypes("number").to_numpy()))
    print(json.dumps({"peak_mb": peak / 2**20, "seconds": seconds, "groups": len(table), "max_diff": float(diff)}))
    sys.stdout.flush()
    session.stop()


def _prepare(rows: int, root: Path, master: str) -> tuple[str, str]:
    import pyarrow as pa

    from judgecal_dist.io.dataset import write_dataset
    from judgecal_dist.models import linear_from_moments, save_model
    from judgecal_dist.scoring.apply import score_dataset

    rng = np.random.default_rng(0)
    human = rng.uniform(1, 10, rows).round(1)
    score = np.clip(np.round(0.7 * human + 2 + rng.normal(0, 1, rows)), 1, 10)
    score[rng.random(rows) < 0.01] = np.nan
    items = np.char.add("i", np.arange(rows).astype(str)).astype(object)
    rubric = np.array(RUBRICS, dtype=object)[rng.integers(0, len(RUBRICS), rows)]
    verdicts = pa.table(
        {
            "dataset": pa.array(["rb"] * rows),
            "item_id": pa.array(items),
            "judge_id": pa.array(["mini"] * rows),
            "score": pa.array(score, from_pandas=True),
            "rubric": pa.array(rubric),
        }
    )
    labels = pa.table({"dataset": ["rb"] * rows, "item_id": items, "label": pa.nulls(rows, pa.string())})
    labels = labels.append_column("label_score", pa.array(human))
    data = str(root / "data")
    write_dataset(data, {"verdicts": verdicts, "labels": labels}, {"adapter": "benchmark"})
    r = len(RUBRICS)
    model = linear_from_moments(
        rubrics=RUBRICS,
        alpha=np.linspace(0.2, 0.6, r),
        beta=np.linspace(0.7, 0.9, r),
        sigma=np.full(r, 0.5),
        cov=np.tile(np.eye(2) * 1e-3, (r, 1, 1)),
        sigma2=np.full(r, 0.25),
        n_anchors=np.full(r, 100),
        canary_prob=None,
        fit="conjugate",
        judge_id="mini",
        input_range=(1, 10),
    )
    model_url = save_model(model, str(root / "model" / "model.json"))
    out = str(root / "out")
    score_dataset(model_url, data, out, engine=engine_config(stats_engine="spark", spark_master=master))
    return model_url, out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "MODEL", "OUT"), help=argparse.SUPPRESS)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), rows=20_000)
    if args.child:
        mode, model_url, out = args.child
        _child(mode, model_url, out, args.master)
        return
    with tempfile.TemporaryDirectory(prefix="corrector-summary-") as tmp:
        started = time.perf_counter()
        model_url, out = _prepare(args.rows, Path(tmp), args.master)
        print(f"{args.rows:,} rows generated and scored on Spark in {time.perf_counter() - started:.0f} s")
        got = {}
        for mode in ("before", "after"):
            cmd = [sys.executable, "-m", "benchmarks.corrector_summary", "--master", args.master]
            proc = subprocess.run([*cmd, "--child", mode, model_url, out], capture_output=True, text=True, cwd=ROOT)
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            if not lines:
                sys.exit(f"{mode}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
            got[mode] = json.loads(lines[-1])
    before, after = got["before"], got["after"]
    print(f"{'summary of ' + format(args.rows, ','):<28}{'driver peak MB':>16}{'seconds':>10}{'groups':>8}")
    print(f"{'rows read back (before)':<28}{before['peak_mb']:>16.1f}{before['seconds']:>10.2f}{before['groups']:>8}")
    print(f"{'Spark aggregation (after)':<28}{after['peak_mb']:>16.1f}{after['seconds']:>10.2f}{after['groups']:>8}")
    print(
        f"driver memory after/before: {after['peak_mb'] / max(before['peak_mb'], 1e-9):.3f}; "
        f"largest difference from the written summary: before {before['max_diff']:.2e}, after {after['max_diff']:.2e}"
    )


if __name__ == "__main__":
    main()
