from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta, fisher_exact

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.methods.selection.diagnostics import (
    flag_below_chance,
    flag_missingness,
    flag_parse_rate,
    flag_saturation,
)


def test_parse_rate_thresholds_match_the_papers_cases():
    # LLMBar Llama-3.1-8B at 54% triggers P1 (filter); 99-100% judges do not; RB2 judges at 92-95% do not.
    table = flag_parse_rate([54, 99, 100, 92, 95, 80, 60], 100, ["llama8b", "a", "b", "rb2-1", "rb2-2", "c", "d"])
    assert table["parse_rate"].tolist() == [0.54, 0.99, 1.0, 0.92, 0.95, 0.8, 0.6]
    assert table["review"].tolist() == [True, False, False, False, False, False, True]
    assert table["filter"].tolist() == [True, False, False, False, False, False, True]
    assert table["judge_id"].tolist()[0] == "llama8b"


def test_below_chance_wald_and_bayes():
    n_votes = np.array([100, 100, 10, 40, 0])
    n_correct = np.array([30, 45, 2, 15, 0])
    wald = flag_below_chance(n_votes, n_correct)
    acc = np.array([0.30, 0.45, 0.2, 0.375])
    upper = acc + 1.96 * np.sqrt(acc * (1 - acc) / n_votes[:4])
    np.testing.assert_allclose(wald["wald_upper"].to_numpy()[:4], upper)
    assert wald["below_chance"].tolist() == [True, False, True, False, False]
    assert np.isnan(wald["accuracy"].iloc[4])
    bayes = flag_below_chance(n_votes, n_correct, method="bayes")
    np.testing.assert_allclose(bayes["prob_below_half"], beta.cdf(0.5, n_correct + 1, n_votes - n_correct + 1))
    # 2 of 10: Beta(3, 9) puts 0.967 < 0.975 below 1/2, so only the Wald rule flags it
    assert bayes["below_chance"].tolist() == [True, False, False, False, False]


def test_bayes_rule_is_safer_for_tiny_samples():
    # 0 of 2 correct: Wald SE = 0 flags it; the posterior Beta(1, 3) gives P(theta < 1/2) = 0.875 < 0.975
    assert flag_below_chance([2], [0])["below_chance"].item()
    assert not flag_below_chance([2], [0], method="bayes")["below_chance"].item()


def test_saturation_flags_the_rb2_pattern_only():
    rb2 = flag_saturation([10, 20, 30, 40], [0.012, 0.0065, 0.0060, 0.0058])
    assert rb2["saturated"].tolist() == [False, True, True]
    judgebench = flag_saturation([10, 20, 30, 38], [0.45, 0.41, 0.40, 0.398])
    assert not judgebench["saturated"].any()
    small = flag_saturation([5, 10], [0.006, 0.0058])  # below J_large
    assert not small["saturated"].any()
    big_change = flag_saturation([20, 30], [0.03, 0.009])  # reaches the floor but moves by 0.021
    assert big_change["at_floor"].item() and not big_change["saturated"].item()


def test_missingness_fisher_matches_scipy_and_patterns():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    V = np.where(rng.random((400, 4)) < 0.8, y[:, None], 1 - y[:, None]).astype(np.int8)
    V[:, 1][rng.random(400) < 0.05] = -1  # MCAR 5%
    V[:, 2][(y == 1) & (rng.random(400) < 0.15)] = -1  # MNAR: only positives go missing
    V[:, 3][rng.random(400) < 0.4] = -1  # heavy missingness: not "partial"
    table = flag_missingness(V, y, ["base", "mcar", "mnar", "heavy"])
    miss = V[:, 2] == -1
    oracle = fisher_exact(
        [[(miss & (y == 1)).sum(), (miss & (y == 0)).sum()], [(~miss & (y == 1)).sum(), (~miss & (y == 0)).sum()]]
    ).pvalue
    assert table["fisher_p"].iloc[2] == pytest.approx(oracle)
    assert table["fisher_p"].iloc[0] == 1.0
    assert table["label_dependent"].tolist() == [False, False, True, False]
    assert table["added"].tolist() == [False, True, True, True]
    assert table["partial_added"].tolist() == [False, True, True, False]
    assert table["p3_flag"].tolist() == [False, True, True, False]
    # an explicit base that is itself incomplete disables the pattern flag
    explicit = flag_missingness(V, y, added=[2])
    assert explicit["partial_added"].tolist() == [False, False, False, False]
    assert explicit["p3_flag"].tolist() == [False, False, True, False]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: flag_parse_rate([101], 100), InputError, r"n_votes: exceeds n_items=100 \(1 judges"),
        (lambda: flag_parse_rate([-1], 100), InputError, r"n_votes: counts must be non-negative integers"),
        (lambda: flag_parse_rate([5], 0), ConfigError, r"n_items == 0, must be >= 1"),
        (
            lambda: flag_parse_rate([5], 10, review_below=0.5, filter_at_or_below=0.6),
            ConfigError,
            r"filter_at_or_below=0.6 must not exceed review_below=0.5",
        ),
        (lambda: flag_below_chance([5], [1], method="exact"), ConfigError, r"method: must be 'wald' or 'bayes'"),
        (lambda: flag_below_chance([5], [6]), InputError, r"n_correct: exceeds n_votes"),
        (lambda: flag_below_chance([5], [1], level=0.3), ConfigError, r"level == 0.3, must be >= 0.5"),
        (lambda: flag_saturation([10], [0.1]), InputError, r"expected two 1-D arrays of equal length >= 2"),
        (lambda: flag_saturation([20, 10], [0.1, 0.1]), InputError, r"must be strictly increasing positive integers"),
        (lambda: flag_saturation([10, 20], [0.1, np.nan]), InputError, r"nlls: must be finite and >= 0"),
        (lambda: flag_saturation([10, 20], [0.1, 0.1], delta=-1), ConfigError, r"delta == -1, must be >= 0.0"),
        (lambda: flag_missingness([[1, -1]], [1], added=[2]), InputError, r"added: indices must lie in \[0, 2\)"),
        (
            lambda: flag_missingness([[1, -1]], [1], complete_max=0.5, partial_max=0.2),
            ConfigError,
            r"complete_max=0.5 must not exceed partial_max=0.2",
        ),
        (lambda: flag_missingness([[1, -1]], [1, 0]), InputError, r"inconsistent numbers of items: V has 1, y has 2"),
    ],
)
def test_documented_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
