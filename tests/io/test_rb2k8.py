"""rb2-k8 adapter on the shared files, checked against spec/004.md figures (§2 counts, §4 accuracy, §2.4 cost)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.ingest import ingest

#: $ per million tokens (spec/004.md §2.3).
PRICES = {"full": (2.50, 15.00), "mini": (0.75, 4.50), "nano": (0.20, 1.25)}


@pytest.fixture(scope="module")
def rb2(rb2_dir, tmp_path_factory):
    dest = tmp_path_factory.mktemp("rb2") / "ds"
    report = ingest("rb2-k8", str(rb2_dir), str(dest))
    tables = {name: read_dataset_table(str(dest), name).to_pandas() for name in ("verdicts", "labels", "items")}
    return report, tables


def test_counts_from_spec(rb2):
    report, tables = rb2
    files = {info["dataset"]: info for info in report["files"].values()}
    assert {name: info["examples"] for name, info in files.items()} == {
        "base_both_k8": 1730,
        "criteria_both_k8": 1742,
        "base_nano_k8": 1718,
    }
    assert report["null_scores"] == {
        "base_both_k8": {"full": 16, "mini": 22},
        "criteria_both_k8": {"full": 56, "mini": 60},
        "base_nano_k8": {"nano": 54},
    }
    verdicts = tables["verdicts"]
    nulls = verdicts[verdicts["score"].isna()].groupby(["dataset", "judge_id"]).size().to_dict()
    assert nulls == {
        ("base_both_k8", "full"): 16,
        ("base_both_k8", "mini"): 22,
        ("criteria_both_k8", "full"): 56,
        ("criteria_both_k8", "mini"): 60,
        ("base_nano_k8", "nano"): 54,
    }
    assert report["rows_written"]["verdicts"] == (1730 * 2 + 1742 * 2 + 1718) * 4 * 8
    assert report["missing_verdicts"] + report["unparseable_verdicts"] == 16 + 22 + 56 + 60 + 54
    assert verdicts["score"].dropna().between(1, 10).all()
    assert set(verdicts["sample"]) == set(range(8)) and verdicts["verdict"].isna().all()


def test_ids_repeat_across_subsets(rb2):
    _, tables = rb2
    items = tables["items"]
    examples = items.drop_duplicates(["dataset", "subset", "example_id"])
    subsets_per_id = examples.groupby(["dataset", "example_id"])["subset"].nunique()
    assert (subsets_per_id > 1).groupby(level="dataset").sum().to_dict() == {
        "base_both_k8": 38,
        "criteria_both_k8": 39,
        "base_nano_k8": 34,
    }
    row = items[items["dataset"] == "base_both_k8"].set_index("item_id").loc["base/Factuality/282/3"]
    assert (row["subset"], row["prompt_variant"], row["example_id"], row["response"]) == (
        "Factuality",
        "base",
        "282",
        3,
    )
    verdicts = tables["verdicts"]
    assert (verdicts["group_id"] == verdicts["item_id"].str.rsplit("/", n=1).str[0]).all()
    assert (verdicts["rubric"] == verdicts["item_id"].str.split("/").str[1]).all()


def test_labels(rb2):
    _, tables = rb2
    labels = tables["labels"].merge(tables["items"], on=["dataset", "item_id"], how="inner", validate="one_to_one")
    assert labels["label"].isna().all()
    assert ((labels["response"] == 0) == (labels["label_score"] == 1.0)).all()
    assert set(labels["label_score"]) == {0.0, 1.0}


def _cost(verdicts, dataset, tier, k):
    rows = verdicts[(verdicts["dataset"] == dataset) & (verdicts["judge_id"] == tier)]
    examples = rows["group_id"].nunique()
    p_in, p_out = PRICES[tier]
    return (rows["input_tokens"].sum() * p_in + rows["output_tokens"].sum() * (k / 8) * p_out) / 1e6 / examples


def test_token_counts_once_per_example_and_tier_give_spec_costs(rb2):
    _, tables = rb2
    verdicts = tables["verdicts"]
    has_tokens = verdicts["input_tokens"].notna()
    first = (verdicts["sample"] == 0) & verdicts["item_id"].str.endswith("/0")
    assert (has_tokens == first).all()
    # spec/004.md §4 "computed $/ex" column: 0.01333 (its normaliser 0.0133305 is the paper's figure; the mean of
    # cost_full(e, 1) over the 1730 rows of the file is 0.0133289), C_full = 0.066331, C_mini = 0.015352 (k = 8).
    assert _cost(verdicts, "base_both_k8", "full", 1) == pytest.approx(0.01333, abs=5e-6)
    assert _cost(verdicts, "base_both_k8", "full", 8) == pytest.approx(0.066331, abs=5e-7)
    assert _cost(verdicts, "base_both_k8", "mini", 8) == pytest.approx(0.015352, abs=5e-7)
    base_full = verdicts[(verdicts["dataset"] == "base_both_k8") & (verdicts["judge_id"] == "full")]
    assert base_full["input_tokens"].sum() / 1730 / 4 == pytest.approx(575.7, abs=0.05)


def _accuracy(verdicts, dataset, tier, k):
    """spec/004.md rule: mean of the non-null scores among the first k samples; response 0 strictly highest."""
    rows = verdicts[(verdicts["dataset"] == dataset) & (verdicts["judge_id"] == tier) & (verdicts["sample"] < k)]
    means = rows.groupby(["group_id", "item_id"])["score"].mean().unstack(level=1)
    wide = means.T.groupby(means.columns.str.rsplit("/", n=1).str[1]).first().T  # columns: response 0..3
    wide = wide.dropna()
    others = wide.drop(columns="0").max(axis=1)
    return round(100 * float(np.mean(wide["0"] > others)), 2), len(wide)


def test_headline_accuracies_from_spec(rb2):
    _, tables = rb2
    verdicts = tables["verdicts"]
    assert _accuracy(verdicts, "base_both_k8", "full", 1) == (71.72, 1729)
    assert _accuracy(verdicts, "base_both_k8", "full", 8) == (81.50, 1730)
    assert _accuracy(verdicts, "base_both_k8", "mini", 8) == (79.19, 1730)
    assert _accuracy(verdicts, "criteria_both_k8", "full", 8) == (83.57, 1741)


def _example(example_id="1", subset="Math", responses=4, k=8, score=5, refused=False):
    scores = [[score] * k for _ in range(responses)]
    return {
        "id": example_id,
        "subset": subset,
        "prompt_variant": "base",
        "k": k,
        "full_scores": scores,
        "full_errors": [[None] * k for _ in range(responses)],
        "cost": {"full_input_tokens": 100, "full_output_tokens": 800},
        "refused": refused,
    }


def _write(path, records, *, raw=None):
    text = raw if raw is not None else "".join(json.dumps(r) + "\n" for r in records)
    path.write_bytes(gzip.compress(text.encode()))
    return path


def test_refused_and_rejected_examples_are_kept_aside(tmp_path):
    records = [_example("1"), _example("2", refused=True), _example("3", responses=1), _example("1", subset="Focus")]
    src = _write(tmp_path / "tiny_k8.jsonl.gz", records)
    report = ingest("rb2-k8", str(src), str(tmp_path / "out"))
    assert report["datasets"] == ["tiny_k8"]
    assert report["rows_read"] == 4 and report["rejected_rows"] == 1 and report["refused_examples"] == 1
    assert report["rejected"] == [
        {"file": str(src), "example": "base/Math/3", "reason": "1 responses, at least 2 needed"}
    ]
    refused = read_dataset_table(str(tmp_path / "out"), "refused").to_pylist()
    assert refused == [
        {"dataset": "tiny_k8", "group_id": "base/Math/2", "example_id": "2", "subset": "Math", "prompt_variant": "base"}
    ]
    verdicts = read_dataset_table(str(tmp_path / "out"), "verdicts").to_pandas()
    assert sorted(verdicts["group_id"].unique()) == ["base/Focus/1", "base/Math/1"]
    assert verdicts["input_tokens"].sum() == 200 and verdicts["output_tokens"].sum() == 1600


@pytest.mark.parametrize(
    ("records", "raw", "pattern"),
    [
        (
            [_example("1"), _example("2", score=11)],
            None,
            r"full_scores: scores outside \[1, 10\] \[11\.0, 11\.0, 11\.0\] "
            r"\(32 values, e\.g\. \['base/Math/2/0#0'",
        ),
        ([_example("1"), _example("2", k=4)], None, r"bad\.jsonl\.gz: k: differs between rows"),
        (
            [_example("1"), {**_example("2"), "full_scores": [[5] * 8, [5] * 7]}],
            None,
            r"full_scores: samples per response differ from k=8 \(1 responses, e\.g\. \['base/Math/2/1'\]\)",
        ),
        (None, '{"id": "1", "subset": "Math"\n', r"bad\.jsonl\.gz: \(file\): cannot read JSON lines"),
        (None, "", r"bad\.jsonl\.gz: \(all columns\): empty file"),
        (
            [{k: v for k, v in _example().items() if k != "subset"}],
            None,
            r"bad\.jsonl\.gz: subset: missing required field",
        ),
    ],
)
def test_bad_files(tmp_path, records, raw, pattern):
    src = _write(tmp_path / "bad.jsonl.gz", records, raw=raw)
    with pytest.raises(InputError, match=pattern):
        ingest("rb2-k8", str(src), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_tiers_merge_under_one_name(rb2_dir, tmp_path):
    """base_both and base_nano as one dataset: same items, tiers full, mini and nano; labels kept once."""
    src = tmp_path / "base"
    src.mkdir()
    for name in ("base_both_k8.jsonl.gz", "base_nano_k8.jsonl.gz"):
        (src / name).write_bytes((rb2_dir / name).read_bytes())
    report = ingest("rb2-k8", str(src), str(tmp_path / "out"), dataset="base")
    assert report["datasets"] == ["base"]
    labels = read_dataset_table(str(tmp_path / "out"), "labels").to_pandas()
    both = pd.Index(read_dataset_table(str(tmp_path / "out"), "verdicts", columns=["item_id"])["item_id"].to_pylist())
    assert len(labels) == both.nunique() >= 1730 * 4
