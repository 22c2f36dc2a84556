"""Labels where they pay on LLMBar: prediction-powered intervals with the calibrated panel as the proxy, beside PPI++
with the best single judge as the proxy (GLIDE and ppi-python) and the classical labels-only interval.

LLMBar's 419 labelled items and its 130 judges (backbone/strategy/order). The labels are hidden; each draw reveals
only the labels of the items it selects (``select``'s Poisson draw, :mod:`judgecal_dist.methods.labels.sampling`).
Targets: each judge's accuracy and the win rate (label A), truth = the value over all 419 items. For 50, 100 and 200
labels and ``--draws`` draws each:

* **ours, uniform**: PPI++ (:class:`~judgecal_dist.methods.labels.estimators.PredictionPoweredMean`) on a uniform
  draw (pi = n/N), proxy = the panel's P(label = A) (``judge_accuracy``: P(label = the judge's verdict));
* **ours, active**: the inverse-probability form on an active draw (``inclusion_probabilities(p, n)``, floor 0.2);
* **GLIDE PPI++** (``glide-py`` 0.11, ``PPIMeanEstimator``, power-tuned) and **ppi-python PPI++** (``ppi_mean_ci``,
  ``lam=None``) with the best single judge as the proxy, on the same uniform draws: the win rate's proxy is the
  best judge's verdict (A = 1), a judge's accuracy's proxy is 1[judge's verdict == the best judge's verdict] (the
  second best for the best judge itself). The best judge is the most accurate on all 419 labels: an oracle
  choice, in the peers' favour;
* **classical**: the labels-only normal interval of the same uniform draws.

The proxy never sees a label: the panel is Dawid-Skene fitted by EM on the 130 judges' votes of all items without
any label (unsupervised), so no cross-fitting is needed. Effective labels of a method: ``n * (mean classical se /
mean method se)**2`` over the draws (the labels the classical interval would need for the method's width; the
classical row is n by construction). Coverage: the share of draws whose interval holds the truth (the population is
the 419 items, so every interval is somewhat conservative at 200 labels: none corrects for a finite population).

GLIDE needs Python >= 3.12 and runs in ``.venv-peers`` (``make bench-peers``) through
``benchmarks/peers/glide_runner.py``; without it the GLIDE rows say why and the rest is printed. Usage (from the
repository root)::

    python -m benchmarks.label_llmbar --draws 300 --figure results/label_llmbar.png
    python -m benchmarks.label_llmbar --smoke
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from judgecal_dist.api import vote_matrix
from judgecal_dist.io.adapters.llmbar import read_llmbar
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.labels.estimators import PredictionPoweredMean
from judgecal_dist.methods.labels.sampling import draw_mask, inclusion_probabilities
from judgecal_dist.methods.labels.targets import build_targets

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = ROOT.parent / "shared" / "data" / "llmbar"
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
RUNNER = ROOT / "benchmarks" / "peers" / "glide_runner.py"
ALPHA = 0.05
METHODS = ("ours, uniform", "ours, active", "GLIDE PPI++ (best judge)", "ppi-python PPI++ (best judge)", "classical")


@dataclass
class Panel:
    """LLMBar as arrays: targets' outcomes (all labels) and both proxies, on every item (NaN: not in the target)."""

    names: list[str]
    outcome: np.ndarray  # (T, N)
    ours: np.ndarray  # (T, N) the panel's proxy
    peer: np.ndarray  # (T, N) the best single judge's proxy
    p: np.ndarray  # (N,) the panel's P(label = A)
    best: str
    n_judges: int


