"""The regime map with tie labels (Y = 1/2) and tie verdicts, and on the synthetic 1-5 rubric panel (the scalar
verdict schema) end to end, with its refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import Ridge

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.cluster.ray import single_threaded_blas
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import write_dataset
from judgecal_dist.io.rubric_panel import DOC_ROWS, draw_rubric_panel, rubric_bayes_mse
from judgecal_dist.methods.fcps.select import Cells
from judgecal_dist.studies.regime_map import study as regime_map
from judgecal_dist.studies.regime_map.report import summarise

SCORE_S = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 0.5])  # (score - 1)/4, err at the midpoint
CODE = {"B": 0, "A": 1, "tie": 2, None: 3}
FLIP = {"A": "B", "B": "A", "tie": "tie", None: None}


def _tied_pairs(root: str, items: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Pairs shown both ways (judges j0..j2, /ab and /ba verdicts), some tie labels and tie verdicts; returns the
    position-balanced rows by hand: orig rows take /ab and Y = [A] (tie: 1/2), swap rows /ba flipped, Y = [B]."""
    rng = np.random.default_rng(7)
    labels = rng.choice(["A", "B", "tie"], size=items, p=[0.4, 0.4, 0.2])
    rows, verdicts = [], []
    for i, label in enumerate(labels):
        orig, swap = [], []
        for j in range(3):
            ab, ba = (
                str(v) if v != "none" else None
                for v in rng.choice(["A", "B", "tie", "none"], 2, p=[0.4, 0.4, 0.15, 0.05])
            )
            verdicts += [(f"i{i}", f"j{j}/ab", ab), (f"i{i}", f"j{j}/ba", ba)]
            orig.append(CODE[ab])
            swap.append(CODE[FLIP[ba]])
        y = {"A": 1.0, "B": 0.0, "tie": 0.5}[label]
        rows += [(*orig, y), (*swap, 1.0 - y)]
    table = pa.table(
        {
            "dataset": ["d"] * len(verdicts),
            "item_id": [v[0] for v in verdicts],
            "group_id": [v[0] for v in verdicts],
            "judge_id": [v[1] for v in verdicts],
            "verdict": [v[2] for v in verdicts],
        }
    )
    gold = pa.table({"dataset": ["d"] * items, "item_id": [f"i{i}" for i in range(items)], "label": labels.tolist()})
    write_dataset(root, {"verdicts": table, "labels": gold}, {"format": "test"})
    arr = np.array(rows)
    return arr[:, :3].astype(np.int64), arr[:, 3]


def test_tie_labels_are_one_half_on_both_rows_and_tie_verdicts_their_own_symbol(tmp_path):
    root = str(tmp_path / "ties")
    codes, y = _tied_pairs(root)
    config = regime_map.Config(
        data=root,
        pool=("j0", "j1", "j2"),
        replicates=2,
        budgets=(20, 40),
        selection_rows=20,
        validation_rows=20,
        test_rows=40,
        single_judges=False,
        cold_start_sizes=(),  # the 40-row calibration pool holds no 64-row cold start
    )
    data = regime_map.load(config, EngineConfig())
    assert data.info["tie_labels"] == int((y == 0.5).sum() / 2) > 0
    expected = Cells.from_rows(codes, y)  # every group is used: 20 + 20 + 40 + 40 = 120 rows
    for split in data.splits.values():
        blocks = [split.sel, split.val, split.test, split.cal[40]]
        assert sum(c.rows for c in blocks) == len(y)
        # n, sum Y, sum Y^2 and the Y histogram per pattern, summed over the blocks, are the hand-made rows' own.
        for field in ("n", "s", "q"):
            got = sum(_per_pattern(c, getattr(c, field), expected.codes) for c in blocks)
            np.testing.assert_allclose(got, getattr(expected, field), err_msg=field)
        hist = sum(_per_pattern(c, _three_levels(c), expected.codes) for c in blocks)
        np.testing.assert_allclose(hist, expected.hist)
    assert (codes == 2).any() and (expected.q != expected.s).any()  # tie verdicts are code 2; ties give Q != S
    frame = regime_map.run_replicate(data, regime_map.plan(config, data)[0])
    picked = frame[frame["selected_union"]]
    assert len(picked) == 2 and picked["test_accuracy"].between(0, 1).all()


def _three_levels(cells: Cells) -> np.ndarray:
    """The block's Y histogram over the levels 0, 1/2, 1 (a block without tie labels reports only 0 and 1)."""
    levels, hist = cells.histogram()
    out = np.zeros((len(hist), 3))
    out[:, np.searchsorted([0.0, 0.5, 1.0], levels)] = hist
    return out


