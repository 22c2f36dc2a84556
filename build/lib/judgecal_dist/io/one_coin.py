r"""The one-coin panel generator of spec 000 §5.6(b), with missing-not-at-random abstention.

Model. :math:`Y_i \sim \mathrm{Bernoulli}(\pi)`; an item difficulty :math:`d_i \sim N(0, \sigma_d^2)`
(:math:`\sigma_d = 0`: none); judge :math:`j` with accuracy :math:`p_j` (values below 1/2 allowed) is right with
probability

.. math:: P(V_{ij} = Y_i \mid d_i) = \sigma\big(\mathrm{logit}\,p_j - d_i\big)

(the 2PL of spec §3.7 with unit discrimination, so :math:`p_j` is exact when :math:`\sigma_d = 0`); with
``family_corr`` :math:`\rho_f > 0`, a judge copies its family's common correctness draw with probability
:math:`\rho_f` (errors correlated within a family). The verdict is then missing with probability

* ``missing="mcar"``: :math:`m_j`, independent of everything;
* ``missing="label"``: :math:`m_j^{(y)}` given :math:`Y_i = y` (spec: "missing probability depending on
  :math:`Y`"), from ``missing_rate`` (class 0) and ``missing_rate_positive`` (class 1);
* ``missing="difficulty"``: :math:`\sigma(\mathrm{logit}\,m_j + \gamma d_i)` with :math:`\gamma` =
  ``mnar_strength`` :math:`> 0`: judges abstain more on hard items, so the observed accuracy exceeds
  :math:`p_j`, and the skipped votes are exactly the ones that would have been wrong most often.

:func:`simulate_one_coin` returns arrays (for theory tests); :func:`write_one_coin_panel` writes the long verdict,
label and judge tables as an ingested dataset, so the whole pipeline, Spark included, runs on it.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
.. [2] D. B. Rubin. Inference and missing data. Biometrika 63(3):581-592, 1976 (MCAR / MAR / MNAR).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from scipy.special import expit, logit

from judgecal_dist.errors import ConfigError
from judgecal_dist.io.writer import DatasetWriter

__all__ = ["MISSING_MODES", "OneCoinPanel", "simulate_one_coin", "write_one_coin_panel"]

MISSING_MODES = ("mcar", "label", "difficulty")


@dataclass(frozen=True)
class OneCoinPanel:
    """A simulated panel: votes (1 = A, 0 = B, -1 = missing), labels, and the generator's truth."""

    votes: npt.NDArray[np.int8]
    labels: npt.NDArray[np.int8]
    difficulty: npt.NDArray[np.float64]
    accuracy: npt.NDArray[np.float64]
    #: Probability that each (item, judge) verdict is missing, as the generator drew it.
    missing_prob: npt.NDArray[np.float64]
    families: npt.NDArray[np.int64]


def _per_judge(value: float | npt.ArrayLike, n_judges: int, name: str) -> npt.NDArray[np.float64]:
    arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (n_judges,)).copy()
    if not ((arr >= 0) & (arr < 1)).all():
        raise ConfigError(f"{name}: each missing rate must be in [0, 1), got {arr.tolist()[:5]}")
    return arr