def load(src: str, max_judges: int | None = None) -> Panel:
    """Read LLMBar, fit the panel without labels and build the targets with both proxies."""
    tables = read_llmbar(src).tables
    items, judges, votes = vote_matrix(tables["verdicts"].to_pandas())
    labels = tables["labels"].to_pandas().set_index("item_id")["label"]
    y = (labels.loc[list(items)] == "A").to_numpy(np.float64)
    p = DawidSkene().fit(votes).posteriors_[:, 1]  # unsupervised: no label enters the proxy
    voted = votes >= 0
    accuracy = np.where(voted, votes == y[:, None], 0).sum(0) / np.maximum(voted.sum(0), 1)
    order = np.argsort(-accuracy, kind="stable")
    best, second = int(order[0]), int(order[1])
    keep = sorted(order[:max_judges].tolist()) if max_judges else list(range(len(judges)))
    kept = {f"judge_accuracy:{judges[j]}": j for j in keep}
    n = len(items)
    names, outcome, ours, peer = [], [], [], []
    for target in build_targets(p, y, votes, judges):
        if target.name not in kept and target.name != "win_rate":
            continue
        o, f, g = (np.full(n, np.nan) for _ in range(3))
        o[target.rows], f[target.rows] = target.outcome, target.proxy
        if target.name == "win_rate":
            ref = votes[:, best]
            g[target.rows] = np.where(ref[target.rows] >= 0, ref[target.rows], 0.5)
        else:
            j = kept[target.name]
            ref = votes[:, second if j == best else best]
            own = votes[target.rows, j]
            g[target.rows] = np.where(ref[target.rows] >= 0, (ref[target.rows] == own).astype(float), 0.5)
        names.append(target.name)
        outcome.append(o)
        ours.append(f)
        peer.append(g)
    return Panel(names, np.array(outcome), np.array(ours), np.array(peer), p, judges[best], len(judges))


def _ours(outcome: np.ndarray, proxy: np.ndarray, mask: np.ndarray, pi: np.ndarray | None) -> list[float]:
    """Lower, upper and se of ours, then of the classical interval of the same labels (NaN: fewer than 2)."""
    items = np.isfinite(proxy)
    lab = mask & items
    if lab.sum() < 2:
        return [np.nan] * 6
    est = PredictionPoweredMean(alpha=ALPHA).fit(
        outcome[lab], proxy[lab], proxy[items], None if pi is None else pi[lab]
    )
    return [*est.interval_, est.se_, *est.classical_interval_, est.classical_se_]


def _ppi_python(outcome: np.ndarray, proxy: np.ndarray, mask: np.ndarray) -> tuple[float, ...]:
    from ppi_py import ppi_mean_ci

    items = np.isfinite(proxy)
    lab, unl = mask & items, ~mask & items
    if lab.sum() < 2:
        return (np.nan,) * 3
    lo, hi = ppi_mean_ci(outcome[lab], proxy[lab], proxy[unl], alpha=ALPHA, lam=None)
    lo, hi = float(np.ravel(lo)[0]), float(np.ravel(hi)[0])
    return lo, hi, (hi - lo) / (2.0 * norm.ppf(1.0 - ALPHA / 2.0))


