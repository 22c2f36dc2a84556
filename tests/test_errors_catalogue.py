"""Every row of docs/errors.md, run: the command rejects that input with that exit code and message.

The table is the parametrisation, so the catalogue and the code cannot drift: a row without a case here, or a
case without a row, fails ``test_every_row_has_a_case``.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from tests.cluster_support import free_port

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "errors.md"
CFG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
ROW = re.compile(r"^\| `(?P<id>[\w-]+)` \| (?P<command>\w+) \| .* \| (?P<exit>\d) \| `(?P<message>.*)` \|$")

VERDICTS = "dataset,item_id,judge_id,sample,verdict\nd,i1,j1,0,A\nd,i1,j2,0,B\nd,i2,j1,0,B\nd,i2,j2,0,\n"
LABELS = "dataset,item_id,label\nd,i1,A\nd,i2,B\n"


def _rows() -> list[dict[str, str]]:
    rows = [m.groupdict() for line in DOC.read_text().splitlines() if (m := ROW.match(line))]
    assert len(rows) >= 25, "docs/errors.md: the catalogue table was not found"
    return rows


def _src(tmp: Path, verdicts: str = VERDICTS, labels: str = LABELS) -> str:
    folder = tmp / "src"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "verdicts.csv").write_text(verdicts)
    (folder / "labels.csv").write_text(labels)
    return str(folder)


def _ingest(tmp: Path, verdicts: str = VERDICTS, labels: str = LABELS) -> list[str]:
    return ["ingest", "--format", "long", _src(tmp, verdicts, labels), str(tmp / "dest")]


def _truncated_gzip(tmp: Path) -> list[str]:
    src = Path(_src(tmp))
    blob = gzip.compress(VERDICTS.encode())
    (src / "verdicts.csv").unlink()
    (src / "verdicts.csv.gz").write_bytes(blob[: len(blob) // 2])
    return ["ingest", "--format", "long", str(src), str(tmp / "dest")]


def _existing_dataset(tmp: Path) -> str:
    dest = tmp / "dataset"
    assert CliRunner().invoke(cli, ["generate", "--items", "40", "--judges", "3", str(dest)]).exit_code == 0
    return str(dest)


def _yaml(tmp: Path, text: str, name: str = "config.yaml") -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


def _run(tmp: Path, *extra: str) -> list[str]:
    return ["run", CFG, "--output", str(tmp / "out"), "--serial", *extra]


CASES: dict[str, Callable[[Path], list[str]]] = {
    "ingest-unknown-format": lambda t: ["ingest", "--format", "nope", _src(t), str(t / "dest")],
    "ingest-missing-source": lambda t: ["ingest", "--format", "long", str(t / "missing-src"), str(t / "dest")],
    "ingest-missing-column": lambda t: _ingest(t, VERDICTS.replace("item_id", "item")),
    "ingest-duplicate-key": lambda t: _ingest(t, VERDICTS + "d,i1,j1,0,B\n"),
    "ingest-unknown-category": lambda t: _ingest(t, VERDICTS.replace("d,i2,j1,0,B", "d,i2,j1,0,C")),
    "ingest-label-unknown-item": lambda t: _ingest(t, VERDICTS, LABELS + "d,i9,A\n"),
    "ingest-empty-file": lambda t: _ingest(t, ""),
    "ingest-truncated-gzip": _truncated_gzip,
    "ingest-dest-exists": lambda t: ["ingest", "--format", "long", _src(t), _existing_dataset(t)],
    "generate-nonpositive-size": lambda t: ["generate", "--items", "0", str(t / "g")],
    "generate-label-fraction": lambda t: ["generate", "--label-fraction", "2", str(t / "g")],
    "generate-dest-exists": lambda t: ["generate", "--items", "60", "--judges", "3", _existing_dataset(t)],
    "run-config-not-found": lambda t: ["run", str(t / "nope.yaml")],
    "run-config-not-a-mapping": lambda t: ["run", _yaml(t, "just a string\n")],
    "run-config-invalid-yaml": lambda t: ["run", _yaml(t, "study: [inclusion\n")],
    "run-config-no-study": lambda t: ["run", _yaml(t, "replicates: 3\n")],
    "run-unknown-study": lambda t: ["run", _yaml(t, "study: nope\n")],
    "run-unknown-setting": lambda t: _run(t, "--set", "data=x", "--set", "bogus=1"),
    "run-set-syntax": lambda t: _run(t, "--set", "foo"),
    "run-wrong-type": lambda t: _run(t, "--set", "data=x", "--set", "replicates=abc"),
    "run-bad-value": lambda t: _run(t, "--set", "data=x", "--set", "replicates=0"),
    "run-data-required": lambda t: _run(t),
    "run-data-missing": lambda t: _run(t, "--set", f"data={t / 'missing-data'}"),
    "run-engine-bad-value": lambda t: _run(t, "--set", "data=x", "--conf", _yaml(t, "stats_engine: nope\n", "e.yaml")),
    "run-engine-unknown-key": lambda t: _run(t, "--set", "data=x", "--conf", _yaml(t, "spark_mastr: x\n", "e.yaml")),
    "sql-data-not-a-dataset": lambda t: ["sql", "SELECT 1", "--data", str(t)],
    "sql-unknown-column": lambda t: ["sql", "SELECT nope FROM verdicts", "--data", _existing_dataset(t)],
    "status-not-a-run": lambda t: ["status", str(t)],
    "submit-no-address": lambda t: ["submit", CFG, "--set", "data=x"],
    "submit-unreachable": lambda t: [
        "submit",
        CFG,
        "--set",
        "data=x",
        "--ray-address",
        f"http://127.0.0.1:{free_port()}",
        "--run-id",
        "n",
    ],
    "submit-credentials-in-conf": lambda t: [
        "submit",
        CFG,
        "--set",
        "data=x",
        "--ray-address",
        "http://127.0.0.1:9",
        "--conf",
        _yaml(t, "storage_options: {secret: abc}\n", "e.yaml"),
    ],
    "submit-bad-config": lambda t: [
        "submit",
        CFG,
        "--set",
        "data=x",
        "--set",
        "replicates=0",
        "--ray-address",
        f"http://127.0.0.1:{free_port()}",
    ],
}


def _all_cases() -> dict[str, Callable[[Path], list[str]]]:
    # Each area keeps its cases in its own module (tests/catalogue/), so areas grow without touching each other.
    from tests.catalogue import area_cases

    merged = dict(CASES)
    for name, cases in area_cases().items():
        clash = set(merged) & set(cases)
        assert not clash, f"tests/catalogue/{name}.py repeats case ids {sorted(clash)}"
        merged.update(cases)
    return merged


ALL_CASES = _all_cases()


def test_every_row_has_a_case():
    ids = [row["id"] for row in _rows()]
    assert len(ids) == len(set(ids)), "duplicate ids in docs/errors.md"
    assert set(ids) == set(ALL_CASES), {
        "rows without a case": set(ids) - set(ALL_CASES),
        "cases without a row": set(ALL_CASES) - set(ids),
    }


def _listing(folder: Path) -> dict[str, tuple[bool, int, int]]:
    """Every path under ``folder`` with (is a folder, size, mtime): a created, changed or removed path shows."""
    return {
        str(p.relative_to(folder)): (p.is_dir(), p.stat().st_size if p.is_file() else 0, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
    }


def test_no_catalogued_input_error_exits_1():
    # Exit 1 is a run that failed after its input was accepted; a data or settings problem is decided before
    # anything is written and exits 2 (a warning row exits 0).
    assert {row["id"]: row["exit"] for row in _rows() if row["exit"] not in ("0", "2")} == {}


@pytest.mark.parametrize("row", _rows(), ids=lambda row: row["id"])
def test_catalogued_input_is_rejected_with_its_message(row, tmp_path, monkeypatch):
    """Each row exits with its code and message; a refusal (exit 2) writes nothing: no file or folder appears,
    changes or goes under the case's folder, the working directory (where default outputs go) included."""
    if row["command"] == "sql":
        pytest.importorskip("pyspark")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    argv = ALL_CASES[row["id"]](tmp_path)
    assert argv[0] == row["command"]
    before = _listing(tmp_path)
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == int(row["exit"]), result.output
    assert re.search(row["message"], result.output), f"{row['message']!r} not in {result.output!r}"
    assert "Traceback" not in result.output
    if row["exit"] == "2":
        after = _listing(tmp_path)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert not changed, f"{row['id']}: refused, yet wrote {changed[:5]}"
