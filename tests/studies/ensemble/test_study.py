"""The ensemble study on the shared rb2-k8 files against every number spec/004.md §4 marks computable (S).

Expected values are the spec's published figures (the paper's tables, and the spec's "computed" column where the
paper rounds); nothing here was produced by the code under test. The full 2000-resample bootstrap runs in the
default suite: the whole study takes a few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.dataset import write_dataset
from judgecal_dist.io.ingest import ingest
from judgecal_dist.studies.runner import execute, prepare

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "judgecal_dist" / "studies" / "configs" / "ensemble.yaml"
SUBSETS = ["Factuality", "Focus", "Math", "Precise IF", "Safety"]


def _engine() -> EngineConfig:
    return EngineConfig(ray_num_cpus=2)


@pytest.fixture(scope="module")
def rb2_url(rb2_dir, tmp_path_factory) -> str:
    dest = str(tmp_path_factory.mktemp("rb2") / "ds")
    ingest("rb2-k8", str(rb2_dir), dest)
    return dest


def _run(url: str, out: Path, *overrides: str, serial: bool = True) -> tuple[dict, Path]:
    folder = Path(execute(prepare(CONFIG, [f"data={url}", *overrides]), _engine(), output=str(out), serial=serial))
    return json.loads((folder / "summary.json").read_text()), folder


@pytest.fixture(scope="module")
def default_run(rb2_url, tmp_path_factory) -> tuple[dict, Path]:
    return _run(rb2_url, tmp_path_factory.mktemp("ens-default"))


@pytest.fixture(scope="module")
def compat_run(rb2_url, tmp_path_factory) -> tuple[dict, Path]:
    return _run(rb2_url, tmp_path_factory.mktemp("ens-id"), "join_key=id")


def _row(summary: dict, tier: str, variant: str, k: int, join: str = "own") -> dict:
    [row] = [
        r for r in summary["results"] if (r["tier"], r["prompt_variant"], r["k"], r["join"]) == (tier, variant, k, join)
    ]
    return row


def _subsets(summary: dict, tier: str, variant: str, k: int, join: str = "own") -> pd.DataFrame:
    rows = pd.DataFrame(summary["by_subset"])
    sel = (rows["tier"] == tier) & (rows["prompt_variant"] == variant) & (rows["k"] == k) & (rows["join"] == join)
    return rows[sel].set_index("subset").loc[SUBSETS]


# (tier, variant, k, join): n, acc %, CI half-width pp, per-subset acc %, per-subset half-widths, per-subset n, $/ex
TABLE5 = {
    ("full", "base", 1, "own"): (
        1729,
        71.72,
        2.09,
        [76.4, 70.1, 61.2, 34.0, 87.3],
        [3.8, 4.1, 6.8, 7.6, 3.2],
        [474, 495, 183, 159, 418],
        0.01333,
    ),
    ("full", "criteria", 1, "own"): (
        1738,
        74.74,
        2.06,
        [77.9, 72.3, 73.2, 32.1, 90.6],
        [3.7, 4.0, 6.4, 7.3, 2.8],
        [475, 495, 183, 159, 426],
        0.01402,
    ),
    ("full", "base", 8, "own"): (
        1730,
        81.50,
        1.79,
        [86.7, 81.8, 74.9, 44.7, 92.1],
        [3.0, 3.3, 6.3, 7.9, 2.6],
        [474, 495, 183, 159, 419],
        0.06633,
    ),
    ("full", "criteria", 8, "own"): (
        1741,
        83.57,
        1.72,
        [89.1, 82.8, 79.2, 48.8, 93.2],
        [2.8, 3.4, 5.9, 7.8, 2.5],
        [475, 495, 183, 160, 428],
        0.07023,
    ),
    ("mini", "base", 8, "own"): (
        1730,
        79.19,
        1.99,
        [83.3, 80.2, 68.3, 40.3, 92.8],
        [3.4, 3.4, 6.6, 7.8, 2.5],
        [474, 495, 183, 159, 419],
        0.01535,
    ),
    ("mini", "criteria", 8, "own"): (
        1742,
        81.46,
        1.87,
        [85.5, 82.2, 72.7, 41.2, 94.9],
        [3.1, 3.4, 6.4, 7.7, 2.1],
        [475, 495, 183, 160, 429],
        0.01596,
    ),
    ("nano", "base", 8, "own"): (
        1718,
        71.65,
        2.18,
        [68.4, 74.5, 61.2, 42.8, 87.5],
        [4.3, 3.9, 7.0, 7.2, 3.2],
        None,
        0.00577,
    ),
    ("nano", "base", 1, "own"): (1708, 52.22, 2.38, [44.9, 51.0, 45.1, 26.1, 75.0], None, None, 0.00112),
    ("nano", "base", 8, "id"): (
        1705,
        71.38,
        2.09,
        [67.9, 74.5, 61.2, 42.4, 87.6],
        [4.2, 3.9, 6.9, 7.7, 3.2],
        [467, 494, 183, 158, 403],
        0.00568,
    ),
    ("nano", "base", 1, "id"): (
        1700,
        52.29,
        2.33,
        [45.6, 51.0, 45.1, 26.3, 74.9],
        [4.6, 4.4, 7.2, 6.8, 4.2],
        [465, 494, 182, 156, 403],
        0.00111,
    ),
}


@pytest.mark.parametrize("key", list(TABLE5), ids=lambda k: "-".join(map(str, k)))
def test_table5_and_table11_rows(key, default_run, compat_run):
    summary = (compat_run if key[3] == "id" else default_run)[0]
    n, acc, half, sub_acc, sub_half, sub_n, cost = TABLE5[key]
    row = _row(summary, *key)
    assert (row["n"], round(100 * row["accuracy"], 2), round(100 * row["accuracy_ci_half_width"], 2)) == (n, acc, half)
    assert round(row["cost_per_example"], 5) == cost
    subsets = _subsets(summary, *key)
    assert (100 * subsets["accuracy"]).round(1).tolist() == sub_acc
    if sub_half:
        assert (100 * subsets["accuracy_ci_half_width"]).round(1).tolist() == sub_half
    if sub_n:
        assert subsets["n"].tolist() == sub_n


def test_extra_targets_and_cost_ratios(default_run, compat_run):
    summary = default_run[0]
    mini1, crit_mini1 = _row(summary, "mini", "base", 1), _row(summary, "mini", "criteria", 1)
    assert (mini1["n"], round(100 * mini1["accuracy"], 2), round(100 * mini1["accuracy_ci_half_width"], 2)) == (
        1728,
        64.76,
        2.26,
    )
    assert round(mini1["cost_per_example"], 5) == 0.00343
    assert (
        crit_mini1["n"],
        round(100 * crit_mini1["accuracy"], 2),
        round(100 * crit_mini1["accuracy_ci_half_width"], 2),
    ) == (1734, 69.15, 2.16)
    assert round(crit_mini1["cost_per_example"], 5) == 0.00357
    # Paper's "x" column (one decimal): 1.0, 1.1, 5.0, 5.3, 1.2, 1.2, and nano 0.4 / 0.1 (id join).
    ratios = [
        round(_row(summary, t, v, k)["cost_ratio"], 1)
        for t, v, k in [
            ("full", "base", 1),
            ("full", "criteria", 1),
            ("full", "base", 8),
            ("full", "criteria", 8),
            ("mini", "base", 8),
            ("mini", "criteria", 8),
        ]
    ]
    assert ratios == [1.0, 1.1, 5.0, 5.3, 1.2, 1.2]
    assert round(_row(compat_run[0], "nano", "base", 8, "id")["cost_ratio"], 3) == 0.426
    assert round(_row(compat_run[0], "nano", "base", 1, "id")["cost_ratio"], 3) == 0.083


TABLE8 = {  # (tier, variant, join): accuracies % k = 1..8 (spec computed column), n at k = 1..8
    ("full", "base", "own"): ([71.72, 77.28, 78.44, 79.42, 80.06, 80.87, 81.45, 81.50], [1729] + [1730] * 7),
    ("mini", "base", "own"): (
        [64.76, 73.05, 74.78, 76.81, 77.11, 77.69, 78.55, 79.19],
        [1728, 1729, 1729, 1729] + [1730] * 4,
    ),
    ("nano", "base", "id"): ([52.29, 60.82, 65.40, 68.09, 69.62, 70.03, 70.85, 71.38], [1700] + [1705] * 7),
    ("nano", "base", "own"): ([52.22, 60.78, 65.25, 68.04, 69.73, 70.26, 71.07, 71.65], [1708, 1716] + [1718] * 6),
    ("full", "criteria", "own"): (
        [74.74, 79.20, 81.15, 82.36, 82.82, 82.99, 83.40, 83.57],
        [1738] + [1740] * 5 + [1741] * 2,
    ),
    ("mini", "criteria", "own"): ([69.15, 75.57, 78.46, 79.67, 80.59, 80.88, 81.40, 81.46], None),
}


@pytest.mark.parametrize("key", list(TABLE8), ids=lambda k: "-".join(k))
def test_table8_accuracy_vs_k(key, default_run, compat_run):
    summary = (compat_run if key[2] == "id" else default_run)[0]
    rows = [_row(summary, key[0], key[1], k, key[2]) for k in range(1, 9)]
    accs, ns = TABLE8[key]
    assert [round(100 * r["accuracy"], 2) for r in rows] == accs
    if ns:
        assert [r["n"] for r in rows] == ns


def test_delicate_counts_and_ties(default_run):
    summary = default_run[0]
    # Spec 004 T8: full k=7 1409/1730, mini k=2 1263/1729, mini k=7 1359/1730 (values on a .x5 boundary).
    assert [
        (_row(summary, t, "base", k)["correct"], _row(summary, t, "base", k)["n"])
        for t, k in [("full", 7), ("mini", 2), ("mini", 7)]
    ] == [(1409, 1730), (1263, 1729), (1359, 1730)]
    assert [_row(summary, "full", "base", k)["n_tied"] for k in range(1, 9)] == [353, 204, 164, 137, 109, 94, 72, 77]
    assert [_row(summary, "mini", "base", k)["n_tied"] for k in range(1, 9)] == [430, 241, 181, 135, 109, 92, 79, 75]


def test_table7_hard_routing(default_run):
    [esc] = [e for e in default_run[0]["escalation"] if e["prompt_variant"] == "base"]
    assert round(esc["cost_cheap"], 6) == 0.015352 and round(esc["cost_full"], 6) == 0.066331
    sweep = pd.DataFrame(esc["thresholds"])
    assert len(sweep) == 26 and (sweep["n"] == 1730).all()
    deciles = [0.0, 0.33072, 0.43301, 0.48412, 0.5, 0.66144, 0.82916]
    assert set(deciles) <= set(sweep["theta"].round(5))
    expected = {  # theta: accuracy %, p_esc, $/ex, cost ratio (spec 004 T7 sweep table)
        0.0: (81.50, 1.0, 0.08168, 1.0),
        0.1: (79.88, 0.8324, 0.07056, 0.8639),
        0.33072: (79.88, 0.8324, 0.07056, 0.8639),
        0.4: (79.48, 0.6488, 0.05839, 0.7148),
        0.43301: (79.48, 0.6488, 0.05839, 0.7148),
        0.48412: (79.31, 0.4928, 0.04804, 0.5881),
        0.5: (78.96, 0.3506, 0.03861, 0.4726),
        0.6: (79.13, 0.2052, 0.02896, 0.3546),
        0.7: (79.60, 0.1413, 0.02473, 0.3027),
        0.8: (79.83, 0.1013, 0.02207, 0.2702),
        0.82916: (79.83, 0.1013, 0.02207, 0.2702),
        1.0: (79.48, 0.0509, 0.01873, 0.2293),
        1.5: (79.48, 0.0158, 0.01640, 0.2007),
        2.0: (79.36, 0.0042, 0.01563, 0.1913),
    }
    by_theta = sweep.assign(theta=sweep["theta"].round(5)).drop_duplicates("theta").set_index("theta")
    for theta, (acc, p, cost, ratio) in expected.items():
        row = by_theta.loc[theta]
        assert (
            round(100 * row["accuracy"], 2),
            round(row["p_escalate"], 4),
            round(row["cost"], 5),
            round(row["cost_ratio"], 4),
        ) == (acc, p, cost, ratio), theta
    frontier = [
        (round(p["theta"], 5), round(100 * p["accuracy"], 2), round(p["cost_ratio"], 3)) for p in esc["frontier"]
    ]
    assert frontier == [
        (2.0, 79.36, 0.191),
        (1.9, 79.42, 0.192),
        (1.8, 79.48, 0.194),
        (0.9, 79.71, 0.246),
        (0.8, 79.83, 0.270),
        (0.1, 79.88, 0.864),
        (0.0, 81.50, 1.0),
    ]


def test_table7_blend_and_variance_informed(default_run):
    summary = default_run[0]
    [blend] = [b for b in summary["blend"] if b["prompt_variant"] == "base"]
    train = blend["train"]
    assert round(train["midpoint"], 5) == 0.59948 and train["n_train_rows"] == 1387 and train["n_test_rows"] == 343
    assert round(100 * train["train_accuracy"], 2) == 83.20 and train["n_train"] == 1387
    assert (round(100 * train["test_accuracy"], 2), train["n_test"]) == (80.17, 343)
    assert round(train["cost_per_example"], 5) == 0.08168 and round(train["test_mean_weight"], 4) == 0.2793
    assert (blend["all_rows"]["midpoint"], round(100 * blend["all_rows"]["train_accuracy"], 2)) == (0.0, 83.24)
    [varinf] = [v for v in summary["variance_informed"] if v["prompt_variant"] == "base"]
    c, u = varinf["constrained"], varinf["unconstrained"]
    assert (c["sigma1"], c["sigma2"], round(100 * c["test_accuracy"], 2), c["n_test"]) == (0.5, 1.0, 74.93, 343)
    assert round(c["test_budget"], 3) == 1.887 and varinf["constrained"]["grid_size"] == 14
    assert abs(c["cost_at_test_budget"] - 0.022) <= 0.002 and round(c["cost_at_budget_cap"], 4) == 0.0209
    assert (u["sigma1"], round(u["sigma2"], 5), round(100 * u["train_accuracy"], 2), round(u["train_budget"], 2)) == (
        0.0,
        0.48412,
        80.17,
        6.32,
    )
    assert (round(100 * u["test_accuracy"], 2), round(u["test_budget"], 2)) == (81.05, 6.22)


def _agreement(summary: dict, tier: str, join: str) -> pd.DataFrame:
    rows = pd.DataFrame(summary["agreement"])
    return rows[(rows["tier"] == tier) & (rows["prompt_variant"] == "base") & (rows["join"] == join)].sort_values("k")


def test_table10_agreement_both_keys(default_run, compat_run):
    key = _agreement(default_run[0], "mini", "subset_id")
    assert (100 * key["agreement"]).round(2).tolist() == [65.45, 73.16, 75.42, 77.04, 77.86, 77.98, 78.96, 79.13]
    assert key["spearman"].round(4).tolist() == [0.7693, 0.7794, 0.7882, 0.7868, 0.7896, 0.7893, 0.7944, 0.7937]
    paper = _agreement(compat_run[0], "mini", "id")
    assert (100 * paper["agreement"]).round(2).tolist() == [65.10, 72.70, 74.96, 76.63, 77.46, 77.63, 78.50, 78.67]
    assert paper["spearman"].round(4).tolist() == [0.7613, 0.7711, 0.7805, 0.7791, 0.7812, 0.7808, 0.7856, 0.7848]
    assert paper["rows"].tolist() == [1728, 1729, 1729, 1729, 1730, 1730, 1730, 1730]
    assert paper["rho_rows"].iloc[0] == 1689 and paper["rho_rows"].iloc[-1] == 1727
    nano = _agreement(compat_run[0], "nano", "id")
    assert (100 * nano["agreement"]).round(2).tolist() == [49.82, 60.18, 64.11, 66.98, 68.74, 69.03, 69.50, 70.38]
    assert nano["spearman"].round(4).tolist() == [0.5578, 0.6018, 0.6279, 0.6444, 0.6586, 0.6575, 0.6642, 0.6682]


def test_in_text_statistics(default_run, compat_run):
    [base] = [s for s in default_run[0]["statistics"] if s["prompt_variant"] == "base"]
    assert round(base["mean_input_tokens_per_call"], 1) == 575.7
    assert round(base["dispersion_correctness"]["r"], 4) == -0.1340
    mini = base["dispersion_vs_reference"]["mini"]
    assert round(mini["all_rows"]["r"], 4) == 0.4112
    assert (round(mini["rows_with_id_in_base_nano_k8"]["r"], 4), mini["rows_with_id_in_base_nano_k8"]["rows"]) == (
        0.4205,
        1705,
    )
    [compat] = [s for s in compat_run[0]["statistics"] if s["prompt_variant"] == "base"]
    assert round(compat["dispersion_vs_reference"]["nano"]["id_join"]["r"], 4) == 0.1055


def test_intersection_and_table9_deltas(default_run):
    summary = default_run[0]
    inter = summary["intersection"]
    assert inter["ids"] == 1692 and inter["collections"] == ["base_both_k8", "criteria_both_k8"]
    got = {(c["dataset"], c["tier"], c["k"]): (round(100 * c["accuracy"], 2), c["n"]) for c in inter["conditions"]}
    assert got[("base_both_k8", "full", 1)] == (71.72, 1729) and got[("base_both_k8", "full", 8)] == (81.50, 1730)
    assert got[("base_both_k8", "mini", 8)] == (79.19, 1730)
    assert got[("criteria_both_k8", "full", 1)] == (74.67, 1729) and got[("criteria_both_k8", "full", 8)] == (
        83.54,
        1731,
    )
    assert got[("criteria_both_k8", "mini", 8)] == (81.34, 1731)
    derived = {(d["tier"], d["prompt_variant"]): d for d in summary["derived"]}
    assert round(100 * derived[("full", "criteria")]["vs_baseline_variant"]["8"], 2) == 2.07
    assert round(100 * derived[("mini", "criteria")]["vs_baseline_variant"]["8"], 2) == 2.27
    assert round(100 * derived[("full", "criteria")]["vs_baseline_variant"]["1"], 2) == 3.02
    # The spec's +9.78 is 81.50 - 71.72 (rounded accuracies); the unrounded gain is 9.785 pp.
    assert abs(100 * derived[("full", "base")]["ensemble_gain"] - 9.78) < 0.01
    assert round(100 * derived[("full", "base")]["share_of_gain_at_k3"], 1) == 68.7


def test_outputs_and_bad_input_report(default_run):
    summary, folder = default_run
    assert (folder / "_SUCCESS").is_file()
    for name in ("accuracy_vs_k.png", "pareto_frontier.png", "variance_vs_error.png"):
        assert (folder / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    model = json.loads((folder / "model" / "model.json").read_text())
    assert model["format"] == "judgecal.escalation/v2" and model["rule"] == "auto"
    assert summary["recommendation"]["exported"].startswith(f"`{model['name']}` as `model/model.json`")
    assert round(summary["blend"][0]["train"]["midpoint"], 5) == 0.59948
    assert set(summary["results"][0]) >= {
        "tier",
        "prompt_variant",
        "k",
        "n",
        "accuracy",
        "accuracy_ci_low",
        "accuracy_ci_high",
        "n_tied",
        "cost_per_example",
    }
    assert len(summary["results"]) == 5 * 8
    bad = summary["bad_input"]
    assert bad["counts"]["responses_all_samples_null"] == 1 and bad["k_differs_across_tiers"] == []
    report = (folder / "report.md").read_text()
    assert "responses_all_samples_null: 1" in report and "frontier of the routing sweep" in report


def test_ray_run_equals_serial_run(rb2_url, tmp_path, ray_local):
    on_ray = _run(rb2_url, tmp_path / "ray", "replicates=200", serial=False)[0]
    serial = _run(rb2_url, tmp_path / "serial", "replicates=200")[0]
    assert on_ray == serial


def _tiny_dataset(tmp_path: Path) -> str:
    """Bad input of every kind the issue names, written through the dataset writer (no rb2-k8 adapter checks)."""
    rows, items, labels = [], [], []

    def example(ex: str, subset: str, scores: dict[str, list[list[float | None]]]) -> None:
        for tier, per_response in scores.items():
            for r, samples in enumerate(per_response):
                item = f"base/{subset}/{ex}/{r}"
                for s, value in enumerate(samples):
                    rows.append(
                        {
                            "dataset": "tiny",
                            "item_id": item,
                            "group_id": f"base/{subset}/{ex}",
                            "judge_id": tier,
                            "sample": s,
                            "verdict": None,
                            "score": value,
                            "rubric": subset,
                            "input_tokens": 100 if (r, s) == (0, 0) else None,
                            "output_tokens": 800 if (r, s) == (0, 0) else None,
                        }
                    )
        n_resp = max(len(v) for v in scores.values())
        for r in range(n_resp):
            items.append(
                {
                    "dataset": "tiny",
                    "item_id": f"base/{subset}/{ex}/{r}",
                    "subset": subset,
                    "prompt_variant": "base",
                    "example_id": ex,
                    "response": r,
                }
            )
            labels.append(
                {
                    "dataset": "tiny",
                    "item_id": f"base/{subset}/{ex}/{r}",
                    "label": None,
                    "label_score": 1.0 if r == 0 else 0.0,
                }
            )

    good_full = [[8.0] * 8, [5.0] * 8, [4.0] * 8]
    good_mini = [[7.0] * 4, [6.0] * 4, [5.0] * 4]  # k = 4 for mini, 8 for full: k differs across tiers
    example("1", "Math", {"full": good_full, "mini": good_mini})
    example("2", "Math", {"full": [[8.0] * 7 + [11.0], [5.0] * 8, [4.0] * 8], "mini": good_mini})  # one score of 11
    example("3", "Focus", {"full": [[8.0] * 8, [None] * 8, [4.0] * 8], "mini": good_mini})  # a response all null
    example("4", "Focus", {"full": [[8.0] * 8], "mini": [[7.0] * 4]})  # one response only
    tables = {
        "verdicts": pa.Table.from_pylist(rows),
        "labels": pa.Table.from_pylist(labels),
        "items": pa.Table.from_pylist(items),
    }
    dest = str(tmp_path / "tiny")
    write_dataset(dest, tables, {"format": "test"}, score_range=(0.0, 20.0))
    return dest


def test_bad_input_is_counted_and_reported(tmp_path):
    url = _tiny_dataset(tmp_path)
    summary, folder = _run(url, tmp_path / "out", "replicates=50")
    bad = summary["bad_input"]
    assert bad["counts"]["scores_outside_1_10"] == 1 and bad["examples"]["scores_outside_1_10"] == [
        "tiny:full:base/Math/2/0#7"
    ]
    assert bad["counts"]["responses_all_samples_null"] == 1
    assert bad["counts"]["fewer_than_two_responses"] == 1 and bad["examples"]["fewer_than_two_responses"] == [
        "tiny:base/Focus/4"
    ]
    assert bad["k_differs_across_tiers"] == ["tiny"] and bad["samples_per_tier"] == {"tiny": {"full": 8, "mini": 4}}
    full8, mini4 = _row(summary, "full", "base", 8), _row(summary, "mini", "base", 4)
    assert (full8["rows"], full8["n"], full8["correct"]) == (3, 2, 2)  # example 3 not evaluable; 4 left out
    assert (mini4["rows"], mini4["n"]) == (3, 3) and max(r["k"] for r in summary["results"] if r["tier"] == "mini") == 4
    report = (folder / "report.md").read_text()
    for text in ("scores_outside_1_10: 1", "fewer_than_two_responses: 1", "samples per tier differ"):
        assert text in report


def test_config_errors(rb2_url):
    with pytest.raises(ConfigError, match="join_key=ids: must be one of subset_id, id"):
        prepare(CONFIG, [f"data={rb2_url}", "join_key=ids"])
    with pytest.raises(ConfigError, match="data=null: required"):
        prepare(CONFIG, [])


@pytest.mark.spark
def test_spark_accuracy_job_equals_in_memory_and_the_spec(rb2_url, spark):
    from judgecal_dist.engine.jobs.ensemble import accuracy_by_k

    local = accuracy_by_k(rb2_url, engine="local")
    on_spark = accuracy_by_k(rb2_url, engine="spark")
    pd.testing.assert_frame_equal(local, on_spark)
    full = on_spark[(on_spark["dataset"] == "base_both_k8") & (on_spark["judge_id"] == "full")]
    assert np.round(100 * full["correct"] / full["n"], 2).tolist() == TABLE8[("full", "base", "own")][0]
    assert full["n_tied"].tolist() == [353, 204, 164, 137, 109, 94, 72, 77]


@pytest.mark.spark
def test_study_checks_the_spark_accuracy_job_against_its_curve(rb2_url, tmp_path, spark):
    """``engine_curve`` reaches the engine's one-pass job (here on Spark, warmed up by the test above)."""
    engine = EngineConfig(ray_num_cpus=1, stats_engine="spark")
    folder = Path(
        execute(
            prepare(CONFIG, [f"data={rb2_url}", "replicates=200", "datasets=[base_both_k8]"]),
            engine,
            output=str(tmp_path),
            serial=True,
        )
    )
    summary = json.loads((folder / "summary.json").read_text())
    check = summary["engine_curve"]
    assert check["equal"] and check["cells_compared"] == 2 * 8  # full and mini of their own collection, k = 1..8
    full = [r for r in check["rows"] if (r["dataset"], r["judge_id"]) == ("base_both_k8", "full")]
    accuracy, n = TABLE8[("full", "base", "own")]
    assert np.round([100 * r["accuracy"] for r in full], 2).tolist() == accuracy  # the paper's Table 8 column
    assert [r["n"] for r in full] == n
    assert "counts of evaluable, correct and tied examples equal" in (folder / "report.md").read_text()


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_exported_policy_scores_as_hard_routing_at_its_threshold(default_run, rb2_url, tmp_path, engine):
    """``judgecal score`` with the exported policy equals HardVarianceRouting swept at the chosen threshold, and
    the threshold is the frontier point the rule names (the cheapest within one accuracy point of the best)."""
    from judgecal_dist.io.score_collections import load_collections
    from judgecal_dist.methods.repeated.routing import HardVarianceRouting
    from judgecal_dist.scoring.apply import score_dataset

    summary, folder = default_run
    model = json.loads((folder / "model" / "model.json").read_text())
    record = score_dataset(str(folder), rb2_url, str(tmp_path / "out"), engine=EngineConfig(stats_engine=engine))
    got = pd.DataFrame(record["collections"]).set_index(["dataset", "prompt_variant"])
    collections, _ = load_collections(rb2_url)
    frontiers = {(e["dataset"], e["prompt_variant"]): e for e in summary["escalation"]}
    for entry in model["collections"]:
        key = (entry["dataset"], entry["prompt_variant"])
        c = next(c for c in collections if (c.dataset, c.prompt_variant) == key)
        cheap, full = c.tiers["mini"], c.tiers["full"]
        both = cheap.present & full.present
        front = pd.DataFrame(frontiers[key]["frontier"]).sort_values("cost", kind="stable")
        assert entry["theta"] == front[front["accuracy"] >= front["accuracy"].max() - 0.01]["theta"].iloc[0]
        ref = (
            HardVarianceRouting(thresholds=[entry["theta"]])
            .fit(
                cheap.scores[both],
                full.scores[both],
                c.chosen[both],
                cost_cheap=frontiers[key]["cost_cheap"],
                cost_full=frontiers[key]["cost_full"],
            )
            .sweep_.iloc[0]
        )
        row = got.loc[key]
        assert int(row["n"]) == ref["n"]
        for column in ("accuracy", "p_escalate", "cost"):
            assert abs(row[column] - ref[column]) <= 1e-12, column
