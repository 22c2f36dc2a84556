"""Dawid-Skene at arena scale: the spark-crowd shape (10M items x 10 judges, binary, 1% labelled), end to end.

Published anchor (spark-crowd, Rodrigo et al., 2019): DS on 10M generated items x 10 labels, 703 s on one node,
426 s on 3 nodes x 10 cores, accuracy 0.994. Target here (issue 15): under 350 s on a 2-core machine, accuracy
at least 0.99, driver peak under 3 GB.

One run prepares, in ``--workdir`` (reused when present):

* ``truth``: a seeded panel from :func:`judgecal_dist.io.synthetic.generate_panel` with every label (the
  ground truth for the accuracy): ``--items`` x ``--judges``, independent judges (``family_corr=0``, none below
  chance) with accuracies uniform in [0.7, 0.95], the generator's unsure rate 0.1, position bias 0.65, 2% missing;
* ``fit``: the same verdict parts (hard links) with a labels table that keeps a seeded ``--labelled`` share of
  the labels (the others null): what the fit sees.

Then, each in a fresh subprocess (so every peak RSS is its own):

1. ``fit``: :func:`judgecal_dist.engine.jobs.dawid_skene.fit_dawid_skene` on ``fit`` (semi-supervised, defaults; the
   engine ``--engine``, ``auto`` by default: Spark at this size), from the Parquet parts to the fitted
   parameters, exported as a ``judgecal.binary-pipeline/v1`` model (Dawid-Skene, no calibrator). Reported: wall time without and with the Spark session's start,
   iterations, passes, seconds per pass, the Python driver's and the JVM's peak RSS (``VmHWM``; in local mode the
   JVM is driver and executors);
2. ``baseline``: one pyarrow + numpy pass over the verdicts: read ``item_id, judge_id, verdict``, scatter the
   dense votes, Dawid-Skene log-odds with the fitted parameters, write one Parquet file of ``item_id, p``; it is
   the denominator of the ``score`` ratio, and its predictions against ``truth`` give the accuracy;
3. ``judgecal score --engine spark`` of the same table with the exported model (or ``--model URL``), cold as
   typed (:func:`benchmarks.harness.cold`), and its ratio to the pass of 2, of wall and of CPU time.

Usage (repository root; heavy: about 2 GB of Parquet in the workdir)::

    python -m benchmarks.ds_arena --workdir /tmp/ds-arena                   # the issue's shape
    python -m benchmarks.ds_arena --items 200000 --workdir /tmp/ds-small    # a quick look
    python -m benchmarks.ds_arena --workdir /tmp/ds-arena --conf spark.driver.memory=2g
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import harness

_tree_cpu_s = harness.tree_cpu_s


def _jvm_peak_mb() -> float:
    """Peak RSS of this process's JVM children (a local Spark: driver and executors)."""
    peaks = [0.0]
    for pid in harness.descendants(os.getpid()):
        try:
            if b"java" in Path(f"/proc/{pid}/cmdline").read_bytes():
                peaks.append(harness.peak_rss_mb(pid))
        except OSError:
            continue
    return max(peaks)


GENERATOR = dict(
    family_corr=0.0, below_chance=0.0, accuracy_range=(0.7, 0.95), validate=False
)  # independent judges, as in spark-crowd's generated data