def _glide(panel: Panel, masks: np.ndarray) -> tuple[dict[str, np.ndarray] | None, str]:
    """GLIDE's rows through the peers' environment, or None and the reason it did not run."""
    if not PEERS_PYTHON.exists():
        return None, f"not run: {PEERS_PYTHON.relative_to(ROOT)} not found (make bench-peers; needs python3.12)"
    with tempfile.TemporaryDirectory() as tmp:
        source, dest = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(source, outcome=panel.outcome, proxy=panel.peer, labelled=masks, confidence=np.array(1 - ALPHA))
        done = subprocess.run([str(PEERS_PYTHON), str(RUNNER), str(source), str(dest)], capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"not run: the GLIDE runner failed: {done.stderr.strip().splitlines()[-1:]}"
        with np.load(dest, allow_pickle=False) as out:
            return {k: out[k] for k in out.files}, f"glide-py {out['version']}"


def evaluate(panel: Panel, budgets: list[int], draws: int, seed: int) -> tuple[pd.DataFrame, dict[str, str]]:
    """One row per (target, labels, method, draw) summary: coverage, mean width, mean se, effective labels."""
    n_items = panel.outcome.shape[1]
    truth = np.nanmean(panel.outcome, axis=1)
    notes: dict[str, str] = {}
    try:
        import ppi_py  # noqa: F401

        have_ppi = True
    except ImportError:
        have_ppi, notes["ppi-python"] = False, "not run: ppi-python not installed (the bench extra)"
    rows = []
    for budget in budgets:
        uniform = np.full(n_items, budget / n_items)
        active = inclusion_probabilities(panel.p, budget)
        masks = np.array([draw_mask(uniform, seed + 2 * r) for r in range(draws)])
        amasks = np.array([draw_mask(active, seed + 2 * r + 1) for r in range(draws)])
        glide, notes["GLIDE"] = _glide(panel, masks)
        for t, name in enumerate(panel.names):
            res: dict[str, list[tuple[float, float, float]]] = {m: [] for m in METHODS}
            classical_se = []
            for r in range(draws):
                uni = _ours(panel.outcome[t], panel.ours[t], masks[r], None)
                res["ours, uniform"].append(tuple(uni[:3]))
                res["classical"].append(tuple(uni[3:]))
                classical_se.append(uni[5])
                res["ours, active"].append(tuple(_ours(panel.outcome[t], panel.ours[t], amasks[r], active)[:3]))
                if have_ppi:
                    res["ppi-python PPI++ (best judge)"].append(_ppi_python(panel.outcome[t], panel.peer[t], masks[r]))
                if glide is not None:
                    res["GLIDE PPI++ (best judge)"].append(
                        (glide["lower"][r, t], glide["upper"][r, t], glide["std"][r, t])
                    )
            ref = float(np.nanmean(classical_se))
            for method, values in res.items():
                if not values:
                    continue
                arr = np.array(values, dtype=float)
                ok = np.isfinite(arr).all(axis=1)
                lo, hi, se = arr[ok].T
                rows.append(
                    {
                        "target": name,
                        "labels": budget,
                        "method": method,
                        "draws": int(ok.sum()),
                        "coverage": float(np.mean((lo <= truth[t]) & (truth[t] <= hi))),
                        "width": float(np.mean(hi - lo)),
                        "effective_labels": budget * (ref / float(np.mean(se))) ** 2,
                    }  # fmt: skip
                )
    return pd.DataFrame(rows), notes


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Side by side: the win rate, and each judge's accuracy summarised over the judges (coverage pooled, width and
    effective labels as medians)."""
    judge = frame["target"].str.startswith("judge_accuracy:")
    parts = []
    for label, part in (
        ("win_rate", frame[~judge]),
        (f"judge_accuracy (median of {frame[judge]['target'].nunique()} judges)", frame[judge]),
    ):
        g = part.groupby(["labels", "method"], sort=False)
        parts.append(
            pd.DataFrame(
                {
                    "coverage": g["coverage"].mean(),
                    "min_coverage": g["coverage"].min(),
                    "width": g["width"].median(),
                    "effective_labels": g["effective_labels"].median(),
                }  # fmt: skip
            )
            .reset_index()
            .assign(target=label)
        )
    table = pd.concat(parts, ignore_index=True)
    glide = table[table["method"] == METHODS[2]].set_index(["target", "labels"])["effective_labels"]
    key = pd.MultiIndex.from_frame(table[["target", "labels"]])
    table["x_glide"] = table["effective_labels"].to_numpy() / glide.reindex(key).to_numpy()
    return table[["target", "labels", "method", "coverage", "min_coverage", "width", "effective_labels", "x_glide"]]


def figure(table: pd.DataFrame, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = table["target"].unique()
    fig, axes = plt.subplots(1, len(targets), figsize=(6 * len(targets), 4.5), squeeze=False)
    for ax, target in zip(axes[0], targets, strict=True):
        part = table[table["target"] == target]
        for method, rows in part.groupby("method", sort=False):
            ax.plot(rows["labels"], rows["effective_labels"], marker="o", label=method)
        ax.set_xlabel("labels revealed (items)")
        ax.set_ylabel("effective labels (items the classical interval needs)")
        ax.set_title(target)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(DEFAULT_SRC))
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--labels", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure", default=None, help="write the effective-labels figure (PNG) here")
    parser.add_argument("--smoke", action="store_true", help="tiny size for CI: 50 labels, 4 draws, 4 judges")
    args = parser.parse_args()
    if not Path(args.src).exists():
        print(f"label_llmbar: skipped: {args.src} not found (LLMBar's release; see the README's data section)")
        return
    if args.smoke:
        args.draws, args.labels = 4, [50]
    started = time.perf_counter()
    panel = load(args.src, max_judges=4 if args.smoke else None)
    frame, notes = evaluate(panel, args.labels, args.draws, args.seed)
    table = summary(frame)
    wall = time.perf_counter() - started
    n_items = panel.outcome.shape[1]
    print(
        f"LLMBar: {n_items} items, {panel.n_judges} judges, proxy = Dawid-Skene fitted without labels; best single "
        f"judge {panel.best}; {args.draws} draws per label count; {wall:.1f} s"
    )
    for peer, note in notes.items():
        print(f"{peer}: {note}")
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 60):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.figure:
        title = f"LLMBar ({n_items} items, {panel.n_judges} judges): effective labels, {args.draws} draws per point"
        figure(table, args.figure, title)
        print(f"figure: {args.figure}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
