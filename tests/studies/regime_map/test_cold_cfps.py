"""Cold start and CFPS in the regime map, on generated blocks, against by-hand references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import GroupKFold

from judgecal_dist.methods.fcps.frontier import calibration_frontier
from judgecal_dist.methods.fcps.select import Cells
from judgecal_dist.studies.regime_map import study as regime_map
from judgecal_dist.studies.regime_map.cold_start import ColdRows, cold_start_rows
from judgecal_dist.studies.regime_map.data import RealInput, SplitCells

POOL = ("a", "b", "c", "d")


def _rows(rng: np.random.Generator, n: int, xor: bool) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of rows (groups of 2); with ``xor`` the label is judge a XOR judge b (a pattern only a table sees)."""
    x = rng.integers(0, 2, (n, len(POOL)))
    if xor:
        y = (x[:, 0] ^ x[:, 1]).astype(float)
    else:
        y = rng.integers(0, 2, n).astype(float)
        x = np.where(rng.random((n, len(POOL))) < 0.7, y[:, None], 1 - y[:, None]).astype(np.int64)
    return x.astype(np.int64), y


def _table(xt, yt, xs, alpha=1.0):
    ybar = yt.mean()
    frame = pd.DataFrame({"key": [tuple(r) for r in xt], "y": yt}).groupby("key")["y"].agg(["sum", "count"])
    out = []
    for r in xs:
        s, n = frame.loc[[tuple(r)]].iloc[0] if tuple(r) in frame.index else (0.0, 0.0)
        out.append((s + alpha * ybar) / (n + alpha) if n else ybar)
    return np.array(out)


def _iso(u, y, v):
    return IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(u, y).predict(v)


def _mean_iso(xt, yt, xs):
    return _iso((xt == 1).mean(axis=1), yt, (xs == 1).mean(axis=1))  # s = 1 for A (code 1), 0 for B (code 0)


def _one_coin(xt, yt, xs):
    decisive = xt <= 1
    agree = ((xt == 1) == (yt[:, None] == 1)) & decisive
    q = (agree.sum(axis=0) + 1.0) / (decisive.sum(axis=0) + 2.0)
    w = np.log(q / (1 - q))

    def t(x):
        return np.where(x == 1, 1.0, np.where(x == 0, -1.0, 0.0))

    return _iso(t(xt) @ w, yt, t(xs) @ w)


def _path(x, y):
    # information-first: single-judge grouped in-sample MSE, ascending, ties by pool index
    risk = [((y - pd.Series(y).groupby(x[:, j]).transform("mean").to_numpy()) ** 2).mean() for j in range(x.shape[1])]
    return sorted(range(x.shape[1]), key=lambda j: (round(risk[j], 12), j))


def _by_hand(x, y, groups, xs, ys):
    """Out-of-fold losses, naive choice, one-SE guard and test MSE of prior / naive / guarded, written out."""
    fit = {"mean_iso": _mean_iso, "table": _table, "one_coin_iso": _one_coin}
    ladder = {"mean_iso": 0, "table": 6}
    cands = [("pool", x.shape[1], "one_coin_iso")] + [("if", k, f) for k in range(1, 5) for f in ("mean_iso", "table")]
    loss = np.zeros((len(cands), len(y)))
    for train, held in GroupKFold(n_splits=4).split(x, y, groups):
        path = _path(x[train], y[train])
        for c, (rule, k, f) in enumerate(cands):
            cols = list(range(x.shape[1])) if rule == "pool" else path[:k]
            loss[c, held] = (fit[f](x[train][:, cols], y[train], x[held][:, cols]) - y[held]) ** 2
    cv, se = loss.mean(axis=1), loss.std(axis=1, ddof=1) / np.sqrt(len(y))
    naive = min(range(1, len(cands)), key=lambda c: (cv[c], cands[c][1], ladder[cands[c][2]]))
    guarded = naive if cv[naive] + se[naive] < cv[0] - se[0] else 0
    path = _path(x, y)
    test = {}
    for role, c in (("prior", 0), ("naive", naive), ("guarded", guarded)):
        rule, k, f = cands[c]
        cols = list(range(x.shape[1])) if rule == "pool" else path[:k]
        test[role] = (cands[c], cv[c], float(((fit[f](x[:, cols], y, xs[:, cols]) - ys) ** 2).mean()))
    return test, guarded != 0


