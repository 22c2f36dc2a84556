"""LLMBar adapter on the real release, checked against the release's own statistics.json.gz figures."""

from __future__ import annotations

import gzip
import json
import re
import shutil

import pandas as pd
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import read_dataset_table, read_report
from judgecal_dist.io.ingest import ingest

_FRACTION = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*=")


@pytest.fixture(scope="module")
def llmbar(llmbar_dir, tmp_path_factory):
    dest = tmp_path_factory.mktemp("llmbar") / "ds"
    report = ingest("llmbar", str(llmbar_dir), str(dest))
    tables = {
        name: read_dataset_table(str(dest), name).to_pandas() for name in ("verdicts", "labels", "judges", "items")
    }
    return dest, report, tables


def _release_statistics(llmbar_dir):
    """(subset, backbone, strategy, order) -> (correct, total), parsed from every statistics.json.gz."""
    figures = {}
    for path in sorted(llmbar_dir.glob("**/evaluators/*/*/statistics.json.gz")):
        strategy_dir = path.parent
        subset = str(strategy_dir.parent.parent.parent.relative_to(llmbar_dir))
        stats = json.loads(gzip.decompress(path.read_bytes()))
        for order, key in (("ab", "correct_False"), ("ba", "correct_True")):
            correct, total = map(int, _FRACTION.match(stats[key]).groups())
            figures[(subset, strategy_dir.parent.name, strategy_dir.name, order)] = (correct, total)
    return figures


def test_counts(llmbar):
    _, report, tables = llmbar
    verdicts, labels = tables["verdicts"], tables["labels"]
    assert verdicts["judge_id"].nunique() == 130
    assert labels["item_id"].nunique() == 419 and verdicts["item_id"].nunique() == 419
    assert labels["label"].value_counts().to_dict() == {"B": 213, "A": 206}
    assert (verdicts["group_id"] == verdicts["item_id"]).all()
    assert (verdicts["dataset"] == "llmbar").all() and (verdicts["sample"] == 0).all()
    assert report["rows_written"]["verdicts"] == len(verdicts) == 2 * report["rows_read"]
    assert report["subsets"] == {
        "Natural": 100,
        "Adversarial/Neighbor": 134,
        "Adversarial/GPTInst": 92,
        "Adversarial/GPTOut": 47,
        "Adversarial/Manual": 46,
    }
    assert report["unparseable_verdicts"] == verdicts["verdict"].isna().sum() > 0
    assert report["rejected_rows"] == 0
    assert report["absent_judges"] == {} and report["absent_verdicts"] == 0  # every strategy in every subset
    assert report["warnings"] == [] and report["all_null_judges"] == {}


def test_judges_and_items(llmbar):
    _, _, tables = llmbar
    judges = tables["judges"].set_index("judge_id")
    assert judges.loc["GPT-4/Vanilla/ab", "family"] == "GPT-4" and judges.loc["GPT-4/Vanilla/ba", "tier"] == "Vanilla"
    assert sorted(judges["family"].unique()) == ["ChatGPT", "ChatGPT-0301", "Falcon", "GPT-4", "LLaMA2", "PaLM2"]
    items = tables["items"].set_index("item_id")
    assert items.loc["Adversarial/Neighbor/12", "subset"] == "Adversarial/Neighbor"
    assert items.loc["Natural/0", "index"] == 0


def test_accuracy_matches_release_statistics_for_every_evaluator(llmbar, llmbar_dir):
    _, _, tables = llmbar
    merged = tables["verdicts"].merge(tables["labels"], on=["dataset", "item_id"], how="inner")
    merged["subset"] = merged["item_id"].str.rsplit("/", n=1).str[0]
    merged["correct"] = merged["verdict"] == merged["label"]
    ours = merged.groupby(["subset", "judge_id"]).agg(correct=("correct", "sum"), total=("correct", "size"))
    expected = _release_statistics(llmbar_dir)
    assert len(expected) == 2 * 325
    assert expected[("Natural", "GPT-4", "Vanilla", "ab")] == (95, 100)
    assert expected[("Natural", "GPT-4", "Vanilla", "ba")] == (96, 100)
    mismatches = {}
    for (subset, backbone, strategy, order), figure in expected.items():
        row = ours.loc[(subset, f"{backbone}/{strategy}/{order}")]
        if (int(row["correct"]), int(row["total"])) != figure:
            mismatches[(subset, backbone, strategy, order)] = ((int(row["correct"]), int(row["total"])), figure)
    assert not mismatches
    assert len(ours) == len(expected)


def test_final_verdicts_are_the_last_swap_object(llmbar, llmbar_dir):
    """A Swap_CoT item with two rounds: the verdict is the second round's, read by hand from the file."""
    _, _, tables = llmbar
    raw = json.loads(gzip.decompress((llmbar_dir / "Natural/evaluators/GPT-4/Swap_CoT/result.json.gz").read_bytes()))
    verdicts = tables["verdicts"].set_index(["item_id", "judge_id"])["verdict"]
    checked = 0
    for index, record in enumerate(raw):
        rounds = [r for r in record["results"] if isinstance(r, dict)]
        if len(rounds) == 2 and rounds[0] != rounds[1]:
            winner = rounds[-1]["swap = True"]["winner"]
            expected = {"1": "A", "2": "B"}.get(winner)
            got = verdicts[(f"Natural/{index}", "GPT-4/Swap_CoT/ba")]
            assert (None if pd.isna(got) else got) == expected
            checked += 1
    assert checked > 0


