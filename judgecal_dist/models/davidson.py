r"""``judgecal.davidson/v2``: Davidson aggregation of a judge's repeated verdicts with ties, as data.

One fitted :class:`~judgecal_dist.methods.repeated.davidson.DavidsonAggregator` per judge (its tie link's
parameters), the smoothing ``alpha``/``kappa``, the decision rule (``mae``: the median of the fitted label
distribution, ``accuracy``: its mode) and the budget ``n``: an item's verdicts at samples ``0 .. n-1`` are tallied
into counts ``(A, tie, B)`` (by :mod:`judgecal_dist.scoring.tables` with the engine's vote-count job, in memory or
on Spark), then every judge's estimator gives ``P(A), P(tie), P(B)`` and the verdict. With
``pool_orders`` the ``<judge>/ab`` and ``<judge>/ba`` verdicts are pooled first, as the itc study pooled them; with
``votes: score-pairs`` the verdicts are the response pairs the itc study derives from an rb2-k8 score dataset
(:func:`judgecal_dist.io.pairs.derived_pairs`, the same code and orientation seed).

:func:`from_document` rebuilds the estimator class with the fitted numbers, so scoring runs the code the study
evaluated (:meth:`DavidsonModel.predict` equals the estimator's own ``predict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from judgecal_dist.engine.votes.codec import codes_of, outcome_signs, verdicts_of_signs
from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import VERDICT_CODES
from judgecal_dist.methods.repeated.davidson import DavidsonAggregator
from judgecal_dist.models.documents import DavidsonDoc

__all__ = ["FORMAT", "KIND", "DavidsonModel", "to_document", "from_document", "davidson_from_estimators"]

FORMAT = "judgecal.davidson/v2"
KIND = "davidson"
_PARAMS = ("beta", "eta0", "gamma")


@dataclass(frozen=True)
class DavidsonModel:
    """Fitted Davidson aggregators per judge, ready to score vote counts or a verdict table.

    Attributes
    ----------
    judge_ids : list of str
    estimators : dict of str to DavidsonAggregator
        One per judge (fitted attributes rebuilt from the document).
    n : int
        Samples read per item (``0 .. n-1``).
    pool_orders : bool
        Pool ``<judge>/ab`` and ``<judge>/ba`` verdicts into ``<judge>`` first.
    votes : {"verdicts", "score-pairs"}
        Count the data's verdicts, or the pairs derived from pointwise scores with ``orientation_seed``.
    orientation_seed : int
    method, source, digest : str
    document : dict
    """

    judge_ids: list[str]
    estimators: dict[str, DavidsonAggregator]
    n: int
    pool_orders: bool = False
    votes: str = "verdicts"
    orientation_seed: int = 0
    method: str = "davidson"
    source: str = ""
    digest: str = ""
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    kind = KIND

    @property
    def name(self) -> str:
        return f"{self.method} @ n={self.n}"

    def predict_proba(self, judge_id: str, counts: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``P(B), P(tie), P(A)`` per item from counts ``(A, tie, B)`` of ``judge_id``."""
        return self.estimators[judge_id].predict_proba(counts)

    def predict(self, judge_id: str, counts: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The decision per item in {-1 (B), 0 (tie), +1 (A)}."""
        return self.estimators[judge_id].predict(counts)

    # -- score's table interface (judgecal_dist.models.interface.TableModel) -----------------------------------
    #: What score reads for this kind: per-item vote counts of samples ``0 .. n-1`` (the engine's vote-count job,
    #: after :meth:`check_data`; pooled or derived pairs as the document says), scored by :meth:`score_counts`.
    reads = "vote_counts"

    def check_data(self, data_url: str, pointwise: bool) -> None:
        """Refuse data whose votes are not what the model was fitted on (scores vs verdicts), naming what to pass."""
        if pointwise and self.votes == "verdicts":
            raise InputError(
                f"{data_url}: holds pointwise scores (rb2-k8) but the model ({self.source or self.name}) counts A/B/tie "
                "verdicts: pass a dataset with verdicts, or export the model with the itc study on this dataset "
                "(it then records votes: score-pairs and scoring derives the pairs the same way)"
            )
        if not pointwise and self.votes == "score-pairs":
            raise InputError(
                f"{data_url}: holds A/B/tie verdicts but the model ({self.source or self.name}) was fitted on response "
                "pairs derived from pointwise scores: pass the rb2-k8 score dataset it was exported from (ingested "
                "with judgecal ingest --format rb2-k8)"
            )

    def score_counts(self, counts: pd.DataFrame, labels: pd.DataFrame | None = None) -> pa.Table:
        """Scored rows of vote counts (``dataset, item_id, judge_id, n_A, n_tie, n_B``), sorted by key."""
        counts = counts.sort_values(["dataset", "judge_id", "item_id"], kind="stable").reset_index(drop=True)
        proba = np.empty((len(counts), 3))
        action = np.zeros(len(counts), dtype=np.int64)
        for judge, rows in counts.groupby("judge_id", sort=False).indices.items():
            c = counts.loc[rows, ["n_A", "n_tie", "n_B"]].to_numpy(np.int64)
            proba[rows], action[rows] = self.predict_proba(str(judge), c), self.predict(str(judge), c)
        label = pd.Series([None] * len(counts), dtype=object)
        if labels is not None and len(counts):
            label = counts[["dataset", "item_id"]].merge(labels, on=["dataset", "item_id"], how="left")["label"]
        return pa.table(
            {
                "dataset": pa.array(counts["dataset"].astype(str), pa.string()),
                "item_id": pa.array(counts["item_id"].astype(str), pa.string()),
                "judge_id": pa.array(counts["judge_id"].astype(str), pa.string()),
                "label": pa.array(label.where(label.notna(), None).tolist(), pa.string()),
                "n_A": pa.array(counts["n_A"].to_numpy(np.int64)),
                "n_tie": pa.array(counts["n_tie"].to_numpy(np.int64)),
                "n_B": pa.array(counts["n_B"].to_numpy(np.int64)),
                "p_A": pa.array(proba[:, 2]),
                "p_tie": pa.array(proba[:, 1]),
                "p_B": pa.array(proba[:, 0]),
                "verdict": pa.array(verdicts_of_signs(action), pa.string()),
            }
        )

    def summaries(self, table: pa.Table) -> dict[str, pd.DataFrame]:
        """Per dataset and judge: items, labelled items, accuracy and MAE of the verdicts on the labelled ones."""
        frame = table.select(["dataset", "judge_id", "label", "verdict"]).to_pandas()
        # outcome signs (A +1, tie 0, B -1; NaN for a null), so that the error counts a tie as half a miss
        y = pd.Series(outcome_signs(frame["label"]), index=frame.index)
        yhat = pd.Series(outcome_signs(frame["verdict"]), index=frame.index)
        tie = codes_of(frame["verdict"]) == VERDICT_CODES["tie"]
        frame = frame.assign(labelled=y.notna(), correct=(y == yhat) & y.notna(), abs_err=(y - yhat).abs(), tie=tie)
        out = frame.groupby(["dataset", "judge_id"], sort=True).agg(
            n_items=("verdict", "size"),
            n_labelled=("labelled", "sum"),
            correct=("correct", "sum"),
            mae=("abs_err", "mean"),
            pred_tie_rate=("tie", "mean"),
        )
        out["accuracy"] = out["correct"] / out["n_labelled"].where(out["n_labelled"] > 0)
        return {"judges": out.drop(columns="correct").reset_index()}


# -- estimators <-> document ---------------------------------------------------------------------------------------
def to_document(
    estimators: Mapping[str, DavidsonAggregator],
    *,
    n: int,
    method: str = "davidson",
    pool_orders: bool = False,
    votes: str = "verdicts",
    orientation_seed: int = 0,
    items: Mapping[str, int] | None = None,
    fitted_on: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``judgecal.davidson/v2`` document of fitted estimators (one per judge; same tie link and decision)."""
    if not estimators:
        raise ValueError("to_document: no fitted estimator")
    first = next(iter(estimators.values()))
    judges = []
    for judge, est in estimators.items():
        if (est.tie, est.decision, est.alpha, est.kappa) != (first.tie, first.decision, first.alpha, first.kappa):
            raise ValueError(f"to_document: judge {judge!r}: tie, decision, alpha and kappa must match every judge")
        judges.append(
            {"judge_id": str(judge), **{p: float(v) for p, v in est.coef_.items()}}
            | {"items": int((items or {}).get(judge, 0))}
        )
    return {
        "format": FORMAT,
        "name": f"{method} @ n={n}",
        "method": method,
        "tie": first.tie,
        "decision": first.decision,
        "alpha": float(first.alpha),
        "kappa": float(first.kappa),
        "n": int(n),
        "pool_orders": bool(pool_orders),
        "votes": votes,
        "orientation_seed": int(orientation_seed),
        "judges": judges,
        "fitted_on": dict(fitted_on or {}),
    }


def from_document(doc: DavidsonDoc, raw: dict[str, Any], *, source: str = "", digest: str = "") -> DavidsonModel:
    """Rebuild the fitted estimators of a validated document."""
    estimators = {}
    for judge in doc.judges:
        est = DavidsonAggregator(tie=doc.tie, decision=doc.decision, alpha=doc.alpha, kappa=doc.kappa)
        est.coef_ = {p: float(getattr(judge, p)) for p in _PARAMS if getattr(judge, p) is not None}
        estimators[judge.judge_id] = est
    return DavidsonModel(
        judge_ids=[j.judge_id for j in doc.judges],
        estimators=estimators,
        n=doc.n,
        pool_orders=doc.pool_orders,
        votes=doc.votes,
        orientation_seed=doc.orientation_seed,
        method=doc.method,
        source=source,
        digest=digest,
        document=raw,
    )


def davidson_from_estimators(estimators: Mapping[str, DavidsonAggregator], **kwargs: Any) -> DavidsonModel:
    """A :class:`DavidsonModel` of fitted estimators (its ``document`` filled, validated as a reader would)."""
    doc = to_document(estimators, **kwargs)
    return from_document(DavidsonDoc.model_validate(doc), doc)


if TYPE_CHECKING:  # mypy checks that the kind implements score's table interface
    from judgecal_dist.models.interface import TableModel

    _IMPLEMENTS: type[TableModel] = DavidsonModel
