"""Nightly by design: ``judgecal run --then drift`` and the drift thresholds as a checked config file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.errors import ConfigError
from judgecal_dist.history.drift import DriftSettings
from judgecal_dist.history.drift_config import load_drift_config
from judgecal_dist.io.synthetic_drift import generate_drift_sequence, night_url, parse_change

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority]", "calibrators=[none]", "panels=[all]", "permutation_resamples=100", "replicates=2"]


def test_the_shipped_drift_conf_holds_the_defaults():
    assert load_drift_config(ROOT / "conf" / "drift.yaml") == ("previous", DriftSettings())


def test_options_override_the_file_and_the_file_overrides_the_defaults(tmp_path):
    conf = tmp_path / "drift.yaml"
    conf.write_text(yaml.safe_dump({"baseline": "window:7", "alpha": 0.01, "measures": ["accuracy", "parse_rate"]}))
    baseline, settings = load_drift_config(conf, {"alpha": 0.02, "min_change": None})
    assert baseline == "window:7"
    assert (settings.alpha, settings.min_change, settings.measures) == (0.02, 0.02, ("accuracy", "parse_rate"))
    with pytest.raises(ConfigError, match=r"alpha=0.9: must be a number in \(0, 0.5\] \(fix alpha in the command line"):
        load_drift_config(conf, {"alpha": 0.9})  # an option's bad value is named as coming from the command line
    conf.write_text("alpha: 0.7\n")
    with pytest.raises(ConfigError, match=r"alpha=0.7: .*\(fix alpha in .*drift.yaml"):
        load_drift_config(conf, {"min_change": 0.1})  # a file's bad value names the file
    conf.write_text("measures: accuracy\n")  # a single value is a list of one, as in every study config
    assert load_drift_config(conf)[1].measures == ("accuracy",)


def _run(data: str, out: Path, run_id: str, *extra: str):
    sets = [a for s in [f"data={data}", *TINY] for a in ("--set", s)]
    argv = ["run", CONFIG, *sets, "--output", str(out), "--serial", "--run-id", run_id, "--then", "drift", *extra]
    return CliRunner().invoke(cli, argv)


def test_run_then_drift_checks_the_run_just_made_and_exits_with_drifts_code(tmp_path):
    nights = str(tmp_path / "nights")
    change = parse_change("judge-001@1:accuracy=-0.3")
    generate_drift_sequence(nights, nights=2, changes=[change], n_items=1500, n_judges=5, seed=4)
    out = tmp_path / "out"

    first = _run(night_url(nights, 0), out, "nightly-a")
    assert first.exit_code == 0, first.output
    assert "inclusion nightly-a: no baseline run yet, nothing compared" in first.output

    second = _run(night_url(nights, 1), out, "nightly-b")
    assert second.exit_code == 3, second.output
    assert "FLAG judge-001 accuracy: accuracy drop" in second.output
    lines = second.output.strip().splitlines()
    report = Path(lines[-1])
    assert report == out / "drift" / "inclusion" / "nightly-b" and (report / "drift.json").is_file()
    assert str(out / "inclusion" / "nightly-b") in lines  # the run's URL is printed before the check

    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("min_change: 0.9\n")
    before = (report / "drift.json").read_bytes()
    again = _run(night_url(nights, 1), out, "nightly-b", "--drift-conf", str(lenient))  # complete: only the check
    # ... whose report of other settings would replace the committed one: refused, the fix named
    assert again.exit_code == 2 and "other inputs" in again.output and "--overwrite" in again.output, again.output
    assert (report / "drift.json").read_bytes() == before
    argv = ["drift", "--output", str(out), "--current", "nightly-b", "--drift-conf", str(lenient), "--overwrite"]
    again = CliRunner().invoke(cli, argv)
    assert again.exit_code == 0 and "FLAG" not in again.output, again.output
