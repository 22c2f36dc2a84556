r"""Synthetic judge panels with a known true difference between two pipelines, for interval coverage checks.

Each simulated dataset holds ``n_items`` items with a label :math:`Y \sim \mathrm{Bernoulli}(1/2)` and the votes
of ``len(accuracies)`` judges, judge :math:`j` right with probability :math:`a_j`, independently. Every split
(the keyed-hash halves the studies use) fits both pipelines on its calibration half and scores the evaluation half:

* ``all``: one-coin log-odds :math:`\sum_j w_j s_j` over every judge, :math:`w_j = \mathrm{logit}\,\hat a_j`
  with :math:`\hat a_j` the judge's share of right votes on the calibration half (clipped to [0.05, 0.95]) and
  :math:`s_j = \pm 1` its vote;
* ``top``: the same on the ``top`` judges with the highest :math:`\hat a_j` (ties to the lower index).

The per-split estimate is the mean NLL difference top minus all on the evaluation half. Its target is the expected
difference of the two pipelines trained on a calibration half of :math:`n_1` items,
:math:`\mu(n_1) = \mathbb E_{\hat a}\big[\mathbb E_{Y, V}[\ell_{top} - \ell_{all}]\big]`. Because the votes are
independent given :math:`Y`, :math:`n_1 \hat a_j \sim \mathrm{Binomial}(n_1, a_j)` exactly, and the inner
expectation is a finite sum over the :math:`2^J` vote patterns: :func:`true_difference` computes :math:`\mu(n_1)`
without drawing a single item (Monte Carlo over :math:`\hat a` only).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from judgecal_dist.splits import calibration_mask, group_keys
from judgecal_dist.stats.intervals import corrected_resampled_t, mean_interval
from judgecal_dist.stats.ranges import metric_range

ACCURACIES = np.array([0.56, 0.58, 0.6, 0.62, 0.64, 0.66, 0.7, 0.74, 0.8])
EPS = 1e-6


def _weights(acc_hat: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """One-coin weights of every judge and of the ``top`` best on each row of estimated accuracies (R, J)."""
    clipped = np.clip(acc_hat, 0.05, 0.95)
    w = np.log(clipped / (1.0 - clipped))
    rank = np.argsort(-acc_hat, axis=1, kind="stable")[:, :top]
    keep = np.zeros_like(acc_hat, dtype=bool)
    np.put_along_axis(keep, rank, True, axis=1)
    return w, np.where(keep, w, 0.0)


def _nll(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """NLL of log-odds ``z`` for labels ``y``, -log p = log(1 + exp(-(2y - 1) z)), capped at -log(EPS).

    ``|z| <= 9 logit(0.95) < 27``, so the exponential cannot overflow.
    """
    loss: np.ndarray = np.minimum(np.log1p(np.exp(-(2.0 * y - 1.0) * z)), -np.log(EPS))
    return loss


def true_difference(
    n_train: int, *, top: int = 3, accuracies: np.ndarray = ACCURACIES, draws: int = 20_000, seed: int = 0
) -> float:
    r""":math:`\mu(n_1)`: exact over labels and vote patterns, Monte Carlo over the fitted accuracies."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _true_difference(n_train, top, accuracies, draws, seed)


