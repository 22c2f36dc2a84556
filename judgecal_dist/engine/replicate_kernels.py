r"""Batch kernels of the one-pass replicate evaluation: per-replicate sums from a batch of packed items.

A batch is ``(votes, labels, group_keys)`` of some items (int8 votes ``n x J`` coded 1 = A, 0 = B, -1 =
missing; labels 1 = A, 0 = B; ``xxhash64(group_id)``). Every kernel returns a :class:`Partial` of sums, minima
and maxima whose combination over all batches (in any order, on any engine) is the statistic of the whole
table, so the driver only ever receives ``O(R x panels x calibrators)`` numbers per batch, never item rows.

The aggregator log-odds of pipeline column ``k`` (a replicate ``r`` and a panel) are
:math:`t_{ik} = \mathrm{logit}\,\pi_k + \sum_j z_{ij} W_{jk}` with :math:`W_{jk}` the one-coin weight of judge
``j`` (0 outside the panel), computed for all columns by one matrix product; an item counts on the calibration
side of column ``k`` when :func:`judgecal_dist.splits.calibration_mask` of its group key is true for ``r``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.special import expit, log_expit, logit, xlogy

from judgecal_dist.methods.calibrator_base import logistic_loss
from judgecal_dist.methods.votes import signed_votes
from judgecal_dist.splits import calibration_mask
from judgecal_dist.stats.metrics import _bin_index, _correctness

__all__ = ["Partial", "Columns", "PassSpec", "counts_kernel", "ranges_kernel", "objective_kernel", "metrics_kernel"]

#: Cells of ``rows x columns`` float64 work arrays per sub-batch (about 16 MB each), bounding worker memory.
_CELLS_PER_CHUNK = 2_000_000
PLATT_STATS = 6  # loss, g_slope, g_intercept, H_ss, H_si, H_ii
BETA_STATS = 4  # loss, g_a, g_b, g_c
METRIC_STATS = 4  # n, nll sum, brier sum, correct sum (then n_bins ECE gap sums)


@dataclass
class Partial:
    """Sums, minima and maxima of one batch; :meth:`combine` is associative and commutative."""

    sum: npt.NDArray[np.float64]
    min: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))
    max: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))

    def combine(self, other: Partial) -> Partial:
        return Partial(self.sum + other.sum, np.minimum(self.min, other.min), np.maximum(self.max, other.max))

    def to_bytes(self) -> bytes:
        sizes = np.array([self.sum.size, self.min.size, self.max.size], dtype=np.float64)
        return np.concatenate([sizes, self.sum, self.min, self.max]).astype(np.float64).tobytes()

    @classmethod
    def from_bytes(cls, blob: bytes) -> Partial:
        values = np.frombuffer(blob, dtype=np.float64)
        a, b, _ = (int(v) for v in values[:3])
        return cls(values[3 : 3 + a].copy(), values[3 + a : 3 + a + b].copy(), values[3 + a + b :].copy())


@dataclass(frozen=True)
class PassSpec:
    """What every batch of every pass needs: the replicate seeds, the split fraction and the score settings."""

    seeds: tuple[int, ...]
    fraction: float
    score_input: str = "logit"
    eps: float = 1e-6
    n_bins: int = 10


@dataclass(frozen=True)
class Columns:
    """Aggregator columns: one-coin weights ``W`` (J x K), prior log-odds ``b`` (K) and replicate index (K)."""

    weights: npt.NDArray[np.float64]
    prior_logit: npt.NDArray[np.float64]
    replicate: npt.NDArray[np.intp]


def _chunks(n_rows: int, n_cols: int) -> list[slice]:
    step = max(1, _CELLS_PER_CHUNK // max(n_cols, 1))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def _calibrator_input(t: npt.NDArray[np.float64], spec: PassSpec) -> npt.NDArray[np.float64]:
    """The score a calibrator sees: the log-odds themselves, or the clipped probability ``sigma(t)``."""
    if spec.score_input == "logit":
        return t
    return np.clip(expit(t), spec.eps, 1.0 - spec.eps)


def _platt_u(x: npt.NDArray[np.float64], spec: PassSpec) -> npt.NDArray[np.float64]:
    return x if spec.score_input == "logit" else np.asarray(logit(x))


def _beta_logs(x: npt.NDArray[np.float64], spec: PassSpec) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    # (ln s, ln(1 - s)) exactly as BetaCalibration computes them for either score input.
    if spec.score_input == "logit":
        return log_expit(x), log_expit(-x)
    return np.log(x), np.log1p(-x)


def counts_kernel(votes: np.ndarray, labels: np.ndarray, keys: np.ndarray, spec: PassSpec) -> Partial:
    """Calibration-side ``n_cal[r]``, ``n_pos[r]``, ``n_votes[r, j]``, ``n_correct[r, j]`` (flattened, in that order).

    The counts of :func:`judgecal_dist.methods.votes.count_judge_votes` on every replicate's calibration part at
    once: a ``R x n`` membership matrix times ``n x J`` indicators (exact in float64 below 2**53).
    """
    mask = calibration_mask(keys, spec.seeds, spec.fraction).astype(np.float64)
    y = labels.astype(np.float64)
    voted = (votes >= 0).astype(np.float64)
    correct = (votes == labels[:, None]).astype(np.float64)
    sums = [mask.sum(axis=1), mask @ y, (mask @ voted).ravel(), (mask @ correct).ravel()]
    return Partial(np.concatenate(sums))


def _by_replicate(
    votes: np.ndarray, keys: np.ndarray, spec: PassSpec, cols: Columns, req_cols: np.ndarray, *, calibration: bool
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per replicate with requests: ``(rows, request indices, log-odds of those rows x requests)``.

    The log-odds of every requested column come from one matrix product per sub-batch of rows (BLAS); each
    replicate then takes the rows on the requested side of its split only, so the calibrators' work is not spent
    on the other half. Only the requested replicates' split membership is hashed.
    """
    needed, inverse = np.unique(req_cols, return_inverse=True)
    rep_of_req = cols.replicate[req_cols]
    reps = np.unique(rep_of_req)
    mask = calibration_mask(keys, [spec.seeds[r] for r in reps], spec.fraction)
    for chunk in _chunks(len(keys), len(needed)):
        t_all = cols.prior_logit[needed] + signed_votes(votes[chunk]) @ cols.weights[:, needed]
        for i, r in enumerate(reps):
            which = np.flatnonzero(rep_of_req == r)
            side = mask[i, chunk] if calibration else ~mask[i, chunk]
            rows = np.flatnonzero(side)
            yield rows + chunk.start, which, t_all[np.ix_(rows, inverse[which])]


