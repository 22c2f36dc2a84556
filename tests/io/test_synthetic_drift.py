"""The drift generator: one seeded panel, chosen judges changed from chosen nights, the others untouched."""

from __future__ import annotations

import pandas as pd
import pytest

from judgecal_dist.errors import ConfigError
from judgecal_dist.io.synthetic import generate_panel
from judgecal_dist.io.synthetic_drift import JudgeChange, generate_drift_sequence, night_url, parse_change


def _verdicts(url: str) -> pd.DataFrame:
    return pd.read_parquet(f"{url}/verdicts").sort_values(["item_id", "judge_id"]).reset_index(drop=True)


def test_judge_params_change_one_judge_and_leave_the_others_identical(tmp_path):
    common = dict(n_items=2000, n_judges=4, seed=5)
    generate_panel(str(tmp_path / "a"), **common)
    generate_panel(str(tmp_path / "b"), **common, judge_params={"judge-001": {"missing_rate": 0.5, "accuracy": 0.3}})
    a, b = _verdicts(str(tmp_path / "a")), _verdicts(str(tmp_path / "b"))
    others = a["judge_id"] != "judge-001"
    pd.testing.assert_frame_equal(a[others], b[others])
    changed = b[~others]
    assert abs(changed["verdict"].isna().mean() - 0.5) < 0.04  # binomial sd 0.011
    labels = pd.read_parquet(tmp_path / "b" / "labels").set_index("item_id")["label"]
    voted = changed.dropna(subset=["verdict"])
    assert abs((voted["verdict"].to_numpy() == labels.loc[voted["item_id"]].to_numpy()).mean() - 0.3) < 0.05


def test_a_sequence_keeps_judges_until_their_change_night_and_names_a_replacement(tmp_path):
    changes = [parse_change("judge-001@2:bias=0.0"), JudgeChange("judge-002", 3, "replace", 0.7)]
    report = generate_drift_sequence(str(tmp_path), nights=4, changes=changes, n_items=600, n_judges=3, seed=1)
    assert report["nights"] == [night_url(str(tmp_path), n) for n in range(4)]
    ids = [sorted(_verdicts(night_url(str(tmp_path), n))["judge_id"].unique()) for n in range(4)]
    assert ids[:3] == [["judge-000", "judge-001", "judge-002"]] * 3
    assert ids[3] == ["judge-000", "judge-001", "judge-002-r"]
    nights = [_verdicts(night_url(str(tmp_path), n)).query("judge_id == 'judge-001'") for n in range(4)]
    share_a = [(night["verdict"] == "A").mean() for night in nights]
    # unsure rate 0.1: P(A) moves by 0.1 x (0.65 - 0) when the judge always says B when unsure
    assert share_a[2] < min(share_a[:2]) and share_a[3] < min(share_a[:2])


@pytest.mark.parametrize(
    ("text", "pattern"),
    [("judge-001:accuracy", "expected JUDGE@NIGHT:KIND"), ("judge-001@2:accuracy=x", "expected JUDGE@NIGHT:KIND")],
)
def test_bad_change_specs_are_refused(text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        parse_change(text)


def test_a_change_outside_the_sequence_is_refused_before_writing(tmp_path):
    with pytest.raises(ConfigError, match="the night must be in 1..3"):
        generate_drift_sequence(str(tmp_path / "s"), nights=4, changes=[parse_change("judge-001@4:parse")], n_judges=3)
    assert not (tmp_path / "s").exists()
