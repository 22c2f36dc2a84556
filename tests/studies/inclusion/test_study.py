"""The inclusion study end to end: real local Ray, local folders and the loopback S3 server, resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.cluster.ray import single_threaded_blas
from judgecal_dist.engine.jobs.panel import load_panel
from judgecal_dist.engine.jobs.stats import judge_cells, judge_summary
from judgecal_dist.errors import ConfigError
from judgecal_dist.splits import calibration_mask
from judgecal_dist.studies.inclusion import study as inclusion
from judgecal_dist.studies.runner import execute, prepare

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml"
FULL = os.environ.get("JUDGECAL_FULL") == "1"  # `make test-heavy`: the paper's 100 splits


@pytest.fixture(scope="module")
def panel_url(nine_judges) -> str:
    return nine_judges(1200, 3)


@pytest.fixture(scope="module")
def llmbar_url(llmbar_dir, tmp_path_factory) -> str:
    from judgecal_dist.io.ingest import ingest

    data = str(tmp_path_factory.mktemp("llmbar") / "llmbar")
    ingest("llmbar", str(llmbar_dir), data)
    return data


def _engine(**kw) -> EngineConfig:
    return EngineConfig(ray_num_cpus=2, **kw)


FAST = [
    "aggregators=[majority, one_coin, dawid_skene]",
    "calibrators=[none, platt, beta]",
    "panels=[all, top3]",
    "permutation_resamples=2000",
]


def test_replicate_is_pure_and_uses_the_keyed_split(panel_url):
    cfg = inclusion.Config(
        data=panel_url,
        replicates=2,
        aggregators=("majority", "one_coin"),
        calibrators=("none", "beta"),
        panels=("all", "top3"),
        permutation_resamples=500,
    )
    data = inclusion.load(cfg, _engine())
    panel = data.panel
    rep = inclusion.plan(cfg, data)[1]
    first, second = inclusion.run_replicate(data, rep), inclusion.run_replicate(data, rep)
    pd.testing.assert_frame_equal(first, second)
    metrics = first[first["kind"] == "metrics"]
    in_cal = calibration_mask(panel.group_keys, [rep.seed], cfg.calib_fraction)[0]
    assert (metrics["n_cal"] == in_cal.sum()).all() and (metrics["n_eval"] == (~in_cal).sum()).all()
    assert len(metrics) == 2 * 2 * 2
    # The paired difference is the difference of the two pipelines' own evaluation NLLs on the same items.
    full = metrics[metrics["panel"] == "all"].set_index(["aggregator", "calibrator"])["nll"]
    for row in metrics[metrics["panel"] == "top3"].itertuples():
        assert row.delta_nll == pytest.approx(row.nll - full[row.aggregator, row.calibrator], abs=1e-12)
        assert 0 < row.perm_p <= 1 and row.panel_size == 3
    reliability = first[first["kind"] == "reliability"]
    assert set(reliability["calibrator"]) == {"none", "beta"}
    assert reliability.groupby("calibrator")["count"].sum().eq((~in_cal).sum()).all()


def test_study_on_generated_panel(panel_url, tmp_path, ray_local):
    run = prepare(CONFIG, [f"data={panel_url}", "replicates=12", *FAST])
    url = execute(run, _engine(), output=str(tmp_path))
    folder = Path(url)
    assert (folder / "_SUCCESS").is_file()
    summary = json.loads((folder / "summary.json").read_text())
    records = {(r["aggregator"], r["calibrator"], r["panel"]): r for r in summary["results"]}
    expected = {
        (a, c, p)
        for a in ("majority", "one_coin", "dawid_skene")
        for c in ("none", "platt", "beta")
        for p in ("all", "top3")
    }
    assert set(records) == expected
    for rec in records.values():
        for metric in ("nll", "brier", "ece", "accuracy"):
            assert rec[f"{metric}_ci_low"] <= rec[metric] <= rec[f"{metric}_ci_high"]
            assert np.isfinite(rec[metric])
        assert rec["replicates"] == 12
        if rec["panel"] != "all":
            assert rec["delta_nll_ci_low"] <= rec["delta_nll"] <= rec["delta_nll_ci_high"]
            assert 0 < rec["perm_p"] <= 1
    # The generator has below-chance judges: weighting by posterior log-odds (which flips them) must beat
    # an unweighted vote in accuracy, and calibration must not worsen the one-coin NLL.
    assert records["one_coin", "none", "all"]["accuracy"] > records["majority", "none", "all"]["accuracy"]
    assert records["one_coin", "beta", "all"]["nll"] <= records["one_coin", "none", "all"]["nll"]
    # Split-conformal sets keep their finite-sample coverage (within bootstrap error of the mean over splits).
    for entry in summary["conformal"]:
        assert entry["coverage_ci_high"] >= 1 - entry["alpha"] - 0.01
    parts = sorted(p.name for p in (folder / "replicates").iterdir())
    assert len(parts) == 12
    for name in ("nll_grid.png", "nll_vs_panel_size.png", "reliability.png"):
        assert (folder / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (folder / "model").iterdir()) == ["model.json"]  # no legacy calibration.json
    model = json.loads((folder / "model" / "model.json").read_text())
    assert model["format"] == "judgecal.binary-pipeline/v1"
    assert [c["alpha"] for c in model["conformal"]] == [0.1, 0.2]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "succeeded" and manifest["config"]["replicates"] == 12
    assert manifest["inputs"][0]["files"] > 0
    assert "NaN" not in (folder / "summary.json").read_text()
    # Diagnostics: IRT shares partition the variance; every judge flagged as reliably below chance truly is one
    # (the generator's own accuracies are the reference), and the clearly-below-chance judges are caught.
    from judgecal_dist.io.dataset import read_report

    truth = {j["judge_id"]: j["accuracy"] for j in read_report(panel_url)["judges"]}
    diagnostics = summary["diagnostics"]
    assert sum(diagnostics["irt_variance_shares"].values()) == pytest.approx(1.0)
    assert all(truth[j] < 0.5 for j in diagnostics["below_chance_bayes"])
    assert {j for j, acc in truth.items() if acc < 0.42} <= set(diagnostics["below_chance_bayes"])
    # A rerun of the same config is the same run: nothing recomputed, same URL.
    again = execute(prepare(CONFIG, [f"data={panel_url}", "replicates=12", *FAST]), _engine(), output=str(tmp_path))
    assert again == url


def test_ray_and_serial_runs_are_identical(panel_url, tmp_path, ray_local):
    args = [f"data={panel_url}", "replicates=6", *FAST]
    on_ray = execute(prepare(CONFIG, args, run_id="ray"), _engine(), output=str(tmp_path))
    serial = execute(prepare(CONFIG, args, run_id="serial"), _engine(), output=str(tmp_path), serial=True)
    assert Path(on_ray, "summary.json").read_text() == Path(serial, "summary.json").read_text()


@pytest.mark.s3
def test_s3_output_gives_identical_summary(panel_url, tmp_path, s3_bucket, ray_local):
    import s3fs

    args = [f"data={panel_url}", "replicates=5", *FAST]
    local = execute(prepare(CONFIG, args, run_id="same"), _engine(), output=str(tmp_path))
    remote = execute(prepare(CONFIG, args, run_id="same"), _engine(), output=f"{s3_bucket}/results")
    assert remote == f"{s3_bucket}/results/inclusion/same"
    fs = s3fs.S3FileSystem()
    assert fs.exists(f"{remote}/_SUCCESS")
    assert fs.cat(f"{remote}/summary.json").decode() == Path(local, "summary.json").read_text()
    assert len(fs.ls(f"{remote}/replicates")) == 5
    manifest = fs.cat(f"{remote}/manifest.json").decode()
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in manifest


def test_killed_run_resumes_without_recomputing(panel_url, tmp_path):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "judgecal_dist.cli",
        "run",
        str(CONFIG),
        "--set",
        f"data={panel_url}",
        "--set",
        "replicates=40",
        "--run-id",
        "killed",
        "--output",
        str(out),
        "--serial",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    parts = out / "inclusion" / "killed" / "replicates"
    deadline = time.time() + 120
    while time.time() < deadline and (not parts.is_dir() or len(list(parts.glob("part-*.parquet"))) < 8):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.parquet")}
    assert 8 <= len(before) < 40, "the kill should land half-way"
    assert not (out / "inclusion" / "killed" / "_SUCCESS").exists()

    url = execute(
        prepare(CONFIG, [f"data={panel_url}", "replicates=40"], run_id="killed"),
        _engine(),
        output=str(out),
        serial=True,
    )
    after = {p.name: p.stat().st_mtime_ns for p in Path(url, "replicates").glob("part-*.parquet")}
    assert len(after) == 40
    assert all(after[name] == stamp for name, stamp in before.items())  # finished replicates not recomputed
    manifest = json.loads(Path(url, "manifest.json").read_text())
    assert manifest["resumed_replicates"] == len(before)
    fresh = execute(
        prepare(CONFIG, [f"data={panel_url}", "replicates=40"], run_id="fresh"), _engine(), output=str(out), serial=True
    )
    assert Path(url, "summary.json").read_text() == Path(fresh, "summary.json").read_text()


@pytest.mark.heavy
def test_llmbar_study(llmbar_url, tmp_path_factory, ray_local):
    n = 100 if FULL else 8
    extra = [] if FULL else ["aggregators=[majority, one_coin, dawid_skene]", "permutation_resamples=2000"]
    url = execute(
        prepare(CONFIG, [f"data={llmbar_url}", f"replicates={n}", *extra]),
        _engine(),
        output=str(tmp_path_factory.mktemp("r")),
    )
    summary = json.loads(Path(url, "summary.json").read_text())
    assert summary["panel"]["items"] == 419 and summary["panel"]["judges"] == 130
    records = {(r["aggregator"], r["calibrator"], r["panel"]): r for r in summary["results"]}
    # Spec 000 (LLMBar, 130 judges): the one-coin posterior is extreme before calibration, so every calibrator must
    # cut its NLL; calibrated one-coin must beat calibrated majority vote; dedup keeps one judge per backbone (6).
    for cal in ("platt", "temperature", "beta", "isotonic"):
        assert records["one_coin", cal, "all"]["nll"] < records["one_coin", "none", "all"]["nll"]
    assert records["one_coin", "beta", "all"]["nll"] < records["majority", "beta", "all"]["nll"]
    assert records["one_coin", "beta", "dedup"]["panel_size"] == 6
    assert all(0.5 < r["accuracy"] < 1.0 for r in summary["results"])


def test_llmbar_calibrated_full_panel_beats_top_k(llmbar_url):
    """The paper's central LLMBar claim at its own 100 splits, in process, as the data support it: one-coin + beta
    on all 130 judges has a lower mean evaluation NLL than on the top-3/5/10 judges chosen on the calibration half,
    but across splits of these 419 items the difference is not significant, and the report says so.

    Only the pipelines the claim names are fitted (about 5 s for 100 splits on one core, no Ray), through the
    study's own ``run_replicate`` and ``summarise``, so the asserted interval is the one the report prints.
    """
    config = inclusion.Config(
        data=llmbar_url,
        replicates=100,
        aggregators=("one_coin",),
        calibrators=("beta",),
        panels=("all", "top3", "top5", "top10"),
        permutation_resamples=200,  # the per-split p-values are not part of the claim
        controls=(),  # the sanity controls are tested in test_controls.py
    )
    data = inclusion.load(config, _engine())
    with single_threaded_blas():  # as on Ray: threaded BLAS makes the small fits several times slower
        frames = [inclusion.run_replicate(data, rep) for rep in inclusion.plan(config, data)]
    parts = pd.concat(frames, ignore_index=True)
    result = inclusion.summarise(config, parts, data)
    summary = result.summary.set_index("panel")
    # Measured once (100 splits): Delta NLL (top-k minus all) +0.0407 / +0.0306 / +0.0200 for top-3/5/10, split sd
    # 0.028 / 0.025 / 0.020, so the mean over 100 splits has an sd of 0.002-0.003 and the tolerance below is about
    # 2 of those: the direction of the point estimate is decided with margin, and the full panel wins in 95 / 90 /
    # 82 of the 100 splits. The splits share items, so the interval is the Nadeau-Bengio corrected t
    # (n_eval / n_cal ~ 1): t = 1.47 / 1.23 / 0.98 against a 5% critical value of 1.98, every interval includes 0
    # (a margin of 0.5 in t or more). Under the old bootstrap over split means all three excluded 0.
    measured_once = {"top3": 0.041, "top5": 0.031, "top10": 0.020}  # ours, not the paper's (its numbers are lost)
    critical = stats.t.ppf(0.975, config.replicates - 1)
    for k, delta in measured_once.items():
        row = summary.loc[k]
        assert row["delta_nll"] == pytest.approx(delta, abs=0.005)
        split = parts[(parts["kind"] == "metrics") & (parts["panel"] == k)]
        d = split["delta_nll"].to_numpy()
        assert (d > 0).mean() >= 0.75
        # independent closed form of the corrected resampled t
        se = d.std(ddof=1) * np.sqrt(1 / d.size + split["n_eval"].mean() / split["n_cal"].mean())
        assert row["delta_nll_t"] == pytest.approx(d.mean() / se, rel=1e-9)
        assert 0.5 < d.mean() / se < critical - 0.5
        assert row["delta_nll_ci_low"] == pytest.approx(d.mean() - critical * se, rel=1e-9)
        assert row["delta_nll_ci_low"] < 0 < row["delta_nll_ci_high"] and row["delta_nll_p"] > 0.1
    claims = [line for line in result.report.splitlines() if line.startswith("- one_coin + beta: top")]
    assert len(claims) == 3
    assert all("not significant across splits (interval includes 0)" in line for line in claims)
    assert "interval excludes 0" not in result.report
    # The paper's *** beside ours in the report, with the reason they differ (its tests take one split's items as
    # independent; across splits that share the items the difference is not significant).
    row = next(line for line in result.report.splitlines() if line.startswith("| After beta calibration all judges"))
    cells = row.split(" | ")
    assert cells[1] == "all judges better, p < 0.001 on all four datasets" and cells[3] == "no"
    assert "per-split permutation tests" in cells[4] and "not significant" in cells[4]
    for k in ("top3", "top5"):
        low, high = summary.loc[k, "delta_nll_ci_low"], summary.loc[k, "delta_nll_ci_high"]
        assert f"{k} {summary.loc[k, 'delta_nll']:+.4f} [{low:+.4f}, {high:+.4f}]" in cells[2]


@pytest.mark.spark
def test_spark_one_pass_counts_equal_the_panel_split_counts(llmbar_url, spark):
    """Cross-engine check: Spark's one-pass calibration counts for 20 splits equal the counts of the dense panel
    under the same keyed split (so every engine puts the same items on the same side)."""
    data = llmbar_url
    panel = load_panel(data)
    seeds = list(range(20))
    summary = judge_summary(judge_cells(data, seeds, 0.5, engine="spark"))
    cal = summary[summary["side"] == "calibration"].set_index(["replicate", "judge_id"])
    mask = calibration_mask(panel.group_keys, seeds, 0.5)  # (R, items)
    voted = (panel.votes >= 0).astype(np.int64)
    correct = (panel.votes == panel.labels[:, None]).astype(np.int64)
    votes_by_split, correct_by_split = mask @ voted, mask @ correct  # (R, J): every split in one product
    for r, seed in enumerate(seeds):
        got = cal.loc[seed].reindex(panel.judge_ids)
        assert got["votes"].fillna(0).astype(int).tolist() == votes_by_split[r].tolist()
        assert got["correct"].fillna(0).astype(int).tolist() == correct_by_split[r].tolist()


def test_orientations_preserve_correctness(panel_url):
    natural = load_panel(panel_url)
    correct = (natural.votes == natural.labels[:, None]) & (natural.votes >= 0)
    for orientation in ("randomized", "gold_positive"):
        other = load_panel(panel_url, orientation=orientation, orientation_seed=4)
        # Re-encoding never changes which votes are right, which are missing, or the item order.
        assert np.array_equal((other.votes == other.labels[:, None]) & (other.votes >= 0), correct)
        assert np.array_equal(other.votes < 0, natural.votes < 0)
    gold = load_panel(panel_url, orientation="gold_positive")
    assert (gold.labels == 1).all()
    randomized = load_panel(panel_url, orientation="randomized", orientation_seed=4)
    assert 0.4 < randomized.info["orientation_flipped_items"] / natural.n_items < 0.6


def test_llmbar_65_judge_variants_and_configuration_level_irt(llmbar_url):
    """The 65-judge LLMBar panels (one order; both orders agreeing) against the raw verdict rows, and the
    configuration-level 2PL fit of the diagnostics against a fit on a hand-collapsed correctness matrix."""
    from judgecal_dist.io.dataset import read_dataset_table
    from judgecal_dist.methods.selection.irt import TwoPLIRT, correctness_matrix
    from judgecal_dist.studies.inclusion.diagnostics import diagnose

    raw = read_dataset_table(llmbar_url, "verdicts", columns=["item_id", "judge_id", "verdict"]).to_pandas()
    code = raw["verdict"].map({"A": 1, "B": 0}).fillna(-1).astype(int)
    wide = raw.assign(v=code).pivot(index="item_id", columns="judge_id", values="v").fillna(-1).astype(int)
    panels = {}
    for grain in ("judge", "one_order", "both_orders"):
        cfg = inclusion.Config(data=llmbar_url, replicates=2, judge_grain=grain)
        panels[grain] = inclusion.load(cfg, _engine())
    full, one, both = (panels[g].panel for g in ("judge", "one_order", "both_orders"))
    assert full.n_judges == 130 and one.n_judges == both.n_judges == 65
    assert len(panels["both_orders"].judges) == 65
    ab = wide.loc[one.item_ids, [f"{c}/ab" for c in one.judge_ids]].to_numpy()
    ba = wide.loc[one.item_ids, [f"{c}/ba" for c in one.judge_ids]].to_numpy()
    np.testing.assert_array_equal(one.votes, ab)
    np.testing.assert_array_equal(both.votes, np.where(ab == ba, ab, -1))
    assert both.info["order_disagreements"] == ((ab >= 0) & (ba >= 0) & (ab != ba)).sum()
    diag = diagnose(full, seed=0, calib_fraction=0.5)["irt_configuration"]
    in_cal = calibration_mask(full.group_keys, [0], 0.5)[0]
    ref = TwoPLIRT().fit(correctness_matrix(np.where(ab == ba, ab, -1)[in_cal], full.labels[in_cal]))
    assert diag["configurations"] == 65
    for k, v in ref.variance_shares_.items():
        assert diag["variance_shares"][k] == pytest.approx(v, abs=1e-9)
    agree = [(a[(a >= 0) & (b >= 0)] == b[(a >= 0) & (b >= 0)]).mean() for a, b in zip(ab.T, ba.T, strict=True)]
    assert diag["position_consistency"] == pytest.approx(np.mean(agree), abs=1e-12)


def test_judge_grain_is_refused_without_two_orders(panel_url):
    with pytest.raises(ConfigError, match="judge_grain=one_order: no judge comes in two orders"):
        inclusion.load(inclusion.Config(data=panel_url, judge_grain="one_order"), _engine())
