r"""Item-level paired permutation (sign-flip) test of a mean loss difference (spec 000 §5.5(a)).

Within one split, :math:`d_i = \ell(\hat p^{\,\mathrm{top}}_i, Y_i) - \ell(\hat p^{\,\mathrm{all}}_i, Y_i)` for the
evaluation items; under the null the sign of each :math:`d_i` is exchangeable, so :math:`B` draws of i.i.d. signs
give the reference distribution of the paired :math:`t` statistic. The statistic depends on the signs only
through :math:`S = \sum_i \epsilon_i d_i` (the sum of squares :math:`Q = \sum_i d_i^2` does not change when signs
flip), and :math:`|t|` increases with :math:`|S|`, so each draw costs one signed sum.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026,
   §4.3 and Table 2.
.. [2] P. Good. Permutation, Parametric, and Bootstrap Tests of Hypotheses, 3rd ed. Springer, 2005,
   doi:10.1007/b138696, §3.1 (one-sample sign-flip tests).
.. [3] B. Phipson, G. K. Smyth. Permutation P-values Should Never Be Zero. Stat. Appl. Genet. Mol. Biol. 9(1),
   2010, doi:10.2202/1544-6115.1585 (the :math:`(1 + b)/(B + 1)` p-value).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import InputError
from judgecal_dist.stats.checks import check_param, check_rng

__all__ = ["PermutationResult", "PermutationSummary", "paired_permutation_test", "paired_permutation_test_many"]

#: Row ``v`` holds the 8 bits of the byte ``v``, most significant first (``np.unpackbits`` order).
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float64)
_UINT64_MAX = np.iinfo(np.uint64).max
_BLOCK_BYTES = 1 << 24  # random bytes per block of draws (16 MiB)


class PermutationResult(NamedTuple):
    """Observed paired :math:`t` statistic and its two-sided sign-flip p-value."""

    statistic: float
    pvalue: float


class PermutationSummary(NamedTuple):
    """Per-split statistics and p-values of :func:`paired_permutation_test_many`, and their medians."""

    statistic: npt.NDArray[np.float64]
    pvalue: npt.NDArray[np.float64]
    median_statistic: float
    median_pvalue: float


def _check_differences(d: npt.ArrayLike, where: str) -> npt.NDArray[np.float64]:
    try:
        arr = np.asarray(d, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InputError(f"{where}: d: expected numbers ({err})") from err
    if arr.ndim != 1:
        raise InputError(f"{where}: d: expected a 1-D array of paired differences, got shape {arr.shape}")
    if arr.size < 2:
        raise InputError(f"{where}: d: need >= 2 paired differences for a t statistic, got {arr.size}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(
            f"{where}: d: must be finite ({int(bad.sum())} items, e.g. positions {np.flatnonzero(bad)[:3].tolist()})"
        )
    return arr


def _t_from_sum(s: npt.NDArray[np.float64] | float, q: float, n: int) -> npt.NDArray[np.float64]:
    r"""Paired :math:`t` from :math:`S = \sum_i \epsilon_i d_i` and :math:`Q = \sum_i d_i^2`.

    .. math:: t = \frac{S/n}{\sqrt{(Q - S^2/n) / (n(n-1))}} = \frac{S\sqrt{n-1}}{\sqrt{nQ - S^2}}

    :math:`nQ - S^2 \ge 0` by Cauchy-Schwarz; it is 0 only when all :math:`\epsilon_i d_i` are equal, where
    :math:`t = \pm\infty` (or 0 when :math:`S = 0`).
    """
    s_arr = np.asarray(s, dtype=np.float64)
    denom = np.sqrt(np.maximum(n * q - s_arr**2, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = s_arr * np.sqrt(n - 1.0) / denom
    return np.where(s_arr == 0.0, 0.0, t)


def _flip_sums(d: npt.NDArray[np.float64], n_resamples: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    r""":math:`S^{(b)} = \sum_i \epsilon^{(b)}_i d_i` for ``n_resamples`` vectors of i.i.d. fair signs.

    The signs are the bits of uniform ``uint64`` words (64 fair coins per draw). With bits
    :math:`\beta_i \in \{0, 1\}` and :math:`\epsilon_i = 2\beta_i - 1`, :math:`S = 2\sum_i \beta_i d_i - \sum_i d_i`.
    Items are taken 8 at a time: a table of the 256 possible partial sums of each group of 8 differences turns
    each byte of random bits into one lookup, so a draw costs :math:`\lceil n/8 \rceil` lookups and adds instead of
    a product with a dense :math:`\pm 1` matrix (8 times fewer operations and no float sign matrix).
    """
    n_bytes = -(-d.size // 8)
    padded = np.zeros(n_bytes * 8)
    padded[: d.size] = d
    table = padded.reshape(n_bytes, 8) @ _BYTE_BITS.T  # table[k, v] = sum of d over the set bits of byte v
    n_words = -(-n_bytes // 8)
    total = np.empty(n_resamples)
    block = max(1, _BLOCK_BYTES // (8 * n_words))  # draws per block: bounds memory at ~2 * _BLOCK_BYTES
    for start in range(0, n_resamples, block):
        m = min(block, n_resamples - start)
        words = rng.integers(0, _UINT64_MAX, size=(n_words, m), dtype=np.uint64, endpoint=True)
        # words[w, b] holds bytes 8w..8w+7 of draw b; byte_rows[k] is byte k of every draw (contiguous gathers).
        byte_rows = words.view(np.uint8).reshape(n_words, m, 8).transpose(0, 2, 1).reshape(-1, m)
        acc = np.zeros(m)
        for k in range(n_bytes):
            acc += table[k][byte_rows[k]]
        total[start : start + m] = acc
    sums: npt.NDArray[np.float64] = 2.0 * total - d.sum()
    return sums


def paired_permutation_test(
    d: npt.ArrayLike, *, n_resamples: int = 10_000, rng: np.random.Generator
) -> PermutationResult:
    r"""Two-sided paired sign-flip permutation test of :math:`\mathbb E[d] = 0` with the paired :math:`t` statistic.

    .. math::

        t(d) = \frac{\bar d}{\mathrm{sd}(d)/\sqrt n},\qquad
        t^{(b)} = t(\epsilon^{(b)} \odot d),\ \epsilon^{(b)}_i \overset{iid}{\sim} \mathrm{Unif}\{-1, +1\},\qquad
        p = \frac{1 + \#\{b : |t^{(b)}| \ge |t_{\mathrm{obs}}|\}}{B + 1},

    with the sample standard deviation (:math:`n - 1` denominator), as spec §5.5(a) prescribes. The smallest
    attainable p-value is :math:`1/(B+1)`.

    Parameters
    ----------
    d : array-like of shape (n,)
        Finite paired differences, e.g. per-item NLL(top-k) - NLL(all) on one evaluation split; ``n >= 2``.
    n_resamples : int, default 10000
        Number :math:`B` of random sign vectors.
    rng : numpy.random.Generator
        Source of the signs (derive it from the split seed, spec §7 pitfall 11).

    Returns
    -------
    PermutationResult
        ``(statistic, pvalue)``: the observed :math:`t` (:math:`\pm\infty` when all :math:`d_i` are equal and
        non-zero, 0 when all are 0) and the p-value.

    Raises
    ------
    InputError
        If ``d`` is not 1-D, has fewer than 2 values or holds NaN or infinity.
    ConfigError
        If ``n_resamples`` is not a positive integer or ``rng`` is not a ``numpy.random.Generator``.

    Notes
    -----
    :math:`|t|` is a strictly increasing function of :math:`|S|`, :math:`S = \sum_i \epsilon_i d_i` (see
    ``_t_from_sum``), so draws are compared on :math:`|S|`; a draw whose :math:`|S|` is within the summation's
    rounding bound of :math:`|S_{\mathrm{obs}}|` counts as a tie (as in :func:`scipy.stats.permutation_test`), so
    exactly tied statistics (the identity and the all-flipped draw, integer-valued :math:`d`) are counted.
    Cost: :math:`O(B\,n/8)` table lookups, :math:`B\lceil n/64\rceil` random words, memory bounded by blocks of
    16 MiB of random bytes; 10,000 draws of 210 items take under 1 ms, of 50,000 items about 0.2-0.3 s, about 7
    times faster than dense :math:`\pm 1` float blocks times :math:`d` (``benchmarks/permutation.py``).

    :func:`scipy.stats.permutation_test` (``permutation_type="samples"``) is the test oracle but is not used
    here: its two-sided p-value is :math:`2\min(p_\le, p_\ge)` rather than the :math:`|t|` rule of the spec, and
    it evaluates the statistic on a dense sign matrix, about 100 times slower for 100 splits of 10,000 draws.

    References
    ----------
    .. [1] Y. Li. Calibrate, Don't Curate. arXiv:2605.09702, 2026, §4.3 and Table 2.
    .. [2] B. Phipson, G. K. Smyth. Permutation P-values Should Never Be Zero. SAGMB 9(1), 2010,
       doi:10.2202/1544-6115.1585.

    Examples
    --------
    >>> d = np.array([0.12, 0.05, 0.20, -0.01, 0.08, 0.15, 0.03, 0.11])
    >>> res = paired_permutation_test(d, rng=np.random.default_rng(0))
    >>> round(res.statistic, 3), bool(res.pvalue < 0.02)
    (3.8, True)
    """
    where = "paired_permutation_test"
    arr = _check_differences(d, where)
    n_resamples = int(
        check_param(n_resamples, where=where, name="n_resamples", target_type=numbers.Integral, min_val=1)
    )
    rng = check_rng(rng, where=where)
    return _test_one(arr, n_resamples, rng)


def _test_one(d: npt.NDArray[np.float64], n_resamples: int, rng: np.random.Generator) -> PermutationResult:
    n = d.size
    s_obs = d.sum()
    if np.ptp(d) == 0.0:  # sd(d) = 0 exactly; the sum formula would leave a rounding residue
        t_obs = float(np.sign(d[0]) * np.inf) if d[0] != 0.0 else 0.0
    else:
        t_obs = float(_t_from_sum(s_obs, float(d @ d), n))
    null_sums = _flip_sums(d, n_resamples, rng)
    # Rounding bound of the table sums: (8 + n/8) additions, each off by at most eps * sum |d_i|.
    tol = (8 + n // 8 + 1) * np.finfo(np.float64).eps * float(np.abs(d).sum())
    n_extreme = int(np.count_nonzero(np.abs(null_sums) >= abs(s_obs) - tol))
    return PermutationResult(t_obs, (1.0 + n_extreme) / (n_resamples + 1.0))


def paired_permutation_test_many(
    d: npt.NDArray[np.float64] | Sequence[npt.ArrayLike], *, n_resamples: int = 10_000, rng: np.random.Generator
) -> PermutationSummary:
    r""":func:`paired_permutation_test` on every split, with the median :math:`t` and median p over splits.

    Spec §5.5(a) reports the median :math:`t` and the median p-value across the 100 splits. The median of
    p-values is a summary, not a valid combined p-value (the splits share items, spec §7 pitfall 12).

    Parameters
    ----------
    d : array-like of shape (n_splits, n) or sequence of 1-D arrays
        Paired differences per split; a sequence may hold splits of different sizes.
    n_resamples : int, default 10000
        Sign vectors per split.
    rng : numpy.random.Generator
        Source of the signs; splits draw from it in order, so the result equals calling
        :func:`paired_permutation_test` on each split in turn with the same generator.

    Returns
    -------
    PermutationSummary
        ``statistic`` and ``pvalue`` arrays of shape (n_splits,), ``median_statistic`` and ``median_pvalue``.

    Raises
    ------
    InputError
        If there are no splits or a split fails the checks of :func:`paired_permutation_test` (the message names
        the split).
    ConfigError
        As :func:`paired_permutation_test`.

    Notes
    -----
    Each split gets its own sign draws (no sharing between splits). 100 splits of 210 items with 10,000 draws
    take about 0.1 s on one core.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> d = rng.normal(0.05, 0.1, size=(5, 200))
    >>> res = paired_permutation_test_many(d, n_resamples=2000, rng=np.random.default_rng(2))
    >>> res.statistic.shape, bool(res.median_pvalue < 0.01)
    ((5,), True)
    """
    where = "paired_permutation_test_many"
    if isinstance(d, np.ndarray) and d.ndim != 2:
        hint = "; for one split use paired_permutation_test" if d.ndim == 1 else ""
        raise InputError(f"{where}: d: expected a 2-D array (n_splits, n) or a list of 1-D arrays, got {d.shape}{hint}")
    splits = list(d)
    if not splits:
        raise InputError(f"{where}: d: no splits (0 rows)")
    n_resamples = int(
        check_param(n_resamples, where=where, name="n_resamples", target_type=numbers.Integral, min_val=1)
    )
    rng = check_rng(rng, where=where)
    checked = []
    for s, split in enumerate(splits):
        try:
            checked.append(_check_differences(split, where))
        except InputError as err:
            raise InputError(f"{where}: split {s}: {err}") from err
    results = [_test_one(arr, n_resamples, rng) for arr in checked]
    t = np.array([r.statistic for r in results])
    p = np.array([r.pvalue for r in results])
    return PermutationSummary(t, p, float(np.median(t)), float(np.median(p)))
