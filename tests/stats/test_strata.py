from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.stats.metrics import nll
from judgecal_dist.stats.strata import nll_by_agreement_tercile


def test_strata_partition_items_and_match_nll_per_stratum():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 90)
    g = rng.random(90)
    p_raw, p_cal = rng.random(90), rng.random(90)
    table = nll_by_agreement_tercile(y, {"raw": p_raw, "beta": p_cal}, g)
    assert table["method"].tolist() == ["raw"] * 3 + ["beta"] * 3
    assert table.groupby("method")["n_items"].sum().tolist() == [90, 90]
    hard = g <= np.quantile(g, 1 / 3)
    row = table[(table.method == "raw") & (table.stratum == "hard")].iloc[0]
    assert row.n_items == hard.sum() and row.nll == pytest.approx(nll(y[hard], p_raw[hard]))


def test_tied_agreement_puts_shared_values_in_hard():
    # vote fractions give discrete agreement: q_1/3 = q_2/3 = 0.5 here
    g = np.array([0.0, 0.5, 0.5, 0.5, 0.5, 1.0])
    table = nll_by_agreement_tercile(np.ones(6, dtype=int), np.full(6, 0.8), g)
    assert dict(zip(table.stratum, table.n_items, strict=True)) == {"hard": 5, "easy": 1}


def test_errors():
    with pytest.raises(InputError, match=r"agreement: expected 2 finite values in \[0, 1\]"):
        nll_by_agreement_tercile([1, 0], [0.5, 0.5], [0.1, 1.5])
    with pytest.raises(InputError, match=r"probas\['p'\]: probabilities must be finite and in \[0, 1\]"):
        nll_by_agreement_tercile([1, 0], [0.5, 2.0], [0.1, 0.5])
