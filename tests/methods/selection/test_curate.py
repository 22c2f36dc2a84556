from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.methods.selection.curate import (
    check_judge_ids,
    dedup_by_family,
    l1_logistic_support,
    oracle_top_k,
    random_k,
    rank_judges,
    top_k,
)
from tests.methods.conftest import simulate_panel


def test_ranking_follows_the_one_coin_posterior_mean(panel):
    V, y = panel
    n_votes, n_correct = count_judge_votes(V, y)
    order = rank_judges(n_votes, n_correct)
    r = OneCoin().fit(V, y).accuracy_
    assert np.all(np.diff(r[order]) <= 0)
    assert top_k(n_votes, n_correct, None, 2).tolist() == order[:2].tolist() == [0, 1]


def test_tie_breaks_larger_n_then_judge_id():
    # r_j: 8/10 = 0.8 for all four (c + 1) / (n + 2): (7 + 1) / (8 + 2), (15 + 1) / (18 + 2), ...
    n_votes = [8, 18, 8, 18]
    n_correct = [7, 15, 7, 15]
    ids = ["zeta", "beta", "alpha", "gamma"]
    assert rank_judges(n_votes, n_correct, ids).tolist() == [1, 3, 2, 0]
    assert rank_judges(n_votes, n_correct).tolist() == [1, 3, 0, 2]  # no ids: column position
    # the order does not depend on the column order of the input
    perm = np.array([2, 0, 3, 1])
    ids_perm = np.array(ids)[perm]
    ranked = ids_perm[rank_judges(np.array(n_votes)[perm], np.array(n_correct)[perm], ids_perm)]
    assert ranked.tolist() == ["beta", "gamma", "alpha", "zeta"]


def test_prior_changes_the_ranking():
    # 1/1 correct vs 80/100: the uniform prior ranks the big judge first (0.667 < 0.794), a weak prior does not
    assert top_k([1, 100], [1, 80], None, 1).tolist() == [1]
    assert top_k([1, 100], [1, 80], None, 1, alpha0=0.01, beta0=0.01).tolist() == [0]


def test_k_at_least_j_is_full_inclusion():
    assert sorted(top_k([5, 5, 5], [1, 2, 3], None, 10).tolist()) == [0, 1, 2]
    assert random_k(3, 5, rng=np.random.default_rng(0)).tolist() == [0, 1, 2]


def test_dedup_keeps_the_best_judge_of_each_family():
    n_votes = [10, 10, 10, 10, 10, 12]
    n_correct = [6, 9, 7, 5, 3, 3]
    families = ["gpt", "gpt", "llama", "llama", "palm", "palm"]
    # palm: judges 4 (r = 4/12) and 5 (r = 4/14); gpt: 1; llama: 2
    assert dedup_by_family(n_votes, n_correct, None, families).tolist() == [1, 2, 4]


def test_oracle_top_k_ranks_on_evaluation_data():
    V_cal, y_cal = simulate_panel(np.random.default_rng(0), n_items=60, accuracies=[0.6, 0.9, 0.8], missing=0.0)
    V_eval, y_eval = V_cal.copy(), y_cal.copy()
    V_eval[:, 0] = y_eval  # judge 0 is perfect on the evaluation items
    assert oracle_top_k(V_eval, y_eval, ["a", "b", "c"], 1).tolist() == [0]
    assert top_k(*count_judge_votes(V_cal, y_cal), ["a", "b", "c"], 1).tolist() == [1]


def test_random_k_is_seeded_and_uniform():
    draws = [random_k(6, 2, rng=np.random.default_rng(s)).tolist() for s in range(600)]
    assert random_k(6, 2, rng=np.random.default_rng(5)).tolist() == draws[5]
    counts = np.bincount(np.ravel(draws), minlength=6)
    assert np.all(np.abs(counts / 600 - 1 / 3) < 0.06)


def test_l1_support_grows_with_c_and_recovers_the_informative_judges():
    V, y = simulate_panel(np.random.default_rng(1), n_items=400, accuracies=[0.9, 0.8, 0.5, 0.5], missing=0.1)
    table = l1_logistic_support(V, y, Cs=(1e-3, 1e-2, 1e-1, 1.0, 10.0))
    assert table["C"].tolist() == [1e-3, 1e-2, 1e-1, 1.0, 10.0]
    assert table["support_size"].tolist() == [len(s) for s in table["support"]]
    assert np.all(np.diff(table["support_size"]) >= 0)
    assert table["support_size"].iloc[0] == 0
    assert {0, 1} <= set(table["support"].iloc[2])
    saga = l1_logistic_support(V, y, Cs=(0.1,), solver="saga")
    assert {0, 1} <= set(saga["support"].iloc[0])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: top_k([3, 2], [4, 0], None, 1), InputError, r"n_correct: exceeds n_votes \(1 judges, e.g. \[0\]\)"),
        (lambda: top_k([3, 2], [1, 0], None, 0), ConfigError, r"k == 0, must be >= 1"),
        (lambda: rank_judges([3], [1], alpha0=0), ConfigError, r"alpha0 == 0, must be > 0"),
        (lambda: rank_judges([3, 2], [1, 1], ["a"]), InputError, r"judge_ids: expected 2 ids \(one per judge\)"),
        (lambda: rank_judges([3, 2], [1, 1], ["a", ""]), InputError, r"ids must be non-empty strings \(1 judges"),
        (
            lambda: dedup_by_family([3, 2], [1, 1], None, ["gpt", None]),
            InputError,
            r"families: missing family \(1 judges, e.g. \[1\]\)",
        ),
        (lambda: dedup_by_family([3, 2], [1, 1], None, ["gpt"]), InputError, r"families: expected 2 families"),
        (lambda: random_k(3, 1, rng=1), ConfigError, r"rng: expected a numpy.random.Generator, got int"),
        (lambda: l1_logistic_support([[1], [0]], [1, 1]), InputError, r"y: all 2 labels are 1; the logistic fit"),
        (lambda: l1_logistic_support([[1], [0]], [1, 0], Cs=()), ConfigError, r"Cs: give at least one penalty"),
        (lambda: l1_logistic_support([[1], [0]], [1, 0], Cs=(0,)), ConfigError, r"Cs == 0, must be > 0"),
        (lambda: l1_logistic_support([[1], [0]], [1, 0], solver="lbfgs"), ConfigError, r"solver: must be 'liblinear'"),
    ],
)
def test_documented_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_check_judge_ids_rejects_duplicates():
    with pytest.raises(InputError, match=r"judge_ids: duplicate ids \(2 judges, e.g. \['a'\]\)"):
        check_judge_ids(["a", "b", "a"], n_judges=3, where="demo")


def test_more_documented_errors():
    with pytest.raises(ConfigError, match=r"k == 0, must be >= 1"):
        random_k(3, 0, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"n_judges == 0, must be >= 1"):
        random_k(0, 1, rng=np.random.default_rng(0))
    with pytest.raises(InputError, match=r"count_judge_votes: inconsistent numbers of items: V has 1, y has 2"):
        oracle_top_k([[1, 0]], [1, 0], None, 1)
