"""One-pass replicate evaluation equals the in-memory pipeline (methods.pipeline + metric_table) to 1e-9.

The reference is computed here, split by split, with the inclusion study's own functions on the dense panel;
the one-pass path only ever sees per-replicate sums. Both engines (the in-memory panel source and a persisted
Spark table) and both calibrator inputs are checked, on a generated table and on LLMBar.
"""

from __future__ import annotations

import functools
import os
import warnings

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.engine.jobs.panel import Panel, load_panel
from judgecal_dist.engine.onepass import kernels
from judgecal_dist.engine.onepass.kernels import Partial, PassSpec, counts_kernel
from judgecal_dist.engine.onepass.replicates import evaluate_replicates
from judgecal_dist.engine.onepass.sources import PanelSource, spark_items_source
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.methods.pipeline import Settings, aggregate, calibrate, choose_panels
from judgecal_dist.splits import calibration_mask, group_keys
from judgecal_dist.stats.metrics import metric_table

FULL = os.environ.get("JUDGECAL_FULL") == "1"
SEEDS = list(range(20 if FULL else 4))
SPARK_SEEDS = list(range(10 if FULL else 2))  # a Spark pass costs ~1 s of job overhead on a 2-core machine
PANELS = ("all", "top3", "top5")
CALIBRATORS = ("none", "platt", "beta")
METRICS = ["nll", "brier", "ece", "accuracy"]
TOL = 1e-9
#: Beta calibration on LLMBar's ~200 calibration items: L-BFGS-B stops at a projected gradient of 1e-10 (its gtol)
#: on an ill-conditioned problem, so where it stops moves the fit by up to ~1e-9 in NLL when only the order of
#: summation changes; ``test_in_memory_beta_moves_by_summation_order_alone`` measures that on the in-memory path.
TOL_SMALL_BETA = 5e-9


def reference(panel: Panel, seeds, settings: Settings, panels=PANELS, fraction: float = 0.5) -> pd.DataFrame:
    """The in-memory path, split by split, exactly as the inclusion study runs it."""
    rows = []
    for seed in seeds:
        cal = calibration_mask(panel.group_keys, [seed], fraction)[0]
        v_cal, y_cal, v_ev, y_ev = panel.votes[cal], panel.labels[cal], panel.votes[~cal], panel.labels[~cal]
        chosen = choose_panels(panels, v_cal, y_cal, panel.judge_ids, panel.families, settings)
        for name, cols in chosen.items():
            s_cal, s_ev, _ = aggregate("one_coin", settings, v_cal[:, cols], y_cal, v_ev[:, cols])
            for cal_name in CALIBRATORS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    p = calibrate(cal_name, settings, s_cal, y_cal, {"ev": s_ev})["ev"]
                rows.append(
                    {"seed": seed, "panel": name, "calibrator": cal_name, "n_eval": len(y_ev)}
                    | metric_table(y_ev, p, eps=settings.eps)
                )
    return pd.DataFrame(rows)


def assert_equal(got: pd.DataFrame, ref: pd.DataFrame, beta_tol: float = TOL) -> None:
    keys = ["seed", "panel", "calibrator"]
    assert len(got) == len(ref) > 0
    merged = got.merge(ref, on=keys, how="inner", suffixes=("", "_ref"), validate="one_to_one")
    assert len(merged) == len(ref)
    assert (merged["n_eval"] == merged["n_eval_ref"]).all()
    tol = np.where(merged["calibrator"] == "beta", beta_tol, TOL)
    for m in METRICS:
        err = np.abs(merged[m] - merged[f"{m}_ref"])
        assert (err < tol).all(), f"{m}: max |one-pass - in-memory| = {err.max():.3g}"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("gen") / "panel")
    generate_panel(root, n_items=2000, n_judges=10, seed=7, pairs=True, missing_rate=0.05)
    return root


@pytest.fixture(scope="module")
def llmbar_root(llmbar_dir, tmp_path_factory) -> str:
    from judgecal_dist.io.ingest import ingest

    root = str(tmp_path_factory.mktemp("llmbar") / "llmbar")
    ingest("llmbar", str(llmbar_dir), root)
    return root


@pytest.mark.parametrize("calibrator_input", ["logit", "probability"])
@pytest.mark.parametrize("max_pattern_judges", [0, 3, 10])
def test_local_onepass_equals_in_memory_on_generated(generated, calibrator_input, max_pattern_judges):
    # 0: every panel fitted by passes; 3: top3 from vote-pattern counts, the rest by passes; 10: all by patterns.
    settings = Settings(calibrator_input=calibrator_input)
    panel = load_panel(generated)
    got = evaluate_replicates(
        PanelSource(panel, batch_items=700),
        SEEDS,
        0.5,
        panels=PANELS,
        settings=settings,
        max_pattern_judges=max_pattern_judges,
    )
    assert_equal(got, reference(panel, SEEDS, settings))
    if max_pattern_judges < 10:
        assert got.attrs["passes"] >= 4  # counts, patterns + ranges, >= 1 fit pass, metrics: never one per replicate
    else:
        assert got.attrs["passes"] == 2  # counts, then patterns: every fit and metric from the cell counts


