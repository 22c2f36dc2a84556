"""The itc study (spec 003): pair construction on the shared files, the spec's findings, synthetic and generated data.

References are the spec's pair counts and findings (§7.8), the raw JSON files read independently, closed forms
(the sign rule when no tie label exists) and hand-worked permutation tests.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.ingest import ingest
from judgecal_dist.io.pairs import rb2_pair_verdicts
from judgecal_dist.io.score_collections import load_collections
from judgecal_dist.methods.repeated.vote_simulation import vote_counts
from judgecal_dist.studies.base import interval_note
from judgecal_dist.studies.itc import study as itc
from judgecal_dist.studies.itc.data import load_tasks
from judgecal_dist.studies.itc.inference import method_summary, permutation_pvalue, top_cluster, top_clusters
from judgecal_dist.studies.runner import execute, prepare

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "itc.yaml"
FULL = os.environ.get("JUDGECAL_FULL") == "1"  # `make test-heavy`: the paper's 100 splits


def _engine() -> EngineConfig:
    return EngineConfig(ray_num_cpus=2)


@pytest.fixture(scope="module")
def rb2_url(rb2_dir, tmp_path_factory) -> str:
    dest = str(tmp_path_factory.mktemp("rb2") / "ds")
    ingest("rb2-k8", str(rb2_dir), dest)
    return dest


@pytest.fixture(scope="module")
def pairs(rb2_url):
    collections, _ = load_collections(rb2_url)
    return rb2_pair_verdicts(collections, orientation_seed=0)


def test_six_pairs_per_example_with_the_spec_counts(pairs, rb2_dir):
    verdicts, labels, skipped = pairs
    assert skipped == {"criteria_both_k8:full": 1}  # the one example with an all-null response (spec 003 §7.8)
    base_full = verdicts.to_pandas().query("judge_id == 'full/base'").drop_duplicates(["dataset", "item_id"])
    counts = base_full.groupby("dataset").size().to_dict()
    assert counts == {
        "rb2k8/Factuality": 2844,
        "rb2k8/Focus": 2970,
        "rb2k8/Math": 1098,
        "rb2k8/Precise IF": 954,
        "rb2k8/Safety": 2514,
    }
    per_example = labels.groupby(["dataset", "group_id"])["label"].agg(lambda s: (s == "tie").sum())
    assert (per_example == 3).all()
    assert labels.groupby(["dataset", "group_id"]).size().eq(6).all()
    # Votes against the raw file: first base example (id 282, Factuality), full tier, every pair and sample.
    with gzip.open(rb2_dir / "base_both_k8.jsonl.gz", "rt") as fh:
        record = json.loads(fh.readline())
    scores = record["full_scores"]
    rows = verdicts.to_pandas().query("judge_id == 'full/base' and dataset == 'rb2k8/Factuality' and group_id == '282'")
    assert len(rows) == 6 * 8
    for item_id, g in rows.groupby("item_id"):
        a, b = (int(x) for x in item_id.split(":")[1].split("-"))
        expected = ["A" if x > y else "B" if x < y else "tie" for x, y in zip(scores[a], scores[b], strict=True)]
        assert g.sort_values("sample")["verdict"].tolist() == expected
        label = labels.set_index(["dataset", "item_id"]).loc[("rb2k8/Factuality", item_id), "label"]
        assert label == ("A" if a == 0 else "B" if b == 0 else "tie")


def test_orientation_coin_changes_neither_davidson_nor_sc(rb2_url):
    config = itc.Config(data=rb2_url, methods=("davidson", "sc"), replicates=1)
    tables = []
    for seed in (0, 1):
        data = load_tasks(rb2_url, (4, 8), engine=_engine(), orientation_seed=seed)
        data = type(data)(tasks=tuple(t for t in data.tasks if t.judge_id == "mini/base"), source=data.source)
        tables.append(itc.run_replicate(data, itc.Replicate(seed=3, config=config)))
    a, b = (t.set_index(["dataset", "n", "method"]).sort_index() for t in tables)
    assert np.allclose(a[["mae", "pa", "rev"]], b[["mae", "pa", "rev"]])
    assert np.allclose(a["beta"].dropna(), b["beta"].dropna(), atol=1e-6)


def _indicative(summary: dict) -> pd.DataFrame:
    rows = pd.DataFrame(summary["results"])
    return rows[(rows["judge_id"] == "full/base") & (rows["n"] == 8)].pivot(
        index="dataset", columns="method", values="mae"
    )


@pytest.mark.heavy
def test_study_on_shared_files_reproduces_the_spec_findings(rb2_url, tmp_path, ray_local):
    # Reduced mode: 20 splits and 2 starts per fit (the NLL is convex: every start reaches the same optimum).
    args = [f"data={rb2_url}"] + ([] if FULL else ["replicates=20", "n_starts=2"])
    url = execute(prepare(CONFIG, args), _engine(), output=str(tmp_path))
    summary = json.loads(Path(url, "summary.json").read_text())
    findings = summary["findings"]
    # The weakest judge, read off the records here: highest mean SC MAE at n = 8, and the largest mean gap of SC
    # over Davidson. nano/base's gap exceeds the runner-up's by 0.063 (split sd 0.013): decided at any count.
    records = pd.DataFrame(summary["results"])
    at8 = records[records["n"] == 8].pivot_table(index=["judge_id", "dataset"], columns="method", values="mae")
    by_judge = at8.groupby(level="judge_id").mean()
    assert by_judge["sc"].idxmax() == "nano/base" == (by_judge["sc"] - by_judge["davidson"]).idxmax()
    assert findings["weakest_judge_gains_most"]["weakest_judge (highest SC MAE)"] == "nano/base"
    assert findings["weakest_judge_gains_most"]["holds"]  # the flag agrees with the records just read
    if FULL:  # the findings as the spec states them, cell by cell, at its 100 splits, read off the records
        mae = records.pivot_table(index=["judge_id", "dataset", "n"], columns="method", values="mae")
        big = mae[mae.index.get_level_values("n") >= 4]
        assert (big["davidson"] < big["sc"]).all() and findings["davidson_below_sc_for_n_ge_4"]["holds"]
        change = mae.xs(8, level="n") - mae.xs(2, level="n")
        flat = (change["sc"] >= -0.01).all() and (change["davidson"] <= 0.01).all()
        assert flat and findings["sc_flat_or_worse_as_n_grows"]["holds"]
        pif = records[(records["dataset"] == "rb2k8/Precise IF") & (records["method"] == "davidson")]
        pif = pif[pif["n"] == 8]
        assert (pif["pred_tie_rate"] >= 0.9).all() and findings["tie_collapse_precise_if"]["holds"]
    else:
        _assert_findings_at_20_splits(records, findings)
    # Spec 003 §7.8 indicative values (n = 8, base/full, 100 splits), MAE Ours / SC.
    mae = _indicative(summary)
    paper = {
        "Factuality": (0.377, 0.418),
        "Focus": (0.416, 0.435),
        "Math": (0.443, 0.462),
        "Precise IF": (0.507, 0.592),
        "Safety": (0.262, 0.307),
    }
    tol = 0.01 if FULL else 0.03  # Davidson's MAE has a split sd of 0.04-0.05: 2 and 3 sds of the mean over splits
    for subset, (ours, sc) in paper.items():
        assert mae.loc[f"rb2k8/{subset}", "davidson"] == pytest.approx(ours, abs=tol)
        assert mae.loc[f"rb2k8/{subset}", "sc"] == pytest.approx(sc, abs=tol)
    assert (records["mae"] >= 1 - records["pa"] - 1e-12).all()  # MAE >= 1 - PA (spec 003 §5)
    constant = records[records["method"] == "constant_tie"]
    assert ((constant["mae"] - 0.5).abs() < 0.02).all()  # half the pairs are ties by construction
    assert set(summary["skipped_methods"]) == {"soft_sc_mean", "soft_sc_min", "soft_sc_product", "ci_sc"}
    assert len(list(Path(url, "figures").glob("mae_vs_n_*.png"))) == 5
    model = json.loads(Path(url, "model", "model.json").read_text())
    assert model["format"] == "judgecal.davidson/v2" and len(model["judges"]) == 5 and model["n"] == 8
    assert summary["recommendation"]["exported"].startswith(f"`{model['name']}` as `model/model.json`")


def _assert_findings_at_20_splits(rows: pd.DataFrame, findings: dict) -> None:
    """The spec's itc findings at 20 splits, each with a margin measured once on the shared files at 100 splits.

    The numbers below are means and split-to-split sds over those 100 splits; the chance that 20 other splits
    fail an assertion (normal approximation of each cell's mean over splits) is given with each.
    """
    mae = rows.pivot_table(index=["judge_id", "dataset", "n"], columns="method", values="mae")
    gap = mae["sc"] - mae["davidson"]
    per_n = findings["davidson_below_sc_for_n_ge_4"]["per_n"]
    for n, cells_below in ((4, 23), (6, 24), (8, 24)):
        # Averaged over the 25 judge x subset cells Davidson's MAE is 0.063 / 0.075 / 0.077 below SC's at
        # n = 4 / 6 / 8 (sd of the 25-cell mean over splits 0.011: 25+ sds at 20 splits).
        assert gap.xs(n, level="n").mean() > 0.04
        # Cell by cell the smallest gaps are within split noise (full/base Math at n = 4: 0.007, sd 0.054), so
        # the spec's 25 of 25 is allowed 2 flips at n = 4 and 1 at n = 6, 8 (chance of more: 0.5% / 0.5% / 0.2%).
        assert per_n[str(n)]["davidson_below_sc"] >= cells_below
    # SC gets worse from n = 2 to 8 in every cell (by 0.03 or more) and Davidson does not (largest mean change
    # +0.001, sd 0.023 for mini/base Safety): a tolerance of 0.02 instead of the spec's 0.01, which 20 splits
    # resolve at about 2 sds only (chance of failing 8%); at 0.02 the chance is below 0.1%.
    change = mae.xs(8, level="n") - mae.xs(2, level="n")
    assert (change["sc"] >= -0.02).all() and (change["davidson"] <= 0.02).all()
    # Precise IF collapses to "tie": Davidson's predicted-tie rate at n = 8 is 0.92-0.97 per judge (split sd
    # 0.07-0.16) and 0.951 pooled over judges (sd 0.088); the spec's 0.9 per judge is decided only for the pooled
    # rate (2.6 sds at 20 splits); each judge is held to 0.8 (3.3 sds or more). MAE and PA stay within 0.02 of 0.5
    # (2.9 sds or more).
    pif = rows[(rows["dataset"] == "rb2k8/Precise IF") & (rows["method"] == "davidson") & (rows["n"] == 8)]
    assert len(pif) == 5 and pif["pred_tie_rate"].mean() >= 0.9 and (pif["pred_tie_rate"] >= 0.8).all()
    assert ((pif["mae"] - 0.5).abs() <= 0.02).all() and ((pif["pa"] - 0.5).abs() <= 0.02).all()


def test_synthetic_g2_study(tmp_path):
    args = ["data=synthetic:g2", "replicates=6", "synthetic_items=2000", "budgets=[2, 4, 12]"]
    url = execute(prepare(CONFIG, args), _engine(), output=str(tmp_path), serial=True)
    summary = json.loads(Path(url, "summary.json").read_text())
    rows = pd.DataFrame(summary["results"])
    assert set(rows["method"]) == set(itc.Config(data="synthetic:g2").methods)
    mae = rows.pivot_table(index=["judge_id", "n"], columns="method", values="mae")
    assert (mae.xs(12, level="n")["davidson"] < mae.xs(12, level="n")["sc"]).all()
    # The finding's verdict against its statement read off the records: Davidson below SC in every cell at n >= 4.
    below = mae[mae.index.get_level_values("n") >= 4]
    assert summary["findings"]["davidson_below_sc_for_n_ge_4"]["holds"] == bool((below["davidson"] < below["sc"]).all())
    assert (below["davidson"] < below["sc"]).all()  # G2 at 2,000 items: the finding itself, not just its flag
    # Top cluster recomputed from the per-split losses: rank by mean MAE, keep methods until the first that the
    # sign-flip test over all splits (spec 003 section 5: joint flips, T = mean over splits) separates at 5%.
    parts = pd.read_parquet(Path(url, "replicates"))
    flagged = rows.set_index(["judge_id", "n", "method"])["top_cluster_mae"]
    for (judge, n), cell in parts.groupby(["judge_id", "n"]):
        by = {m: g.sort_values("seed") for m, g in cell.groupby("method")}

        def p(a: str, b: str, by: dict = by) -> float:
            # By hand: column r of every split's flipped means is one joint resample; p = (1 + #|T*| >= |T|)/(R + 1).
            t = np.mean(by[a]["mae"].to_numpy() - by[b]["mae"].to_numpy())
            flipped = [np.stack(by[m]["perm_mae"].to_numpy()).astype(np.float64) for m in (a, b)]
            t_star = (flipped[0] - flipped[1]).mean(axis=0)
            return (1 + np.sum(np.abs(t_star) >= abs(t) - 1e-12)) / (len(t_star) + 1)

        ranked = sorted(by, key=lambda m, by=by: by[m]["mae"].mean())
        cluster = ranked[:1]
        for m in ranked[1:]:
            if any(p(m, c) < 0.05 for c in cluster):
                break
            cluster.append(m)
        assert {m for m in by if flagged[(judge, n, m)]} == set(cluster), (judge, n)
        assert "decisive_majority" not in cluster  # clearly worst at 2000 items: the flag must discriminate
    assert not flagged.all()
    assert interval_note(0.95, spread_over_splits=True) in Path(url, "report.md").read_text()
    again = execute(prepare(CONFIG, args), _engine(), output=str(tmp_path), serial=True)
    assert again == url


def test_generated_panel_without_tie_labels_gives_the_sign_rule(tmp_path):
    from judgecal_dist.io.synthetic import generate_panel

    dest = str(tmp_path / "panel")
    generate_panel(dest, n_items=600, n_judges=2, n_samples=8, tie_rate=0.2, scores=True, missing_rate=0.05, seed=5)
    config = itc.Config(data=dest, budgets=(2, 8, 9), replicates=2)
    data = itc.load(config, _engine())
    assert all(t.votes is not None for t in data.tasks)
    # 8 samples per judge: a budget of 9 only repeats the counts of 8, and is reported (not silently used).
    assert data.info["bad_input"]["budgets_above_samples"] == {"synthetic|judge-000": [9], "synthetic|judge-001": [9]}
    table = itc.run_replicate(data, itc.plan(config, data)[0])
    # No tie label: eta0 runs to its lower bound and Davidson equals sign(c+ - c-) (spec 003 §7.8-7.9).
    dav = table[table["method"] == "davidson"]
    assert dav["at_bound"].str.contains("eta0").all()
    merged = dav.merge(table[table["method"] == "decisive_majority"], on=["judge_id", "n"], suffixes=("", "_dm"))
    assert np.allclose(merged["mae"], merged["mae_dm"])
    assert {"soft_sc_mean", "ci_sc"} <= set(table["method"])


@pytest.mark.spark
def test_budget_vote_counts_spark_equals_local(tmp_path, spark, pairs):
    from judgecal_dist.engine.jobs.ensemble import budget_vote_counts
    from judgecal_dist.io.synthetic import generate_panel

    dest = str(tmp_path / "panel")
    generate_panel(dest, n_items=300, n_judges=3, n_samples=6, tie_rate=0.3, missing_rate=0.1, seed=2)
    local = budget_vote_counts(dest, [2, 6], engine="local")
    on_spark = budget_vote_counts(dest, [2, 6], engine="spark")
    pd.testing.assert_frame_equal(local, on_spark, check_dtype=False)
    six = local[local["budget"] == 6]
    assert (six[["n_A", "n_tie", "n_B", "n_missing"]].sum(axis=1) == 6).all()
    derived = pairs[0].slice(0, 40_000)  # in-memory pair verdicts of the shared files go through the same job
    pd.testing.assert_frame_equal(
        budget_vote_counts(derived, [4, 8], engine="local"),
        budget_vote_counts(derived, [4, 8], engine="spark"),
        check_dtype=False,
    )


def test_calibration_part_is_exact_size_and_pure(rb2_url):
    data = load_tasks(rb2_url, (2, 8), engine=_engine())
    task = data.tasks[0]
    mask = itc.calibration_part(task, 7, 0.05)
    assert mask.sum() == int(np.floor(0.05 * task.n_items + 0.5))
    assert (mask == itc.calibration_part(task, 7, 0.05)).all() and (mask != itc.calibration_part(task, 8, 0.05)).any()
    grouped = itc.calibration_part(task, 7, 0.05, split="group")
    per_group = pd.Series(grouped).groupby(task.group_keys).nunique()
    assert (per_group == 1).all()


def test_permutation_pvalue_and_top_cluster():
    rng = np.random.default_rng(0)
    flips = rng.choice([-1.0, 1.0], size=(20, 99, 50))
    loss_a, loss_b = rng.random((20, 50)), rng.random((20, 50)) + 1.0
    fa, fb = (np.einsum("srn,sn->sr", flips, x) / 50 for x in (loss_a, loss_b))
    assert permutation_pvalue(loss_a.mean(1), loss_b.mean(1), fa, fb) == pytest.approx(1 / 100)
    assert permutation_pvalue(loss_a.mean(1), loss_a.mean(1), fa, fa) == 1.0
    assert top_cluster({"a": 0.7, "b": 0.6, "c": 0.2}, lambda x, y: 0.01, lower_is_better=False, alpha=0.05) == ["a"]


def _fixed_data_splits(n_splits: int, shift_in_se: float, seed: int = 0, shared_flips: bool = True) -> pd.DataFrame:
    """Parts of two methods on ``n_splits`` random half splits of ONE fixed set of 400 items (one itc cell).

    The items' loss differences have a sample mean of ``shift_in_se`` standard errors: on this data no test can
    know more than that, however many splits re-use the items. ``shared_flips``: each resample gives an item one
    sign in every split (the study's joint flips); False: every split draws its own signs.
    """
    rng = np.random.default_rng(seed)
    n, perms = 400, 199
    base = rng.random(n)
    diff = rng.normal(0.0, 0.3, n)
    diff += shift_in_se * diff.std(ddof=1) / np.sqrt(n) - diff.mean()
    loss = {"a": base, "b": base + diff}
    rows = []
    signs = rng.choice([-1.0, 1.0], size=(perms, n))
    for s in range(n_splits):
        ev = rng.permutation(n)[: n // 2]
        flips = signs[:, ev] if shared_flips else rng.choice([-1.0, 1.0], size=(perms, ev.size))
        for method, x in loss.items():
            rows.append(
                {"seed": s, "dataset": "d", "judge_id": "j", "n": 4, "method": method, "n_cal": n - ev.size}
                | {"n_eval": ev.size, "mae": x[ev].mean(), "pa": 1 - x[ev].mean() / 2, "rev": 0.0}
                | {"pred_tie_rate": 0.0, "perm_mae": flips @ x[ev] / ev.size, "perm_pa": -flips @ x[ev] / 2 / ev.size}
            )
    return pd.DataFrame(rows)


def test_top_cluster_is_not_fooled_by_splits_that_share_items():
    """A difference of 1.5 standard errors on fixed data stays undecided at 100 splits under joint flips that give
    an item one sign in every split; flipping each split on its own (re-used items as new evidence) calls it
    significant."""
    config = itc.Config(data="synthetic:g2")
    parts = _fixed_data_splits(100, shift_in_se=1.5)
    summary = top_clusters(config, parts, method_summary(config, parts)).set_index("method")
    assert summary["top_cluster_mae"].all()  # both methods: the data cannot separate them
    assert 0.05 < summary.at["b", "p_vs_best_mae"] < 0.5
    naive = _fixed_data_splits(100, shift_in_se=1.5, shared_flips=False)
    by = {m: g.sort_values("seed") for m, g in naive.groupby("method")}
    pooled = permutation_pvalue(*(by[m]["mae"].to_numpy() for m in "ab"), *(np.stack(by[m]["perm_mae"]) for m in "ab"))
    assert pooled < 0.01  # flips drawn per split: overconfident on the same data
    # A real difference (5 standard errors) is still found.
    strong = _fixed_data_splits(100, shift_in_se=5.0)
    clusters = top_clusters(config, strong, method_summary(config, strong)).set_index("method")
    assert clusters["top_cluster_mae"].to_dict() == {"a": True, "b": False}


def test_itc_intervals_are_the_papers_error_bars_inside_the_range():
    """Mean +- 1.96 SD/sqrt(S) over splits (spec 003 section 5), by hand on the logit scale of MAE's [0, 2] and
    PA's [0, 1]: the ends stay inside, and the bars narrow as 1/sqrt(S) (they show the spread over splits)."""
    config = itc.Config(data="synthetic:g2")
    parts = _fixed_data_splits(400, shift_in_se=1.0)
    width = {}
    for s in (25, 400):
        group = parts[(parts["seed"] < s) & (parts["method"] == "a")]
        row = method_summary(config, parts[parts["seed"] < s]).set_index("method").loc["a"]
        for metric, top in (("mae", 2.0), ("pa", 1.0)):
            x = group[metric].to_numpy()
            u = x.mean() / top
            step = 1.959964 * x.std(ddof=1) / np.sqrt(s) / (top * u * (1 - u))
            expected = top / (1 + np.exp(-(np.log(u / (1 - u)) + np.array([-step, step]))))
            got = np.array([row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]])
            np.testing.assert_allclose(got, expected, rtol=1e-6)
            assert 0 < got[0] < x.mean() < got[1] < top
        width[s] = row["mae_ci_high"] - row["mae_ci_low"]
    assert width[400] / width[25] == pytest.approx(0.25, rel=0.15)


def test_config_errors():
    with pytest.raises(ConfigError, match=r"methods=\[oracle\]: must be a non-empty list, each one of davidson"):
        prepare(CONFIG, ["data=synthetic:g2", "methods=[oracle]"])
    with pytest.raises(ConfigError, match="split=prompt: must be one of item, group"):
        prepare(CONFIG, ["data=synthetic:g2", "split=prompt"])


def test_davidson_accuracy_rule_predicts_the_mode_and_gains_pairwise_accuracy():
    """The 0/1-loss rule (mode of the fitted Davidson distribution) against the MAE rule (median) on G2 data."""
    from judgecal_dist.methods.repeated.davidson import DavidsonAggregator

    cfg = itc.Config(
        data="synthetic:g2", replicates=3, synthetic_items=3000, budgets=(4,), methods=("davidson", "davidson_accuracy")
    )
    data = itc.load(cfg, _engine())
    parts = pd.concat([itc.run_replicate(data, rep) for rep in itc.plan(cfg, data)])
    task, rep = data.tasks[0], itc.plan(cfg, data)[0]
    cal = itc.calibration_part(task, rep.seed, cfg.calib_fraction, cfg.split)
    model = DavidsonAggregator(decision="accuracy", n_starts=cfg.n_starts, random_state=rep.seed)
    mode = model.fit(task.counts[0][cal], task.labels[cal]).predict(task.counts[0][~cal])
    proba = model.predict_proba(task.counts[0][~cal])
    np.testing.assert_array_equal(mode, np.array([-1, 0, 1])[proba.argmax(axis=1)])  # the mode, by definition
    row = parts[
        (parts["seed"] == rep.seed) & (parts["judge_id"] == task.judge_id) & (parts["method"] == "davidson_accuracy")
    ]
    assert row["pa"].iloc[0] == pytest.approx((mode == task.labels[~cal]).mean())
    mean = parts.groupby("method")[["pa", "mae"]].mean()
    # Each rule wins its own loss (up to sampling noise on 3 splits).
    assert mean.loc["davidson_accuracy", "pa"] >= mean.loc["davidson", "pa"] - 0.005
    assert mean.loc["davidson", "mae"] <= mean.loc["davidson_accuracy", "mae"] + 0.005


def test_item_without_a_verdict_at_a_budget_is_kept_as_a_tie_and_reported(tmp_path):
    """An item whose first samples are absent has no row at the small budget: counts (0, 0, 0), not a failure."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from judgecal_dist.io.synthetic import generate_panel

    dest = tmp_path / "panel"
    generate_panel(str(dest), n_items=200, n_judges=1, n_samples=6, tie_rate=0.2, scores=True, missing_rate=0, seed=3)
    path = next((dest / "verdicts").glob("*.parquet"))
    rows = pq.read_table(path).to_pandas()
    gone, short = sorted(rows["item_id"].unique())[:2]
    # `gone` keeps samples 3-5 only (no verdict among its first 2), `short` keeps one sample (fewer than 2).
    drop = ((rows["item_id"] == gone) & (rows["sample"] < 3)) | ((rows["item_id"] == short) & (rows["sample"] > 0))
    pq.write_table(pa.Table.from_pandas(rows[~drop], preserve_index=False, schema=pq.read_schema(path)), path)
    for mode in ("first", "random"):
        config = itc.Config(data=str(dest), budgets=(2, 6), replicates=1, calib_fraction=0.5, budget_samples=mode)
        data = itc.load(config, _engine())
        task = data.tasks[0]
        i, j = (int(np.flatnonzero(task.item_ids == x)[0]) for x in (gone, short))
        assert task.counts[0, i].tolist() == [0, 0, 0] and task.counts[0, j].sum() == 1
        assert task.counts[1, i].sum() == 3 and task.counts[1, j].sum() == 1
        assert data.info["bad_input"]["items_without_verdict"] == {"synthetic|judge-000": {"n=2": 1}}
        assert data.info["bad_input"]["counts"]["items_without_verdict_at_n=2"] == 1
        rep = itc.plan(config, data)[0]
        cal = itc.calibration_part(task, rep.seed, config.calib_fraction)
        order = itc.sample_order(task, rep.seed, 0) if mode == "random" else None
        preds, _, no_verdict = itc._predictions(task, 0, cal, rep, order)
        counts = task.counts[0] if order is None else vote_counts(np.take_along_axis(task.votes, order, axis=1), 2)
        # A random budget draws among the item's own samples: `short` keeps its one vote, `gone` gets 2 of its 3.
        assert counts[j].sum() == 1 and counts[i].sum() == (0 if mode == "first" else 2)
        assert task.present is not None and task.present.sum(axis=1)[[i, j]].tolist() == [3, 1]
        for seed in range(20):
            drawn = itc.sample_order(task, seed, 0)
            assert drawn[j, 0] == 0 and set(drawn[i, :3]) == {3, 4, 5}
        empty = counts[~cal].sum(axis=1) == 0
        assert no_verdict == empty.sum() and (mode == "random" or empty.sum() == int(not cal[i]))
        # The all-missing rule: every counts-based method answers a tie where there is no vote.
        for method in ("davidson", "sc", "decisive_majority", "soft_sc_mean", "ci_sc"):
            assert (preds[method][empty] == 0).all(), method
        table = itc.run_replicate(data, rep)
        assert (table.loc[table["n"] == 2, "n_eval_no_verdict"] == no_verdict).all()
