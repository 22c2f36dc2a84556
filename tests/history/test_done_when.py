"""Issue 18's "done when", as tests: 30 generated nights, quiet nights over seeds, LLMBar nights, failed runs.

Every night is a real dataset (generated or derived from the LLMBar release), counted by the in-memory engine and
recorded in a history exactly as the runner records it; ``detect_drift`` then reads that history.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from judgecal_dist.history.drift import DriftSettings, detect_drift
from judgecal_dist.history.judges import judge_counts, with_rates
from judgecal_dist.history.store import read_history, record_run
from judgecal_dist.io.dataset import read_dataset_table, write_dataset
from judgecal_dist.io.ingest import ingest
from judgecal_dist.io.synthetic_drift import generate_drift_sequence, night_url, parse_change

NIGHTS = 30
CHANGE_NIGHT = 20
# Holm keeps one quiet night's chance of any flag under alpha; "none of the 19 quiet nights before the change"
# then needs alpha near 0.05 / 19, so the sequence test asks for 0.0025 (at most 4.75% over the 19 nights).
SEQUENCE = DriftSettings(alpha=0.0025)


def _record_nights(urls: list[str], out: str, *, study: str = "inclusion") -> list[str]:
    """Record dataset ``urls[k]`` as run nightly-<day k> (succeeded) in ``out``'s history; return the run ids."""
    ids = []
    for night, url in enumerate(urls):
        day = np.datetime64("2026-10-01") + night
        stamp = f"{day}T02:30:00+00:00"
        run_id = f"nightly-{day}"
        manifest = {"study": study, "run_id": run_id, "status": "succeeded", "started": stamp, "ended": stamp}
        record_run(out, manifest, judges=with_rates(judge_counts(url, engine="local")))
        ids.append(run_id)
    return ids


def _sequence(root: Path, *, seed: int, changes: list[str], n_items: int, n_judges: int) -> tuple[str, list[str]]:
    dest, out = str(root / "nights"), str(root / "out")
    parsed = [parse_change(text) for text in changes]
    generate_drift_sequence(dest, nights=NIGHTS, changes=parsed, n_items=n_items, n_judges=n_judges, seed=seed)
    return out, _record_nights([night_url(dest, n) for n in range(NIGHTS)], out)


@pytest.mark.parametrize("seed", [11, 12])
def test_two_judges_changing_at_night_20_of_30_are_flagged_then_with_their_kind_and_none_before(tmp_path, seed):
    changes = [f"judge-002@{CHANGE_NIGHT}:accuracy=-0.2", f"judge-006@{CHANGE_NIGHT}:parse=0.3"]
    out, ids = _sequence(tmp_path, seed=seed, changes=changes, n_items=1500, n_judges=10)
    before = {ids[n]: detect_drift(out, current=ids[n], settings=SEQUENCE) for n in range(1, CHANGE_NIGHT)}
    assert not [run for run, comparison in before.items() if comparison.raised]
    at = detect_drift(out, current=ids[CHANGE_NIGHT], settings=SEQUENCE)
    kinds = at.flagged.groupby("judge_id")["kind"].apply(set).to_dict()
    assert set(kinds) == {"judge-002", "judge-006"} and not at.new_judges and not at.vanished_judges
    assert "accuracy drop" in kinds["judge-002"]
    assert "parse failures" in kinds["judge-006"]


@pytest.fixture(scope="module")
def quiet_histories(tmp_path_factory) -> list[tuple[str, list[str]]]:
    """Three 30-night histories of one unchanged panel each (seeds 21-23)."""
    root = tmp_path_factory.mktemp("quiet")
    return [_sequence(root / f"s{seed}", seed=seed, changes=[], n_items=400, n_judges=6) for seed in (21, 22, 23)]


@pytest.mark.parametrize("alpha", [0.05])
def test_thirty_quiet_nights_raise_a_flag_on_at_most_the_configured_share_over_seeds(quiet_histories, alpha):
    settings = DriftSettings(alpha=alpha, min_change=0.0)  # no size floor: the level alone bounds the flags
    raised = [
        detect_drift(out, current=run, settings=settings).raised for out, ids in quiet_histories for run in ids[1:]
    ]
    assert len(raised) == 3 * (NIGHTS - 1)
    assert sum(raised) / len(raised) <= alpha, f"{sum(raised)} of {len(raised)} quiet nights flagged at level {alpha}"


@pytest.fixture(scope="module")
def llmbar_tables(llmbar_dir, tmp_path_factory) -> dict[str, pa.Table]:
    dest = str(tmp_path_factory.mktemp("llmbar") / "ds")
    ingest("llmbar", str(llmbar_dir), dest)
    return {name: read_dataset_table(dest, name) for name in ("verdicts", "labels")}


