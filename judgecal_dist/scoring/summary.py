r"""Per-dataset summaries of a scored table, from per-group sums, and a figure.

The sums are written once, as a kernel over scored item rows (:func:`sums_pandas`, :func:`model_rows_pandas`):
the in-process runner applies it to the whole table, the Spark runner to each partition (:func:`sums_partition`,
:func:`model_rows_partition`) and the engine adds the partials per group
(:func:`judgecal_dist.engine.jobs.scorer.partition_sums`); :func:`finalise` turns either into rates.

The calibrated win rate of a group is the mean calibrated :math:`P(A)` of its items, :math:`\bar p = \frac1n
\sum_i \hat p_i`: under calibration, the expected share of its items where A is better. It is a mean of
probabilities, not a count of successes, so its interval is the normal interval of a mean over the sampled items,

.. math::

    \bar p \pm z \frac{s}{\sqrt n}, \qquad s^2 = \frac{1}{n-1}\Big(\sum_i \hat p_i^2 - n \bar p^2\Big),

clipped to [0, 1] (``None`` below two items). A binomial interval (Wilson's) would treat :math:`\bar p` as a share
of :math:`n` coin flips and is wider whenever the probabilities differ from item to item; it belongs to counts
only. Per response model (items carrying
``model_a``/``model_b`` in the ``items`` table) a model's win rate averages :math:`\hat p_i` where it is A and
:math:`1 - \hat p_i` where it is B. Items without a vote from any of the model's judges have no :math:`\hat p_i`:
they are counted (``items_without_votes``) and left out of every rate, interval and metric, so a table the model
cannot read gives no win rate rather than the class prior. Labelled items also give accuracy (half credit at exactly 1/2), NLL (clipped
at ``eps``), Brier and the empirical coverage of each conformal set, as in :mod:`judgecal_dist.stats.metrics`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from statistics import NormalDist

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.engine.votes.codec import codes_of
from judgecal_dist.io.figures import png, pyplot
from judgecal_dist.io.schema import VOTE_A, VOTE_B
from judgecal_dist.scoring.kernel import set_column
from judgecal_dist.stats.metrics import pointwise_nll

__all__ = [
    "set_column",
    "item_terms",
    "frame_of",
    "sums_pandas",
    "sums_schema",
    "sums_partition",
    "finalise",
    "MODEL_KEYS",
    "model_rows_pandas",
    "model_rows_schema",
    "model_rows_partition",
    "figure",
]


def _sum_names(alphas: Sequence[float]) -> list[str]:
    per_alpha = [f"{kind}_{set_column(a)}" for a in alphas for kind in ("size", "covered")]
    return [
        "n",
        "n_scored",
        "n_in_calibration",
        "sum_p",
        "sum_p2",
        "n_pred_a",
        "n_labelled",
        "sum_correct",
        "sum_nll",
        "sum_brier",
        *per_alpha,
    ]


def item_terms(items: pd.DataFrame, alphas: Sequence[float], eps: float) -> pd.DataFrame:
    """Per-item summands of the sums (pandas; the in-memory path), from the scored item columns."""
    scored = items["p"].notna().to_numpy()
    p = np.where(scored, items["p"].to_numpy(dtype=np.float64, na_value=np.nan), 0.5)
    label = codes_of(items["label"])
    labelled = ((label == VOTE_A) | (label == VOTE_B)) & scored
    y = (label == VOTE_A).astype(np.int64)
    terms = pd.DataFrame(
        {
            "n": 1,
            "n_scored": scored.astype(np.int64),
            "n_in_calibration": items["in_calibration"].eq(True).to_numpy().astype(np.int64),
            "sum_p": np.where(scored, p, 0.0),
            "sum_p2": np.where(scored, p * p, 0.0),
            "n_pred_a": (codes_of(items["verdict"]) == VOTE_A).astype(np.int64),
            "n_labelled": labelled.astype(np.int64),
        },
        index=items.index,
    )
    correct = np.where(p == 0.5, 0.5, ((p > 0.5) == (y == 1)).astype(np.float64))
    terms["sum_correct"] = np.where(labelled, correct, 0.0)
    terms["sum_nll"] = np.where(labelled, pointwise_nll(y, p, eps=eps), 0.0)
    terms["sum_brier"] = np.where(labelled, (p - y) ** 2, 0.0)
    for alpha in alphas:
        name = set_column(alpha)  # sizes and hits from :func:`frame_of`
        terms[f"size_{name}"] = np.where(scored, items[f"size_{name}"].to_numpy(), 0)
        terms[f"covered_{name}"] = np.where(labelled, items[f"covered_{name}"].to_numpy(), False).astype(np.int64)
    return terms


def frame_of(table: pa.Table) -> pd.DataFrame:
    """Scored item rows as pandas, each conformal set replaced by its size (``size_<set>``) and whether it holds
    the item's label (``covered_<set>``).

    Computed on the Arrow lists: as pandas objects (one numpy array per item) the sets cost a Python loop per item,
    about a second per million items (the kernels need only these two numbers of a set).
    """
    sets = [c for c in table.column_names if c.startswith("set_alpha_")]
    label = table.column("label").combine_chunks()
    frame = table.drop_columns(sets).to_pandas()
    for name in sets:
        lists = table.column(name).combine_chunks()
        parents = pc.list_parent_indices(lists).to_numpy()
        hit = pc.fill_null(pc.equal(pc.list_flatten(lists), label.take(parents)), False).to_numpy(zero_copy_only=False)
        frame[f"size_{name}"] = pc.fill_null(pc.list_value_length(lists), 0).to_numpy()
        frame[f"covered_{name}"] = np.bincount(parents[hit], minlength=len(frame)) > 0
    return frame


def sums_pandas(items: pd.DataFrame, by: list[str], alphas: Sequence[float], eps: float) -> pd.DataFrame:
    """Per-group sums of :func:`item_terms` (the in-memory path)."""
    terms = item_terms(items, alphas, eps)
    return pd.concat([items[by], terms], axis=1).groupby(by, as_index=False, sort=True).sum()


def sums_schema(by: Sequence[str], alphas: Sequence[float]) -> pa.Schema:
    """The Arrow schema of :func:`sums_pandas`' rows (group keys as strings, counts as longs, sums as doubles)."""
    return _partial_schema(by, _sum_names(alphas))


