"""The base install runs the weekly loop: a fresh venv holding only the project's wheel (no extra) ingests LLMBar,
fits and scores it with the ``judgecal`` script, from a folder that is not the checkout.

CI's check of ``pip install judgecal-dist``: the wheel is built from this checkout's sources, its dependencies come
from the package index through pip's cache. Nothing of the checkout is on the path (no PYTHONPATH, another folder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
#: What the wheel is built from (setuptools writes build/ and *.egg-info beside its sources: not in the checkout).
SOURCES = ("pyproject.toml", "README.md", "judgecal_dist")
#: Import names of every extra's heavy packages (the benchmarks' duckdb too): none may come with the base wheel.
NOT_INSTALLED = ("botocore", "s3fs", "pyspark", "ray", "torch", "jax", "mlflow", "duckdb")


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"{' '.join(args)} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def test_fresh_base_install_ingests_fits_and_scores_llmbar(llmbar_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip"]
    _run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(src)],
        tmp_path,
        env,
    )
    (wheel,) = (tmp_path / "dist").glob("judgecal_dist-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], tmp_path, env)

    probe = "import importlib.util, json; print(json.dumps([m for m in %r if importlib.util.find_spec(m)]))"
    found = _run([str(venv / "bin" / "python"), "-c", probe % (NOT_INSTALLED,)], tmp_path, env)
    assert json.loads(found.stdout) == []  # the base install holds no extra

    work = tmp_path / "work"  # not the checkout: relative paths resolve here
    work.mkdir()
    judgecal = str(venv / "bin" / "judgecal")
    _run([judgecal, "ingest", "--format", "llmbar", str(llmbar_dir), "data"], work, env)
    fit = _run([judgecal, "fit", "--data", "data", "--output", "results"], work, env)
    assert "Ray is not installed" in fit.stderr  # the in-process executor is said once
    run = Path(fit.stdout.strip().splitlines()[-1])
    assert run.is_relative_to(work / "results") and (run / "model" / "model.json").is_file()
    scored = _run([judgecal, "score", "--model", str(run), "--data", "data", "--output", "scored"], work, env)
    assert scored.stdout.strip().splitlines()[-1] == "scored"

    labels = pd.read_parquet(work / "data" / "labels").set_index("item_id")["label"]
    items = pd.read_parquet(work / "scored" / "items").set_index("item_id")
    assert len(items) == items.index.nunique() == labels.index.nunique() == 419  # every LLMBar item, once
    assert items["p"].between(0, 1).all() and items["in_calibration"].all()
    # The panel is right on ~89% of LLMBar (fit's card); a broken score path is near 50%.
    assert (items["verdict"] == labels.reindex(items.index)).mean() > 0.8
