r"""Hierarchical Bayesian linear corrector with partial pooling across rubrics, fitted by NUTS (spec 001 §3).

NUTS comes from NumPyro (JAX). Measured on this project's 2-core CPU machine for the 5-rubric hierarchy (2 chains x
(500 + 1000) draws, sufficient-statistics likelihood): ~10 s per fit including the JIT compile, against 22-32 s for
PyMC's own sampler and 5-12 s for nutpie (mostly numba compile), at a similar install weight; NumPyro needs no C
compiler or numba on the workers and runs all chains as one vectorised program. Diagnostics (rank-normalised
split-:math:`\hat R`, bulk and tail ESS) come from ``arviz-stats`` (numpy + scipy only).

Parametrisation. A fixed non-centred hierarchy (spec §3.3, pitfall 5) is right for rubrics whose anchors say
little next to the population prior, but with hundreds of anchors per rubric (the RewardBench 2 subsets) the
likelihood pins :math:`\alpha_r = \mu_\alpha + \tau_\alpha z_r` so tightly that :math:`z_r` lives on an inverted
funnel in :math:`\tau_\alpha`: NUTS saturates its tree depth and diverges. The centred form is then the efficient
one [4]_ [5]_. ``centring="auto"`` chooses per rubric and per parameter from the data, by the shrinkage factor
:math:`\kappa_r` of :func:`centring_rule` (centred iff :math:`\kappa_r < 1/2`), through NumPyro's
``LocScaleReparam`` with a fixed per-rubric centredness in {0, 1} [6]_. The model and its posterior are unchanged;
only the sampler's coordinates differ. The gate and its one retry still apply.

This module imports jax/numpyro lazily inside ``fit``: importing :mod:`judgecal_dist.methods` stays cheap.

References
----------
.. [1] M. D. Hoffman, A. Gelman. The No-U-Turn Sampler. JMLR 15, 2014.
.. [2] A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner. Rank-normalization, folding, and
   localization: an improved R-hat. Bayesian Analysis 16(2), 2021, doi:10.1214/20-BA1221.
.. [3] L. Morandi. Two Ways to De-Bias an LLM-as-a-Judge. 2026, §IV (Algorithm 1).
.. [4] O. Papaspiliopoulos, G. O. Roberts, M. Sköld. A general framework for the parametrization of hierarchical
   models. Statistical Science 22(1), 2007, 59-73 (the Gaussian case: centred rate :math:`\kappa`, non-centred
   :math:`1-\kappa`).
.. [5] M. Betancourt, M. Girolami. Hamiltonian Monte Carlo for hierarchical models. In Current Trends in Bayesian
   Methodology with Applications, CRC Press, 2015, arXiv:1312.0906 (centred for strongly informative data).
.. [6] M. I. Gorinova, D. Moore, M. D. Hoffman. Automatic reparameterisation of probabilistic programs. ICML 2020.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal_dist.errors import InputError
from judgecal_dist.methods.continuous.hb_centring import centred_stats, centring_rule
from judgecal_dist.methods.continuous.linear_conjugate import sufficient_stats

__all__ = ["HierarchicalLinear", "ConvergenceGateWarning", "check_scores", "centring_rule"]

Array = npt.NDArray[np.float64]
#: Rubrics with fewer anchors than this contribute no likelihood and use the pooled prior (spec §3.3).
MIN_ANCHORS = 2


class ConvergenceGateWarning(UserWarning):
    """The NUTS fit failed the R-hat / ESS / divergence gate (spec §3.5) even after the retry."""


def check_scores(values: npt.ArrayLike, *, name: str, score_range: tuple[float, float]) -> Array:
    """Finite 1-D scores inside ``score_range``, else an InputError naming the column, count and examples."""
    x = np.asarray(values, dtype=np.float64).ravel()
    low, high = score_range
    bad = ~np.isfinite(x) | (x < low) | (x > high)
    if bad.any():
        raise InputError(
            f"{name}: scores outside the declared range [{low:g}, {high:g}] or not finite "
            f"({int(bad.sum())} values, e.g. {x[bad][:3].tolist()} at rows {np.flatnonzero(bad)[:3].tolist()})"
        )
    return x


def _model(stats: Any, mask: Any, centred: Any, *, prior: tuple[float, ...], pooled: bool) -> None:
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.handlers import reparam
    from numpyro.infer.reparam import LocScaleReparam

    mu_a0, tau_a0, mu_b0, tau_b0 = prior
    n_rub = stats.shape[0]
    if pooled:
        mu_a = numpyro.sample("mu_alpha", dist.Normal(mu_a0, tau_a0))
        mu_b = numpyro.sample("mu_beta", dist.Normal(mu_b0, tau_b0))
        tau_a = numpyro.sample("tau_alpha", dist.HalfNormal(1.0))
        tau_b = numpyro.sample("tau_beta", dist.HalfNormal(1.0))
    else:  # independent cells with the single-cell priors (spec §3.2): hyperparameters fixed
        mu_a, mu_b, tau_a, tau_b = mu_a0, mu_b0, tau_a0, tau_b0
    # Per-rubric centring c in {0, 1}: the sampler draws alpha_decentered ~ N(c mu, tau^c) and
    # alpha = mu + tau^(1-c) (alpha_decentered - c mu) -- centred (c=1) where the rubric's anchors dominate its
    # prior, non-centred (c=0) where they do not (see centring_rule; a fixed non-centred form diverges there).
    config = {"alpha": LocScaleReparam(centred[0]), "beta": LocScaleReparam(centred[1])}
    with numpyro.plate("rubric", n_rub), reparam(config=config):
        ones = jnp.ones(n_rub)  # full batch shape: the reparam's centring vector is per rubric
        alpha = numpyro.sample("alpha", dist.Normal(mu_a * ones, tau_a * ones))
        beta = numpyro.sample("beta", dist.Normal(mu_b * ones, tau_b * ones))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    n, mj, my, vjj, vjy, vyy = (stats[:, k] for k in range(6))
    # Gaussian log-likelihood from sufficient statistics (spec §3.1, centred form): same posterior as per-row terms.
    rss = vyy - 2 * beta * vjy + beta**2 * vjj + n * (my - alpha - beta * mj) ** 2
    loglik = -0.5 * n * jnp.log(2 * jnp.pi * sigma**2) - 0.5 * rss / sigma**2
    numpyro.factor("loglik", jnp.sum(jnp.where(mask, loglik, 0.0)))


class HierarchicalLinear(BaseEstimator):
    r"""Per-rubric linear corrector :math:`y \sim \mathcal N(\alpha_r + \beta_r j, \sigma_r^2)` pooled across rubrics.

    .. math:: \alpha_r = \mu_\alpha + \tau_\alpha z^\alpha_r,\quad \beta_r = \mu_\beta + \tau_\beta z^\beta_r,\quad
              z \sim \mathcal N(0, 1),\quad \sigma_r \sim \mathcal N^+(0, 1),

    with :math:`\mu_\alpha \sim \mathcal N(0, 2^2)`, :math:`\mu_\beta \sim \mathcal N(1, 2^2)`,
    :math:`\tau_\bullet \sim \mathcal N^+(0, 1)` (spec §3.3). ``pooled=False`` fixes the hyperparameters at
    ``prior`` (the paper's single-rubric model, §3.2). The sampler draws :math:`\alpha_r` itself (centred) or
    :math:`z^\alpha_r` (non-centred) per rubric, see ``centring``; the posterior is the same.

    Parameters
    ----------
    prior : (float, float, float, float)
        :math:`(\mu_\alpha, \tau_\alpha, \mu_\beta, \tau_\beta)` of the hyperpriors (standard deviations).
    pooled : bool
        Partial pooling across rubrics (True) or independent cells with fixed priors.
    num_chains, num_warmup, num_samples, target_accept : NUTS settings (spec §3.4: 2, 500, 1000, 0.9).
    rhat_max, ess_min : float
        Gate (spec §3.5): every parameter needs rank-normalised :math:`\hat R <` ``rhat_max`` and bulk and tail
        ESS > ``ess_min``, and no divergence; a failure re-runs once at ``retry_target_accept``.
    score_range : (float, float)
        Declared range of both scores.
    canary_beta, canary_alert : float
        Canary :math:`\Pr(\beta_r < 0.3) > 0.05` (spec §3.7).
    centring : {"auto", "centred", "noncentred"}
        Sampler parametrisation of :math:`(\alpha_r, \beta_r)`: per rubric and parameter by :func:`centring_rule`
        (default), or one form for all rubrics with anchors (``"noncentred"`` is the spec's §3.3 form; rubrics
        without anchors are always non-centred).
    random_state : int

    Attributes
    ----------
    rubrics_ : list of str
    n_anchors_ : ndarray of int
        Anchors per rubric.
    fallback_ : list of str
        Rubrics with fewer than 2 anchors: their :math:`(\alpha_r, \beta_r, \sigma_r)` are draws from the pooled
        prior (population predictive), a documented fallback (a warning says so).
    draws_ : dict of str to ndarray
        ``alpha``, ``beta``, ``sigma`` of shape (chains, draws, rubrics), and the hyperparameters.
    alpha_, beta_, sigma_ : ndarray of shape (rubrics,)
        Posterior means.
    shrinkage_ : ndarray of shape (2, rubrics)
        :math:`\kappa_r` of :math:`\alpha_r` (row 0) and :math:`\beta_r` (row 1), see :func:`centring_rule`.
    centred_ : ndarray of bool, shape (2, rubrics)
        Parametrisation used: True where the sampler drew :math:`\alpha_r` / :math:`\beta_r` centred.
    rhat_, ess_bulk_, ess_tail_ : dict of str to float
        Worst value over the components of each parameter: sampler coordinates (``alpha_decentered``, ...),
        :math:`\alpha_r`, :math:`\beta_r`, :math:`\sigma_r` and the hyperparameters.
    divergences_ : int
        Divergent transitions of the reported (last) run.
    mean_steps_ : float
        Mean leapfrog steps per draw (1023 = tree depth saturated).
    retried_ : bool
        The first run failed the gate and the reported draws come from the retry.
    converged_ : bool
        Gate passed.
    canary_prob_ : ndarray of shape (rubrics,)
    canary_alert_ : ndarray of bool
    """

    def __init__(
        self,
        *,
        prior: tuple[float, float, float, float] = (0.0, 2.0, 1.0, 2.0),
        pooled: bool = True,
        num_chains: int = 2,
        num_warmup: int = 500,
        num_samples: int = 1000,
        target_accept: float = 0.9,
        retry_target_accept: float = 0.95,
        rhat_max: float = 1.01,
        ess_min: float = 400.0,
        score_range: tuple[float, float] = (1.0, 5.0),
        canary_beta: float = 0.3,
        canary_alert: float = 0.05,
        centring: str = "auto",
        random_state: int = 0,
    ) -> None:
        self.prior = prior
        self.pooled = pooled
        self.num_chains = num_chains
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.target_accept = target_accept
        self.retry_target_accept = retry_target_accept
        self.rhat_max = rhat_max
        self.ess_min = ess_min
        self.score_range = score_range
        self.canary_beta = canary_beta
        self.canary_alert = canary_alert
        self.centring = centring
        self.random_state = random_state

    def fit(
        self,
        j: npt.ArrayLike,
        y: npt.ArrayLike,
        rubric: npt.ArrayLike | None = None,
        *,
        rubrics: list[str] | None = None,
    ) -> HierarchicalLinear:
        """Sample the posterior from anchors ``(j, y)`` labelled by ``rubric``.

        ``rubrics`` lists every rubric to report (default: those in ``rubric``); listed rubrics without anchors get
        the population predictive. Raises InputError for out-of-range or mismatched inputs, or when
        ``pooled=False`` and a rubric has fewer than 2 anchors (no pooled prior to fall back on).
        """
        j = check_scores(j, name="j (judge score)", score_range=self.score_range)
        y = check_scores(y, name="y (reference score)", score_range=self.score_range)
        labels = np.full(j.size, "all", dtype=object) if rubric is None else np.asarray(rubric, dtype=object).ravel()
        if not (j.size == y.size == labels.size):
            raise InputError(f"hb_linear: j, y, rubric: lengths differ ({j.size}, {y.size}, {labels.size})")
        self.rubrics_ = list(rubrics) if rubrics is not None else sorted(set(labels.tolist()))
        unknown = sorted(set(labels.tolist()) - set(self.rubrics_))
        if unknown:
            raise InputError(f"hb_linear: rubric: labels not in rubrics {unknown[:3]} ({len(unknown)})")
        code = np.array([self.rubrics_.index(r) for r in labels], dtype=np.int64)
        onehot = code[None, :] == np.arange(len(self.rubrics_))[:, None]
        stats = sufficient_stats(np.where(onehot, j, np.nan), np.where(onehot, y, np.nan))
        few = self._check_anchors(stats)
        if self.centring not in ("auto", "centred", "noncentred"):
            raise InputError(f"hb_linear: centring: must be auto, centred or noncentred, got {self.centring!r}")
        self.shrinkage_ = centring_rule(stats, ~few, self.prior, self.pooled)
        choice = {"auto": self.shrinkage_ < 0.5, "centred": ~few, "noncentred": np.zeros_like(few)}[self.centring]
        self.centred_ = np.broadcast_to(choice, self.shrinkage_.shape).copy()
        self.retried_ = False
        self._sample(stats, ~few, self.target_accept)
        if not self.converged_ and self.retry_target_accept > self.target_accept:
            self.retried_ = True
            self._sample(stats, ~few, self.retry_target_accept)  # spec §3.4 extension: one retry
        if not self.converged_:
            warnings.warn(
                f"hb_linear: convergence gate failed (max R-hat {max(self.rhat_.values()):.4f}, min ESS "
                f"{min(min(self.ess_bulk_.values()), min(self.ess_tail_.values())):.0f}, {self.divergences_} "
                "divergences): report this fit as failed",
                ConvergenceGateWarning,
                stacklevel=2,
            )
        beta = self.draws_["beta"]
        self.alpha_ = self.draws_["alpha"].mean(axis=(0, 1))
        self.beta_ = beta.mean(axis=(0, 1))
        self.sigma_ = self.draws_["sigma"].mean(axis=(0, 1))
        self.canary_prob_ = (beta < self.canary_beta).mean(axis=(0, 1))
        self.canary_alert_ = self.canary_prob_ > self.canary_alert
        return self

    def _check_anchors(self, stats: Array) -> npt.NDArray[np.bool_]:
        """Anchors per rubric (``n_anchors_``, ``fallback_``), refusing too few and warning of pooled or flat rubrics;
        returns the rubrics with too few anchors."""
        self.n_anchors_ = stats[:, 0].astype(np.int64)
        few = self.n_anchors_ < MIN_ANCHORS
        self.fallback_ = [r for r, f in zip(self.rubrics_, few, strict=True) if f]
        if few.any() and not self.pooled:
            raise InputError(
                f"hb_linear: rubric: fewer than {MIN_ANCHORS} anchors in {self.fallback_[:3]} with pooled=False; "
                "use pooled=True (these rubrics then use the pooled prior) or add anchors"
            )
        if few.all():
            raise InputError(f"hb_linear: no rubric has {MIN_ANCHORS} or more anchors ({self.n_anchors_.tolist()})")
        if self.fallback_:
            warnings.warn(
                f"hb_linear: rubrics {self.fallback_} have < {MIN_ANCHORS} anchors: their corrector is the pooled "
                "prior (population predictive), not a fit to their own anchors",
                UserWarning,
                stacklevel=3,
            )
        flat = [
            r
            for r, s in zip(self.rubrics_, stats, strict=True)
            if s[0] >= MIN_ANCHORS and s[3] - s[1] ** 2 / s[0] <= 1e-12
        ]
        if flat:
            warnings.warn(
                f"hb_linear: rubrics {flat} have constant judge scores: their slope is identified by the prior only",
                UserWarning,
                stacklevel=3,
            )
        return few

    def _sample(self, stats: Array, mask: npt.NDArray[np.bool_], target_accept: float) -> None:
        import jax
        import jax.numpy as jnp
        from arviz_stats.base import array_stats
        from numpyro.infer import MCMC, NUTS

        prior = tuple(float(p) for p in self.prior)
        kernel = NUTS(partial(_model, prior=prior, pooled=self.pooled), target_accept_prob=target_accept)
        mcmc = MCMC(
            kernel,
            num_warmup=self.num_warmup,
            num_samples=self.num_samples,
            num_chains=self.num_chains,
            chain_method="vectorized",  # one compiled program for all chains (CPU has one device)
            progress_bar=False,
        )
        mcmc.run(
            jax.random.PRNGKey(self.random_state),
            jnp.asarray(centred_stats(stats)),
            jnp.asarray(mask),
            jnp.asarray(self.centred_, dtype=jnp.float32),
            extra_fields=("diverging", "num_steps"),
        )
        samples, extra = mcmc.get_samples(group_by_chain=True), mcmc.get_extra_fields()
        draws = {k: np.asarray(v, dtype=np.float64) for k, v in samples.items()}
        self.draws_ = draws
        self.divergences_ = int(np.asarray(extra["diverging"]).sum())
        self.mean_steps_ = float(np.asarray(extra["num_steps"]).mean())
        self.rhat_, self.ess_bulk_, self.ess_tail_ = {}, {}, {}
        for k in draws:  # sampler coordinates and the model's own parameters (alpha, beta)
            x = np.moveaxis(draws[k].reshape(draws[k].shape[:2] + (-1,)), -1, 0)  # (components, chains, draws)
            self.rhat_[k] = float(np.max(array_stats.rhat(x, chain_axis=-2, draw_axis=-1, method="rank")))
            self.ess_bulk_[k] = float(np.min(array_stats.ess(x, chain_axis=-2, draw_axis=-1, method="bulk")))
            self.ess_tail_[k] = float(np.min(array_stats.ess(x, chain_axis=-2, draw_axis=-1, method="tail", prob=0.05)))
        self.converged_ = bool(
            max(self.rhat_.values()) < self.rhat_max
            and min(self.ess_bulk_.values()) > self.ess_min
            and min(self.ess_tail_.values()) > self.ess_min
            and self.divergences_ == 0
        )

    def _index(self, rubric: npt.ArrayLike | None, size: int) -> npt.NDArray[np.int64]:
        if rubric is None:
            if len(self.rubrics_) != 1:
                raise InputError(f"hb_linear: rubric: required with {len(self.rubrics_)} rubrics")
            return np.zeros(size, dtype=np.int64)
        labels = np.asarray(rubric, dtype=object).ravel()
        unknown = sorted(set(labels.tolist()) - set(self.rubrics_))
        if unknown:
            raise InputError(f"hb_linear: rubric: unknown rubrics {unknown[:3]}; fitted: {self.rubrics_}")
        lookup = {r: i for i, r in enumerate(self.rubrics_)}
        return np.array([lookup[r] for r in labels], dtype=np.int64)

    def predict(self, j: npt.ArrayLike, rubric: npt.ArrayLike | None = None) -> Array:
        r"""Posterior-mean corrector :math:`\hat\alpha_r + \hat\beta_r j` (unclipped, spec §3.6)."""
        check_is_fitted(self)
        j = np.asarray(j, dtype=np.float64).ravel()
        r = self._index(rubric, j.size)
        return self.alpha_[r] + self.beta_[r] * j

    def posterior_moments(self) -> tuple[Array, Array]:
        r"""Posterior covariance of :math:`(\alpha_r, \beta_r)` (shape ``(R, 2, 2)``) and :math:`E[\sigma_r^2]`
        (shape ``(R,)``) over the draws: with the means, the first two moments of the posterior predictive."""
        check_is_fitted(self)
        n = len(self.rubrics_)
        a, b, s = (np.asarray(self.draws_[k], dtype=np.float64).reshape(-1, n) for k in ("alpha", "beta", "sigma"))
        cov = np.stack([np.cov(np.stack([a[:, i], b[:, i]]), ddof=0) for i in range(n)])
        return cov, (s * s).mean(axis=0)

    def predict_interval(
        self,
        j: npt.ArrayLike,
        rubric: npt.ArrayLike | None = None,
        *,
        level: float = 0.95,
        kind: str = "predictive",
        random_state: int = 0,
    ) -> tuple[Array, Array]:
        r"""Equal-tailed interval of :math:`\alpha_r + \beta_r j` (``kind="credible"``) or of
        :math:`\alpha_r + \beta_r j + \sigma_r \varepsilon` (``"predictive"``, integrating :math:`\sigma`, §3.6)."""
        check_is_fitted(self)
        if kind not in ("predictive", "credible"):
            raise InputError(f"hb_linear: kind: must be predictive or credible, got {kind!r}")
        j = np.asarray(j, dtype=np.float64).ravel()
        r = self._index(rubric, j.size)
        a, b, s = (self.draws_[k].reshape(-1, len(self.rubrics_)) for k in ("alpha", "beta", "sigma"))
        mu = a[:, r] + b[:, r] * j[None, :]
        if kind == "predictive":
            mu = mu + s[:, r] * np.random.default_rng(random_state).standard_normal(mu.shape)
        q = 50 * (1 - level)
        low, high = np.percentile(mu, [q, 100 - q], axis=0)
        return low, high
