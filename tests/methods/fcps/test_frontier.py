"""CFPS's calibration frontier against brute force over every judge subset and every multinomial draw."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.errors import ConfigError
from judgecal_dist.methods.fcps.frontier import binomial_pressure, calibration_frontier


@pytest.mark.parametrize(("p", "budget"), [([0.5, 0.3, 0.2], 4), ([0.9, 0.1], 6), ([0.25] * 4, 3)])
def test_pressure_is_the_expected_plug_in_pressure_over_every_calibration_draw(p, budget):
    # E[sum over seen cells of p_c / n_c + sum over unseen cells of p_c], every sequence of `budget` draws.
    expected = 0.0
    for draw in itertools.product(range(len(p)), repeat=budget):
        n = np.bincount(draw, minlength=len(p))
        prob = math.prod(p[c] for c in draw)
        expected += prob * sum(pc / nc if nc else pc for pc, nc in zip(p, n, strict=True))
    assert binomial_pressure(p, budget) == pytest.approx(expected, abs=1e-12)


def _key(judges) -> str:
    return ",".join(str(j) for j in sorted(judges))


def _brute_force(x: np.ndarray, y: np.ndarray, budget: int, cap: int) -> tuple[pd.DataFrame, set, set]:
    frame = pd.DataFrame(x, columns=[f"j{i}" for i in range(x.shape[1])]).assign(y=y)
    risk0 = float(((y - y.mean()) ** 2).mean())
    rows = []
    for size in range(1, x.shape[1] + 1):
        for subset in itertools.combinations(range(x.shape[1]), size):
            cols = [f"j{i}" for i in subset]
            cell_mean = frame.groupby(cols)["y"].transform("mean")
            freq = frame.groupby(cols).size().to_numpy() / len(frame)
            pressure = sum(
                pc
                * (
                    sum(math.comb(budget, n) * pc**n * (1 - pc) ** (budget - n) / n for n in range(1, budget + 1))
                    + (1 - pc) ** budget
                )
                for pc in freq
            )
            rows.append((_key(subset), risk0 - float(((y - cell_mean) ** 2).mean()), pressure))
    pareto = [
        r
        for r in rows
        if not any(
            o[1] >= r[1] - 1e-12 and o[2] <= r[2] + 1e-12 and (o[1] > r[1] + 1e-12 or o[2] < r[2] - 1e-12) for o in rows
        )
    ]
    kept = sorted(pareto, key=lambda r: (-(r[1] - r[2]), len(r[0]), r[0]))[:cap]
    return pd.DataFrame(rows, columns=["set", "gain", "pressure"]), {r[0] for r in pareto}, {r[0] for r in kept}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frontier_equals_brute_force_over_all_subsets(seed):
    rng = np.random.default_rng(seed)
    n, m = 60, 4
    y = rng.integers(0, 2, n).astype(float)
    right = rng.random((n, m)) < np.array([0.9, 0.75, 0.6, 0.55])
    x = np.where(right, y[:, None], 1 - y[:, None]).astype(np.int64)
    x[rng.random((n, m)) < 0.1] = 3  # parse errors stay a category
    x[:, 3] = np.where(x[:, 0] == x[:, 1], 0, 1)  # an interaction judge
    budget, cap = 20, 3
    got = calibration_frontier(x, y, budget, cap=cap)
    truth, pareto, kept = _brute_force(x, y, budget, cap)
    assert len(got) == 2**m - 1
    by_set = got.assign(set=got["judges"].map(_key)).set_index("set")
    truth = truth.set_index("set")
    assert np.allclose(by_set.loc[truth.index, "gain"], truth["gain"], atol=1e-12)
    assert np.allclose(by_set.loc[truth.index, "pressure"], truth["pressure"], atol=1e-12)
    assert set(by_set.index[by_set["pareto"]]) == pareto
    assert set(by_set.index[by_set["kept"]]) == kept
    # Judges inside a subset follow the information-first rank (single-judge grouped MSE, ties by pool index).
    single = {j: float(truth.loc[str(j), "gain"]) for j in range(m)}
    rank = sorted(range(m), key=lambda j: (-round(single[j], 12), j))
    for judges in got["judges"]:
        assert list(judges) == sorted(judges, key=rank.index)


def test_same_rows_as_cells_and_bad_settings():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, (40, 3))
    y = (x[:, 0] ^ (rng.random(40) < 0.2)).astype(float)
    uniq, inverse, counts = np.unique(x, axis=0, return_inverse=True, return_counts=True)
    means = np.bincount(inverse.ravel(), weights=y) / counts
    rows = calibration_frontier(x, y, 10)
    cells = calibration_frontier(uniq, means, 10, sample_weight=counts)
    assert rows[["judges", "kept"]].equals(cells[["judges", "kept"]])
    assert np.allclose(rows["gain"], cells["gain"]) and np.allclose(rows["pressure"], cells["pressure"])
    with pytest.raises(ConfigError, match="a pool of 13 judges has 8191 subsets"):
        calibration_frontier(np.zeros((4, 13), dtype=np.int64), np.zeros(4), 10)
