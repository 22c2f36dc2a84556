"""The GLIDE runner of benchmarks/label_llmbar.py against ppi-python: both are PPI++ for a mean with one proxy
(power-tuned lambda, the proxy's mean over the unlabelled items), so on the same arrays their intervals agree up to
their small-sample details (GLIDE: ddof-1 variances, lambda unclipped; ppi-python: ddof 0, lambda clipped to
[0, 1]): within 0.005 on a mean in [0, 1] whose half-width is ~0.07 here; a wrong proxy or label mask is off by ~0.05.

GLIDE needs Python >= 3.12 and lives in ``.venv-peers`` (``make bench-peers``); the test skips without it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
RUNNER = ROOT / "benchmarks" / "peers" / "glide_runner.py"


@pytest.mark.skipif(not PEERS_PYTHON.exists(), reason=".venv-peers not found (make bench-peers; needs python3.12)")
def test_glide_runner_equals_ppi_python(tmp_path):
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python not installed (the bench extra)")
    rng = np.random.default_rng(0)
    n_items, draws = 400, 3
    proxy = rng.uniform(size=(2, n_items))
    outcome = (rng.uniform(size=(2, n_items)) < proxy).astype(float)
    outcome[1, :50] = np.nan  # the second target leaves 50 items out
    proxy[1, :50] = np.nan
    labelled = np.zeros((draws, n_items), dtype=bool)
    for r in range(draws):
        labelled[r, rng.choice(n_items, 80, replace=False)] = True
    source, dest = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(source, outcome=outcome, proxy=proxy, labelled=labelled, confidence=np.array(0.9))
    subprocess.run([str(PEERS_PYTHON), str(RUNNER), str(source), str(dest)], check=True)
    with np.load(dest, allow_pickle=False) as out:
        lower, upper = out["lower"], out["upper"]
    for r in range(draws):
        for t in range(2):
            items = np.isfinite(proxy[t])
            lab, unl = labelled[r] & items, ~labelled[r] & items
            lo, hi = ppi_py.ppi_mean_ci(outcome[t, lab], proxy[t, lab], proxy[t, unl], alpha=0.1, lam=None)
            np.testing.assert_allclose([lower[r, t], upper[r, t]], [np.ravel(lo)[0], np.ravel(hi)[0]], atol=5e-3)
