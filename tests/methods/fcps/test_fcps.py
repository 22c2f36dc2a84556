"""FCPS paths, candidate evaluation, validation selection and guarded cold start (spec 002 §4) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from sklearn.model_selection import GroupKFold

from judgecal_dist.errors import ConfigError
from judgecal_dist.io.growth import draw_growth_outputs, draw_labels, growth_eta
from judgecal_dist.methods.fcps.cold_start import GuardedColdStart
from judgecal_dist.methods.fcps.joint_table import JointTableCalibrator
from judgecal_dist.methods.fcps.paths import JudgePath, oracle_risk
from judgecal_dist.methods.fcps.scalar_families import OneCoinIsotonic, RidgeIsotonic
from judgecal_dist.methods.fcps.select import (
    Cells,
    FCPSSelector,
    agreement,
    agreement_rows,
    evaluate_candidates,
    select_candidate,
    selection_penalty,
)


def _block(n: int, seed: int, regime: str = "additive") -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = draw_growth_outputs(n, rng)
    X[rng.random(X.shape) < 0.05] = 2  # a few ties
    return X, draw_labels(growth_eta(X, regime), rng)


def _brute_risk(X, y, cols):
    """In-sample MSE of the unsmoothed table on columns ``cols``, and exp(entropy) of its cells."""
    frame = pd.DataFrame(X[:, cols]).assign(y=y)
    groups = frame.groupby(list(range(len(cols))))["y"]
    risk = float(((frame["y"] - groups.transform("mean")) ** 2).mean())
    p = groups.size().to_numpy() / len(y)
    return risk, float(np.exp(-(p * np.log(p)).sum()))


def test_oracle_risk_and_paths_equal_brute_force():
    X, y = _block(300, 0)
    for cols in ([0], [3, 1], [6, 2, 4]):
        assert oracle_risk(X, y, np.ones(len(y)), cols) == pytest.approx(_brute_risk(X, y, cols))
    single = [_brute_risk(X, y, [j])[0] for j in range(7)]
    info = JudgePath("information_first").fit(X, y).path_.tolist()
    assert info == sorted(range(7), key=lambda j: (single[j], j))
    budget, lam = 50, 0.25
    path: list[int] = []
    for _ in range(7):  # Eq. 4 by brute force
        scores = {
            j: _brute_risk(X, y, path + [j])[0] + lam * _brute_risk(X, y, path + [j])[1] / budget
            for j in range(7)
            if j not in path
        }
        path.append(min(scores, key=lambda j: (scores[j], j)))
    assert JudgePath("complexity_penalised", lam=lam, budget=budget).fit(X, y).path_.tolist() == path
    random_path = JudgePath("random", random_state=4).fit(X, y).path_.tolist()
    assert (
        sorted(random_path) == list(range(7))
        and random_path == JudgePath("random", random_state=4).fit(X[:9], y[:9]).path_.tolist()
    )
    with pytest.raises(ConfigError, match="longer|1..7"):
        JudgePath().fit(X, y).prefix(8)


def test_candidates_equal_direct_fits_and_diagnostics():
    (Xc, yc), (Xv, yv), (Xt, yt) = _block(80, 1), _block(200, 2), _block(400, 3)
    cal, val, test = Cells.from_rows(Xc, yc), Cells.from_rows(Xv, yv), Cells.from_rows(Xt, yt)
    paths = {"information_first": np.array([2, 0, 1, 3, 4, 5, 6])}
    frame = evaluate_candidates(paths, cal, val, test, families=("table", "ridge_iso"), max_k=4)
    assert len(frame) == 8
    for row in frame.itertuples():
        cols = paths["information_first"][: row.k]
        model = JointTableCalibrator() if row.family == "table" else RidgeIsotonic()
        model.fit(Xc[:, cols], yc)
        assert row.val_mse == pytest.approx(np.mean((model.predict(Xv[:, cols]) - yv) ** 2))
        assert row.test_mse == pytest.approx(np.mean((model.predict(Xt[:, cols]) - yt) ** 2))
        seen = {tuple(r) for r in Xc[:, cols]}
        unseen = np.array([tuple(r) not in seen for r in Xt[:, cols]])
        assert row.unseen_rate == pytest.approx(unseen.mean())
        counts = pd.Series([tuple(r) for r in Xc[:, cols]]).value_counts()
        p = counts.to_numpy() / len(yc)
        assert row.effective_support == pytest.approx(np.exp(-(p * np.log(p)).sum()))
        test_keys = [tuple(r) for r in Xt[:, cols]]
        seen_term = sum(1 / counts[key] for key in test_keys if key in counts.index) / len(yt)
        assert row.cell_pressure == pytest.approx(seen_term + unseen.mean())
    with pytest.raises(ConfigError, match="longer than the panel"):
        evaluate_candidates(paths, cal, val, max_k=8)


def test_paths_sharing_a_prefix_get_the_rows_of_separate_calls():
    (Xc, yc), (Xv, yv), (Xt, yt) = _block(120, 11), _block(200, 12), _block(300, 13)
    cal, val, test = Cells.from_rows(Xc, yc), Cells.from_rows(Xv, yv), Cells.from_rows(Xt, yt)
    paths = {"information_first": np.array([2, 0, 1, 3]), "random": np.array([2, 0, 3, 1])}  # k = 1, 2 shared
    families = ("table", "ridge_iso", "logistic", "hybrid")
    both = evaluate_candidates(paths, cal, val, test, families=families, max_k=4, hybrid_taus=(1.0, 10.0))
    for rule, path in paths.items():
        alone = evaluate_candidates({rule: path}, cal, val, test, families=families, max_k=4, hybrid_taus=(1.0, 10.0))
        mine = both[both["path"] == rule].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone)
    # min_k scores only the longer prefixes, with the same rows.
    tail = evaluate_candidates(paths, cal, val, test, families=("table",), max_k=4, min_k=3)
    full = evaluate_candidates(paths, cal, val, test, families=("table",), max_k=4)
    assert sorted(tail["k"].unique()) == [3, 4]
    pd.testing.assert_frame_equal(tail, full[full["k"] >= 3].reset_index(drop=True))
    with pytest.raises(ConfigError, match="min_k"):
        evaluate_candidates(paths, cal, val, max_k=2, min_k=3)


def test_agreement_rows_equal_row_level_scipy_with_ties():
    rng = np.random.default_rng(5)
    codes, y = rng.integers(0, 4, (500, 3)), rng.choice([0.0, 0.5, 1.0], 500)
    cells = Cells.from_rows(codes, y)
    # Predictions with many ties (a coarse grid) and one row that is constant.
    p = np.vstack([rng.choice([0.2, 0.5, 0.7], len(cells.n)), rng.random(len(cells.n)), np.full(len(cells.n), 0.3)])
    accuracy, pearson, spearman = agreement_rows(cells, p)
    _, inverse = np.unique(codes, axis=0, return_inverse=True)
    for i, row in enumerate(p):
        rows = row[inverse.ravel()]
        assert accuracy[i] == pytest.approx(np.where(rows == 0.5, 0.5, (rows > 0.5) == (y > 0.5)).mean(), abs=1e-12)
        if i == 2:
            assert np.isnan(pearson[i]) and np.isnan(spearman[i])
            continue
        assert pearson[i] == pytest.approx(sps.pearsonr(rows, y)[0], abs=1e-10)
        assert spearman[i] == pytest.approx(sps.spearmanr(rows, y)[0], abs=1e-10)
        assert (accuracy[i], pearson[i], spearman[i]) == pytest.approx(agreement(cells, row), abs=1e-12)
    # Predictions one ulp apart are the same prediction to Spearman (float noise of a stacker's matrix product).
    nudged = np.where(p[0] == 0.7, np.nextafter(0.7, 1.0), p[0])
    nudged[: len(nudged) // 2] = p[0][: len(nudged) // 2]
    assert agreement(cells, nudged)[2] == pytest.approx(spearman[0], abs=1e-12)


def test_selection_ties_and_menus():
    frame = pd.DataFrame(
        {
            "path": ["random", "information_first", "information_first", "random"],
            "k": [2, 2, 3, 1],
            "family": ["table", "table", "logistic", "mean_iso"],
            "val_mse": [0.1, 0.1, 0.1, 0.2],
        }
    )
    assert select_candidate(frame, ("table",))["path"] == "information_first"  # path order breaks the tie
    assert select_candidate(frame, ("table", "logistic"))["family"] == "table"  # smaller k first
    assert select_candidate(frame, ("logistic", "mean_iso"))["family"] == "logistic"
    assert selection_penalty(147, 100) == pytest.approx(2 * np.sqrt(np.log(2 * 147 / 0.05) / 200))


def test_selector_picks_the_validation_argmin_and_predicts_with_it():
    (Xs, ys), (Xc, yc), (Xv, yv) = _block(200, 4, "parity"), _block(1024, 5, "parity"), _block(512, 6, "parity")
    model = FCPSSelector(paths=("information_first", "random"), families=("table", "ridge_iso"), random_state=1)
    model.fit(Cells.from_rows(Xs, ys), Cells.from_rows(Xc, yc), Cells.from_rows(Xv, yv))
    best = model.candidates_.sort_values("val_mse").iloc[0]
    assert model.selected_["val_mse"] == best["val_mse"] and model.selected_["family"] == "table"
    assert np.mean((model.predict(Xv) - yv) ** 2) == pytest.approx(best["val_mse"])


def test_guarded_cold_start_follows_the_one_se_rule():
    X, y = _block(64, 7, "parity")
    groups = np.repeat(np.arange(32), 2)
    model = GuardedColdStart(paths=("information_first",), families=("table", "ridge_iso"), n_folds=4).fit(X, y, groups)
    prior, naive = model.cv_.iloc[0], model.naive_
    assert prior["family"] == "one_coin_iso" and prior["k"] == 7
    assert model.deviated_ == bool(naive["cv"] + naive["se"] < prior["cv"] - prior["se"])
    # The prior's out-of-fold loss by hand: GroupKFold, one-coin + isotonic on the training folds.
    losses = np.zeros(len(y))
    for train, held in GroupKFold(n_splits=4).split(X, y, groups):
        losses[held] = (OneCoinIsotonic().fit(X[train], y[train]).predict(X[held]) - y[held]) ** 2
    assert prior["cv"] == pytest.approx(losses.mean()) and prior["se"] == pytest.approx(losses.std(ddof=1) / 8)
    # The deployed candidate is refitted on all rows: the prior's refit is one-coin + isotonic on all 64 rows.
    X2, y2 = _block(64, 8, "additive")
    kept = GuardedColdStart(paths=("information_first",), families=("table",), n_folds=4).fit(X2, y2, groups)
    if not kept.deviated_:
        assert np.allclose(kept.predict(X2), OneCoinIsotonic().fit(X2, y2).predict(X2))
    else:
        assert kept.deployed_["cv"] + kept.deployed_["se"] < kept.cv_.iloc[0]["cv"] - kept.cv_.iloc[0]["se"]


def test_family_ladder_is_total():
    from judgecal_dist.methods.fcps.select import FAMILY_LADDER

    assert FAMILY_LADDER[-1] == "table" and len(set(FAMILY_LADDER)) == 7
    assert list(itertools.islice(FAMILY_LADDER, 2)) == ["mean_iso", "one_coin_iso"]
