"""Probes of committed results: every writer (score, fit, run, drift, ingest, generate) follows one ownership rule.

Per writer, as a user or a scheduler would hit it through the command line (click's runner, in-process, on tiny
panels): a rerun with the same inputs writes nothing and says "already complete"; a committed result of other
inputs is refused with one line naming the folder and the fix; ``--overwrite`` replaces the command's own files
and keeps a user's; a folder of files the command did not write is refused; an output inside the input is refused
before anything is read. References are the folders' bytes (and modification times) before and after.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.history.drift_report import MARKER as DRIFT_MARKER
from judgecal_dist.history.judges import with_rates
from judgecal_dist.history.store import record_run
from judgecal_dist.scoring.output import MARKER as SCORE_MARKER
from tests.scoring.support import model_json, write_arena, write_run

ROOT = Path(__file__).resolve().parents[2]
CFG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority]", "calibrators=[none]", "panels=[all]", "permutation_resamples=100", "replicates=2"]
OTHER_WEIGHTS = {"j1": 2.0, "j2": 0.5, "j3": -0.25}


def _invoke(*argv: str):
    return CliRunner().invoke(cli, [str(a) for a in argv])


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder`` with its bytes and modification time (a rewrite with equal bytes shows too)."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
    }


def _refused(result, *needles: str) -> str:
    """The one error line of a refused command: exit 2, no traceback, every needle in it."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert all(n in errors[0] for n in needles), (needles, errors[0])
    return errors[0]


def _complete(result) -> None:
    """A no-op rerun: exit 0 (or drift's 3) and one "already complete" line."""
    assert result.exit_code in (0, 3), result.output
    assert sum("already complete" in line for line in result.output.splitlines()) == 1, result.output


def _user_file(folder: Path, name: str = "NOTES.txt") -> None:
    (folder / name).write_text("a user's own notes\n")


# -- score -----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> dict[str, Path]:
    """A committed score of model ``run`` on ``data``, and a second model ``other``."""
    root = tmp_path_factory.mktemp("score")
    paths = {
        "data": Path(write_arena(str(root / "data"))),
        "run": Path(write_run(root / "run", model_json())),
        "other": Path(write_run(root / "other", model_json(OTHER_WEIGHTS))),
        "out": root / "out",
    }
    assert _score(paths, paths["out"]).exit_code == 0
    return paths


def _score(paths: dict[str, Path], out: Path, model: str = "run", *extra: str):
    return _invoke(
        "score", "--model", paths[model], "--data", paths["data"], "--output", out, "--engine", "local", *extra
    )


def _copy(folder: Path, dest: Path) -> Path:
    shutil.copytree(folder, dest)  # copytree keeps modification times (copy2)
    return dest


def test_score_of_the_same_inputs_is_already_complete(scored):
    before = _state(scored["out"])
    _complete(_score(scored, scored["out"]))
    assert _state(scored["out"]) == before


def test_score_of_other_inputs_is_refused(scored, tmp_path):
    out = _copy(scored["out"], tmp_path / "out")
    before = _state(out)
    _refused(_score(scored, out, "other"), str(out), "other inputs", "model", "--overwrite", "--output")
    assert _state(out) == before


def test_score_overwrite_replaces_its_own_files_and_keeps_the_users(scored, tmp_path):
    out = _copy(scored["out"], tmp_path / "out")
    _user_file(out)
    old_items = pd.read_parquet(out / "items").set_index("item_id")["p"].sort_index()
    assert _score(scored, out, "other", "--overwrite").exit_code == 0
    marker = json.loads((out / SCORE_MARKER).read_text())
    assert marker["inputs"]["model"].startswith(str(scored["other"]))
    new_items = pd.read_parquet(out / "items").set_index("item_id")["p"].sort_index()
    assert not new_items.equals(old_items) and len(new_items) == len(old_items)
    assert (out / "NOTES.txt").read_text() == "a user's own notes\n" and (out / "_SUCCESS").exists()


