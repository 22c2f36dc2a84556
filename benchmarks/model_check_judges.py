"""Reading a wide panel model: time to check a ``binary-pipeline/v1`` document of n judges, before and after a
change, side by side (the check of repeated judge ids was quadratic: 10k/30k/60k judges took 3.4/14/51 s).

Each size is timed in a child process on each source tree (``--before`` a checkout of the older code, e.g.
``git worktree add /tmp/before <commit>``; the current tree is the "after"): ``model_from_dict`` of a one-coin
document whose last judge repeats the first (refused, as a hand-edited file would be) and of the same document
without the repeat (accepted). Usage (from the repository root)::

    python -m benchmarks.model_check_judges --before /tmp/before --judges 10000 30000 60000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import add_smoke, smoke

ROOT = Path(__file__).resolve().parents[1]


def document(n: int, *, repeat: bool) -> dict:
    judges = [f"judge-{i:06d}" for i in range(n)]
    if repeat:
        judges[-1] = judges[0]
    return {
        "format": "judgecal.binary-pipeline/v1",
        "judge_ids": judges,
        "aggregator": {"name": "one_coin", "weights": [0.5] * n, "class_prior": 0.5},
        "calibrator": {"name": "none"},
        "eps": 1e-6,
        "conformal": [],
    }


def child(n: int) -> dict:
    from judgecal_dist.errors import InputError
    from judgecal_dist.models import model_from_dict

    out = {}
    for repeat in (True, False):
        doc = document(n, repeat=repeat)
        start = time.perf_counter()
        try:
            model_from_dict(doc, source="model.json")
            outcome = "loaded"
        except InputError:
            outcome = "refused"
        out["refused" if repeat else "accepted"] = {"s": time.perf_counter() - start, "outcome": outcome}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=None, help="A checkout of the code to compare against (required).")
    parser.add_argument("--judges", type=int, nargs="+", default=[10_000, 30_000, 60_000])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    add_smoke(parser)
    args = smoke(parser.parse_args(argv), judges=[50])
    if args.before is None and not args.smoke:
        parser.error("--before is required")
    args.before = args.before or str(ROOT)  # smoke: this tree on both sides
    if args.child:
        print(json.dumps(child(args.child)))
        return
    print(f"{'judges':>7} {'case':>9} {'before s':>9} {'after s':>9} {'ratio':>7}")
    for n in args.judges:
        runs = {}
        for name, tree in (("before", Path(args.before).resolve()), ("after", ROOT)):
            # The script by path and the tree as the working folder: the child imports that tree's package.
            cmd = [sys.executable, str(Path(__file__).resolve()), "--before", ".", "--child", str(n)]
            env = os.environ | {"PYTHONPATH": str(tree)}
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tree, env=env)
            runs[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        for case in ("refused", "accepted"):
            b, a = runs["before"][case], runs["after"][case]
            print(f"{n:>7} {case:>9} {b['s']:>9.3f} {a['s']:>9.3f} {b['s'] / a['s']:>7.1f}  ({a['outcome']})")


if __name__ == "__main__":
    main()
