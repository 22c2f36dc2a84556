"""GLIDE's PPI++ mean (``glide.estimators.PPIMeanEstimator``) over many targets and label draws, for
benchmarks/label_llmbar.py.

Runs in the benchmark-only environment ``.venv-peers`` (``make bench-peers``: glide-py needs Python >= 3.12), so it
imports numpy and glide only. Arrays come and go as .npz files (``allow_pickle=False`` both ways)::

    .venv-peers/bin/python benchmarks/peers/glide_runner.py IN.npz OUT.npz

IN holds ``outcome`` (T, N): each target's outcome on every item (NaN: the item is not in the target), ``proxy``
(T, N): the proxy on the same items, ``labelled`` (R, N) bool: the items whose label a draw reveals, and
``confidence`` (scalar). OUT holds ``estimate``, ``std``, ``lower``, ``upper`` and ``ess`` (GLIDE's effective sample
size), each (R, T), NaN where GLIDE refuses the draw (e.g. constant labelled outcomes), and ``version``.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
from glide import __version__
from glide.estimators import PPIMeanEstimator


def run(outcome: np.ndarray, proxy: np.ndarray, labelled: np.ndarray, confidence: float) -> dict[str, np.ndarray]:
    """Every (draw, target): GLIDE's power-tuned PPI on the target's items, the draw's labels revealed."""
    shape = (labelled.shape[0], outcome.shape[0])
    out = {key: np.full(shape, np.nan) for key in ("estimate", "std", "lower", "upper", "ess")}
    estimator = PPIMeanEstimator()
    for t in range(outcome.shape[0]):
        items = np.isfinite(proxy[t]) & np.isfinite(outcome[t])
        y_all, f = outcome[t, items], proxy[t, items]
        for r in range(labelled.shape[0]):
            y_true = np.where(labelled[r, items], y_all, np.nan)  # labels hidden except the draw's
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = estimator.estimate(y_true, f, confidence_level=confidence, power_tuning=True)
            except ValueError:  # too few labels, constant labels or proxy: GLIDE gives no interval
                continue
            ci = res.confidence_interval
            out["estimate"][r, t], out["std"][r, t] = ci.mean, ci.std
            out["lower"][r, t], out["upper"][r, t] = ci.lower_bound, ci.upper_bound
            out["ess"][r, t] = res.effective_sample_size
    return out


def main() -> None:
    source, dest = sys.argv[1:3]
    with np.load(source, allow_pickle=False) as data:
        out = run(data["outcome"], data["proxy"], data["labelled"].astype(bool), float(data["confidence"]))
    np.savez(dest, version=np.array(__version__), **out)


if __name__ == "__main__":
    main()
