"""PredictionPoweredMean against ppi-python (uniform labels), closed forms and a Poisson-sampling simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgecal_dist.errors import InputError
from judgecal_dist.methods.labels.estimators import LabelMoments, PredictionPoweredMean, label_moments
from judgecal_dist.stats.ranges import MetricRange

ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is the uniform case's reference")


def _population(seed: int, big_n: int = 3000, binary: bool = True) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = rng.beta(2.0, 1.0, size=big_n)
    y = (rng.uniform(size=big_n) < f).astype(float) if binary else f + rng.normal(0, 0.3, size=big_n)
    return y, f


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("method", "lam"), [("ppi++", None), ("ppi", 1.0), ("classical", 0.0)])
def test_uniform_equals_ppi_python(seed: int, method: str, lam: float | None) -> None:
    y_all, f = _population(seed, binary=False)
    n = 150
    y, fl = y_all[:n], f[:n]
    est = PredictionPoweredMean(alpha=0.1, method=method, bounds=None).fit(y, fl, f)
    point = ppi_py.ppi_mean_pointestimate(y, fl, f, lam=lam)
    lo, hi = ppi_py.ppi_mean_ci(y, fl, f, alpha=0.1, lam=lam)
    assert est.estimate_ == pytest.approx(float(np.ravel(point)[0]), abs=1e-12)
    assert est.interval_ == pytest.approx((float(np.ravel(lo)[0]), float(np.ravel(hi)[0])), abs=1e-12)


def test_classical_is_the_mean_of_the_labels_and_bounds_clip() -> None:
    y_all, f = _population(3)
    y = np.ones(40)
    est = PredictionPoweredMean(method="classical").fit(y, f[:40], f)
    assert est.lambda_ == 0.0 and est.estimate_ == 1.0 and est.interval_ == (1.0, 1.0)
    est = PredictionPoweredMean().fit(y_all[:60], f[:60], f)
    assert est.classical_estimate_ == pytest.approx(y_all[:60].mean())
    assert 0.0 <= est.interval_[0] <= est.estimate_ <= est.interval_[1] <= 1.0
    assert est.effective_labels_ == pytest.approx(60 * (est.classical_se_ / est.se_) ** 2)
    assert est.effective_labels_ > 60


def test_equal_inclusion_probabilities_give_the_uniform_estimate() -> None:
    y_all, f = _population(4)
    n, big_n = 200, f.size
    y, fl = y_all[:n], f[:n]
    uniform = PredictionPoweredMean(method="ppi").fit(y, fl, f)
    active = PredictionPoweredMean(method="ppi").fit(y, fl, f, inclusion_prob=np.full(n, n / big_n))
    assert active.estimate_ == pytest.approx(uniform.estimate_, abs=1e-12)
    # Bernoulli design: the label count is random too; the closed form of Var(z)/N at lambda = 1
    z = f.copy()
    z[:n] += (y - fl) * big_n / n
    assert active.se_ == pytest.approx(math.sqrt(z.var() / big_n), rel=1e-9)


def test_effective_labels_of_drawn_labels_are_measured_against_uniform_labels() -> None:
    """With equal inclusion probabilities the draw is a uniform sample: its effective labels are the uniform fit's
    (up to the Bernoulli design's random count), not inflated by the inverse-probability classical interval."""
    y_all, f = _population(5)
    n, big_n = 200, f.size
    uniform = PredictionPoweredMean().fit(y_all[:n], f[:n], f)
    drawn = PredictionPoweredMean().fit(y_all[:n], f[:n], f, inclusion_prob=np.full(n, n / big_n))
    share = drawn.estimate_
    assert drawn.effective_labels_ == pytest.approx(share * (1 - share) / drawn.se_**2, rel=1e-12)
    assert drawn.effective_labels_ == pytest.approx(uniform.effective_labels_, rel=0.15)
    assert drawn.effective_labels_ < n * (drawn.classical_se_ / drawn.se_) ** 2  # the flattering definition


def test_power_tuned_lambda_minimises_the_variance_by_brute_force() -> None:
    y_all, f = _population(5)
    rng = np.random.default_rng(5)
    pi = rng.uniform(0.05, 0.5, size=f.size)
    labelled = np.flatnonzero(rng.uniform(size=f.size) < pi)
    est = PredictionPoweredMean().fit(y_all[labelled], f[labelled], f, inclusion_prob=pi[labelled])
    xi = np.zeros(f.size)
    xi[labelled] = 1.0

    def var_z(lam: float) -> float:
        z = lam * f + (y_all - lam * f) * xi / pi
        return float(z.var())

    grid = np.linspace(0.0, 1.0, 10001)
    best = grid[np.argmin([var_z(g) for g in grid])]
    assert est.lambda_ == pytest.approx(best, abs=2e-4)
    z = est.lambda_ * f + (y_all - est.lambda_ * f) * xi / pi
    assert est.estimate_ == pytest.approx(z.mean(), abs=1e-12)
    classical = PredictionPoweredMean(method="classical").fit(y_all[labelled], f[labelled], f, pi[labelled])
    assert classical.estimate_ == pytest.approx(np.sum(y_all[labelled] / pi[labelled]) / f.size, abs=1e-12)


def test_horvitz_thompson_variance_under_poisson_sampling() -> None:
    """Design variance by simulation: unbiased, and E[se^2] = Var_HT + Var(Y)/N (the superpopulation part)."""
    rng = np.random.default_rng(6)
    big_n, reps = 200, 20000
    f = rng.uniform(size=big_n)
    y = (rng.uniform(size=big_n) < f).astype(float)
    pi = rng.uniform(0.1, 0.6, size=big_n)
    estimates, variances = np.empty(reps), np.empty(reps)
    for r in range(reps):
        idx = np.flatnonzero(rng.uniform(size=big_n) < pi)
        est = PredictionPoweredMean(method="ppi", bounds=None).fit(y[idx], f[idx], f, pi[idx])
        estimates[r], variances[r] = est.estimate_, est.se_**2
    v_ht = float(np.sum((y - f) ** 2 * (1 - pi) / pi)) / big_n**2
    assert estimates.mean() == pytest.approx(y.mean(), abs=4 * math.sqrt(v_ht / reps))
    assert estimates.var() == pytest.approx(v_ht, rel=0.05)
    assert variances.mean() == pytest.approx(v_ht + y.var() / big_n, rel=0.03)


def test_labels_to_halve_and_moments_add() -> None:
    y_all, f = _population(7)
    est = PredictionPoweredMean().fit(y_all[:100], f[:100], f)
    more = est.labels_to_halve()
    label_part = est.se_**2 - est.imputed_variance_
    assert est.imputed_variance_ + label_part * 100 / (100 + more) == pytest.approx(est.se_**2 / 4)
    a = label_moments(y_all[:50], f[:50], f[:1000])
    b = label_moments(y_all[1000:1050], f[1000:1050], f[1000:])
    whole = label_moments(np.r_[y_all[:50], y_all[1000:1050]], np.r_[f[:50], f[1000:1050]], f)
    total = a + b
    for name in LabelMoments.sum_names():
        assert getattr(total, name) == pytest.approx(getattr(whole, name))


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"y": [1.0, 0.0], "proxy_labelled": [0.5], "proxy_all": [0.5, 0.5]}, "lengths differ"),
        ({"y": [1.0, np.nan], "proxy_labelled": [0.5, 0.5], "proxy_all": [0.5, 0.5]}, "NaN"),
        ({"y": [1.0, 0.0], "proxy_labelled": [0.5, 0.5], "proxy_all": [0.5]}, "pass every item"),
        ({"y": [1.0, 0.0], "proxy_labelled": [0.5, 0.5], "proxy_all": [0.5] * 3, "inclusion_prob": [0.0, 1]}, "(0, 1]"),
        ({"y": [1.0], "proxy_labelled": [0.5], "proxy_all": [0.5] * 3}, "at least 2"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs: dict, word: str) -> None:
    with pytest.raises(InputError, match=word.replace("(", r"\(").replace("]", r"\]")):
        PredictionPoweredMean().fit(**kwargs)


def test_bounds_given_keep_the_interval_inside() -> None:
    y_all, f = _population(8)
    est = PredictionPoweredMean(bounds=MetricRange(0.0, 1.0)).fit(y_all[:30] * 0 + 1, f[:30] * 0 + 1, f)
    assert est.interval_[1] <= 1.0
