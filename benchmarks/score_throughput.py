"""``judgecal score`` as users run it: the typed command at 10M verdicts, cold and warm, beside one pyarrow + numpy
pass over the same Parquet files (issue 31: at most 1.5x the pass, whole process).

One run generates a seeded panel (``--items`` x ``--judges``, 1% labelled, :func:`judgecal_dist.io.synthetic.
generate_panel`; default 200k x 50 = 10M verdicts), fits the inclusion study's default pipeline (one-coin + beta)
on the labelled items and saves it as a run's ``model/model.json`` (``--run`` reuses a fitted run), then times,
side by side (:mod:`benchmarks.harness`, the load beside every row):

1. ``judgecal score`` (auto engine: in memory at this size) cold: a fresh process, as a user types it;
2. the same command warm: in one process after an untimed run (imports and caches up);
3. the reference pass as a whole process (``python -m benchmarks.score_throughput --pass ...``): read ``item_id,
   judge_id, verdict`` with pyarrow, code the votes (dictionary indices), one-coin log-odds + beta + conformal
   sets with numpy, one Parquet file of item rows;
4. the reference pass in this process (warm: after one untimed pass);
5. with ``--spark``: ``judgecal score --engine spark`` cold.

and prints the ratios cold / pass (whole process) and warm / pass (in process). Usage (repository root)::

    python -m benchmarks.score_throughput                  # 200k items x 50 judges (10M verdicts)
    python -m benchmarks.score_throughput --smoke          # seconds (CI)
    python -m benchmarks.score_throughput --items 2000000 --spark --workdir /tmp/score-bench   # 100M, Spark too
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import harness

#: The issue's target: ``judgecal score`` at most this many times the reference pass (whole process).
TARGET_RATIO = 1.5


def prepare(workdir: Path, items: int, judges: int, run_url: str | None = None) -> tuple[str, str, int]:
    from judgecal_dist.engine.jobs.panel import load_panel
    from judgecal_dist.io.synthetic import generate_panel
    from judgecal_dist.studies.inclusion.model import DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR, export_model
    from judgecal_dist.studies.inclusion.study import Config

    data = str(workdir / f"panel-{items}x{judges}")
    if not Path(data, "_SUCCESS").exists():
        generate_panel(data, n_items=items, n_judges=judges, seed=0, label_fraction=0.01, overwrite=True)
    if run_url:  # a model fitted on a smaller panel of the same generator (same judges): no 100M-row fit
        return data, run_url, items * judges
    run = workdir / f"run-{items}x{judges}"
    if (run / "_SUCCESS").exists():
        return data, str(run), items * judges
    (run / "model").mkdir(parents=True, exist_ok=True)
    panel = load_panel(data)  # the labelled 1%
    model = export_model(Config(data=data), panel, (DEFAULT_AGGREGATOR, DEFAULT_CALIBRATOR, "all"))
    (run / "model" / "model.json").write_text(json.dumps(model.document))  # the study's own export
    (run / "_SUCCESS").write_text("")
    return data, str(run), items * judges


def baseline(model_url: str, data: str, out: str) -> None:
    """The single-process pass: pyarrow read, numpy scatter and model, one Parquet write."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from scipy.special import expit, log_expit, logit

    model = json.loads(Path(model_url, "model", "model.json").read_text())
    agg, cal = model["aggregator"], model["calibrator"]
    table = pq.read_table(f"{data}/verdicts", columns=["item_id", "judge_id", "verdict"])
    items = pc.dictionary_encode(table["item_id"].combine_chunks())
    row = items.indices.to_numpy()
    col = pc.index_in(table["judge_id"], value_set=pa.array(model["judge_ids"])).to_numpy(zero_copy_only=False)
    vote = pc.fill_null(pc.index_in(table["verdict"], value_set=pa.array(["B", "A"])), -1).to_numpy()
    z = np.zeros((len(items.dictionary), len(model["judge_ids"])))
    keep = vote >= 0
    z[row[keep], col[keep].astype(np.int64)] = 2.0 * vote[keep] - 1.0
    t = logit(agg["class_prior"]) + z @ np.array(agg["weights"])
    if model.get("calibrator_input") == "logit":
        log_s, log_1ms = log_expit(t), log_expit(-t)
    else:
        s = np.clip(expit(t), model["eps"], 1 - model["eps"])
        log_s, log_1ms = np.log(s), np.log1p(-s)
    p = expit(cal["a"] * log_s - cal["b"] * log_1ms + cal["c"])
    columns = {"item_id": items.dictionary, "p": p, "verdict": np.where(p > 0.5, "A", "B")}
    for c in model["conformal"]:
        q = np.inf if c["threshold"] is None else c["threshold"]
        columns[f"a_{c['alpha']}"] = (1 - p <= q).astype(np.int8) * 2 + (p <= q)  # bit 1: A in the set, bit 0: B
    pq.write_table(pa.table(columns), out)


