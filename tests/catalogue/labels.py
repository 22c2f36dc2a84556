"""Catalogue cases: judgecal label add (returned labels refused before the dataset is touched)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from judgecal_dist.cli import cli


def _add(tmp: Path, rows: Callable[[pd.DataFrame], str]) -> list[str]:
    """``label add`` on a generated dataset (every item labelled) with a labels file made from its labels table."""
    data = tmp / "dataset"
    assert CliRunner().invoke(cli, ["generate", "--items", "40", "--judges", "3", str(data)]).exit_code == 0
    (tmp / "back.csv").write_text(rows(pd.read_parquet(data / "labels")))
    return ["label", "add", "--data", str(data), "--labels", str(tmp / "back.csv")]


def _flipped(labels: pd.DataFrame) -> str:
    first = labels.iloc[0]
    return f"item_id,label\n{first['item_id']},{'B' if first['label'] == 'A' else 'A'}\n"


def _not_a_dataset(tmp: Path) -> list[str]:
    (tmp / "folder").mkdir()
    (tmp / "back.csv").write_text("item_id,label\ni1,A\n")
    return ["label", "add", "--data", str(tmp / "folder"), "--labels", str(tmp / "back.csv")]


CASES: dict[str, Callable[[Path], list[str]]] = {
    "label-add-unknown-item": lambda t: _add(t, lambda labels: "item_id,label\nnope,A\n"),
    "label-add-duplicate-item": lambda t: _add(t, lambda labels: "item_id,label\nnope,A\nnope,A\n"),
    "label-add-label-differs": lambda t: _add(t, _flipped),
    "label-add-empty-file": lambda t: _add(t, lambda labels: ""),
    "label-add-not-a-dataset": _not_a_dataset,
}
