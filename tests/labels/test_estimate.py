"""``judgecal label estimate`` as a user reaches it: the project's own panel (``judgecal generate``) and model
(``judgecal fit`` on a tenth of the labels), more labels back, relative paths from another folder, defaults, a
``label select`` queue, and every refusal (exit 2, nothing written). The reference: PredictionPoweredMean on arrays
built with pandas from ``judgecal score``'s items and the verdict table."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.methods.labels.estimators import ESTIMATE_COLUMNS, PredictionPoweredMean

SEAM = ["target", "estimate", "lower", "upper", "method", "n_labels", "effective_labels", "classical_lower", "classical_upper"]  # fmt: skip


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _with_labels(full: Path, dest: Path, keep: np.ndarray) -> Path:
    """A copy of the fully labelled panel whose labels table keeps only the items in ``keep``."""
    shutil.copytree(full, dest)
    labels = pd.read_parquet(full / "labels")
    labels.loc[~keep, ["label", "label_score"]] = None
    shutil.rmtree(dest / "labels")
    (dest / "labels").mkdir()
    labels.to_parquet(dest / "labels" / "part-00000.parquet", index=False)
    return dest


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A panel with every truth (``full``), the same panel with 10% labels (``fitdata``, the model fitted on them),
    with 30% labels (``estdata``: the fitted tenth plus labels that came back) and an items table with groups."""
    root = tmp_path_factory.mktemp("project")
    full = root / "full"
    assert invoke("generate", "--items", "2000", "--judges", "5", "--seed", "3", str(full)).exit_code == 0
    labels = pd.read_parquet(full / "labels")
    rng = np.random.default_rng(0)
    items = pd.DataFrame({"dataset": labels["dataset"], "item_id": labels["item_id"]})
    items["subset"] = rng.choice(["chat", "code"], size=len(items))
    items["model_a"] = rng.choice(["m1", "m2"], size=len(items))
    items["model_b"] = pd.Series("m3", index=items.index, dtype=object).mask(rng.uniform(size=len(items)) < 0.1)
    (full / "items").mkdir()
    items.to_parquet(full / "items" / "part-00000.parquet", index=False)
    u = rng.uniform(size=len(labels))
    _with_labels(full, root / "fitdata", u < 0.1)
    _with_labels(full, root / "estdata", u < 0.3)
    fitted = invoke("fit", "--data", str(root / "fitdata"), "--output", str(root / "results"), "--serial")
    assert fitted.exit_code == 0, fitted.output
    (root / "run.txt").write_text(fitted.output.strip().splitlines()[-1])
    scored = invoke("score", "--model", _run(root), "--data", str(root / "estdata"), "--output", str(root / "scores"))
    assert scored.exit_code == 0, scored.output
    return root


def _run(project: Path) -> str:
    return (project / "run.txt").read_text()


def _reference(project: Path, data: str, pi: pd.Series | None = None) -> dict[str, PredictionPoweredMean]:
    """Every target estimated from ``judgecal score``'s items (p, label, in_calibration) and the verdict table."""
    scored = pd.read_parquet(project / "scores" / "items").drop(columns="label").dropna(subset=["p"])
    labels = pd.read_parquet(project / data / "labels")[["item_id", "label"]]
    items = pd.read_parquet(project / "full" / "items")
    frame = scored.merge(labels, on="item_id", how="left").merge(items, on=["dataset", "item_id"], how="left")
    if pi is None:
        frame.loc[frame["in_calibration"], "label"] = None  # the proxy saw these labels
    model = json.loads((Path(_run(project)) / "model" / "model.json").read_text())
    votes = pd.read_parquet(project / data / "verdicts").pivot(index="item_id", columns="judge_id", values="verdict")
    frame["pair"] = frame["model_a"] + " vs " + frame["model_b"].astype(object)
    out = {}

    def fit(name: str, rows: pd.DataFrame, y: pd.Series, f: pd.Series) -> None:
        lab = rows["label"].isin(["A", "B"]).to_numpy()
        weights = None if pi is None else pi.reindex(rows["item_id"]).fillna(1.0).to_numpy()[lab]
        out[name] = PredictionPoweredMean().fit(
            y.to_numpy()[lab].astype(float), f.to_numpy()[lab], f.to_numpy(), weights
        )

    fit("win_rate", frame, frame["label"] == "A", frame["p"])
    fit("panel_accuracy", frame, (frame["p"] > 0.5) == (frame["label"] == "A"), np.maximum(frame["p"], 1 - frame["p"]))
    for column in ("subset", "pair"):
        for value, rows in frame.dropna(subset=[column]).groupby(column):
            fit(f"win_rate:{column}={value}", rows, rows["label"] == "A", rows["p"])
    for judge in _judges(model):
        verdict = votes[judge].reindex(frame["item_id"]).to_numpy()
        rows = frame[np.isin(verdict, ["A", "B"])]
        v = votes[judge].reindex(rows["item_id"]).to_numpy()
        fit(
            f"judge_accuracy:{judge}",
            rows,
            pd.Series(v == rows["label"].to_numpy()),
            pd.Series(np.where(v == "A", rows["p"], 1 - rows["p"])),
        )
    return out