def _partial_schema(by: Sequence[str], names: Sequence[str]) -> pa.Schema:
    fields = [(c, pa.string()) for c in by]
    return pa.schema(fields + [(c, pa.float64() if c.startswith("sum_") else pa.int64()) for c in names])


def _partition_frame(batches: Iterator[pa.RecordBatch]) -> pd.DataFrame | None:
    table = pa.Table.from_batches(list(batches))
    return frame_of(table) if table.num_rows else None


def sums_partition(
    batches: Iterator[pa.RecordBatch], by: list[str], alphas: Sequence[float], eps: float
) -> Iterator[pa.RecordBatch]:
    """:func:`sums_pandas` over one partition of scored items (the Spark runner's kernel; the engine sums the
    partials per group)."""
    frame = _partition_frame(batches)
    if frame is not None:
        sums = sums_pandas(frame, by, alphas, eps)
        yield from pa.Table.from_pandas(sums, schema=sums_schema(by, alphas), preserve_index=False).to_batches()


def model_rows_pandas(items: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and response model: items played (``n``), scored (``n_scored``), the sum of its win
    probabilities ``sum_p`` (and of their squares, ``sum_p2``) and its predicted wins ``n_pred_a`` over the scored
    ones."""
    p, verdict = items["p"].astype(np.float64), codes_of(items["verdict"])
    sides = []
    for side, prob, wins in (("model_a", p, VOTE_A), ("model_b", 1.0 - p, VOTE_B)):
        sides.append(
            pd.DataFrame(
                {
                    "dataset": items["dataset"],
                    "model": items[side],
                    "p": prob,
                    "won": (verdict == wins).astype(np.int64),
                }
            )
        )
    return (
        pd.concat(sides, ignore_index=True)
        .assign(p2=lambda frame: frame["p"] ** 2)
        .groupby(["dataset", "model"], as_index=False, sort=True, observed=True)
        .agg(
            n=("won", "size"),
            n_scored=("p", "count"),
            sum_p=("p", "sum"),
            sum_p2=("p2", "sum"),
            n_pred_a=("won", "sum"),
        )
    )


#: The columns of :func:`model_rows_pandas`' rows after the keys.
_MODEL_SUMS = ["n", "n_scored", "sum_p", "sum_p2", "n_pred_a"]
MODEL_KEYS = ["dataset", "model"]


def model_rows_schema() -> pa.Schema:
    """The Arrow schema of :func:`model_rows_pandas`' rows."""
    return _partial_schema(MODEL_KEYS, _MODEL_SUMS)


def model_rows_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """:func:`model_rows_pandas` over one partition of scored items with ``model_a``/``model_b`` (the Spark
    runner's kernel; the engine sums the partials per dataset and model)."""
    frame = _partition_frame(batches)
    if frame is not None:
        sums = model_rows_pandas(frame)
        yield from pa.Table.from_pandas(sums, schema=model_rows_schema(), preserve_index=False).to_batches()


def finalise(sums: pd.DataFrame, alphas: Sequence[float], *, confidence: float = 0.95) -> pd.DataFrame:
    """Rates, intervals and labelled metrics from per-group sums, over the scored items only.

    ``n_items`` counts every item, ``items_without_votes`` those that could not be scored; a rate of a group
    without scored items is None, and so is the win rate's interval below two scored items.
    """
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)  # the standard library's: scipy.stats costs 0.3 s to import
    n = sums["n_scored"].to_numpy(dtype=np.float64)
    some = n > 0
    n_safe = np.where(some, n, 1.0)
    rate = sums["sum_p"].to_numpy(dtype=np.float64) / n_safe
    # sample variance of the item probabilities from the two sums; rounding can leave a tiny negative
    spread = np.maximum(sums["sum_p2"].to_numpy(dtype=np.float64) - n * rate**2, 0.0) / np.maximum(n - 1.0, 1.0)
    half = np.where(n > 1, z * np.sqrt(spread / n_safe), np.nan)
    keys = [c for c in sums.columns if c not in _sum_names(alphas)]
    out = sums[keys].copy()
    out["n_items"] = sums["n"].astype(np.int64)
    out["items_without_votes"] = (sums["n"] - sums["n_scored"]).astype(np.int64)
    if "n_in_calibration" in sums:
        out["items_in_calibration"] = sums["n_in_calibration"].astype(np.int64)

    def scored_only(values: np.ndarray) -> np.ndarray:
        return np.where(some, values, np.nan)

    out["win_rate"] = scored_only(rate)
    out["win_rate_ci_low"] = scored_only(np.clip(rate - half, 0.0, 1.0))
    out["win_rate_ci_high"] = scored_only(np.clip(rate + half, 0.0, 1.0))
    out["predicted_win_share"] = scored_only(sums["n_pred_a"].to_numpy() / n_safe)
    if "n_labelled" not in sums:
        return out
    for alpha in alphas:
        out[f"set_size_{set_column(alpha)[4:]}"] = scored_only(sums[f"size_{set_column(alpha)}"].to_numpy() / n_safe)
    n_lab = sums["n_labelled"].to_numpy(dtype=np.float64)
    out["n_labelled"] = sums["n_labelled"].astype(np.int64)
    per_labelled = {"accuracy": "sum_correct", "nll": "sum_nll", "brier": "sum_brier"} | {
        f"coverage_{set_column(a)[4:]}": f"covered_{set_column(a)}" for a in alphas
    }
    for name, column in per_labelled.items():
        values = sums[column].to_numpy(dtype=np.float64) / np.where(n_lab > 0, n_lab, 1.0)
        out[name] = pd.Series(values, dtype=object).where(n_lab > 0, None)
    return out


