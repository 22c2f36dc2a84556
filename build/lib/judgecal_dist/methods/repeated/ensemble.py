r"""Ensemble scoring over k repeated samples per response (spec 004 §3.1-3.3, §3.11, §3.13).

A *score tensor* ``S`` has shape ``(n_examples, n_responses, n_samples)``: ``S[e, i, j]`` is the score of
response ``i`` of example ``e`` on sample ``j`` in collection order, NaN for a null score. Each example has one
chosen (correct) response, ``chosen[e]`` (response 0 in RewardBench 2). For a prefix length ``k``

.. math::

    \bar s_{ei}(k) = \operatorname{mean}\{S_{eij} : j < k,\ S_{eij} \ne \mathrm{null}\},

an example is *evaluable* when every response has a defined :math:`\bar s_{ei}(k)`, *correct* when
:math:`\bar s_{e,c_e}(k) > \bar s_{ei}(k)` for every :math:`i \ne c_e` (strict: a tie at the top is wrong), and
*tied* when more than one response attains the maximum mean. Means are sums of the non-null values divided by
their count, so integer scores give exact rationals and comparisons need no tolerance (spec 004 §3.1).

References
----------
.. [1] An Empirical Investigation of Practical LLM-as-a-Judge Improvement Techniques on RewardBench 2
   (seed 004), §3-§5 and Tables 5, 8, 10, 11.
.. [2] X. Wang et al. Self-Consistency Improves Chain of Thought Reasoning in Language Models. ICLR 2023,
   arXiv:2203.11171.
"""

from __future__ import annotations

import numbers
import warnings
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import rankdata

from judgecal_dist.errors import InputError
from judgecal_dist.stats.checks import check_param

