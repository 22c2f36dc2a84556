"""The report kit: its tables parse back to the cells given, numbers round as Python's format does, undefined
numbers print as n/a, and an interval cell holds the value and both bounds."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.studies.report_kit import (
    bracket,
    interval,
    markdown_table,
    number,
    p_value,
    percent,
    row_interval,
    section,
)


def _parse(lines: list[str]) -> pd.DataFrame:
    """A Markdown pipe table read back by pandas' CSV reader (an independent parser of the same text)."""
    body = "\n".join(line.strip().strip("|") for line in lines if not set(line) <= set("|-: "))
    return pd.read_csv(io.StringIO(body), sep="|", skipinitialspace=True, dtype=str).rename(columns=str.strip)


def test_table_round_trips_through_an_independent_parser():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(5, 3))
    lines = markdown_table(["a", "b", "c"], [[number(v) for v in row] for row in values])
    back = _parse(lines).apply(lambda c: c.str.strip()).astype(float).to_numpy()
    np.testing.assert_allclose(back, np.round(values, 4), atol=5e-5)
    assert lines[1] == "| --- | --- | --- |"
    assert markdown_table(["x", "n"], [], align=["left", "right"])[1] == "| --- | ---: |"


def test_table_refuses_a_ragged_row_and_escapes_pipes():
    with pytest.raises(ValueError, match="2 cells, the header 3"):
        markdown_table(["a", "b", "c"], [[1, 2]])
    assert markdown_table(["m"], [["a|b"]])[2] == "| a\\|b |"
    assert markdown_table(["a", "b"], [["x", ""]])[2] == "| x | |"


@pytest.mark.parametrize("bad", [None, float("nan"), math.inf, "text", np.nan])
def test_undefined_numbers_print_as_missing(bad):
    assert number(bad) == "n/a" and percent(bad) == "n/a" and p_value(bad) == "n/a"
    assert interval(bad, 0.1, 0.2) == "n/a [0.1000, 0.2000]"


def test_numbers_match_python_format():
    for x in (0.0, 1.23456789, -0.000049, 12.5):
        for spec in (".4f", "+.3f", ".2g", ".1f"):
            assert number(x, spec) == format(x, spec)
    assert number(1234.0, ",") == "1,234" and number(np.float64(7.0), "d") == "7"
    assert percent(0.256, 1) == "25.6%" and percent(-0.01, sign=True) == "-1.00%"
    assert (
        p_value(0.049999) == "p = 0.0500"
        and p_value(1e-9) == "p < 0.0001"
        and p_value(0.01, floor=0.001) == "p = 0.010"
    )


def test_interval_from_a_row_in_every_shape():
    record = {"nll": 0.31, "nll_ci_low": 0.29, "nll_ci_high": 0.335}
    frame = pd.DataFrame([record])
    expected = "0.3100 [0.2900, 0.3350]"
    assert row_interval(record, "nll") == expected
    assert row_interval(frame.iloc[0], "nll") == expected
    assert row_interval(next(frame.itertuples()), "nll") == expected
    assert row_interval({"nll": 0.31}, "nll") == "0.3100"
    assert interval(0.5, 0.4, 0.6, ".2f", level=0.9) == "0.50 [90%: 0.40, 0.60]"
    assert bracket(None, 0.6, ".1f") == "[n/a, 0.6]"


def test_section_puts_each_part_after_a_blank_line():
    lines = section("Title", "", "text", rows=markdown_table(["a"], [[1]]), after=["note"], depth=3)
    assert lines == ["", "### Title", "", "text", "", "| a |", "| --- |", "| 1 |", "", "note"]
    assert section(None, "only") == ["", "only"]