def figure(datasets: pd.DataFrame, models: pd.DataFrame | None) -> bytes:
    """PNG: calibrated win rate of A per dataset (and per response model when known), with 95% intervals."""
    panels = [("dataset", datasets)] + ([("model", models)] if models is not None and not models.empty else [])
    fig, axes = pyplot().subplots(1, len(panels), figsize=(5.5 * len(panels), 0.4 * max(len(datasets), 6) + 1.5))
    for ax, (key, table) in zip(np.atleast_1d(axes), panels, strict=True):
        table = table.head(40)
        labels = table[key].astype(str) if key == "dataset" else table["dataset"] + ": " + table["model"].astype(str)
        rate = table["win_rate"].to_numpy(dtype=float)
        err = np.vstack(
            [rate - table["win_rate_ci_low"].to_numpy(float), table["win_rate_ci_high"].to_numpy(float) - rate]
        )
        ax.errorbar(rate, np.arange(len(table)), xerr=err, fmt="o", capsize=3)
        ax.set_yticks(np.arange(len(table)), labels)
        ax.axvline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_xlim(0, 1)
        ax.set_xlabel("calibrated win rate (mean P(A); model: P(model wins))")
        ax.set_title(f"per {key} (95% interval of the mean over items)")
    return png(fig, dpi=110, tight_layout=True)
