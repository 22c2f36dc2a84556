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
  choice, in the peers' favour; GLIDE also runs with the judge a team could pick without labels (the one agreeing
  most with the label-free Dawid-Skene panel's verdicts);
* **classical**: the labels-only normal interval of the same uniform draws.

The proxy never sees a label: the panel is Dawid-Skene fitted by EM on the 130 judges' votes of all items without
any label (unsupervised), so no cross-fitting is needed. Effective labels of a method: ``n * (mean classical se /
mean method se)**2`` over the draws (the labels the classical interval would need for the method's width; the
classical row is n by construction). Coverage: the share of draws whose interval holds the truth (the population is
the 419 items, so every interval is somewhat conservative at 200 labels: none corrects for a finite population).
``x_glide`` is a method's effective labels over GLIDE's with the best judge, ``x_glide_free`` over GLIDE's with the
judge chosen without labels (for each judge's accuracy: ratios of the medians over the judges).

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
from sklearn.linear_model import LogisticRegression

from judgecal_dist.api import vote_matrix
from judgecal_dist.io.adapters.llmbar import read_llmbar
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.aggregation.votes import signed_votes
from judgecal_dist.methods.labels.estimators import PredictionPoweredMean
from judgecal_dist.methods.labels.sampling import draw_mask, inclusion_probabilities
from judgecal_dist.methods.labels.targets import Target, build_targets

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = ROOT.parent / "shared" / "data" / "llmbar"
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
RUNNER = ROOT / "benchmarks" / "peers" / "glide_runner.py"
ALPHA = 0.05
METHODS = (
    "ours, uniform, cross-fitted panel",
    "ours, active, cross-fitted panel",
    "ours, uniform, Dawid-Skene without labels",
    "GLIDE PPI++ (best judge)",
    "ppi-python PPI++ (best judge)",
    "GLIDE PPI++ (judge chosen without labels)",
    "classical",
)
#: Folds of the cross-fitted panel.
FOLDS = 5


@dataclass
class Panel:
    """LLMBar as arrays: the targets' outcomes (all labels, hidden until drawn) and the best judge's proxies on every
    item (NaN: not in the target), the votes and the label-free Dawid-Skene panel."""

    names: list[str]
    outcome: np.ndarray  # (T, N)
    peer: np.ndarray  # (T, N) the best single judge's proxy
    peer_free: np.ndarray  # (T, N) the same with the judge chosen without labels
    votes: np.ndarray  # (N, J) int8 codes
    y: np.ndarray  # (N,) the labels (1 = A), read only where a draw reveals them
    judges: list[str]
    p: np.ndarray  # (N,) Dawid-Skene's P(label = A), fitted without labels
    best: str
    best_free: str

    def proxies(self, p: np.ndarray) -> np.ndarray:
        """The panel's proxy of every target (T, N) from a panel's P(label = A) (the targets' own builder)."""
        wanted = {name: t for t, name in enumerate(self.names)}
        out = np.full(self.outcome.shape, np.nan)
        for target in build_targets(p, np.full(p.size, np.nan), self.votes, self.judges):
            if target.name in wanted:
                out[wanted[target.name], target.rows] = target.proxy
        return out


def load(src: str, max_judges: int | None = None) -> Panel:
    """Read LLMBar, fit the panel without labels and build the targets with the best judge's proxies."""
    tables = read_llmbar(src).tables
    items, judges, votes = vote_matrix(tables["verdicts"].to_pandas())
    labels = tables["labels"].to_pandas().set_index("item_id")["label"]
    y = (labels.loc[list(items)] == "A").to_numpy(np.float64)
    p = DawidSkene().fit(votes).posteriors_[:, 1]  # unsupervised: no label enters this proxy
    voted = votes >= 0
    accuracy = np.where(voted, votes == y[:, None], 0).sum(0) / np.maximum(voted.sum(0), 1)
    order = np.argsort(-accuracy, kind="stable")
    best, second = int(order[0]), int(order[1])
    agreement = np.where(voted, votes == (p > 0.5)[:, None], 0).sum(0) / np.maximum(voted.sum(0), 1)
    free_order = np.argsort(-agreement, kind="stable")
    free, free_second = int(free_order[0]), int(free_order[1])
    keep = sorted(order[:max_judges].tolist()) if max_judges else list(range(len(judges)))
    kept = {f"judge_accuracy:{judges[j]}": j for j in keep}
    names, outcome, peer, peer_free = [], [], [], []
    for target in build_targets(p, y, votes, judges):
        if target.name not in kept and target.name != "win_rate":
            continue
        o = np.full(len(items), np.nan)
        o[target.rows] = target.outcome
        names.append(target.name)
        outcome.append(o)
        peer.append(_single_judge_proxy(target, votes, kept.get(target.name), best, second))
        peer_free.append(_single_judge_proxy(target, votes, kept.get(target.name), free, free_second))
    return Panel(
        names, np.array(outcome), np.array(peer), np.array(peer_free), votes, y, list(judges), p, judges[best],
        judges[free],
    )  # fmt: skip


def _single_judge_proxy(target: Target, votes: np.ndarray, judge: int | None, best: int, second: int) -> np.ndarray:
    """One judge's proxy of a target on every item (NaN: not in the target; 0.5 where that judge did not vote):
    its verdict (A = 1) for the win rate, agreement with ``judge``'s verdict for that judge's accuracy (the
    ``second`` judge for the ``best`` one itself)."""
    g = np.full(votes.shape[0], np.nan)
    rows = target.rows
    if judge is None:
        ref = votes[rows, best]
        g[rows] = np.where(ref >= 0, ref, 0.5)
    else:
        ref = votes[rows, second if judge == best else best]
        g[rows] = np.where(ref >= 0, (ref == votes[rows, judge]).astype(float), 0.5)
    return g


def crossfit(z: np.ndarray, y: np.ndarray, labelled: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Cross-fitted stacking panel: P(label = A) of each labelled item from the model fitted on the other folds'
    labels, and of every item the mean of the fold models (cross-prediction-powered inference, Zrnic and Candes
    2024). The model is the stacking aggregator's (L2 logistic regression on the +-1 votes, C = 1; liblinear for
    speed); a fold whose training labels hold one class predicts their share."""
    idx = np.flatnonzero(labelled)
    folds = np.random.default_rng(seed).permutation(idx.size) % FOLDS
    p_lab, p_all = np.empty(idx.size), np.zeros(z.shape[0])
    for k in range(FOLDS):
        train, test = idx[folds != k], idx[folds == k]
        if np.unique(y[train]).size < 2:
            pred = np.full(z.shape[0], float(y[train].mean()))
        else:
            pred = LogisticRegression(C=1.0, solver="liblinear").fit(z[train], y[train]).predict_proba(z)[:, 1]
        p_lab[folds == k] = pred[test]
        p_all += pred / FOLDS
    return p_lab, p_all


def _ours(
    outcome: np.ndarray, proxy_lab: np.ndarray, proxy: np.ndarray, mask: np.ndarray, pi: np.ndarray | None
) -> list[float]:
    """Lower, upper and se of ours, then of the classical interval of the same labels (NaN: fewer than 2)."""
    items = np.isfinite(proxy)
    lab = mask & items
    if lab.sum() < 2:
        return [np.nan] * 6
    est = PredictionPoweredMean(alpha=ALPHA).fit(
        outcome[lab], proxy_lab[lab], proxy[items], None if pi is None else pi[lab]
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
        outcome, proxy = np.vstack([panel.outcome, panel.outcome]), np.vstack([panel.peer, panel.peer_free])
        np.savez(source, outcome=outcome, proxy=proxy, labelled=masks, confidence=np.array(1 - ALPHA))
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
    z = signed_votes(panel.votes)
    unsupervised = panel.proxies(panel.p)
    for budget in budgets:
        uniform = np.full(n_items, budget / n_items)
        active = inclusion_probabilities(panel.p, budget)
        masks = np.array([draw_mask(uniform, seed + 2 * r) for r in range(draws)])
        amasks = np.array([draw_mask(active, seed + 2 * r + 1) for r in range(draws)])
        glide, notes["GLIDE"] = _glide(panel, masks)
        res: dict[str, np.ndarray] = {m: np.full((draws, len(panel.names), 3), np.nan) for m in METHODS}
        for r in range(draws):
            for method, mask, pi in ((METHODS[0], masks[r], None), (METHODS[1], amasks[r], active)):
                p_lab, p_all = crossfit(z, panel.y, mask, seed + r)
                p_cf = p_all.copy()
                p_cf[mask] = p_lab
                proxy_lab, proxy = panel.proxies(p_cf), panel.proxies(p_all)
                for t in range(len(panel.names)):
                    out = _ours(panel.outcome[t], proxy_lab[t], proxy[t], mask, pi)
                    res[method][r, t] = out[:3]
                    if pi is None:
                        res["classical"][r, t] = out[3:]
            for t in range(len(panel.names)):
                res[METHODS[2]][r, t] = _ours(panel.outcome[t], unsupervised[t], unsupervised[t], masks[r], None)[:3]
                if have_ppi:
                    res[METHODS[4]][r, t] = _ppi_python(panel.outcome[t], panel.peer[t], masks[r])
                if glide is not None:
                    res[METHODS[3]][r, t] = (glide["lower"][r, t], glide["upper"][r, t], glide["std"][r, t])
                    u = t + len(panel.names)  # the same target with the judge chosen without labels
                    res[METHODS[5]][r, t] = (glide["lower"][r, u], glide["upper"][r, u], glide["std"][r, u])
        for t, name in enumerate(panel.names):
            classical_se = res["classical"][:, t, 2]
            ref = float(np.nanmean(classical_se))
            for method, values in res.items():
                arr = values[:, t]
                ok = np.isfinite(arr).all(axis=1)
                if not ok.any():
                    continue
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
    key = pd.MultiIndex.from_frame(table[["target", "labels"]])
    for column, method in (("x_glide", METHODS[3]), ("x_glide_free", METHODS[5])):
        glide = table[table["method"] == method].set_index(["target", "labels"])["effective_labels"]
        table[column] = table["effective_labels"].to_numpy() / glide.reindex(key).to_numpy()
    columns = ["coverage", "min_coverage", "width", "effective_labels", "x_glide", "x_glide_free"]
    return table[["target", "labels", "method", *columns]]


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
        f"LLMBar: {n_items} items, {len(panel.judges)} judges; the panel's proxy cross-fitted on each draw's labels "
        f"({FOLDS} folds) or Dawid-Skene without labels; best single judge {panel.best} (the most accurate on all "
        f"labels; chosen without labels: {panel.best_free}); {args.draws} draws per label count; {wall:.1f} s"
    )
    for peer, note in notes.items():
        print(f"{peer}: {note}")
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 60):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.figure:
        title = f"LLMBar ({n_items} items, {len(panel.judges)} judges): effective labels, {args.draws} draws per point"
        figure(table, args.figure, title)
        print(f"figure: {args.figure}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