def _pass_whole_process(model_url: str, data: str, out: str) -> harness.Timing:
    """The reference pass as a fresh process (its imports included), timed with its CPU time."""
    argv = [sys.executable, "-m", "benchmarks.score_throughput", "--pass", model_url, data, out]
    _, timing = harness.in_process(
        "pyarrow + numpy pass", lambda: subprocess.run(argv, check=True, cwd=harness.ROOT), mode="cold"
    )
    return timing


def run(workdir: Path, items: int, judges: int, run_url: str | None, spark: bool) -> None:
    data, run_dir, verdicts = prepare(workdir, items, judges, run_url)
    print(f"panel {items:,} items x {judges} judges = {verdicts:,} verdicts")
    out = str(workdir / "out")
    score = ["score", "--model", run_dir, "--data", data, "--output", f"{out}/score-{{n}}", "--overwrite"]
    rows = [harness.cold(score, "judgecal score", n=0)]
    rows += harness.warm(score, "judgecal score", warmups=1, repeats=1)
    reference = _pass_whole_process(run_dir, data, f"{out}/pass-cold.parquet")
    baseline(run_dir, data, f"{out}/pass-warmup.parquet")  # the in-process pass warm, as the command's warm run
    _, warm_pass = harness.in_process("pyarrow + numpy pass", lambda: baseline(run_dir, data, f"{out}/pass.parquet"))
    rows += [reference, warm_pass]
    if spark:
        spark_args = [*score[:-2], f"{out}/spark-{{n}}", "--engine", "spark"]
        rows.append(harness.cold(spark_args, "judgecal score --engine spark", n=0))
    harness.table(rows, reference=reference)
    cold, warm = rows[0], rows[1]
    print(
        f"ratio judgecal score / pass: cold {cold.seconds / reference.seconds:.2f}x (whole processes), "
        f"warm {warm.seconds / warm_pass.seconds:.2f}x (in process); target <= {TARGET_RATIO}x cold"
    )
    print(f"verdicts/s: cold {verdicts / cold.seconds / 1e6:.2f}M, pass {verdicts / reference.seconds / 1e6:.2f}M")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--judges", type=int, default=50)
    parser.add_argument("--spark", action="store_true", help="Also time judgecal score --engine spark (cold).")
    parser.add_argument("--run", default=None, help="Score with this run's model instead of fitting one.")
    parser.add_argument("--workdir", default=None, help="Keep the generated panel here (reused when present).")
    parser.add_argument("--pass", dest="reference", nargs=3, metavar=("MODEL", "DATA", "OUT"), help=argparse.SUPPRESS)
    harness.add_smoke(parser)
    args = parser.parse_args()
    if args.reference:
        baseline(*args.reference)
        return
    items, judges = (2000, 10) if args.smoke else (args.items, args.judges)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="score-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    run(workdir, items, judges, args.run, args.spark)
    print(harness.load_line())


if __name__ == "__main__":
    main()
