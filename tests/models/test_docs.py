"""docs/models.md prints every kind's JSON Schema and the table of legal and plausible ranges as the code generates
them (regenerate both with ``python -m tests.models.test_docs``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from judgecal_dist.models import schemas
from judgecal_dist.models.bounds import ranges

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"
_SCHEMA = re.compile(r"(<!-- schema: (\S+) -->\n```json\n)(.*?)(\n```)", flags=re.S)
_RANGES = re.compile(r"(<!-- ranges -->\n)(.*?)(<!-- /ranges -->)", flags=re.S)


def range_table() -> str:
    """The markdown table of every bounded number (``bounds.ranges``)."""
    rows = ["| format | field | legal (refused outside) | plausible (warned outside) |", "| --- | --- | --- | --- |"]
    rows += [f"| `{fmt}` | `{field}` | {legal} | {plausible} |" for fmt, field, legal, plausible in ranges(schemas())]
    return "\n".join(rows) + "\n"


def regenerated(text: str) -> str:
    """``text`` (docs/models.md) with every schema block and the range table as the code generates them."""
    generated = schemas()
    text = _SCHEMA.sub(lambda m: m[1] + json.dumps(generated[m[2]], indent=1, sort_keys=True) + m[4], text)
    return _RANGES.sub(lambda m: m[1] + range_table() + m[3], text)


def test_every_schema_in_the_docs_equals_the_generated_one():
    text = DOC.read_text()
    found = {m[2]: m[3] for m in _SCHEMA.finditer(text)}
    assert set(found) == set(schemas())
    for fmt, schema in schemas().items():
        assert json.loads(found[fmt]) == schema, f"docs/models.md: regenerate the schema of {fmt}"


def test_the_range_table_in_the_docs_is_the_generated_one():
    found = _RANGES.search(DOC.read_text())
    assert found is not None, "docs/models.md: the <!-- ranges --> table is missing"
    assert found[2] == range_table(), "docs/models.md: regenerate the range table (python -m tests.models.test_docs)"
    assert "| `judgecal.binary-pipeline/v1` | `calibrator[platt].slope` | [-1000, 1000] | [-100, 100] |" in found[2]


if __name__ == "__main__":
    DOC.write_text(regenerated(DOC.read_text()))
