"""Optional dependency groups: a study whose extra is missing stops with the install command, before any work."""

from __future__ import annotations

import json
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
import judgecal_dist.cli, judgecal_dist.scoring.apply, judgecal_dist.engine.onepass.replicates
from judgecal_dist.errors import ConfigError
from judgecal_dist.studies import STUDIES, STUDY_EXTRAS, get_study
loaded = [n for n in STUDIES if n not in STUDY_EXTRAS and get_study(n)]
errors = {{}}
for name in STUDY_EXTRAS:
    try:
        get_study(name)
    except ConfigError as exc:
        errors[name] = str(exc)
print(json.dumps({{"loaded": loaded, "errors": errors}}))
"""


# Distributions whose import name differs from their name.
_IMPORT_NAMES = {"mlflow_skinny": "mlflow"}


def test_extras_match_pyproject():
    with open("pyproject.toml", "rb") as fh:
        declared = tomllib.load(fh)["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        packages = {req.split("=")[0].split(">")[0].split("<")[0].strip().replace("-", "_") for req in declared[extra]}
        packages = {_IMPORT_NAMES.get(package, package) for package in packages}
        assert set(modules) == packages  # every package of the extra is checked, and nothing else
    assert set(STUDY_EXTRAS.values()) <= set(EXTRAS)


def test_without_the_extra_the_core_loads_and_the_study_names_the_install():
    code = _WITHOUT_EXTRA.format(blocked=sorted(EXTRAS["continuous"]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "inclusion" in got["loaded"] and "inclusion_scale" in got["loaded"]  # Spark-only work needs no torch
    message = got["errors"]["continuous"]
    assert message.startswith("study 'continuous': needs the 'continuous' extra")
    assert "missing torch, torchdiffeq, numpyro, jax, arviz_stats" in message
    assert message.endswith("pip install 'judgecal-dist[continuous]'")