def prepare(workdir: Path, items: int, judges: int, labelled: float) -> tuple[str, str]:
    """The ``truth`` and ``fit`` datasets (generated once, reused)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from judgecal_dist.io.synthetic import generate_panel

    truth, fit = workdir / f"truth-{items}x{judges}", workdir / f"fit-{items}x{judges}-{labelled}"
    if not (truth / "_SUCCESS").exists():
        generate_panel(
            str(truth), n_items=items, n_judges=judges, seed=0, label_fraction=1.0, overwrite=True, **GENERATOR
        )
    if not (fit / "_SUCCESS").exists():
        for folder in ("verdicts", "judges"):
            (fit / folder).mkdir(parents=True, exist_ok=True)
            for part in (truth / folder).iterdir():
                if not (fit / folder / part.name).exists():
                    os.link(part, fit / folder / part.name)
        labels = pq.read_table(truth / "labels")
        keep = np.random.default_rng(1).random(labels.num_rows) < labelled
        label = pa.array(labels["label"].to_numpy(zero_copy_only=False), pa.string()).to_numpy(zero_copy_only=False)
        masked = pa.array(np.where(keep, label, None), pa.string())
        (fit / "labels").mkdir(exist_ok=True)
        pq.write_table(labels.set_column(2, "label", masked), fit / "labels" / "part-00000.parquet")
        (fit / "_ingest.json").write_text((truth / "_ingest.json").read_text())
        (fit / "_SUCCESS").write_text("")
    return str(truth), str(fit)


def _peak_mb() -> float:
    # VmHWM of this process (ru_maxrss would carry the parent's high-water mark across fork + exec)
    return int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) / 1024


def fit_child(data: str, out: str, engine: str, master: str, conf_json: str) -> dict:
    from judgecal_dist.config import EngineConfig
    from judgecal_dist.engine.jobs.dawid_skene import fit_dawid_skene
    from judgecal_dist.methods.pipeline import Settings
    from judgecal_dist.models import save_model
    from judgecal_dist.models.binary import pipeline_from_estimators

    conf = json.loads(conf_json)
    config = EngineConfig(spark_master=master, spark_conf=conf)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("judgecal_dist.engine.jobs.ds_spark").setLevel(logging.INFO)  # one line per pass, to stderr
    start = time.perf_counter()
    if engine != "local":
        from judgecal_dist.engine.jobs.spark import get_session

        get_session(master, conf=conf).range(10).count()
    started = time.perf_counter() - start
    cpu0, start = _tree_cpu_s(), time.perf_counter()
    fit = fit_dawid_skene(data, engine=engine, config=config)
    fitted = time.perf_counter() - start
    # exported as the model format's binary pipeline (Dawid-Skene, no calibrator), as judgecal fit exports it
    pipeline = pipeline_from_estimators(
        judge_ids=fit.judge_ids,
        aggregator_name="dawid_skene",
        aggregator=fit.model,
        calibrator_name="none",
        calibrator=None,
        settings=Settings(eps=fit.model.eps),
        fitted_on={"items": fit.n_items, "labelled_items": fit.n_labelled},
    )
    save_model(pipeline, out)
    seconds = time.perf_counter() - start
    return {
        "mode": "fit",
        "engine": fit.engine,
        "seconds": seconds,
        "fit_s": fitted,
        "session_start_s": started,
        "cpu_s": _tree_cpu_s() - cpu0,
        "n_iter": fit.n_iter,
        "converged": bool(fit.model.converged_),
        "passes": fit.passes,
        "n_items": fit.n_items,
        "n_labelled": fit.n_labelled,
        "driver_peak_mb": _peak_mb(),
        "jvm_peak_mb": _jvm_peak_mb(),
    }


def baseline_child(data: str, model_url: str, out: str, truth: str) -> dict:
    """One pyarrow + numpy pass from the verdict parts to scored items (timed), then the accuracy (not timed)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    doc = json.loads(Path(model_url).read_text())
    params = {"judge_ids": doc["judge_ids"], "eps": doc["aggregator"]["eps"]}
    params |= {"prior": doc["aggregator"]["class_prior"], "confusion": doc["aggregator"]["confusion"]}
    cpu0, start = _tree_cpu_s(), time.perf_counter()
    # String columns read dictionary-encoded and unified across chunks (one item dictionary): integer codes, no
    # string per row; then the log-odds are summed chunk by chunk, so memory holds the codes and one chunk's work.
    table = pq.read_table(
        f"{data}/verdicts",
        columns=["item_id", "judge_id", "verdict"],
        read_dictionary=["item_id", "judge_id", "verdict"],
    ).unify_dictionaries()
    items = table["item_id"].chunk(0).dictionary
    judge_col = pc.fill_null(pc.index_in(table["judge_id"].chunk(0).dictionary, pa.array(params["judge_ids"])), -1)
    vote_of = pc.fill_null(pc.index_in(table["verdict"].chunk(0).dictionary, pa.array(["B", "A"])), -1)
    col_of = np.append(judge_col.to_numpy(), -1)  # the last entry: a null judge_id or verdict
    vote_of = np.append(vote_of.to_numpy(), -1)
    log_conf = np.log(np.clip(np.array(params["confusion"]), params["eps"], 1 - params["eps"]))  # [j, y, v]
    w = log_conf[:, 1, :] - log_conf[:, 0, :]  # log-odds of a vote v of judge j
    prior = np.clip(params["prior"], params["eps"], 1 - params["eps"])
    t = np.full(len(items), np.log(prior) - np.log1p(-prior))
    for chunk in table.to_batches():
        row = chunk.column(0).indices.to_numpy()
        col = col_of[pc.fill_null(chunk.column(1).indices, -1).to_numpy()]
        vote = vote_of[pc.fill_null(chunk.column(2).indices, -1).to_numpy()]
        keep = (vote >= 0) & (col >= 0)
        t += np.bincount(row[keep], weights=w[col[keep], vote[keep]], minlength=len(t))
    del table
    p = 1.0 / (1.0 + np.exp(-t))
    pq.write_table(pa.table({"item_id": items, "p": p}), out)
    seconds = time.perf_counter() - start
    cpu = _tree_cpu_s() - cpu0
    labels = pq.read_table(f"{truth}/labels", columns=["item_id", "label"])
    where = pc.fill_null(pc.index_in(labels["item_id"], value_set=items), -1).to_numpy()
    scored = where >= 0  # items with a verdict row
    truth_a = labels["label"].to_numpy(zero_copy_only=False)[scored] == "A"
    predicted_a = p[where[scored]] > 0.5
    return {
        "mode": "baseline",
        "seconds": seconds,
        "cpu_s": cpu,
        "accuracy": float((truth_a == predicted_a).mean()),
        "n_scored": len(p),
        "driver_peak_mb": _peak_mb(),
        "jvm_peak_mb": 0.0,
    }


