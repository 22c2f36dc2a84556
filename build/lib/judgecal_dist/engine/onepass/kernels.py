r"""Batch kernels of the one-pass replicate evaluation: per-replicate sums from a batch of packed items.

A batch is ``(votes, labels, group_keys)`` of some items (int8 votes ``n x J`` coded 1 = A, 0 = B, -1 =
missing; labels 1 = A, 0 = B; ``xxhash64(group_id)``). Every kernel returns a :class:`Partial` of sums, minima
and maxima whose combination over all batches (in any order, on any engine) is the statistic of the whole
table, so the driver only ever receives ``O(R x panels x calibrators)`` numbers per batch, never item rows.

The aggregator log-odds of pipeline column ``k`` (a replicate ``r`` and a panel) are
:math:`t_{ik} = \mathrm{logit}\,\pi_k + \sum_j z_{ij} W_{jk}` with :math:`W_{jk}` the one-coin weight of judge
``j`` (0 outside the panel), computed for all columns by one matrix product; an item counts on the calibration
side of column ``k`` when :func:`judgecal_dist.splits.calibration_mask` of its group key is true for ``r``.

The calibration-side inputs of every column do not change between the optimiser passes, so the process that
computes them for a batch keeps them (:func:`calibration_side`, an LRU cache bounded by
``JUDGECAL_ONEPASS_CACHE_MB``, keyed by the evaluation's token and a digest of the batch's bytes): every later
pass over that batch only evaluates the calibrators' losses. A miss (another process got the batch, or the
cache was full) recomputes the same numbers.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.special import expit, log_expit, logit

from judgecal_dist.methods.aggregation.votes import signed_votes
from judgecal_dist.splits import calibration_mask
from judgecal_dist.stats.metrics import bin_index, correctness

__all__ = [
    "Partial",
    "Columns",
    "PassSpec",
    "counts_kernel",
    "ranges_kernel",
    "objective_kernel",
    "metrics_kernel",
    "calibrated",
    "platt_sums",
    "beta_sums",
    "metric_sums",
    "calibration_side",
    "calibrator_input",
    "platt_input",
    "beta_logs",
    "row_chunks",
]

#: Cells of ``rows x columns`` float64 work arrays per sub-batch (about 16 MB each), bounding worker memory.
_CELLS_PER_CHUNK = 2_000_000
PLATT_STATS = 6  # loss, g_slope, g_intercept, H_ss, H_si, H_ii
BETA_STATS = 4  # loss, g_a, g_b, g_c
METRIC_STATS = 4  # n, nll sum, brier sum, correct sum (then n_bins ECE gap sums)
#: Per-process budget of the calibration-side cache (MB); 0 disables it.
CACHE_MB = float(os.environ.get("JUDGECAL_ONEPASS_CACHE_MB", "2048"))


@dataclass
class Partial:
    """Sums, minima and maxima of one batch; :meth:`combine` is associative and commutative."""

    sum: npt.NDArray[np.float64]
    min: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))
    max: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))

    def combine(self, other: Partial) -> Partial:
        return Partial(self.sum + other.sum, np.minimum(self.min, other.min), np.maximum(self.max, other.max))

    def to_bytes(self) -> bytes:
        # Pattern count tables are mostly zero: those sums travel as (index, value) pairs.
        nz = np.flatnonzero(self.sum)
        sparse = 2 * nz.size < self.sum.size
        body = np.concatenate([nz.astype(np.float64), self.sum[nz]]) if sparse else self.sum
        head = np.array([self.sum.size, self.min.size, self.max.size, float(sparse), nz.size], dtype=np.float64)
        return np.concatenate([head, body, self.min, self.max]).astype(np.float64).tobytes()

    @classmethod
    def from_bytes(cls, blob: bytes) -> Partial:
        values = np.frombuffer(blob, dtype=np.float64)
        n_sum, n_min, _, sparse, nnz = (int(v) for v in values[:5])
        pos = 5
        if sparse:
            total = np.zeros(n_sum)
            total[values[pos : pos + nnz].astype(np.int64)] = values[pos + nnz : pos + 2 * nnz]
            pos += 2 * nnz
        else:
            total = values[pos : pos + n_sum].copy()
            pos += n_sum
        return cls(total, values[pos : pos + n_min].copy(), values[pos + n_min :].copy())


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
    """Aggregator columns: one-coin weights ``W`` (J x K), prior log-odds ``b`` (K) and replicate index (K).

    ``token`` names the evaluation (its calibration-side inputs are cached under it); empty disables the cache.
    """

    weights: npt.NDArray[np.float64]
    prior_logit: npt.NDArray[np.float64]
    replicate: npt.NDArray[np.intp]
    token: str = ""

    @property
    def position(self) -> npt.NDArray[np.intp]:
        """Index of each column among its replicate's columns (columns are grouped by replicate)."""
        pos = np.zeros(len(self.replicate), dtype=np.intp)
        for r in np.unique(self.replicate):
            idx = np.flatnonzero(self.replicate == r)
            pos[idx] = np.arange(len(idx))
        return pos