def test_score_refuses_a_folder_of_files_it_did_not_write(scored, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    _user_file(out, "summary.json")
    before = _state(out)
    _refused(_score(scored, out), str(out), "did not write", SCORE_MARKER, "--output")
    assert _state(out) == before


def test_score_refuses_an_output_inside_its_data(scored):
    before = _state(scored["data"])
    for out in (scored["data"] / "scores", scored["data"]):
        _refused(_score(scored, out), "--output", "--data", str(scored["data"]), "outside")
    assert _state(scored["data"]) == before


# -- fit and run (study runs) ----------------------------------------------------------------------------------------
def _generate(dest: Path, seed: int, *, overwrite: bool = False) -> None:
    argv = ["generate", "--items", "160", "--judges", "5", "--seed", str(seed), str(dest)]
    assert _invoke(*argv, *(["--overwrite"] if overwrite else [])).exit_code == 0


def _fit(data: Path, out: Path, *extra: str):
    return _invoke("fit", "--data", data, "--output", out, "--serial", *extra)


def _run(data: Path, out: Path, *extra: str):
    sets = [arg for item in [f"data={data}", *TINY] for arg in ("--set", item)]
    return _invoke("run", CFG, *sets, "--output", out, "--serial", *extra)


@pytest.fixture(scope="module", params=["fit", "run"])
def study(request, tmp_path_factory) -> dict:
    """A committed run ``nightly`` of fit (default settings) or of the inclusion study (tiny settings)."""
    root = tmp_path_factory.mktemp(request.param)
    data = root / "D"
    _generate(data, 1)
    command = _fit if request.param == "fit" else _run
    result = command(data, root / "out", "--run-id", "nightly")
    assert result.exit_code == 0, result.output
    return {"command": command, "name": request.param, "data": data, "out": root / "out", "root": root}


def test_a_study_run_of_the_same_inputs_is_already_complete(study):
    before = _state(study["out"])
    _complete(study["command"](study["data"], study["out"], "--run-id", "nightly"))
    assert _state(study["out"]) == before


def test_a_study_run_of_other_inputs_is_refused(study, tmp_path):
    data = _copy(study["data"], tmp_path / "D")
    out = _copy(study["out"], tmp_path / "out")
    _generate(data, 3, overwrite=True)  # changed data: the run's fingerprint of its inputs differs
    before = _state(out)
    _refused(study["command"](data, out, "--run-id", "nightly"), "nightly", "holds another run", "--run-id")
    assert _state(out) == before


def test_a_study_run_folder_of_files_it_did_not_write_is_refused(study, tmp_path):
    folder = tmp_path / "out" / ("fit" if study["name"] == "fit" else "inclusion") / "mine"
    folder.mkdir(parents=True)
    _user_file(folder)
    before = _state(tmp_path / "out")
    line = _refused(study["command"](study["data"], tmp_path / "out", "--run-id", "mine"), str(folder))
    assert f"judgecal {study['name']} did not write" in line and "--run-id" in line
    assert _state(tmp_path / "out") == before


def test_a_study_output_inside_its_data_is_refused(study):
    before = _state(study["data"])
    for out in (study["data"] / "results", study["data"]):
        _refused(study["command"](study["data"], out), "--output", str(study["data"]), "outside")
    assert _state(study["data"]) == before


# -- drift -----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A results root whose history holds two runs of two judges (recorded as the runner records them)."""
    out = tmp_path_factory.mktemp("drift") / "out"
    counts = pd.DataFrame({"judge_id": ["j1", "j2"], "panel_items": 40})
    for column in ("rows", "parsed", "votes", "labelled_votes", "consensus_votes", "items"):
        counts[column] = 40
    for night, correct in ((1, 34), (2, 20)):  # j1 drops from 85% to 50%: a flag
        stamp = f"2026-11-0{night}T02:30:00+00:00"
        manifest = {"study": "inclusion", "run_id": f"night-{night}", "status": "succeeded", "started": stamp}
        judges = counts.assign(n_A=20, correct=[correct, 30], agree=30)
        record_run(str(out), manifest | {"ended": stamp}, judges=with_rates(judges))
    return out


def _drift(history: Path, report: Path, *extra: str):
    return _invoke("drift", "--output", history, "--report", report, *extra)


@pytest.fixture()
def reported(history, tmp_path) -> Path:
    report = tmp_path / "report"
    result = _drift(history, report)
    assert result.exit_code == 3 and "FLAG j1 accuracy" in result.output, result.output
    return report


def test_drift_of_the_same_comparison_is_already_complete(history, reported):
    before = _state(reported)
    result = _drift(history, reported)
    _complete(result)
    assert result.exit_code == 3 and "FLAG j1 accuracy" in result.output  # the answer is still given
    assert _state(reported) == before


def test_drift_of_another_comparison_is_refused(history, reported):
    before = _state(reported)
    _refused(_drift(history, reported, "--alpha", "0.01"), str(reported), "other inputs", "--overwrite", "--report")
    assert _state(reported) == before


def test_drift_overwrite_replaces_its_own_files_and_keeps_the_users(history, reported):
    _user_file(reported)
    result = _drift(history, reported, "--current", "night-1", "--overwrite")  # no baseline: no flag
    assert result.exit_code == 0, result.output
    assert json.loads((reported / "drift.json").read_text())["current"] == "night-1"
    assert not (reported / "figures").exists() or not list((reported / "figures").iterdir())
    assert (reported / "NOTES.txt").read_text() == "a user's own notes\n"


def test_drift_refuses_an_older_report_folder_without_its_marker(history, reported):
    (reported / DRIFT_MARKER).unlink()  # a report written before drift marked its folders
    before = _state(reported)
    line = _refused(_drift(history, reported), str(reported), DRIFT_MARKER, "did not write", "move them out")
    assert "--report" in line
    assert _state(reported) == before


def test_drift_refuses_a_report_inside_the_history(history):
    before = _state(history)
    _refused(_drift(history, history / "history" / "report"), "--report", "inside", "history", "outside")
    assert _state(history) == before


# -- ingest ----------------------------------------------------------------------------------------------------------
VERDICTS = "dataset,item_id,judge_id,sample,verdict\nd,i1,j1,0,A\nd,i1,j2,0,B\nd,i2,j1,0,B\nd,i2,j2,0,A\n"
LABELS = "dataset,item_id,label\nd,i1,A\nd,i2,B\n"


@pytest.fixture()
def ingested(tmp_path) -> dict[str, Path]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "verdicts.csv").write_text(VERDICTS)
    (src / "labels.csv").write_text(LABELS)
    dest = tmp_path / "dest"
    assert _ingest(src, dest).exit_code == 0
    return {"src": src, "dest": dest}


