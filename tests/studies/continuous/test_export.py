"""The continuous study's export choice: the recommended corrector for its best real judge, never raw or synthetic."""

from __future__ import annotations

import pandas as pd

from judgecal_dist.studies.continuous.config import Config
from judgecal_dist.studies.continuous.export import exported_choice


def _table(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"judge": j, "corrector": c, "budget": b, "mae": m, "rubric": r} for j, c, b, m in rows for r in ("x", "y")]
    )


def test_auto_exports_the_best_model_at_the_largest_budget() -> None:
    table = _table(
        [
            ("mini", "raw", 50, 0.10),  # raw is no model
            ("mini", "flow", 50, 0.30),
            ("nano", "flow", 50, 0.34),
            ("mini", "ot", 50, 0.35),
            ("nano", "ot", 50, 0.33),
            ("mini", "linear_hb", 50, 0.31),
            ("nano", "linear_hb", 50, 0.36),
            ("synthetic", "ot", 50, 0.01),  # the synthetic arm is drawn data, never exported
            ("mini", "ot", 10, 0.05),  # a smaller budget does not count
        ]
    )
    config = Config(data="x", judges=("nano", "mini"))
    assert exported_choice(config, table) == ("flow", "mini")  # flow 0.32 < linear 0.335 < ot 0.34
    assert exported_choice(Config(data="x", judges=("nano", "mini"), export="ot@nano"), table) == ("ot", "nano")