def row_chunks(n_rows: int, n_cols: int) -> list[slice]:
    step = max(1, _CELLS_PER_CHUNK // max(n_cols, 1))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def calibrator_input(t: npt.NDArray[np.float64], spec: PassSpec) -> npt.NDArray[np.float64]:
    """The score a calibrator sees: the log-odds themselves, or the clipped probability ``sigma(t)``."""
    if spec.score_input == "logit":
        return t
    return np.clip(expit(t), spec.eps, 1.0 - spec.eps)


def platt_input(x: npt.NDArray[np.float64], spec: PassSpec) -> npt.NDArray[np.float64]:
    return x if spec.score_input == "logit" else np.asarray(logit(x))


def beta_logs(x: npt.NDArray[np.float64], spec: PassSpec) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    # (ln s, ln(1 - s)) exactly as BetaCalibration computes them for either score input.
    if spec.score_input == "logit":
        return log_expit(x), log_expit(-x)
    return np.log(x), np.log1p(-x)


def _loss_and_sigmoid(tt: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Log-loss :math:`\log(1 + e^{-(2y-1)t})`, :math:`\sigma(t)` and :math:`\sigma(-t)` from one ``exp`` and one ``log1p``.

    The same stable forms as :func:`~judgecal_dist.methods.calibration.base.logistic_loss` (``logaddexp``) and
    ``expit``, equal to them within an ulp, at about half the cost: these sums are the fit passes' whole work.
    """
    e = np.exp(-np.abs(tt))
    denominator = 1.0 + e
    positive = tt >= 0.0
    sig, sig_neg = np.where(positive, 1.0, e) / denominator, np.where(positive, e, 1.0) / denominator
    loss = np.log1p(e, out=e)
    loss += np.maximum((1.0 - 2.0 * y) * tt, 0.0)
    return loss, sig, sig_neg


def _column_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->j", a, b)


def platt_sums(u: np.ndarray, y: np.ndarray, theta: np.ndarray, count: np.ndarray | None = None) -> np.ndarray:
    r"""Per request (column of ``u``): :math:`\sum\ell`, :math:`\sum(\sigma-y)(u,1)`, :math:`\sum\sigma(1-\sigma)(u,1)(u,1)^\top`.

    ``u`` is ``rows x requests``, ``y`` ``rows x 1``, ``theta`` ``requests x 2`` (slope, intercept); ``count``
    (``rows x 1``) weights each row (a vote pattern standing for that many items).
    """
    tt = theta[:, 0] * u + theta[:, 1]
    loss, sig, sig_neg = _loss_and_sigmoid(tt, y)
    resid, h = sig - y, sig * sig_neg  # both factors exact in the tails, as PlattCalibrator's Hessian
    if count is not None:
        resid, h, loss = resid * count, h * count, loss * count
    hu = h * u
    return np.stack(
        [loss.sum(axis=0), _column_dot(resid, u), resid.sum(axis=0), _column_dot(hu, u), hu.sum(axis=0), h.sum(axis=0)],
        axis=1,
    )


def beta_sums(
    log_s: np.ndarray, log_1ms: np.ndarray, y: np.ndarray, theta: np.ndarray, count: np.ndarray | None = None
) -> np.ndarray:
    r"""Per request: :math:`\sum\ell` and :math:`\sum(\sigma-y)(\ln s, -\ln(1-s), 1)` at ``theta`` = (a, b, c)."""
    tt = theta[:, 0] * log_s - theta[:, 1] * log_1ms + theta[:, 2]
    loss, sig, _ = _loss_and_sigmoid(tt, y)
    resid = sig - y
    if count is not None:
        resid, loss = resid * count, loss * count
    return np.stack(
        [loss.sum(axis=0), _column_dot(resid, log_s), -_column_dot(resid, log_1ms), resid.sum(axis=0)], axis=1
    )


def calibrated(t: np.ndarray, kind: np.ndarray, params: np.ndarray, spec: PassSpec) -> np.ndarray:
    """P(Y=1) of pipelines ``kind`` (``none``/``platt``/``beta``, one per column of ``t``) with ``params`` (K x 3)."""
    x = calibrator_input(t, spec)
    p = np.empty_like(t)
    none, platt, beta = (kind == name for name in ("none", "platt", "beta"))
    p[:, none] = np.clip(expit(t[:, none]), spec.eps, 1.0 - spec.eps)
    p[:, platt] = expit(params[platt, 0] * platt_input(x[:, platt], spec) + params[platt, 1])
    log_s, log_1ms = beta_logs(x[:, beta], spec)
    p[:, beta] = expit(params[beta, 0] * log_s - params[beta, 1] * log_1ms + params[beta, 2])
    return p


def metric_sums(p: np.ndarray, y: np.ndarray, spec: PassSpec, count: np.ndarray | None = None) -> np.ndarray:
    """Per column of ``p``: items, NLL, Brier, correctness sums, then the ``n_bins`` ECE gap sums (weighted by ``count``)."""
    q = np.clip(p, spec.eps, 1.0 - spec.eps)
    nll = -np.log(np.where(y == 1, q, 1.0 - q))  # = -(xlogy(y, q) + xlogy(1 - y, 1 - q)) for binary y, one log
    correct = correctness(np.broadcast_to(y, p.shape), p)
    conf = np.maximum(p, 1.0 - p)
    gap, sq = correct - conf, (p - y) ** 2
    n = np.full(p.shape[1], float(p.shape[0]))
    if count is not None:
        nll, correct, gap, sq, n = (
            nll * count,
            correct * count,
            gap * count,
            sq * count,
            np.full(p.shape[1], count.sum()),
        )
    k = p.shape[1]
    flat = (bin_index(conf, spec.n_bins) + spec.n_bins * np.arange(k)).ravel()  # one bincount over (bin, column)
    gaps = np.bincount(flat, weights=gap.ravel(), minlength=spec.n_bins * k).reshape(k, spec.n_bins)
    head = np.stack([n, nll.sum(axis=0), sq.sum(axis=0), correct.sum(axis=0)], axis=1)
    return np.concatenate([head, gaps], axis=1)


def counts_kernel(votes: np.ndarray, labels: np.ndarray, keys: np.ndarray, spec: PassSpec) -> Partial:
    """Calibration-side ``n_cal[r]``, ``n_pos[r]``, ``n_votes[r, j]``, ``n_correct[r, j]`` (flattened, in that order).

    The counts of :func:`judgecal_dist.methods.aggregation.votes.count_judge_votes` on every replicate's calibration part at
    once: a ``R x n`` membership matrix times ``n x J`` indicators (exact in float64 below 2**53).
    """
    mask = calibration_mask(keys, spec.seeds, spec.fraction).astype(np.float64)
    y = labels.astype(np.float64)
    voted = (votes >= 0).astype(np.float64)
    correct = (votes == labels[:, None]).astype(np.float64)
    sums = [mask.sum(axis=1), mask @ y, (mask @ voted).ravel(), (mask @ correct).ravel()]
    return Partial(np.concatenate(sums))


class _Side:
    """Calibration-side rows of one replicate in one batch: labels ``y`` and the inputs ``x`` of its columns."""

    def __init__(self, y: np.ndarray, x: np.ndarray, spec: PassSpec) -> None:
        self.y, self.x, self.spec = y, x, spec
        self._derived: dict[str, np.ndarray] = {}

    def derived(self, name: str) -> np.ndarray:
        """``u`` (Platt's input), ``log_s`` or ``log_1ms`` (beta's), computed once."""
        if name not in self._derived:
            if name == "u":
                self._derived["u"] = platt_input(self.x, self.spec)
            else:
                self._derived["log_s"], self._derived["log_1ms"] = beta_logs(self.x, self.spec)
        return self._derived[name]

    @property
    def nbytes(self) -> int:
        return self.y.nbytes + self.x.nbytes + sum(a.nbytes for a in self._derived.values() if a is not self.x)


_CACHE: OrderedDict[tuple[str, bytes], dict[int, _Side]] = OrderedDict()


def _digest(*arrays: np.ndarray) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(np.ascontiguousarray(a).data)
    return h.digest()


def _evict(keep: tuple[str, bytes]) -> None:
    budget = CACHE_MB * 2**20
    for key in [k for k in _CACHE if k[0] != keep[0]]:  # another evaluation's entries are garbage now
        del _CACHE[key]
    while len(_CACHE) > 1 and sum(s.nbytes for e in _CACHE.values() for s in e.values()) > budget:
        oldest = next(k for k in _CACHE if k != keep)
        del _CACHE[oldest]


def calibration_side(
    votes: np.ndarray, labels: np.ndarray, keys: np.ndarray, spec: PassSpec, cols: Columns
) -> dict[int, _Side]:
    """Per replicate: its calibration-side rows' labels and calibrator inputs of all its columns (cached)."""
    key = (cols.token, _digest(votes, labels, keys))
    if cols.token and key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    reps = np.unique(cols.replicate)
    mask = calibration_mask(keys, [spec.seeds[r] for r in reps], spec.fraction)
    of_rep = [np.flatnonzero(cols.replicate == r) for r in reps]
    ys: list[list[np.ndarray]] = [[] for _ in reps]
    xs: list[list[np.ndarray]] = [[] for _ in reps]
    for chunk in row_chunks(len(keys), len(cols.replicate)):
        t_all = cols.prior_logit + signed_votes(votes[chunk]) @ cols.weights
        for i, which in enumerate(of_rep):
            rows = np.flatnonzero(mask[i, chunk])
            ys[i].append(labels[chunk][rows].astype(np.float64))
            xs[i].append(calibrator_input(t_all[np.ix_(rows, which)], spec))
    sides = {int(r): _Side(np.concatenate(ys[i])[:, None], np.concatenate(xs[i]), spec) for i, r in enumerate(reps)}
    if cols.token and CACHE_MB > 0:
        _CACHE[key] = sides
        _evict(key)
    return sides


def ranges_kernel(votes: np.ndarray, labels: np.ndarray, keys: np.ndarray, spec: PassSpec, cols: Columns) -> Partial:
    """Per column and class (B, A): min and max of the calibrator input on the calibration side.

    Enough to decide every degenerate case of the in-memory calibrators (constant scores, a threshold that
    separates the classes). ``min``/``max`` are ``K x 2`` flattened (``+inf``/``-inf`` where a class is absent).
    Computing them fills the calibration-side cache that the fit passes read.
    """
    k = cols.weights.shape[1]
    lo, hi = np.full((k, 2), np.inf), np.full((k, 2), -np.inf)
    if k:
        for r, side in calibration_side(votes, labels, keys, spec, cols).items():
            which = np.flatnonzero(cols.replicate == r)
            for cls in (0, 1):
                sel = side.y[:, 0] == cls
                if sel.any():
                    lo[which, cls] = side.x[sel].min(axis=0)
                    hi[which, cls] = side.x[sel].max(axis=0)
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
    :data:`PLATT_STATS` sums (:func:`platt_sums`), per beta request :data:`BETA_STATS` (:func:`beta_sums`).
    No penalty: the driver adds it once.
    """
    out_platt, out_beta = np.zeros((len(platt), PLATT_STATS)), np.zeros((len(beta), BETA_STATS))
    if not len(platt) + len(beta):
        return Partial(np.empty(0))
    sides = calibration_side(votes, labels, keys, spec, cols)
    position = cols.position
    for requests, out, kind in ((platt, out_platt, "platt"), (beta, out_beta, "beta")):
        if not requests:
            continue
        req_cols = np.array([r[0] for r in requests], dtype=np.intp)
        weight = np.array([r[1] for r in requests])
        theta = np.array([r[2:] for r in requests], dtype=np.float64)
        rep_of_req = cols.replicate[req_cols]
        for r in np.unique(rep_of_req):
            which = np.flatnonzero(rep_of_req == r)
            side, pos = sides[int(r)], position[req_cols[which]]
            if kind == "platt":
                sums = platt_sums(side.derived("u")[:, pos], side.y, theta[which])
            else:
                sums = beta_sums(side.derived("log_s")[:, pos], side.derived("log_1ms")[:, pos], side.y, theta[which])
            out[which] += weight[which, None] * sums
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
    out = np.zeros((len(fitted), METRIC_STATS + spec.n_bins))
    if not fitted:
        return Partial(out.ravel())
    req_cols = np.array([f[0] for f in fitted], dtype=np.intp)
    params = np.array([f[2:] for f in fitted], dtype=np.float64)
    kind = np.array([f[1] for f in fitted])
    rep_of_req = cols.replicate[req_cols]
    reps = np.unique(rep_of_req)
    mask = calibration_mask(keys, [spec.seeds[r] for r in reps], spec.fraction)
    needed, inverse = np.unique(req_cols, return_inverse=True)
    for chunk in row_chunks(len(keys), len(needed)):
        t_all = cols.prior_logit[needed] + signed_votes(votes[chunk]) @ cols.weights[:, needed]
        for i, r in enumerate(reps):
            which = np.flatnonzero(rep_of_req == r)
            rows = np.flatnonzero(~mask[i, chunk])
            t = t_all[np.ix_(rows, inverse[which])]
            p = calibrated(t, kind[which], params[which], spec)
            out[which] += metric_sums(p, labels[chunk][rows].astype(np.int64)[:, None], spec)
    return Partial(out.ravel())
