"""Dawid-Skene through Spark equals the in-memory estimator at equal iterations (LLMBar and a generated panel)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.ds_spark import dawid_skene_spark
from judgecal_dist.engine.jobs.panel import load_panel
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.ingest import ingest
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene

ENGINE = EngineConfig(spark_master="local[2]")


def dense_reference(url: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Items (sorted ids), votes (judges sorted), labels (-1 = none) built with pandas from the stored tables."""
    verdicts = read_dataset_table(url, "verdicts").to_pandas()
    verdicts = verdicts[verdicts["sample"] == 0]
    code = verdicts["verdict"].map({"A": 1, "B": 0}).fillna(-1).astype(int)  # tie / null -> missing
    votes = verdicts.assign(code=code).pivot(index="item_id", columns="judge_id", values="code").fillna(-1)
    votes = votes.sort_index().sort_index(axis=1)
    labels = read_dataset_table(url, "labels").to_pandas().set_index("item_id")["label"]
    y = labels.reindex(votes.index).map({"A": 1, "B": 0}).fillna(-1).astype(int).to_numpy()
    return votes.index.to_numpy(), votes.to_numpy(dtype=np.int8), y, votes.columns.tolist()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("ds") / "panel")
    generate_panel(url, n_items=600, n_judges=9, seed=3, label_fraction=0.3, tie_rate=0.05, missing_rate=0.1)
    return url


@pytest.fixture(scope="module")
def llmbar(llmbar_dir, tmp_path_factory):
    url = str(tmp_path_factory.mktemp("ds-llmbar") / "llmbar")
    ingest("llmbar", str(llmbar_dir), url)
    return url


def assert_same(result, model: DawidSkene, judge_ids: list[str]) -> None:
    assert result.judge_ids == judge_ids
    assert result.n_iter_ == model.n_iter_ and result.converged_ == model.converged_
    assert result.label_switched_ == model.label_switched_
    np.testing.assert_allclose(result.confusion_, model.confusion_, rtol=0, atol=1e-9)
    assert result.prior_ == pytest.approx(model.prior_, abs=1e-9)
    np.testing.assert_allclose(result.loss_history_, model.loss_history_, rtol=0, atol=1e-9)


@pytest.mark.parametrize("semi", [True, False])
def test_generated_panel_equals_in_memory_at_equal_iterations(generated, semi, spark, tmp_path):
    items, votes, y, judges = dense_reference(generated)
    assert (y >= 0).sum() not in (0, len(y)) and (votes == -1).any()  # partly labelled, with missing votes
    spec = DawidSkene(n_iter=6, tol=1e-8, fixed_iter=True, semi_supervised=semi)
    result = dawid_skene_spark(generated, spec, engine=ENGINE)
    model = clone(spec).fit(votes, y if semi else None)
    assert_same(result, model, judges)
    assert (
        result.passes == 7
        and result.n_items == len(items)
        and result.n_labelled == (int((y >= 0).sum()) if semi else 0)
    )
    url = result.write_posteriors(str(tmp_path / "post"))
    result.unpersist()
    post = pd.read_parquet(url).set_index("item_id").loc[items, "posterior"].to_numpy()
    np.testing.assert_allclose(post, model.posteriors_[:, 1], rtol=0, atol=1e-9)
    if semi:  # labelled items are clamped to their label
        np.testing.assert_array_equal(post[y >= 0], y[y >= 0])
    assert (tmp_path / "post" / "_SUCCESS").exists()
    with pytest.raises(InputError, match="released"):
        result.write_posteriors(str(tmp_path / "post2"))


def test_generated_panel_converges_like_in_memory(generated, spark):
    _, votes, y, judges = dense_reference(generated)
    spec = DawidSkene(n_iter=200, tol=1e-6, semi_supervised=True)
    result = dawid_skene_spark(generated, spec, engine=ENGINE)
    model = clone(spec).fit(votes, y)
    assert result.converged_ and 1 < result.n_iter_ < 200
    assert_same(result, model, judges)
    result.unpersist()


def test_llmbar_equals_in_memory(llmbar, spark):
    """Unsupervised on the 419 LLMBar items x 130 judges (the estimator's own default: labels unused)."""
    panel = load_panel(llmbar)
    spec = DawidSkene(n_iter=4, tol=1e-8, fixed_iter=True)
    result = dawid_skene_spark(llmbar, spec, engine=ENGINE)
    model = clone(spec).fit(panel.votes)
    assert_same(result, model, panel.judge_ids.tolist())
    assert result.n_items == panel.n_items == 419
    result.unpersist()


def test_no_verdicts_at_sample_is_an_input_error(generated, spark):
    with pytest.raises(InputError, match="no verdict rows with sample=5"):
        dawid_skene_spark(generated, DawidSkene(), sample=5, engine=ENGINE)
