"""The shared numpy kernels against independent references (no Spark): brute force per replicate, hand counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgecal_dist.engine.jobs import counts
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.splits import calibration_mask, group_keys

SEEDS = [0, 1, 2, 7, 11]


@pytest.fixture(scope="module")
def rows() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    n = 5000
    groups = rng.integers(0, 300, size=n)
    return {
        "judge": rng.integers(0, 6, size=n),
        "label": rng.integers(0, 3, size=n),
        "verdict": rng.integers(-1, 3, size=n),
        "key": group_keys([f"g{g}" for g in range(300)])[groups],
    }


def test_judge_cell_tensor_equals_a_loop_over_replicates(rows):
    tensor = counts.judge_cell_tensor(
        rows["judge"], rows["label"], rows["verdict"], rows["key"], seeds=SEEDS, fraction=0.3, n_judges=6
    )
    slot = np.where(rows["verdict"] < 0, 3, rows["verdict"])
    for r, seed in enumerate(SEEDS):
        groups = np.unique(rows["key"])
        calibration = set(groups[calibration_mask(groups, [seed], 0.3)[0]].tolist())
        in_cal = np.array([k in calibration for k in rows["key"].tolist()])
        for side, mask in enumerate([in_cal, ~in_cal]):
            expected = np.zeros((6, 3, 4), dtype=np.int64)
            np.add.at(expected, (rows["judge"][mask], rows["label"][mask], slot[mask]), 1)
            np.testing.assert_array_equal(tensor[r, side], expected)


def test_judge_cell_tensor_hand_counts():
    # Two groups; rows 0 and 2 share group 7. Seed 0 and 1 put the groups on known sides (computed below).
    keys = np.array([7, 8, 7], dtype=np.int64)
    tensor = counts.judge_cell_tensor([0, 0, 1], [1, 1, 0], [1, -1, 0], keys, seeds=[0, 1], fraction=0.5, n_judges=2)
    member = calibration_mask(np.array([7, 8]), [0, 1], 0.5)
    for r in range(2):
        side7, side8 = (0 if member[r, 0] else 1), (0 if member[r, 1] else 1)
        assert tensor[r, side7, 0, 1, 1] == 1  # judge 0, label A, verdict A
        assert tensor[r, side8, 0, 1, 3] == 1  # judge 0, label A, missing
        assert tensor[r, side7, 1, 0, 0] == 1  # judge 1, label B, verdict B
        assert tensor[r].sum() == 3


def test_chunked_kernel_equals_one_chunk(rows, monkeypatch):
    whole = counts.judge_cell_tensor(
        rows["judge"], rows["label"], rows["verdict"], rows["key"], seeds=SEEDS, fraction=0.5, n_judges=6
    )
    monkeypatch.setattr(counts, "_MEMBERSHIP_ENTRIES", 1)  # 4096-row chunks: groups straddle chunks
    chunked = counts.judge_cell_tensor(
        rows["judge"], rows["label"], rows["verdict"], rows["key"], seeds=SEEDS, fraction=0.5, n_judges=6
    )
    np.testing.assert_array_equal(whole, chunked)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_sides_partition_the_rows_and_row_order_is_irrelevant(data):
    n = data.draw(st.integers(1, 200))
    ints = st.lists(st.integers(0, 2), min_size=n, max_size=n)
    judge = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    label, verdict = np.array(data.draw(ints)), np.array(data.draw(ints)) - data.draw(st.integers(0, 1))
    key = np.array(data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)), dtype=np.int64)
    tensor = counts.judge_cell_tensor(judge, label, verdict, key, seeds=[0, 5], fraction=0.4, n_judges=4)
    totals = tensor.sum(axis=1)
    assert (totals == totals[0]).all() and totals[0].sum() == n
    order = np.random.default_rng(0).permutation(n)
    shuffled = counts.judge_cell_tensor(
        judge[order], label[order], verdict[order], key[order], seeds=[0, 5], fraction=0.4, n_judges=4
    )
    np.testing.assert_array_equal(tensor, shuffled)


def test_pattern_tensor_equals_a_loop_over_replicates():
    rng = np.random.default_rng(5)
    n = 800
    pattern = rng.integers(0, 4**3, size=n)
    label = rng.integers(-1, 3, size=n)
    key = group_keys([f"g{g}" for g in rng.integers(0, 500, size=n)])
    patterns, stats = counts.pattern_tensor(pattern, label, key, seeds=SEEDS, fraction=0.5)
    frame = pd.DataFrame({"pattern": pattern, "is_a": label == 1, "labelled": label >= 0})
    for r, seed in enumerate(SEEDS):
        in_cal = calibration_mask(key, [seed], 0.5)[0]
        for side, mask in enumerate([in_cal, ~in_cal]):
            ref = frame[mask].groupby("pattern").agg(n=("is_a", "size"), a=("is_a", "sum"), lab=("labelled", "sum"))
            got = pd.DataFrame(stats[r, side], index=patterns, columns=["n", "a", "lab"])
            pd.testing.assert_frame_equal(got[got["n"] > 0], ref, check_names=False, check_dtype=False)


def test_expand_prefixes_sums_full_patterns():
    # Judges (j0, j1): items A|B, A|-, tie|B, -|-; the 1-prefix cells merge A|B and A|-.
    full = pd.DataFrame(
        {
            "pattern": [1 + 4 * 0, 1 + 4 * 3, 2 + 4 * 0, 3 + 4 * 3],
            "n": [2, 1, 1, 1],
            "label_sum": [1, 1, 0, 0],
            "n_labelled": [2, 1, 0, 1],
        }
    )
    out = counts.expand_prefixes(full, 2)
    got = {(k, p): (n, s, m) for k, p, n, s, m in out.itertuples(index=False)}
    assert got == {
        (1, "-"): (1, 0, 1),
        (1, "A"): (3, 2, 3),
        (1, "tie"): (1, 0, 0),
        (2, "-|-"): (1, 0, 1),
        (2, "A|-"): (1, 1, 1),
        (2, "A|B"): (2, 1, 2),
        (2, "tie|B"): (1, 0, 0),
    }


def test_kernel_rejects_unknown_codes():
    with pytest.raises(InputError, match=r"verdicts: verdict: 1 rows with a category outside"):
        counts.judge_cell_tensor([0], [0], [counts.UNKNOWN_CODE], [1], seeds=[0], fraction=0.5, n_judges=1)
    with pytest.raises(InputError, match=r"labels: label: .* \(nulls must be filtered"):
        counts.judge_cell_tensor([0], [-1], [0], [1], seeds=[0], fraction=0.5, n_judges=1)
    with pytest.raises(InputError, match=r"judge_id: index outside the judge list of 1 judges"):
        counts.judge_cell_tensor([1], [0], [0], [1], seeds=[0], fraction=0.5, n_judges=1)


@pytest.mark.parametrize(
    ("seeds", "fraction", "match"),
    [
        ([1, 1], 0.5, "distinct non-negative"),
        ([-1], 0.5, "distinct non-negative"),
        ([], 0.5, "at least one"),
        ([0], 1.0, r"fraction: must be in \(0, 1\)"),
        ([0], None, "give both or neither"),
    ],
)
def test_check_replicates_rejects(seeds, fraction, match):
    with pytest.raises(ConfigError, match=match):
        counts.check_replicates(seeds, fraction)


def test_check_pattern_judges_rejects():
    with pytest.raises(ConfigError, match="1 to 31 distinct"):
        counts.check_pattern_judges([f"j{i}" for i in range(32)])
    with pytest.raises(ConfigError, match="1 to 31 distinct"):
        counts.check_pattern_judges(["a", "a"])
    with pytest.raises(ConfigError, match="got the string"):
        counts.check_pattern_judges("abc")