def test_calibration_cache_gives_the_same_numbers_as_recomputing(generated, monkeypatch):
    # The worker-side cache of calibration inputs is an optimisation only: disabled, every pass recomputes them.
    panel = load_panel(generated)
    kwargs = dict(panels=PANELS, settings=Settings(), max_pattern_judges=0)
    cached = evaluate_replicates(PanelSource(panel, batch_items=700), SEEDS[:2], 0.5, **kwargs)
    assert kernels._CACHE  # the passes filled it
    monkeypatch.setattr(kernels, "CACHE_MB", 0.0)
    kernels._CACHE.clear()
    fresh = evaluate_replicates(PanelSource(panel, batch_items=700), SEEDS[:2], 0.5, **kwargs)
    assert not kernels._CACHE
    pd.testing.assert_frame_equal(cached, fresh, check_exact=True)


def test_partial_bytes_round_trip_sparse_and_dense():
    rng = np.random.default_rng(0)
    sparse = np.zeros(1000)
    sparse[rng.choice(1000, 30, replace=False)] = rng.normal(size=30)
    for values in (sparse, rng.normal(size=50), np.zeros(0)):
        part = Partial(values, rng.normal(size=4), rng.normal(size=4))
        back = Partial.from_bytes(part.to_bytes())
        for name in ("sum", "min", "max"):
            np.testing.assert_array_equal(getattr(back, name), getattr(part, name))
    assert len(Partial(sparse).to_bytes()) < len(Partial(rng.normal(size=1000)).to_bytes()) / 10


@pytest.mark.heavy  # ~1-2 min on a contended 2-core machine: ~30 Spark passes of ~1-3 s job overhead each
def test_spark_onepass_equals_in_memory_on_generated(spark, generated):
    settings = Settings(calibrator_input="logit", class_prior="empirical")
    source = spark_items_source(spark, generated, dataset=None, sample=0, where=generated)
    try:
        # top3 from pattern counts, the full panel and top5 by lockstep passes over the workers' cached inputs
        got = evaluate_replicates(source, SPARK_SEEDS, 0.4, panels=PANELS, settings=settings, max_pattern_judges=3)
    finally:
        source.release()
    assert_equal(got, reference(load_panel(generated), SPARK_SEEDS, settings, fraction=0.4))


@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.heavy)])
def test_onepass_equals_in_memory_on_llmbar(request, llmbar_root, engine):
    settings = Settings(calibrator_input="logit")
    panel = load_panel(llmbar_root)
    seeds = SEEDS if engine == "local" else SPARK_SEEDS
    if engine == "local":
        got = evaluate_replicates(PanelSource(panel, batch_items=97), seeds, 0.5, panels=PANELS, settings=settings)
    else:
        spark = request.getfixturevalue("spark")
        source = spark_items_source(spark, llmbar_root, dataset=None, sample=0, where=llmbar_root)
        try:
            got = evaluate_replicates(source, seeds, 0.5, panels=PANELS, settings=settings)
        finally:
            source.release()
    assert_equal(got, reference(panel, seeds, settings), beta_tol=TOL_SMALL_BETA)


def test_in_memory_beta_moves_by_summation_order_alone(llmbar_root):
    # The in-memory path on the same items in reverse order differs only in the order of its sums; the beta fits
    # then move by the same ~1e-10-1e-9 as the one-pass path does (which is why TOL_SMALL_BETA exists), while
    # the closed-form pipelines (none) do not move beyond round-off.
    settings = Settings(calibrator_input="logit")
    panel = load_panel(llmbar_root)
    flipped = Panel(
        **{
            **panel.__dict__,
            **{k: getattr(panel, k)[::-1].copy() for k in ("item_ids", "group_keys", "votes", "labels")},
        }
    )
    a, b = reference(panel, SEEDS, settings), reference(flipped, SEEDS, settings)
    diff = (a[METRICS] - b[METRICS]).abs().max(axis=1)
    assert diff[a["calibrator"] == "none"].max() < 1e-12
    assert diff[a["calibrator"] == "beta"].max() < TOL_SMALL_BETA


