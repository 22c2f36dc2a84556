"""Probes of degenerate data that passes the format checks: every command that reads a panel decides it before the
first write.

Each probe drives the real command (click's runner, in-process, ``--serial``, the in-memory engine) on a small
generated panel rewritten with pyarrow into one degenerate shape: every verdict null, every verdict a tie, every
verdict ``A`` (a constant panel), three labelled items, or a calibration fraction / fold count that starves a split;
and a seed beyond 64 bits. The refusal must be exit 2, one ``Error:`` line naming the table or setting, and no
output folder. References are independent of the code under test: the rewritten files and the folder listing.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from judgecal_dist.cli import cli
from judgecal_dist.settings import SEED_MAX
from judgecal_dist.studies import STUDIES, STUDY_EXTRAS
from judgecal_dist.studies.runner import study_schema

#: Studies run on the in-memory engine, with settings that keep a run small.
SMALL = {
    "inclusion": ["replicates=3", "permutation_resamples=100", "item_bootstrap_resamples=100"],
    "inclusion_scale": ["replicates=3", "execution=dense"],
    "budget": ["replicates=3"],
    "itc": ["replicates=3"],
}
BIG = 2**64  # beyond uint64 too


def _rewrite(folder: Path, table: str, column: str, values: Callable[[int], list]) -> None:
    path = folder / table / "part-00000.parquet"
    data = pq.read_table(path)
    field = data.schema.field(column)
    data = data.set_column(data.schema.get_field_index(column), field, pa.array(values(data.num_rows), field.type))
    pq.write_table(data, path)


@pytest.fixture(scope="module")
def panels(tmp_path_factory) -> dict[str, str]:
    """A generated panel (80 items, 4 judges) and its degenerate copies."""
    root = tmp_path_factory.mktemp("degenerate")
    base = root / "base"
    argv = ["generate", "--items", "80", "--judges", "4", "--seed", "1", str(base)]
    assert CliRunner().invoke(cli, argv).exit_code == 0
    shapes: dict[str, tuple[str, str, Callable[[int], list]]] = {
        "all_null": ("verdicts", "verdict", lambda n: [None] * n),
        "all_tie": ("verdicts", "verdict", lambda n: ["tie"] * n),
        "constant": ("verdicts", "verdict", lambda n: ["A"] * n),
        "three_labels": ("labels", "label", lambda n: ["A", "B", "B"] + [None] * (n - 3)),
        "one_a": ("labels", "label", lambda n: ["A", "B", "B", "B", "B", "B"] + [None] * (n - 6)),
    }
    out = {"base": str(base)}
    for name, (table, column, values) in shapes.items():
        shutil.copytree(base, root / name)
        _rewrite(root / name, table, column, values)
        out[name] = str(root / name)
    return out


def _sets(items: list[str]) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def _study(study: str, data: str, out: Path, *settings: str) -> list[str]:
    if study == "fit":
        return ["fit", "--data", data, *_sets(list(settings)), "--output", str(out), "--serial"]
    return ["run", study, *_sets([f"data={data}", *SMALL.get(study, []), *settings]), "--output", str(out), "--serial"]


def _refused(argv: list[str], out: Path, pattern: str) -> str:
    """Exit 2, one error line matching ``pattern``, no traceback, no output folder."""
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert re.search(pattern, errors[0]), errors[0]
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))
    return errors[0]


NO_VOTE = r": verdicts: verdict: no A/B verdict on any of the 80 labelled items \(320 item x judge cells: "
# (study, shape, settings, the line's pattern): the shape's table or setting is named, with the fix.
CASES = [
    *[(s, "all_null", (), NO_VOTE + r"0 tie and 320 null") for s in ("inclusion", "inclusion_scale", "budget", "fit")],
    *[(s, "all_tie", (), NO_VOTE + r"320 tie and 0 null") for s in ("inclusion", "inclusion_scale", "budget", "fit")],
    ("itc", "all_null", (), r"verdicts: verdict: no A/B/tie verdict on any of the 320 labelled items of 4"),
    ("itc", "all_tie", (), r"verdicts: verdict: every one of the 320 A/B/tie verdicts on labelled items is 'tie'"),
    *[
        (
            s,
            "constant",
            (),
            r"verdicts: verdict: every one of the 320 A/.*verdicts on labelled items is 'A' \(a constant",
        )
        for s in ("inclusion", "inclusion_scale", "budget", "fit", "itc")
    ],
    *[
        (s, "three_labels", (), r"labels: label: 3 labelled items \(1 A, 2 B\); \w+ needs >= 2 of each class")
        for s in ("inclusion", "inclusion_scale")
    ],
    ("budget", "three_labels", (), r"labels: the smallest calibration half of the planned splits has \d items"),
    ("fit", "three_labels", (), r"folds=5: 3 groups leave a fold empty; lower folds"),
    ("itc", "three_labels", (), r"calib_fraction=0\.05: split seed=0 gets 0 of the 3 labelled items"),
    *[
        (s, "base", ("calib_fraction=0.02",), r"calib_fraction=0\.02: split seed=\d+ gets .* raise calib_fraction")
        for s in ("inclusion", "inclusion_scale")
    ],
    ("itc", "base", ("calib_fraction=0.001",), r"calib_fraction=0\.001: split seed=0 gets 0 of the 80 labelled"),
    ("budget", "base", ("calib_fraction=0.02",), r"labels: the smallest calibration half of the planned splits has"),
    (
        "fit",
        "one_a",
        ("folds=2",),
        r"folds=2: fold \d's training part gets 1 A, \d B to calibrate .* lower folds or label more items",
    ),
]


@pytest.mark.parametrize(("study", "shape", "settings", "pattern"), CASES, ids=lambda v: str(v)[:24])
def test_degenerate_panel_is_refused_before_anything_is_written(panels, tmp_path, study, shape, settings, pattern):
    out = tmp_path / "out"
    _refused(_study(study, panels[shape], out, *settings), out, pattern)


def _seed_keys() -> list[tuple[str, str]]:
    """Every seed setting of every study whose extras are installed (the studies' own JSON Schemas)."""
    keys = []
    for study in sorted(STUDIES):
        if any(extra in ("continuous",) for extra in STUDY_EXTRAS.get(study, ())):
            continue  # torch: the continuous study shares the same Seed declaration
        props = study_schema(study)["properties"]
        keys += [(study, key) for key in props if key.endswith("seed")]
    return keys


def test_every_seed_setting_is_bounded_int64_safe():
    for study, key in _seed_keys():
        assert study_schema(study)["properties"][key]["maximum"] == SEED_MAX == 2**62 - 1, (study, key)
    assert {"seed", "orientation_seed", "synthetic_seed", "bootstrap_seed", "split_seed"} <= {
        k for _, k in _seed_keys()
    }


@pytest.mark.parametrize(("study", "key"), _seed_keys(), ids=lambda v: str(v))
def test_a_seed_beyond_64_bits_is_refused_naming_its_key(panels, tmp_path, study, key):
    out = tmp_path / "out"
    data = [] if study == "narrowband" else [f"data={panels['base']}"]
    argv = ["run", study, *_sets([*data, f"{key}={BIG}"]), "--output", str(out), "--serial"]
    _refused(argv, out, rf"^Error: (study {study}: )?{key}={BIG}: must be an integer in \[0, {SEED_MAX}\] \(.*{key}")


def test_fit_and_generate_refuse_a_seed_beyond_64_bits(panels, tmp_path):
    out = tmp_path / "out"
    _refused(_study("fit", panels["base"], out, f"seed={BIG}"), out, rf"seed={BIG}: must be an integer in \[0, ")
    dest = tmp_path / "g"
    argv = ["generate", "--items", "10", "--judges", "2", "--seed", str(BIG), str(dest)]
    _refused(argv, dest, rf"seed: must be an integer in \[0, {SEED_MAX}\], got {BIG}")
    _refused([*argv[:-2], "-1", str(dest)], dest, r"seed: must be an integer in \[0, \d+\], got -1")


def test_the_largest_seed_runs(panels, tmp_path):
    # The bound is not a guess: the top seed (plus replicates and every study offset) runs end to end.
    result = CliRunner().invoke(cli, _study("inclusion", panels["base"], tmp_path / "out", f"seed={SEED_MAX}"))
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def model(panels, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("fit") / "out"
    result = CliRunner().invoke(cli, _study("fit", panels["base"], out, "folds=2"))
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


@pytest.mark.parametrize("shape", ["all_null", "all_tie"])
def test_score_refuses_a_table_without_an_a_or_b_verdict(model, panels, tmp_path, shape):
    out = tmp_path / "scored"
    argv = ["score", "--model", model, "--data", panels[shape], "--output", str(out), "--engine", "local"]
    _refused(argv, out, r"verdicts: verdict: no A or B verdict in the 320 rows with sample=0 .* \(or --sample\)")


def test_score_of_a_constant_table_is_scored(model, panels, tmp_path):
    # Unlike fitting, scoring needs no spread: items on which every judge says A are scored (a legitimate batch).
    out = tmp_path / "scored"
    argv = ["score", "--model", model, "--data", panels["constant"], "--output", str(out), "--engine", "local"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0 and (out / "_SUCCESS").exists(), result.output