def _true_difference(n_train: int, top: int, accuracies: np.ndarray, draws: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    n_judges = accuracies.size
    right = np.array(list(itertools.product([0, 1], repeat=n_judges)), dtype=np.float64)  # (2^J, J) right votes
    prob = np.prod(np.where(right == 1, accuracies, 1.0 - accuracies), axis=1)
    # With Y = 1 a right vote says A (s = +1); by symmetry Y = 0 gives the same loss with every sign flipped, so
    # the expectation is the Y = 1 sum alone.
    signs = 2.0 * right - 1.0
    total = 0.0
    for start in range(0, draws, 2000):
        acc_hat = rng.binomial(n_train, accuracies, size=(min(2000, draws - start), n_judges)) / n_train
        w_all, w_top = _weights(acc_hat, top)
        ones = np.ones(1, dtype=np.int64)
        d = _nll(ones, signs @ w_top.T) - _nll(ones, signs @ w_all.T)  # (2^J, draws)
        total += float((prob @ d).sum())
    return total / draws


def simulate_split_differences(
    n_datasets: int,
    replicates: int,
    *,
    n_items: int = 400,
    calib_fraction: float = 0.5,
    top: int = 3,
    accuracies: np.ndarray = ACCURACIES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-split rows as a study writes them: ``dataset``, ``seed``, ``n_cal``, ``n_eval``, ``delta_nll``.

    One BLAS thread: the products are small, and threaded OpenBLAS runs them ~20x slower on a busy machine.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _simulate(n_datasets, replicates, n_items, calib_fraction, top, accuracies, seed)


def _simulate(
    n_datasets: int,
    replicates: int,
    n_items: int,
    calib_fraction: float,
    top: int,
    accuracies: np.ndarray,
    seed: int,
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    seeds = np.arange(replicates)
    in_cal = calibration_mask(group_keys([f"g{i}" for i in range(n_items)]), seeds, calib_fraction)  # (R, n)
    n_cal = in_cal.sum(axis=1)
    cal_weight, eval_weight = in_cal / n_cal[:, None], ~in_cal / (n_items - n_cal)[:, None]  # float: BLAS matmuls
    frames = []
    for k in range(n_datasets):
        y = rng.integers(0, 2, n_items)
        right = rng.random((n_items, accuracies.size)) < accuracies
        votes = np.where(right, 2 * y[:, None] - 1, 1 - 2 * y[:, None]).astype(np.float64)  # +1: says A
        acc_hat = cal_weight @ right.astype(np.float64)
        w_all, w_top = _weights(acc_hat, top)
        d = _nll(y, w_top @ votes.T) - _nll(y, w_all @ votes.T)  # (R, n)
        delta = np.einsum("rn,rn->r", d, eval_weight)
        frames.append(
            pd.DataFrame({"dataset": k, "seed": seeds, "n_cal": n_cal, "n_eval": n_items - n_cal, "delta_nll": delta})
        )
    return pd.concat(frames, ignore_index=True)


#: A strong panel: accuracy and Brier score of its one-coin vote sit near their bounds (1 and 0).
STRONG = np.array([0.8, 0.82, 0.84, 0.86, 0.88, 0.9, 0.92])

#: The per-item metrics of the ``all`` pipeline (one-coin over every judge, no calibrator) that
#: :func:`simulate_split_metrics` and :func:`true_metrics` measure.
METRICS = ("nll", "accuracy", "brier")


def _item_metrics(y: np.ndarray, z: np.ndarray) -> dict[str, np.ndarray]:
    """Per-item NLL (capped at -log EPS), accuracy (half credit at z = 0) and Brier score of log-odds ``z``."""
    p = np.clip(1.0 / (1.0 + np.exp(-z)), EPS, 1.0 - EPS)
    right = np.where(z == 0, 0.5, ((z > 0) == (y == 1)).astype(np.float64))
    return {"nll": _nll(y, z), "accuracy": right, "brier": (p - y) ** 2}


def true_metrics(
    n_train: int, *, accuracies: np.ndarray = ACCURACIES, draws: int = 20_000, seed: int = 0
) -> dict[str, float]:
    r"""Expected evaluation metrics of the ``all`` pipeline fitted on :math:`n_1` items: exact over labels and vote
    patterns, Monte Carlo over the fitted accuracies (as :func:`true_difference`)."""
    with threadpool_limits(limits=1, user_api="blas"):
        rng = np.random.default_rng(seed)
        right = np.array(list(itertools.product([0, 1], repeat=accuracies.size)), dtype=np.float64)
        prob = np.prod(np.where(right == 1, accuracies, 1.0 - accuracies), axis=1)
        signs, ones = 2.0 * right - 1.0, np.ones(1, dtype=np.int64)  # Y = 1; Y = 0 is its mirror image
        totals = dict.fromkeys(METRICS, 0.0)
        for start in range(0, draws, 2000):
            acc_hat = rng.binomial(n_train, accuracies, size=(min(2000, draws - start), accuracies.size)) / n_train
            w_all, _ = _weights(acc_hat, 1)
            for name, values in _item_metrics(ones, signs @ w_all.T).items():
                totals[name] += float((prob @ values).sum())
        return {name: total / draws for name, total in totals.items()}


def simulate_split_metrics(
    n_datasets: int,
    replicates: int,
    *,
    n_items: int = 400,
    calib_fraction: float = 0.5,
    accuracies: np.ndarray = ACCURACIES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-split rows ``dataset, seed, n_cal, n_eval`` and the ``all`` pipeline's evaluation :data:`METRICS`."""
    with threadpool_limits(limits=1, user_api="blas"):
        rng = np.random.default_rng(seed)
        seeds = np.arange(replicates)
        in_cal = calibration_mask(group_keys([f"g{i}" for i in range(n_items)]), seeds, calib_fraction)
        n_cal = in_cal.sum(axis=1)
        cal_weight, eval_weight = in_cal / n_cal[:, None], ~in_cal / (n_items - n_cal)[:, None]
        frames = []
        for k in range(n_datasets):
            y = rng.integers(0, 2, n_items)
            right = rng.random((n_items, accuracies.size)) < accuracies
            votes = np.where(right, 2 * y[:, None] - 1, 1 - 2 * y[:, None]).astype(np.float64)
            w_all, _ = _weights(cal_weight @ right.astype(np.float64), 1)
            per_item = _item_metrics(y, w_all @ votes.T)  # (R, n) each
            row = {"dataset": k, "seed": seeds, "n_cal": n_cal, "n_eval": n_items - n_cal}
            frames.append(pd.DataFrame(row | {m: np.einsum("rn,rn->r", v, eval_weight) for m, v in per_item.items()}))
        return pd.concat(frames, ignore_index=True)


#: The interval methods compared on bounded metrics: name -> (values, test/train ratio, range) -> (low, high).
METHODS = {
    "service": lambda v, r, rng: mean_interval(v, rng, test_train_ratio=r)[1:3],
    "symmetric corrected t": lambda v, r, rng: corrected_resampled_t(v, test_train_ratio=r)[1:3],
    "mean +- 1.96 SD/sqrt(S)": lambda v, r, rng: mean_interval(v, None, test_train_ratio=0.0, critical="normal")[1:3],
}


def metric_rows(datasets: int, items: int, replicates: list[int], accuracies: np.ndarray = ACCURACIES) -> pd.DataFrame:
    """Coverage of the true value, mean width and share out of range per metric, R and method."""
    truth = true_metrics(items // 2, accuracies=accuracies)
    rows = []
    for r in replicates:
        parts = simulate_split_metrics(datasets, r, n_items=items, accuracies=accuracies, seed=10_000 + r)
        ratio = float((parts["n_eval"] / parts["n_cal"]).mean())
        for metric in METRICS:
            bounds = metric_range(metric)
            assert bounds is not None
            for method, interval in METHODS.items():
                ends = np.array([interval(g[metric].to_numpy(), ratio, bounds) for _, g in parts.groupby("dataset")])
                low, high = ends[:, 0], ends[:, 1]
                rows.append(
                    {
                        "metric": metric,
                        "splits": r,
                        "method": method,
                        "truth": truth[metric],
                        "coverage": float(((low <= truth[metric]) & (truth[metric] <= high)).mean()),
                        "width": float((high - low).mean()),
                        "out_of_range": float(((low < bounds.low) | (high > bounds.high)).mean()),
                    }
                )
    return pd.DataFrame(rows)