def _llmbar_night(tables: dict[str, pa.Table], dest: str, *, seed: int, altered: str | None = None) -> str:
    """A night of LLMBar: a random 70% of its items; ``altered``'s A/B verdicts flipped on half of them."""
    verdicts, labels = tables["verdicts"].to_pandas(), tables["labels"].to_pandas()
    rng = np.random.default_rng(seed)
    items = labels["item_id"].to_numpy()
    tonight = set(rng.choice(items, size=int(0.7 * len(items)), replace=False))
    verdicts = verdicts[verdicts["item_id"].isin(tonight)].reset_index(drop=True)
    labels = labels[labels["item_id"].isin(tonight)].reset_index(drop=True)
    if altered is not None:
        flip = (verdicts["judge_id"] == altered) & verdicts["verdict"].isin(["A", "B"])
        flip &= rng.random(len(verdicts)) < 0.5
        verdicts.loc[flip, "verdict"] = verdicts.loc[flip, "verdict"].map({"A": "B", "B": "A"})
    schema = tables["verdicts"].schema
    night = {"verdicts": pa.Table.from_pandas(verdicts, schema=schema, preserve_index=False)}
    night["labels"] = pa.Table.from_pandas(labels, schema=tables["labels"].schema, preserve_index=False)
    return write_dataset(dest, night, {"source": "llmbar", "night_seed": seed})


def test_llmbar_nights_where_one_judges_verdicts_are_altered_flag_exactly_that_judge(llmbar_tables, tmp_path):
    verdicts = llmbar_tables["verdicts"].to_pandas()
    labels = llmbar_tables["labels"].to_pandas().set_index("item_id")["label"]
    voted = verdicts.dropna(subset=["verdict"])
    accuracy = (voted["verdict"].to_numpy() == labels.loc[voted["item_id"]].to_numpy()).astype(float)
    # the most accurate evaluator: flipping half its verdicts moves it the furthest (towards 0.5)
    altered = str(voted.assign(correct=accuracy).groupby("judge_id")["correct"].mean().idxmax())
    urls = [_llmbar_night(llmbar_tables, str(tmp_path / f"night-{n}"), seed=n) for n in range(4)]
    urls.append(_llmbar_night(llmbar_tables, str(tmp_path / "night-4"), seed=4, altered=altered))
    out = str(tmp_path / "out")
    ids = _record_nights(urls, out, study="llmbar-nightly")
    for night in range(1, 4):
        assert not detect_drift(out, current=ids[night]).raised, night
    at = detect_drift(out, current=ids[4])
    assert len(at.changes["judge_id"].unique()) == verdicts["judge_id"].nunique()  # every judge was compared
    assert set(at.flagged["judge_id"]) == {altered}, at.flagged
    assert "accuracy drop" in set(at.flagged["kind"])
    assert not at.new_judges and not at.vanished_judges


def test_a_failed_night_says_failed_and_drift_compares_with_the_last_succeeded_run(tmp_path):
    dest, out = str(tmp_path / "nights"), str(tmp_path / "out")
    generate_drift_sequence(dest, nights=3, n_items=300, n_judges=4, seed=5)
    ids = _record_nights([night_url(dest, 0), night_url(dest, 1)], out)
    failed = {"study": "inclusion", "run_id": "nightly-2026-10-03", "status": "failed", "error": "OSError: disk"}
    record_run(out, failed | {"started": "2026-10-03T02:30:00+00:00", "ended": "2026-10-03T02:31:00+00:00"})
    runs = read_history(out, "runs").set_index("run_id")
    assert runs.loc["nightly-2026-10-03", ["status", "error"]].tolist() == ["failed", "OSError: disk"]
    manifest = {"study": "inclusion", "run_id": "nightly-2026-10-04", "status": "succeeded"}
    stamp = "2026-10-04T02:30:00+00:00"
    record_run(out, manifest | {"started": stamp, "ended": stamp}, judges=with_rates(judge_counts(night_url(dest, 2))))
    comparison = detect_drift(out)
    assert (comparison.current, comparison.baseline) == ("nightly-2026-10-04", [ids[1]])


def test_a_run_resumed_many_times_keeps_one_row_per_table(tmp_path):
    dest, out = str(tmp_path / "night"), str(tmp_path / "out")
    generate_drift_sequence(dest, nights=2, n_items=200, n_judges=3, seed=6)
    judges = with_rates(judge_counts(night_url(dest, 1)))
    manifest = {"study": "inclusion", "run_id": "nightly-x", "started": "2026-10-01T02:30:00+00:00"}
    attempts = [("failed", "2026-10-01T02:40:00+00:00"), ("failed", "2026-10-02T01:00:00+00:00")]
    attempts += [("succeeded", f"2026-10-0{day}T03:00:00+00:00") for day in (2, 3, 3)]  # resumed, then returned
    for status, ended in attempts:
        done = status == "succeeded"
        record_run(out, manifest | {"status": status, "ended": ended}, judges=judges if done else None)
    runs, rows = read_history(out, "runs"), read_history(out, "judges")
    assert runs[["run_id", "status", "date"]].values.tolist() == [["nightly-x", "succeeded", "2026-10-03"]]
    assert sorted(rows["judge_id"]) == sorted(judges["judge_id"]) and rows["run_id"].eq("nightly-x").all()
