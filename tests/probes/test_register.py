"""Probe of ``ingest --register``: a name the catalog would refuse is refused before the dataset is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli

VERDICTS = "dataset,item_id,judge_id,sample,verdict\nd,i1,j1,0,A\nd,i1,j2,0,B\nd,i2,j1,0,B\nd,i2,j2,0,A\n"


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", ["Bad-Name", "1db", "../x", "a`b", ""])
def test_ingest_register_refuses_a_bad_name_before_writing_the_dataset(tmp_path, name):
    src = tmp_path / "src"
    src.mkdir()
    (src / "verdicts.csv").write_text(VERDICTS)
    before = _tree(tmp_path)
    dest = tmp_path / "dest"
    result = CliRunner().invoke(
        cli, ["ingest", "--format", "long", str(src / "verdicts.csv"), str(dest), "--register", name]
    )
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "--register" in errors[0] and repr(name) in errors[0], result.output
    assert "Traceback" not in result.output
    assert not dest.exists() and _tree(tmp_path) == before
