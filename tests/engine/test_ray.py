"""Replicate fan-out on a real local Ray: every replicate committed once, finish order, failures named."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.engine.cluster.ray import ReplicateFailed, default_chunk_size, fan_out, run_serial

pytestmark = pytest.mark.ray


@dataclass(frozen=True)
class Rep:
    seed: int
    fail: bool = False


def replicate_mean(data: np.ndarray, rep: Rep) -> pd.DataFrame:
    if rep.fail:
        raise ZeroDivisionError("boom")
    rng = np.random.default_rng(rep.seed)
    return pd.DataFrame({"seed": [rep.seed], "value": [float(data[rng.integers(0, len(data), 50)].mean())]})


def test_fan_out_equals_serial(ray_local):
    data = np.arange(1000, dtype=float)
    reps = [Rep(s) for s in range(37)]
    got: dict[int, pd.DataFrame] = {}
    expected: dict[int, pd.DataFrame] = {}
    assert fan_out(replicate_mean, data, reps, lambda s, t: got.__setitem__(s, t), chunk_size=4) == 37
    run_serial(replicate_mean, data, reps, lambda s, t: expected.__setitem__(s, t))
    assert sorted(got) == list(range(37))
    for seed in expected:
        pd.testing.assert_frame_equal(got[seed], expected[seed])


def test_failure_names_the_seed_and_keeps_finished(ray_local):
    committed: list[int] = []
    reps = [Rep(s) for s in range(6)] + [Rep(99, fail=True)]
    with pytest.raises(ReplicateFailed, match=r"seed=99 .*ZeroDivisionError: boom"):
        fan_out(replicate_mean, np.ones(10), reps, lambda s, t: committed.append(s), chunk_size=1, max_in_flight=1)
    assert committed == list(range(6))  # everything before the failure stayed committed


def test_chunk_size_rule():
    assert default_chunk_size(1000, 2) == 63
    assert default_chunk_size(3, 2) == 1
