"""``judgecal fit`` (Dawid-Skene only) at arena scale, timed as the typed command, beside one DS fit and numpy.

Issue 31's figure: the command a user types, ``judgecal fit --data PANEL --output OUT`` with Dawid-Skene the only
aggregator, no calibrator and one panel (``--set aggregators=[dawid_skene] --set calibrators=[none] --set
panels=[all]``), as a whole process (imports, Spark when the table is above the in-memory budget, the folds, the
export, the run history), on a generated Parquet panel of ``--items`` x ``--judges`` with ``--labelled`` of the
labels kept (the panels of :func:`benchmarks.ds_arena.prepare`). Side by side in one run, for each size:

1. ``judgecal fit`` cold (:func:`benchmarks.harness.cold`): wall, CPU, peak RSS of the largest process and of
   the process tree, load before and after;
2. one Dawid-Skene fit as :mod:`benchmarks.ds_arena` times it (its fit child, a fresh process; Spark session start
   excluded, the engine ``auto`` picks);
3. a naive numpy reference (in this process): read the verdict rows and the labels, code them, and run 20 EM
   iterations over the raw rows (``bincount`` per judge and verdict; no items x judges matrix, no cells).

Then the ratios (fit / one DS fit, fit / numpy), and the accuracy of the exported model's posteriors against the
full truth (:func:`benchmarks.ds_arena.baseline_child`, every item scored). The Spark settings are the CLI's
(:func:`benchmarks.harness.engine_config`). Usage (repository root; heavy: about 2 GB of Parquet at 10M)::

    python -m benchmarks.fit_command --workdir /tmp/fit-command                      # 2M and 10M x 10
    python -m benchmarks.fit_command --sizes 2000000 --workdir /tmp/fit-command      # one size
    python -m benchmarks.fit_command --smoke                                         # seconds (CI)
"""

from __future__ import annotations

import argparse
import glob
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.ds_arena import _run_child, prepare

DS_ONLY = ["aggregators=[dawid_skene]", "calibrators=[none]", "panels=[all]"]
NAIVE_ITERATIONS = 20


def naive_em(data: str, n_iter: int = NAIVE_ITERATIONS) -> float:
    """Read and code the votes, then ``n_iter`` semi-supervised EM iterations over the raw verdict rows; the
    prior (so the work cannot be skipped)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    columns = ["item_id", "judge_id", "verdict"]
    table = pq.read_table(f"{data}/verdicts", columns=columns, read_dictionary=columns).unify_dictionaries()
    item, judge, verdict = (table[c].combine_chunks() for c in columns)  # dictionary codes, one dictionary each
    items = item.dictionary
    vote_of = np.append(pc.fill_null(pc.index_in(verdict.dictionary, pa.array(["B", "A"])), -1).to_numpy(), -1)
    vote = vote_of[pc.fill_null(verdict.indices, len(verdict.dictionary)).to_numpy()]  # a null verdict: -1
    keep = vote >= 0  # A/B verdicts; ties and nulls carry nothing
    item, judge, vote = item.indices.to_numpy()[keep], judge.indices.to_numpy()[keep], vote[keep]
    labels = pq.read_table(f"{data}/labels", columns=["item_id", "label"])
    known = labels.filter(pc.is_in(labels["label"], value_set=pa.array(["A", "B"])))
    where = pc.fill_null(pc.index_in(known["item_id"], value_set=items), -1).to_numpy()
    label = (known["label"].to_numpy(zero_copy_only=False) == "A").astype(float)[where >= 0]
    where = where[where >= 0]
    n, J = len(items), int(judge.max()) + 1
    cell = judge * 2 + vote  # (judge, verdict) of each row
    T1 = np.bincount(item, weights=vote, minlength=n) / np.maximum(np.bincount(item, minlength=n), 1)
    T1[where] = label
    prior = 0.5
    for _ in range(n_iter):
        prior = T1.mean()  # M-step: prior and per (judge, verdict) sums of T over the rows
        a = np.bincount(cell, weights=T1[item], minlength=2 * J).reshape(J, 2) + 0.01
        b = np.bincount(cell, weights=1 - T1[item], minlength=2 * J).reshape(J, 2) + 0.01
        log_a, log_b = np.log(a / a.sum(1, keepdims=True)), np.log(b / b.sum(1, keepdims=True))
        d = np.log(prior / (1 - prior)) + np.bincount(item, weights=(log_a - log_b).ravel()[cell], minlength=n)
        T1 = 1 / (1 + np.exp(-d))  # E-step
        T1[where] = label
    return float(prior)


def one_size(items: int, judges: int, labelled: float, workdir: Path, config: object) -> None:
    """Prepare the panel of one size and print its three rows, the ratios and the accuracy."""
    t0 = time.perf_counter()
    truth, data = prepare(workdir, items, judges, labelled)
    print(
        f"\n== {items:,} items x {judges} judges, {labelled:.0%} labelled (panel ready in {time.perf_counter() - t0:.0f} s)"
    )
    out = workdir / f"fit-out-{time.time_ns()}"
    sets = [a for s in DS_ONLY for a in ("--set", s)]
    fit = harness.cold(["fit", "--data", data, "--output", str(out), *sets], f"judgecal fit {items:,}x{judges}")
    master, conf = config.spark_master, json.dumps(dict(config.spark_conf))  # type: ignore[attr-defined]
    ds = _run_child("fit", data, str(workdir / f"ds-model-{time.time_ns()}.json"), "auto", master, conf)
    ds_row = harness.Timing(
        f"one DS fit ({ds['engine']}, ds_arena)",
        "in child",
        ds["seconds"],
        ds["cpu_s"],
        ds["driver_peak_mb"],
        ds["driver_peak_mb"] + ds["jvm_peak_mb"],
        fit.load_after,
        harness.load(),
    )
    _, naive = harness.in_process(f"naive numpy ({NAIVE_ITERATIONS} EM iterations on rows)", lambda: naive_em(data))
    harness.table([fit, ds_row, naive], reference=fit)
    print(
        f"ratios: judgecal fit / one DS fit {fit.seconds / ds_row.seconds:.2f}x (target <= 1.5x), "
        f"/ naive numpy {fit.seconds / naive.seconds:.2f}x (target <= 3x); DS fit: {ds['n_iter']} iterations, "
        f"session start {ds['session_start_s']:.1f} s not counted"
    )
    model = glob.glob(f"{out}/fit/*/model/model.json")
    base = _run_child("baseline", data, model[0], str(workdir / f"scored-{time.time_ns()}.parquet"), truth)
    print(f"accuracy of the exported model against the truth: {base['accuracy']:.4f} over {base['n_scored']:,} items")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000000,10000000", help="Items per panel, comma-separated.")
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--labelled", type=float, default=0.01)
    parser.add_argument("--workdir", default=None, help="Keep the generated panels here (reused when present).")
    harness.add_smoke(parser)
    args = parser.parse_args()
    sizes = [3000] if args.smoke else [int(s) for s in args.sizes.split(",")]
    labelled = 0.1 if args.smoke else args.labelled
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fit-command-"))
    workdir.mkdir(parents=True, exist_ok=True)
    config = harness.engine_config()
    for items in sizes:
        one_size(items, args.judges, labelled, workdir, config)
    print(harness.load_line())


if __name__ == "__main__":
    main()