__all__ = [
    "Outcome",
    "check_scores",
    "prefix_means",
    "dispersion",
    "winner_outcome",
    "unique_winner",
    "ensemble_curve",
    "example_cost",
    "resample_counts",
    "bootstrap_accuracy",
    "agreement_curve",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class Outcome(NamedTuple):
    """Per-example result of the strict-winner rule (spec 004 §3.1 steps 3-5)."""

    evaluable: BoolArray
    correct: BoolArray
    tied: BoolArray


def check_scores(scores: npt.ArrayLike, *, where: str, name: str = "scores", min_responses: int = 2) -> FloatArray:
    """Return ``scores`` as a float64 tensor of shape (examples, responses, samples) after checking it.

    Raises
    ------
    InputError
        Not 3-D, fewer than ``min_responses`` responses, no sample, or an infinite value (null scores are NaN).

    Examples
    --------
    >>> check_scores([[[1, 2], [3, float("nan")]]], where="demo").shape
    (1, 2, 2)
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 3:
        raise InputError(f"{where}: {name}: expected shape (examples, responses, samples), got {arr.shape}")
    if arr.shape[1] < min_responses or arr.shape[2] < 1:
        raise InputError(f"{where}: {name}: need >= {min_responses} responses and >= 1 sample, got shape {arr.shape}")
    if np.isinf(arr).any():
        raise InputError(f"{where}: {name}: infinite scores ({int(np.isinf(arr).sum())} values)")
    return arr


def _check_k(k: int, n_samples: int, where: str) -> int:
    return int(check_param(k, where=where, name="k", target_type=numbers.Integral, min_val=1, max_val=n_samples))


def prefix_means(scores: npt.ArrayLike, k: int | npt.ArrayLike) -> FloatArray:
    """Mean of the non-null scores among the first ``k`` samples of every response; NaN when there is none.

    Parameters
    ----------
    scores : array-like of shape (n_examples, n_responses, n_samples)
    k : int or array-like of int of shape (n_examples, n_responses)
        Prefix length, the same for every response or one per response (variance-informed ensembling).

    Returns
    -------
    ndarray of shape (n_examples, n_responses)

    Examples
    --------
    >>> s = np.array([[[7, np.nan, 5], [6, 6, 6]]])
    >>> prefix_means(s, 1).tolist(), prefix_means(s, 3).tolist()
    ([[7.0, 6.0]], [[6.0, 6.0]])
    >>> prefix_means(s, np.array([[2, 1]])).tolist()
    [[7.0, 6.0]]
    """
    arr = check_scores(scores, where="prefix_means")
    positions = np.arange(arr.shape[2])
    if np.ndim(k) == 0:
        inside = np.broadcast_to(positions < _check_k(int(np.asarray(k)), arr.shape[2], "prefix_means"), arr.shape)
    else:
        lengths = np.asarray(k)
        if lengths.shape != arr.shape[:2]:
            raise InputError(f"prefix_means: k: expected shape {arr.shape[:2]}, got {lengths.shape}")
        inside = positions[None, None, :] < lengths[:, :, None]
    present = inside & ~np.isnan(arr)
    count = present.sum(axis=2)
    total = np.where(present, arr, 0.0).sum(axis=2)
    means = np.full(count.shape, np.nan)
    np.divide(total, count, out=means, where=count > 0)
    return means


def dispersion(scores: npt.ArrayLike) -> FloatArray:
    r"""Population standard deviation (ddof = 0) of every response's non-null samples; 0 with fewer than two.

    This is the escalation signal :math:`\sigma_i` of spec 004 §3.6 (the paper says "variance", every threshold
    is on the standard-deviation scale).

    Examples
    --------
    >>> dispersion([[[7, 7, 7, 6], [5, np.nan, np.nan, np.nan]]]).round(4).tolist()
    [[0.433, 0.0]]
    """
    arr = check_scores(scores, where="dispersion", min_responses=1)
    present = ~np.isnan(arr)
    count = present.sum(axis=2)
    mean = np.divide(np.where(present, arr, 0.0).sum(axis=2), count, out=np.zeros(count.shape), where=count > 0)
    dev = np.where(present, arr - mean[:, :, None], 0.0)
    var = np.divide((dev**2).sum(axis=2), count, out=np.zeros(count.shape), where=count > 0)
    return np.where(count >= 2, np.sqrt(var), 0.0)


def _chosen(chosen: npt.ArrayLike | None, n_examples: int, n_responses: int, where: str) -> npt.NDArray[np.intp]:
    if chosen is None:
        return np.zeros(n_examples, dtype=np.intp)
    arr = np.asarray(chosen)
    if arr.shape != (n_examples,) or not np.issubdtype(arr.dtype, np.integer):
        raise InputError(
            f"{where}: chosen: expected {n_examples} integer response indices, got {arr.dtype} {arr.shape}"
        )
    outside = (arr < 0) | (arr >= n_responses)
    if outside.any():
        raise InputError(f"{where}: chosen: indices outside [0, {n_responses}) ({int(outside.sum())} examples)")
    return arr.astype(np.intp)


def winner_outcome(means: npt.ArrayLike, chosen: npt.ArrayLike | None = None) -> Outcome:
    """Strict-winner outcome of every example from its response means (spec 004 §3.1 steps 3-5).

    Parameters
    ----------
    means : array-like of shape (n_examples, n_responses)
        Response means, NaN where undefined.
    chosen : array-like of int of shape (n_examples,), optional
        Index of the correct response (default 0).

    Returns
    -------
    Outcome
        ``evaluable`` (every mean defined), ``correct`` (evaluable and the chosen mean strictly above all others),
        ``tied`` (evaluable and more than one response at the maximum).

    Examples
    --------
    >>> out = winner_outcome([[7, 6, 6], [7, 7, 1], [np.nan, 1, 2]])
    >>> out.evaluable.tolist(), out.correct.tolist(), out.tied.tolist()
    ([True, True, False], [True, False, False], [False, True, False])
    """
    m = np.asarray(means, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] < 2:
        raise InputError(f"winner_outcome: means: expected shape (examples, >= 2 responses), got {m.shape}")
    c = _chosen(chosen, m.shape[0], m.shape[1], "winner_outcome")
    evaluable = ~np.isnan(m).any(axis=1)
    filled = np.where(np.isnan(m), -np.inf, m)
    top = filled.max(axis=1)
    tied = evaluable & ((filled == top[:, None]).sum(axis=1) > 1)
    rows = np.arange(m.shape[0])
    own = filled[rows, c]
    others = filled.copy()
    others[rows, c] = -np.inf
    correct = evaluable & (own > others.max(axis=1))
    return Outcome(np.asarray(evaluable, bool), np.asarray(correct, bool), np.asarray(tied, bool))


def unique_winner(means: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Index of the unique maximum of every row, -1 when the maximum is shared (spec 004 §3.11).

    Examples
    --------
    >>> unique_winner([[1, 3, 2], [2, 2, 1]]).tolist()
    [1, -1]
    """
    m = np.asarray(means, dtype=np.float64)
    top = m.max(axis=1, keepdims=True)
    unique = (m == top).sum(axis=1) == 1
    return np.where(unique, m.argmax(axis=1), -1).astype(np.int64)


def ensemble_curve(
    scores: npt.ArrayLike, ks: npt.ArrayLike | None = None, chosen: npt.ArrayLike | None = None
) -> pd.DataFrame:
    """Accuracy of the k-sample ensemble for every prefix length ``k`` (spec 004 §3.2).

    Returns
    -------
    DataFrame
        ``k, rows, n, correct, accuracy, n_tied``: rows in the collection, evaluable examples, correct ones,
        correct / n, and evaluable examples with a tie at the top.

    Examples
    --------
    >>> s = np.array([[[7, 5], [6, 6]], [[6, 6], [6, 7]]], dtype=float)
    >>> ensemble_curve(s).to_dict("list")
    {'k': [1, 2], 'rows': [2, 2], 'n': [2, 2], 'correct': [1, 0], 'accuracy': [0.5, 0.0], 'n_tied': [1, 1]}
    """
    arr = check_scores(scores, where="ensemble_curve")
    ks = np.arange(1, arr.shape[2] + 1) if ks is None else np.asarray(ks)
    rows = []
    for k in ks.tolist():
        out = winner_outcome(prefix_means(arr, k), chosen)
        n, correct = int(out.evaluable.sum()), int(out.correct.sum())
        rows.append(
            {
                "k": k,
                "rows": arr.shape[0],
                "n": n,
                "correct": correct,
                "accuracy": correct / n if n else float("nan"),
                "n_tied": int(out.tied.sum()),
            }
        )
    return pd.DataFrame(rows)


def example_cost(
    input_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    *,
    k: float,
    n_collected: int,
    price_in: float,
    price_out: float,
) -> FloatArray:
    r"""Dollar cost of scoring each example with ``k`` samples per response (spec 004 §2.4).

    .. math::

        \mathrm{cost}(e, k) = \big(\mathrm{in}(e)\,p_{\mathrm{in}} + \mathrm{out}(e)\,(k/K)\,p_{\mathrm{out}}\big)
                              / 10^6

    Input tokens are paid once per call (the ``n`` parameter of the API), output tokens scale with ``k``; the
    token counts are the example's totals over its calls with ``K = n_collected`` samples each. ``k`` may be a
    mean number of samples (variance-informed ensembling).

    Examples
    --------
    >>> example_cost([2300], [5000], k=1, n_collected=8, price_in=2.5, price_out=15.0).round(6).tolist()
    [0.015125]
    """
    tin = np.asarray(input_tokens, dtype=np.float64)
    tout = np.asarray(output_tokens, dtype=np.float64)
    return (tin * price_in + tout * (k / n_collected) * price_out) / 1e6


def resample_counts(n_rows: int, n_resamples: int, random_state: int) -> npt.NDArray[np.float64]:
    """``C[b, e]`` = times row ``e`` is drawn in resample ``b``, from the legacy ``RandomState`` stream.

    The spec (004 §3.3) fixes the index stream: ``RandomState(seed).randint(0, N, size=(B, N))``, equal to B
    successive ``randint(0, N, size=N)`` draws. scipy.stats.bootstrap cannot draw from that stream, hence this.

    Examples
    --------
    >>> resample_counts(3, 2, 0).sum(axis=1).tolist()
    [3.0, 3.0]
    """
    idx = np.random.RandomState(random_state).randint(0, n_rows, size=(n_resamples, n_rows))
    flat = (idx + (np.arange(n_resamples) * n_rows)[:, None]).ravel()
    return np.bincount(flat, minlength=n_resamples * n_rows).reshape(n_resamples, n_rows).astype(np.float64)


def bootstrap_accuracy(
    outcome: Outcome,
    strata: npt.ArrayLike | None = None,
    *,
    n_resamples: int = 2000,
    random_state: int = 42,
    confidence: float = 0.95,
    counts: npt.NDArray[np.float64] | None = None,
) -> pd.DataFrame:
    r"""Percentile bootstrap CIs of the accuracy, overall and per stratum, from one resample stream (spec 004 §3.3).

    All rows are resampled, non-evaluable ones included (they are drawn and skipped); per-stratum accuracies are
    computed on the same resamples. The interval is the [(1-c)/2, (1+c)/2] percentiles (numpy linear) of the
    resampled accuracies; ``half_width`` = (high - low) / 2.

    Parameters
    ----------
    outcome : Outcome
        From :func:`winner_outcome` on the condition's rows.
    strata : array-like of shape (n_rows,), optional
        Stratum label per row (e.g. the subset).
    n_resamples : int, default 2000
    random_state : int, default 42
        Seed of a fresh ``numpy.random.RandomState`` (one per condition, as in the paper).
    confidence : float, default 0.95
    counts : ndarray of shape (n_resamples, n_rows), optional
        Precomputed draw counts for the same ``(n_rows, n_resamples, random_state)`` (a cache across conditions).

    Returns
    -------
    DataFrame
        ``stratum`` ("all" first, then sorted strata), ``n``, ``correct``, ``accuracy``, ``ci_low``, ``ci_high``,
        ``half_width``.

    Notes
    -----
    Cost: one ``B x N`` draw-count matrix (16 MB for 2000 x 1730) and one matrix product with the per-row
    indicators of every stratum.

    Examples
    --------
    >>> out = Outcome(np.ones(4, bool), np.array([True, True, False, True]), np.zeros(4, bool))
    >>> ci = bootstrap_accuracy(out, n_resamples=200)
    >>> ci[["stratum", "n", "accuracy"]].to_dict("records")
    [{'stratum': 'all', 'n': 4, 'accuracy': 0.75}]
    """
    evaluable = np.asarray(outcome.evaluable, dtype=bool)
    correct = np.asarray(outcome.correct, dtype=bool) & evaluable
    n_rows = len(evaluable)
    labels = np.full(n_rows, "all", dtype=object) if strata is None else np.asarray(strata, dtype=object)
    if len(labels) != n_rows:
        raise InputError(f"bootstrap_accuracy: strata: {len(labels)} labels for {n_rows} rows")
    names = ["all"] + ([] if strata is None else sorted(set(labels.tolist())))
    masks = [np.ones(n_rows, bool)] + [labels == s for s in names[1:]]
    ind = np.column_stack([m & correct for m in masks] + [m & evaluable for m in masks]).astype(np.float64)
    if counts is None:
        counts = resample_counts(n_rows, n_resamples, random_state)
    sums = counts @ ind
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = sums[:, : len(names)] / sums[:, len(names) :]
    tail = 100 * (1 - confidence) / 2
    with warnings.catch_warnings():
        # A stratum without evaluable rows has no accuracy in any resample: its interval is NaN, by design.
        warnings.filterwarnings("ignore", message="All-NaN slice", category=RuntimeWarning)
        low, high = np.nanpercentile(acc, [tail, 100 - tail], axis=0)
    rows = []
    for j, name in enumerate(names):
        n, c = int((masks[j] & evaluable).sum()), int((masks[j] & correct).sum())
        rows.append(
            {
                "stratum": name,
                "n": n,
                "correct": c,
                "accuracy": c / n if n else float("nan"),
                "ci_low": float(low[j]),
                "ci_high": float(high[j]),
                "half_width": float(high[j] - low[j]) / 2,
            }
        )
    return pd.DataFrame(rows)


def _row_spearman(a: FloatArray, b: FloatArray) -> FloatArray:
    """Spearman rho of every row pair (average ranks for ties); NaN when either row is constant."""
    ra, rb = rankdata(a, axis=1), rankdata(b, axis=1)
    da, db = ra - ra.mean(axis=1, keepdims=True), rb - rb.mean(axis=1, keepdims=True)
    den = np.sqrt((da**2).sum(axis=1) * (db**2).sum(axis=1))
    rho = np.full(len(a), np.nan)
    np.divide((da * db).sum(axis=1), den, out=rho, where=den > 0)
    return rho


def agreement_curve(
    cheap: npt.ArrayLike, reference_means: npt.ArrayLike, ks: npt.ArrayLike | None = None
) -> pd.DataFrame:
    r"""Cheap-vs-reference winner agreement and mean Spearman rho for every prefix length (spec 004 §3.11).

    Rows whose reference means are not all defined are skipped; for each ``k`` rows whose cheap prefix means are
    not all defined are skipped too. Agreement = mean of [cheap winner = reference winner and cheap winner is
    unique]; rho = mean over rows of Spearman's rho between the cheap and reference means, skipping rows where
    it is undefined (a constant vector).

    Parameters
    ----------
    cheap : array-like of shape (n_rows, n_responses, n_samples)
        Scores of the cheap tier.
    reference_means : array-like of shape (n_rows, n_responses)
        Reference (full-model, all samples) means aligned to the same rows.
    ks : array-like of int, optional
        Prefix lengths (default 1..n_samples).

    Returns
    -------
    DataFrame
        ``k, rows, agreement, rho_rows, spearman``.

    Examples
    --------
    >>> cheap = np.array([[[3, 1], [2, 2], [1, 3]]], dtype=float)
    >>> agreement_curve(cheap, [[3.0, 2.0, 1.0]]).round(3).to_dict("list")
    {'k': [1, 2], 'rows': [1, 1], 'agreement': [1.0, 0.0], 'rho_rows': [1, 0], 'spearman': [1.0, nan]}
    """
    arr = check_scores(cheap, where="agreement_curve", name="cheap")
    ref = np.asarray(reference_means, dtype=np.float64)
    if ref.shape != arr.shape[:2]:
        raise InputError(f"agreement_curve: reference_means: expected shape {arr.shape[:2]}, got {ref.shape}")
    keep = ~np.isnan(ref).any(axis=1)
    arr, ref = arr[keep], ref[keep]
    ref_winner = unique_winner(ref)
    ks = np.arange(1, arr.shape[2] + 1) if ks is None else np.asarray(ks)
    rows = []
    for k in ks.tolist():
        means = prefix_means(arr, k)
        ok = ~np.isnan(means).any(axis=1)
        winner = unique_winner(means[ok])
        agree = (winner == ref_winner[ok]) & (winner != -1)
        rho = _row_spearman(means[ok], ref[ok])
        defined = ~np.isnan(rho)
        rows.append(
            {
                "k": k,
                "rows": int(ok.sum()),
                "agreement": float(agree.mean()) if ok.any() else float("nan"),
                "rho_rows": int(defined.sum()),
                "spearman": float(rho[defined].mean()) if defined.any() else float("nan"),
            }
        )
    return pd.DataFrame(rows)
