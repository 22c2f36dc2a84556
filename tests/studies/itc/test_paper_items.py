"""The itc study's paper items (spec 003): tie-vote and positional-bias tables, greedy decoding's rounded median,
Figure 1's decision regions and the random-subset budget option.

References are independent of the study's code path: the paper's own Table 1 counts, the raw rb2-k8 JSON files, a
pandas count over the ingested LLMBar verdicts, the spec's G2 reference rates, the closed-form ratio rule of §3.7,
and the hypergeometric law of a random subset.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import hypergeom

from judgecal_dist.config import EngineConfig
from judgecal_dist.errors import ConfigError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.ingest import ingest
from judgecal_dist.methods.repeated.davidson import DavidsonAggregator
from judgecal_dist.methods.repeated.self_consistency import MISSING
from judgecal_dist.methods.repeated.vote_rates import position_counts
from judgecal_dist.methods.repeated.vote_simulation import vote_counts
from judgecal_dist.studies.itc import study as itc
from judgecal_dist.studies.itc.figures import decision_grid
from judgecal_dist.studies.itc.votes import vote_tables


def _engine() -> EngineConfig:
    return EngineConfig(ray_num_cpus=1, stats_engine="local")


def _table1_votes(first: int, second: int, tie: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """336 pairs judged in both orders (column 0 shows A first, column 1 B first) with the given Table 1 counts."""
    kinds = np.random.default_rng(seed).permutation(np.repeat([1, -1, 0], [first, second, tie])).reshape(336, 2)
    shown_first = np.array([1, -1])
    return kinds * shown_first[None, :], shown_first  # "prefers the first-shown" = the vote equals shown_first


@pytest.mark.parametrize(
    ("counts", "bias", "bias_with_ties"),
    [
        ((385, 287, 0), 0.1458, 0.1458),  # gemini-2.5-flash, forced choice: text 14.58 %
        ((220, 199, 253), 0.0501, 0.031),  # tie allowed: printed 3.1 % (ties in the denominator), caption 5.0 %
        ((309, 363, 0), -0.0804, -0.0804),  # qwen3-next-80b, forced: text -8.04 %
        ((322, 318, 32), 0.00625, 0.006),  # tie allowed: printed 0.6 %
    ],
)
def test_positional_bias_reproduces_the_papers_table_1(counts, bias, bias_with_ties):
    votes, shown_first = _table1_votes(*counts, seed=sum(counts[:2]))
    pos = position_counts(votes, shown_first)
    assert (pos.first, pos.second, pos.tie) == counts
    assert pos.bias == pytest.approx(bias, abs=5e-5)
    assert pos.bias_with_ties == pytest.approx(bias_with_ties, abs=5e-4)  # the paper prints one decimal of a %


def test_tie_vote_rates_of_g2_match_the_spec_reference_runs():
    # Spec 003 §7.9: per-sample tie-vote rate 0.12 / 0.26 / 0.48 for eta_J = -1 / 0 / 1 (N = 4000).
    config = itc.Config(data="synthetic:g2", budgets=(4, 12))
    table = vote_tables(itc.load(config, _engine()), 12)
    assert table["tie_vote_rate"].to_numpy() == pytest.approx([0.12, 0.26, 0.48], abs=0.012)
    # No position bias in the generator (b = 0): First and Second agree within sampling noise (3 sds).
    n = table["first"] + table["second"]
    assert (table["bias"].abs() < 3 / np.sqrt(n)).all()


def test_g2_budgets_draw_both_presentation_orders():
    """The spec's budget rule on G2's pool: budget n holds the first n/2 samples of each order. Reference: the
    generator's raw columns (first half A shown first, second half B first) picked by that rule by hand."""
    from judgecal_dist.methods.repeated.vote_simulation import simulate_label_first

    budgets = (2, 4, 12)
    data = itc.load(itc.Config(data="synthetic:g2", budgets=budgets, synthetic_items=300), _engine())
    for j, task in enumerate(data.tasks):
        raw = simulate_label_first(300, 12, tie_propensity=(-1.0, 0.0, 1.0)[j], random_state=j)
        for b, n in enumerate(budgets):
            assert (task.shown_first[:n] == 1).sum() == (task.shown_first[:n] == -1).sum() == n // 2
            by_hand = np.concatenate([raw.votes[:, : n // 2], raw.votes[:, 6 : 6 + n // 2]], axis=1)
            np.testing.assert_array_equal(task.counts[b], vote_counts(by_hand))
        np.testing.assert_array_equal(task.labels, raw.labels)
        assert sorted(map(tuple, task.votes.T.tolist())) == sorted(map(tuple, raw.votes.T.tolist()))


@pytest.fixture(scope="module")
def rb2_url(rb2_dir, tmp_path_factory) -> str:
    dest = str(tmp_path_factory.mktemp("rb2") / "ds")
    ingest("rb2-k8", str(rb2_dir), dest)
    return dest


def test_rb2_tie_vote_table_equals_the_raw_files(rb2_url, rb2_dir):
    config = itc.Config(data=rb2_url, budgets=(8,), methods=("sc",))
    data = itc.load(config, _engine())
    table = vote_tables(data, 8).set_index(["dataset", "judge_id"])
    # Pointwise scores: each response is scored alone, so the raw records name no presentation order and the
    # table has no positional-bias columns at all (not empty ones that a reader could take for zero bias).
    assert not {"first", "second", "tie", "bias", "bias_with_ties"} & set(table.columns)
    # Raw base_both_k8 file, full tier: sample m of two responses ties when their m-th scores are equal.
    tally: dict[tuple[str, bool], list[int]] = {}
    with gzip.open(rb2_dir / "base_both_k8.jsonl.gz", "rt") as fh:
        for line in fh:
            r = json.loads(line)
            scores = r["full_scores"]
            if r.get("refused") or any(all(x is None for x in s) for s in scores):
                continue
            for a, b in ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)):
                pairs = [(x, y) for x, y in zip(scores[a], scores[b], strict=True) if x is not None and y is not None]
                cell = tally.setdefault((r["subset"], a > 0), [0, 0])
                cell[0] += sum(x == y for x, y in pairs)
                cell[1] += len(pairs)
    for (subset, tie_pair), (ties, votes) in tally.items():
        column = "tie_vote_rate_tie_pairs" if tie_pair else "tie_vote_rate_decisive_pairs"
        assert table.loc[(f"rb2k8/{subset}", "full/base"), column] == pytest.approx(ties / votes, abs=1e-12)
    # Spec 003 §7.8: about 33 % tie votes on (j, k) pairs vs about 10 % on (0, j) pairs for `full`.
    pooled = {
        k: sum(v[0] for (s, t), v in tally.items() if t == k) / sum(v[1] for (s, t), v in tally.items() if t == k)
        for k in (True, False)
    }
    assert pooled[True] == pytest.approx(0.33, abs=0.04) and pooled[False] == pytest.approx(0.10, abs=0.03)
    with pytest.raises(ConfigError, match="pool_orders=true: .* holds pointwise scores"):
        itc.load(itc.Config(data=rb2_url, pool_orders=True), _engine())


@pytest.fixture(scope="module")
def llmbar_url(llmbar_dir, tmp_path_factory) -> str:
    dest = str(tmp_path_factory.mktemp("llmbar") / "ds")
    ingest("llmbar", str(llmbar_dir), dest)
    return dest


def test_llmbar_pooled_orders_give_positional_bias_and_greedy_decoding(llmbar_url):
    config = itc.Config(data=llmbar_url, pool_orders=True, budgets=(2,), methods=("rounded_median",), replicates=1)
    data = itc.load(config, _engine())
    assert len(data.tasks) == 65 and all(t.votes.shape[1] == 2 for t in data.tasks)
    table = vote_tables(data, 2).set_index("judge_id")
    # Independent count over the ingested rows: order ab shows A first, order ba shows B first (mapped back).
    raw = read_dataset_table(llmbar_url, "verdicts", columns=["item_id", "judge_id", "verdict"]).to_pandas()
    raw["judge"], raw["order"] = raw["judge_id"].str[:-3], raw["judge_id"].str[-2:]
    labels = read_dataset_table(llmbar_url, "labels", columns=["item_id", "label"]).to_pandas()
    raw = raw[raw["item_id"].isin(labels["item_id"])]
    first = ((raw["order"] == "ab") & (raw["verdict"] == "A")) | ((raw["order"] == "ba") & (raw["verdict"] == "B"))
    decisive = raw["verdict"].isin(["A", "B"])
    expected = pd.DataFrame({"first": first, "second": decisive & ~first}).groupby(raw["judge"]).sum()
    pd.testing.assert_frame_equal(
        table.loc[expected.index, ["first", "second"]].astype(int), expected.astype(int), check_names=False
    )
    # LLMBar's raw verdicts are A or B (or missing), so no tie; the bias from the counts made here.
    assert set(raw["verdict"].dropna()) <= {"A", "B"} and (table["tie"] == 0).all()
    bias = (expected["first"] - expected["second"]) / (expected["first"] + expected["second"])
    np.testing.assert_allclose(table.loc[expected.index, "bias"].to_numpy(float), bias.to_numpy(float), rtol=1e-12)
    # Greedy decoding: A when both orders say A, B when both say B, tie when they disagree (a missing vote: the other).
    rep = itc.plan(config, data)[0]
    rows = itc.run_replicate(data, rep).set_index("judge_id")
    wide = raw.pivot_table(index=["judge", "item_id"], columns="order", values="verdict", aggfunc="first")
    code = wide.apply(lambda c: c.map({"A": 1, "B": -1})).fillna(0).astype(int)
    greedy = np.sign(code["ab"] + code["ba"])
    truth = labels.set_index("item_id")["label"].map({"A": 1, "B": -1})
    for task in data.tasks[:5]:
        cal = itc.calibration_part(task, rep.seed, config.calib_fraction)
        items = task.item_ids[~cal]
        pred = greedy.loc[task.judge_id].reindex(items).to_numpy()
        err = np.abs(pred - truth.reindex(items).to_numpy())
        assert rows.loc[task.judge_id, "mae"] == pytest.approx(err.mean(), abs=1e-12)


def test_pool_orders_is_refused_where_no_orders_exist():
    with pytest.raises(ValueError, match="pool_orders"):
        itc.Config(data="synthetic:g2", pool_orders=True)


def test_decision_regions_follow_the_closed_form_ratio_rule():
    n = 20
    for beta, eta0 in ((1.3, 0.8), (0.4, -1.0), (2.5, 2.0)):
        grid = decision_grid(n, beta, eta0)
        lam = np.exp(2 * np.arcsinh(np.exp(eta0) / 2) / beta)  # spec 003 §3.7
        model = DavidsonAggregator()
        model.coef_ = {"beta": beta, "eta0": eta0}
        for b in range(n + 1):
            for a in range(n + 1):
                if a + b > n:
                    assert np.isnan(grid[b, a])
                    continue
                ratio_rule = 1 if (a + 1) / (b + 1) > lam else -1 if (b + 1) / (a + 1) > lam else 0
                assert grid[b, a] == ratio_rule
                assert model.predict(np.array([[a, n - a - b, b]]))[0] == ratio_rule
    sc = decision_grid(n)  # self-consistency: the most frequent of A, tie, B, a shared maximum -> tie
    for b in range(n + 1):
        for a in range(n + 1 - b):
            c = {1: a, 0: n - a - b, -1: b}
            top = [k for k, v in c.items() if v == max(c.values())]
            assert sc[b, a] == (top[0] if len(top) == 1 else 0)


def test_random_subset_budgets_are_hypergeometric_and_nested():
    votes = np.array([[1, 1, 1, 0, 0, -1, -1, MISSING]])  # 3 A, 2 tie, 2 B, one missing sample
    task = itc.Task(
        dataset="d",
        judge_id="j",
        item_ids=np.array(["i"], dtype=object),
        item_keys=np.array([1]),
        group_keys=np.array([1]),
        labels=np.array([1]),
        budgets=(4, 8),
        counts=np.zeros((2, 1, 3), np.int64),
        votes=votes,
    )
    draws = np.array([np.take_along_axis(votes, itc.sample_order(task, s, 0), axis=1)[0] for s in range(4000)])
    c4 = vote_counts(draws, 4)
    assert (vote_counts(draws, 8) == [3, 2, 2]).all()  # the whole pool: every split the same
    assert (vote_counts(draws, 6) >= c4).all()  # nested within a split
    freq = np.bincount(c4[:, 0], minlength=4)[:4] / len(c4)
    pmf = hypergeom(8, 3, 4).pmf(np.arange(4))  # A votes among 4 of the 8 samples
    assert np.abs(freq - pmf).max() < 4 * np.sqrt(pmf.max() * (1 - pmf.max()) / len(c4))


def test_random_budgets_change_small_budgets_only():
    base = dict(data="synthetic:g2", replicates=1, synthetic_items=800, budgets=(4, 12), methods=("davidson", "sc"))
    data = itc.load(itc.Config(**base), _engine())
    first, random = (
        itc.run_replicate(data, itc.Replicate(seed=2, config=itc.Config(**base, budget_samples=b))).set_index(
            ["judge_id", "n", "method"]
        )
        for b in ("first", "random")
    )
    # All 12 samples: the same counts whichever order they were drawn in; 4 of 12: another subset, other numbers.
    np.testing.assert_allclose(random.xs(12, level="n")["mae"], first.xs(12, level="n")["mae"], atol=1e-12)
    assert not np.allclose(random.xs(4, level="n")["mae"], first.xs(4, level="n")["mae"])
