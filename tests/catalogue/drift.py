"""Catalogue cases: judgecal drift (thresholds, baselines, run ids, history), --then drift, run --mlflow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from judgecal_dist.history.judges import with_rates
from judgecal_dist.history.store import record_run

ROOT = Path(__file__).resolve().parents[2]
CFG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")


def _history(tmp: Path, *, studies: tuple[str, ...] = ("inclusion",), status: str = "succeeded") -> str:
    """A history with two runs (night-1, night-2) per study, recorded as the runner records them."""
    out = str(tmp / "out")
    counts = pd.DataFrame({"judge_id": ["j1", "j2"], "panel_items": 10})
    for column in ("rows", "parsed", "votes", "labelled_votes", "consensus_votes", "items"):
        counts[column] = 10
    for column in ("n_A", "correct", "agree"):
        counts[column] = 6
    for study in studies:
        for night in (1, 2):
            stamp = f"2026-11-0{night}T02:30:00+00:00"
            manifest = {"study": study, "run_id": f"night-{night}", "status": status, "started": stamp, "ended": stamp}
            record_run(out, manifest, judges=with_rates(counts))
    return out


def _drift(tmp: Path, *extra: str, output: str | None = None) -> list[str]:
    return ["drift", "--output", output or _history(tmp), "--report", str(tmp / "report"), *extra]


def _conf(tmp: Path, text: str) -> str:
    path = tmp / "drift.yaml"
    path.write_text(text)
    return str(path)


def _other_comparison(tmp: Path) -> list[str]:
    from click.testing import CliRunner

    from judgecal_dist.cli import cli

    assert CliRunner().invoke(cli, _drift(tmp)).exit_code in (0, 3)  # a report, then another alpha into it
    return _drift(tmp, "--alpha", "0.01", output=str(tmp / "out"))


CASES: dict[str, Callable[[Path], list[str]]] = {
    "drift-report-other-comparison": _other_comparison,
    "drift-report-inside-history": lambda t: [*_drift(t)[:4], str(t / "out" / "history" / "report")],
    "drift-no-history": lambda t: _drift(t, output=str(t / "empty")),
    "drift-no-succeeded-run": lambda t: _drift(t, output=_history(t, status="failed")),
    "drift-several-studies": lambda t: _drift(t, output=_history(t, studies=("inclusion", "budget"))),
    "drift-unknown-study": lambda t: _drift(t, "--study", "budget"),
    "drift-unknown-current": lambda t: _drift(t, "--current", "nope"),
    "drift-unknown-baseline-run": lambda t: _drift(t, "--baseline", "nope"),
    "drift-bad-baseline": lambda t: _drift(t, "--baseline", "window:x"),
    "drift-window-zero": lambda t: _drift(t, "--baseline", "window:0"),
    "drift-bad-alpha": lambda t: _drift(t, "--alpha", "0"),
    "drift-bad-min-change": lambda t: _drift(t, "--min-change", "1.5"),
    "drift-conf-unknown-key": lambda t: _drift(t, "--drift-conf", _conf(t, "alpah: 0.01\n")),
    "drift-conf-wrong-type": lambda t: _drift(t, "--drift-conf", _conf(t, "alpha: often\n")),
    "drift-conf-out-of-range": lambda t: _drift(t, "--drift-conf", _conf(t, "ci_level: 1.5\n")),
    "drift-conf-unknown-measure": lambda t: _drift(t, "--drift-conf", _conf(t, "measures: [accuracy, speed]\n")),
    "drift-conf-bad-baseline": lambda t: _drift(t, "--drift-conf", _conf(t, "baseline: window:-2\n")),
    "run-then-drift-bad-conf": lambda t: [
        "run",
        CFG,
        "--set",
        "data=x",
        "--then",
        "drift",
        "--drift-conf",
        _conf(t, "min_change: 2\n"),
    ],
    "submit-then-drift-bad-conf": lambda t: [
        "submit",
        CFG,
        "--set",
        "data=x",
        "--ray-address",
        "http://127.0.0.1:9",
        "--run-id",
        "n",
        "--then",
        "drift",
        "--drift-conf",
        _conf(t, "method: bonferroni\n"),
    ],
    "run-mlflow-bad-uri": lambda t: ["run", CFG, "--set", "data=x", "--mlflow", "nope://tracking"],
    "fit-mlflow-register-without-store": lambda t: ["fit", "--data", "x", "--mlflow-register", "weekly-panel"],
}