def ranges_kernel(votes: np.ndarray, labels: np.ndarray, keys: np.ndarray, spec: PassSpec, cols: Columns) -> Partial:
    """Per column and class (B, A): min and max of the calibrator input on the calibration side.

    Enough to decide every degenerate case of the in-memory calibrators (constant scores, a threshold that
    separates the classes). ``min``/``max`` are ``K x 2`` flattened (``+inf``/``-inf`` where a class is absent).
    """
    k = cols.weights.shape[1]
    lo, hi = np.full((k, 2), np.inf), np.full((k, 2), -np.inf)
    for rows, which, t in _by_replicate(votes, keys, spec, cols, np.arange(k), calibration=True):
        x = _calibrator_input(t, spec)
        for cls in (0, 1):
            sel = labels[rows] == cls
            if sel.any():
                lo[which, cls] = np.minimum(lo[which, cls], x[sel].min(axis=0))
                hi[which, cls] = np.maximum(hi[which, cls], x[sel].max(axis=0))
    return Partial(np.empty(0), lo.ravel(), hi.ravel())


def objective_kernel(
    votes: np.ndarray,
    labels: np.ndarray,
    keys: np.ndarray,
    spec: PassSpec,
    cols: Columns,
    platt: Sequence[tuple[int, float, float, float]],
    beta: Sequence[tuple[int, float, float, float, float]],
) -> Partial:
    r"""Weighted log-loss, gradient (and Platt's Hessian) of every requested calibrator on the calibration side.

    ``platt`` holds ``(column, weight, slope, intercept)`` and ``beta`` ``(column, weight, a, b, c)``, with
    ``weight`` = 1 / n_cal of the column's replicate (the calibrators minimise a mean). Per Platt request
    :data:`PLATT_STATS` sums: :math:`\sum w\ell`, :math:`\sum w(\sigma - y)(u, 1)` and
    :math:`\sum w\sigma(1-\sigma)(u,1)(u,1)^\top`; per beta request :data:`BETA_STATS`: :math:`\sum w\ell` and
    :math:`\sum w(\sigma - y)(\ln s, -\ln(1-s), 1)`. No penalty: the driver adds it once.
    """
    n_platt = len(platt)
    out_platt, out_beta = np.zeros((n_platt, PLATT_STATS)), np.zeros((len(beta), BETA_STATS))
    if not n_platt + len(beta):
        return Partial(np.empty(0))
    req_cols = np.array([r[0] for r in platt] + [r[0] for r in beta], dtype=np.intp)
    weight = np.array([r[1] for r in platt] + [r[1] for r in beta])
    theta = np.array([(r[2], r[3], 0.0) for r in platt] + [tuple(r[2:5]) for r in beta], dtype=np.float64)
    for rows, which, t in _by_replicate(votes, keys, spec, cols, req_cols, calibration=True):
        x = _calibrator_input(t, spec)
        y = labels[rows].astype(np.float64)[:, None]
        w = weight[which]
        is_platt = which < n_platt
        if is_platt.any():
            p_idx = which[is_platt]
            u = _platt_u(x[:, is_platt], spec)
            tt = theta[p_idx, 0] * u + theta[p_idx, 1]
            sig = expit(tt)
            resid = sig - y
            h = sig * expit(-tt)
            out_platt[p_idx] += w[is_platt, None] * np.stack(
                [logistic_loss(tt, y).sum(axis=0), (resid * u).sum(axis=0), resid.sum(axis=0),
                 (h * u * u).sum(axis=0), (h * u).sum(axis=0), h.sum(axis=0)], axis=1)  # fmt: skip
        if not is_platt.all():
            b_idx = which[~is_platt]
            log_s, log_1ms = _beta_logs(x[:, ~is_platt], spec)
            tt = theta[b_idx, 0] * log_s - theta[b_idx, 1] * log_1ms + theta[b_idx, 2]
            resid = expit(tt) - y
            out_beta[b_idx - n_platt] += w[~is_platt, None] * np.stack(
                [logistic_loss(tt, y).sum(axis=0), (resid * log_s).sum(axis=0), -(resid * log_1ms).sum(axis=0),
                 resid.sum(axis=0)], axis=1)  # fmt: skip
    return Partial(np.concatenate([out_platt.ravel(), out_beta.ravel()]))


