"""Shared by the inclusion tests that check one part of a run against a reference computed on the same split."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.splits import calibration_mask
from judgecal_dist.studies.inclusion import study as inclusion


@pytest.fixture(scope="session")
def nine_judges(tmp_path_factory) -> Callable[[int, int], str]:
    """``nine_judges(n_items, seed)``: the URL of a generated 9-judge panel, written once per session."""
    from judgecal_dist.io.synthetic import generate_panel

    made: dict[tuple[int, int], str] = {}

    def panel(n_items: int, seed: int) -> str:
        if (n_items, seed) not in made:
            url = str(tmp_path_factory.mktemp("synthetic") / "panel")
            generate_panel(url, n_items=n_items, n_judges=9, seed=seed)
            made[n_items, seed] = url
        return made[n_items, seed]

    return panel


@pytest.fixture(scope="session")
def small_panel(nine_judges) -> str:
    """600 items (seed 5): small enough to run two splits of a study in seconds."""
    return nine_judges(600, 5)


@pytest.fixture(scope="session")
def run_splits(small_panel) -> Callable[..., tuple[Any, Any, pd.DataFrame]]:
    """``run_splits(**settings)``: (config, data, rows of every replicate) of two splits of ``small_panel``, run in
    this process (no runner, nothing written)."""

    def run(**settings: Any) -> tuple[Any, Any, pd.DataFrame]:
        cfg = inclusion.Config(data=small_panel, replicates=2, **settings)
        data = inclusion.load(cfg, EngineConfig(ray_num_cpus=1))
        parts = pd.concat([inclusion.run_replicate(data, rep) for rep in inclusion.plan(cfg, data)])
        return cfg, data, parts

    return run


@pytest.fixture(scope="session")
def halves() -> Callable[..., tuple[np.ndarray, ...]]:
    """``halves(data, cfg, seed)``: the calibration half's votes, labels and group keys, then the evaluation
    half's votes and labels, of split ``seed`` (the study's own keyed split)."""

    def split(data: Any, cfg: Any, seed: int) -> tuple[np.ndarray, ...]:
        panel = data.panel
        in_cal = calibration_mask(panel.group_keys, [seed], cfg.calib_fraction)[0]
        return (
            panel.votes[in_cal],
            panel.labels[in_cal],
            panel.group_keys[in_cal],
            panel.votes[~in_cal],
            panel.labels[~in_cal],
        )

    return split
