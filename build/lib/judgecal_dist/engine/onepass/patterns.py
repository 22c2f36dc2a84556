r"""Vote-pattern compression of small panels: one pass gives every top-k pipeline's fit and metrics exactly.

The one-coin log-odds of a panel of ``k`` judges depend on an item only through its votes on those judges, one
of :math:`3^k` patterns (A, B or missing each). Per replicate and panel one pass counts the items of each
(split side, label, pattern) cell (:func:`patterns_kernel`); the calibrators' objectives and the evaluation
metrics are then sums over cells weighted by their counts, the same sums as over the items in another order, so
the driver fits Platt and beta with the in-memory optimisers on a few hundred weighted points and no further
pass (:class:`PatternTable`). Cells are indexed by the vote codec's base-3 pattern
:math:`c = \sum_m (v_m + 1) 3^m` over the panel's judges in column order
(:func:`judgecal_dist.engine.votes.codec.vote_pattern_digits`, :func:`~judgecal_dist.engine.votes.codec.vote_pattern_votes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from judgecal_dist.engine.onepass.kernels import (
    Partial,
    PassSpec,
    beta_logs,
    beta_sums,
    calibrated,
    calibrator_input,
    metric_sums,
    platt_input,
    platt_sums,
    row_chunks,
)
from judgecal_dist.engine.votes.codec import vote_pattern_digits, vote_pattern_votes
from judgecal_dist.io.schema import VOTE_A, VOTE_B
from judgecal_dist.splits import calibration_mask

__all__ = ["MAX_PATTERN_PANEL_JUDGES", "PatternColumns", "PatternTable", "patterns_kernel", "pattern_log_odds"]

#: Panels of at most this many judges are compressed to vote-pattern counts (3**10 = 59,049 codes x 4 cells per
#: panel and replicate): a memory bound of the one-pass engine, not a limit of the codes (those of up to 15 judges
#: are exact in the float32 product below; verdict patterns hold 31, ``MAX_VERDICT_PATTERN_JUDGES``).
MAX_PATTERN_PANEL_JUDGES = 10


@dataclass(frozen=True)
class PatternColumns:
    """Pattern columns: ``powers`` (J x P, :math:`3^m` for the panel's m-th judge, else 0), replicate and size."""

    powers: npt.NDArray[np.float32]
    replicate: npt.NDArray[np.intp]
    n_codes: npt.NDArray[np.int64]

    @classmethod
    def of(cls, panels: Sequence[tuple[int, npt.NDArray[np.intp]]], n_judges: int) -> PatternColumns:
        """From ``(replicate, sorted judge columns)`` per pattern column."""
        powers = np.zeros((n_judges, len(panels)), dtype=np.float32)
        for p, (_, cols) in enumerate(panels):
            powers[cols, p] = 3.0 ** np.arange(len(cols))  # exact in float32: codes < 3**10 < 2**24
        sizes = np.array([3 ** len(cols) for _, cols in panels], dtype=np.int64)
        return cls(powers, np.array([r for r, _ in panels], dtype=np.intp), sizes)

    @property
    def offsets(self) -> npt.NDArray[np.int64]:
        """Start of each column's ``2 sides x 2 labels x n_codes`` cells in the flat table (and the total)."""
        return np.concatenate([[0], np.cumsum(4 * self.n_codes)])


def patterns_kernel(
    votes: np.ndarray, labels: np.ndarray, keys: np.ndarray, spec: PassSpec, pat: PatternColumns
) -> Partial:
    """Item counts per (column, side: calibration 0 / evaluation 1, label, pattern code), flattened."""
    offsets = pat.offsets
    if not len(pat.replicate):
        return Partial(np.zeros(0))
    reps, rep_index = np.unique(pat.replicate, return_inverse=True)
    mask = calibration_mask(keys, [spec.seeds[r] for r in reps], spec.fraction)
    out = np.zeros(int(offsets[-1]))
    for chunk in row_chunks(len(keys), len(pat.replicate)):
        codes = (vote_pattern_digits(votes[chunk]).astype(np.float32) @ pat.powers).astype(np.int64)  # exact
        side = (~mask[rep_index][:, chunk]).T.astype(np.int64)  # 0 = calibration, 1 = evaluation
        cell = (2 * side + labels[chunk, None].astype(np.int64)) * pat.n_codes + codes
        for p in range(len(pat.replicate)):  # one small bincount per column: never a table-sized temporary
            out[offsets[p] : offsets[p + 1]] += np.bincount(cell[:, p], minlength=int(offsets[p + 1] - offsets[p]))
    return Partial(out)


def pattern_log_odds(codes: np.ndarray, weights: np.ndarray, prior_logit: float) -> np.ndarray:
    """Log-odds of pattern ``codes`` of a panel with one-coin ``weights`` (in column order)."""
    votes = vote_pattern_votes(codes, len(weights))
    z = np.where(votes == VOTE_A, 1.0, np.where(votes == VOTE_B, -1.0, 0.0))
    return np.asarray(prior_logit + z @ weights, dtype=np.float64)


@dataclass
class PatternTable:
    """One pattern column's non-empty cells: per side, the log-odds, labels and item counts of its cells."""

    t: tuple[np.ndarray, np.ndarray]
    y: tuple[np.ndarray, np.ndarray]
    count: tuple[np.ndarray, np.ndarray]

    @classmethod
    def of(cls, cells: np.ndarray, weights: np.ndarray, prior_logit: float) -> PatternTable:
        """From the column's ``2 x 2 x n_codes`` counts and its one-coin weights and prior log-odds."""
        t, y, count = [], [], []
        for side in (0, 1):
            label, code = np.nonzero(cells[side])
            t.append(pattern_log_odds(code, weights, prior_logit))
            y.append(label.astype(np.float64)[:, None])
            count.append(cells[side][label, code][:, None])
        return cls((t[0], t[1]), (y[0], y[1]), (count[0], count[1]))

    def ranges(self, spec: PassSpec) -> tuple[np.ndarray, np.ndarray]:
        """Per class (B, A): min and max of the calibration-side calibrator input (as :func:`ranges_kernel`)."""
        x = calibrator_input(self.t[0], spec)
        lo, hi = np.full(2, np.inf), np.full(2, -np.inf)
        for cls_ in (0, 1):
            sel = self.y[0][:, 0] == cls_
            if sel.any():
                lo[cls_], hi[cls_] = x[sel].min(), x[sel].max()
        return lo, hi

    def evaluator(self, spec: PassSpec) -> Callable[[Any], np.ndarray]:
        """``evaluate(request)`` answering a fit's requests (as :func:`objective_kernel`) from the cells."""
        x = calibrator_input(self.t[0], spec)[:, None]
        u = platt_input(x, spec)
        log_s, log_1ms = beta_logs(x, spec)
        y, count = self.y[0], self.count[0]

        def evaluate(request: Any) -> np.ndarray:
            kind, _, weight, theta = request
            theta = np.asarray(theta, dtype=np.float64)[None, :]
            if kind == "platt":
                return weight * platt_sums(u, y, theta, count)[0]
            return weight * beta_sums(log_s, log_1ms, y, theta, count)[0]

        return evaluate

    def metrics(self, kinds: Sequence[str], params: np.ndarray, spec: PassSpec) -> np.ndarray:
        """Evaluation-side metric sums (as :func:`metrics_kernel`) of the pipelines ``kinds`` with ``params``."""
        t = np.repeat(self.t[1][:, None], len(kinds), axis=1)
        p = calibrated(t, np.asarray(kinds), np.asarray(params, dtype=np.float64), spec)
        return metric_sums(p, self.y[1].astype(np.int64), spec, self.count[1])
