from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.stats.equivalence import tost, tost_paired


def test_hand_worked_normal_case():
    # z = (0 + 0.01) / 0.004 = 2.5 on both sides: p = 1 - Phi(2.5) = 0.0062097; 90% CI = +-1.6449 * 0.004
    res = tost(0.0, 0.004)
    assert res.p_lower == pytest.approx(0.0062097, abs=1e-6)
    assert res.p_upper == pytest.approx(0.0062097, abs=1e-6)
    assert (res.ci_low, res.ci_high) == pytest.approx((-0.0065794, 0.0065794), abs=1e-6)
    assert res.equivalent


@pytest.mark.parametrize("df", [None, 5, 60])
def test_pvalue_and_interval_formulations_agree(df):
    for estimate in np.linspace(-0.02, 0.02, 41):
        for se in (0.001, 0.004, 0.008):
            res = tost(float(estimate), se, margin=0.01, alpha=0.05, df=df)
            inside = -0.01 < res.ci_low < res.ci_high < 0.01
            assert res.equivalent == inside == (res.pvalue < 0.05)
            assert res.pvalue == max(res.p_lower, res.p_upper)


def test_paired_form_matches_two_scipy_one_sided_t_tests():
    d = np.random.default_rng(0).normal(0.002, 0.05, size=300)
    res = tost_paired(d, margin=0.01)
    assert res.p_lower == pytest.approx(ttest_1samp(d, -0.01, alternative="greater").pvalue)
    assert res.p_upper == pytest.approx(ttest_1samp(d, 0.01, alternative="less").pvalue)
    ci = ttest_1samp(d, 0.0).confidence_interval(0.90)
    assert (res.ci_low, res.ci_high) == pytest.approx((ci.low, ci.high))


def test_large_effect_is_not_equivalent():
    assert not tost(0.05, 0.004).equivalent
    assert not tost_paired(np.random.default_rng(1).normal(0.05, 0.05, size=100)).equivalent


def test_bad_input_is_rejected():
    with pytest.raises(InputError, match=r"standard_error: must be finite and > 0, got 0.0"):
        tost(0.0, 0.0)
    with pytest.raises(InputError, match=r"estimate: must be finite, got nan"):
        tost(float("nan"), 0.1)
    with pytest.raises(InputError, match=r"all 3 differences are equal"):
        tost_paired([0.1, 0.1, 0.1])
    with pytest.raises(InputError, match=r"expected a 1-D array of >= 2 paired differences"):
        tost_paired([0.1])
    with pytest.raises(InputError, match=r"d: must be finite \(1 items\)"):
        tost_paired([0.1, np.inf])


def test_bad_parameters_are_rejected():
    with pytest.raises(ConfigError, match=r"margin == 0, must be > 0.0"):
        tost(0.0, 0.1, margin=0)
    with pytest.raises(ConfigError, match=r"alpha == 0.5, must be < 0.5"):
        tost(0.0, 0.1, alpha=0.5)
    with pytest.raises(ConfigError, match=r"df == -1, must be > 0.0"):
        tost(0.0, 0.1, df=-1)
