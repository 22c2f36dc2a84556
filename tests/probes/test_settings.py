"""Probes of settings: what a user types by accident is refused before anything is read or written.

Each probe drives the real command (click's runner, in-process) on a small generated panel, so the only thing wrong
is the setting: the refusal must be exit 2, one line naming the key and the value, and no output folder (no
manifest, no part) may appear. Before typed settings these wrote a manifest and failed inside a replicate.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from tests.catalogue.settings import BOMB

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
TINY = ["aggregators=[majority, one_coin]", "calibrators=[none, platt]", "permutation_resamples=100", "replicates=2"]


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> str:
    dest = tmp_path_factory.mktemp("panel") / "D"
    argv = ["generate", "--items", "80", "--judges", "4", "--seed", "1", str(dest)]
    assert CliRunner().invoke(cli, argv).exit_code == 0
    return str(dest)


def _run(panel: str, out: Path, settings: list[str], config: str = CONFIG) -> tuple[int, str]:
    sets = [arg for item in [f"data={panel}", *TINY, *settings] for arg in ("--set", item)]
    result = CliRunner().invoke(cli, ["run", config, *sets, "--output", str(out), "--serial"])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("setting", "key", "shown"),
    [
        ("n_bins=0", "n_bins", "n_bins=0: must be an integer in [2, 10000]"),
        ("alpha0=-1", "alpha0", "alpha0=-1: must be a number > 0"),
        ("stacking_folds=1", "stacking_folds", "stacking_folds=1: must be an integer in [2, 100]"),
        ("ds_n_iter=0", "ds_n_iter", "ds_n_iter=0: must be an integer in [1, 100000]"),
        ("panels=[all,top0]", "panels", "panels=[all, top0]: must be a list holding all"),
        ("ci_level=2", "ci_level", "ci_level=2: must be a number in (0, 1)"),
        ("panels=top3", "panels", "panels=[top3]: must be a list holding all"),  # a list of one, not 't','o','p','3'
        ("replicates=1e8", "replicates", "replicates=1e8: must be an integer in [1, 10000]"),
        ("replicates=100000000", "replicates", "replicates=100000000: must be an integer in [1, 10000]"),
        ("permutation_resamples=1e9", "permutation_resamples", "must be an integer in [1, 100000]"),
        ("conformal_alphas=1.5", "conformal_alphas", "conformal_alphas=1.5: must be a list, each a number in (0, 1)"),
        ("seed=-1", "seed", "seed=-1: must be an integer in [0, 4611686018427387903]"),
        (
            "seed=18446744073709551616",
            "seed",
            "seed=18446744073709551616: must be an integer in [0, 4611686018427387903]",
        ),
    ],
)
def test_bad_setting_is_refused_before_anything_is_written(panel, tmp_path, setting, key, shown):
    out = tmp_path / "out"
    code, output = _run(panel, out, [setting])
    assert code == 2, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {key}=") and shown in lines[0], output
    assert f"--set {key}=" in lines[0] and "inclusion.yaml" in lines[0]  # the fix names the file and the override
    assert not out.exists()  # no output folder, so no manifest and no part


def test_alias_bomb_is_refused_in_a_second_without_output(panel, tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    assert bomb.stat().st_size < 500
    started = time.perf_counter()
    code, output = _run(panel, tmp_path / "out", [], config=str(bomb))
    assert code == 2 and "bomb.yaml: YAML aliases expand to more than 100000 values" in output
    assert len(output.strip().splitlines()) == 1 and time.perf_counter() - started < 5
    assert not (tmp_path / "out").exists()


def test_every_study_refuses_an_interval_out_of_range_before_writing(tmp_path):
    # ci_level is one shared definition: each study refuses 2 with the same message and writes nothing.
    for config in sorted((ROOT / "judgecal_dist" / "studies" / "configs").glob("*.yaml")):
        if config.stem == "continuous":
            pytest.importorskip("torch")
        sets = ["--set", "ci_level=2"] + (["--set", "data=x"] if config.stem != "narrowband" else [])
        result = CliRunner().invoke(cli, ["run", str(config), *sets, "--output", str(tmp_path / "out")])
        assert result.exit_code == 2 and "ci_level=2: must be a number in (0" in result.output, config.stem
    assert not (tmp_path / "out").exists()


def test_a_scalar_where_a_list_is_expected_runs_as_a_list_of_one(panel, tmp_path):
    code, output = _run(panel, tmp_path / "out", ["panels=all", "calibrators=platt", "conformal_alphas=0.1"])
    assert code == 0, output
    manifest = json.loads((Path(output.strip().splitlines()[-1]) / "manifest.json").read_text())
    config = manifest["config"]
    assert (config["panels"], config["calibrators"], config["conformal_alphas"]) == (["all"], ["platt"], [0.1])


def test_config_show_prints_the_effective_settings_and_schema_their_ranges():
    shown = CliRunner().invoke(cli, ["config", "show", "inclusion", "--set", "panels=all", "--set", "n_bins=15"])
    assert shown.exit_code == 0, shown.output
    assert (
        "study: inclusion\n" in shown.output and "panels:\n- all\n" in shown.output and "n_bins: 15\n" in shown.output
    )
    schema = CliRunner().invoke(
        cli, ["config", "schema", str(ROOT / "judgecal_dist" / "studies" / "configs" / "budget.yaml")]
    )
    properties = json.loads(schema.output)["properties"]
    assert properties["n_bins"]["minimum"] == 2 and properties["max_t_resamples"]["maximum"] == 100_000
