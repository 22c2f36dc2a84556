"""``judgecal fit``'s Dawid-Skene candidate is the table-wide semi-supervised fit (every item, the training folds'
labels anchoring it): in memory and on Spark it gives the same cross-fitted and exported model, and
``judgecal score`` with the exported model reproduces the card's predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.dawid_skene import fit_dawid_skene
from judgecal_dist.history import recorder
from judgecal_dist.history.judges import judge_counts, with_rates
from judgecal_dist.history.store import read_history
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.studies.fit import study

SETS = {"aggregators": ["dawid_skene"], "calibrators": ["none", "platt"], "panels": ["all"], "folds": 2}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> str:
    """600 items x 6 judges, a third labelled: most items are unlabelled, so the table-wide fit differs from the
    labelled panel's."""
    url = str(tmp_path_factory.mktemp("fitds") / "panel")
    generate_panel(url, n_items=600, n_judges=6, seed=5, label_fraction=0.35, missing_rate=0.1)
    return url


def crossfit(url: str, engine: str) -> tuple[study.FitInput, pd.DataFrame, object]:
    config = study.Config(data=url, resamples=200, **SETS)
    data = study.load(config, EngineConfig(spark_master="local[2]", stats_engine=engine))
    parts = pd.concat([study.run_replicate(data, rep) for rep in study.plan(config, data)], ignore_index=True)
    return data, parts, study.summarise(config, parts, data)


def test_in_memory_and_spark_fits_are_equal(generated, spark):
    local, parts_local, result_local = crossfit(generated, "local")
    on_spark, parts_spark, result_spark = crossfit(generated, "spark")
    assert (local.ds_engine, on_spark.ds_engine) == ("local", "spark")
    assert local.ds.keys() == on_spark.ds.keys() == {(0, "all"), (1, "all")}
    for key, model in local.ds.items():
        np.testing.assert_allclose(on_spark.ds[key].confusion_, model.confusion_, rtol=0, atol=1e-9)
        assert on_spark.ds[key].prior_ == pytest.approx(model.prior_, abs=1e-9)
    np.testing.assert_allclose(parts_spark["p"].to_numpy(), parts_local["p"].to_numpy(), rtol=0, atol=1e-9)
    p_local = result_local.tables["predictions.parquet"]["p"].to_numpy()
    np.testing.assert_allclose(result_spark.tables["predictions.parquet"]["p"].to_numpy(), p_local, atol=1e-9)
    # The fold's model is the table-wide fit with the held-out labels latent, not a fit of the labelled panel.
    held = local.panel.item_ids[local.roles == 0]
    direct = fit_dawid_skene(generated, judge_ids=list(local.panel.judge_ids), latent_items=set(held), n_iter=100)
    np.testing.assert_allclose(local.ds[0, "all"].confusion_, direct.confusion, atol=1e-12)
    assert direct.n_items > local.panel.n_items and 0 < direct.n_labelled < local.panel.n_items


def test_score_reproduces_the_dawid_skene_card(generated, tmp_path):
    sets = [a for key, value in SETS.items() for a in ("--set", f"{key}={value}")]
    run = CliRunner().invoke(cli, ["fit", "--data", generated, "--output", str(tmp_path / "fit"), "--serial", *sets])
    assert run.exit_code == 0, run.output
    fitted = run.output.strip().splitlines()[-1]
    out = tmp_path / "scored"
    scored = CliRunner().invoke(cli, ["score", "--model", fitted, "--data", generated, "--output", str(out)])
    assert scored.exit_code == 0, scored.output
    card = pd.read_parquet(Path(fitted) / "predictions.parquet")
    items = pd.read_parquet(out / "items").set_index("item_id").loc[card["item_id"]]
    np.testing.assert_array_equal(items["p"].to_numpy(), card["p"].to_numpy())


def test_dawid_skene_only_fit_starts_no_ray(generated, tmp_path):
    """Without --serial, a fit whose only aggregator is Dawid-Skene (fitted on the driver) runs its folds here."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("Ray was started by an earlier test in this process")
    sets = [a for key, value in SETS.items() for a in ("--set", f"{key}={value}")]
    run = CliRunner().invoke(cli, ["fit", "--data", generated, "--output", str(tmp_path / "fit"), *sets])
    assert run.exit_code == 0, run.output
    assert not ray.is_initialized()
    assert len(pd.read_parquet(Path(run.output.strip().splitlines()[-1]) / "predictions.parquet")) > 0


@pytest.mark.parametrize("n_samples", [1, 2])
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_the_fit_hands_the_history_the_counts_of_its_own_read(tmp_path, n_samples, engine, request):
    """The Dawid-Skene read (in memory) or job (Spark) codes the whole table, so its per-judge counts are the
    history's (equal to the history's own read, itself checked against a loop over items; ties, nulls and labels
    included); with two samples it coded one of them, so it hands none and the history reads the table."""
    if engine == "spark":
        request.getfixturevalue("spark")
    url = str(tmp_path / "panel")
    generate_panel(
        url, n_items=300, n_judges=5, n_samples=n_samples, seed=3, label_fraction=0.5, tie_rate=0.05, missing_rate=0.1
    )
    config = study.Config(data=url, aggregators=["dawid_skene"], calibrators=["none"], panels=["all"], folds=2)
    data = study.load(config, EngineConfig(spark_master="local[2]", stats_engine=engine))
    assert data.ds_engine == engine
    counts = study.history_counts(data)
    if n_samples == 2:
        assert counts is None
    else:
        pd.testing.assert_frame_equal(counts, judge_counts(url, engine="local"))


def test_the_history_of_a_fit_does_not_read_the_table_again(generated, tmp_path, monkeypatch):
    """`judgecal fit` records its per-judge history rows from its own read: the history's reader is not called,
    and the rows equal what it would have counted."""
    expected = with_rates(judge_counts(generated, engine="local"))

    def second_read(*args, **kwargs):
        raise AssertionError("the run history read the table again")

    monkeypatch.setattr(recorder, "judge_counts", second_read)
    out = tmp_path / "fit"
    sets = [a for key, value in SETS.items() for a in ("--set", f"{key}={value}")]
    run = CliRunner().invoke(cli, ["fit", "--data", generated, "--output", str(out), "--serial", *sets])
    assert run.exit_code == 0, run.output
    judges = read_history(str(out), "judges", study="fit").sort_values("judge_id").reset_index(drop=True)
    assert len(judges) == len(expected)
    pd.testing.assert_frame_equal(judges[expected.columns], expected, check_dtype=False)