def simulate_one_coin(
    n_items: int,
    accuracy: npt.ArrayLike,
    *,
    seed: int = 0,
    prior: float = 0.5,
    difficulty_sd: float = 0.0,
    missing: str = "mcar",
    missing_rate: float | npt.ArrayLike = 0.0,
    missing_rate_positive: float | npt.ArrayLike | None = None,
    mnar_strength: float = 1.0,
    families: npt.ArrayLike | None = None,
    family_corr: float = 0.0,
) -> OneCoinPanel:
    """Draw a one-coin panel (model in the module docstring); the same seed and arguments give the same panel.

    Parameters
    ----------
    n_items : int
        Items.
    accuracy : array-like of shape (J,)
        :math:`p_j \\in (0, 1)`, values below 1/2 allowed.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``.
    prior : float, default 0.5
        :math:`\\pi = P(Y = 1)`.
    difficulty_sd : float, default 0.0
        :math:`\\sigma_d` of the item difficulties (logit scale).
    missing : {"mcar", "label", "difficulty"}, default "mcar"
        Missingness mechanism.
    missing_rate : float or array-like, default 0.0
        :math:`m_j` (for ``"label"``: the rate given :math:`Y = 0`).
    missing_rate_positive : float or array-like, optional
        ``"label"`` only: the rate given :math:`Y = 1` (default: ``missing_rate``, i.e. MCAR).
    mnar_strength : float, default 1.0
        :math:`\\gamma` of ``"difficulty"``; needs ``difficulty_sd > 0`` to have any effect.
    families : array-like of int, optional
        Family index per judge (default: every judge its own family).
    family_corr : float, default 0.0
        :math:`\\rho_f`, the probability of copying the family's common correctness draw.

    Returns
    -------
    OneCoinPanel

    Raises
    ------
    ConfigError
        If a size, probability or mode is out of range.
    """
    p = np.asarray(accuracy, dtype=np.float64)
    n_judges = p.size
    if n_items < 1 or n_judges < 1 or not ((p > 0) & (p < 1)).all():
        raise ConfigError(f"n_items >= 1 and accuracies in (0, 1) needed, got {n_items}, {p.tolist()[:5]}")
    if not 0.0 < prior < 1.0 or difficulty_sd < 0 or not 0.0 <= family_corr <= 1.0:
        raise ConfigError(
            f"prior in (0, 1), difficulty_sd >= 0, family_corr in [0, 1]; got {prior}, {difficulty_sd}, {family_corr}"
        )
    if missing not in MISSING_MODES:
        raise ConfigError(f"missing: must be one of {list(MISSING_MODES)}, got {missing!r}")
    fam = np.arange(n_judges) if families is None else np.asarray(families, dtype=np.int64)
    if fam.shape != (n_judges,):
        raise ConfigError(f"families: expected one family index per judge ({n_judges}), got shape {fam.shape}")
    rng = np.random.default_rng(seed)
    labels = (rng.random(n_items) < prior).astype(np.int8)
    d = rng.normal(0.0, difficulty_sd, n_items) if difficulty_sd > 0 else np.zeros(n_items)
    p_right = expit(logit(p)[None, :] - d[:, None])  # (n, J)
    u_own = rng.random((n_items, n_judges))
    u_family = rng.random((n_items, int(fam.max()) + 1))[:, fam]
    copy = rng.random((n_items, n_judges)) < family_corr
    right = np.where(copy, u_family, u_own) < p_right  # a copier shares its family's uniform draw
    votes = np.where(right, labels[:, None], 1 - labels[:, None]).astype(np.int8)
    m0 = _per_judge(missing_rate, n_judges, "missing_rate")
    if missing == "mcar":
        m = np.broadcast_to(m0, (n_items, n_judges))
    elif missing == "label":
        m1 = (
            m0
            if missing_rate_positive is None
            else _per_judge(missing_rate_positive, n_judges, "missing_rate_positive")
        )
        m = np.where(labels[:, None] == 1, m1[None, :], m0[None, :])
    else:
        m = expit(logit(np.clip(m0, 1e-12, None))[None, :] + mnar_strength * d[:, None])
    votes[rng.random((n_items, n_judges)) < m] = -1
    return OneCoinPanel(
        votes=votes, labels=labels, difficulty=d, accuracy=p, missing_prob=np.asarray(m, dtype=float), families=fam
    )


def write_one_coin_panel(
    dest: str,
    panel: OneCoinPanel,
    *,
    dataset: str = "one_coin",
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``panel`` as an ingested dataset at ``dest`` (a missing verdict is a row with a null verdict).

    Returns the report written to ``_ingest.json`` (per judge: ``judge_id``, ``family``, ``accuracy``).
    """
    n, n_judges = panel.votes.shape
    item_ids = np.array([f"item-{i:07d}" for i in range(n)], dtype=object)
    judge_ids = [f"judge-{j:03d}" for j in range(n_judges)]
    rows_i, rows_j = np.indices(panel.votes.shape).reshape(2, -1)
    code = panel.votes[rows_i, rows_j]
    verdict = pa.array(np.where(code == 1, "A", "B").tolist(), pa.string(), mask=code < 0)
    verdicts = pa.table(
        {
            "dataset": pa.repeat(dataset, rows_i.size),
            "item_id": pa.array(item_ids[rows_i].tolist(), pa.string()),
            "group_id": pa.array(item_ids[rows_i].tolist(), pa.string()),
            "judge_id": pa.array([judge_ids[j] for j in rows_j], pa.string()),
            "sample": pa.array(np.zeros(rows_i.size, dtype=np.int32)),
            "verdict": verdict,
            "score": pa.nulls(rows_i.size, pa.float64()),
            "rubric": pa.nulls(rows_i.size, pa.string()),
            "input_tokens": pa.nulls(rows_i.size, pa.int64()),
            "output_tokens": pa.nulls(rows_i.size, pa.int64()),
        }
    )
    families = [f"family-{f}" for f in panel.families]
    with DatasetWriter(dest, overwrite=overwrite, storage_options=storage_options) as writer:
        writer.write_verdicts(verdicts)
        labels = np.where(panel.labels == 1, "A", "B").tolist()
        writer.write_table(
            "labels",
            pa.table(
                {
                    "dataset": pa.repeat(dataset, n),
                    "item_id": pa.array(item_ids.tolist(), pa.string()),
                    "label": pa.array(labels, pa.string()),
                }
            ),
        )
        writer.write_table("judges", pa.table({"judge_id": judge_ids, "family": families}))
        report = {
            "format": "one_coin",
            "datasets": [dataset],
            "judges": [
                {"judge_id": j, "family": f, "accuracy": float(a)}
                for j, f, a in zip(judge_ids, families, panel.accuracy, strict=True)
            ],
        }
        return dict(writer.commit(report))
