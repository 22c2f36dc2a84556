"""The target builders against a plain loop over items, and their sums over batches against the whole table."""

from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.methods.labels.estimators import LabelMoments, PredictionPoweredMean, estimates_frame
from judgecal_dist.methods.labels.targets import build_targets, target_moments


def _table(seed: int, n: int = 600, judges: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    p[:5] = np.nan  # unscored items belong to no target
    truth = (rng.uniform(size=n) < np.nan_to_num(p, nan=0.5)).astype(int)
    label = np.where(rng.uniform(size=n) < 0.3, truth, -1)
    votes = np.where(rng.uniform(size=(n, judges)) < 0.8, truth[:, None], 1 - truth[:, None])
    votes[rng.uniform(size=(n, judges)) < 0.1] = -1  # no vote
    subset = rng.choice(np.array(["chat", "code", None], dtype=object), size=n)
    pi = rng.uniform(0.2, 0.9, size=n)
    return {"p": p, "label": label, "votes": votes, "subset": subset, "pi": pi}


def _loop(t: dict) -> dict[str, tuple[list, list]]:
    """Outcomes (None: unlabelled) and proxies per target, item by item."""
    out: dict[str, tuple[list, list]] = {}
    for i, p in enumerate(t["p"]):
        if np.isnan(p):
            continue
        lab = t["label"][i] if t["label"][i] in (0, 1) else None
        rows = [("panel_accuracy", None if lab is None else float((p > 0.5) == (lab == 1)), max(p, 1 - p))]
        rows.append(("win_rate", None if lab is None else float(lab), p))
        if t["subset"][i] is not None:
            rows.append((f"win_rate:subset={t['subset'][i]}", None if lab is None else float(lab), p))
        for j, v in enumerate(t["votes"][i]):
            if v in (0, 1):
                f = p if v == 1 else 1 - p
                rows.append((f"judge_accuracy:j{j}", None if lab is None else float(v == lab), f))
        for name, y, f in rows:
            out.setdefault(name, ([], []))
            out[name][0].append(y)
            out[name][1].append(f)
    return out


@pytest.mark.parametrize("weighted", [False, True])
def test_targets_equal_a_loop_over_items(weighted: bool) -> None:
    t = _table(0)
    judges = ["j0", "j1", "j2"]
    targets = build_targets(t["p"], t["label"], t["votes"], judges, {"subset": t["subset"]})
    frame = estimates_frame(target_moments(targets, t["pi"] if weighted else None)).set_index("target")
    expected = _loop(t)
    assert sorted(frame.index) == sorted(expected)
    for name, (ys, fs) in expected.items():
        lab = np.array([y is not None for y in ys])
        y = np.array([v for v in ys if v is not None], dtype=float)
        f = np.array(fs)
        pi = None
        if weighted:  # the items of the target in table order, as the loop visited them
            rows = [i for i in range(len(t["p"])) if not np.isnan(t["p"][i])]
            pi = _target_pi(t, name, rows)[lab]
        est = PredictionPoweredMean().fit(y, f[lab], f, pi)
        assert frame.loc[name, "estimate"] == pytest.approx(est.estimate_, abs=1e-12), name
        assert frame.loc[name, "upper"] == pytest.approx(est.interval_[1], abs=1e-12), name
        assert frame.loc[name, "n_labels"] == lab.sum() and frame.loc[name, "n_items"] == len(f)
        assert frame.loc[name, "effective_labels"] == pytest.approx(est.effective_labels_)


def _target_pi(t: dict, name: str, rows: list[int]) -> np.ndarray:
    if name.startswith("judge_accuracy:"):
        j = int(name.removeprefix("judge_accuracy:j"))
        rows = [i for i in rows if t["votes"][i, j] in (0, 1)]
    elif name.startswith("win_rate:subset="):
        rows = [i for i in rows if t["subset"][i] == name.split("=", 1)[1]]
    return t["pi"][rows]


def test_sums_of_batches_add_to_the_whole_table() -> None:
    t = _table(1)
    judges = ["j0", "j1", "j2"]
    whole = target_moments(build_targets(t["p"], t["label"], t["votes"], judges, {"subset": t["subset"]}), t["pi"])
    total: dict[str, LabelMoments] = {}
    for part in (slice(0, 250), slice(250, 600)):
        args = (t["p"][part], t["label"][part], t["votes"][part], judges, {"subset": t["subset"][part]})
        for name, m in target_moments(build_targets(*args), t["pi"][part]).items():
            total[name] = total[name] + m if name in total else m
    assert sorted(total) == sorted(whole)
    for name, m in whole.items():
        for field in LabelMoments.sum_names():
            assert getattr(total[name], field) == pytest.approx(getattr(m, field), abs=1e-9), (name, field)
        assert total[name].weighted


def test_a_target_with_one_label_is_reported_without_numbers() -> None:
    p = np.linspace(0.1, 0.9, 9)
    label = np.full(9, -1)
    label[0] = 0
    frame = estimates_frame(target_moments(build_targets(p, label))).set_index("target")
    assert frame.loc["win_rate", "method"] == "too few labels" and np.isnan(frame.loc["win_rate", "estimate"])
