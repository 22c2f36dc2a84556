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
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
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
print(json.dumps({{"loaded": loaded, "errors": errors, "engines": sorted(
    m for m in sys.modules if m.split(".")[0] in ("pyspark", "ray"))}}))
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


# The base install (no engine extra): the CLI, `config show` and a serial run of an in-memory study work; a
# study or a run that needs an engine stops with one line naming the extra, before anything is written.
_BASE_CLI = """
from click.testing import CliRunner
from judgecal_dist.cli import cli
shown = CliRunner().invoke(cli, ["config", "show", "inclusion"])
assert shown.exit_code == 0 and "study: inclusion" in shown.output, shown.output
ran = CliRunner().invoke(cli, ["run", "inclusion", "--set", "data=/nonexistent", "--output", {out!r}])
errors["run"] = [ran.exit_code, ran.output.strip()]
"""


def test_base_install_needs_no_engine_and_names_the_extra(tmp_path):
    got = _without(["pyspark", "ray", *EXTRAS["continuous"]], _BASE_CLI.format(out=str(tmp_path / "results")))
    assert got["engines"] == []
    assert {"inclusion", "budget", "narrowband", "regime_map", "ensemble"} <= set(got["loaded"])
    for name in ("itc", "inclusion_scale"):
        assert got["errors"][name] == (
            f"study '{name}': needs the 'spark' extra, not installed here (missing pyspark): "
            "pip install 'judgecal-dist[spark]'"
        )
    code, line = got["errors"]["run"]
    assert code == 2 and "needs the 'ray' extra" in line and "--serial" in line and "judgecal-dist[ray]" in line
    assert not (tmp_path / "results").exists()
