"""Coverage of every prediction-powered interval at 0.95 nominal, uniform and active labels (the reduced Monte Carlo
of benchmarks/label_coverage.py: 200 repetitions here, 1,000 there)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.labels.label_simulation import NOMINAL, coverage_draws, coverage_table

REPETITIONS = 200


@pytest.fixture(scope="module")
def table():
    return coverage_table(coverage_draws(REPETITIONS, seed=1))


def test_every_kind_covers_at_nominal(table):
    """Every (design, method, target kind) and every single target covers within 3 binomial sd of 0.95 (one target
    at 200 repetitions: sd 0.015, so a variance too small by a quarter, coverage ~0.90, fails)."""
    sd = np.sqrt(NOMINAL * (1 - NOMINAL) / REPETITIONS)
    assert set(table["design"]) == {"uniform", "active"}
    assert set(table["kind"]) == {"judge_accuracy", "panel_accuracy", "win_rate", "win_rate:group"}
    low = table[table["min_target_coverage"] < NOMINAL - 3 * sd]
    assert low.empty, low.to_string()


def test_the_panel_narrows_the_interval(table):
    """PPI++ with the calibrated panel is narrower than the classical interval of the same labels, for every kind."""
    width = table.set_index(["design", "kind", "method"])["width"].unstack("method")
    assert (width["ppi++"] < width["classical"]).all(), width.to_string()