def _judges(model: dict) -> list[str]:
    found = [v for k, v in _walk(model) if k == "judge_ids"]
    return list(found[0])


def _walk(obj, key=None):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k, v
            yield from _walk(v, k)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk(v, key)


def _check(frame: pd.DataFrame, reference: dict[str, PredictionPoweredMean]) -> None:
    assert sorted(frame["target"]) == sorted(reference)
    for row in frame.itertuples():
        est = reference[row.target]
        assert row.estimate == pytest.approx(est.estimate_, abs=1e-9), row.target
        assert (row.lower, row.upper) == pytest.approx(est.interval_, abs=1e-9), row.target
        assert (row.classical_lower, row.classical_upper) == pytest.approx(est.classical_interval_, abs=1e-9)
        assert row.n_labels == est.n_labels_ and row.effective_labels == pytest.approx(est.effective_labels_)


def test_defaults_from_another_folder(project, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = os.path.relpath(project / "estdata", tmp_path)  # relative paths, as a user types them
    result = invoke("label", "estimate", "--model", _run(project), "--data", data, "--output", "est")
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("est")
    frame = pd.read_parquet("est/estimates.parquet")
    assert list(frame.columns) == ESTIMATE_COLUMNS and list(frame.columns[: len(SEAM)]) == SEAM
    _check(frame, _reference(project, "estdata"))
    assert (frame["effective_labels"] > frame["n_labels"]).all()  # the panel helps every target here
    assert ((frame["lower"] >= 0) & (frame["upper"] <= 1)).all()
    record = json.loads(Path("est/estimates.json").read_text())
    fitted = int(pd.read_parquet(project / "fitdata" / "labels")["label"].notna().sum())
    assert record["counts"]["labelled_in_calibration"] == fitted and record["engine"] == "local"
    report = Path("est/report.md").read_text()
    assert report.startswith("# Prediction-powered estimates") and "| `win_rate` |" in report.split("## More")[0]
    assert f"{fitted:,} labelled items the model was fitted on are left out" in report
    assert "to halve the interval" in report and Path("est/_SUCCESS").exists()
    again = invoke("label", "estimate", "--model", _run(project), "--data", data, "--output", "est")
    assert again.exit_code == 0 and json.loads(Path("est/estimates.json").read_text()) == record


def test_labels_drawn_by_label_select_use_their_inclusion_probability(project, tmp_path) -> None:
    queue = tmp_path / "q1"
    drawn = invoke(
        "label",
        "select",
        "--model",
        _run(project),
        "--data",
        str(project / "fitdata"),
        "--budget",
        "150",
        "--output",
        str(queue),
    )
    assert drawn.exit_code == 0, drawn.output
    queued = pd.read_parquet(queue / "queue.parquet")
    fit_labels = pd.read_parquet(project / "fitdata" / "labels")["label"].notna().to_numpy()
    ids = pd.read_parquet(project / "full" / "labels")["item_id"]
    back = project / "backdata"
    _with_labels(project / "full", back, fit_labels | ids.isin(queued["item_id"]).to_numpy())
    out = tmp_path / "est"
    result = invoke(
        "label", "estimate", "--model", _run(project), "--data", str(back), "--queue", str(queue), "--output", str(out)
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out / "estimates.parquet")
    _check(frame, _reference(project, "backdata", pi=queued.set_index("item_id")["inclusion_prob"]))
    assert frame["method"].str.contains("inverse-probability").all()
    record = json.loads((out / "estimates.json").read_text())
    assert record["counts"]["labelled_in_queue"] == len(queued) and record["counts"]["queued_without_label"] == 0


def _queue(folder: Path, frame: pd.DataFrame) -> str:
    folder.mkdir(parents=True)
    frame.to_parquet(folder / "queue.parquet", index=False)
    (folder / "_SUCCESS").write_text("")
    return str(folder)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--by", "colour"], "items: --by: column(s) ['colour'] cannot group the items"),
        (["--alpha", "1.5"], "--alpha: 1.5: must be in (0, 1)"),
        (["--queue", "NOQUEUE"], "none: not a committed label select queue"),
        (["--queue", "BADCOLUMN"], "queue.parquet: no column(s) ['inclusion_prob']"),
        (["--queue", "BADPI"], "queue.parquet: inclusion_prob: 1 values outside (0, 1]"),
        (["--queue", "TWICE"], "queue.parquet: dataset+item_id: 1 items listed twice"),
    ],
)
def test_refusals_exit_2_and_write_nothing(project, tmp_path, extra, message) -> None:
    keys = {"dataset": ["synthetic"] * 2, "item_id": ["item-000000001", "item-000000002"]}
    folders = {
        "NOQUEUE": str(tmp_path / "none"),
        "BADCOLUMN": _queue(tmp_path / "c", pd.DataFrame(keys)),
        "BADPI": _queue(tmp_path / "p", pd.DataFrame(keys | {"inclusion_prob": [0.5, 1.5]})),
        "TWICE": _queue(
            tmp_path / "t",
            pd.DataFrame({"dataset": ["synthetic"] * 2, "item_id": ["i", "i"], "inclusion_prob": [0.5, 0.5]}),
        ),
    }
    extra = [folders.get(e, e) for e in extra]
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "label",
            "estimate",
            "--model",
            _run(project),
            "--data",
            str(project / "estdata"),
            "--output",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == 2, result.output
    assert message in result.output and not out.exists()


