"""Optional dependency groups: a study whose extra is missing stops with the install command, before any work."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

from judgecal_dist.extras import EXTRAS
from judgecal_dist.studies import STUDY_EXTRAS

# Runs in a fresh interpreter where the extra's packages cannot be imported (as on a Spark-only worker): a
# meta-path finder refuses them, so `import torch` raises ImportError and nothing of them is in sys.modules.
_WITHOUT_EXTRA = """
import json, sys
BLOCKED = {blocked!r}
tried = []
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            tried.append(name)
            raise ImportError(f"No module named {{name!r}} (blocked by the test)")
        return None
sys.meta_path.insert(0, Refuse())
import judgecal_dist.cli, judgecal_dist.scoring.apply, judgecal_dist.studies.runner
from judgecal_dist.errors import ConfigError
from judgecal_dist.studies import STUDIES, STUDY_EXTRAS, get_study
loaded, errors = [], {{}}
for name in STUDIES:
    try:
        loaded.append(get_study(name).NAME)
    except ConfigError as exc:
        errors[name] = str(exc)
{more}
print(json.dumps({{"loaded": loaded, "errors": errors, "tried": sorted(set(tried)), "engines": sorted(
    m for m in sys.modules if m.split(".")[0] in BLOCKED)}}))
"""


# Distributions whose import name differs from their name.
_IMPORT_NAMES = {"mlflow_skinny": "mlflow"}


def _import_names(declared: dict[str, list[str]], extra: str) -> set[str]:
    """The import names of an extra's requirements; ``judgecal-dist[a,b]`` stands for extras a and b."""
    names: set[str] = set()
    for req in declared[extra]:
        name, inner = re.match(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", req).groups()
        if name == "judgecal-dist":
            names |= set().union(*(_import_names(declared, e.strip()) for e in inner.split(",")))
        else:
            names.add(_IMPORT_NAMES.get(name.replace("-", "_"), name.replace("-", "_")))
    return names


def test_extras_match_pyproject():
    with open("pyproject.toml", "rb") as fh:
        declared = tomllib.load(fh)["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        assert set(modules) == _import_names(declared, extra)  # every package of the extra is checked, nothing else
    assert {e for extras in STUDY_EXTRAS.values() for e in extras} <= set(EXTRAS)


def _without(blocked: list[str], more: str = "") -> dict:
    code = _WITHOUT_EXTRA.format(blocked=blocked, more=more)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_without_the_extra_the_core_loads_and_the_study_names_the_install():
    got = _without(sorted(EXTRAS["continuous"]))
    assert set(got["errors"]) == {"continuous"}  # Spark-only work needs no torch
    message = got["errors"]["continuous"]
    assert message.startswith("study 'continuous': needs the 'continuous' extra")
    assert "missing torch, torchdiffeq, numpyro, jax, arviz_stats" in message
    assert message.endswith("pip install 'judgecal-dist[continuous]'")


# The base install (no extra at all): the loop runs in this process. generate -> ingest -> fit -> score through the
# CLI, with every extra's packages refused (botocore and s3fs of the cluster extra too); a command that truly needs
# an extra stops with one line naming it (exit 2), before anything is written.
_BASE_CLI = """
import pandas as pd
from click.testing import CliRunner
from judgecal_dist.cli import cli
tried.clear()  # the import graph of the commands below, not of the test's own set-up
out = {out!r}

def invoke(*args):
    result = CliRunner().invoke(cli, list(args))
    return [result.exit_code, result.output.strip()]

shown = invoke("config", "show", "inclusion")
assert shown[0] == 0 and "study: inclusion" in shown[1], shown
for name, args in {{
    "generate": ["generate", "--items", "300", "--judges", "6", "--seed", "3", out + "/panel"],
    "ingest": ["ingest", "--format", "long", out + "/panel", out + "/data"],
    "fit": ["fit", "--data", out + "/data", "--output", out + "/fit", "--set", "aggregators=[majority, stacking]",
            "--set", "calibrators=[none, platt]", "--set", "panels=[all]", "--set", "resamples=50"],
}}.items():
    errors[name] = invoke(*args)
model = errors["fit"][1].splitlines()[-1]
errors["score"] = invoke("score", "--model", model, "--data", out + "/data", "--output", out + "/scored")
errors["rows"] = len(pd.read_parquet(out + "/scored/items"))
errors["tried"] = sorted(set(tried))  # modules of an extra the loop tried to import (refused or not)
errors["run itc"] = invoke("run", "itc", "--output", out + "/itc")
errors["s3"] = invoke("score", "--model", model, "--data", "s3://bucket/data", "--output", out + "/s3")
errors["ray"] = invoke("run", "inclusion", "--ray", "--set", "data=" + out + "/data", "--output", out + "/ray")
errors["submit"] = invoke("submit", "inclusion", "--ray-address", "http://127.0.0.1:1", "--set", "data=" + out + "/data")
"""


def test_base_install_runs_the_loop_and_names_the_extra(tmp_path):
    blocked = sorted({"botocore", "s3fs", "pyspark", "ray", "torch", "jax", *EXTRAS["continuous"]})
    got = _without(blocked, _BASE_CLI.format(out=str(tmp_path)))
    assert got["engines"] == []  # the loop's import graph holds none of them
    assert got["errors"]["tried"] == ["ray"]  # only looked for, once, to choose the executor; never imported
    assert {"inclusion", "budget", "narrowband", "regime_map", "ensemble", "fit"} <= set(got["loaded"])
    for name in ("itc", "inclusion_scale"):
        assert got["errors"][name] == (
            f"study '{name}': needs the 'spark' extra, not installed here (missing pyspark): "
            "pip install 'judgecal-dist[spark]'"
        )
    errors = got["errors"]
    for step in ("generate", "ingest", "fit", "score"):
        assert errors[step][0] == 0, (step, errors[step])
    assert errors["rows"] == 300 and (tmp_path / "fit").is_dir()
    assert errors["score"][1].splitlines()[-1] == str(tmp_path / "scored")
    for step, extra in (("run itc", "spark"), ("s3", "cluster"), ("ray", "ray"), ("submit", "ray")):
        code, line = errors[step]
        assert code == 2 and f"needs the '{extra}' extra" in line and f"judgecal-dist[{extra}]" in line, (step, line)
    assert not (tmp_path / "itc").exists() and not (tmp_path / "s3").exists() and not (tmp_path / "ray").exists()