def _per_pattern(cells: Cells, values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``values`` of a block's patterns placed at their rows of ``reference`` (zeros elsewhere)."""
    lookup = {tuple(r): i for i, r in enumerate(reference)}
    out = np.zeros((len(reference), *values.shape[1:]))
    out[[lookup[tuple(r)] for r in cells.codes]] = values
    return out


#: Monte Carlo tolerance on a mean test MSE over 4 splits x 20 000 test rows: the split-to-split SE measured
#: 0.3e-4 to 1.1e-4; the table's estimation excess at B = 16 384 is about (cells x Var(Y | cell)) / B: ~1e-5 at
#: k = 1 (6 cells), ~5e-5 at k = 2 (36 cells). Prefixes' Bayes risks differ by >= 0.002, so this discriminates.
TOL = 5e-4


def test_rubric_study_reaches_the_exact_bayes_risk_at_large_budgets():
    config = regime_map.Config(
        data="synthetic:scalar",
        budgets=(256, 16384),
        replicates=4,
        families=("one_coin_iso", "ridge_iso"),
        hybrid_taus=(),
        fallbacks=(),
        nll_selection=False,
        max_k=3,
    )
    data = regime_map.load(config, EngineConfig())
    with single_threaded_blas():
        parts = pd.concat([regime_map.run_replicate(data, r) for r in regime_map.plan(config, data)])
    result = summarise(config, parts, data)
    bayes = {r["k"]: r for r in result.extra["rubric_bayes"]}
    for k in (1, 2):  # the fixed-k joint table converges to the prefix's exact Bayes risk
        assert bayes[k]["table_mse_B16384"] == pytest.approx(rubric_bayes_mse(k), abs=TOL)
    assert bayes[3]["table_mse_B256"] > bayes[3]["table_mse_B16384"] > rubric_bayes_mse(3)
    # No calibrator of a prefix beats its Bayes floor; every menu's pick is a rubric-schema family.
    floor = rubric_bayes_mse(3) - TOL
    assert (parts["test_mse"] > floor).all() and "jury" not in set(parts["family"])
    records = {(r["budget"], r["menu"]): r for r in result.records}
    assert records[(16384, "scalar")]["test_mse"] == pytest.approx(rubric_bayes_mse(3), abs=2e-3)
    # Metrics on the 13-level target: accuracy thresholds Y at 1/2 (rubric 3), correlations are finite.
    picked = parts[parts["selected_union"]]
    assert picked["test_accuracy"].between(0.8, 1.0).all() and picked["test_spearman"].between(0.8, 1.0).all()
    assert "## Rubric regime: exact Bayes risk per prefix" in result.report
    # One candidate end to end against sklearn on the same rows: the study draws validation, test, then calibration
    # from the generator seeded (split, budget); ridge_iso at k = 3 on the pool path is Ridge on t = 2s - 1 + PAV.
    rng = np.random.default_rng([0, 256])
    draws = [draw_rubric_panel(n, rng) for n in (512, 20_000, 256)]
    (_, _), (test_codes, test_y), (cal_codes, cal_y) = draws
    t_cal, t_test = (2 * SCORE_S[c[:, :3]] - 1 for c in (cal_codes, test_codes))
    ridge = Ridge(alpha=1.0).fit(t_cal, cal_y)
    iso = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(ridge.predict(t_cal), cal_y)
    want = np.mean((np.clip(iso.predict(ridge.predict(t_test)), 0, 1) - test_y) ** 2)
    row = parts[(parts["seed"] == 0) & (parts["budget"] == 256) & (parts["k"] == 3) & (parts["family"] == "ridge_iso")]
    assert row["test_mse"].item() == pytest.approx(want, abs=1e-12)
    assert (
        "jury" not in {m["menu"] for m in result.extra["menus"]}
        and "Not run on 1-5 rubric scores: the unsupervised jury" in result.report
    )
    assert "Nominal alphabet = 6^k" in result.report and "risk_total" not in parts


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"budgets": (20, 64)}, r"budgets=\[20, 64\]: must be multiples of 16 with synthetic:scalar"),
        ({"budgets": (64,), "synthetic_test_rows": 1000}, r"synthetic_test_rows=1000: must be multiples of 16"),
        ({"budgets": (64,), "growth_a": 0.5}, r"growth_a=0.5: does not apply to synthetic:scalar"),
    ],
)
def test_a_setting_the_rubric_panel_never_reads_is_refused(overrides, match):
    with pytest.raises(ConfigError, match=match):
        regime_map.Config(data="synthetic:scalar", **overrides)
    assert regime_map.Config(data="synthetic:scalar", budgets=(64,)).schema == "scalar"


