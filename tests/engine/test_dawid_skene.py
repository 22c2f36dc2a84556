"""fit_dawid_skene: the in-memory and the Spark engine give the same fit (iterations, parameters), and the Spark fit
meets crowd-kit's DawidSkene, an independent implementation, on the same table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.dawid_skene import VotePatterns, dawid_skene_model, fit_dawid_skene, read_item_votes
from judgecal_dist.engine.votes.codec import VERDICT_COLUMNS, item_votes
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.ingest import ingest
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene

SPARK = EngineConfig(spark_master="local[2]")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """700 items x 8 judges, 20% labelled, ties and missing verdicts, one judge below chance."""
    url = str(tmp_path_factory.mktemp("dsfit") / "panel")
    generate_panel(url, n_items=700, n_judges=8, seed=11, label_fraction=0.2, tie_rate=0.05, missing_rate=0.1)
    return url


@pytest.fixture(scope="module")
def llmbar(llmbar_dir, tmp_path_factory):
    url = str(tmp_path_factory.mktemp("dsfit-llmbar") / "llmbar")
    ingest("llmbar", str(llmbar_dir), url)
    return url


def assert_same_fit(a, b) -> None:
    """Same judges, items, iterations, stopping and parameters (up to the order of floating-point sums)."""
    assert a.judge_ids == b.judge_ids and a.n_items == b.n_items and a.n_labelled == b.n_labelled
    assert a.n_iter == b.n_iter and a.model.converged_ == b.model.converged_ and a.passes == b.passes
    assert a.model.label_switched_ == b.model.label_switched_
    np.testing.assert_allclose(a.confusion, b.confusion, rtol=0, atol=1e-9)
    assert a.prior == pytest.approx(b.prior, abs=1e-9)
    np.testing.assert_allclose(a.model.loss_history_, b.model.loss_history_, rtol=0, atol=1e-9)
    assert a.loglik == pytest.approx(b.loglik, rel=1e-12)


def test_generated_table_spark_equals_in_memory(generated, spark):
    local = fit_dawid_skene(generated, engine="local", config=SPARK)
    on_spark = fit_dawid_skene(generated, engine="spark", config=SPARK)
    assert (local.engine, on_spark.engine) == ("local", "spark")
    assert local.model.converged_ and 2 < local.n_iter < 100 and local.n_labelled > 0  # a real run to convergence
    assert_same_fit(local, on_spark)
    votes = item_votes(read_dataset_table(generated, "verdicts", VERDICT_COLUMNS), None, local.judge_ids).votes
    np.testing.assert_allclose(on_spark.model.predict_proba(votes), local.model.predict_proba(votes), atol=1e-9)


def test_auto_follows_the_stats_engine_rule(generated, spark):
    assert fit_dawid_skene(generated, n_iter=1, fixed_iter=True, config=SPARK).engine == "local"
    small_limit = SPARK.model_copy(update={"local_max_rows": 10})
    assert fit_dawid_skene(generated, n_iter=1, fixed_iter=True, config=small_limit).engine == "spark"


def test_llmbar_semi_supervised_spark_equals_in_memory(llmbar, spark):
    local = fit_dawid_skene(llmbar, engine="local", config=SPARK)
    on_spark = fit_dawid_skene(llmbar, engine="spark", config=SPARK)
    assert local.n_items == 419 and local.n_labelled == 419 and len(local.judge_ids) == 130
    assert_same_fit(local, on_spark)


def crowdkit_parameters(url: str, n_iter: int) -> tuple[float, np.ndarray, list[str]]:
    """crowd-kit's DawidSkene on the table's long frame, built with pandas (ties and nulls dropped)."""
    ck = pytest.importorskip("crowdkit.aggregation")
    verdicts = read_dataset_table(url, "verdicts").to_pandas()
    long = verdicts[verdicts["verdict"].isin(["A", "B"])]
    long = pd.DataFrame({"task": long["item_id"], "worker": long["judge_id"], "label": (long["verdict"] == "A") * 1})
    model = ck.DawidSkene(n_iter=n_iter, tol=-np.inf).fit(long)  # tol=-inf: exactly n_iter iterations
    judges = sorted(long["worker"].unique())
    errors = np.zeros((len(judges), 2, 2))
    for (worker, observed), row in model.errors_.iterrows():  # errors_[worker, observed][true] = P(v | y)
        errors[judges.index(worker), :, observed] = row[[0, 1]].to_numpy()
    return float(model.priors_[1]), errors, judges


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_spark_fit_meets_crowdkit_unsupervised(tmp_path, spark):
    url = str(tmp_path / "panel")  # every item keeps a vote: crowd-kit drops items without one
    generate_panel(url, n_items=500, n_judges=6, seed=4, label_fraction=0.0, missing_rate=0.05)
    prior, errors, judges = crowdkit_parameters(url, n_iter=8)
    crowdkit_like = dict(smoothing=0.0, eps=1e-10, fixed_iter=True, n_iter=8, semi_supervised=False)
    fit = fit_dawid_skene(url, engine="spark", config=SPARK, **crowdkit_like)
    assert fit.judge_ids == judges and fit.n_iter == 8 and not fit.model.label_switched_
    assert fit.prior == pytest.approx(prior, abs=1e-6)
    np.testing.assert_allclose(fit.confusion, errors, rtol=0, atol=1e-6)


def test_votes_in_memory():
    V = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 0], [0, 0, 1], [1, -1, 1], [0, 0, -1]], dtype=np.int8)
    y = np.array([1, -1, -1, -1, -1, 0])
    fit = fit_dawid_skene(V, y, n_iter=5, fixed_iter=True)
    reference = DawidSkene(n_iter=5, fixed_iter=True, tol=1e-6, semi_supervised=True).fit(V, y)
    assert fit.engine == "local" and fit.judge_ids == ["0", "1", "2"] and fit.n_labelled == 2
    np.testing.assert_array_equal(fit.confusion, reference.confusion_)
    with pytest.raises(ConfigError, match="engine: 'spark' needs a dataset URL"):
        fit_dawid_skene(V, y, engine="spark")
    with pytest.raises(InputError, match="y: required with semi_supervised=True"):
        fit_dawid_skene(V)


def test_item_votes_carry_their_labels():
    verdicts = pa.table(
        {
            "dataset": ["d"] * 4,
            "item_id": ["i1", "i1", "i2", "i2"],
            "group_id": ["i1", "i1", "i2", "i2"],
            "judge_id": ["j1", "j2", "j1", "j2"],
            "sample": [0] * 4,
            "verdict": ["A", "A", "B", "A"],
        }
    )
    labels = pa.table({"dataset": ["d"], "item_id": ["i1"], "label": ["A"]})
    votes = item_votes(verdicts, labels, ["j1", "j2"])
    fit = fit_dawid_skene(votes, n_iter=3, fixed_iter=True)
    assert fit.n_items == 2 and fit.n_labelled == 1
    with pytest.raises(ConfigError, match="labels: only with a vote matrix"):
        fit_dawid_skene(votes, [1, -1])


def test_from_parameters_scores_like_the_fit():
    V = np.array([[1, 1, 0], [0, 0, 1], [1, -1, 1], [0, 1, -1]], dtype=np.int8)
    fitted = DawidSkene().fit(V)
    rebuilt = DawidSkene.from_parameters(fitted.prior_, fitted.confusion_)
    np.testing.assert_array_equal(rebuilt.predict_proba(V), fitted.predict_proba(V))
    with pytest.raises(InputError, match=r"confusion: expected shape \(n_judges, 2, 2\), got \(3, 2\)"):
        DawidSkene.from_parameters(0.5, np.full((3, 2), 0.5))
    with pytest.raises(InputError, match="confusion: each row"):
        DawidSkene.from_parameters(0.5, np.full((3, 2, 2), 0.7))
    with pytest.raises(InputError, match=r"prior: must lie in \[0, 1\]"):
        DawidSkene.from_parameters(1.5, fitted.confusion_)


def test_patterns_keyed_once_equal_a_table_fit_per_fold(generated):
    """Votes read once for every judge, a panel's patterns keyed once, each fold's labels set latent: the fit of
    the table with those judges and those items latent (which reads and codes it again)."""
    judges = fit_dawid_skene(generated, n_iter=1, fixed_iter=True).judge_ids
    source = read_item_votes(generated, EngineConfig(), 0, judges, None)
    cols = np.array([5, 0, 3])  # a panel, columns out of order
    patterns = VotePatterns.of(source.votes, source.labels, cols)
    assert len(patterns.votes) <= 3**3 and len(patterns.pattern) == len(source.labels)
    item_ids = np.array(source.keys.column("item_id").to_pylist())
    labelled = item_ids[source.labels >= 0]
    for latent in (labelled[::2], labelled[1::2], labelled[:0]):
        model = patterns.fit(dawid_skene_model(n_iter=50), np.isin(item_ids, latent))
        direct = fit_dawid_skene(
            generated, engine="local", judge_ids=[judges[c] for c in cols], latent_items=set(latent), n_iter=50
        )
        assert model.n_iter_ == direct.n_iter and direct.n_labelled == len(labelled) - len(latent)
        np.testing.assert_allclose(model.confusion_, direct.confusion, rtol=1e-12)
        assert model.prior_ == pytest.approx(direct.prior, rel=1e-12)
        np.testing.assert_allclose(model.loss_history_, direct.model.loss_history_, rtol=1e-12)


def test_spark_cells_equal_in_memory_cells_and_fits(generated, spark):
    """One Spark job's vote-pattern cells: the in-memory items' cells (patterns, label states, counts), and the
    folds' fits from them equal the in-memory fits."""
    from judgecal_dist.engine.jobs.ds_cells import vote_cells_spark
    from judgecal_dist.methods.aggregation.cells import vote_cells

    judges = fit_dawid_skene(generated, n_iter=1, fixed_iter=True).judge_ids
    source = read_item_votes(generated, EngineConfig(), 0, judges, None)
    cells = vote_cells_spark(generated, engine=SPARK, judge_ids=judges)
    assert cells.judge_ids == judges and cells.counts.sum() == len(source.labels)
    expected = vote_cells(source.votes, source.labels.astype(np.int64))
    got = vote_cells(cells.votes, cells.labels.astype(np.int64))  # Spark's rows, grouped again by pattern, label
    keyed = {(*v, lab): n for v, lab, n in zip(map(tuple, expected[0]), expected[1], expected[3], strict=True)}
    found: dict = {}
    for v, lab, row in zip(map(tuple, got[0]), got[1], range(len(got[0])), strict=True):
        found[(*v, lab)] = cells.counts[got[2] == row].sum()
    assert found == keyed
    item_ids = np.array(source.keys.column("item_id").to_pylist())
    labelled = item_ids[source.labels >= 0]
    cols = np.array([1, 4, 2, 7])
    in_memory = VotePatterns.of(source.votes, source.labels, cols)
    on_spark = VotePatterns.of(cells.votes, cells.labels, cols, cells.counts)
    spark_ids = np.array([i or "" for i in cells.item_ids])
    for latent in (labelled[::3], labelled[:0]):
        a = in_memory.fit(dawid_skene_model(n_iter=40), np.isin(item_ids, latent))
        b = on_spark.fit(dawid_skene_model(n_iter=40), np.isin(spark_ids, latent))
        assert a.n_iter_ == b.n_iter_
        np.testing.assert_allclose(b.confusion_, a.confusion_, rtol=1e-12)
        assert b.prior_ == pytest.approx(a.prior_, rel=1e-12)


def test_panel_and_votes_from_one_read_equal_two_reads(generated):
    from judgecal_dist.engine.jobs.panel import load_panel, load_panel_and_votes

    panel, votes, whole = load_panel_and_votes(generated)
    assert whole  # one dataset, one sample: the coded rows are the table
    alone = load_panel(generated)
    np.testing.assert_array_equal(panel.votes, alone.votes)
    np.testing.assert_array_equal(panel.labels, alone.labels)
    again = read_item_votes(generated, EngineConfig(), 0, list(panel.judge_ids), panel.dataset)
    np.testing.assert_array_equal(votes.votes, again.votes)
    np.testing.assert_array_equal(votes.labels, again.labels)
    assert votes.keys.equals(again.keys)