def test_refuses_labels_that_would_bias_or_leave_nothing(project, tmp_path) -> None:
    """A queued item without its label (it would count as drawn with outcome zero) and data whose every label is
    on the model's calibration items are refused before anything is written."""
    labels = pd.read_parquet(project / "estdata" / "labels")
    waiting = labels[labels["label"].isna()].head(3)
    queue = _queue(tmp_path / "q", waiting[["dataset", "item_id"]].assign(inclusion_prob=0.5))
    args = ["label", "estimate", "--model", _run(project), "--output", str(tmp_path / "out")]
    pending = CliRunner().invoke(cli, [*args, "--data", str(project / "estdata"), "--queue", queue])
    assert pending.exit_code == 2 and "3 queued items have no label" in pending.output
    assert "judgecal label add --data" in pending.output  # the door that brings the labels in
    fitted_only = CliRunner().invoke(cli, [*args, "--data", str(project / "fitdata")])
    assert fitted_only.exit_code == 2 and "every label is on an item the model was fitted on" in fitted_only.output
    assert not (tmp_path / "out").exists()


def test_refuses_an_output_inside_the_data_and_a_foreign_folder(project, tmp_path) -> None:
    args = ["label", "estimate", "--model", _run(project), "--data", str(project / "estdata")]
    inside = CliRunner().invoke(cli, [*args, "--output", str(project / "estdata" / "est")])
    assert inside.exit_code == 2 and "--output" in inside.output and not (project / "estdata" / "est").exists()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    refused = CliRunner().invoke(cli, [*args, "--output", str(foreign)])
    assert refused.exit_code == 2 and "did not write" in refused.output
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


@pytest.mark.spark
def test_spark_and_in_process_give_equal_estimates(project, tmp_path, spark) -> None:
    """One pass on Spark (forced) and in this process: the same rows, with groups and a hand-written queue of the
    seam's columns (two rounds of one item each listed, the rest labelled outside the queue)."""
    from judgecal_dist.config import EngineConfig
    from judgecal_dist.labels.estimate import Settings, estimate_labels

    labels = pd.read_parquet(project / "estdata" / "labels")
    rng = np.random.default_rng(1)
    chosen = labels[labels["label"].notna()].sample(120, random_state=1)
    columns = {
        "dataset": chosen["dataset"],
        "item_id": chosen["item_id"],
        "inclusion_prob": rng.uniform(0.05, 0.6, 120),
    }
    queue = pd.DataFrame(columns | {"stratum": "all", "p": 0.5, "round": 1})
    q1 = _queue(tmp_path / "q1", queue.iloc[:80])
    q2 = _queue(tmp_path / "q2", queue.iloc[60:].assign(round=2))  # 20 items in both rounds
    settings = Settings(by=("subset", "pair"))
    results = {}
    for name in ("local", "spark"):
        engine = EngineConfig(stats_engine=name)
        out = str(tmp_path / name)
        results[name] = estimate_labels(
            _run(project), str(project / "estdata"), out, settings, queues=[q1, q2], engine=engine
        )
    local, remote = (pd.DataFrame(results[n]["estimates"]) for n in ("local", "spark"))
    pd.testing.assert_frame_equal(local, remote, check_exact=False, rtol=1e-10, atol=1e-12)
    assert results["local"]["counts"] == results["spark"]["counts"] and results["spark"]["engine"] == "spark"
    assert results["local"]["counts"]["labelled_in_queue"] == 120
    assert {"win_rate:subset=chat", "win_rate:pair=m1 vs m3"} <= set(local["target"])


def test_an_item_in_two_rounds_has_the_overall_probability(tmp_path) -> None:
    from judgecal_dist.labels.estimate import read_queues

    first = pd.DataFrame({"dataset": ["d", "d"], "item_id": ["a", "b"], "inclusion_prob": [0.2, 1.0]})
    second = pd.DataFrame({"dataset": ["d"], "item_id": ["a"], "inclusion_prob": [0.5]})
    table = read_queues([_queue(tmp_path / "1", first), _queue(tmp_path / "2", second)], {}).to_pandas()
    assert table["item_id"].tolist() == ["a", "b"]
    assert table["inclusion_prob"].tolist() == pytest.approx([1 - 0.8 * 0.5, 1.0])