def test_compressed_or_plain_json_alike_and_bad_label(llmbar_dir, tmp_path):
    src = tmp_path / "mini"
    shutil.copytree(llmbar_dir / "Adversarial/Manual", src / "Manual")
    plain = src / "Manual/evaluators/GPT-4/Vanilla/result.json"
    plain.write_bytes(gzip.decompress((plain.parent / "result.json.gz").read_bytes()))
    (plain.parent / "result.json.gz").unlink()
    report = ingest("llmbar", str(src), str(tmp_path / "out"), dataset="manual")
    assert report["datasets"] == ["manual"] and report["subsets"] == {"Manual": 46}
    verdicts = read_dataset_table(str(tmp_path / "out"), "verdicts").to_pandas()
    assert verdicts["judge_id"].nunique() == 2 * report["evaluators"]
    assert read_report(str(tmp_path / "out"))["rows_read"] == 46 * report["evaluators"]
    records = json.loads(gzip.decompress((src / "Manual/dataset.json.gz").read_bytes()))
    records[3]["label"] = 3
    (src / "Manual/dataset.json.gz").write_bytes(gzip.compress(json.dumps(records).encode()))
    with pytest.raises(
        InputError, match=r"Manual/dataset\.json\.gz: label: not 1 or 2 \(1 rows, e\.g\. \['Manual/3'\]\)"
    ):
        ingest("llmbar", str(src), str(tmp_path / "out2"))
    assert not (tmp_path / "out2").exists()


def test_single_subset_folder(llmbar_dir, tmp_path):
    report = ingest("llmbar", str(llmbar_dir / "Natural"), str(tmp_path / "out"))
    assert report["subsets"] == {"Natural": 100}
    labels = read_dataset_table(str(tmp_path / "out"), "labels")["item_id"].to_pylist()
    assert labels[:2] == ["Natural/0", "Natural/1"] and len(labels) == 100


def _two_subsets(llmbar_dir, root, strategies=("GPT-4/Vanilla", "GPT-4/Swap", "ChatGPT/Vanilla")):
    """Natural and Adversarial/GPTOut with a few strategies, copied file by file from the release."""
    for subset in ("Natural", "Adversarial/GPTOut"):
        (root / subset).mkdir(parents=True)
        shutil.copyfile(llmbar_dir / subset / "dataset.json.gz", root / subset / "dataset.json.gz")
        for strategy in strategies:
            folder = root / subset / "evaluators" / strategy
            folder.mkdir(parents=True)
            shutil.copyfile(llmbar_dir / subset / "evaluators" / strategy / "result.json.gz", folder / "result.json.gz")
    return root


def test_a_strategy_file_absent_from_one_subset_is_reported_and_refused_when_strict(llmbar_dir, tmp_path, caplog):
    src = _two_subsets(llmbar_dir, tmp_path / "release")
    (src / "Adversarial/GPTOut/evaluators/GPT-4/Swap/result.json.gz").unlink()
    with pytest.raises(
        InputError,
        match=r"release: Adversarial/GPTOut/evaluators/GPT-4/Swap/result\.json\.gz: not found: judge GPT-4/Swap "
        r"\(ab, ba\) has no result file in subset Adversarial/GPTOut, so its 47 items there are absent.*"
        r"restore Adversarial/GPTOut/evaluators/GPT-4/Swap/result\.json\.gz, or ingest without --strict",
    ):
        ingest("llmbar", str(src), str(tmp_path / "strict"), strict=True)
    assert not (tmp_path / "strict").exists()

    report = ingest("llmbar", str(src), str(tmp_path / "out"))
    gptout = 47  # items of Adversarial/GPTOut (the release's statistics: 47)
    assert report["absent_judges"] == {
        f"GPT-4/Swap/{order}": {"items_absent": gptout, "subsets": ["Adversarial/GPTOut"]} for order in ("ab", "ba")
    }
    assert report["absent_verdicts"] == 2 * gptout and report["missing_verdicts"] == 0
    assert "judge GPT-4/Swap (ab, ba) has no result file in subset Adversarial/GPTOut" in caplog.text
    assert read_report(str(tmp_path / "out"))["absent_judges"] == report["absent_judges"]
    verdicts = read_dataset_table(str(tmp_path / "out"), "verdicts").to_pandas()
    rows = verdicts.groupby("judge_id").size()
    assert rows["GPT-4/Swap/ab"] == 100 and rows["GPT-4/Vanilla/ab"] == 100 + gptout
    assert len(verdicts) == 2 * (3 * (100 + gptout) - gptout)
