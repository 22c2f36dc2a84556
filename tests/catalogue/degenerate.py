"""Catalogue cases: degenerate data that passes the format checks (decided before the first write) and seeds beyond
64 bits."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from judgecal_dist.cli import cli
from tests.scoring.support import model_json, write_run

ROOT = Path(__file__).resolve().parents[2]
CFG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority]", "calibrators=[none, platt]", "panels=[all]", "permutation_resamples=100"]
JUDGES = ("judge-000", "judge-001", "judge-002")


def _panel(tmp: Path, table: str = "", column: str = "", values: Callable[[int], list] | None = None) -> str:
    """A generated panel (40 items, 3 judges), with ``table.column`` rewritten to ``values(n_rows)`` if given."""
    dest = tmp / "D"
    shutil.rmtree(dest, ignore_errors=True)
    assert (
        CliRunner().invoke(cli, ["generate", "--items", "40", "--judges", "3", "--seed", "1", str(dest)]).exit_code == 0
    )
    if values is not None:
        path = dest / table / "part-00000.parquet"
        data = pq.read_table(path)
        field = data.schema.field(column)
        column_values = pa.array(values(data.num_rows), field.type)
        pq.write_table(data.set_column(data.schema.get_field_index(column), field, column_values), path)
    return str(dest)


def _run(tmp: Path, data: str, *settings: str) -> list[str]:
    sets = [arg for item in [f"data={data}", "replicates=2", *TINY, *settings] for arg in ("--set", item)]
    return ["run", CFG, *sets, "--output", str(tmp / "out"), "--serial"]


def _score_no_verdict(tmp: Path) -> list[str]:
    model = write_run(tmp / "run", model_json(dict.fromkeys(JUDGES, 1.0)))
    data = _panel(tmp, "verdicts", "verdict", lambda n: ["tie"] * n)
    return ["score", "--model", model, "--data", data, "--output", str(tmp / "out"), "--engine", "local"]


CASES: dict[str, Callable[[Path], list[str]]] = {
    "run-panel-no-verdict": lambda t: _run(t, _panel(t, "verdicts", "verdict", lambda n: [None] * n)),
    "run-panel-constant": lambda t: _run(t, _panel(t, "verdicts", "verdict", lambda n: ["B"] * n)),
    "run-too-few-labels": lambda t: _run(t, _panel(t, "labels", "label", lambda n: ["A", "B", "B"] + [None] * (n - 3))),
    "run-split-without-a-class": lambda t: _run(t, _panel(t), "calib_fraction=0.03"),
    "run-seed-beyond-int64": lambda t: _run(t, _panel(t), f"seed={2**64}"),
    "fit-fold-without-a-class": lambda t: [
        "fit",
        "--data",
        _panel(t, "labels", "label", lambda n: ["A", "B", "B", "B", "B", "B"] + [None] * (n - 6)),
        "--set",
        "folds=2",
        "--output",
        str(t / "out"),
        "--serial",
    ],
    "score-no-verdict": _score_no_verdict,
    "generate-seed-beyond-int64": lambda t: ["generate", "--items", "10", "--seed", str(2**64), str(t / "g")],
}