def metrics_kernel(
    votes: np.ndarray,
    labels: np.ndarray,
    keys: np.ndarray,
    spec: PassSpec,
    cols: Columns,
    fitted: Sequence[tuple[int, str, float, float, float]],
) -> Partial:
    """Evaluation-side metric sums of every fitted pipeline ``(column, calibrator, p1, p2, p3)``.

    Calibrators: ``none`` (the aggregator's probability, clipped), ``platt`` (slope, intercept) and ``beta``
    (a, b, c). Per pipeline :data:`METRIC_STATS` sums (items, NLL, Brier, half-credit correctness) then the
    ``n_bins`` sums of correctness minus confidence per top-label bin, from which
    :func:`judgecal_dist.stats.metrics.ece` is :math:`\\sum_b |\\mathrm{gap}_b| / n`.
    """
    width = METRIC_STATS + spec.n_bins
    out = np.zeros((len(fitted), width))
    if not fitted:
        return Partial(out.ravel())
    req_cols = np.array([f[0] for f in fitted], dtype=np.intp)
    params = np.array([f[2:] for f in fitted], dtype=np.float64)
    kind = np.array([f[1] for f in fitted])
    for rows, which, t in _by_replicate(votes, keys, spec, cols, req_cols, calibration=False):
        x = _calibrator_input(t, spec)
        p = np.empty_like(t)
        none, platt, beta = (kind[which] == name for name in ("none", "platt", "beta"))
        pp = params[which]
        p[:, none] = np.clip(expit(t[:, none]), spec.eps, 1.0 - spec.eps)
        p[:, platt] = expit(pp[platt, 0] * _platt_u(x[:, platt], spec) + pp[platt, 1])
        log_s, log_1ms = _beta_logs(x[:, beta], spec)
        p[:, beta] = expit(pp[beta, 0] * log_s - pp[beta, 1] * log_1ms + pp[beta, 2])
        y = labels[rows].astype(np.int64)[:, None]
        q = np.clip(p, spec.eps, 1.0 - spec.eps)
        nll = -(xlogy(y, q) + xlogy(1 - y, 1.0 - q))
        correct = _correctness(np.broadcast_to(y, p.shape), p)
        conf = np.maximum(p, 1.0 - p)
        bins = _bin_index(conf, spec.n_bins)
        flat = (bins + spec.n_bins * np.arange(len(which))).ravel()  # one bincount over (bin, pipeline) cells
        gap = np.bincount(flat, weights=(correct - conf).ravel(), minlength=spec.n_bins * len(which))
        gap = gap.reshape(len(which), spec.n_bins)
        head = np.stack([np.full(len(which), float(len(rows))), nll.sum(axis=0), ((p - y) ** 2).sum(axis=0),
                         correct.sum(axis=0)], axis=1)  # fmt: skip
        out[which] += np.concatenate([head, gap], axis=1)
    return Partial(out.ravel())