def _ingest(src: Path, dest: Path, *extra: str):
    return _invoke("ingest", "--format", "long", src, dest, *extra)


def test_ingest_of_the_same_source_is_already_complete(ingested):
    before = _state(ingested["dest"])
    result = _ingest(ingested["src"], ingested["dest"])
    _complete(result)
    assert result.output.strip().splitlines()[-1] == str(ingested["dest"])
    assert _state(ingested["dest"]) == before


def test_ingest_of_another_source_is_refused(ingested):
    (ingested["src"] / "verdicts.csv").write_text(VERDICTS.replace("d,i2,j2,0,A", "d,i2,j2,0,B"))
    before = _state(ingested["dest"])
    _refused(_ingest(ingested["src"], ingested["dest"]), str(ingested["dest"]), "source_sha256", "--overwrite")
    assert _state(ingested["dest"]) == before


def test_ingest_overwrite_replaces_its_own_files_and_keeps_the_users(ingested):
    (ingested["src"] / "verdicts.csv").write_text(VERDICTS.replace("d,i2,j2,0,A", "d,i2,j2,0,B"))
    _user_file(ingested["dest"])
    assert _ingest(ingested["src"], ingested["dest"], "--overwrite").exit_code == 0
    verdicts = pd.read_parquet(ingested["dest"] / "verdicts").set_index(["item_id", "judge_id"])["verdict"]
    assert verdicts[("i2", "j2")] == "B"
    assert (ingested["dest"] / "NOTES.txt").read_text() == "a user's own notes\n"


def test_ingest_refuses_a_folder_of_files_it_did_not_write(ingested, tmp_path):
    dest = tmp_path / "mine"
    dest.mkdir()
    _user_file(dest)
    before = _state(dest)
    _refused(_ingest(ingested["src"], dest), str(dest), "not empty and not a dataset")
    assert _state(dest) == before


def test_ingest_refuses_a_dest_inside_its_source(ingested):
    before = _state(ingested["src"])
    for dest in (ingested["src"] / "dataset", ingested["src"]):
        _refused(_ingest(ingested["src"], dest), "DEST", "SRC", str(ingested["src"]), "outside")
    assert _state(ingested["src"]) == before


# -- generate --------------------------------------------------------------------------------------------------------
@pytest.fixture()
def generated(tmp_path) -> Path:
    dest = tmp_path / "panel"
    assert _invoke("generate", "--items", "40", "--judges", "3", dest).exit_code == 0
    return dest


def test_generate_with_the_same_settings_is_already_complete(generated):
    before = _state(generated)
    _complete(_invoke("generate", "--items", "40", "--judges", "3", generated))
    assert _state(generated) == before


def test_generate_with_other_settings_is_refused(generated):
    before = _state(generated)
    _refused(
        _invoke("generate", "--items", "40", "--judges", "3", "--seed", "9", generated), str(generated), "--overwrite"
    )
    assert _state(generated) == before


def test_generate_overwrite_replaces_its_own_files_and_keeps_the_users(generated):
    _user_file(generated)
    assert _invoke("generate", "--items", "60", "--judges", "3", "--overwrite", generated).exit_code == 0
    assert json.loads((generated / "_ingest.json").read_text())["generator"]["n_items"] == 60
    assert (generated / "NOTES.txt").read_text() == "a user's own notes\n"


def test_generate_refuses_a_folder_of_files_it_did_not_write(tmp_path):
    dest = tmp_path / "mine"
    dest.mkdir()
    _user_file(dest)
    before = _state(dest)
    _refused(_invoke("generate", "--items", "40", "--judges", "3", dest), str(dest), "not empty and not a dataset")
    assert _state(dest) == before