def _panel(votes: np.ndarray, labels: np.ndarray) -> Panel:
    n, j = votes.shape
    return Panel(
        dataset="toy",
        item_ids=np.array([f"i{i}" for i in range(n)], dtype=object),
        group_keys=group_keys([f"g{i}" for i in range(n)]),
        judge_ids=np.array([f"j{k}" for k in range(j)]),
        votes=votes.astype(np.int8),
        labels=labels.astype(np.int8),
        families=np.array([f"j{k}" for k in range(j)]),
    )


def test_degenerate_calibration_parts_take_the_in_memory_fallbacks():
    # Judge 0 votes only on the evaluation side of seed 0, so the calibration scores are constant there; a
    # replicate with one label class on its calibration part takes the constant-label fallback.
    rng = np.random.default_rng(3)
    n = 400
    labels = (rng.random(n) < 0.5).astype(np.int8)
    panel = _panel(np.where(rng.random((n, 3)) < 0.8, labels[:, None], 1 - labels[:, None]), labels)
    cal = calibration_mask(panel.group_keys, [0], 0.5)[0]
    votes = panel.votes.copy()
    votes[cal] = -1  # no verdict at all on the calibration side: every calibration score is the prior
    constant = _panel(votes, labels)
    single = _panel(panel.votes, np.where(cal, 1, labels))
    for case in (constant, single):
        for mode in ("logit", "probability"):
            settings = Settings(calibrator_input=mode, beta_penalty=0.0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = evaluate_replicates(PanelSource(case), [0], 0.5, panels=("all",), settings=settings)
            assert_equal(got, reference(case, [0], settings, panels=("all",)))
            assert set(got.loc[got["calibrator"] != "none", "fallback"]) <= {"constant_scores", "constant_labels"}
            assert got.loc[got["calibrator"] != "none", "fallback"].notna().all()


def test_bad_input_is_rejected_with_a_clear_error(generated):
    panel = load_panel(generated)
    source = PanelSource(panel)
    with pytest.raises(ConfigError, match="calibrators: the one-pass path supports"):
        evaluate_replicates(source, [0], 0.5, calibrators=("isotonic",))
    with pytest.raises(ConfigError, match="panels: the one-pass path supports 'all' and topK panels, got 'dedup'"):
        evaluate_replicates(source, [0], 0.5, panels=("all", "dedup"))
    with pytest.raises(ConfigError, match=r"max_pattern_judges: must be in \[0, 10\], got 11"):
        evaluate_replicates(source, [0], 0.5, max_pattern_judges=11)
    tiny = _panel(panel.votes[:1], panel.labels[:1])
    with pytest.raises(InputError, match=r"seed\(s\) \[0\]: calibration or evaluation part is empty"):
        evaluate_replicates(PanelSource(tiny), [0], 0.5)


def test_spark_source_rejects_unknown_dataset_and_sample(spark, generated):
    with pytest.raises(InputError, match="dataset: 'nope' not found"):
        spark_items_source(spark, generated, dataset="nope", sample=0, where=generated)
    with pytest.raises(InputError, match="no verdicts for dataset 'synthetic' with sample=3"):
        spark_items_source(spark, generated, dataset=None, sample=3, where=generated)


@pytest.mark.heavy  # ~30 s: two Spark item tables on a contended 2-core machine
@pytest.mark.parametrize("label_fraction", [1.0, 0.05])
def test_spark_items_equal_the_dense_panel(spark, tmp_path, label_fraction):
    # Mostly labelled tables are built by one groupBy of verdicts and labels; a labelled item without any verdict
    # sends the build to the join plan, which keeps it with every vote missing (as load_panel does); sparsely
    # labelled tables take the join plan directly. Either way the items equal the dense panel's.
    root = str(tmp_path / "panel")
    generate_panel(root, n_items=400, n_judges=6, seed=3, label_fraction=label_fraction)
    labels = pd.read_parquet(f"{root}/labels")
    dropped = labels.loc[labels["label"].isin(["A", "B"]), "item_id"].iloc[0]
    verdicts = pd.read_parquet(f"{root}/verdicts")
    for part in (tmp_path / "panel" / "verdicts").glob("*.parquet"):
        part.unlink()
    verdicts[verdicts["item_id"] != dropped].to_parquet(f"{root}/verdicts/part-0.parquet", index=False)
    panel = load_panel(root)
    assert (panel.votes[panel.item_ids == dropped] == -1).all()
    source = spark_items_source(spark, root, dataset=None, sample=0, where=root)
    try:
        spec = PassSpec((0, 1, 2), 0.5)
        got = source.map_reduce(functools.partial(counts_kernel, spec=spec)).sum
    finally:
        source.release()
    assert source.n_items == panel.n_items
    want = PanelSource(panel).map_reduce(functools.partial(counts_kernel, spec=spec)).sum
    np.testing.assert_array_equal(got, want)
