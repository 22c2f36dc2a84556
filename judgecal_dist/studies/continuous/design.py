"""How the continuous study draws its test items and anchors and seeds its fits, for one arm and seed.

Shared by the study's replicates (:mod:`.study`) and the exported corrector (:mod:`.export`), which refits on the
very anchors of the study's first seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.splits import group_keys, split_uniforms
from judgecal_dist.studies.continuous.config import Config, ContinuousInput
from judgecal_dist.studies.continuous.data import arm_scores

__all__ = ["RUBRIC_STRIDE", "arm_data", "split", "draw_anchors", "flow_settings"]

#: Seed offset of the per-rubric flows' members (member seed = seed * stride + rubric index).
RUBRIC_STRIDE = 64


def split(arm_scores: pd.DataFrame, seed: int, test_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the test items and of the anchor pool in budget order, per rubric, for ``seed``."""
    groups = arm_scores["group_id"].to_numpy()
    unique = np.unique(groups)
    u = pd.Series(split_uniforms(group_keys(unique.tolist()), [seed])[0], index=unique)
    frame = pd.DataFrame(
        {"rubric": arm_scores["rubric"].to_numpy(), "u": u.loc[groups].to_numpy(), "row": np.arange(len(groups))}
    )
    frame["item"] = arm_scores["item_id"].to_numpy()
    frame = frame.sort_values(["rubric", "u", "item"], kind="stable")
    rank = frame.groupby("rubric")["u"].rank(method="dense")
    is_test = (rank <= test_groups).to_numpy()
    return frame["row"].to_numpy()[is_test], frame["row"].to_numpy()[~is_test]


def arm_data(data: ContinuousInput, arm: str, seed: int) -> pd.DataFrame:
    """The paired rows of ``arm`` for ``seed`` (the synthetic judge drawn for that seed)."""
    return arm_scores(data.scores, arm, seed)


def draw_anchors(rows: pd.DataFrame, pool: np.ndarray, budget: int) -> pd.DataFrame:
    pooled = rows.iloc[pool]
    return pooled.groupby("rubric", sort=False, group_keys=False).head(budget)  # first n of each rubric's pool order


def flow_settings(config: Config) -> dict[str, Any]:
    """The flow's training and solver settings from the study config (what every stacked fit receives)."""
    return {
        "epochs": config.flow_epochs,
        "lr": config.flow_lr,
        "embed_dim": config.flow_embed_dim,
        "hidden": config.flow_hidden,
        "tol": config.flow_tol or None,
        "window": config.flow_window,
        "mask_policy": config.flow_mask_policy,
        "solver": config.flow_solver,
    }
