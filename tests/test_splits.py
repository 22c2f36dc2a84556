"""Split membership: a pure function of (group_id, seed, fraction), equal in Spark and numpy."""

from __future__ import annotations

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from judgecal_dist.splits import assign_blocks, calibration_mask, group_keys, split_uniforms


def test_group_keys_equal_reference_xxh64():
    ids = ["Natural/0", "", "héllo ✓", "x" * 300]
    expected = [np.uint64(xxhash.xxh64_intdigest(s.encode("utf-8"), seed=42)).astype(np.int64) for s in ids]
    assert group_keys(ids).tolist() == [int(e) for e in expected]


@pytest.mark.spark
def test_spark_xxhash64_equals_group_keys(spark):
    from pyspark.sql import functions as F

    ids = [f"Adversarial/Neighbor/{i}" for i in range(200)] + ["", "ünïcødé/✓", "a" * 1000]
    frame = spark.createDataFrame([(s,) for s in ids], "group_id string")
    rows = frame.select("group_id", F.xxhash64("group_id").alias("key")).collect()
    spark_keys = dict((r.group_id, r.key) for r in rows)
    assert [spark_keys[s] for s in ids] == group_keys(ids).tolist()


def test_membership_is_pure_and_seed_dependent():
    keys = group_keys([f"g{i}" for i in range(5000)])
    a = calibration_mask(keys, [3, 4], 0.5)
    b = calibration_mask(keys[::-1], [3, 4], 0.5)[:, ::-1]  # order of groups does not matter
    assert np.array_equal(a, b)
    assert (a[0] != a[1]).mean() == pytest.approx(0.5, abs=0.03)  # different seeds: independent halves


def test_fraction_is_respected_within_binomial_error():
    n = 20_000
    keys = group_keys([f"item-{i}" for i in range(n)])
    for frac in (0.05, 0.3, 0.5, 0.9):
        share = calibration_mask(keys, [11], frac)[0].mean()
        assert abs(share - frac) < 4 * np.sqrt(frac * (1 - frac) / n)


def test_masks_are_nested_in_fraction():
    keys = group_keys([f"k{i}" for i in range(3000)])
    small, large = calibration_mask(keys, [5], 0.2), calibration_mask(keys, [5], 0.6)
    assert not (small & ~large).any()  # growing the fraction only adds groups (label-budget sweeps rely on it)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=40), st.integers(0, 2**40))
def test_uniforms_in_unit_interval(ids, seed):
    u = split_uniforms(group_keys(ids), [seed])
    assert ((u >= 0) & (u < 1)).all()
    same = [i for i, g in enumerate(ids) if g == ids[0]]
    assert len(set(u[0, same].tolist())) == 1  # equal group ids share membership


def test_blocks_partition_by_fractions():
    keys = group_keys([f"b{i}" for i in range(40_000)])
    blocks = assign_blocks(keys, 9, [0.1, 0.2, 0.3, 0.4])
    shares = np.bincount(blocks, minlength=4) / len(keys)
    assert np.allclose(shares, [0.1, 0.2, 0.3, 0.4], atol=0.01)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda k: calibration_mask(k, [0], 1.0), "fraction"),
        (lambda k: calibration_mask(k, [-1], 0.5), "seeds"),
        (lambda k: assign_blocks(k, 0, [0.5, 0.6]), "fractions"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call(group_keys(["a", "b"]))
