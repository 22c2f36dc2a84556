"""The one-pass replicate evaluation on Spark keeps the driver's memory flat when the table grows 10x.

A memory property, not a timing: the driver's Python heap (tracemalloc peak over the whole one-pass run,
including building the persisted item table) is measured on a table and on one 10x larger. An item-level
collect of the same table is measured the same way as a control, so the probe is shown to see what it must.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable

import pytest

from judgecal_dist.engine.jobs.spark import read_table
from judgecal_dist.engine.onepass.replicates import evaluate_replicates
from judgecal_dist.engine.onepass.sources import spark_items_source
from judgecal_dist.io.synthetic import generate_panel

pytestmark = pytest.mark.heavy

FULL = os.environ.get("JUDGECAL_FULL") == "1"
SMALL = 20_000 if FULL else 3_000  # items; the large table has 10x as many


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[int, str]:
    roots = {}
    for n in (SMALL, 10 * SMALL):
        roots[n] = str(tmp_path_factory.mktemp(f"mem{n}") / "panel")
        generate_panel(roots[n], n_items=n, n_judges=8, seed=1)
    return roots


def _peak(fn: Callable[[], object]) -> int:
    """Peak bytes of Python heap allocated while ``fn`` runs (above what was allocated before)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _onepass(spark, root: str) -> None:
    source = spark_items_source(spark, root, dataset=None, sample=0, where=root)
    try:
        evaluate_replicates(source, [0, 1], 0.5, panels=("all",), calibrators=("none", "platt"))
    finally:
        source.release()


def test_driver_heap_does_not_grow_with_the_table(spark, tables):
    _onepass(spark, tables[SMALL])  # warm-up: first-use imports and Spark's lazy state are not table growth
    small, large = (_peak(lambda root=root: _onepass(spark, root)) for root in (tables[SMALL], tables[10 * SMALL]))
    # Control: collecting the large table's labels (one row per item) to the driver is seen, and grows with it.
    collect_small, collect_large = (
        _peak(lambda root=root: read_table(spark, root, "labels").toPandas()) for root in tables.values()
    )
    assert collect_large > 5 * collect_small
    assert collect_large > 2 * large  # the probe sees an item-level collect well above the one-pass run
    assert large < 1.5 * small + 256 * 1024, f"driver heap peak {small} -> {large} bytes for a 10x larger table"