def write_rubric(root: str, docs: int = 30, seed: int = 5, label_shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A 1-5 rubric dataset from the rubric panel: scores as verdicts.score (err: null, one judge absent on some
    rows), human scores as labels.label_score; returns the expected codes and targets."""
    codes, y = draw_rubric_panel(docs * DOC_ROWS, np.random.default_rng(seed))
    codes[::7, 6] = 5  # absent rows below count as err too
    rows = [
        (f"s{i}", f"doc{i // DOC_ROWS}", f"j{j}", None if codes[i, j] == 5 else float(codes[i, j] + 1))
        for i in range(len(y))
        for j in range(7)
        if not (j == 6 and i % 7 == 0)
    ]
    verdicts = pa.table(
        {
            "dataset": ["d"] * len(rows),
            "item_id": [r[0] for r in rows],
            "group_id": [r[1] for r in rows],
            "judge_id": [r[2] for r in rows],
            "score": pa.array([r[3] for r in rows], pa.float64()),
        }
    )
    items = [f"s{i}" for i in range(len(y))]
    labels = pa.table(
        {
            "dataset": ["d"] * len(y),
            "item_id": items,
            "label": pa.array([None] * len(y), pa.string()),
            "label_score": 1.0 + 4.0 * y + label_shift,
        }
    )
    write_dataset(root, {"verdicts": verdicts, "labels": labels}, {"format": "test"})
    order = np.argsort(items)  # the reader orders items by id
    return codes[order], y[order]


def rubric_config(root: str, **overrides: object) -> regime_map.Config:
    """A small regime map over the rubric dataset ``write_rubric`` wrote at ``root`` (30 documents, 7 judges)."""
    settings: dict[str, object] = dict(
        data=root,
        verdict_schema="scalar",
        position_balance=False,
        pool=tuple(f"j{j}" for j in range(7)),
        replicates=2,
        budgets=(64, 128),
        selection_rows=96,
        validation_rows=96,
        test_rows=160,
        families=("ridge_iso", "one_coin_iso"),
        hybrid_taus=(),
        fallbacks=(),
        paths=("information_first", "random"),
        max_k=4,
        proxy_bootstrap=0,
        proxy_permutations=0,
    )
    return regime_map.Config(**(settings | overrides))


def test_a_rubric_dataset_url_runs_on_the_scalar_schema(tmp_path):
    root = str(tmp_path / "rubric")
    codes, y = write_rubric(root)
    config = rubric_config(root)
    data = regime_map.load(config, EngineConfig())
    assert data.info == {"groups": 30, "rows": 480, "schema": "scalar", "target_levels": len(np.unique(y))}
    split = data.splits[0]
    blocks = [split.sel, split.val, split.test, split.cal[128]]
    assert [b.rows for b in blocks] == [96, 96, 160, 128] and all(b.schema == "scalar" for b in blocks)
    whole = Cells.from_rows(codes, y, schema="scalar")
    for field in ("n", "s", "q"):  # the blocks partition the hand-made rows (every document is used)
        got = sum(_per_pattern(c, getattr(c, field), whole.codes) for c in blocks)
        np.testing.assert_allclose(got, getattr(whole, field), err_msg=field)
    parts = pd.concat([regime_map.run_replicate(data, r) for r in regime_map.plan(config, data)])
    result = summarise(config, parts, data)
    assert {r["menu"] for r in result.records} == {"table", "scalar", "union"}
    assert "Not run on 1-5 rubric scores: the unsupervised jury menu" in result.report
    pairwise = config.model_copy(update={"verdict_schema": "pairwise"})
    with pytest.raises(
        InputError, match=r"0 group.*\(no item has a label; for a 1-5 rubric .* set verdict_schema: scalar\)"
    ):
        regime_map.load(pairwise, EngineConfig())
    with pytest.raises(ConfigError, match="position_balance=true: does not apply to 1-5 rubric scores"):
        regime_map.Config(data=root, verdict_schema="scalar")
    with pytest.raises(ConfigError, match="verdict_schema=scalar: applies to a dataset URL"):
        regime_map.Config(data="synthetic:parity", verdict_schema="scalar")
    bad = str(tmp_path / "bad")
    write_rubric(bad, docs=4, label_shift=4.5)
    with pytest.raises(InputError, match=r"label_score: \d+ score\(s\) outside the 1-5 rubric"):
        regime_map.load(config.model_copy(update={"data": bad}), EngineConfig())


def test_semi_real_source_on_rubric_scores_is_refused(tmp_path):
    root = str(tmp_path / "rubric")
    write_rubric(root)
    pool = tuple(f"j{j}" for j in range(7))
    config = regime_map.Config(data="synthetic:additive", semi_real_source=root, pool=pool, position_balance=False)
    with pytest.raises(InputError, match=r"semi_real_source: .*: the pool has no A, B or tie verdict there"):
        regime_map.load(config, EngineConfig())