def _run_child(*args: str) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.ds_arena", "--child", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"child {args[0]} failed:\n{proc.stderr[-3000:]}")
    for line in proc.stderr.splitlines():
        if line.startswith("dawid-skene"):
            print("  " + line)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000_000)
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--labelled", type=float, default=0.01)
    parser.add_argument("--engine", default="auto", choices=["auto", "local", "spark"])
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark session setting.")
    parser.add_argument("--workdir", default=None, help="Keep the generated panels here (reused when present).")
    parser.add_argument("--model", default=None, help="Score with this model (default: the fitted one).")
    parser.add_argument("--no-score", action="store_true", help="Leave out the score timing.")
    parser.add_argument("--fitted", default=None, help="Skip the fit: the model.json of an earlier fit.")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    harness.add_smoke(parser)
    # tiny panel, in memory, no Spark score (the smoke test checks the script runs to its figures)
    args = harness.smoke(parser.parse_args(), items=3000, judges=5, engine="local", no_score=True)
    if args.child:
        mode, *rest = args.child
        result = fit_child(*rest) if mode == "fit" else baseline_child(*rest)
        print(json.dumps(result))
        return
    conf = dict(item.split("=", 1) for item in args.conf)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ds-arena-"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    truth, data = prepare(workdir, args.items, args.judges, args.labelled)
    verdicts = args.items * args.judges
    print(
        f"panel {args.items:,} items x {args.judges} judges = {verdicts:,} verdicts ({time.perf_counter() - t0:.0f}s)"
    )
    model = args.fitted or str(workdir / f"ds-model-{time.time_ns()}.json")
    fit = None if args.fitted else _run_child("fit", data, model, args.engine, args.master, json.dumps(conf))
    if fit:
        print(
            f"fit ({fit['engine']}) to an exported model: {fit['seconds']:.1f}s (parameters at {fit['fit_s']:.1f}s; "
            f"+ {fit['session_start_s']:.1f}s session start), cpu "
            f"{fit['cpu_s']:.0f}s, {fit['n_iter']} iterations (converged={fit['converged']}), {fit['passes']} passes, "
            f"{fit['n_items']:,} items, {fit['n_labelled']:,} labelled; driver peak {fit['driver_peak_mb']:.0f} MB, "
            f"jvm peak {fit['jvm_peak_mb']:.0f} MB (targets: under 350 s, driver under 3 GB; spark-crowd 703 s)"
        )
    base = _run_child("baseline", data, model, str(workdir / f"baseline-{time.time_ns()}.parquet"), truth)
    print(
        f"one pyarrow + numpy pass (read, dense votes, DS log-odds, write): {base['seconds']:.1f}s, cpu "
        f"{base['cpu_s']:.0f}s, peak {base['driver_peak_mb']:.0f} MB; accuracy of the fit against the truth: "
        f"{base['accuracy']:.4f} over {base['n_scored']:,} items (target >= 0.99; spark-crowd 0.994)"
    )
    if not args.no_score:  # judgecal score as typed (cold, Spark), on the same table
        out = str(workdir / f"score-{time.time_ns()}")
        argv = ["score", "--model", args.model or model, "--data", data, "--output", out, "--engine", "spark"]
        score = harness.cold(argv, f"judgecal score (spark) of the {verdicts:,} verdicts")
        print(
            f"{score.line()}; ratio to the pyarrow + numpy pass: wall {score.seconds / base['seconds']:.2f}x, "
            f"cpu {score.cpu_s / base['cpu_s']:.2f}x"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
