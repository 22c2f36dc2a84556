"""``judgecal score`` imports what the pass needs: a fresh interpreter that scores a table in memory with a
binary pipeline never imports sklearn or ``scipy.stats`` (the fitted numbers are applied with numpy), and imports
matplotlib only to draw the figure, after every number is written. A guard: it fails when an import of either
comes back onto the scoring path (each costs about a second of a cold command)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.scoring.support import WEIGHTS, model_json, write_arena

_HEAVY = ("sklearn", "scipy.stats", "matplotlib")

_CHILD = """
import json, os, sys
from judgecal_dist.config import EngineConfig
from judgecal_dist.scoring import summary
from judgecal_dist.scoring.apply import score_dataset

model, data, out = sys.argv[1:4]
heavy = {heavy!r}
seen = {{}}
draw = summary.pyplot

def traced():  # what the process had imported, and written, when the figure is drawn
    seen["at_figure"] = sorted(m for m in heavy if m in sys.modules)
    seen["summary_written"] = os.path.exists(os.path.join(out, "summary.json"))
    return draw()

summary.pyplot = traced
score_dataset(model, data, out, engine=EngineConfig(stats_engine="local"))
seen["at_end"] = sorted(m for m in heavy if m in sys.modules)
print(json.dumps(seen))
"""


def _pipeline_document() -> dict:
    """The support table's one-coin + beta model as a ``judgecal.binary-pipeline/v1`` document."""
    legacy = model_json()
    return {
        "format": "judgecal.binary-pipeline/v1",
        "name": "one_coin + beta @ all",
        "panel": "all",
        "judge_ids": list(WEIGHTS),
        "ignored_judges": [],
        "aggregator": {"name": "one_coin", "weights": list(WEIGHTS.values()), "class_prior": 0.5},
        "calibrator": {"name": "beta", "a": 1.0, "b": 1.0, "c": 0.0},
        "calibrator_input": "probability",
        "eps": legacy["eps"],
        "conformal": legacy["conformal"],
        "vote_codes": legacy["vote_codes"],
        "fitted_on": {},
    }


def test_scoring_imports_neither_sklearn_nor_scipy_stats_and_draws_last(tmp_path: Path) -> None:
    data = write_arena(str(tmp_path / "arena"))
    model = tmp_path / "model.json"
    model.write_text(json.dumps(_pipeline_document()))
    out = tmp_path / "out"
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD.format(heavy=_HEAVY), str(model), data, str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["at_figure"] == [], f"imported before the figure: {seen['at_figure']}"
    assert seen["summary_written"], "the figure was drawn before summary.json was written"
    assert seen["at_end"] == ["matplotlib"], f"scoring imported {seen['at_end']}"
    assert (out / "figures" / "win_rates.png").stat().st_size > 0 and (out / "_SUCCESS").exists()