@pytest.mark.parametrize("xor", [True, False])
def test_cold_start_rows_equal_the_guard_written_out(xor):
    rng = np.random.default_rng(7)
    x, y = _rows(rng, 40, xor)
    xs, ys = _rows(rng, 300, xor)
    groups = np.arange(40) // 2
    level = (groups >= 8).astype(np.int64)  # the first 16 rows are size 16, all 40 rows size 40
    config = regime_map.Config(
        data="/some/url",
        pool=POOL,
        paths=("information_first",),
        cold_start_sizes=(16, 40),
        cold_start_families=("mean_iso", "table"),
    )
    frame = cold_start_rows(ColdRows(x, y, groups, level), Cells.from_rows(xs, ys), config, seed=0)
    assert sorted(frame["budget"].unique()) == [16, 40]
    for size in (16, 40):
        use = slice(0, size)
        want, deviated = _by_hand(x[use], y[use], groups[use], xs, ys)
        got = frame[frame["budget"] == size].set_index("path")
        for role, ((_, k, family), cv, mse) in want.items():
            row = got.loc[f"cold:{role}"]
            assert (row["k"], row["family"]) == (k, family)
            assert row["val_mse"] == pytest.approx(cv, abs=1e-12)
            assert row["test_mse"] == pytest.approx(mse, abs=1e-12)
        assert got.loc["cold:guarded", "deviated"] == float(deviated)
    # XOR: the 2-judge table is far ahead of the one-coin prior, so the guard leaves it at 40 rows; noise: it keeps it.
    assert frame[(frame["budget"] == 40) & (frame["path"] == "cold:guarded")]["deviated"].iloc[0] == float(xor)


def _input(seed: int) -> RealInput:
    rng = np.random.default_rng(seed)

    def block(n: int) -> Cells:
        y = rng.integers(0, 2, n)
        right = rng.random((n, 4)) < np.array([0.85, 0.7, 0.6, 0.55])
        x = np.where(right, y[:, None], 1 - y[:, None])
        x[rng.random((n, 4)) < 0.1] = 3
        return Cells.from_rows(x, y)

    cal = {40: block(40), 120: block(120)}
    return SplitCells(block(100), block(100), block(200), cal)


