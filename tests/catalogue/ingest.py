"""Catalogue cases: judgecal ingest: adapters and table folders, and the dataset folders a run reads.

The LLMBar cases build a two-subset release in the release's own layout (no shared data needed); the probes in
tests/probes/test_ingest.py repeat them on copies of the real files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from judgecal_dist.cli import cli

ROOT = Path(__file__).resolve().parents[2]
CFG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
VERDICTS = "dataset,item_id,judge_id,sample,verdict\nd,i1,j1,0,A\nd,i1,j2,0,B\nd,i2,j1,0,B\nd,i2,j2,0,\n"
LABELS = "dataset,item_id,label\nd,i1,A\nd,i2,B\n"
#: subset -> its number of items; every strategy below has a result file in each, except where removed.
SUBSETS = {"Natural": 3, "Adversarial/GPTOut": 2}
STRATEGIES = ("GPT-4/Vanilla", "GPT-4/Swap")


def llmbar_release(root: Path, *, absent: tuple[str, str] | None = None) -> str:
    """A small release in LLMBar's layout; ``absent`` = (subset, backbone/strategy) whose result file is left out."""
    for subset, n in SUBSETS.items():
        items = [{"input": f"q{i}", "output_1": "a", "output_2": "b", "label": 1 + i % 2} for i in range(n)]
        (root / subset).mkdir(parents=True)
        (root / subset / "dataset.json").write_text(json.dumps(items))
        for strategy in STRATEGIES:
            if (subset, strategy) == absent:
                continue
            verdicts = {"swap = False": {"winner": "1"}, "swap = True": {"winner": "2"}}
            (root / subset / "evaluators" / strategy).mkdir(parents=True)
            results = [dict(item, results=[verdicts]) for item in items]
            (root / subset / "evaluators" / strategy / "result.json").write_text(json.dumps(results))
    return str(root)


def _llmbar_absent(tmp: Path, *strict: str) -> list[str]:
    src = llmbar_release(tmp / "release", absent=("Adversarial/GPTOut", "GPT-4/Swap"))
    return ["ingest", "--format", "llmbar", *strict, src, str(tmp / "dest")]


def _long(tmp: Path, verdicts: str = VERDICTS, *strict: str) -> list[str]:
    src = tmp / "src"
    src.mkdir()
    (src / "verdicts.csv").write_text(verdicts)
    (src / "labels.csv").write_text(LABELS)
    return ["ingest", "--format", "long", *strict, str(src), str(tmp / "dest")]


def _table_folder(tmp: Path, *foreign: str) -> list[str]:
    """A long source whose verdicts are a Parquet folder as Spark writes it, plus ``foreign`` files in it."""
    argv = _long(tmp)
    src = tmp / "src"
    (src / "verdicts.csv").unlink()
    folder = src / "verdicts.parquet"
    folder.mkdir()
    rows = [line.split(",") for line in VERDICTS.splitlines()[1:]]
    frame = pd.DataFrame(rows, columns=VERDICTS.splitlines()[0].split(",")).replace("", None)
    if "empty" not in foreign:
        frame.to_parquet(folder / "part-00000.parquet")
    for name in ("_SUCCESS", ".part-00000.parquet.crc", *[f for f in foreign if f != "empty"]):
        (folder / name).write_text("not a part")
    return argv


def _run_on(tmp: Path, spoil: Callable[[Path], None]) -> list[str]:
    """``judgecal run`` on a generated dataset whose verdicts/ folder ``spoil`` changed."""
    data = tmp / "D"
    assert CliRunner().invoke(cli, ["generate", "--items", "80", "--judges", "3", str(data)]).exit_code == 0
    spoil(data / "verdicts")
    sets = ["data=" + str(data), "aggregators=[majority]", "calibrators=[none]", "panels=[all]", "replicates=2"]
    return ["run", CFG, *[arg for item in sets for arg in ("--set", item)], "--output", str(tmp / "out"), "--serial"]


def _readme(folder: Path) -> None:
    (folder / "README.md").write_text("what these verdicts are\n")


def _truncated_part(folder: Path) -> None:
    # A second part cut short (a copy interrupted): the first part, whose footer gives the schema, is intact.
    blob = (folder / "part-00000.parquet").read_bytes()
    (folder / "part-00001.parquet").write_bytes(blob[: len(blob) // 2])


_NULL_JUDGE = VERDICTS + "d,i1,j3,0,\nd,i2,j3,0,\n"


def _labels_twice(tmp: Path) -> list[str]:
    argv = _long(tmp)
    (tmp / "gt.csv").write_text(LABELS)
    return [*argv, "--labels", str(tmp / "gt.csv")]


def _other_source(tmp: Path) -> list[str]:
    """A committed ingest of SRC, then SRC changed and ingested again into the same DEST."""
    argv = _long(tmp)
    assert CliRunner().invoke(cli, argv).exit_code == 0
    (tmp / "src" / "verdicts.csv").write_text(VERDICTS.replace("d,i2,j2,0,", "d,i2,j2,0,A"))
    return argv


CASES: dict[str, Callable[[Path], list[str]]] = {
    "ingest-dest-inside-src": lambda t: [*_long(t)[:-1], str(t / "src" / "dataset")],
    "ingest-dest-other-source": _other_source,
    "ingest-llmbar-absent-judge": _llmbar_absent,
    "ingest-llmbar-absent-judge-strict": lambda t: _llmbar_absent(t, "--strict"),
    "ingest-all-null-judge": lambda t: _long(t, _NULL_JUDGE),
    "ingest-all-null-judge-strict": lambda t: _long(t, _NULL_JUDGE, "--strict"),
    "ingest-duplicate-header": lambda t: _long(
        t, "dataset,item_id,judge_id,verdict,verdict\nd,i1,j1,A,A\nd,i2,j1,B,B\n"
    ),
    "ingest-repeated-header-line": lambda t: _long(t, VERDICTS + VERDICTS),
    "ingest-table-folder-foreign-file": lambda t: _table_folder(t, "README.md"),
    "ingest-table-folder-no-part": lambda t: _table_folder(t, "empty"),
    "ingest-long-sample-negative": lambda t: _long(t, VERDICTS + "d,i2,j3,-1,A\n"),
    "ingest-long-sample-too-large": lambda t: _long(t, VERDICTS + "d,i2,j3,2147483648,A\n"),
    "ingest-long-mixed-layout": lambda t: _long(t, "task,item_id,worker,label\ni1,i1,j1,1\n"),
    "ingest-long-labels-twice": _labels_twice,
    "dataset-foreign-file": lambda t: _run_on(t, _readme),
    "dataset-truncated-part": lambda t: _run_on(t, _truncated_part),
}
