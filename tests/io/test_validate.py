"""Contract checks of io/validate.py on small hand-made tables (expected outcomes written by hand)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import JUDGES_SCHEMA, LABELS_SCHEMA, VERDICTS_SCHEMA
from judgecal_dist.io.validate import (
    all_null_judges,
    check_repeated_header,
    check_unique_keys,
    conform_table,
    validate_tables,
)


def _verdicts(**overrides):
    columns = {
        "dataset": ["d", "d", "d", "d"],
        "item_id": ["i1", "i1", "i2", "i2"],
        "judge_id": ["j1", "j2", "j1", "j2"],
        "verdict": ["A", "B", None, "tie"],
    }
    columns.update(overrides)
    return pa.table(columns)


def _labels(**overrides):
    columns = {"dataset": ["d", "d"], "item_id": ["i1", "i2"], "label": ["A", "B"]}
    columns.update(overrides)
    return pa.table(columns)


def test_defaults_and_contract_types():
    out = conform_table(_verdicts(), "verdicts")
    assert out.schema == VERDICTS_SCHEMA
    assert out["group_id"].to_pylist() == ["i1", "i1", "i2", "i2"]
    assert out["sample"].to_pylist() == [0, 0, 0, 0]
    assert out["score"].null_count == 4
    assert conform_table(_labels(), "labels").schema == LABELS_SCHEMA


def test_null_group_id_falls_back_to_item_id_and_types_are_cast():
    table = _verdicts(group_id=["g", None, "g2", None], sample=["0", "1", "0", "1"], score=[1, 2, None, 4])
    out = conform_table(table, "verdicts")
    assert out["group_id"].to_pylist() == ["g", "i1", "g2", "i2"]
    assert out["sample"].type == pa.int32() and out["sample"].to_pylist() == [0, 1, 0, 1]
    assert out["score"].to_pylist() == [1.0, 2.0, None, 4.0]


def test_judges_contract():
    out = conform_table(pa.table({"judge_id": ["a", "b"], "cost_per_mtok_in": [2.5, None]}), "judges")
    assert out.schema == JUDGES_SCHEMA
    with pytest.raises(InputError, match=r"judges: cost_per_mtok_in: values outside \[0.0, inf\]"):
        conform_table(pa.table({"judge_id": ["a"], "cost_per_mtok_in": [-1.0]}), "judges")


@pytest.mark.parametrize(
    ("table", "pattern"),
    [
        (_verdicts().drop(["item_id"]), r"^v\.csv: item_id: missing required column"),
        (_verdicts().append_column("extra", pa.array([1, 2, 3, 4])), r"^v\.csv: extra: unknown column"),
        (
            _verdicts(verdict=["A", "C", "C", "a"]),
            r"^v\.csv: verdict: unknown categories \['C', 'a'\].*\(3 rows, e\.g\. "
            r"\[\{'dataset': 'd', 'item_id': 'i1', 'judge_id': 'j2', 'sample': 0\}",
        ),
        (
            _verdicts(judge_id=["j1", "j1", "j1", "j2"]),
            r"^v\.csv: dataset\+item_id\+judge_id\+sample: duplicate keys "
            r"\(2 rows, e\.g\. \[\{'dataset': 'd', 'item_id': 'i1', 'judge_id': 'j1', 'sample': 0\}\]\)",
        ),
        (
            _verdicts(sample=["0", "x", "0", "1.5"]),
            r"^v\.csv: sample: cannot cast string to int64: values \['x', '1\.5'\]"
            r".*\(2 rows.*; first at row 2\)$",
        ),
        (
            _verdicts(sample=["0", "-1", "0", "1"]),
            r"^v\.csv: sample: values outside \[0, 2147483647\] \(negative counts\): \[-1\] \(1 rows, .*"
            r"'sample': '-1'\}\]; first at row 2\)$",
        ),
        (
            _verdicts(sample=["0", "0", "0", str(2**31)]),
            r"^v\.csv: sample: values outside \[0, 2147483647\] \(too large\): \[2147483648\] .*first at row 4\)$",
        ),
        (
            _verdicts(sample=["0", "0", str(2**63), "0"]),
            r"^v\.csv: sample: cannot cast string to int64: values \['9223372036854775808'\].*first at row 3\)$",
        ),
        (_verdicts(item_id=["i1", None, "i2", "i2"]), r"^v\.csv: item_id: null values in a required column \(1 rows"),
        (
            _verdicts(input_tokens=[1, -5, None, 2]),
            r"^v\.csv: input_tokens: values outside \[0, \d+\] \(negative counts\): \[-5\] \(1 rows, .*'j2'",
        ),
        (
            _verdicts(output_tokens=[-1, -5, None, 2]),
            r"^v\.csv: output_tokens: values outside \[0, \d+\] \(negative counts\): \[-1, -5\] \(2 rows",
        ),
        (_verdicts(score=[0.5, float("nan"), None, 1.0]), r"^v\.csv: score: non-finite values"),
        (_verdicts().slice(0, 0), r"^v\.csv: \(all columns\): empty table \(0 rows\)"),
    ],
)
def test_verdict_rejections(table, pattern):
    with pytest.raises(InputError, match=pattern):
        conform_table(table, "verdicts", source="v.csv")


def test_score_range():
    table = _verdicts(score=[1.0, 10.0, 11.0, 0.0])
    with pytest.raises(InputError, match=r"score: values outside \[1, 10\] or non-finite: \[11\.0, 0\.0\] \(2 rows"):
        conform_table(table, "verdicts", score_range=(1, 10))


def test_label_categories_and_cross_table_checks():
    with pytest.raises(InputError, match=r"^l\.csv: label: unknown categories \['1'\]"):
        conform_table(_labels(label=["A", "1"]), "labels", source="l.csv")
    orphan = _labels(item_id=["i1", "nope"])
    with pytest.raises(
        InputError,
        match=r"l\.csv: item_id: labels for items not in verdicts \(1 rows, e\.g\. "
        r"\[\{'dataset': 'd', 'item_id': 'nope'\}\]\)",
    ):
        validate_tables({"verdicts": _verdicts(), "labels": orphan}, sources={"labels": "l.csv"})
    split = _verdicts(group_id=["g1", "g2", "g3", "g3"])
    with pytest.raises(InputError, match=r"group_id: items with more than one group_id \(1 items, .*'i1'"):
        validate_tables({"verdicts": split, "labels": _labels()})
    with pytest.raises(InputError, match=r"judge_id: judges missing from the judges table \(1 judges, e\.g\. \['j2'\]"):
        validate_tables({"verdicts": _verdicts(), "labels": _labels(), "judges": pa.table({"judge_id": ["j1"]})})
    with pytest.raises(InputError, match=r"dataset: labels: missing required table"):
        validate_tables({"verdicts": _verdicts()})


def test_items_table_is_free_but_keyed():
    items = pa.table({"dataset": ["d", "d"], "item_id": ["i1", "i2"], "subset": ["x", "y"]})
    out = validate_tables({"verdicts": _verdicts(), "labels": _labels(), "items": items})
    assert out["items"].column_names == ["dataset", "item_id", "subset"]
    with pytest.raises(InputError, match=r"items: dataset\+item_id: duplicate keys"):
        validate_tables({"verdicts": _verdicts(), "labels": _labels(), "items": pa.concat_tables([items, items])})


def test_million_rows_are_checked_quickly():
    """Vectorised checks: one million rows with a duplicate in the middle are rejected, naming the key."""
    n_items, n_judges = 50_000, 20
    item = np.repeat(np.arange(n_items), n_judges)
    judge = np.tile(np.arange(n_judges), n_items)
    judge[500_001] = judge[500_000]  # the same (item, judge) twice
    table = pa.table(
        {
            "dataset": pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(item), np.int32)), pa.array(["d"])),
            "item_id": pa.array(item.astype(str)),
            "judge_id": pa.array(judge.astype(str)),
            "verdict": pa.array(np.where(item % 2 == 0, "A", "B")),
        }
    )
    with pytest.raises(
        InputError,
        match=r"duplicate keys \(2 rows, e\.g\. \[\{'dataset': 'd', 'item_id': '25000', "
        r"'judge_id': '0', 'sample': 0\}\]\)",
    ):
        conform_table(table, "verdicts")


def test_all_null_judges_count_rows_without_verdict_or_score():
    table = conform_table(
        _verdicts(judge_id=["j1", "j2", "j3", "j1"], verdict=[None, None, None, "B"]).append_column(
            "score", pa.array([None, 0.4, None, None], pa.float64())
        ),
        "verdicts",
    )
    # j1: a vote on i2; j2: no verdict but a score (a vote); j3: one row on i2, no vote.
    assert all_null_judges(table) == {"j3": 1}
    silent = conform_table(_verdicts(verdict=[None, "A", None, "B"], judge_id=["j1", "j2", "j1", "j2"]), "verdicts")
    assert all_null_judges(silent) == {"j1": 2}
    assert all_null_judges(conform_table(_verdicts(), "verdicts")) == {}


def test_a_column_named_twice_and_a_repeated_header_line_are_named():
    twice = pa.Table.from_arrays(
        [pa.array(["d"]), pa.array(["i"]), pa.array(["j"]), pa.array(["A"]), pa.array(["A"])],
        names=["dataset", "item_id", "judge_id", "verdict", "verdict"],
    )
    with pytest.raises(InputError, match=r"^v\.csv: verdict: named 2 times in the header \('verdict' x2\)"):
        conform_table(twice, "verdicts", source="v.csv")
    repeated = pa.table({"item_id": ["i1", "item_id", "i2", "item_id"], "label": ["A", "label", "B", "label"]})
    with pytest.raises(InputError, match=r"^l\.csv: \(header\): the header line repeats as line 3 \(2 times in all"):
        check_repeated_header(repeated, source="l.csv")
    check_repeated_header(pa.table({"item_id": ["item_id"], "n": [1]}), source="typed")  # a number is no header
    check_repeated_header(pa.table({"item_id": ["item_id", "x"], "label": ["A", "label"]}), source="mixed")


@pytest.mark.parametrize("duplicate", [False, True])
@pytest.mark.parametrize("datasets", [["d"], ["d", "e"]])
def test_unique_keys_agree_with_pandas_whichever_columns_vary(duplicate, datasets):
    """One varying key column takes the distinct-count path, several the group-by: both refuse exactly the tables
    pandas finds a duplicated key in."""
    rng = np.random.default_rng(2)
    items, names = [f"i{k}" for k in rng.permutation(400)], list(rng.choice(datasets, 400))
    if duplicate:
        items[7], names[7] = items[300], names[300]  # the same key twice
    table = pa.table({"dataset": names, "item_id": items})
    expected = table.to_pandas().duplicated().any()
    if expected:
        with pytest.raises(InputError, match=r"t: dataset\+item_id: duplicate keys \(2 rows"):
            check_unique_keys(table, ["dataset", "item_id"], source="t")
    else:
        check_unique_keys(table, ["dataset", "item_id"], source="t")
    assert expected == duplicate