def test_cfps_rows_menus_and_report_equal_brute_force():
    config = regime_map.Config(  # small menus beside CFPS: the test is about the frontier tables
        data="/some/url",
        pool=POOL,
        budgets=(40, 120),
        replicates=2,
        cold_start_sizes=(),
        paths=("information_first",),
        families=("ridge_iso",),
        main_families=("ridge_iso",),
        fallbacks=(),
        hybrid_taus=(),
        jury=False,
        nll_selection=False,
    )
    data = RealInput(POOL, (40, 120), {0: _input(0), 1: _input(1)}, {"rows": 2000})
    parts = pd.concat([regime_map.run_replicate(data, r) for r in regime_map.plan(config, data)], ignore_index=True)
    for (seed, budget), g in parts.groupby(["seed", "budget"]):
        split = data.splits[seed]
        frontier = calibration_frontier(split.sel.codes, split.sel.s / split.sel.n, budget, sample_weight=split.sel.n)
        cfps = g[g["family"] == "cfps"]
        assert list(cfps["subset"]) == ["+".join(POOL[j] for j in t) for t in frontier[frontier["kept"]]["judges"]]
        for row, judges in zip(cfps.itertuples(), frontier[frontier["kept"]]["judges"], strict=True):
            cols = list(judges)
            cal, test = split.cal[budget], split.test
            # the table by hand from cells: (S_c + ybar) / (n_c + 1), unseen -> ybar
            ybar = cal.s.sum() / cal.n.sum()
            stats: dict[tuple, list[float]] = {}
            for codes, n, s in zip(cal.codes[:, cols], cal.n, cal.s, strict=True):
                cell = stats.setdefault(tuple(codes), [0.0, 0.0])
                cell[0], cell[1] = cell[0] + n, cell[1] + s
            p = np.array(
                [
                    (stats[k][1] + ybar) / (stats[k][0] + 1.0) if k in stats else ybar
                    for k in map(tuple, test.codes[:, cols])
                ]
            )
            assert row.test_mse == pytest.approx(float((test.q - 2 * p * test.s + p * p * test.n).sum() / test.rows))
        for menu, families in (("cfps", {"cfps"}), ("table_cfps", {"table", "cfps"})):
            pool = g[g["family"].isin(families) & ~g["path"].str.startswith("single:")]
            picked = g[g[f"selected_{menu}"]]
            assert len(picked) == 1 and picked["val_mse"].iloc[0] == pool["val_mse"].min()
    result = regime_map.summarise(config, parts, data)
    assert "## Calibration-frontier subsets (CFPS)" in result.report and "| cfps | 40 |" in result.report
    record = {r["budget"]: r for r in result.extra["cfps"]}[120]
    union = parts[(parts["budget"] == 120) & parts["selected_table_cfps"]]
    assert record["union_mse"] == pytest.approx(union["test_mse"].mean())
    assert record["share_cfps"] == pytest.approx((union["family"] == "cfps").mean())


def test_alpha_grid_rows_equal_tables_chosen_by_hand():
    from judgecal_dist.methods.fcps.joint_table import JointTableCalibrator
    from judgecal_dist.methods.fcps.paths import JudgePath

    config = regime_map.Config(
        data="/some/url",
        pool=POOL,
        budgets=(40,),
        replicates=2,
        cold_start_sizes=(),
        cfps=False,
        paths=("information_first",),
        families=("ridge_iso",),
        main_families=("ridge_iso",),
        fallbacks=(),
        hybrid_taus=(),
        jury=False,
        nll_selection=False,
        alpha_grid=(0.0, 2.0),
    )
    data = RealInput(POOL, (40,), {0: _input(2), 1: _input(3)}, {"rows": 2000})
    parts = pd.concat([regime_map.run_replicate(data, r) for r in regime_map.plan(config, data)], ignore_index=True)

    def mse(block: Cells, p: np.ndarray) -> float:
        p = np.clip(p, 0, 1)
        return float((block.q - 2 * p * block.s + p * p * block.n).sum() / block.rows)

    for seed, split in data.splits.items():
        path = JudgePath().fit(split.sel.codes, split.sel.s / split.sel.n, sample_weight=split.sel.n).path_
        cal = split.cal[40]
        for alpha in (0.0, 2.0):
            for fallback in ("global", "lower_prefix"):
                fits = []
                for k in range(1, 5):
                    model = JointTableCalibrator(alpha=alpha, fallback=fallback)
                    model.fit(cal.codes[:, path[:k]], cal.s / cal.n, sample_weight=cal.n)
                    fits.append((mse(split.val, model.predict(split.val.codes[:, path[:k]])), k, model))
                _, k, model = min(fits, key=lambda f: (f[0], f[1]))
                row = parts[(parts["seed"] == seed) & (parts["alpha"] == alpha) & (parts["fallback"] == fallback)]
                assert len(row) == 1 and row["k"].iloc[0] == k
                want = mse(split.test, model.predict(split.test.codes[:, path[:k]]))
                assert row["test_mse"].iloc[0] == pytest.approx(want, abs=1e-12)
    result = regime_map.summarise(config, parts, data)
    assert "pseudo-count and fallback sensitivity" in result.report and len(result.extra["alpha_grid"]) == 4
    assert not parts[parts["path"].str.startswith("alpha:")].filter(like="selected_").any().any()
