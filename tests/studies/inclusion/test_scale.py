"""The inclusion_scale study: dense and one-pass executions agree; the auto choice; resume by batch; bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.studies.inclusion import scale as inclusion_scale
from judgecal_dist.studies.runner import execute, prepare

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion_scale.yaml"
ARGS = ["replicates=3", "panels=[all, top3]"]
#: The inclusion study's summary.json result keys (its summarise, restricted to what both studies report).
INCLUSION_KEYS = {"aggregator", "calibrator", "panel", "replicates", "panel_size"} | {
    f"{m}{s}" for m in ("nll", "brier", "ece", "accuracy") for s in ("", "_ci_low", "_ci_high")
}


@pytest.fixture(scope="module")
def panel_url(tmp_path_factory) -> str:
    dest = str(tmp_path_factory.mktemp("scale") / "panel")
    generate_panel(dest, n_items=1000, n_judges=8, seed=5)
    return dest


def _run(panel_url: str, out: Path, execution: str, *extra: str) -> dict:
    run = prepare(CONFIG, [f"data={panel_url}", f"execution={execution}", *ARGS, *extra], run_id=execution)
    url = execute(run, EngineConfig(stats_engine="local"), output=str(out), serial=True)
    assert (Path(url) / "_SUCCESS").is_file() and (Path(url) / "figures" / "nll_by_panel.png").is_file()
    return json.loads((Path(url) / "summary.json").read_text())


def test_dense_and_onepass_runs_give_the_same_summary(panel_url, tmp_path):
    dense, onepass = (_run(panel_url, tmp_path, e) for e in ("dense", "onepass"))
    assert dense["execution"]["execution"] == "dense" and onepass["execution"]["execution"] == "onepass"
    a, b = pd.DataFrame(dense["results"]), pd.DataFrame(onepass["results"])
    assert set(a.columns) == INCLUSION_KEYS and len(a) == 2 * 3  # 2 panels x 3 calibrators
    pd.testing.assert_frame_equal(a[["aggregator", "calibrator", "panel"]], b[["aggregator", "calibrator", "panel"]])
    for column in INCLUSION_KEYS - {"aggregator", "calibrator", "panel"}:
        # The two paths sum in different orders, so per-split metrics agree to ~1e-10; an interval bound over 3
        # replicates multiplies that spread by t(0.975, 2) = 4.3 over sqrt(3) per split (1.1e-9 seen on ECE).
        atol = 1e-8 if "_ci_" in column else 1e-9
        np.testing.assert_allclose(a[column], b[column], rtol=0, atol=atol, err_msg=column)


def test_auto_execution_follows_the_verdict_threshold(panel_url):
    config = inclusion_scale.Config(data=panel_url, dense_max_verdicts=8000)
    assert inclusion_scale.choose_execution(config, 7999)[0] == "dense"
    assert inclusion_scale.choose_execution(config, 8000)[0] == "onepass"
    engine = EngineConfig(stats_engine="local")
    data = inclusion_scale.load(config, engine)  # 1000 items x 8 judges: 8000 verdict rows
    assert (data.execution, data.verdict_rows) == ("onepass", 8000)
    data = inclusion_scale.load(inclusion_scale.Config(data=panel_url, dense_max_verdicts=8001), engine)
    assert data.execution == "dense" and data.panel is not None and "8000 verdict rows < " in data.reason


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("execution=sometimes", "execution=sometimes: must be one of auto, dense, onepass"),
        ("calibrators=[isotonic]", r"calibrators=\[isotonic\]: must be a non-empty list, each one of"),
        ("panels=[top3]", r"panels=\[top3\]: must be a list holding all and otherwise topK \(K >= 1\)"),
        ("calibrator_input=odds", "calibrator_input=odds: must be one of"),
        (
            "replicates=0",
            r"replicates=0: must be an integer in \[1, 10000\] \(set replicates in .*inclusion_scale.yaml or --set replicates=100\)",
        ),
        ("onepass_batch=0", r"onepass_batch=0: must be an integer in \[1, 10000\]"),
    ],
)
def test_bad_config_is_rejected(panel_url, setting, message):
    with pytest.raises(ConfigError, match=message):
        prepare(CONFIG, [f"data={panel_url}", setting])


def test_single_class_labels_are_rejected_before_anything_is_written(tmp_path):
    dest = str(tmp_path / "one_class")
    generate_panel(dest, n_items=200, n_judges=4, seed=2)
    labels = pd.read_parquet(f"{dest}/labels")
    labels["label"] = "A"
    for part in Path(f"{dest}/labels").glob("*.parquet"):
        part.unlink()
    labels.to_parquet(f"{dest}/labels/part-0.parquet", index=False)
    run = prepare(CONFIG, [f"data={dest}", "execution=onepass"])
    with pytest.raises(InputError, match="labels: label: labelled items have 1 class"):
        execute(run, EngineConfig(stats_engine="local"), output=str(tmp_path / "out"), serial=True)
    assert not (tmp_path / "out").exists()


class _Crash(Exception):
    """Stands for the process dying after some batches were committed."""


def test_interrupted_onepass_run_resumes_by_batch_without_recomputing(panel_url, tmp_path, monkeypatch):
    from judgecal_dist.engine.onepass import replicates
    from judgecal_dist.engine.results.store import RunStore

    args = [f"data={panel_url}", "execution=onepass", "replicates=6", "onepass_batch=2", "panels=[all, top3]"]
    evaluated: list[list[int]] = []
    real = replicates.evaluate_replicates

    def recording(source, seeds, *a, **kw):
        evaluated.append(list(seeds))
        return real(source, seeds, *a, **kw)

    monkeypatch.setattr(inclusion_scale, "evaluate_replicates", recording)
    commit = RunStore.commit_part
    committed: list[int] = []

    def crashing(store, seed, table):
        if len(committed) == 4:  # the third batch dies before its first part is written
            raise _Crash
        commit(store, seed, table)
        committed.append(seed)

    monkeypatch.setattr(RunStore, "commit_part", crashing)
    engine = EngineConfig(stats_engine="local")
    with pytest.raises(_Crash):
        execute(prepare(CONFIG, args, run_id="resumed"), engine, output=str(tmp_path), serial=True)
    parts = tmp_path / "inclusion_scale" / "resumed" / "replicates"
    before = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.parquet")}
    assert sorted(before) == [f"part-{s}.parquet" for s in range(4)]
    assert not (parts.parent / "_SUCCESS").exists()

    monkeypatch.setattr(RunStore, "commit_part", commit)
    evaluated.clear()
    url = execute(prepare(CONFIG, args, run_id="resumed"), engine, output=str(tmp_path), serial=True)
    assert evaluated == [[4, 5]]  # only the unfinished batch is evaluated again
    after = {p.name: p.stat().st_mtime_ns for p in Path(url, "replicates").glob("part-*.parquet")}
    assert len(after) == 6 and all(after[name] == stamp for name, stamp in before.items())
    assert json.loads(Path(url, "manifest.json").read_text())["resumed_replicates"] == 4
    evaluated.clear()  # a finished run is returned as is: nothing is evaluated
    assert execute(prepare(CONFIG, args, run_id="resumed"), engine, output=str(tmp_path), serial=True) == url
    assert evaluated == []
    fresh = execute(prepare(CONFIG, args, run_id="fresh"), engine, output=str(tmp_path), serial=True)
    a, b = (json.loads(Path(u, "summary.json").read_text())["results"] for u in (url, fresh))
    assert a == b  # batches change nothing: each replicate's numbers depend on its seed alone
